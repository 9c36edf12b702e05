"""Ranking many models from pairwise judge battles: Bradley–Terry ratings on the Elo scale, with
question-bootstrap intervals, Chatbot Arena's rank rule, a style-controlled variant, per-judge
fits and the judges' agreement on the order.

Input: a battles table (battles.csv), one row per judge decision::

    question_id, model_a (shown first), model_b, judge, winner, rationale [, error, len_a, len_b]

`winner` is a model name (one of the row's two), ``"tie"``, or empty (NaN / blank) when the judge
gave no usable verdict. Empty rows are excluded from every fit and counted
(`battle_counts`, and ``ratings.attrs["excluded"]``).

Method
------
* **Likelihood.** Bradley–Terry by maximum likelihood as a logistic model:
  ``P(a beats b) = sigmoid(beta_a - beta_b [+ gamma * d])``, no intercept. Each row of the table
  counts once, with an outcome ``s`` = 1 (a won), 0 (b won) or 0.5 (tie) for the first-shown
  model: the row contributes ``s * log p + (1 - s) * log(1 - p)``. This is the binomial GLM with
  0 / 0.5 / 1 successes out of 1 trial, and the same likelihood as the "two rows with weight 0.5"
  trick for ties. A battle judged in both orders is two rows. No prior, no extra weights.
  Rows with equal (model_a, model_b) are pooled into binomial cells (successes summed), which
  leaves the likelihood unchanged and makes the bootstrap fast.
  Optimiser: `scipy.optimize.minimize` (``trust-exact``, analytic gradient and Hessian); one model
  is the reference (beta = 0) during the fit, then the scale is re-centred.
* **Scale.** rating = 400 / ln(10) * beta (400 points per factor 10 in the odds), shifted so the
  mean rating of the fitted models is 1000, or the baseline's rating is 1000 when one is set.
* **Intervals.** Bootstrap over questions (battles on one question are correlated): resample the
  question ids with replacement, refit, take the percentile interval (default 95%). Seeded. A
  resample whose comparison graph is disconnected has no defined ratings and is left out of the
  percentiles (their number is in ``ratings.attrs["undefined_resamples"]``). With a baseline, a
  model's interval is the interval of its difference to the baseline (+1000).
* **Rank.** 1 + the number of models whose interval lies entirely above this model's interval
  (Chatbot Arena's rule), within one judge (or pooled).
* **Style control** (as in Arena-Hard): the same fit with the normalised length difference
  ``d = (len_a - len_b) / (len_a + len_b)`` as a covariate; the style ratings are the model
  coefficients of that fit, on the same scale. Needs ``len_a`` and ``len_b`` columns (answer
  lengths, e.g. in characters or tokens); without them the style columns are NaN.
* **Separation.** If a model wins (or loses) every battle the maximum-likelihood rating does not
  exist; the optimiser then stops at a very large finite value. No prior is added on purpose.

Output: `rate` returns the ratings.csv rows: ``model, judge, rating, ci_low, ci_high, n_battles,
style_rating, style_ci_low, style_ci_high`` (+ ``win_rate_vs_baseline`` and its
``_ci_low``/``_ci_high`` when a baseline is set: the predicted probability of beating the
baseline, ties half, from the ratings), and ``rank``; one row per model and judge and exactly one
``judge == "pooled"`` row per model (all judges' battles together).
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize
from scipy.stats import kendalltau

from evekit.errors import DataError

__all__ = [
    "ELO_SCALE",
    "POOLED",
    "RATING_COLUMNS",
    "battle_counts",
    "fit_bradley_terry",
    "rate",
    "assign_ranks",
    "kendall_tau_between_judges",
    "win_probability_matrix",
    "judge_disagreements",
    "judge_call_count",
    "sample_pairs",
]

ELO_SCALE = 400.0 / math.log(10.0)  # rating points per unit of log-odds
POOLED = "pooled"
CENTER = 1000.0
RATING_COLUMNS = ["model", "judge", "rating", "ci_low", "ci_high", "n_battles",
                  "style_rating", "style_ci_low", "style_ci_high"]
BASELINE_COLUMNS = ["win_rate_vs_baseline", "win_rate_vs_baseline_ci_low", "win_rate_vs_baseline_ci_high"]
_REQUIRED = ("question_id", "model_a", "model_b", "judge", "winner")


# --------------------------------------------------------------------------------------------
# Reading the battles table


def _empty_winner(w: pd.Series) -> pd.Series:
    return w.isna() | w.astype(str).str.strip().eq("")


def _check(battles: pd.DataFrame) -> None:
    if not isinstance(battles, pd.DataFrame):
        raise DataError("battles must be a pandas DataFrame (one row per judge decision)")
    missing = [c for c in _REQUIRED if c not in battles.columns]
    if missing:
        raise DataError(f"battles table lacks the column(s) {missing}; it needs {list(_REQUIRED)}")


def _usable(battles: pd.DataFrame) -> pd.DataFrame:
    """The rows with a verdict, with ``s`` = score of model_a (1, 0.5, 0). Raises DataError on a
    winner that is neither of the row's models nor "tie", or a model battling itself."""
    _check(battles)
    df = battles.loc[~_empty_winner(battles["winner"])].copy()
    for c in ("model_a", "model_b", "judge"):
        df[c] = df[c].astype(str)
    df["question_id"] = df["question_id"].astype(str)
    w = df["winner"].astype(str).str.strip()
    same = df["model_a"] == df["model_b"]
    if same.any():
        i = df.index[same][0]
        raise DataError(f"battles row {i}: model_a and model_b are both {df.at[i, 'model_a']!r}")
    s = np.where(w == df["model_a"], 1.0, np.where(w == df["model_b"], 0.0, np.where(w.str.lower() == "tie", 0.5, np.nan)))
    if np.isnan(s).any():
        i = df.index[np.isnan(s)][0]
        raise DataError(f"battles row {i}: winner {df.at[i, 'winner']!r} is neither {df.at[i, 'model_a']!r}, "
                        f"{df.at[i, 'model_b']!r} nor 'tie' (leave it empty when the judge gave no verdict)")
    df["s"] = s
    return df


