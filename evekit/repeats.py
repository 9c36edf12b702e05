"""Statistics of repeated answers and clustered items: per-item reducers, the repeat-aware interval,
the within/between-item variance decomposition, projections, clustered intervals and paired
differences that respect items and clusters.

Data come long: one value per row (an item's answer under one repeat; NaN = a failed call, dropped),
the row's item id and, with `cluster_by`, its cluster. The metric is the mean over items of the
per-item means (an item counts once however many repeats it has); its interval resamples whole
units: items with all their repeats, or clusters with all their items (Miller 2024, "Adding Error
Bars to Evals", sections 3-5).

Interval methods (measured in benchmarks/bench_repeat_coverage.py; figures in benchmarks/README.md):

* one answer per item, no clusters: exactly `stats.interval`'s (Wilson for 0/1 values, BCa for
  graded ones), so a run with `repeats: 1` reports what it reported before.
* otherwise, for values within known bounds (0/1, or graded in [0, 1]): a score interval with an
  effective sample size (Wilson with the design effect and a t quantile, after Kish and Dean &
  Pagano 2015): n_eff = theta (1 - theta) / Var, Var the cluster-robust (CR1) variance of the mean
  over the resampled units (items, or clusters), z replaced by t with (units - 1) degrees of
  freedom; values rescaled to [0, 1] by the metric's bounds. n_eff lies between the effective
  number of units (every answer of a unit alike) and, for 0/1 values, the number of answers
  (design effect >= 1). Var adds `PSEUDO_UNITS` of a unit at each bound: a sample of few units can
  miss a rare tail of the population (items mostly solved and a few rarely, a cluster that fails),
  which a mean over repeats or over a cluster's items does not show the way one 0/1 answer does.
  Without it coverage was 0.91 at mean 0.95, Beta(1.9, 0.1) items, n = 30, k = 10, and 0.87-0.89
  with 10 clusters at mean 0.95; with it 0.945-0.978 over the 36 cells with repeats and
  0.958-0.990 with clusters; the price (prototype grid, 8,000 datasets per cell): widths 1% above
  the interval without it on items on average (12% at most, n = 30, mean 0.95), and up to 50% above
  it with 10 clusters at mean 0.95.
* graded values with repeats: the same score interval on items; BCa over the per-item means
  covered 0.90-0.93 at mean 0.95, n = 30, the score interval 0.94-0.99 (widths 5-25% more there,
  within 1% at n = 300).
* unbounded values (bounds None): BCa over the per-item means, or with clusters t with
  (clusters - 1) degrees of freedom on the CR1 SE.

Cluster-robust standard errors in a score interval were chosen over resampling clusters and over
the plain t interval: with 10 clusters (intra-cluster correlation 0.2) the t interval on the same
SE covered 0.78-0.96 with graded answers, 0.78-0.81 at mean 0.95, and a BCa bootstrap over the
clusters 0.81-0.93 in a prototype (graded answers, k = 3, 1,000 datasets per cell).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from evekit import stats
from evekit.stats import cluster_bootstrap_weights  # here too: the repeats' vocabulary
from evekit.errors import DataError, ParameterError

__all__ = [
    "REDUCERS",
    "PSEUDO_UNITS",
    "repeat_seed",
    "reduce_repeats",
    "pass_at",
    "pass_all",
    "variance_components",
    "repeat_interval",
    "projected_interval",
    "paired_difference",
    "cluster_bootstrap_weights",
    "Design",
    "check_reducer",
]

REDUCERS = ("mean", "mode", "pass_at_k", "pass_all_k")  # and pass_at_<j>, pass_all_<j> (j <= repeats)
# A twentieth of a pseudo-unit at each bound of the values, added to the variance of the mean (see
# the module docstring); chosen by measured coverage, the smallest of 0.05, 0.1, 0.2, 0.3 that held.
PSEUDO_UNITS = 0.05
_REDUCER = re.compile(r"^pass_(at|all)_(k|[1-9][0-9]*)$")


# ---------------------------------------------------------------------------------------------
# The long table of repeats, grouped per item and per unit


@dataclass(frozen=True)
class _Design:
    items: np.ndarray        # item ids, in order of first appearance
    means: np.ndarray        # per-item mean over its usable repeats
    counts: np.ndarray       # usable repeats per item
    within: np.ndarray       # per-item sample variance of the repeats (ddof=1), NaN with one repeat
    unit: np.ndarray         # per item: index of its resampling unit (itself, or its cluster)
    n_units: int
    values: np.ndarray       # every usable value (for the naive variance)
    clustered: bool


def _array(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(getattr(values, "to_numpy", lambda: values)())
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be one value per row, got shape {arr.shape}")
    return arr


def _label(value: Any) -> str:
    """An item or cluster id as a message shows it: 17, 'doc-3' (not np.int64(17))."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _design(values: Any, items: Any, clusters: Any = None) -> _Design:
    """Group long rows (value, item[, cluster]) into items; rows with a NaN value are dropped."""
    import pandas as pd

    v = _array(values, "values").astype(float)
    it = _array(items, "items")
    if len(it) != len(v):
        raise ParameterError(f"values and items differ in length ({len(v)} and {len(it)})")
    keep = ~np.isnan(v)
    codes, ids = pd.factorize(it[keep])  # items in order of first appearance
    x = v[keep]
    n = len(ids)
    counts = np.bincount(codes, minlength=n)
    sums = np.bincount(codes, weights=x, minlength=n)
    means = sums / np.maximum(counts, 1)
    dev = np.bincount(codes, weights=(x - means[codes]) ** 2, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        within = np.where(counts >= 2, dev / (counts - 1), np.nan)
    if clusters is None:
        return _Design(np.asarray(ids), means, counts, within, np.arange(n), n, x, False)
    cl = _array(clusters, "clusters")
    if len(cl) != len(v):
        raise ParameterError(f"values and clusters differ in length ({len(v)} and {len(cl)})")
    lacking = pd.isna(cl)
    if lacking.any():
        raise DataError(f"cluster_by: item {_label(it[np.flatnonzero(lacking)[0]])} has no cluster value "
                        f"({int(lacking.sum())} rows lack one); fill the column or drop those items")
    ccodes, _ = pd.factorize(cl[keep])
    first = np.full(n, -1)
    first[codes[::-1]] = ccodes[::-1]  # each item's cluster at its first row
    if (first[codes] != ccodes).any():
        raise DataError(f"cluster_by: item {_label(ids[codes[first[codes] != ccodes][0]])} lies in more than one "
                        "cluster; an item's repeats must share its cluster")
    unit, _ = pd.factorize(first)
    return _Design(np.asarray(ids), means, counts, within, unit, int(unit.max()) + 1 if n else 0, x, True)


def _binary(x: np.ndarray) -> bool:
    return bool(np.isin(x, (0.0, 1.0)).all())


def repeat_seed(seed: int, repeat: int) -> int:
    """The seed of repeat `repeat` of a run seeded `seed`: the run's own seed for repeat 0 (a run with
    one repeat is the run without repeats, cache keys included), else a 31-bit draw from
    SeedSequence([seed, repeat]). One recipe for the sampling seed sent and the few-shot draw."""
    if repeat < 0:
        raise ParameterError(f"repeat must be >= 0, got {repeat}")
    if repeat == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed) % 2**32, int(repeat)]).generate_state(1)[0] >> 1)


