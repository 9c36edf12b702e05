"""Confidence intervals and paired comparisons.

Every reported number comes with a 95% percentile-bootstrap interval over items (resampling
whole items, >= 1,000 resamples, seeded, vectorised). Corpus-level statistics (precision,
recall, F1) are recomputed on every resample rather than averaged per sample. Two models on
the same items are compared with McNemar's exact test (0/1 scores) or a paired bootstrap.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = [
    "bootstrap_distribution",
    "bootstrap_ci",
    "summarize",
    "wilson_ci",
    "mcnemar_exact",
    "paired_bootstrap",
    "compare_paired",
]

Stat = Callable[..., Any]
# Upper bound on resampled values held in memory at once (chunks of resamples).
_CHUNK_ELEMENTS = 4_000_000


def _clean(values: Any) -> np.ndarray:
    """Float array of shape (n,) or (n, k) with rows containing NaN removed."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim == 1:
        return arr[~np.isnan(arr)]
    if arr.ndim == 2:
        return arr[~np.isnan(arr).any(axis=1)]
    raise ValueError(f"expected a 1-D or 2-D array of per-item values, got shape {arr.shape}")


def _apply(stat: Stat, sample: np.ndarray) -> np.ndarray:
    """stat over axis 1 of a (B, n[, k]) block of resamples -> (B,)."""
    try:
        out = np.asarray(stat(sample, axis=1), dtype=float)
        if out.shape == (sample.shape[0],):
            return out
    except TypeError:
        pass
    return np.array([stat(s) for s in sample], dtype=float)


def bootstrap_distribution(values: Any, stat: Stat = np.mean, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """The statistic on `n_boot` resamples of the items (rows of `values`), seeded.

    `stat` must accept `axis=` (np.mean does); other callables are applied per resample.
    """
    data = _clean(values)
    n = len(data)
    if n == 0:
        return np.full(n_boot, np.nan)
    rng = np.random.default_rng(seed)
    per_row = n * (data.shape[1] if data.ndim == 2 else 1)
    chunk = max(1, _CHUNK_ELEMENTS // per_row)
    out = np.empty(n_boot, dtype=float)
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        idx = rng.integers(0, n, size=(size, n))
        out[start:start + size] = _apply(stat, data[idx])
    return out


def bootstrap_ci(values: Any, stat: Stat = np.mean, n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of `stat` over items (NaN rows dropped)."""
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    dist = bootstrap_distribution(values, stat, n_boot, seed)
    if np.isnan(dist).all():
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    low, high = np.nanpercentile(dist, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def summarize(values: Any, seed: int = 0, n_boot: int = 1000, stat: Stat = np.mean,
              level: float = 0.95) -> dict[str, float | int]:
    """{"value", "ci_low", "ci_high", "n"} for per-item values; `n` = items used (NaN dropped)."""
    data = _clean(values)
    if len(data) == 0:
        return {"value": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "n": 0}
    value = float(_apply(stat, data[None, ...])[0])
    low, high = bootstrap_ci(data, stat, n_boot=n_boot, seed=seed, level=level)
    return {"value": value, "ci_low": low, "ci_high": high, "n": int(len(data))}


def wilson_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (statsmodels)."""
    from statsmodels.stats.proportion import proportion_confint

    if n == 0:
        return float("nan"), float("nan")
    low, high = proportion_confint(k, n, alpha=1 - level, method="wilson")
    return float(low), float(high)


def _paired(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores must be 1-D arrays of the same length, got {x.shape} and {y.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def mcnemar_exact(a: Any, b: Any) -> float:
    """Two-sided exact McNemar p-value for paired 0/1 scores of two models on the same items."""
    from statsmodels.stats.contingency_tables import mcnemar

    x, y = _paired(a, b)
    if not (np.isin(x, (0, 1)).all() and np.isin(y, (0, 1)).all()):
        raise ValueError("McNemar's test needs 0/1 scores; use paired_bootstrap for other metrics")
    table = [[int(((x == 1) & (y == 1)).sum()), int(((x == 1) & (y == 0)).sum())],
             [int(((x == 0) & (y == 1)).sum()), int(((x == 0) & (y == 0)).sum())]]
    return float(mcnemar(table, exact=True).pvalue)


def paired_bootstrap(a: Any, b: Any, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, float | int]:
    """Mean difference a - b over shared items with a bootstrap CI and two-sided p-value.

    The p-value is the share of resampled differences, re-centred on zero (the null), that
    are at least as far from zero as the observed difference, with the +1 correction.
    """
    x, y = _paired(a, b)
    d = x - y
    if len(d) == 0:
        nan = float("nan")
        return {"diff": nan, "ci_low": nan, "ci_high": nan, "p_value": nan, "n": 0}
    observed = float(d.mean())
    dist = bootstrap_distribution(d, np.mean, n_boot, seed)
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(dist, [100 * alpha, 100 * (1 - alpha)])
    extreme = np.abs(dist - observed) >= abs(observed) - 1e-12
    p = (1 + int(extreme.sum())) / (n_boot + 1)
    return {"diff": observed, "ci_low": float(low), "ci_high": float(high), "p_value": float(min(1.0, p)),
            "n": int(len(d))}


def compare_paired(a: Any, b: Any, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Compare two models' per-item scores: McNemar (exact) for 0/1, paired bootstrap otherwise.

    Always reports the mean difference a - b with its bootstrap interval; `p_value` comes
    from the test named in `test`.
    """
    result: dict[str, Any] = dict(paired_bootstrap(a, b, n_boot=n_boot, seed=seed))
    x, y = _paired(a, b)
    if len(x) and np.isin(x, (0, 1)).all() and np.isin(y, (0, 1)).all():
        result["p_value"] = mcnemar_exact(x, y)
        result["test"] = "mcnemar_exact"
    else:
        result["test"] = "paired_bootstrap"
    return result
