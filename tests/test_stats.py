"""Bootstrap intervals, Wilson intervals and paired tests."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from evekit import stats
from evekit.metrics import binary_prf


def test_bootstrap_ci_covers_true_proportion():
    """Bernoulli(0.3), n=200: the 95% interval covers 0.3 in 90-99% of 200 repetitions."""
    rng = np.random.default_rng(12345)
    samples = rng.random((200, 200)) < 0.3
    covered = 0
    for rep, sample in enumerate(samples):
        low, high = stats.bootstrap_ci(sample.astype(float), n_boot=1000, seed=rep)
        covered += low <= 0.3 <= high
    rate = covered / len(samples)
    print(f"bootstrap coverage: {rate:.3f}")
    assert 0.90 <= rate <= 0.99


def test_bootstrap_is_seeded_and_sensible():
    values = np.array([0, 1, 1, 0, 1, 1, 1, 0, 1, 1], dtype=float)
    a = stats.bootstrap_ci(values, seed=7)
    assert a == stats.bootstrap_ci(values, seed=7)
    assert a != stats.bootstrap_ci(values, seed=8)
    low, high = a
    assert low < values.mean() < high
    assert 0.0 <= low and high <= 1.0


def test_bootstrap_degenerate_inputs():
    assert stats.bootstrap_ci(np.ones(5)) == (1.0, 1.0)
    low, high = stats.bootstrap_ci([])
    assert math.isnan(low) and math.isnan(high)


def test_bootstrap_more_resamples_than_one_chunk():
    # forces several chunks (memory cap) and must still return n_boot values
    dist = stats.bootstrap_distribution(np.arange(50_000, dtype=float) % 2, n_boot=200, seed=0)
    assert dist.shape == (200,)
    assert abs(dist.mean() - 0.5) < 0.01


def test_bootstrap_accepts_stat_without_axis():
    low, high = stats.bootstrap_ci([1.0, 2.0, 3.0, 4.0], stat=lambda x: float(np.median(x)), n_boot=200)
    assert 1.0 <= low <= high <= 4.0


def test_summarize_drops_nan_and_counts_items():
    out = stats.summarize([1.0, 0.0, float("nan"), 1.0], seed=0, n_boot=1000)
    assert out["n"] == 3
    assert out["value"] == pytest.approx(2 / 3)
    assert out["ci_low"] <= out["value"] <= out["ci_high"]
    empty = stats.summarize([float("nan")])
    assert empty["n"] == 0 and math.isnan(empty["value"])


def test_summarize_corpus_statistic_is_recomputed_not_averaged():
    # F1 of the whole corpus differs from a mean of per-item values
    pred = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    gold = np.array([1, 0, 1, 1, 0, 0, 1, 1])

    def f1(data, axis=1):
        data = np.asarray(data)
        return binary_prf(data[..., 0], data[..., 1], axis=-1)[2]

    out = stats.summarize(np.column_stack([pred, gold]), seed=0, n_boot=1000, stat=f1)
    tp, fp, fn = 3, 1, 2
    expected = 2 * tp / (2 * tp + fp + fn)
    assert out["value"] == pytest.approx(expected)
    assert out["n"] == 8
    assert out["ci_low"] < expected < out["ci_high"]


def test_wilson_matches_formula():
    k, n, z = 3, 10, 1.959963984540054
    p = k / n
    denom = 1 + z**2 / n
    center = (p + z**2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    low, high = stats.wilson_ci(k, n)
    assert low == pytest.approx(center - half, abs=1e-9)
    assert high == pytest.approx(center + half, abs=1e-9)
    assert all(math.isnan(x) for x in stats.wilson_ci(0, 0))


def test_mcnemar_exact_hand_computed():
    # discordant pairs: a right/b wrong = 1, a wrong/b right = 7 -> p = 2 * P(X <= 1), X ~ Bin(8, 0.5)
    a = [1] * 5 + [1] + [0] * 7 + [0] * 3
    b = [1] * 5 + [0] + [1] * 7 + [0] * 3
    expected = 2 * (1 + 8) / 2**8
    assert stats.mcnemar_exact(a, b) == pytest.approx(expected)
    assert expected == pytest.approx(2 * binom.cdf(1, 8, 0.5))
    assert stats.mcnemar_exact(a, a) == pytest.approx(1.0)


def test_mcnemar_rejects_non_binary():
    with pytest.raises(ValueError, match="0/1"):
        stats.mcnemar_exact([0.5, 1.0], [1.0, 0.0])


def test_paired_bootstrap():
    rng = np.random.default_rng(0)
    a = rng.random(300)
    same = stats.paired_bootstrap(a, a, n_boot=1000, seed=0)
    assert same["diff"] == 0.0 and same["p_value"] == 1.0 and same["n"] == 300
    better = stats.paired_bootstrap(a + 0.2, a + rng.normal(0, 0.05, 300), n_boot=1000, seed=0)
    assert better["diff"] == pytest.approx(0.2, abs=0.02)
    assert better["ci_low"] > 0
    assert better["p_value"] < 0.01
    noisy = stats.paired_bootstrap(a, rng.permutation(a), n_boot=1000, seed=0)
    assert noisy["ci_low"] < 0 < noisy["ci_high"] and noisy["p_value"] > 0.05


def test_paired_bootstrap_drops_pairs_with_nan():
    out = stats.paired_bootstrap([1.0, float("nan"), 0.0], [0.0, 1.0, 0.0])
    assert out["n"] == 2 and out["diff"] == pytest.approx(0.5)


def test_compare_paired_picks_the_test():
    a = [1, 1, 0, 1, 0, 1, 1, 1]
    b = [0, 1, 0, 0, 0, 1, 0, 1]
    binary = stats.compare_paired(a, b)
    assert binary["test"] == "mcnemar_exact"
    assert binary["p_value"] == pytest.approx(stats.mcnemar_exact(a, b))
    assert binary["diff"] == pytest.approx(3 / 8)
    cont = stats.compare_paired([0.5, 0.7, 0.9], [0.4, 0.6, 0.9])
    assert cont["test"] == "paired_bootstrap"
