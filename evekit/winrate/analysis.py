"""Statistics computed after judging: EVE's win rates, the sign test, position and length bias,
judge agreement, and the summary table under EVE's metric names.

Everything here is a pure function of a judged `Comparison` (its results, outcomes and pairs),
so it can be recomputed from a saved results.csv without a judge call.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from evekit.judges import get_kind
from evekit.judges import judge_agreement as per_sample_agreement
from evekit.stats import wilson_ci
from evekit.winrate.config import ALPHA
from evekit.winrate.matching import Comparison

__all__ = ["SUMMARY_COLUMNS", "win_rates", "sign_test", "judge_agreement", "agreement_matrix", "summarize",
           "eve_metrics"]


def win_rates(wins_a: int, wins_b: int, ties: int) -> dict[str, float]:
    """EVE's formulas: win_rate = wins / total, alpaca_win_rate = (wins + 0.5 ties) / total."""
    n = wins_a + wins_b + ties
    if n == 0:
        keys = ("win_rate_a", "win_rate_b", "tie_rate", "alpaca_win_rate_a", "alpaca_win_rate_b",
                "win_rate_difference", "alpaca_win_rate_difference")
        return dict.fromkeys(keys, float("nan"))
    out = {"win_rate_a": wins_a / n, "win_rate_b": wins_b / n, "tie_rate": ties / n,
           "alpaca_win_rate_a": (wins_a + 0.5 * ties) / n, "alpaca_win_rate_b": (wins_b + 0.5 * ties) / n}
    out["win_rate_difference"] = out["win_rate_a"] - out["win_rate_b"]
    out["alpaca_win_rate_difference"] = out["alpaca_win_rate_a"] - out["alpaca_win_rate_b"]
    return out


def sign_test(wins_a: int, wins_b: int) -> float:
    """Two-sided exact binomial test of wins vs losses (ties dropped): p for "A and B are equally good"."""
    n = wins_a + wins_b
    return float("nan") if n == 0 else float(binomtest(wins_a, n, 0.5, alternative="two-sided").pvalue)


def judge_agreement(outcomes: pd.DataFrame) -> float:
    """Share of questions on which all judges gave the same verdict, among the questions every
    judge decided (`evekit.judges.judge_agreement`, the same definition as for the pointwise
    judges); NaN with fewer than two judges: agreement of one judge with itself says nothing."""
    return float(per_sample_agreement(outcomes).mean())


