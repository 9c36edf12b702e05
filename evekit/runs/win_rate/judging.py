"""The pairwise decisions: who is shown first, what each judge is asked, and its verdicts.

The judges themselves are an `evekit.judges.JudgePanel` of the "pairwise" kind (clients,
structured verdicts, abstentions); this module decides the positions and turns the panel's
verdicts about positions A/B back into verdicts about the two models.

Vocabulary: "a" and "b" are the two models of a comparison (model_a and model_b); "A" and "B"
are the two *positions* in the judge's prompt. Each question's position is random but fixed by
(seed, question), so reruns hit the cache and give the same numbers.

The columns of `results.csv` keep the two apart: `shown_first` / `shown_second` name the model
shown in position A / B (`a_shown_first`: model_a's answer was the first), `judge_said` is the judge's answer about positions ("A", "B" or "tie", as
shown), `winner` names the winning model (or "tie") and `winner_model` says which column holds it
("model_a", "model_b" or "tie").
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evekit.judges import JudgePanel, PairCase
from evekit.runs.win_rate.analysis import summarize
from evekit.runs.win_rate.params import ALPHA
from evekit.runs.win_rate.matching import Comparison, normalize_ws

__all__ = ["RESULT_COLUMNS", "ROLE", "SIDE", "a_shown_first", "judge_comparison", "run_judges", "judge_outcomes"]

RESULT_COLUMNS = [
    "comparison", "judge", "judge_model", "qid", "order", "question", "target", "model_a", "model_b",
    "answer_a", "answer_b", "doc_id_a", "doc_id_b", "shown_first", "shown_second", "a_shown_first", "judge_said",
    "winner", "winner_model", "rationale", "raw", "method", "error", "failed", "identical",
]

# The model's role ("a"/"b", internal) <-> the `winner_model` column ("model_a"/"model_b").
ROLE = {"a": "model_a", "b": "model_b", "tie": "tie", None: None}
SIDE = {v: k for k, v in ROLE.items()}


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def a_shown_first(question: str, seed: int) -> bool:
    """Whether model A's answer is shown in position A for this question.

    Random, but a pure function of (seed, normalised question): the same for every judge and every
    rerun (so cached verdicts replay), independent of row order and of other questions.
    """
    rng = np.random.default_rng([seed, _stable_hash(normalize_ws(question))])
    return bool(rng.random() < 0.5)


def _decisions(comp: Comparison, seed: int, both_orders: bool) -> list[dict[str, Any]]:
    """What each judge is asked: one entry per (question, order), with positions and the case."""
    out = []
    for p in comp.pairs.itertuples(index=False):
        a_first = a_shown_first(p.question, seed)
        for order in (0, 1) if both_orders else (0,):
            first_side = "a" if a_first != bool(order) else "b"
            first, second = (p.answer_a, p.answer_b) if first_side == "a" else (p.answer_b, p.answer_a)
            out.append({
                "qid": p.qid, "order": order, "question": p.question, "target": p.target,
                "model_a": comp.name_a, "model_b": comp.name_b, "answer_a": p.answer_a, "answer_b": p.answer_b,
                "doc_id_a": p.doc_id_a, "doc_id_b": p.doc_id_b,
                "shown_first": comp.name_a if first_side == "a" else comp.name_b,
                "shown_second": comp.name_b if first_side == "a" else comp.name_a,
                "a_shown_first": first_side == "a", "identical": bool(p.identical),
                "_first_side": first_side,
                "_case": None if p.identical else PairCase(p.question, p.target, first, second, p.context),
            })
    return out


def judge_comparison(comp: Comparison, panel: JudgePanel, *, seed: int, both_orders: bool = False,
                     alpha: float = ALPHA) -> pd.DataFrame:
    """Ask every judge about every pair; fill `comp.results` (one row per decision) and `comp.summary`.

    Every judge sees the same positions (random per question, fixed by the seed). Identical
    answers are a tie without a call. With `both_orders`, each pair is judged in the random order
    (order 0) and swapped (order 1). A reply that is not a verdict A, B or tie is a failed
    decision (recorded with its reason), never a tie.
    """
    decisions = _decisions(comp, seed, both_orders)
    verdicts = panel.judge([d["_case"] for d in decisions if d["_case"] is not None])
    names = {"a": comp.name_a, "b": comp.name_b, "tie": "tie", None: None}
    rows = []
    for judge in panel.specs:
        col = f"judge_{judge.name}"
        asked = iter(verdicts[[col, f"{col}_reasoning", f"{col}_raw", f"{col}_method", f"{col}_error"]]
                     .itertuples(index=False, name=None))
        for d in decisions:
            row = {k: v for k, v in d.items() if not k.startswith("_")}
            row.update(comparison=comp.label, judge=judge.name, judge_model=judge.model)
            if d["identical"]:
                row.update(judge_said="tie", winner_model="tie", method="identical", raw=None, error=None,
                           rationale="identical answers (after whitespace normalisation): a tie without a judge call")
            else:
                verdict, rationale, raw, method, error = next(asked)
                first, other = d["_first_side"], "b" if d["_first_side"] == "a" else "a"
                side = {"A": first, "B": other, "tie": "tie", None: None}[verdict]
                row.update(judge_said=verdict, winner_model=ROLE[side], rationale=rationale, raw=raw,
                           method=method, error=error)
            row["winner"] = names[SIDE[row["winner_model"]]]
            row["failed"] = row["judge_said"] is None
            rows.append(row)
    comp.results = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    comp.judges = panel.names
    comp.both_orders = both_orders
    comp.outcomes = judge_outcomes(comp.results, comp.judges, index=comp.pairs["qid"])
    comp.summary = summarize(comp, alpha=alpha, seed=seed)
    return comp.results


def run_judges(comparisons: Sequence[Comparison], panel: JudgePanel, *, seed: int, both_orders: bool,
               alpha: float = ALPHA) -> dict[str, dict[str, Any]]:
    """Judge every comparison with every judge of `panel`; returns per-judge usage (requests, cache
    hits, tokens). One panel for all comparisons: each judge probes the structured-output chain once
    per run."""
    for comp in comparisons:
        judge_comparison(comp, panel, seed=seed, both_orders=both_orders, alpha=alpha)
    return panel.usage_by_judge()


def _combine_orders(sides: pd.Series) -> str | None:
    values = list(sides)
    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in values):
        return None  # a failed order leaves the pair undecided for this judge
    return values[0] if len(set(values)) == 1 else "tie"  # order-dependent verdict -> tie (MT-Bench)


def judge_outcomes(results: pd.DataFrame, judges: Sequence[str], index: Any = None) -> pd.DataFrame:
    """One row per question (qid), one column per judge: 'a', 'b', 'tie' or None (no usable verdict)."""
    if results.empty:
        return pd.DataFrame(index=pd.Index(index if index is not None else [], name="qid"),
                            columns=list(judges), dtype=object)
    sides = results.assign(_side=results["winner_model"].map(SIDE))
    out = sides.groupby(["qid", "judge"], sort=True)["_side"].agg(_combine_orders).unstack("judge")
    out = out.reindex(columns=list(judges))
    if index is not None:
        out = out.reindex(pd.Index(index, name="qid"))
    return out.astype(object).where(out.notna(), None)