def battle_counts(battles: pd.DataFrame) -> pd.DataFrame:
    """Per judge (and pooled): rows, usable rows, ties, and rows excluded for an empty winner."""
    _check(battles)
    empty = _empty_winner(battles["winner"])
    tie = battles["winner"].astype(str).str.strip().str.lower().eq("tie") & ~empty
    frame = pd.DataFrame({"judge": battles["judge"].astype(str), "empty": empty, "tie": tie})
    out = frame.groupby("judge", sort=True).agg(rows=("empty", "size"), excluded=("empty", "sum"), ties=("tie", "sum"))
    out.loc[POOLED] = [len(frame), int(empty.sum()), int(tie.sum())]
    out["usable"] = out["rows"] - out["excluded"]
    return out.astype(int).reset_index()[["judge", "rows", "usable", "ties", "excluded"]]


# --------------------------------------------------------------------------------------------
# The fit


class _Problem:
    """One set of battles as arrays: model indices, outcomes, question indices, style covariate."""

    def __init__(self, df: pd.DataFrame, style: bool):
        self.models = sorted(set(df["model_a"]) | set(df["model_b"]))
        if len(self.models) < 2:
            raise DataError("battles need at least two models with a usable verdict")
        index = {m: i for i, m in enumerate(self.models)}
        self.m = len(self.models)
        self.a = df["model_a"].map(index).to_numpy()
        self.b = df["model_b"].map(index).to_numpy()
        self.s = df["s"].to_numpy(float)
        self.questions, self.q = np.unique(df["question_id"].to_numpy(), return_inverse=True)
        self.n_battles = np.bincount(self.a, minlength=self.m) + np.bincount(self.b, minlength=self.m)
        self.style = style
        if style:
            if "len_a" not in df.columns or "len_b" not in df.columns:
                raise DataError("style control needs the answer lengths: columns len_a and len_b")
            la = pd.to_numeric(df["len_a"], errors="coerce").to_numpy(float)
            lb = pd.to_numeric(df["len_b"], errors="coerce").to_numpy(float)
            if not (np.isfinite(la).all() and np.isfinite(lb).all()) or (la < 0).any() or (lb < 0).any():
                raise DataError("len_a / len_b must be non-negative numbers on every row with a verdict")
            tot = la + lb
            self.d = np.divide(la - lb, tot, out=np.zeros_like(tot), where=tot > 0)
            # one cell per row (the covariate differs row by row)
            self.cell = np.arange(len(self.s))
            ca, cb, cd = self.a, self.b, self.d
        else:
            keys, self.cell = np.unique(self.a * self.m + self.b, return_inverse=True)
            ca, cb, cd = keys // self.m, keys % self.m, None
        self.n_cells = len(ca)
        self.ca, self.cb = ca, cb
        X = np.zeros((self.n_cells, self.m + (1 if style else 0)))
        X[np.arange(self.n_cells), ca] += 1.0
        X[np.arange(self.n_cells), cb] -= 1.0
        if style:
            X[:, self.m] = cd
        self.X = np.delete(X, 0, axis=1)  # model 0 is the reference (beta = 0)

    def connected(self, n_cell: np.ndarray) -> bool:
        """Whether the models that met (cells with weight) form one comparison graph. A few models:
        a breadth-first sweep over the adjacency matrix (scipy.sparse's set-up cost 1 ms a call,
        a third of a 1,000-resample bootstrap)."""
        keep = n_cell > 0
        adjacent = np.zeros((self.m, self.m), dtype=bool)
        adjacent[self.ca[keep], self.cb[keep]] = True
        adjacent |= adjacent.T
        reached = np.zeros(self.m, dtype=bool)
        reached[0] = True
        while True:
            grown = reached | adjacent[reached].any(axis=0)
            if (grown == reached).all():
                return bool(reached.all())
            reached = grown

    def fit(self, w_row: np.ndarray | None = None, start: np.ndarray | None = None) -> np.ndarray:
        """Coefficients (models 1..m-1 [, gamma]) for row weights `w_row` (bootstrap counts)."""
        w = np.ones_like(self.s) if w_row is None else w_row
        n = np.bincount(self.cell, weights=w, minlength=self.n_cells)
        y = np.bincount(self.cell, weights=w * self.s, minlength=self.n_cells)
        if not self.connected(n):
            return np.full(self.X.shape[1], np.nan)
        keep = n > 0
        X, n, y = self.X[keep], n[keep], y[keep]

        def f(beta):
            eta = X @ beta
            # -sum[y*eta - n*log(1+exp(eta))]
            return float(np.sum(n * np.logaddexp(0.0, eta) - y * eta))

        def grad(beta):
            p = 1.0 / (1.0 + np.exp(-(X @ beta)))
            return X.T @ (n * p - y)

        def hess(beta):
            p = 1.0 / (1.0 + np.exp(-(X @ beta)))
            return (X * (n * p * (1.0 - p))[:, None]).T @ X

        x0 = np.zeros(X.shape[1]) if start is None else start
        res = optimize.minimize(f, x0, jac=grad, hess=hess, method="trust-exact",
                                options={"gtol": 1e-9, "maxiter": 500})
        return res.x

    def ratings(self, coef: np.ndarray, baseline: str | None) -> np.ndarray:
        r = ELO_SCALE * np.concatenate([[0.0], coef[: self.m - 1]])
        ref = r[self.models.index(baseline)] if baseline is not None else r.mean()
        return r - ref + CENTER


