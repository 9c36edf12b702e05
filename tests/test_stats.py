"""Bootstrap resamples, Wilson intervals and paired tests."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from evekit import stats


def test_bootstrap_more_resamples_than_one_chunk():
    # forces several chunks (memory cap) and must still return n_boot values
    dist = stats.bootstrap_distribution(np.arange(50_000, dtype=float) % 2, n_boot=200, seed=0)
    assert dist.shape == (200,)
    assert abs(dist.mean() - 0.5) < 0.01


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


def test_compare_paired_mcnemar_hand_computed():
    # discordant pairs: a right/b wrong = 1, a wrong/b right = 7 -> p = 2 * P(X <= 1), X ~ Bin(8, 0.5)
    a = [1] * 5 + [1] + [0] * 7 + [0] * 3
    b = [1] * 5 + [0] + [1] * 7 + [0] * 3
    expected = 2 * (1 + 8) / 2**8
    out = stats.compare_paired(a, b)
    assert out["test"] == "mcnemar_exact" and out["p_value"] == pytest.approx(expected)
    assert expected == pytest.approx(2 * binom.cdf(1, 8, 0.5))
    assert stats.compare_paired(a, a)["p_value"] == pytest.approx(1.0)


def test_compare_paired_drops_pairs_with_nan():
    out = stats.compare_paired([1.0, float("nan"), 0.0], [0.0, 1.0, 0.0])
    assert out["n"] == 2 and out["diff"] == pytest.approx(0.5)


def test_compare_paired_picks_the_test():
    a = [1, 1, 0, 1, 0, 1, 1, 1]
    b = [0, 1, 0, 0, 0, 1, 0, 1]
    binary = stats.compare_paired(a, b)
    assert binary["test"] == "mcnemar_exact"
    assert binary["p_value"] == pytest.approx(sm_mcnemar([[3, 3], [0, 2]], exact=True).pvalue)
    assert binary["diff"] == pytest.approx(3 / 8)
    cont = stats.compare_paired([0.5, 0.7, 0.9], [0.4, 0.6, 0.9])
    assert cont["test"] == "sign_flip_exact"  # was "paired_bootstrap" before the fix


# ---------------------------------------------------------------------------------------------
# The fix: one interval per metric kind, exact paired tests (each test names the old number)
# ---------------------------------------------------------------------------------------------

from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar  # noqa: E402
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa  # noqa: E402
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss  # noqa: E402
from statsmodels.stats.multitest import multipletests  # noqa: E402
from statsmodels.stats.power import TTestPower  # noqa: E402
from statsmodels.stats.proportion import proportion_confint  # noqa: E402


def test_proportion_all_right_is_not_zero_width():
    # old: summarize([1]*12) -> CI [1.0, 1.0]
    out = stats.interval([1] * 12, "proportion")
    assert out["value"] == 1.0 and out["ci_high"] == 1.0
    assert out["ci_low"] == pytest.approx(proportion_confint(12, 12, method="wilson")[0], abs=1e-12)
    assert out["ci_low"] < 0.76 and out["method"] == "wilson" and out["n"] == 12
    cp = stats.interval([1] * 12, "proportion", method="clopper_pearson")
    assert cp["ci_low"] == pytest.approx(proportion_confint(12, 12, method="beta")[0], abs=1e-12)
    assert math.isnan(stats.interval([], "proportion")["value"])
    with pytest.raises(ValueError, match="0/1"):
        stats.interval([0.5, 1.0], "proportion")


def test_proportion_coverage_at_p098_exact():
    # old percentile bootstrap at p=0.98, n=20/50/200: 0.34/0.63/0.90 (simulated).
    # Exact coverage of the new interval, summed over the binomial distribution of k.
    for n in (20, 50, 200):
        k = np.arange(n + 1)
        lows_highs = [stats.interval([1] * int(i) + [0] * (n - int(i)), "proportion") for i in k]
        lo = np.array([d["ci_low"] for d in lows_highs])
        hi = np.array([d["ci_high"] for d in lows_highs])
        cover = binom.pmf(k, n, 0.98)[(lo <= 0.98) & (0.98 <= hi)].sum()
        assert cover >= 0.92, (n, cover)


def test_corpus_f1_conditional_wilson():
    # old: percentile bootstrap of corpus F1, prevalence 0.1, n=20 -> 0.82 coverage (0.91 at n=50)
    pred = np.array([1, 1, 1, 0, 0, 0, 1, 0, 0, 0])
    gold = np.array([1, 0, 1, 1, 0, 0, 1, 1, 0, 0])
    out = stats.interval(np.column_stack([pred, gold]), "corpus")  # stat defaults to F1
    tp, fp, fn = 3, 1, 2
    assert out["value"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    jl, jh = proportion_confint(tp, tp + fp + fn, method="wilson")
    assert out["ci_low"] == pytest.approx(2 * jl / (1 + jl)) and out["ci_high"] == pytest.approx(2 * jh / (1 + jh))
    assert out["n_informative"] == 6
    prec = stats.interval(np.column_stack([pred, gold]), "corpus", stat="precision")
    assert prec["value"] == pytest.approx(0.75)
    assert (prec["ci_low"], prec["ci_high"]) == pytest.approx(proportion_confint(3, 4, method="wilson"))
    # no positive predicted or gold: F1 undefined, said so (the old code scored it 0 with CI [0, 0])
    empty = stats.interval(np.zeros((10, 2)), "corpus")
    assert math.isnan(empty["value"]) and empty["n_informative"] == 0


def test_corpus_bootstrap_counts_defined_resamples():
    pred = np.array([1] + [0] * 19)
    gold = np.array([1] + [0] * 19)
    out = stats.interval(np.column_stack([pred, gold]), "corpus", method="bootstrap", n_boot=1000)
    # a resample without item 0 has no positive at all: F1 undefined, dropped and counted
    p_missing = (19 / 20) ** 20
    assert out["n_boot"] == 1000
    assert abs(out["n_defined"] - 1000 * (1 - p_missing)) < 50
    assert out["value"] == 1.0 and out["method"].startswith("percentile (degenerate")


def test_fleiss_kappa_reports_defined_resamples():
    # old: 19 unanimous rows + 1 split -> CI silently from 662 of 1,000 resamples
    r = np.ones((20, 3))
    r[0] = [1, 0, 1]
    out = stats.interval(r, "kappa", n_boot=1000)
    assert out["n_boot"] == 1000
    assert 0 < out["n_defined"] < 1000
    # P(split row drawn at least once) = 1 - 0.95^20 = 0.64
    assert abs(out["n_defined"] / 1000 - (1 - 0.95 ** 20)) < 0.05
    assert out["value"] == pytest.approx(sm_fleiss(aggregate_raters(r)[0]))


def test_kappa_matches_statsmodels_and_degenerate_cases():
    rng = np.random.default_rng(0)
    ratings = rng.integers(0, 3, size=(40, 4))
    assert stats.fleiss_kappa(ratings) == pytest.approx(sm_fleiss(aggregate_raters(ratings)[0]))
    a, b = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
    table = np.zeros((2, 2))
    np.add.at(table, (a, b), 1)
    ref = cohens_kappa(table)
    out = stats.interval(np.column_stack([a, b]), "kappa")
    assert out["value"] == pytest.approx(ref.kappa)
    assert out["se_analytic"] == pytest.approx(ref.std_kappa)
    assert out["n_defined"] == out["n_boot"]
    # one rater constant, the other varying: kappa is 0, not NaN
    assert stats.cohen_kappa([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0
    # both constant and equal: chance agreement is 1, kappa undefined
    assert math.isnan(stats.cohen_kappa([1, 1, 1], [1, 1, 1]))
    assert math.isnan(stats.interval(np.ones((5, 3)), "kappa")["value"])


def test_graded_mean_bca_and_degenerate_samples():
    from scipy.stats import bootstrap

    x = np.array([0.0, 0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 0.45, 0.3])
    out = stats.interval(x, "graded_mean", seed=3, n_boot=2000)
    ref = bootstrap((x,), np.mean, n_resamples=2000, method="BCa", rng=np.random.default_rng(3))
    assert (out["ci_low"], out["ci_high"]) == pytest.approx(tuple(ref.confidence_interval))
    assert out["method"] == "bca"
    # old: a constant sample gave a zero-width interval ([1, 1] for all ones)
    ones = stats.interval([1.0] * 20, "graded_mean")
    assert (ones["ci_low"], ones["ci_high"]) == pytest.approx(proportion_confint(20, 20, method="wilson"))
    zeros = stats.interval([0.0] * 20, "graded_mean")
    assert (zeros["ci_low"], zeros["ci_high"]) == pytest.approx(proportion_confint(0, 20, method="wilson"))
    half = stats.interval([0.5] * 20, "graded_mean")
    assert half["method"] == "constant_bound" and half["ci_low"] < 0.5 < half["ci_high"]
    single = stats.interval([0.3], "graded_mean")
    assert single["n"] == 1 and single["ci_low"] < 0.3 < single["ci_high"]
    assert math.isnan(stats.interval([], "graded_mean")["value"])
    with pytest.raises(ValueError, match="bounds"):
        stats.interval([2.0, 3.0], "graded_mean")


def test_compare_paired_n1_is_not_significant():
    # old: compare_paired([0.75], [0.25]) -> p = 0.001 with one item
    out = stats.compare_paired([0.75], [0.25])
    assert out["p_value"] == 1.0 and out["n"] == 1
    assert out["ci_low"] < 0 < out["ci_high"]


def test_compare_paired_exact_sign_flip():
    # old: differences [0.2, 0.3, 0.1, 0.4] -> p = 0.001; the exact sign-flip test gives 2/16
    from scipy.stats import permutation_test

    d = np.array([0.2, 0.3, 0.1, 0.4])
    out = stats.compare_paired(d + 0.5, np.full(4, 0.5))
    assert out["p_value"] == pytest.approx(0.125) and out["test"] == "sign_flip_exact"
    assert out["diff"] == pytest.approx(0.25)
    ref = permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf)
    assert out["p_value"] == pytest.approx(ref.pvalue)
    same = stats.compare_paired([0.3, 0.6, 0.9], [0.3, 0.6, 0.9])
    assert same["p_value"] == 1.0 and same["diff"] == 0.0 and same["ci_low"] < 0 < same["ci_high"]


def test_compare_paired_size_under_null_at_n10():
    # old paired bootstrap, n=10: rejects a true null 10.5% of the time at alpha=0.05
    rng = np.random.default_rng(7)
    reps = 400
    rejections = 0
    for _ in range(reps):
        a = rng.beta(2, 2, 10)
        b = rng.beta(2, 2, 10)
        rejections += stats.compare_paired(a, b, n_boot=200)["p_value"] <= 0.05
    # exact test: size <= 0.05; allow simulation noise (sd ~ 0.011)
    assert rejections / reps <= 0.075


def test_compare_paired_binary_mcnemar_and_bonett_price():
    a = [1] * 5 + [1] + [0] * 7 + [0] * 3
    b = [1] * 5 + [0] + [1] * 7 + [0] * 3
    out = stats.compare_paired(a, b)
    assert out["test"] == "mcnemar_exact" and out["ci_method"] == "bonett_price"
    assert out["p_value"] == pytest.approx(sm_mcnemar([[5, 1], [7, 3]], exact=True).pvalue)
    n = 16
    p10, p01 = (1 + 1) / (n + 2), (7 + 1) / (n + 2)
    half = 1.959963984540054 * math.sqrt((p10 + p01 - (p10 - p01) ** 2) / (n + 2))
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((p10 - p01 - half, p10 - p01 + half))
    # all pairs concordant: still an interval around 0, p = 1
    tie = stats.compare_paired([1, 0, 1], [1, 0, 1])
    assert tie["p_value"] == 1.0 and tie["ci_low"] < 0 < tie["ci_high"]


def test_paired_binary_ci_exact_coverage_delta_004():
    # old: percentile bootstrap of a 0/1 paired difference, delta=0.04, n=20 -> coverage 0.65.
    # Exact coverage over every 2x2 table (multinomial, p11=0.60, p10=0.10, p01=0.06, p00=0.24).
    from scipy.stats import multinomial

    probs = (0.60, 0.10, 0.06, 0.24)
    for n in (20, 50):
        cells = np.array([(i, j, k, n - i - j - k) for i in range(n + 1) for j in range(n + 1 - i)
                          for k in range(n + 1 - i - j)])
        lo, hi = stats.paired_proportion_diff_ci(*cells.T)
        cover = multinomial.pmf(cells, n, probs)[(lo <= 0.04 + 1e-12) & (0.04 <= hi + 1e-12)].sum()
        assert cover >= 0.92, (n, cover)


def test_holm_matches_statsmodels_and_keeps_nan():
    p = [0.01, float("nan"), 0.04, 0.03, 0.5]
    out = stats.holm(p)
    ref = multipletests([0.01, 0.04, 0.03, 0.5], method="holm")[1]
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3, 4]], ref)
    assert np.isnan(stats.holm([float("nan")])).all()


def test_min_detectable_difference():
    from scipy.stats import norm

    graded = stats.min_detectable_difference(n=50, kind="graded", sd=0.2)
    es = TTestPower().solve_power(effect_size=None, nobs=50, alpha=0.05, power=0.8)
    assert graded["mdd"] == pytest.approx(es * 0.2)
    binary = stats.min_detectable_difference(n=200, kind="paired_binary", discordance=0.2)
    d, psi = binary["mdd"], 0.2
    n_needed = (norm.ppf(0.975) * math.sqrt(psi) + norm.ppf(0.8) * math.sqrt(psi - d ** 2)) ** 2 / d ** 2
    assert n_needed == pytest.approx(200)
    assert 0 < d < psi
    # from paired scores: discordance and SD are measured
    a = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1] * 5
    b = [1, 1, 0, 1, 0, 1, 1, 0, 0, 1] * 5
    obs = stats.min_detectable_difference(a, b)
    assert obs["kind"] == "paired_binary" and obs["discordance"] == pytest.approx(0.3)
    assert math.isnan(stats.min_detectable_difference([1, 1], [1, 1])["mdd"])  # no discordance


def test_tiny_float_noise_is_rounded():
    # old: a mean difference of 2.8e-17 was reported as such
    a = np.array([0.7, 0.2, 0.1])
    b = np.array([0.1, 0.7, 0.2])
    assert (a - b).mean() != 0.0  # 9.3e-18 in floating point
    out = stats.compare_paired(a, b)
    assert out["diff"] == 0.0