# ---------------------------------------------------------------------------------------------
# Reducers (Inspect's epochs reducers)


def pass_at(correct: int, total: int, j: int) -> float:
    """Unbiased pass@j of one item with `correct` of `total` repeats right (Chen et al. 2021):
    the chance that at least one of j repeats drawn without replacement is right."""
    if not 1 <= j <= total:
        raise ParameterError(f"pass_at_{j}: needs 1 <= j <= the item's repeats ({total})")
    return 1.0 - math.comb(total - correct, j) / math.comb(total, j)


def pass_all(correct: int, total: int, j: int) -> float:
    """Unbiased pass^j of one item: the chance that all of j repeats drawn without replacement are right."""
    if not 1 <= j <= total:
        raise ParameterError(f"pass_all_{j}: needs 1 <= j <= the item's repeats ({total})")
    return math.comb(correct, j) / math.comb(total, j)


def check_reducer(reducer: str) -> re.Match[str] | None:
    if reducer in ("mean", "mode"):
        return None
    match = _REDUCER.match(reducer)
    if match is None:
        raise ParameterError(f"unknown reducer {reducer!r}; choose from {', '.join(REDUCERS)} "
                             "(or pass_at_<j>, pass_all_<j>)")
    return match


def _mode(x: np.ndarray) -> float:
    vals, counts = np.unique(x, return_counts=True)
    return float(vals[np.flatnonzero(counts == counts.max())[0]])  # a tie takes the lowest: a tie fails