def _frame(battles: pd.DataFrame, judge: str | None) -> pd.DataFrame:
    df = _usable(battles)
    if judge is not None and judge != POOLED:
        df = df[df["judge"] == judge]
        if df.empty:
            raise DataError(f"no usable battles for judge {judge!r}")
    return df


def fit_bradley_terry(battles: pd.DataFrame, *, baseline: str | None = None, style: bool = False,
                      judge: str | None = None) -> pd.Series:
    """Bradley–Terry ratings (model -> Elo-scale rating) of the usable battles (of one `judge`, or
    all when None / "pooled"). Mean 1000, or `baseline` = 1000. ``style=True``: the model
    coefficients of the fit with the normalised length difference as a covariate; the length
    coefficient (log-odds per unit of d) is in ``series.attrs["style_coef"]``."""
    prob = _Problem(_frame(battles, judge), style)
    if baseline is not None and baseline not in prob.models:
        raise DataError(f"baseline {baseline!r} has no usable battles" + (f" for judge {judge!r}" if judge else ""))
    coef = prob.fit()
    if np.isnan(coef).any():
        raise DataError("the models' comparison graph is not connected: some groups of models never "
                        "met each other, so their ratings are not on one scale")
    out = pd.Series(prob.ratings(coef, baseline), index=pd.Index(prob.models, name="model"), name="rating")
    if style:
        out.attrs["style_coef"] = float(coef[-1])
    return out


