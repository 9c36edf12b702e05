"""Repeated answers and clustered items (evekit.repeats): coverage by simulation, the variance
decomposition against the simulation and statsmodels' mixed model, reducers against brute force,
paired differences against an enumeration of the sign flips. The full coverage table is
benchmarks/bench_repeat_coverage.py."""
from __future__ import annotations

import importlib.util
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom
from statsmodels.stats.proportion import proportion_confint

from evekit import repeats, stats
from evekit.errors import DataError, ParameterError
from evekit.paths import REPO_ROOT

FLOOR = 0.93
MEANS = (0.5, 0.8, 0.95)
SHAPES = {"concentrated": 20.0, "spread": 2.0}


def _bench():
    """The benchmark's simulators (one definition of the simulated populations)."""
    spec = importlib.util.spec_from_file_location("bench_repeat_coverage", REPO_ROOT / "benchmarks" / "bench_repeat_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


B = _bench()


def _covered(out: dict, truth: float) -> bool:
    return out["ci_low"] - 1e-12 <= truth <= out["ci_high"] + 1e-12


# ---------------------------------------------------------------------------------------------
# Coverage


@pytest.mark.parametrize("mean", MEANS)
@pytest.mark.parametrize("n", (30, 100, 300))
def test_one_answer_per_item_is_wilson_with_exact_coverage(mean, n):
    """k = 1: the items' answers are i.i.d. Bernoulli(mean) whatever their Beta, so the interval
    (Wilson on the items, the same as `stats.interval`) has the binomial's exact coverage."""
    items = np.arange(n)
    inside = []
    for x in range(n + 1):
        v = np.r_[np.ones(x), np.zeros(n - x)]
        out = repeats.repeat_interval(v, items)
        ref = stats.interval(v, "proportion")
        assert (out["ci_low"], out["ci_high"], out["method"]) == (ref["ci_low"], ref["ci_high"], "wilson")
        inside.append(_covered(out, mean))
    exact = float(binom.pmf(np.arange(n + 1), n, mean)[np.array(inside)].sum())
    assert exact >= FLOOR, exact


def test_repeat_aware_interval_covers_and_naive_does_not():
    """Every cell with k in {3, 10}: the repeat-aware interval covers the population mean in
    >= 0.93 of 800 datasets; the naive Wilson interval over all n k answers (every repeat an
    independent item) undercovers wherever items differ (k = 10 everywhere, k = 3 with spread items)."""
    table = []
    for (mean, (shape_name, s)), n, k in itertools.product(itertools.product(MEANS, SHAPES.items()), (30, 100, 300), (3, 10)):
        rng = np.random.default_rng([11, int(mean * 100), int(s), n, k])
        hits, naive = 0, []
        R = 800
        for _ in range(R):
            v, items = B.answers(rng, B.item_probs(rng, mean, s, n), k)
            hits += _covered(repeats.repeat_interval(v, items), mean)
            naive.append(v.sum())
        low, high = proportion_confint(np.array(naive), n * k, method="wilson")
        table.append((mean, shape_name, n, k, hits / R, float(np.mean((low <= mean) & (mean <= high)))))
    print("\n".join(f"mean={m} {sh} n={n} k={k}: repeat-aware {c:.3f}, naive {nv:.3f}" for m, sh, n, k, c, nv in table))
    assert min(c for *_, c, _ in table) >= FLOOR
    for m, sh, n, k, c, nv in table:
        if k == 10 or sh == "spread":
            assert nv < FLOOR and nv < c - 0.02, (m, sh, n, k, nv)


def test_clustered_interval_covers_and_item_interval_does_not():
    """10 clusters, intra-cluster correlation 0.2: the clustered interval covers in >= 0.93 of
    500 datasets per cell, the interval that resamples items does not (n = 100, k in {1, 3})."""
    table = []
    for (mean, (shape_name, s)), k in itertools.product(itertools.product(MEANS, SHAPES.items()), (1, 3)):
        rng = np.random.default_rng([12, int(mean * 100), int(s), k])
        hits = item_hits = 0
        R, n = 500, 100
        for _ in range(R):
            v, items = B.answers(rng, B.item_probs(rng, mean, s, n, B.CLUSTERS), k)
            out = repeats.repeat_interval(v, items, clusters=items % B.CLUSTERS)
            hits += _covered(out, mean)
            item_hits += _covered(repeats.repeat_interval(v, items), mean)
        table.append((mean, shape_name, k, hits / R, item_hits / R))
    print("\n".join(f"mean={m} {sh} k={k}: clustered {c:.3f}, items {i:.3f}" for m, sh, k, c, i in table))
    assert min(c for *_, c, _ in table) >= FLOOR
    assert max(i for *_, i in table) < FLOOR


def test_variance_decomposition_recovers_the_simulation():
    """n = 300, k = 10: the mean over 200 datasets of each estimated variance lies within 10% of the
    simulated within-item (E p(1 - p)) and between-item (Var p) variance."""
    for mean, s in itertools.product(MEANS, SHAPES.values()):
        rng = np.random.default_rng([13, int(mean * 100), int(s)])
        est = np.array([[repeats.variance_components(*B.answers(rng, B.item_probs(rng, mean, s, 300), 10))[key]
                         for key in ("var_within", "var_between")] for _ in range(200)])
        within, between = B.true_components(mean, s)
        assert est[:, 0].mean() == pytest.approx(within, rel=0.10), (mean, s)
        assert est[:, 1].mean() == pytest.approx(between, rel=0.10), (mean, s)


def test_variance_decomposition_matches_statsmodels_reml():
    """Balanced data: the method of moments equals the REML fit of y ~ 1 + (1 | item)."""
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(5)
    n, k = 40, 6
    y = rng.normal(0, 1.0, (n, 1)) + rng.normal(0, 0.7, (n, k))  # between 1.0, within 0.49
    items = np.repeat(np.arange(n), k)
    ours = repeats.variance_components(y.ravel(), items)
    fit = smf.mixedlm("y ~ 1", pd.DataFrame({"y": y.ravel(), "item": items}), groups="item").fit(reml=True)
    assert ours["var_between"] == pytest.approx(float(fit.cov_re.iloc[0, 0]), rel=1e-4)
    assert ours["var_within"] == pytest.approx(float(fit.scale), rel=1e-4)
    assert ours["share_within"] + ours["share_between"] == pytest.approx(1.0)
    assert ours["share_within"] == pytest.approx(ours["var_within"] / k / np.var(y.mean(axis=1), ddof=1))


def test_projection_follows_millers_formula():
    rng = np.random.default_rng(3)
    v, items = B.answers(rng, B.item_probs(rng, 0.7, 2.0, 200), 4)
    out = repeats.repeat_interval(v, items)
    same = repeats.projected_interval(out)
    # with the design as it is, the projection's SE is the SE of the mean of item means
    assert same["se"] == pytest.approx(math.sqrt(out["var_item_means"] / 200))
    assert repeats.projected_interval(out, items=800)["se"] == pytest.approx(same["se"] / 2)
    more = repeats.projected_interval(out, repeats=1000)["se"]
    assert more == pytest.approx(math.sqrt((out["var_between"] + out["var_within"] / 1000) / 200))
    assert more < same["se"]
    # the current normal-theory half width is close to the interval's
    assert same["half_width"] == pytest.approx((out["ci_high"] - out["ci_low"]) / 2, rel=0.1)


# ---------------------------------------------------------------------------------------------
# The interval's other paths and its output


def test_repeats_widen_the_interval_by_the_design_effect():
    v = np.array([1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0], float)
    items = np.repeat(np.arange(8), 3)  # items that are mostly all right or all wrong: deff > 1
    out = repeats.repeat_interval(v, items)
    assert out["n"] == 8 and out["n_answers"] == 24 and out["repeats"] == 3.0
    assert out["value"] == pytest.approx(v.mean())
    assert out["design_effect"] > 1.5
    naive = stats.interval(v, "proportion")
    assert out["ci_high"] - out["ci_low"] > naive["ci_high"] - naive["ci_low"]
    assert out["method"].startswith("wilson_effective_n (8 items") and out["df"] == 7
    assert 8 <= out["effective_n"] <= 24


def test_failed_repeats_are_dropped_and_items_weigh_the_same():
    v = np.array([1, 1, 1, np.nan, 0, np.nan])
    items = np.array([0, 0, 0, 1, 1, 1])
    out = repeats.repeat_interval(v, items)
    assert out["value"] == pytest.approx(0.5)  # item 0 is 1.0, item 1 is 0.0: each counts once
    assert out["n"] == 2 and out["n_answers"] == 4
    assert repeats.repeat_interval([np.nan], [0])["n"] == 0


def test_graded_values_match_stats_with_one_repeat_and_use_the_score_interval_with_more():
    rng = np.random.default_rng(0)
    g = rng.beta(4, 2, 50)
    out = repeats.repeat_interval(g, np.arange(50), seed=3)
    ref = stats.interval(g, "graded_mean", seed=3)
    assert (out["ci_low"], out["ci_high"], out["method"]) == (ref["ci_low"], ref["ci_high"], ref["method"])
    long = repeats.repeat_interval(rng.beta(4, 2, 150), np.repeat(np.arange(50), 3), seed=3)
    assert long["method"] == "wilson_effective_n (50 items resampled, t df=49)" and long["repeats"] == 3.0
    assert long["effective_n"] > 150  # graded answers vary less than 0/1 ones: no cap at the answers
    free = repeats.repeat_interval(rng.normal(size=150), np.repeat(np.arange(50), 3), bounds=None)
    assert free["method"] == "bca"


def test_graded_values_with_clusters_and_unbounded_values():
    rng = np.random.default_rng(1)
    items = np.repeat(np.arange(40), 2)
    g = rng.beta(4, 2, 80)
    out = repeats.repeat_interval(g, items, clusters=items % 8)
    assert out["method"].startswith("wilson_effective_n (8 clusters") and out["n_clusters"] == 8
    assert 0 <= out["ci_low"] < out["value"] < out["ci_high"] <= 1
    free = repeats.repeat_interval(g * 10 - 3, items, clusters=items % 8, bounds=None)
    assert free["method"].startswith("t on the cluster-robust SE")
    assert free["value"] == pytest.approx(out["value"] * 10 - 3)
    assert free["ci_low"] < free["value"] < free["ci_high"]


def test_clustered_design_effect_reports_clustering():
    rng = np.random.default_rng(2)
    p = np.repeat(rng.beta(1, 1, 10), 10)  # every item of a cluster alike: strong clustering
    v, items = B.answers(rng, p, 2)
    out = repeats.repeat_interval(v, items, clusters=items // 10)
    assert out["n_clusters"] == 10 and out["design_effect_clusters"] > 3


def test_reducers_against_brute_force():
    v = np.array([1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0], float)
    items = np.repeat(["a", "b", "c"], 4)
    assert list(repeats.reduce_repeats(v, items).index) == ["a", "b", "c"]
    assert list(repeats.reduce_repeats(v, items)) == [0.75, 0.5, 0.5]
    assert list(repeats.reduce_repeats(v, items, "mode")) == [1.0, 0.0, 0.0]  # a 2-2 tie takes the lower
    assert list(repeats.reduce_repeats(v, items, "pass_at_k")) == [1.0, 1.0, 1.0]
    assert list(repeats.reduce_repeats(v, items, "pass_all_k")) == [0.0, 0.0, 0.0]
    for j in (1, 2, 3, 4):
        for name, rule in (("pass_at", any), ("pass_all", all)):
            got = repeats.reduce_repeats(v, items, f"{name}_{j}")
            for item, value in got.items():
                draws = v[items == item]
                subsets = list(itertools.combinations(draws, j))
                assert value == pytest.approx(np.mean([rule(s) for s in subsets])), (name, j, item)
    out = repeats.repeat_interval(v, items, reducer="pass_at_2")
    assert out["reducer"] == "pass_at_2" and out["n"] == 3 and "var_within" not in out


def test_bad_input_is_named():
    with pytest.raises(ParameterError, match="unknown reducer"):
        repeats.reduce_repeats([1.0], [0], "median")
    with pytest.raises(ParameterError, match="pass_at_5"):
        repeats.reduce_repeats([1.0, 0.0], [0, 0], "pass_at_5")
    with pytest.raises(ParameterError, match="0/1"):
        repeats.repeat_interval([0.5, 1.0], [0, 1], kind="proportion")
    with pytest.raises(DataError, match="item 1 lies in more than one cluster"):
        repeats.repeat_interval([1.0, 0.0, 1.0], [0, 1, 1], clusters=["x", "x", "y"])
    with pytest.raises(DataError, match="item 1 has no cluster value"):
        repeats.repeat_interval([1.0, 0.0], [0, 1], clusters=np.array(["x", None], dtype=object))
    with pytest.raises(ParameterError, match="differ in length"):
        repeats.repeat_interval([1.0, 0.0], [0])


# ---------------------------------------------------------------------------------------------
# Paired differences


def test_paired_difference_without_clusters_is_compare_paired():
    rng = np.random.default_rng(4)
    a = pd.Series(rng.integers(0, 2, 40).astype(float), index=range(40))
    b = pd.Series(rng.integers(0, 2, 40).astype(float), index=range(40))
    assert repeats.paired_difference(a, b) == stats.compare_paired(a.to_numpy(), b.to_numpy())
    # aligned on the items both have
    out = repeats.paired_difference(a.iloc[:30], b.iloc[10:])
    assert out["n"] == 20


def test_paired_difference_with_clusters_flips_clusters():
    rng = np.random.default_rng(6)
    n, g = 24, 6
    a = pd.Series(rng.random(n))
    b = pd.Series(rng.random(n))
    clusters = pd.Series(np.arange(n) % g)
    out = repeats.paired_difference(a, b, clusters=clusters)
    d = (a - b).to_numpy()
    sums = np.bincount(np.arange(n) % g, weights=d)
    flips = np.array(list(itertools.product((1, -1), repeat=g)))
    exact = np.mean(np.abs(flips @ sums) >= abs(sums.sum()) - 1e-12)
    assert out["p_value"] == pytest.approx(exact)
    assert out["test"] == "sign_flip_exact over clusters" and out["n_clusters"] == g and out["n"] == n
    assert out["diff"] == pytest.approx(d.mean())
    assert out["ci_low"] < out["diff"] < out["ci_high"]
    assert out["ci_method"] == "cluster_t (df=5)"


def test_cluster_bootstrap_weights_keep_clusters_together():
    clusters = ["x", "x", "y", "z", "z", "z"]
    w = repeats.cluster_bootstrap_weights(clusters, 500, seed=1)
    assert w.shape == (500, 6)
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 3] == w[:, 5]).all()
    assert (w[:, [0, 2, 3]].sum(axis=1) == 3).all()  # three clusters drawn per resample
    assert w.mean() == pytest.approx(1.0, abs=0.1)


def test_repeat_seed():
    assert repeats.repeat_seed(7, 0) == 7
    seeds = [repeats.repeat_seed(7, r) for r in range(1, 50)]
    assert len(set(seeds)) == 49 and all(0 <= s < 2**31 for s in seeds)
    assert repeats.repeat_seed(7, 3) == repeats.repeat_seed(7, 3) != repeats.repeat_seed(8, 3)
    with pytest.raises(ParameterError):
        repeats.repeat_seed(7, -1)
