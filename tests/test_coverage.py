"""Seeded coverage simulations of the new intervals (95% nominal; assert >= 0.92 per cell).

Each cell draws datasets from a stated distribution, computes the interval with the library
function and counts how often it contains the true value. Runs in a few seconds on one core.
The full table (old vs new, more datasets) is benchmarks/bench_coverage.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from evekit import stats

FLOOR = 0.92


def _covered(results, truth):
    lo = np.array([r["ci_low"] for r in results])
    hi = np.array([r["ci_high"] for r in results])
    return float(np.mean((lo <= truth + 1e-12) & (truth <= hi + 1e-12)))


@pytest.mark.parametrize("p", [0.5, 0.9, 0.98])
@pytest.mark.parametrize("n", [20, 50, 200])
def test_accuracy_coverage(p, n):
    """acc: n i.i.d. Bernoulli(p) items, Wilson interval.

    The interval depends on the data only through k, so it is computed once per k; the exact
    coverage (sum over Binomial(n, p)) is asserted, and a seeded simulation of 4,000 datasets
    must agree with it (Wilson's exact coverage at p=0.98, n=50 is 0.922, too close to the
    floor for a simulated assertion to be stable).
    """
    by_k = [stats.interval(np.r_[np.ones(k), np.zeros(n - k)], "proportion") for k in range(n + 1)]
    inside = np.array([r["ci_low"] <= p <= r["ci_high"] for r in by_k])
    exact = float(binom.pmf(np.arange(n + 1), n, p)[inside].sum())
    ks = np.random.default_rng(1000 + n).binomial(n, p, size=4000)
    simulated = float(inside[ks].mean())
    print(f"acc p={p} n={n}: exact {exact:.3f}, simulated {simulated:.3f}")
    assert exact >= FLOOR
    assert abs(simulated - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000) + 1e-9


def _iou_like(rng, size):
    """20% exact 0 (missed object), 30% exact 1 (perfect), 50% Beta(4, 2): mean 0.3 + 0.5*2/3."""
    u = rng.random(size)
    return np.where(u < 0.2, 0.0, np.where(u < 0.5, 1.0, rng.beta(4, 2, size)))


def test_graded_iou_coverage():
    """graded_mean (BCa, 500 resamples) on the IoU-like mix above, n=50, 400 datasets."""
    truth = 0.3 + 0.5 * 4 / 6
    rng = np.random.default_rng(2)
    data = _iou_like(rng, (400, 50))
    res = [stats.interval(x, "graded_mean", seed=i, n_boot=500) for i, x in enumerate(data)]
    cov = _covered(res, truth)
    print(f"graded IoU n=50: {cov:.3f}")
    assert cov >= FLOOR


def test_corpus_f1_coverage():
    """corpus F1: prevalence 0.1, sensitivity 0.8, false-positive rate 0.05 (population F1 =
    0.16/0.225 = 0.711), n=50 items, 1,000 datasets (datasets with no positive at all excluded:
    F1 undefined)."""
    tp, fn, fp = 0.1 * 0.8, 0.1 * 0.2, 0.9 * 0.05
    truth = 2 * tp / (2 * tp + fp + fn)
    rng = np.random.default_rng(3)
    gold = rng.random((1000, 50)) < 0.1
    pred = np.where(gold, rng.random((1000, 50)) < 0.8, rng.random((1000, 50)) < 0.05)
    res = [stats.interval(np.column_stack([p_, g_]).astype(float), "corpus") for p_, g_ in zip(pred, gold)]
    res = [r for r in res if np.isfinite(r["value"])]
    cov = _covered(res, truth)
    print(f"corpus F1 n=50: {cov:.3f} over {len(res)} defined datasets")
    assert cov >= FLOOR


@pytest.mark.parametrize("n", [20, 50])
def test_paired_binary_difference_coverage(n):
    """Paired 0/1 difference, Delta = 0.04: cells (both right, a only, b only, both wrong) with
    probabilities (0.60, 0.10, 0.06, 0.24), so p_a = 0.70, p_b = 0.66; 1,000 datasets."""
    rng = np.random.default_rng(4 + n)
    cells = rng.choice(4, p=[0.60, 0.10, 0.06, 0.24], size=(1000, n))
    a = np.isin(cells, (0, 1)).astype(float)
    b = np.isin(cells, (0, 2)).astype(float)
    res = [stats.compare_paired(x, y) for x, y in zip(a, b)]
    cov = _covered(res, 0.04)
    print(f"paired 0/1 delta=0.04 n={n}: {cov:.3f}")
    assert cov >= FLOOR
