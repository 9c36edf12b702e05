"""Statistics computed after judging: EVE's win rates, the sign test, position and length bias,
judge agreement, the summary table, and the metrics block (EVE's numbers under EVE's names,
evekit's under `evekit/...`).

Everything here is a pure function of a judged `Comparison` (its results, outcomes and pairs),
so it can be recomputed from a saved results.csv without a judge call.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evekit.judges import get_kind
from evekit.judges import judge_agreement as per_sample_agreement
from evekit import stats
from evekit.stats import wilson_ci
from evekit.runs.win_rate.eve_definitions import eve_definitions
from evekit.runs.win_rate.params import ALPHA
from evekit.runs.win_rate.matching import Comparison

__all__ = ["SUMMARY_COLUMNS", "CI_COLUMNS", "win_rates", "sign_test", "judge_agreement", "agreement_matrix",
           "question_interval", "cluster_sign_test", "summarize", "eve_metrics", "evekit_metrics", "EVEKIT_PREFIX"]


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
    from scipy.stats import binomtest  # here: the batch draws report cards from this module without scipy

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


# --------------------------------------------------------------------------- intervals over questions
def _ratio_of_sums(k: int):
    """Statistic over rows of [num_1..num_k, den_1..den_k]: mean over the k judges of sum(num)/sum(den)."""

    def stat(data: Any, axis: int = 0) -> np.ndarray:
        data = np.asarray(data, dtype=float)
        num = np.take(data, range(k), axis=-1).sum(axis=axis)
        den = np.take(data, range(k, 2 * k), axis=-1).sum(axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
        return ratios.mean(axis=-1)  # NaN if some judge has no observation in the resample

    return stat


def _cluster_bootstrap(num: np.ndarray, den: np.ndarray, clusters: np.ndarray, *, seed: int,
                       n_boot: int, level: float = 0.95) -> dict[str, Any]:
    """Percentile interval of the ratio-of-sums statistic resampling clusters of questions (each
    drawn with all its questions): `stats.cluster_bootstrap_weights`; resamples where some judge
    has no observation are undefined, counted in `n_defined`."""
    k = num.shape[1]
    value = float(_ratio_of_sums(k)(np.column_stack([num, den])))
    w = stats.cluster_bootstrap_weights(clusters, n_boot, seed)  # resamples x questions
    snum, sden = w @ num, w @ den
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = np.where(sden > 0, snum / np.where(sden > 0, sden, 1), np.nan).mean(axis=1)
    defined = dist[np.isfinite(dist)]
    g = len(set(clusters.tolist()))
    out: dict[str, Any] = {"value": value, "n": len(num), "n_clusters": g, "n_boot": n_boot,
                           "n_defined": int(len(defined)),
                           "method": f"percentile bootstrap over clusters ({g} clusters)"}
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(defined, [tail, 100 - tail]) if len(defined) else (np.nan, np.nan)
    out.update(ci_low=float(low), ci_high=float(high))
    return stats.tidy(out)


def question_interval(num: Any, den: Any, *, bounds: tuple[float, float] = (0.0, 1.0), seed: int = 0,
                      n_boot: int = 2000, clusters: Any = None) -> dict[str, Any]:
    """95% interval of mean over judges j of sum_i num[i, j] / sum_i den[i, j], resampling questions i.

    `num`, `den`: one row per question, one column per judge (or 1-D for one judge); den[i, j] is
    how many observations (decisions, decisive pairs) judge j contributes on question i and num
    their sum. Questions, not decisions, are the sampling unit: a question judged in both orders or
    by several judges counts once, so repeating every decision k times leaves the interval as it is.
    When each judge has at most one observation per question and all judges have one on the same
    questions, the statistic is the mean of a per-question value: `stats.interval` "proportion"
    (Wilson) for 0/1 values, "graded_mean" (BCa) otherwise. Else a percentile bootstrap of the
    statistic over questions (`stats.interval` "corpus"), reporting `n_defined` of `n_boot`.

    `clusters` (one label per question, `cluster_by`): the interval resamples clusters, each with
    all its questions. A per-question value gets the task runs' clustered interval
    (`repeats.repeat_interval`: Wilson with the cluster-robust design effect and a t quantile);
    otherwise a percentile bootstrap over clusters (`stats.cluster_bootstrap_weights`). With every
    cluster a single question: the interval without clusters.
    """
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if num.ndim == 1:
        num, den = num[:, None], den[:, None]
    used = (den > 0).any(axis=1)
    num, den = num[used], den[used]
    if clusters is not None:
        clusters = np.asarray(clusters, dtype=object)
        if len(clusters) != len(used):
            raise ValueError(f"clusters: {len(clusters)} labels for {len(used)} questions")
        clusters = clusters[used]
        if len(set(clusters.tolist())) == len(clusters):  # every cluster one question: no clusters
            clusters = None
    if len(num) == 0:
        nan = float("nan")
        return {"value": nan, "ci_low": nan, "ci_high": nan, "n": 0, "method": "none (no observation)"}
    if np.isin(den, (0.0, 1.0)).all() and (den == den[:, :1]).all():
        per_question = num.mean(axis=1)
        kind = "proportion" if np.isin(per_question, (0.0, 1.0)).all() and bounds == (0.0, 1.0) else "graded_mean"
        if clusters is not None:
            from evekit.repeats import repeat_interval

            res = repeat_interval(per_question, np.arange(len(per_question)), clusters=clusters, kind=kind,
                                  bounds=bounds, seed=seed, n_boot=n_boot)
            return {k: res[k] for k in ("value", "ci_low", "ci_high", "n", "method", "n_clusters")}
        return stats.interval(per_question, kind, seed=seed, n_boot=n_boot,
                              **({"bounds": bounds} if kind == "graded_mean" else {}))
    if clusters is not None:
        return _cluster_bootstrap(num, den, clusters, seed=seed, n_boot=n_boot)
    res = stats.interval(np.column_stack([num, den]), "corpus", stat=_ratio_of_sums(num.shape[1]), seed=seed,
                         n_boot=n_boot)
    res["method"] = res["method"].replace("percentile", "percentile bootstrap over questions", 1)
    return res


def _side_parts(sides: pd.Series, lengths: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(num, den) per question for the rates of one judge's (or the majority's) outcomes."""
    decided = sides.notna().to_numpy(float)
    a, b = (sides == "a").to_numpy(float), (sides == "b").to_numpy(float)
    tie = (sides == "tie").to_numpy(float)
    lens = lengths.reindex(sides.index)
    decisive = ((a + b) > 0) & (lens["len_a"] != lens["len_b"]).to_numpy()
    longer_won = np.where(lens["len_a"].to_numpy() > lens["len_b"].to_numpy(), a, b)
    return {"win_rate_a": (a, decided), "win_rate_b": (b, decided), "tie_rate": (tie, decided),
            "alpaca_win_rate_a": (a + 0.5 * tie, decided), "alpaca_win_rate_b": (b + 0.5 * tie, decided),
            "win_rate_difference": (a - b, decided), "alpaca_win_rate_difference": (a - b, decided),
            "longer_wins": (longer_won * decisive, decisive.astype(float))}


