"""Agreement between the judges of a pointwise panel and the run-level judge metrics.

Works on a judged samples table (the judge_<name> columns of `JudgePanel.judge`: 1.0 / 0.0 /
NaN = abstained). Abstentions are left out everywhere, never counted as FAIL or PASS.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from evekit.judges.voting import add_vote_columns
from evekit.stats import cohen_kappa, fleiss_kappa, interval

__all__ = ["judge_names_in", "fleiss_kappa", "cohen_kappa", "agreement_matrix", "cohen_kappa_matrix",
           "pairwise_agreement", "kappa_note", "judge_metrics", "judge_counts", "judged_counts", "abstention_note",
           "PAIRWISE_COLUMNS", "ABSTENTION_FLAG_SHARE"]

# A judge that abstains on more than this share of the items it was asked about is flagged: its
# score rests on the items it chose to judge, which an answer can steer (issue 24).
ABSTENTION_FLAG_SHARE = 0.20


def judge_names_in(df: pd.DataFrame) -> list[str]:
    """The judge names present in a judged samples table (from its judge_<name>_method columns)."""
    return [c[len("judge_"):-len("_method")] for c in df.columns
            if c.startswith("judge_") and c.endswith("_method") and c[len("judge_"):-len("_method")]]


def _votes_matrix(df: pd.DataFrame, judge_names: Sequence[str]) -> np.ndarray:
    cols = [f"judge_{n}" for n in judge_names]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"judged samples table has no column(s) {missing}")
    return df[cols].to_numpy(dtype=float)


def _pairwise(df: pd.DataFrame, judge_names: Sequence[str], fn: Callable) -> pd.DataFrame:
    m = _votes_matrix(df, judge_names)
    out = pd.DataFrame(np.eye(len(judge_names)), index=list(judge_names), columns=list(judge_names))
    for i, j in combinations(range(len(judge_names)), 2):
        out.iloc[i, j] = out.iloc[j, i] = fn(m[:, i], m[:, j])
    out.index.name, out.columns.name = "judge", "judge"
    return out


def _raw_agreement(a: np.ndarray, b: np.ndarray) -> float:
    both = ~np.isnan(a) & ~np.isnan(b)
    return float((a[both] == b[both]).mean()) if both.any() else float("nan")


def agreement_matrix(df: pd.DataFrame, judge_names: Sequence[str]) -> pd.DataFrame:
    """Share of samples on which two judges gave the same verdict (both voted); 1 on the diagonal."""
    return _pairwise(df, judge_names, _raw_agreement)


def cohen_kappa_matrix(df: pd.DataFrame, judge_names: Sequence[str]) -> pd.DataFrame:
    """Pairwise Cohen's kappa (samples both judges voted on); 1 on the diagonal, NaN if undefined."""
    return _pairwise(df, judge_names, cohen_kappa)


def _verdict_word(v: float) -> str:
    return {1.0: "PASS", 0.0: "FAIL"}.get(float(v), str(v))


def kappa_note(a: np.ndarray, b: np.ndarray, name_a: str = "a", name_b: str = "b") -> str:
    """Why Cohen's kappa of two judges (items both voted on) says little, or "" when it is informative.

    A judge that gave the same verdict on every item has kappa 0 by definition (chance agreement
    equals observed agreement) however often the other judge agrees; both constant and equal:
    kappa is undefined (chance agreement is 1).
    """
    both = ~np.isnan(a) & ~np.isnan(b)
    x, y = a[both], b[both]
    if len(x) == 0:
        return "no item both judges voted on: no agreement or kappa"
    const_a, const_b = len(np.unique(x)) == 1, len(np.unique(y)) == 1
    raw = float((x == y).mean())
    if const_a and const_b:
        if x[0] == y[0]:
            return (f"both judges gave the same verdict ({_verdict_word(x[0])}) on every item: kappa is undefined "
                    f"(chance agreement is 1) although raw agreement is {raw:.1%}")
        return (f"judge {name_a} always said {_verdict_word(x[0])} and judge {name_b} always "
                f"{_verdict_word(y[0])}: kappa is 0 by definition, raw agreement is {raw:.1%}")
    if const_a or const_b:
        name, v = (name_a, x[0]) if const_a else (name_b, y[0])
        return (f"judge {name} gave the same verdict ({_verdict_word(v)}) on every item: kappa is 0 by definition "
                f"although raw agreement is {raw:.1%}")
    return ""


PAIRWISE_COLUMNS = ["judge_a", "judge_b", "n", "agreement", "cohen_kappa", "kappa_ci_low", "kappa_ci_high",
                    "pass_rate_a", "pass_rate_b", "note"]


