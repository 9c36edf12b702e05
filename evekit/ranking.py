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
  The fit works on the sufficient statistics: per question and pair of models, the number of
  rows and the summed score (a row (b, a, 1 - s) is the same term as (a, b, s)); with style
  control, rows with equal question, pair and length difference (the same two answers, other
  judges or the other order) pool into one cell. The likelihood is unchanged.
  Optimiser: Newton's method with the exact Hessian, for many fits at once (all bootstrap
  resamples of a block side by side); one model is the reference (beta = 0) during the fit, then
  the scale is re-centred. It stops when the gradient norm is below 1e-9 or a step moves no
  log-odds coefficient by 1e-3 (the error left is about the step squared: under 0.001 points).
* **Scale.** rating = 400 / ln(10) * beta (400 points per factor 10 in the odds), shifted so the
  mean rating of the fitted models is 1000, or the baseline's rating is 1000 when one is set.
* **Intervals.** Bootstrap over questions (battles on one question are correlated; with
  ``clusters``, over clusters of questions, each drawn with all its questions): resample the
  question ids with replacement, refit, take the percentile interval (default 95%). Seeded: one
  ``rng.integers(0, n, n)`` call per resample, as the battle-by-battle refits before did, so a
  seed gives the same resamples. A resample reweights the per-question tables by how often each
  question was drawn. A resample whose comparison graph is disconnected has no defined ratings
  and is left out of the percentiles (their number is in ``ratings.attrs["undefined_resamples"]``).
  With a baseline, a model's interval is the interval of its difference to the baseline (+1000).