_BOUNDS = {"win_rate_difference": (-1.0, 1.0), "alpaca_win_rate_difference": (-1.0, 1.0)}
# The rates that get a 95% interval (columns <name>_ci_low / <name>_ci_high).
CI_COLUMNS = ["win_rate_a", "win_rate_b", "tie_rate", "alpaca_win_rate_a", "alpaca_win_rate_b",
              "win_rate_difference", "alpaca_win_rate_difference", "judge_agreement", "position_bias",
              "position_consistency", "longer_wins"]


def _add_intervals(row: dict[str, Any], parts: dict[str, tuple[np.ndarray, np.ndarray]], seed: int,
                   n_boot: int, clusters: np.ndarray | None = None) -> None:
    """Fill <col>_ci_low/_ci_high for every part; `ci_method` lists which method served which columns."""
    methods: dict[str, list[str]] = {}
    for col, (num, den) in parts.items():
        res = question_interval(num, den, bounds=_BOUNDS.get(col, (0.0, 1.0)), seed=seed, n_boot=n_boot,
                                clusters=clusters)
        row[f"{col}_ci_low"], row[f"{col}_ci_high"] = res["ci_low"], res["ci_high"]
        method = str(res["method"])
        if "n_defined" in res and res["n_defined"] < res.get("n_boot", 0):
            method += f", {res['n_defined']} of {res['n_boot']} resamples defined"
        methods.setdefault(method, []).append(col)
    row["ci_method"] = "; ".join(f"{m}: {', '.join(cols)}" for m, cols in methods.items())


