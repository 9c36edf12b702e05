"""How a panel's verdicts become one verdict per sample, and whether the judges agreed on it.

Each judge kind has its reducer (a panel is judges plus a reducer, as inspect_ai's
`multi_scorer(scorers, "mode")`): EVE's majority with abstentions (`vote`) for the binary
pointwise kinds, the most common label (`majority_vote`) for the pairwise kind. Agreement has a
single definition for both (`judge_agreement`).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

__all__ = ["vote", "majority_vote", "judge_agreement", "add_vote_columns", "abstained"]


def abstained(v: Any) -> bool:
    """A missing verdict: None or NaN (a judge that gave no usable verdict)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def vote(verdicts: Sequence[int | float | None]) -> int | None:
    """EVE's majority vote over binary verdicts, with abstentions.

    Abstentions (None or NaN: a judge that gave no usable verdict) are left out; they are never
    counted as FAIL or PASS. With k votes cast, the result is 1 (PASS) iff at least
    floor(k/2) + 1 of them are 1, else 0: a tie fails, as in EVE (2 judges 1/1 -> 0; 3 judges
    2/1 -> 1, 1/2 -> 0; 5 judges 3/2 -> 1, 2/3 -> 0). So 3 judges with one abstaining and the
    other two split 1/1 -> 0, and with the other two both 1 -> 1. If nobody voted the result is
    None: the sample is excluded from judge_voting and counted in `n_judge_failed`.
    """
    votes = []
    for v in verdicts:
        if abstained(v):
            continue
        if v not in (0, 1):
            raise ValueError(f"a verdict must be 0, 1 or None (abstention), got {v!r}")
        votes.append(int(v))
    if not votes:
        return None
    return 1 if sum(votes) >= len(votes) // 2 + 1 else 0


def majority_vote(votes: Sequence[str | None]) -> str | None:
    """The most common usable verdict; a draw between the most common verdicts is a tie.

    Judges without a usable verdict abstain; None only when every judge abstained.
    """
    usable = [v for v in votes if not abstained(v)]
    if not usable:
        return None
    counts = Counter(usable).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


def judge_agreement(verdicts: pd.DataFrame) -> pd.Series:
    """EVE's judge agreement, per sample: did all judges of the panel give the same verdict?

    `verdicts` has one row per sample and one column per judge (a verdict, or None/NaN for an
    abstention). Per sample: 1.0 when every judge gave a verdict and all verdicts are equal, 0.0
    when every judge gave one and they differ, NaN (not counted) when some judge abstained or the
    panel has fewer than two judges (one judge agreeing with itself says nothing). The run-level
    `judge_agreement` is the mean over the counted samples, "the share of samples where all
    judges agree"; the same definition serves the pointwise kinds and the pairwise win rate.
    """
    if verdicts.shape[1] < 2:
        return pd.Series(np.nan, index=verdicts.index, dtype=float)
    complete = verdicts.notna().all(axis=1)
    same = verdicts.nunique(axis=1, dropna=True) == 1
    return same.astype(float).where(complete)


def add_vote_columns(df: pd.DataFrame, judge_names: Sequence[str], *,
                     reduce: Callable[[Sequence[Any]], Any] = vote, binary: bool = True) -> pd.DataFrame:
    """(Re)compute judge_voting, llm_as_judge_avg (binary kinds only), judge_agreement,
    judge_n_votes and judge_failed from the judge_<name> columns. Returns a copy.

    `reduce` is the kind's vote over the verdicts cast; with `binary` (0/1 verdicts, NaN =
    abstained) the vote and the average are floats, NaN when nobody voted.
    """
    df = df.copy()
    votes = df[[f"judge_{n}" for n in judge_names]]
    cast = [[v for v in row if not abstained(v)] for row in votes.itertuples(index=False)]
    if binary:
        cast = [[int(v) for v in c] for c in cast]
        df["judge_voting"] = [np.nan if (v := reduce(c)) is None else float(v) for c in cast]
        df["llm_as_judge_avg"] = [float(np.mean(c)) if c else np.nan for c in cast]
    else:
        df["judge_voting"] = [reduce(c) for c in cast]
    df["judge_agreement"] = judge_agreement(votes).to_numpy()
    df["judge_n_votes"] = [len(c) for c in cast]
    df["judge_failed"] = [not c for c in cast]
    return df