def reduce_repeats(values: Any, items: Any, reducer: str = "mean") -> Any:
    """One value per item from its repeats (rows with NaN, failed calls, are dropped): a pandas
    Series indexed by item id, in order of first appearance.

    `mean`: the share of repeats right (or the mean score); `mode`: the most common value, a tie
    taking the lower one (as a tied vote fails); `pass_at_k`: 1 when any repeat is right;
    `pass_all_k`: 1 when every repeat is. `pass_at_<j>` / `pass_all_<j>` (j <= the item's repeats):
    the unbiased estimators of pass@j and pass^j; those two need 0/1 values.
    """
    import pandas as pd

    match = check_reducer(reducer)
    d = _design(values, items)
    if reducer == "mean":
        out = d.means
    elif reducer == "mode":
        rows = pd.DataFrame({"v": _array(values, "values").astype(float), "item": _array(items, "items")})
        out = rows.dropna(subset=["v"]).groupby("item", sort=False)["v"].agg(_mode).to_numpy(float)
    else:
        assert match is not None
        if not _binary(d.values):
            raise ParameterError(f"{reducer} needs 0/1 scores (right or wrong per repeat)")
        correct = np.rint(d.means * d.counts).astype(int)
        fn = pass_at if match.group(1) == "at" else pass_all
        out = np.array([fn(c, t, t if match.group(2) == "k" else int(match.group(2)))
                        for c, t in zip(correct, d.counts)])
    return pd.Series(out, index=pd.Index(d.items, name="item"), name=reducer)


# ---------------------------------------------------------------------------------------------
# Variance decomposition (Miller 2024, section 4)


def _components(d: _Design) -> dict[str, Any]:
    n = len(d.means)
    k_inv = float(np.mean(1.0 / d.counts)) if n else float("nan")
    multi = d.counts >= 2
    var_means = float(np.var(d.means, ddof=1)) if n >= 2 else float("nan")
    if multi.any():
        var_within = float(np.mean(d.within[multi]))
        raw_between = var_means - var_within * k_inv
        var_between = max(0.0, raw_between)
        share_within = min(1.0, var_within * k_inv / var_means) if var_means > 0 else float("nan")
    else:  # one answer per item: run-to-run and item-to-item variance cannot be told apart
        var_within = var_between = raw_between = share_within = float("nan")
    return {"var_within": var_within, "var_between": var_between, "var_between_raw": raw_between,
            "var_item_means": var_means, "share_within": share_within,
            "share_between": 1.0 - share_within if np.isfinite(share_within) else float("nan"),
            "repeats": float(1.0 / k_inv) if n else float("nan")}


def variance_components(values: Any, items: Any) -> dict[str, Any]:
    """Within-item (run-to-run) and between-item variance of per-repeat values, Miller's section 4.

    var_within = mean over items of the sample variance of its repeats (ddof=1; items with >= 2
    repeats); var_between = var(item means, ddof=1) - var_within * mean(1 / k_i), the method of
    moments (for a balanced design the REML estimate of a one-way random-effects model, clipped at
    0; `var_between_raw` keeps the unclipped value). Var(mean) = (var_between + var_within / k) / n,
    so `share_within` / `share_between` are the parts of the interval's variance due to run-to-run
    noise (more repeats shrink it) and to which items were drawn (only more items do). `repeats`
    is the harmonic mean of the repeats per item. NaN where one repeat per item leaves it unknown.
    """
    d = _design(values, items)
    out = {"value": float(d.means.mean()) if len(d.means) else float("nan"), "n": int(len(d.means))}
    return stats.tidy({**out, **_components(d)})


def projected_interval(result: Mapping[str, Any], *, repeats: float | None = None, items: float | None = None,
                       level: float = 0.95) -> dict[str, Any]:
    """The interval one would expect with `repeats` per item and `items` items (default: as now),
    from a `repeat_interval` (or `variance_components`) result: value +- z SE with
    SE^2 = (var_between + var_within / repeats) / items (Miller 2024, eq. 8). With clusters the
    variance is multiplied by the clusters' design effect measured now (assumes clusters of the
    same sizes). Normal-theory: compare its `half_width` with the current one, not its ends with
    the Wilson interval's."""
    from scipy.stats import norm

    vb, vw = result.get("var_between", float("nan")), result.get("var_within", float("nan"))
    k = float(repeats if repeats is not None else result.get("repeats", float("nan")))
    n = float(items if items is not None else result["n"])
    if k <= 0 or n <= 0:
        raise ParameterError("projected_interval: repeats and items must be positive")
    var = (vb + vw / k) / n * float(result.get("design_effect_clusters", 1.0) or 1.0)
    se = math.sqrt(var) if np.isfinite(var) else float("nan")
    half = float(norm.ppf(0.5 + level / 2)) * se
    value = float(result["value"])
    return stats.tidy({"repeats": k, "items": n, "se": se, "half_width": half,
                        "ci_low": value - half, "ci_high": value + half})