def cluster_sign_test(sides: pd.Series, clusters: pd.Series) -> float:
    """The sign test when questions come in clusters (`cluster_by`): a sign-flip permutation test
    of each cluster's wins of A minus wins of B (ties 0), exact up to 15 clusters
    (`stats.sign_flip_test`); with every cluster one question, the exact sign test itself."""
    valid = sides.dropna()
    labels = clusters.reindex(valid.index)
    if labels.nunique() == len(labels):
        return sign_test(int((valid == "a").sum()), int((valid == "b").sum()))
    score = (valid == "a").astype(float) - (valid == "b").astype(float)
    sums = score.groupby(labels.to_numpy()).sum().to_numpy(float)
    return stats.sign_flip_test(sums)[0] if len(sums) else float("nan")


def _stats(sides: pd.Series, pairs: pd.DataFrame, name_a: str, name_b: str, alpha: float,
           first_votes: tuple[int, int] | None) -> dict[str, Any]:
    """Counts, rates, CIs, sign test and length bias of one judge (or aggregate) over its questions
    (with a `cluster` column in `pairs`, the sign test flips clusters)."""
    valid = sides.dropna()
    wa, wb = int((valid == "a").sum()), int((valid == "b").sum())
    ties, n = int((valid == "tie").sum()), int(len(valid))
    row: dict[str, Any] = {"n": n, "wins_a": wa, "losses_a": wb, "wins_b": wb, "losses_b": wa, "ties": ties}
    row.update(win_rates(wa, wb, ties))
    # (intervals over clusters replace these in `_add_intervals`)
    row["win_rate_a_ci_low"], row["win_rate_a_ci_high"] = wilson_ci(wa, n)
    row["win_rate_b_ci_low"], row["win_rate_b_ci_high"] = wilson_ci(wb, n)
    p = cluster_sign_test(valid, pairs.set_index("qid")["cluster"]) if "cluster" in pairs else sign_test(wa, wb)
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
    return row


SUMMARY_COLUMNS = [
    "comparison", "judge", "kind", "model_a", "model_b", "n", "win_rate_a", "win_rate_b", "tie_rate",
    "alpaca_win_rate_a", "alpaca_win_rate_b", "win_rate_difference", "alpaca_win_rate_difference",
    "win_rate_a_ci_low", "win_rate_a_ci_high", "win_rate_b_ci_low", "win_rate_b_ci_high",
    "wins_a", "losses_a", "wins_b", "losses_b", "ties", "sign_test_p", "better", "judge_agreement",
    "position_bias", "position_bias_ci_low", "position_bias_ci_high", "position_votes",
    "position_consistency", "consistent_pairs", "longer_wins", "length_decisive", "failed",
    "failed_decisions", "identical",
    # added with the intervals over questions (the columns above keep their names and places)
    "tie_rate_ci_low", "tie_rate_ci_high", "alpaca_win_rate_a_ci_low", "alpaca_win_rate_a_ci_high",
    "alpaca_win_rate_b_ci_low", "alpaca_win_rate_b_ci_high", "win_rate_difference_ci_low",
    "win_rate_difference_ci_high", "alpaca_win_rate_difference_ci_low", "alpaca_win_rate_difference_ci_high",
    "judge_agreement_ci_low", "judge_agreement_ci_high", "position_consistency_ci_low",
    "position_consistency_ci_high", "longer_wins_ci_low", "longer_wins_ci_high", "ci_method",
]


def _per_question(values: pd.Series, index: pd.Index) -> np.ndarray:
    return values.astype(float).reindex(index).fillna(0.0).to_numpy(float)