def pairwise_agreement(df: pd.DataFrame, judge_names: Sequence[str] | None = None, *, seed: int = 0,
                       n_boot: int = 1000) -> pd.DataFrame:
    """The judges' agreement table for one run: one row per pair of judges.

    Columns judge_a, judge_b, n (samples both voted on), agreement (raw share), cohen_kappa with
    its 95% interval kappa_ci_low / kappa_ci_high (`evekit.stats.interval(..., "kappa")`,
    bootstrap over samples), pass_rate_a, pass_rate_b (on those same samples, to see which
    judge is the stricter) and note: why kappa says little when a judge never varies (kappa 0
    by definition) or both gave one and the same verdict throughout (kappa undefined), else "".
    `judge_names` defaults to the judges found in `df` (see `judge_names_in`).
    """
    names = list(judge_names) if judge_names is not None else judge_names_in(df)
    m = _votes_matrix(df, names)
    rows = []
    for i, j in combinations(range(len(names)), 2):
        both = ~np.isnan(m[:, i]) & ~np.isnan(m[:, j])
        with np.errstate(invalid="ignore", divide="ignore"):  # statsmodels' SE of a constant judge
            ci = interval(m[both][:, [i, j]], "kappa", stat="cohen", seed=seed, n_boot=n_boot) if both.any() else {}
        rows.append({
            "judge_a": names[i], "judge_b": names[j], "n": int(both.sum()),
            "agreement": _raw_agreement(m[:, i], m[:, j]),
            "cohen_kappa": cohen_kappa(m[:, i], m[:, j]),
            "kappa_ci_low": ci.get("ci_low", float("nan")), "kappa_ci_high": ci.get("ci_high", float("nan")),
            "pass_rate_a": float(m[both, i].mean()) if both.any() else float("nan"),
            "pass_rate_b": float(m[both, j].mean()) if both.any() else float("nan"),
            "note": kappa_note(m[:, i], m[:, j], names[i], names[j]),
        })
    return pd.DataFrame(rows, columns=PAIRWISE_COLUMNS)


def _fleiss_note(votes: np.ndarray, names: Sequence[str], ci: dict[str, Any]) -> str:
    complete = votes[~np.isnan(votes).any(axis=1)]
    if len(complete) == 0:
        return "no sample every judge voted on"
    if len(np.unique(complete)) == 1:
        return (f"every judge gave the same verdict ({_verdict_word(complete[0, 0])}) on every sample: "
                "Fleiss' kappa is undefined (chance agreement is 1)")
    notes = []
    constant = [n for k, n in enumerate(names) if len(np.unique(complete[:, k])) == 1]
    if constant:
        notes.append(f"judge(s) {', '.join(constant)} gave the same verdict on every sample")
    if ci.get("n_defined", 0) < ci.get("n_boot", 0):
        notes.append(f"interval from the {ci['n_defined']} of {ci['n_boot']} resamples where kappa is defined "
                     "(in the others every verdict was the same)")
    return "; ".join(notes)