def agreement_matrix(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Share of questions on which each pair of judges gave the same verdict (both decided)."""
    names = list(outcomes.columns)
    mat = pd.DataFrame(np.nan, index=names, columns=names, dtype=float)
    for i in names:
        for j in names:
            both = outcomes[[i, j]].dropna() if i != j else outcomes[[i]].dropna()
            if both.empty:
                continue
            mat.loc[i, j] = 1.0 if i == j else float((both[i] == both[j]).mean())
    return mat


def _stats(sides: pd.Series, pairs: pd.DataFrame, name_a: str, name_b: str, alpha: float,
           first_votes: tuple[int, int] | None) -> dict[str, Any]:
    """Counts, rates, CIs, sign test and length bias of one judge (or aggregate) over its questions."""
    valid = sides.dropna()
    wa, wb = int((valid == "a").sum()), int((valid == "b").sum())
    ties, n = int((valid == "tie").sum()), int(len(valid))
    row: dict[str, Any] = {"n": n, "wins_a": wa, "losses_a": wb, "wins_b": wb, "losses_b": wa, "ties": ties}
    row.update(win_rates(wa, wb, ties))
    row["win_rate_a_ci_low"], row["win_rate_a_ci_high"] = wilson_ci(wa, n)
    row["win_rate_b_ci_low"], row["win_rate_b_ci_high"] = wilson_ci(wb, n)
    p = sign_test(wa, wb)
    row["sign_test_p"] = p
    row["better"] = (name_a if wa > wb else name_b) if p < alpha else "neither"
    lens = pairs.set_index("qid").loc[valid.index, ["len_a", "len_b"]]
    decisive = (valid != "tie") & (lens["len_a"] != lens["len_b"])
    longer = np.where(lens["len_a"] > lens["len_b"], "a", "b")
    row["length_decisive"] = int(decisive.sum())
    longer_won = valid[decisive] == longer[decisive.to_numpy()]
    row["longer_wins"] = float(longer_won.mean()) if decisive.any() else float("nan")
    if first_votes is not None:
        k, m = first_votes
        row["position_votes"] = m
        row["position_bias"] = k / m if m else float("nan")
        row["position_bias_ci_low"], row["position_bias_ci_high"] = wilson_ci(k, m)
    return row


SUMMARY_COLUMNS = [
    "comparison", "judge", "kind", "model_a", "model_b", "n", "win_rate_a", "win_rate_b", "tie_rate",
    "alpaca_win_rate_a", "alpaca_win_rate_b", "win_rate_difference", "alpaca_win_rate_difference",
    "win_rate_a_ci_low", "win_rate_a_ci_high", "win_rate_b_ci_low", "win_rate_b_ci_high",
    "wins_a", "losses_a", "wins_b", "losses_b", "ties", "sign_test_p", "better", "judge_agreement",
    "position_bias", "position_bias_ci_low", "position_bias_ci_high", "position_votes",
    "position_consistency", "consistent_pairs", "longer_wins", "length_decisive", "failed",
    "failed_decisions", "identical",
]


def summarize(comp: Comparison, alpha: float = ALPHA) -> pd.DataFrame:
    """Per-judge rows, then a majority-vote row, then EVE's average-across-judges row (last).

    position_bias: share of decisive verdicts (ties excluded) for the answer shown first; 0.5 = none.
    position_consistency (both_orders only): share of judged pairs whose verdict did not depend on
    the order. longer_wins: share of decisive outcomes, among pairs of different length (characters),
    won by the longer answer. failed: questions without a usable verdict (excluded from n; in the
    average row, summed over judges); failed_decisions: judge calls without one. Wilson intervals
    and the sign test are given where there are counts (judge and majority rows), not for averages.
    """
    res, out, pairs = comp.results, comp.outcomes, comp.pairs
    base = {"comparison": comp.label, "model_a": comp.name_a, "model_b": comp.name_b,
            "identical": int(pairs["identical"].sum())}
    agreement = judge_agreement(out)
    rows = []
    for judge in comp.judges:
        r = res[res["judge"] == judge]
        votes = r[~r["failed"] & ~r["identical"] & r["verdict"].isin(["A", "B"])]["verdict"]
        row = {**base, "judge": judge, "kind": "judge",
               **_stats(out[judge], pairs, comp.name_a, comp.name_b, alpha, (int((votes == "A").sum()), len(votes))),
               "failed": int(out[judge].isna().sum()), "failed_decisions": int(r["failed"].sum())}
        if comp.both_orders:
            ok = r[~r["failed"] & ~r["identical"]].groupby("qid")["winner_side"]
            judged = ok.count() == 2
            consistent = (ok.nunique() == 1) & judged
            row["consistent_pairs"] = int(consistent.sum())
            row["position_consistency"] = consistent.sum() / judged.sum() if judged.any() else float("nan")
        rows.append(row)
    reduce = get_kind("pairwise").reduce  # the pairwise kind's vote: most common verdict, a draw is a tie
    majority = out.apply(lambda v: reduce(list(v)), axis=1) if len(out) else pd.Series(dtype=object)
    first_votes = None
    if not comp.both_orders:  # one order: the shown-first model is the same for every judge
        first = res.drop_duplicates("qid").set_index("qid")["position_a"].reindex(majority.index)
        shown_first_side = np.where(first == "A", "a", "b")
        decisive = majority.isin(["a", "b"]) & ~pairs.set_index("qid")["identical"].reindex(majority.index)
        k = int((majority[decisive] == shown_first_side[decisive.to_numpy()]).sum())
        first_votes = (k, int(decisive.sum()))
    rows.append({**base, "judge": "majority", "kind": "majority",
                 **_stats(majority, pairs, comp.name_a, comp.name_b, alpha, first_votes),
                 "judge_agreement": agreement, "failed": int(majority.isna().sum()),
                 "failed_decisions": int(res["failed"].sum())})
    judge_rows = pd.DataFrame(rows[:-1])
    mean_cols = ["win_rate_a", "win_rate_b", "tie_rate", "alpaca_win_rate_a", "alpaca_win_rate_b",
                 "win_rate_difference", "alpaca_win_rate_difference", "position_bias",
                 "position_consistency", "longer_wins"]
    avg = {c: judge_rows[c].mean() if c in judge_rows else float("nan") for c in mean_cols}
    rows.append({**base, "judge": "average", "kind": "average", **avg, "better": "",
                 "judge_agreement": agreement, "failed": int(judge_rows["failed"].sum()),
                 "failed_decisions": int(res["failed"].sum())})
    table = pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)
    counts = ["n", "wins_a", "losses_a", "wins_b", "losses_b", "ties", "position_votes", "consistent_pairs",
              "length_decisive", "failed", "failed_decisions", "identical"]
    table[counts] = table[counts].astype("Int64")
    return table


def eve_metrics(comp: Comparison) -> dict[str, float]:
    """The summary under EVE's logged names (win_rate/{judge}/{model}, aggregate/..., majority/...)."""
    s = comp.summary.set_index("judge")
    a, b = comp.name_a, comp.name_b
    m: dict[str, float] = {}
    for judge in comp.judges:
        for side, name in (("a", a), ("b", b)):
            m[f"win_rate/{judge}/{name}"] = s.at[judge, f"win_rate_{side}"]
            m[f"alpaca_win_rate/{judge}/{name}"] = s.at[judge, f"alpaca_win_rate_{side}"]
        m[f"position_bias/{judge}"] = s.at[judge, "position_bias"]
    for side, name in (("a", a), ("b", b)):
        for prefix in ("", "avg_"):
            m[f"aggregate/{prefix}{name}_win_rate"] = s.at["average", f"win_rate_{side}"]
            m[f"aggregate/{prefix}{name}_alpaca_win_rate"] = s.at["average", f"alpaca_win_rate_{side}"]
        m[f"majority/{name}_win_rate"] = s.at["majority", f"win_rate_{side}"]
        m[f"majority/{name}_alpaca_win_rate"] = s.at["majority", f"alpaca_win_rate_{side}"]
    for key in ("win_rate_difference", "alpaca_win_rate_difference", "judge_agreement", "position_bias"):
        m[f"aggregate/{key}"] = s.at["average", key]
    m["majority/win_rate_difference"] = s.at["majority", "win_rate_difference"]
    m["majority/sign_test_p"] = s.at["majority", "sign_test_p"]
    return {k: (None if pd.isna(v) else float(v)) for k, v in m.items()}