def assign_ranks(ci_low: Any, ci_high: Any) -> np.ndarray:
    """Chatbot Arena's rule: 1 + the number of models whose interval lies entirely above this
    model's interval (their ci_low > this ci_high)."""
    lo, hi = np.asarray(ci_low, float), np.asarray(ci_high, float)
    return 1 + (lo[None, :] > hi[:, None]).sum(axis=1)


def _fit_group(df: pd.DataFrame, judge: str, baseline: str | None, n_boot: int, seed: int,
               level: float, with_style: bool) -> tuple[pd.DataFrame, int, pd.DataFrame | None]:
    plain = _Problem(df, style=False)
    if baseline is not None and baseline not in plain.models:
        raise DataError(f"baseline {baseline!r} has no usable battles for judge {judge!r}")
    sty = _Problem(df, style=True) if with_style else None
    coef = plain.fit()
    if np.isnan(coef).any():
        raise DataError(f"judge {judge!r}: the models' comparison graph is not connected, "
                        "so their ratings are not on one scale")
    r = plain.ratings(coef, baseline)
    s_coef = sty.fit() if sty else None
    sr = sty.ratings(s_coef, baseline) if sty else np.full(plain.m, np.nan)
    lo = hi = slo = shi = np.full(plain.m, np.nan)
    undefined = 0
    draws = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        nq = len(plain.questions)
        boot = np.full((n_boot, plain.m), np.nan)
        sboot = np.full((n_boot, plain.m), np.nan)
        for i in range(n_boot):
            counts = np.bincount(rng.integers(0, nq, nq), minlength=nq).astype(float)
            w = counts[plain.q]
            c = plain.fit(w, start=coef)
            if not np.isnan(c).any():
                boot[i] = plain.ratings(c, baseline)
            else:
                undefined += 1
            if sty is not None:
                c = sty.fit(w, start=s_coef)
                if not np.isnan(c).any():
                    sboot[i] = sty.ratings(c, baseline)
        draws = pd.DataFrame(boot, columns=pd.Index(plain.models, name="model"))
        tail = 100 * (1 - level) / 2
        if np.isfinite(boot).any():
            lo, hi = np.nanpercentile(boot, [tail, 100 - tail], axis=0)
        if sty is not None and np.isfinite(sboot).any():
            slo, shi = np.nanpercentile(sboot, [tail, 100 - tail], axis=0)
    out = pd.DataFrame({"model": plain.models, "judge": judge, "rating": r, "ci_low": lo, "ci_high": hi,
                        "n_battles": plain.n_battles, "style_rating": sr, "style_ci_low": slo,
                        "style_ci_high": shi})
    if baseline is not None:
        def p(x):
            return 1.0 / (1.0 + 10.0 ** ((CENTER - np.asarray(x, float)) / 400.0))
        out["win_rate_vs_baseline"] = p(out["rating"])
        out["win_rate_vs_baseline_ci_low"] = p(out["ci_low"])
        out["win_rate_vs_baseline_ci_high"] = p(out["ci_high"])
        if n_boot > 0:  # the baseline's own interval is degenerate at 1000 by construction
            b = out["model"] == baseline
            out.loc[b, ["ci_low", "ci_high"]] = CENTER
    has_ci = out["ci_low"].notna() & out["ci_high"].notna()
    lo_r = out["ci_low"].where(has_ci, out["rating"])
    hi_r = out["ci_high"].where(has_ci, out["rating"])
    out["rank"] = assign_ranks(lo_r, hi_r)
    return out, undefined, draws