def summarize(comp: Comparison, alpha: float = ALPHA, *, seed: int = 0, n_boot: int = 2000) -> pd.DataFrame:
    """Per-judge rows, then a majority-vote row, then EVE's average-across-judges row (last).

    position_bias: share of decisive verdicts (ties excluded) for the answer shown first; 0.5 = none.
    position_consistency (both_orders only): share of judged pairs whose verdict did not depend on
    the order. longer_wins: share of decisive outcomes, among pairs of different length (characters),
    won by the longer answer. failed: questions without a usable verdict (excluded from n; in the
    average row, summed over judges); failed_decisions: judge calls without one. The sign test is
    given where there are counts (judge and majority rows), not for averages.

    Every rate of `CI_COLUMNS` has a 95% interval (<rate>_ci_low / <rate>_ci_high) that resamples
    questions, never decisions (`question_interval`; `ci_method` says which method gave which):
    Wilson for a share with one observation per question (a judge's or the majority's win and tie
    rates, judge agreement, position bias in one order), BCa for per-question means (alpaca win
    rate, the differences win_rate_a - win_rate_b, the average row when every judge decided the
    same questions), a percentile bootstrap over questions otherwise (position bias in both
    orders: two decisions per question; the average row when judges decided different questions).
    With a `cluster` column in the pairs (`cluster_by`), every interval and the sign test resample
    clusters of questions instead (`question_interval`, `cluster_sign_test`).
    """
    res, out, pairs = comp.results, comp.outcomes, comp.pairs
    base = {"comparison": comp.label, "model_a": comp.name_a, "model_b": comp.name_b,
            "identical": int(pairs["identical"].sum())}
    qids = out.index
    lengths = pairs.set_index("qid")[["len_a", "len_b"]]
    # cluster_by: every interval resamples clusters of questions (labels aligned with the outcomes)
    clusters = pairs.set_index("qid")["cluster"].reindex(qids).to_numpy(object) if "cluster" in pairs else None
    agreement = judge_agreement(out)
    per_agree = per_sample_agreement(out) if len(out) else pd.Series(dtype=float)
    agree_part = (per_agree.fillna(0).to_numpy(float), per_agree.notna().to_numpy(float))
    rows, judge_parts = [], []
    for judge in comp.judges:
        r = res[res["judge"] == judge]
        decisive_votes = r[~r["failed"] & ~r["identical"] & r["judge_said"].isin(["A", "B"])]
        votes = decisive_votes["judge_said"]
        row = {**base, "judge": judge, "kind": "judge",
               **_stats(out[judge], pairs, comp.name_a, comp.name_b, alpha, (int((votes == "A").sum()), len(votes))),
               "failed": int(out[judge].isna().sum()), "failed_decisions": int(r["failed"].sum())}
        parts = _side_parts(out[judge], lengths)
        by_q = decisive_votes.groupby("qid")["judge_said"]
        parts["position_bias"] = (_per_question(by_q.apply(lambda v: float((v == "A").sum())), qids),
                                  _per_question(by_q.count().astype(float), qids))
        if comp.both_orders:
            ok = r[~r["failed"] & ~r["identical"]].groupby("qid")["winner_model"]
            judged = ok.count() == 2
            consistent = (ok.nunique() == 1) & judged
            row["consistent_pairs"] = int(consistent.sum())
            row["position_consistency"] = consistent.sum() / judged.sum() if judged.any() else float("nan")
            parts["position_consistency"] = (_per_question(consistent.astype(float), qids),
                                             _per_question(judged.astype(float), qids))
        _add_intervals(row, parts, seed, n_boot, clusters)
        rows.append(row)
        judge_parts.append(parts)
    reduce = get_kind("pairwise").reduce  # the pairwise kind's vote: most common verdict, a draw is a tie
    majority = out.apply(lambda v: reduce(list(v)), axis=1) if len(out) else pd.Series(dtype=object)
    first_votes = None
    parts = _side_parts(majority, lengths)
    if len(comp.judges) > 1:
        parts["judge_agreement"] = agree_part
    if not comp.both_orders:  # one order: the shown-first model is the same for every judge
        first = res.drop_duplicates("qid").set_index("qid")["a_shown_first"].reindex(majority.index)
        shown_first_side = np.where(first.astype(bool), "a", "b")
        decisive = majority.isin(["a", "b"]) & ~pairs.set_index("qid")["identical"].reindex(majority.index)
        first_won = (majority == shown_first_side) & decisive
        first_votes = (int(first_won.sum()), int(decisive.sum()))
        parts["position_bias"] = (first_won.to_numpy(float), decisive.to_numpy(float))
    row = {**base, "judge": "majority", "kind": "majority",
           **_stats(majority, pairs, comp.name_a, comp.name_b, alpha, first_votes),
           "judge_agreement": agreement, "failed": int(majority.isna().sum()),
           "failed_decisions": int(res["failed"].sum())}
    _add_intervals(row, parts, seed, n_boot, clusters)
    rows.append(row)
    judge_rows = pd.DataFrame(rows[:-1])
    mean_cols = ["win_rate_a", "win_rate_b", "tie_rate", "alpaca_win_rate_a", "alpaca_win_rate_b",
                 "win_rate_difference", "alpaca_win_rate_difference", "position_bias",
                 "position_consistency", "longer_wins"]
    avg = {c: judge_rows[c].mean() if c in judge_rows else float("nan") for c in mean_cols}
    row = {**base, "judge": "average", "kind": "average", **avg, "better": "",
           "judge_agreement": agreement, "failed": int(judge_rows["failed"].sum()),
           "failed_decisions": int(res["failed"].sum())}
    # EVE's average of the judges' rates: resample questions, each carrying every judge's decisions
    avg_parts = {}
    for col in mean_cols:
        have = [p[col] for p in judge_parts if col in p and p[col][1].sum() > 0]  # judges with a rate
        if have:
            avg_parts[col] = (np.column_stack([h[0] for h in have]), np.column_stack([h[1] for h in have]))
    if len(comp.judges) > 1:
        avg_parts["judge_agreement"] = agree_part
    _add_intervals(row, avg_parts, seed, n_boot, clusters)
    rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)
    counts = ["n", "wins_a", "losses_a", "wins_b", "losses_b", "ties", "position_votes", "consistent_pairs",
              "length_decisive", "failed", "failed_decisions", "identical"]
    table[counts] = table[counts].astype("Int64")
    floats = table.select_dtypes("float").columns
    table[floats] = table[floats].round(12) + 0.0  # float noise (2.8e-17) reads 0
    return table