* **Rank.** 1 + the number of models whose interval lies entirely above this model's interval
  (Chatbot Arena's rule), within one judge (or pooled).
* **Style control** (as in Arena-Hard): the same fit with the normalised length difference
  ``d = (len_a - len_b) / (len_a + len_b)`` as a covariate; the style ratings are the model
  coefficients of that fit, on the same scale. Needs ``len_a`` and ``len_b`` columns (answer
  lengths, e.g. in characters or tokens); without them the style columns are NaN.
* **Separation.** If a model wins (or loses) every battle the maximum-likelihood rating does not
  exist; the optimiser then stops at a very large finite value (where exactly depends on the
  optimiser; the other models' differences are those of their battles among themselves). No prior is
  added on purpose.
* **Cost.** Plain: O(resamples x (question-pair cells + K^3)) per Newton step, about three steps;
  style: O(resamples x style cells) per step. 50 models x 2,000 questions x 3 judges (300,000
  battles) with 1,000 resamples, pooled and per judge, plain and style: about 12 s of one core,
  350 MB (benchmarks/bench_ranking_scale.py).

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
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.special import expit
from scipy.stats import kendalltau
from threadpoolctl import threadpool_limits

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


class _Battles:
    """One group's usable battles as sufficient statistics.

    Each row is read as its unordered pair (pi < pj) with the score of pi (s, or 1 - s when pj was
    shown first): the row's likelihood term is the same either way. Plain fit: per question and
    pair, the number of rows and the summed score (`counts`, `scores`: pair x question). Style
    fit: rows with equal question, pair and length difference d (the same two answers, judged by
    several judges or in both orders) pooled into one cell (`cell_*`). A bootstrap resample of the
    questions then only reweights these tables."""

    def __init__(self, df: pd.DataFrame, style: bool):
        self.models = sorted(set(df["model_a"].unique()) | set(df["model_b"].unique()))
        if len(self.models) < 2:
            raise DataError("battles need at least two models with a usable verdict")
        index = pd.Index(self.models)
        self.m = m = len(self.models)
        a = index.get_indexer(df["model_a"])
        b = index.get_indexer(df["model_b"])
        s = df["s"].to_numpy(float)
        # questions in sorted order: a resample's question indices mean what they always meant
        q, self.questions = pd.factorize(df["question_id"], sort=True)
        self.questions = np.asarray(self.questions, dtype=object)
        self.nq = nq = len(self.questions)
        self.n_battles = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
        flip = a > b
        s_lo = np.where(flip, 1.0 - s, s)
        pairs, pair = np.unique(np.minimum(a, b) * m + np.maximum(a, b), return_inverse=True)
        pair = pair.reshape(-1)
        self.pi, self.pj = pairs // m, pairs % m
        self.n_pairs = n_pairs = len(pairs)
        # the pair -> model incidence (+1 for pi, -1 for pj): log-odds of each pair = D @ beta
        rows = np.repeat(np.arange(n_pairs), 2)
        cols = np.column_stack([self.pi, self.pj]).reshape(-1)
        signs = np.tile([1.0, -1.0], n_pairs)
        self.D = sparse.csr_matrix((signs, (rows, cols)), shape=(n_pairs, m))
        key = q * n_pairs + pair
        cells, inv = np.unique(key, return_inverse=True)
        inv = inv.reshape(-1)
        shape = (n_pairs, nq)
        self.counts = sparse.csr_matrix((np.bincount(inv).astype(float), (cells % n_pairs, cells // n_pairs)), shape)
        self.scores = sparse.csr_matrix((np.bincount(inv, weights=s_lo), (cells % n_pairs, cells // n_pairs)), shape)
        self.has_style = style
        self._maps: dict[bool, tuple[sparse.csr_matrix, sparse.csr_matrix]] = {}
        if style:
            if "len_a" not in df.columns or "len_b" not in df.columns:
                raise DataError("style control needs the answer lengths: columns len_a and len_b")
            la = pd.to_numeric(df["len_a"], errors="coerce").to_numpy(float)
            lb = pd.to_numeric(df["len_b"], errors="coerce").to_numpy(float)
            if not (np.isfinite(la).all() and np.isfinite(lb).all()) or (la < 0).any() or (lb < 0).any():
                raise DataError("len_a / len_b must be non-negative numbers on every row with a verdict")
            tot = la + lb
            d = np.divide(la - lb, tot, out=np.zeros_like(tot), where=tot > 0)
            # oriented like the score; + 0.0 turns -0.0 into 0.0 so equal d pool into one cell
            d_lo = np.where(flip, -d, d) + 0.0
            both = np.column_stack([key, d_lo.view(np.int64)])
            uniq, inv = np.unique(both, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            self.cell_q = uniq[:, 0] // n_pairs
            self.cell_pair = uniq[:, 0] % n_pairs
            self.cell_d = np.ascontiguousarray(uniq[:, 1]).view(np.float64)
            self.cell_n = np.bincount(inv).astype(float)
            self.cell_y = np.bincount(inv, weights=s_lo)
            n_cells = len(self.cell_n)
            cells = np.arange(n_cells)
            # the design, cells x (models + length): eta = X @ [0, beta_1.., gamma]
            self.X = sparse.csr_matrix(
                (np.concatenate([np.ones(n_cells), -np.ones(n_cells), self.cell_d]),
                 (np.tile(cells, 3), np.concatenate([self.pi[self.cell_pair], self.pj[self.cell_pair],
                                                     np.full(n_cells, m)]))), shape=(n_cells, m + 1))
            # the sums the gradient and the Hessian need, each in one sparse product over the cells:
            # per pair (r), and over all cells (r d); per pair (v), per pair (v d), all cells (v d^2)
            S = sparse.csr_matrix((np.ones(n_cells), (self.cell_pair, cells)), shape=(n_pairs, n_cells))
            dS = sparse.csr_matrix((self.cell_d, (self.cell_pair, cells)), shape=(n_pairs, n_cells))
            self.sum_r = sparse.vstack([S, self.cell_d[None, :]], format="csr")
            self.sum_v = sparse.vstack([S, dS, (self.cell_d ** 2)[None, :]], format="csr")

    def connected(self, n_pair: np.ndarray) -> np.ndarray:
        """Per column of `n_pair` (pairs x resamples: battles of each pair), whether the models
        that met form one comparison graph: scipy's connected components of one graph holding
        every resample's graph side by side (one call for all resamples)."""
        n_res = n_pair.shape[1]
        p, r = np.nonzero(n_pair > 0)
        graph = sparse.coo_matrix((np.ones(len(p)), (r * self.m + self.pi[p], r * self.m + self.pj[p])),
                                  shape=(n_res * self.m,) * 2)
        labels = connected_components(graph, directed=False)[1].reshape(n_res, self.m)
        return (labels == labels[:, :1]).all(axis=1)

    def derivative_maps(self, style: bool) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
        """Sparse maps from the per-pair sums to the gradient and the (flattened) Hessian of the free
        coefficients (models 1..m-1 [, gamma]): ``g = G @ sums_r``, ``H = Hm @ sums_v``, where the
        sums are per pair (plain), or `sum_r` / `sum_v`'s rows (style). The Hessian is the weighted
        Laplacian of the comparison graph without the reference model's row and column, plus, with
        style, the length covariate's row and column."""
        if style in self._maps:
            return self._maps[style]
        m, P = self.m, self.n_pairs
        k = m - 1 + (1 if style else 0)
        pairs = np.arange(P)
        fi, fj = self.pi - 1, self.pj - 1  # free coefficient indices; -1 is the reference model
        g, h = [], []  # (rows, cols, values) pieces
        for u, sign in ((fi, 1.0), (fj, -1.0)):
            keep = u >= 0
            g.append((u[keep], pairs[keep], np.full(keep.sum(), sign)))
        for u, w, sign in ((fi, fi, 1.0), (fj, fj, 1.0), (fi, fj, -1.0), (fj, fi, -1.0)):
            keep = (u >= 0) & (w >= 0)
            h.append((u[keep] * k + w[keep], pairs[keep], np.full(keep.sum(), sign)))
        if style:
            gam = k - 1
            g.append((np.array([gam]), np.array([P]), np.array([1.0])))
            for u, sign in ((fi, 1.0), (fj, -1.0)):
                keep = u >= 0
                vals = np.full(keep.sum(), sign)
                h.append((u[keep] * k + gam, P + pairs[keep], vals))
                h.append((gam * k + u[keep], P + pairs[keep], vals))
            h.append((np.array([gam * k + gam]), np.array([2 * P]), np.array([1.0])))

        def build(pieces, shape):
            rows, cols, vals = (np.concatenate(x) for x in zip(*pieces))
            return sparse.csr_matrix((vals, (rows, cols)), shape=shape)

        self._maps[style] = (build(g, (k, P + (1 if style else 0))),
                             build(h, (k * k, P * (2 if style else 1) + (1 if style else 0))))
        return self._maps[style]

    def ratings(self, coef: np.ndarray, baseline: str | None) -> np.ndarray:
        """Elo-scale ratings from coefficients (a vector, or one row per fit)."""
        c = np.atleast_2d(coef)
        r = ELO_SCALE * np.column_stack([np.zeros(len(c)), c[:, : self.m - 1]])
        ref = r[:, self.models.index(baseline)] if baseline is not None else r.mean(axis=1)
        out = r - ref[:, None] + CENTER
        out[np.isnan(c).any(axis=1)] = np.nan  # an undefined fit stays undefined, baseline or not
        return out if np.ndim(coef) == 2 else out[0]

    def fit(self, weights: np.ndarray | None = None, start: np.ndarray | None = None,
            style: bool = False) -> np.ndarray:
        """Coefficients (models 1..m-1 [, gamma with `style`]; model 0 is the reference, beta = 0),
        one row per column of `weights` (questions x resamples: how often each question is drawn;
        None: each once); NaN rows where the resample's comparison graph is not connected.
        `start`: the starting coefficients (a vector, or one row per resample)."""
        if style and not self.has_style:
            raise ValueError("built without the style covariate")
        w = np.ones((self.nq, 1)) if weights is None else np.asarray(weights, float)
        n_res = w.shape[1]
        k = self.m - 1 + (1 if style else 0)
        x0 = np.zeros(k) if start is None else np.asarray(start, float)
        x0 = np.broadcast_to(x0, (n_res, k))
        out = np.full((n_res, k), np.nan)
        width = len(self.cell_n) if style else self.n_pairs
        chunk = max(1, min(n_res, _BLOCK // max(width, (k + 1) ** 2)))
        # many small solves: OpenBLAS's threads would spin-wait for each other (a 100-model
        # bootstrap on a busy 2-core machine took 9 times as long with them)
        with threadpool_limits(limits=1, user_api="blas"):
            self._fit_blocks(w, x0, out, chunk, style)
        return out

    def _fit_blocks(self, w: np.ndarray, x0: np.ndarray, out: np.ndarray, chunk: int, style: bool) -> None:
        """`fit`'s work, `chunk` resamples at a time (the memory stays bounded), into `out`."""
        n_res = w.shape[1]
        for lo in range(0, n_res, chunk):
            cols = slice(lo, min(n_res, lo + chunk))
            wc = w[:, cols]
            n = np.asarray(self.counts @ wc)
            ok = self.connected(n)
            if not ok.any():
                continue
            wc = wc[:, ok]
            if style:
                wq = wc[self.cell_q]
                n, y = self.cell_n[:, None] * wq, self.cell_y[:, None] * wq
            else:
                n, y = n[:, ok], np.asarray(self.scores @ wc)
            idx = np.arange(cols.start, cols.stop)[ok]
            out[idx] = _newton(self, n, y, x0[idx], style)


_BLOCK = 1_000_000  # cells x resamples per block of bootstrap fits (8 MB per array; larger is no faster)
_GTOL = 1e-9  # gradient norm at which a fit stops (scipy's trust-exact gtol, which this replaced)
# a Newton step below this (log-odds; 0.17 rating points) leaves an error of about its square
# (under 0.001 points): the fit is done. 1e-5 costs a third more time for the style fits.
_XTOL = 1e-3
_MAXITER = 200


def _newton(bt: _Battles, n: np.ndarray, y: np.ndarray, theta: np.ndarray, style: bool) -> np.ndarray:
    """Maximum likelihood for every column of `n`, `y` at once (cells x fits: battles and score
    of the first model of each cell), from the starting coefficients `theta` (fits x k): Newton's
    method with the exact Hessian (`_Battles.derivative_maps`), until the gradient norm is below
    `_GTOL` or a step moves no coefficient by `_XTOL`.

    A full step is taken without evaluating the likelihood when it changes no cell's log-odds
    by more than ln 2 / 1.5: n p (1 - p) then changes by less than a factor 2 along the step, so
    the likelihood provably rises. Longer steps (far from the optimum) are halved until it rises.
    Separation (a model that wins every battle) drives a coefficient up by about one per step
    until the gradient is that small: a very large finite value, as before."""
    m = bt.m
    k = m - 1 + (1 if style else 0)
    grad_map, hess_map = bt.derivative_maps(style)
    d_max = float(np.abs(bt.cell_d).max()) if style and len(bt.cell_d) else 0.0
    diag_idx = np.arange(k)
    theta = np.array(theta, float)
    result = theta.copy()
    live = np.arange(len(theta))  # the fits still iterating (indices into theta / result)

    def full(th: np.ndarray) -> np.ndarray:  # fits x (m [+ 1]): the reference model's 0 added
        return np.column_stack([np.zeros(len(th)), th])

    def cell_eta(th: np.ndarray) -> np.ndarray:
        return bt.X @ full(th).T if style else bt.D @ full(th).T

    def loss(eta: np.ndarray, nn: np.ndarray, yy: np.ndarray) -> np.ndarray:
        return (nn * np.logaddexp(0.0, eta) - yy * eta).sum(axis=0)

    # bootstrap fits all start at the full data's estimate: one column of log-odds serves them all
    same_start = len(theta) > 1 and bool((theta == theta[0]).all())
    eta = cell_eta(theta[:1] if same_start else theta)
    for _ in range(_MAXITER):
        if eta.shape[1] < n.shape[1]:
            p = expit(eta)
            r = n * p  # n p
            v = n * (p * (1.0 - p))  # n p (1 - p)
        else:
            v = expit(eta)
            r = np.multiply(n, v)
            np.subtract(1.0, v, out=v)
            np.multiply(v, r, out=v)
        np.subtract(r, y, out=r)  # n p - y
        if style:
            r, v = bt.sum_r @ r, bt.sum_v @ v
        g = (grad_map @ r).T
        done = np.sqrt((g * g).sum(axis=1)) < _GTOL
        if done.all():
            break
        H = np.ascontiguousarray((hess_map @ v).T).reshape(len(theta), k, k)
        # a tiny ridge keeps a flat direction (e.g. all d = 0) solvable; the stopping rule is the gradient's
        H[:, diag_idx, diag_idx] += 1e-12 * (1.0 + H[:, diag_idx, diag_idx].max(axis=1, keepdims=True))
        try:
            step = np.linalg.solve(H, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            step = (np.linalg.pinv(H) @ g[:, :, None])[:, :, 0]
        step[done] = 0.0
        new = theta - step
        # the largest change of a cell's log-odds along the step
        reach = np.abs(bt.D @ full(step[:, : m - 1]).T).max(axis=0) + (np.abs(step[:, -1]) * d_max if style else 0.0)
        long = np.flatnonzero(reach > math.log(2.0) / 1.5)
        stuck = np.zeros(len(theta), dtype=bool)
        if len(long):  # step halving where the likelihood would fall
            nl, yl = n[:, long], y[:, long]
            f0 = loss(np.broadcast_to(eta, n.shape)[:, long], nl, yl)
            t = np.ones(len(long))
            worse = np.ones(len(long), dtype=bool)
            for _ in range(40):
                j = np.flatnonzero(worse)
                cand = theta[long[j]] - t[j, None] * step[long[j]]
                fj = loss(cell_eta(cand), nl[:, j], yl[:, j])
                ok = fj <= f0[j] + 1e-12 * (1.0 + np.abs(f0[j]))
                new[long[j[ok]]] = cand[ok]
                worse[j[ok]] = False
                if not worse.any():
                    break
                t[worse] /= 2
            stuck[long[worse]] = True  # no rise found: as good as the precision allows
            new[long[worse]] = theta[long[worse]]
        small = np.abs(step).max(axis=1) < _XTOL
        theta = new
        result[live] = theta
        finished = done | stuck | small
        if finished.all():
            break
        if finished.mean() > 0.25:  # drop the finished fits from the working set
            keep = ~finished
            live, theta, n, y = live[keep], theta[keep], n[:, keep], y[:, keep]
        eta = cell_eta(theta)
    result[live] = theta
    return result


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
    bt = _Battles(_frame(battles, judge), style)
    if baseline is not None and baseline not in bt.models:
        raise DataError(f"baseline {baseline!r} has no usable battles" + (f" for judge {judge!r}" if judge else ""))
    coef = bt.fit(style=style)[0]
    if np.isnan(coef).any():
        raise DataError("the models' comparison graph is not connected: some groups of models never "
                        "met each other, so their ratings are not on one scale")
    out = pd.Series(bt.ratings(coef, baseline), index=pd.Index(bt.models, name="model"), name="rating")
    if style:
        out.attrs["style_coef"] = float(coef[-1])
    return out


def assign_ranks(ci_low: Any, ci_high: Any) -> np.ndarray:
    """Chatbot Arena's rule: 1 + the number of models whose interval lies entirely above this
    model's interval (their ci_low > this ci_high)."""
    lo, hi = np.asarray(ci_low, float), np.asarray(ci_high, float)
    return 1 + (lo[None, :] > hi[:, None]).sum(axis=1)


def _resample_weights(n_questions: int, n_boot: int, seed: int) -> np.ndarray:
    """How often each question is drawn in each bootstrap resample (questions x resamples): one
    ``rng.integers(0, n, n)`` call per resample of ``numpy.random.default_rng(seed)``, so a seed
    gives the same resamples as the battle-by-battle refits of earlier versions did."""
    rng = np.random.default_rng(seed)
    w = np.empty((n_questions, n_boot))
    for i in range(n_boot):
        w[:, i] = np.bincount(rng.integers(0, n_questions, n_questions), minlength=n_questions)
    return w


def _cluster_weights(questions: np.ndarray, clusters: Any, n_boot: int, seed: int) -> np.ndarray:
    """`_resample_weights` when the questions' clusters are resampled (questions x resamples):
    every question of a drawn cluster comes with it (`stats.cluster_bootstrap_weights`)."""
    from evekit.stats import cluster_bootstrap_weights

    lookup = {str(k): v for k, v in dict(clusters).items()}
    missing = [q for q in questions if q not in lookup or pd.isna(lookup[q])]
    if missing:
        raise DataError(f"cluster_by: {len(missing)} question(s) of the battles have no cluster, e.g. "
                        f"{', '.join(map(str, missing[:3]))}")
    return cluster_bootstrap_weights([lookup[q] for q in questions], n_boot, seed).T


def _fit_group(df: pd.DataFrame, judge: str, baseline: str | None, n_boot: int, seed: int,
               level: float, with_style: bool, clusters: Any = None) -> tuple[pd.DataFrame, int, pd.DataFrame | None]:
    bt = _Battles(df, style=with_style)
    if baseline is not None and baseline not in bt.models:
        raise DataError(f"baseline {baseline!r} has no usable battles for judge {judge!r}")
    coef = bt.fit()[0]
    if np.isnan(coef).any():
        raise DataError(f"judge {judge!r}: the models' comparison graph is not connected, "
                        "so their ratings are not on one scale")
    r = bt.ratings(coef, baseline)
    s_coef = bt.fit(style=True)[0] if with_style else None
    sr = bt.ratings(s_coef, baseline) if with_style else np.full(bt.m, np.nan)
    lo = hi = slo = shi = np.full(bt.m, np.nan)
    undefined = 0
    draws = None
    if n_boot > 0:
        w = (_resample_weights(bt.nq, n_boot, seed) if clusters is None
             else _cluster_weights(bt.questions, clusters, n_boot, seed))
        boot = bt.ratings(bt.fit(w, start=coef), baseline)  # NaN rows: disconnected resamples
        undefined = int(np.isnan(boot).any(axis=1).sum())
        draws = pd.DataFrame(boot, columns=pd.Index(bt.models, name="model"))
        tail = 100 * (1 - level) / 2
        if np.isfinite(boot).any():
            lo, hi = np.nanpercentile(boot, [tail, 100 - tail], axis=0)
        if with_style:
            sboot = bt.ratings(bt.fit(w, start=s_coef, style=True), baseline)
            if np.isfinite(sboot).any():
                slo, shi = np.nanpercentile(sboot, [tail, 100 - tail], axis=0)
    out = pd.DataFrame({"model": bt.models, "judge": judge, "rating": r, "ci_low": lo, "ci_high": hi,
                        "n_battles": bt.n_battles, "style_rating": sr, "style_ci_low": slo,
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
         keep_draws: bool = False, clusters: Any = None) -> pd.DataFrame:
    """The ratings.csv rows: per judge (each judge's battles alone) and pooled (all judges'
    battles together, each row once), with question-bootstrap percentile intervals, style-controlled
    ratings (when the table has len_a/len_b, or ``style=True``; ``style=False`` skips them), ranks
    and n_battles. ``per_judge=False`` fits the pooled rows only. Sorted by judge (pooled first), then rank and rating.

    ``attrs``: ``excluded`` (judge -> rows with an empty winner), ``undefined_resamples``
    (judge -> resamples with a disconnected comparison graph, left out), ``n_boot``, ``seed``,
    ``level``, ``baseline``; with ``keep_draws=True`` also ``draws`` (judge -> DataFrame of the
    bootstrap ratings, one row per resample, NaN rows for undefined ones), e.g. for intervals of
    rating differences or P(model A above model B).

    ``clusters`` (question_id -> cluster, a mapping or Series; `cluster_by`): the bootstrap
    resamples clusters, each with all its questions, instead of questions; ``attrs["n_clusters"]``.
    With every question its own cluster the resamples are the question bootstrap's."""
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
        part, u, d = _fit_group(sub, judge, baseline, n_boot, seed, level, with_style, clusters)
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
    if clusters is not None:
        used = set(df["question_id"])
        out.attrs["n_clusters"] = len({v for k, v in dict(clusters).items() if str(k) in used})
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
