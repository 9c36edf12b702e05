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

__all__ = ["judge_names_in", "fleiss_kappa", "cohen_kappa", "agreement_matrix", "cohen_kappa_matrix",
           "pairwise_agreement", "judge_metrics", "judge_counts"]


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


def fleiss_kappa(ratings: np.ndarray) -> float:
    """Fleiss' kappa of binary ratings (rows = samples, columns = judges, no NaN).

    NaN when undefined (fewer than 2 samples or raters, or every rating identical).
    """
    from statsmodels.stats.inter_rater import fleiss_kappa as _fk
    ratings = np.asarray(ratings, dtype=float)
    if ratings.ndim != 2 or ratings.shape[0] < 2 or ratings.shape[1] < 2:
        return float("nan")
    passes = ratings.sum(axis=1)
    table = np.column_stack([ratings.shape[1] - passes, passes])
    p = table.sum(axis=0) / table.sum()
    if np.isclose((p ** 2).sum(), 1.0):  # everyone said the same thing: chance agreement is 1
        return float("nan")
    return float(_fk(table, method="fleiss"))


def cohen_kappa(a: Sequence[float], b: Sequence[float]) -> float:
    """Cohen's kappa of two binary raters on the samples both rated (NaN where undefined)."""
    from statsmodels.stats.inter_rater import cohens_kappa
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both].astype(int), b[both].astype(int)
    if len(a) == 0:
        return float("nan")
    table = np.zeros((2, 2))
    np.add.at(table, (a, b), 1)
    pe = (table.sum(0) * table.sum(1)).sum() / len(a) ** 2
    if np.isclose(pe, 1.0):
        return float("nan")
    return float(cohens_kappa(table, return_results=False))


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


def pairwise_agreement(df: pd.DataFrame, judge_names: Sequence[str] | None = None) -> pd.DataFrame:
    """The judges' agreement table for one run: one row per pair of judges.

    Columns judge_a, judge_b, n (samples both voted on), agreement (raw share), cohen_kappa,
    pass_rate_a, pass_rate_b (on those same samples, to see which judge is the stricter).
    `judge_names` defaults to the judges found in `df` (see `judge_names_in`).
    """
    names = list(judge_names) if judge_names is not None else judge_names_in(df)
    m = _votes_matrix(df, names)
    rows = []
    for i, j in combinations(range(len(names)), 2):
        both = ~np.isnan(m[:, i]) & ~np.isnan(m[:, j])
        rows.append({
            "judge_a": names[i], "judge_b": names[j], "n": int(both.sum()),
            "agreement": _raw_agreement(m[:, i], m[:, j]),
            "cohen_kappa": cohen_kappa(m[:, i], m[:, j]),
            "pass_rate_a": float(m[both, i].mean()) if both.any() else float("nan"),
            "pass_rate_b": float(m[both, j].mean()) if both.any() else float("nan"),
        })
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "n", "agreement", "cohen_kappa",
                                       "pass_rate_a", "pass_rate_b"])


def judge_metrics(df: pd.DataFrame, judge_names: Sequence[str], *, seed: int = 0,
                  n_boot: int = 1000) -> dict[str, dict]:
    """Run-level judge metrics, each {"value", "ci_low", "ci_high", "n"} (95% bootstrap CI).

    One judge: `llm_as_judge` only. Several: `llm_as_judge_<name>` per judge, `judge_voting`,
    `llm_as_judge_avg`, `judge_agreement` and `fleiss_kappa`. Abstentions are left out: `n` is
    the number of samples used (a judge's votes; samples with at least one vote for voting and
    average; samples every judge voted on for agreement, see `voting.judge_agreement`, and for
    Fleiss' kappa, which needs the same raters on every sample). Counts of abstentions are in
    `judge_counts`.
    """
    from evekit.stats import summarize

    names = list(judge_names)
    if not names:
        raise ValueError("judge_metrics needs at least one judge name")
    m = _votes_matrix(df, names)

    def summ(values: Any) -> dict:
        v = np.asarray(values, dtype=float)
        return summarize(v[~np.isnan(v)], seed=seed, n_boot=n_boot)

    if len(names) == 1:
        return {"llm_as_judge": summ(m[:, 0])}
    per = add_vote_columns(df[[f"judge_{n}" for n in names]], names)
    out = {f"llm_as_judge_{n}": summ(m[:, k]) for k, n in enumerate(names)}
    out["judge_voting"] = summ(per["judge_voting"])
    out["llm_as_judge_avg"] = summ(per["llm_as_judge_avg"])
    out["judge_agreement"] = summ(per["judge_agreement"])
    # summarize drops rows with a NaN: Fleiss' kappa needs every judge on every sample it uses.
    out["fleiss_kappa"] = summarize(m, seed=seed, n_boot=n_boot, stat=fleiss_kappa)
    return out


def judge_counts(df: pd.DataFrame, judge_names: Sequence[str]) -> dict[str, Any]:
    """How many verdicts are missing: {"n", "n_judge_failed" (samples without any vote),
    "abstentions": {name: count}, "methods": {name: {method: count}}, "errors": {name: [..]}}."""
    m = _votes_matrix(df, judge_names)
    out: dict[str, Any] = {
        "n": int(len(df)),
        "n_judge_failed": int(np.isnan(m).all(axis=1).sum()) if len(df) else 0,
        "abstentions": {n: int(np.isnan(m[:, k]).sum()) for k, n in enumerate(judge_names)},
        "methods": {}, "errors": {},
    }
    for n in judge_names:
        if f"judge_{n}_method" in df:
            out["methods"][n] = {str(k): int(v) for k, v in df[f"judge_{n}_method"].value_counts().items()}
        if f"judge_{n}_error" in df:
            out["errors"][n] = sorted({str(e) for e in df[f"judge_{n}_error"].dropna()})
    return out