# ---------------------------------------------------------------------------------------------
# The repeat-aware and clustered interval


def _unit_sums(d: _Design, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resampling unit: the sum of its items' values `x` and its number of items."""
    return (np.bincount(d.unit, weights=x, minlength=d.n_units),
            np.bincount(d.unit, minlength=d.n_units).astype(float))


def _robust_var(d: _Design, x: np.ndarray, theta: float, pseudo: float = 0.0) -> float:
    """CR1 variance of the mean over items of `x` (a ratio over units), with `pseudo` units of the
    mean size at 0 and at 1 (the score interval's guard against an unseen tail)."""
    n, g = len(x), d.n_units
    if g < 2:
        return float("nan")
    sums, sizes = _unit_sums(d, x)
    s = float(((sums - sizes * theta) ** 2).sum())
    s += pseudo * (n / g) ** 2 * (theta ** 2 + (1 - theta) ** 2)
    return g / (g - 1) * s / n ** 2


def _wilson(p: float, n: float, q: float) -> tuple[float, float]:
    """Wilson's score interval at a (possibly fractional) sample size n with quantile q."""
    denom = 1 + q * q / n
    centre = (p + q * q / (2 * n)) / denom
    half = q / denom * math.sqrt(max(p * (1 - p), 0.0) / n + q * q / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@functools.lru_cache(maxsize=256)
def _quantile(level: float, units: int) -> tuple[float, int | None]:
    """The two-sided quantile: t with units - 1 degrees of freedom, normal with one unit."""
    from scipy.stats import norm, t

    if units >= 2:
        return float(t.ppf(0.5 + level / 2, units - 1)), units - 1
    return float(norm.ppf(0.5 + level / 2)), None


def _score_interval(d: _Design, m: np.ndarray, *, binary: bool, level: float) -> tuple[float, float, float, int | None]:
    """(low, high, n_eff, df) of the effective-sample-size score interval on values `m` in [0, 1]."""
    theta = float(m.mean())
    _, sizes = _unit_sums(d, m)
    n = len(m)
    n_min = n * n / float((sizes ** 2).sum())  # effective number of units: answers within a unit all alike
    var = _robust_var(d, m, theta, PSEUDO_UNITS)
    spread = theta * (1 - theta)
    n_eff = spread / var if (np.isfinite(var) and var > 0 and spread > 0) else n_min
    n_eff = max(n_min, n_eff)
    if binary:  # repeats of one item are never negatively correlated: no more than one answer's worth each
        n_eff = min(n_eff, float(d.counts.sum()))
    q, df = _quantile(level, d.n_units)
    low, high = _wilson(theta, n_eff, q)
    return low, high, n_eff, df


def _naive_var(d: _Design) -> float:
    """Variance of the mean if every answer were an independent item."""
    return float(np.var(d.values, ddof=1)) / len(d.values) if len(d.values) >= 2 else float("nan")


def repeat_interval(values: Any, items: Any, *, clusters: Any = None, reducer: str = "mean",
                    kind: str | None = None, level: float = 0.95, seed: int = 0, n_boot: int = 2000,
                    bounds: tuple[float, float] | None = (0.0, 1.0)) -> dict[str, Any]:
    """The mean over items of the per-item reduced repeats, with an interval resampling items (all
    their repeats) or, with `clusters` (one label per row), clusters (all their items).

    `kind`: "proportion" (0/1 values) or "graded_mean" (values within `bounds`); default from the
    values. Returns evekit's metric dict {"value", "ci_low", "ci_high", "n" (items), "method", ...}
    plus `n_answers` (rows used), `repeats` (harmonic mean per item), `n_clusters`, `df`,
    `effective_n`, `se` (CR1), `design_effect` (the interval's variance over the variance if every
    answer were an independent item; Kish's 1 + (k - 1) ICC), with clusters
    `design_effect_clusters` (clusters over items), and the variance decomposition of
    `variance_components` (reducer "mean"). The method of each case is in the module docstring.
    """
    check_reducer(reducer)
    d = _design(values, items, clusters)
    if reducer != "mean":  # one value per item from here on: the design without repeats
        reduced = reduce_repeats(values, items, reducer)
        d = _Design(d.items, reduced.to_numpy(float), np.ones(len(reduced), dtype=int),
                    np.full(len(reduced), np.nan), d.unit, d.n_units, reduced.to_numpy(float), d.clustered)
    n = len(d.means)
    if kind is None:
        kind = "proportion" if _binary(d.values) else "graded_mean"
    if kind not in ("proportion", "graded_mean"):
        raise ParameterError(f"repeat_interval: kind must be 'proportion' or 'graded_mean', not {kind!r}")
    if kind == "proportion" and not _binary(d.values):
        raise ParameterError("kind 'proportion' needs 0/1 values; use kind 'graded_mean' for fractions")
    if bounds is not None and n and ((d.values < bounds[0] - 1e-12).any() or (d.values > bounds[1] + 1e-12).any()):
        raise ParameterError(f"graded values must lie in {bounds}; pass bounds=None for unbounded metrics")
    extra: dict[str, Any] = {"n_answers": int(d.counts.sum()), "repeats": float(n / np.sum(1 / d.counts)) if n else 0.0}
    if d.clustered:
        extra["n_clusters"] = d.n_units
    if reducer != "mean":
        extra["reducer"] = reducer
    if n == 0:
        return stats.nan_result("none", **extra)
    value = float(d.means.mean())
    one_each = bool((d.counts == 1).all()) and not d.clustered
    var = _robust_var(d, d.means, value)
    if kind == "proportion" and one_each:
        out = stats.proportion_interval(d.means, level=level)
    elif kind == "graded_mean" and not d.clustered and (one_each or bounds is None):
        out = stats.graded_interval(d.means, seed=seed, n_boot=n_boot, level=level, bounds=bounds)
    elif bounds is None:
        q, df = _quantile(level, d.n_units)
        half = q * math.sqrt(var) if np.isfinite(var) else float("nan")
        out = {"value": value, "ci_low": value - half, "ci_high": value + half, "n": n,
               "method": f"t on the cluster-robust SE ({d.n_units} clusters)", "df": df}
    else:
        lo, hi = bounds
        scale = hi - lo
        low, high, n_eff, df = _score_interval(d, (d.means - lo) / scale, binary=kind == "proportion", level=level)
        unit = f"{d.n_units} clusters" if d.clustered else f"{n} items"
        out = {"value": value, "ci_low": lo + scale * low, "ci_high": lo + scale * high, "n": n,
               "method": f"wilson_effective_n ({unit} resampled" + (f", t df={df})" if df else ")"),
               "effective_n": n_eff, "df": df}
    out = {**out, **extra, "se": math.sqrt(var) if np.isfinite(var) else float("nan")}
    naive = _naive_var(d)
    out["design_effect"] = var / naive if (np.isfinite(var) and naive > 0) else float("nan")
    if d.clustered:
        by_item = _Design(d.items, d.means, d.counts, d.within, np.arange(n), n, d.values, False)
        item_var = _robust_var(by_item, d.means, value)
        out["design_effect_clusters"] = var / item_var if item_var > 0 else float("nan")
    if reducer == "mean":
        out.update(_components(d))
    return stats.tidy(out)


# ---------------------------------------------------------------------------------------------
# Paired differences of two models on the same items


def _by_item(values: Any, name: str) -> Any:
    import pandas as pd

    if isinstance(values, pd.Series):
        return values
    if isinstance(values, Mapping):
        return pd.Series(dict(values), name=name)
    return pd.Series(np.asarray(values, dtype=float), name=name)


def paired_difference(a: Any, b: Any, *, clusters: Any = None, level: float = 0.95, seed: int = 0,
                      n_boot: int = 2000, n_perm: int = 9999) -> dict[str, Any]:
    """Mean of a - b over the items both models have (per-item values, e.g. `reduce_repeats`
    output: Series or mappings keyed by item, or arrays in the same item order), with a test and an
    interval that respect clusters (`clusters`: item -> cluster, same keying).

    Without clusters: `stats.compare_paired` (exact McNemar and Bonett-Price for 0/1 values, a
    sign-flip test and BCa for fractions). With clusters: a sign-flip permutation test of the
    clusters' summed differences (exact up to 15 clusters) and a t interval with (clusters - 1)
    degrees of freedom on the cluster-robust SE; when every cluster holds one item, the test without
    clusters (its exact McNemar beats a t interval on n singletons). Keys: diff, ci_low, ci_high, p_value, n (items),
    test, ci_method, and with clusters n_clusters and design_effect_clusters.
    """
    import pandas as pd

    sa, sb = _by_item(a, "a"), _by_item(b, "b")
    both = pd.concat([sa.rename("a"), sb.rename("b")], axis=1, join="inner").dropna()
    if clusters is None:
        return stats.compare_paired(both["a"].to_numpy(float), both["b"].to_numpy(float),
                                    n_boot=n_boot, seed=seed, level=level, n_perm=n_perm)
    labels = _by_item(clusters, "cluster").reindex(both.index)
    if labels.isna().any():
        raise DataError(f"cluster_by: item {_label(labels.index[labels.isna()][0])} has no cluster value")
    diff = (both["a"] - both["b"]).to_numpy(float)
    n = len(diff)
    unit = pd.factorize(labels.to_numpy())[0]
    g = int(unit.max()) + 1 if n else 0
    if n and g == n:  # every cluster one item: the item-level design, and its exact test
        return stats.tidy({**stats.compare_paired(both["a"].to_numpy(float), both["b"].to_numpy(float),
                                                  n_boot=n_boot, seed=seed, level=level, n_perm=n_perm),
                           "n_clusters": g, "design_effect_clusters": 1.0})
    d = _Design(both.index.to_numpy(), diff, np.ones(n, dtype=int), np.full(n, np.nan), unit, g, diff, True)
    nan = float("nan")
    if n == 0:
        return stats.tidy({"diff": nan, "ci_low": nan, "ci_high": nan, "p_value": nan, "n": 0,
                            "test": "none", "ci_method": "none", "n_clusters": 0})
    mean = float(diff.mean())
    sums, _ = _unit_sums(d, diff)
    p, test = stats.sign_flip_test(sums, n_perm=n_perm, seed=seed)
    var = _robust_var(d, diff, mean)
    q, df = _quantile(level, g)
    half = q * math.sqrt(var) if np.isfinite(var) else nan
    item_var = float(np.var(diff, ddof=1)) / n if n >= 2 else nan
    x, y = both["a"].to_numpy(float), both["b"].to_numpy(float)
    unit_scores = bool(((x >= 0) & (x <= 1) & (y >= 0) & (y <= 1)).all())  # then a - b lies in [-1, 1]
    low, high = mean - half, mean + half
    if unit_scores and np.isfinite(half):
        low, high = max(-1.0, low), min(1.0, high)
    return stats.tidy({"diff": mean, "ci_low": low, "ci_high": high, "p_value": p, "n": n,
                        "test": f"{test} over clusters", "ci_method": f"cluster_t (df={df})",
                        "n_clusters": g,
                        "design_effect_clusters": var / item_var if item_var > 0 else nan})


# ---------------------------------------------------------------------------------------------
# A run's design: which rows belong to one item, and which items to one cluster


@dataclass(frozen=True)
class Design:
    """How a long samples table is grouped for its intervals: rows of one item (its repeats) share
    `item_column`; with `cluster_column`, items of one cluster are resampled together. `reducer`
    turns an item's repeats into one value (`REDUCERS`). A task run without repeats or clusters has
    no design (None), and its intervals are exactly `stats.interval`'s."""

    item_column: str = "doc_id"
    cluster_column: str | None = None
    reducer: str = "mean"

    def __post_init__(self) -> None:
        check_reducer(self.reducer)

    def interval(self, frame: Any, column: str, *, kind: str, bounds: tuple[float, float] | None = (0.0, 1.0),
                 seed: int = 0, n_boot: int = 2000, level: float = 0.95) -> dict[str, Any]:
        """`repeat_interval` of `frame[column]` under this design (rows with NaN dropped); `kind`
        "proportion" or "graded_mean" (a 0/1 reducer such as `pass_at_k` keeps a proportion)."""
        clusters = frame[self.cluster_column] if self.cluster_column else None
        values = frame[column].astype(float)
        if kind == "proportion" and len(values.dropna()) and not _binary(values.dropna().to_numpy()):
            kind = "graded_mean"
        return repeat_interval(values, frame[self.item_column], clusters=clusters, reducer=self.reducer,
                               kind=kind, seed=seed, n_boot=n_boot, level=level, bounds=bounds)