def rate(battles: pd.DataFrame, *, baseline: str | None = None, n_boot: int = 1000, seed: int = 0,
         level: float = 0.95, style: bool | None = None, per_judge: bool = True,
         keep_draws: bool = False) -> pd.DataFrame:
    """The ratings.csv rows: per judge (each judge's battles alone) and pooled (all judges'
    battles together, each row once), with question-bootstrap percentile intervals, style-controlled
    ratings (when the table has len_a/len_b, or ``style=True``; ``style=False`` skips them), ranks
    and n_battles. ``per_judge=False`` fits the pooled rows only. Sorted by judge (pooled first), then rank and rating.

    ``attrs``: ``excluded`` (judge -> rows with an empty winner), ``undefined_resamples``
    (judge -> resamples with a disconnected comparison graph, left out), ``n_boot``, ``seed``,
    ``level``, ``baseline``; with ``keep_draws=True`` also ``draws`` (judge -> DataFrame of the
    bootstrap ratings, one row per resample, NaN rows for undefined ones), e.g. for intervals of
    rating differences or P(model A above model B)."""
    if n_boot < 0:
        raise DataError("n_boot must be >= 0")
    df = _usable(battles)
    if df.empty:
        raise DataError("no battle has a usable verdict (every winner is empty)")
    with_style = ("len_a" in df.columns and "len_b" in df.columns) if style is None else bool(style)
    judges = sorted(df["judge"].unique())
    if POOLED in judges:
        raise DataError(f"a judge may not be called {POOLED!r}: that name is the pooled fit's")
    parts, undefined, draws = [], {}, {}
    for judge in [POOLED] + (judges if per_judge else []):
        sub = df if judge == POOLED else df[df["judge"] == judge]
        part, u, d = _fit_group(sub, judge, baseline, n_boot, seed, level, with_style)
        parts.append(part)
        undefined[judge] = u
        draws[judge] = d
    out = pd.concat(parts, ignore_index=True)
    order = {j: i for i, j in enumerate([POOLED] + judges)}
    out = out.sort_values(["judge", "rank", "rating"], key=lambda c: c.map(order) if c.name == "judge" else c,
                          ascending=[True, True, False]).reset_index(drop=True)
    cols = RATING_COLUMNS + (BASELINE_COLUMNS if baseline is not None else []) + ["rank"]
    out = out[cols]
    counts = battle_counts(battles).set_index("judge")
    out.attrs.update({"excluded": counts["excluded"].to_dict(), "undefined_resamples": undefined,
                      "n_boot": n_boot, "seed": seed, "level": level, "baseline": baseline})
    if keep_draws:
        out.attrs["draws"] = draws
    return out


# --------------------------------------------------------------------------------------------
# Reading a ratings table


def _judges(ratings: pd.DataFrame) -> list[str]:
    return sorted(j for j in ratings["judge"].astype(str).unique() if j != POOLED)


def kendall_tau_between_judges(ratings: pd.DataFrame, column: str = "rating") -> pd.DataFrame:
    """Kendall's tau (scipy.stats.kendalltau, tau-b) between every two judges' ratings (`column`)
    over the models both rated: ``judge_a, judge_b, n_models, tau, p_value``."""
    rows = []
    by = {j: g.set_index("model")[column] for j, g in ratings.groupby("judge")}
    for ja, jb in itertools.combinations(_judges(ratings), 2):
        common = by[ja].index.intersection(by[jb].index)
        if len(common) >= 2:
            res = kendalltau(by[ja][common].to_numpy(), by[jb][common].to_numpy())
            tau, p = float(res.statistic), float(res.pvalue)
        else:
            tau = p = float("nan")
        rows.append({"judge_a": ja, "judge_b": jb, "n_models": len(common), "tau": tau, "p_value": p})
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "n_models", "tau", "p_value"])


def win_probability_matrix(ratings: pd.DataFrame, judge: str = POOLED, column: str = "rating") -> pd.DataFrame:
    """P(row model beats column model), ties counted half, predicted by the Bradley–Terry ratings
    of `judge` (default pooled): 1 / (1 + 10 ** ((R_col - R_row) / 400)). Diagonal 0.5. Rows and
    columns in rating order, best first."""
    r = ratings[ratings["judge"].astype(str) == judge].set_index("model")[column].sort_values(ascending=False)
    if r.empty:
        raise DataError(f"no ratings for judge {judge!r}")
    v = r.to_numpy(float)
    p = 1.0 / (1.0 + 10.0 ** ((v[None, :] - v[:, None]) / 400.0))
    return pd.DataFrame(p, index=r.index.rename("model"), columns=r.index.rename("opponent"))