def judged_counts(df: pd.DataFrame, judge_names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per judge: {"n": items it gave a verdict on, "of": items it was asked about (every row of
    `df`), "abstained", "share_abstained", "flagged": share_abstained > ABSTENTION_FLAG_SHARE}.
    "Judged n of N" is what a report shows beside the judge's score."""
    m = _votes_matrix(df, judge_names)
    total = int(len(df))
    out = {}
    for k, name in enumerate(judge_names):
        abstained = int(np.isnan(m[:, k]).sum())
        share = abstained / total if total else 0.0
        out[name] = {"n": total - abstained, "of": total, "abstained": abstained, "share_abstained": share,
                     "flagged": share > ABSTENTION_FLAG_SHARE}
    return out


def abstention_note(judged: dict[str, dict[str, Any]]) -> str:
    """'judge j2 judged 6 of 10 items (abstained on 40%, more than 20%): ...' for the flagged
    judges of `judged_counts`, "" when none is flagged."""
    flagged = [(n, c) for n, c in judged.items() if c["flagged"]]
    if not flagged:
        return ""
    parts = [f"judge {n} judged {c['n']} of {c['of']} items (abstained on {c['share_abstained']:.0%})"
             for n, c in flagged]
    return (f"{'; '.join(parts)}: more than {ABSTENTION_FLAG_SHARE:.0%} abstentions, so the score rests on "
            "the items that judge chose to judge (see the abstention reasons)")


def judge_metrics(df: pd.DataFrame, judge_names: Sequence[str], *, seed: int = 0,
                  n_boot: int = 1000, design: Any = None) -> dict[str, dict]:
    """Run-level judge metrics, each {"value", "ci_low", "ci_high", "n", "method"} (95% interval).

    One judge: `llm_as_judge` only. Several: `llm_as_judge_<name>` per judge, `judge_voting`,
    `llm_as_judge_avg`, `judge_agreement` and `fleiss_kappa`. Intervals by kind
    (`evekit.stats.interval`): the verdicts, the vote and the agreement are 0/1 per sample
    (Wilson), the average of the judges' verdicts is graded (BCa), Fleiss' kappa a bootstrap
    over samples that reports `n_boot` and `n_defined` (resamples where kappa is defined) and a
    `note` when it needs one. Abstentions are left out: `n` is the number of samples used (a
    judge's votes; samples with at least one vote for voting and average; samples every judge
    voted on for agreement, see `voting.judge_agreement`, and for Fleiss' kappa, which needs the
    same raters on every sample). Counts of abstentions are in `judge_counts`; a judge that
    abstained on more than `ABSTENTION_FLAG_SHARE` of the samples gets a `note` on its
    `llm_as_judge[_<name>]` entry and on `judge_voting` ("judged n of N ...", `abstention_note`).
    """
    names = list(judge_names)
    if not names:
        raise ValueError("judge_metrics needs at least one judge name")
    m = _votes_matrix(df, names)

    def by_design(values: Any, kind: str) -> dict:
        # `design` (evekit.repeats.Design): an item's repeats count once, items or clusters resampled.
        cols = [c for c in (design.item_column, design.cluster_column) if c]
        frame = df[cols].assign(_value=np.asarray(values, dtype=float))
        return design.interval(frame, "_value", kind=kind, seed=seed, n_boot=n_boot)

    def prop(values: Any) -> dict:
        if design is not None:
            return by_design(values, "proportion")
        return interval(np.asarray(values, dtype=float), "proportion")

    judged = judged_counts(df, names)

    def noted(entry: dict, *who: str) -> dict:
        note = abstention_note({n: judged[n] for n in who})
        return {**entry, "note": note} if note else entry

    if len(names) == 1:
        return {"llm_as_judge": noted(prop(m[:, 0]), names[0])}
    per = add_vote_columns(df[[f"judge_{n}" for n in names]], names)
    out = {f"llm_as_judge_{n}": noted(prop(m[:, k]), n) for k, n in enumerate(names)}
    out["judge_voting"] = noted(prop(per["judge_voting"]), *names)
    out["llm_as_judge_avg"] = (by_design(per["llm_as_judge_avg"], "graded_mean") if design is not None else
                               interval(per["llm_as_judge_avg"].to_numpy(float), "graded_mean", seed=seed,
                                        n_boot=n_boot))
    out["judge_agreement"] = prop(per["judge_agreement"])
    # rows with a NaN are dropped: Fleiss' kappa needs every judge on every sample it uses.
    fk = interval(m, "kappa", stat="fleiss", seed=seed, n_boot=n_boot)
    note = _fleiss_note(m, names, fk)
    out["fleiss_kappa"] = {**fk, **({"note": note} if note else {})}
    if design is not None:  # kappa over every answer; a kappa bootstrap by item or cluster is not built
        out["fleiss_kappa"].update(ci_low=float("nan"), ci_high=float("nan"), method="none",
                                   note="no interval: Fleiss' kappa is not yet resampled by item or cluster with "
                                        "repeats or cluster_by (the value pools every answer)")
    return out


def judge_counts(df: pd.DataFrame, judge_names: Sequence[str]) -> dict[str, Any]:
    """How many verdicts are missing: {"n", "n_judge_failed" (samples without any vote),
    "abstentions": {name: count}, "judged": {name: {"n", "of", "abstained", "share_abstained",
    "flagged"}} (`judged_counts`: "judged n of N"), "abstention_threshold" (ABSTENTION_FLAG_SHARE),
    "flagged": [judges over it], "panel_flagged" (any judge flagged), "abstention_note" (the
    sentence to show, "" when none), "flags": {name: verdicts that stand but whose rationale states
    the other side} (from judge_<name>_flag, when present), "methods": {name: {method: count}},
    "errors": {name: [..]}}."""
    m = _votes_matrix(df, judge_names)
    judged = judged_counts(df, judge_names)
    flagged = [n for n in judge_names if judged[n]["flagged"]]
    out: dict[str, Any] = {
        "n": int(len(df)),
        "n_judge_failed": int(np.isnan(m).all(axis=1).sum()) if len(df) else 0,
        "abstentions": {n: int(np.isnan(m[:, k]).sum()) for k, n in enumerate(judge_names)},
        "judged": judged, "abstention_threshold": ABSTENTION_FLAG_SHARE, "flagged": flagged,
        "panel_flagged": bool(flagged), "abstention_note": abstention_note(judged),
        "flags": {n: int(df[f"judge_{n}_flag"].notna().sum()) for n in judge_names if f"judge_{n}_flag" in df},
        "methods": {}, "errors": {},
    }
    for n in judge_names:
        if f"judge_{n}_method" in df:
            out["methods"][n] = {str(k): int(v) for k, v in df[f"judge_{n}_method"].value_counts().items()}
        if f"judge_{n}_error" in df:
            out["errors"][n] = sorted({str(e) for e in df[f"judge_{n}_error"].dropna()})
    return out