EVEKIT_PREFIX = "evekit/"  # evekit's own figures beside EVE's names: never mistaken for EVE's numbers


def evekit_metrics(comp: Comparison) -> dict[str, float | None]:
    """evekit's summary (per judge, the judges' average and their majority vote) under its own names,
    `evekit/...`: per question, the two orders combined when `both_orders` (an order-dependent pair is
    a tie, as MT-Bench counts it), failed decisions left out, the differences as model_a - model_b
    (`_a_minus_b`). EVE's numbers are under EVE's names (`eve_metrics`)."""
    s = comp.summary.set_index("judge")
    a, b = comp.name_a, comp.name_b
    p = EVEKIT_PREFIX
    m: dict[str, Any] = {}
    for judge in comp.judges:
        for side, name in (("a", a), ("b", b)):
            m[f"{p}win_rate/{judge}/{name}"] = s.at[judge, f"win_rate_{side}"]
            m[f"{p}alpaca_win_rate/{judge}/{name}"] = s.at[judge, f"alpaca_win_rate_{side}"]
        m[f"{p}tie_rate/{judge}"] = s.at[judge, "tie_rate"]
        m[f"{p}position_bias/{judge}"] = s.at[judge, "position_bias"]
        if comp.both_orders:
            m[f"{p}position_consistency/{judge}"] = s.at[judge, "position_consistency"]
    for row in ("average", "majority"):
        for side, name in (("a", a), ("b", b)):
            m[f"{p}{row}/{name}_win_rate"] = s.at[row, f"win_rate_{side}"]
            m[f"{p}{row}/{name}_alpaca_win_rate"] = s.at[row, f"alpaca_win_rate_{side}"]
        m[f"{p}{row}/tie_rate"] = s.at[row, "tie_rate"]
        m[f"{p}{row}/win_rate_difference_a_minus_b"] = s.at[row, "win_rate_difference"]
        m[f"{p}{row}/alpaca_win_rate_difference_a_minus_b"] = s.at[row, "alpaca_win_rate_difference"]
        m[f"{p}{row}/judge_agreement"] = s.at[row, "judge_agreement"]
        m[f"{p}{row}/position_bias"] = s.at[row, "position_bias"]
    m[f"{p}majority/sign_test_p"] = s.at["majority", "sign_test_p"]
    return {k: (None if pd.isna(v) else float(v)) for k, v in m.items()}


def eve_metrics(comp: Comparison) -> dict[str, float | None]:
    """metrics.json's `metrics`: EVE's numbers under EVE's logged names, by EVE's definitions
    (`eve_definitions`: every judge decision counts, `win_rate/<judge>/<model>`, `alpaca_win_rate/...`,
    `aggregate/...`, `judge_agreement/...`, `position_bias/<judge>/...`), then evekit's own figures
    under `evekit/...` (`evekit_metrics`)."""
    return {**eve_definitions(comp.results, comp.name_a, comp.name_b, comp.judges), **evekit_metrics(comp)}