def judge_disagreements(ratings: pd.DataFrame) -> list[str]:
    """Notes on two judges that put two models in opposite order although the pooled intervals of
    the two models do not overlap (one clearly above the other)."""
    pooled = ratings[ratings["judge"] == POOLED].set_index("model")
    by = {j: g.set_index("model")["rating"] for j, g in ratings.groupby("judge")}
    notes = []
    models = sorted(pooled.index)
    for m1, m2 in itertools.combinations(models, 2):
        lo1, hi1 = pooled.at[m1, "ci_low"], pooled.at[m1, "ci_high"]
        lo2, hi2 = pooled.at[m2, "ci_low"], pooled.at[m2, "ci_high"]
        if not (lo1 > hi2 or lo2 > hi1):
            continue  # overlapping (or undefined) pooled intervals
        hi_m, lo_m = (m1, m2) if lo1 > hi2 else (m2, m1)
        for ja, jb in itertools.combinations(_judges(ratings), 2):
            ra, rb = by[ja], by[jb]
            if not all(m in ra.index and m in rb.index for m in (m1, m2)):
                continue
            da, db = ra[hi_m] - ra[lo_m], rb[hi_m] - rb[lo_m]
            if da * db < 0:
                notes.append(
                    f"judges {ja} and {jb} disagree on {hi_m} vs {lo_m}: {ja} gives {ra[hi_m]:.0f} vs "
                    f"{ra[lo_m]:.0f}, {jb} gives {rb[hi_m]:.0f} vs {rb[lo_m]:.0f}, while the pooled "
                    f"intervals do not overlap ({hi_m} [{pooled.at[hi_m, 'ci_low']:.0f}, "
                    f"{pooled.at[hi_m, 'ci_high']:.0f}] above {lo_m} [{pooled.at[lo_m, 'ci_low']:.0f}, "
                    f"{pooled.at[lo_m, 'ci_high']:.0f}])")
    return notes


# --------------------------------------------------------------------------------------------
# Planning


def judge_call_count(n_questions: int, n_models: int, n_judges: int, both_orders: bool = True,
                     max_pairs_per_question: int | None = None) -> dict[str, float]:
    """Judge calls = questions x pairs x judges x (2 if both_orders else 1), where pairs = all
    C(n_models, 2) pairs or `max_pairs_per_question` k when smaller.

    ``ci_width_factor`` ~ sqrt(all_pairs / k): how much wider the rating intervals get with k
    pairs per question than with all pairs. An approximation: it assumes the interval width goes
    as 1 / sqrt(battles per model) and that the sampled pairs are spread evenly (`sample_pairs`);
    it ignores that fewer direct comparisons per question also weaken the within-question
    correlation structure, so treat it as a planning figure, not a guarantee."""
    if n_models < 2 or n_questions < 1 or n_judges < 1:
        raise DataError("need n_models >= 2, n_questions >= 1 and n_judges >= 1")
    all_pairs = n_models * (n_models - 1) // 2
    k = all_pairs if max_pairs_per_question is None else int(max_pairs_per_question)
    if k < 1:
        raise DataError("max_pairs_per_question must be >= 1")
    k = min(k, all_pairs)
    orders = 2 if both_orders else 1
    calls = n_questions * k * n_judges * orders
    return {"n_questions": n_questions, "n_models": n_models, "n_judges": n_judges, "both_orders": bool(both_orders),
            "all_pairs": all_pairs, "pairs_per_question": k, "judge_calls": calls,
            "battles_per_model": 2 * calls / n_models, "ci_width_factor": math.sqrt(all_pairs / k)}


def sample_pairs(models: list[str], questions: list[Any], max_pairs_per_question: int | None = None,
                 seed: int = 0, both_orders: bool = False) -> pd.DataFrame:
    """Which pairs to judge on each question: ``question_id, model_a, model_b``. With k =
    `max_pairs_per_question` below all pairs, each question gets k distinct pairs, taken in turn
    from one seeded random permutation of all pairs, so every pair is judged on about the same
    number of questions; the order shown (a/b) is random. ``both_orders`` adds the swapped row."""
    models = list(dict.fromkeys(models))
    if len(models) < 2:
        raise DataError("need at least two models")
    rng = np.random.default_rng(seed)
    pairs = list(itertools.combinations(models, 2))
    k = len(pairs) if max_pairs_per_question is None else min(int(max_pairs_per_question), len(pairs))
    if k < 1:
        raise DataError("max_pairs_per_question must be >= 1")
    perm = [pairs[i] for i in rng.permutation(len(pairs))]
    rows = []
    for qi, q in enumerate(questions):
        for j in range(k):
            a, b = perm[(qi * k + j) % len(perm)]
            if rng.random() < 0.5:
                a, b = b, a
            rows.append((q, a, b))
            if both_orders:
                rows.append((q, b, a))
    return pd.DataFrame(rows, columns=["question_id", "model_a", "model_b"])
