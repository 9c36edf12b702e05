"""Coverage of the repeat-aware and clustered intervals (evekit.repeats), 95% nominal. Seeded.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_repeat_coverage.py [--datasets 2000] [--quick]

Items: per-item success probabilities p_i ~ Beta(mean * s, (1 - mean) * s), mean 0.5, 0.8, 0.95,
shape s = 20 ("concentrated") or 2 ("spread"); each item answered k times, 0/1 answers
~ Bernoulli(p_i); the truth is the population mean. Clusters: 10 clusters of equal size, cluster
means ~ Beta(mean * 4, (1 - mean) * 4) (intra-cluster correlation of two items' answers
1 / (4 + 1) = 0.2), items within a cluster ~ Beta(mu_c * s, (1 - mu_c) * s).

Tables: (1) repeat-aware vs naive (every answer an independent item) intervals; (2) clustered vs
item intervals with clusters; (3) the variance decomposition at n = 300, k = 10 against the
simulated within- and between-item variances; (4) graded repeats (answers ~ Beta(p_i 5,
(1 - p_i) 5)) against BCa over the item means, and with clusters against the plain t interval;
(5) paired differences with clusters (coverage, and the size of the test beside the item-level
test's); (6) Miller's projection: the SE projected from k = 3 to k = 10 against the SD of the
estimate simulated at k = 10.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from evekit import repeats, stats

MEANS = (0.5, 0.8, 0.95)
SHAPES = {"concentrated": 20.0, "spread": 2.0}
NS = (30, 100, 300)
KS = (1, 3, 10)
CLUSTERS = 10
CLUSTER_SHAPE = 4.0  # ICC = 1 / (CLUSTER_SHAPE + 1) = 0.2


def item_probs(rng: np.random.Generator, mean: float, shape: float, n: int, clusters: int = 0) -> np.ndarray:
    """Per-item success probabilities; with `clusters`, items share their cluster's mean (item i in cluster i % clusters)."""
    if not clusters:
        return rng.beta(mean * shape, (1 - mean) * shape, n)
    mu = np.clip(rng.beta(mean * CLUSTER_SHAPE, (1 - mean) * CLUSTER_SHAPE, clusters), 1e-9, 1 - 1e-9)
    centre = mu[np.arange(n) % clusters]
    return rng.beta(centre * shape, (1 - centre) * shape)


def answers(rng: np.random.Generator, p: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Long rows (0/1 value, item id) of k answers per item."""
    y = (rng.random((len(p), k)) < p[:, None]).astype(float)
    return y.ravel(), np.repeat(np.arange(len(p)), k)


def true_components(mean: float, shape: float) -> tuple[float, float]:
    """(within, between) variance of Beta(mean s, (1 - mean) s) items answered 0/1."""
    between = mean * (1 - mean) / (shape + 1)
    return mean * (1 - mean) - between, between


def _covers(out: dict, truth: float) -> bool:
    return bool(out["ci_low"] - 1e-12 <= truth <= out["ci_high"] + 1e-12)


def cell(rng: np.random.Generator, mean: float, shape: float, n: int, k: int, datasets: int,
         clusters: int = 0) -> dict[str, float]:
    """Coverage and mean width of the repeat-aware interval and its contrast in one cell: the
    naive interval (without clusters) or the item interval (with clusters)."""
    hit, width, other_hit, other_width, deff = [], [], [], [], []
    for _ in range(datasets):
        v, items = answers(rng, item_probs(rng, mean, shape, n, clusters), k)
        group = items % clusters if clusters else None
        out = repeats.repeat_interval(v, items, clusters=group)
        other = repeats.repeat_interval(v, items) if clusters else stats.interval(v, "proportion")
        hit.append(_covers(out, mean))
        width.append(out["ci_high"] - out["ci_low"])
        other_hit.append(_covers(other, mean))
        other_width.append(other["ci_high"] - other["ci_low"])
        deff.append(out.get("design_effect_clusters" if clusters else "design_effect", np.nan))
    return {"coverage": float(np.mean(hit)), "width": float(np.mean(width)),
            "other_coverage": float(np.mean(other_hit)), "other_width": float(np.mean(other_width)),
            "design_effect": float(np.nanmedian(deff))}


def components_cell(rng: np.random.Generator, mean: float, shape: float, n: int, k: int,
                    datasets: int) -> dict[str, float]:
    """Mean estimated within/between variance over datasets, relative to the simulated ones."""
    within, between = [], []
    for _ in range(datasets):
        out = repeats.variance_components(*answers(rng, item_probs(rng, mean, shape, n), k))
        within.append(out["var_within"])
        between.append(out["var_between"])
    tw, tb = true_components(mean, shape)
    return {"within": float(np.mean(within)), "true_within": tw, "between": float(np.mean(between)),
            "true_between": tb, "within_rel": float(np.mean(within)) / tw - 1,
            "between_rel": float(np.mean(between)) / tb - 1,
            "between_p5_p95": tuple(np.percentile(np.asarray(between) / tb - 1, [5, 95]))}


def _interval_table(R: int, clusters: int) -> None:
    """Tables 1 and 2: every cell of the grid, without clusters (contrast: naive) or with (contrast: items)."""
    if clusters:
        print(f"(2) {clusters} clusters, intra-cluster correlation 0.2, {R} datasets per cell")
        print("| mean | shape | n | k | clustered coverage | width | item coverage | item width | cluster design effect |")
    else:
        print(f"(1) repeat-aware vs naive, {R} datasets per cell")
        print("| mean | shape | n | k | repeat-aware coverage | width | naive coverage | naive width | design effect |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 1.0
    for mean in MEANS:
        for name, s in SHAPES.items():
            for n in NS:
                for k in KS:
                    rng = np.random.default_rng([2 if clusters else 1, int(mean * 100), int(s), n, k])
                    c = cell(rng, mean, s, n, k, R, clusters)
                    worst = min(worst, c["coverage"])
                    print(f"| {mean} | {name} | {n} | {k} | {c['coverage']:.3f} | {c['width']:.3f} | "
                          f"{c['other_coverage']:.3f} | {c['other_width']:.3f} | {c['design_effect']:.2f} |", flush=True)
    print(f"lowest {'clustered' if clusters else 'repeat-aware'} coverage: {worst:.3f}")


def table_1(R: int) -> None:
    _interval_table(R, 0)


def table_2(R: int) -> None:
    _interval_table(R, CLUSTERS)


def table_3(R: int) -> None:
    print(f"(3) variance decomposition, n=300, k=10, {R} datasets per cell (relative error of the mean estimate)")
    print("| mean | shape | within (true) | rel. error | between (true) | rel. error | between 5-95% of datasets |")
    print("|---|---|---|---|---|---|---|")
    for mean in MEANS:
        for name, s in SHAPES.items():
            c = components_cell(np.random.default_rng([3, int(mean * 100), int(s)]), mean, s, 300, 10, R)
            lo, hi = c["between_p5_p95"]
            print(f"| {mean} | {name} | {c['within']:.4f} ({c['true_within']:.4f}) | {c['within_rel']:+.3f} | "
                  f"{c['between']:.4f} ({c['true_between']:.4f}) | {c['between_rel']:+.3f} | {lo:+.2f} to {hi:+.2f} |")


def table_4(R: int) -> None:
    from scipy.stats import t as t_dist

    rg = max(50, R // 4)  # BCa is slow
    print(f"(4) graded repeats (answers ~ Beta(5 p_i, 5 (1 - p_i))), {rg} datasets per cell; for contrast BCa "
          "over the per-item means and, with clusters, the plain t interval on the cluster-robust SE")
    print("| mean | shape | n | k | BCa over item means | width | repeat-aware (score) | width | "
          "clustered coverage | width | cluster t coverage | width |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mean in MEANS:
        for name, s in SHAPES.items():
            for n in (30, 300):
                for k in (3, 10):
                    rng = np.random.default_rng([4, int(mean * 100), int(s), n, k])
                    res: dict[str, list] = {"bca": [], "score": [], "clustered": [], "t": []}
                    items = np.repeat(np.arange(n), k)
                    for _ in range(rg):
                        for clustered in (False, True):
                            p = np.clip(item_probs(rng, mean, s, n, CLUSTERS if clustered else 0), 1e-6, 1 - 1e-6)
                            y = rng.beta(5 * p[:, None], 5 * (1 - p[:, None]), (n, k)).ravel()
                            if not clustered:
                                bca = stats.graded_interval(repeats.reduce_repeats(y, items).to_numpy(), n_boot=1000)
                                res["bca"].append((_covers(bca, mean), bca["ci_high"] - bca["ci_low"]))
                            out = repeats.repeat_interval(y, items, clusters=items % CLUSTERS if clustered else None)
                            res["clustered" if clustered else "score"].append(
                                (_covers(out, mean), out["ci_high"] - out["ci_low"]))
                            if clustered:
                                half = t_dist.ppf(0.975, out["df"]) * out["se"]
                                t_out = {"ci_low": out["value"] - half, "ci_high": out["value"] + half}
                                res["t"].append((_covers(t_out, mean), 2 * half))
                    cols = " | ".join(f"{c:.3f} | {w:.3f}" for c, w in
                                      (np.mean(res[key], axis=0) for key in ("bca", "score", "clustered", "t")))
                    print(f"| {mean} | {name} | {n} | {k} | {cols} |", flush=True)


def table_5(R: int) -> None:
    print(f"(5) paired differences with {CLUSTERS} clusters (model B: p_i * 0.9; null: per cluster one model "
          f"loses a tenth), {R} datasets")
    print("| mean | n | k | diff coverage | width | size of the cluster test | size of the item test |")
    print("|---|---|---|---|---|---|---|")
    for mean in MEANS:
        for n in (30, 300):
            for k in (1, 3):
                rng = np.random.default_rng([5, int(mean * 100), n, k])
                hit, width, size_c, size_i = [], [], [], []
                for _ in range(R):
                    p = item_probs(rng, mean, 2.0, n, CLUSTERS)
                    va, items = answers(rng, p, k)
                    vb, _ = answers(rng, 0.9 * p, k)
                    # the null: on each cluster one of two equally good models loses a tenth (a coin
                    # says which), so their differences are alike within a cluster
                    worse = (rng.random(CLUSTERS) < 0.5)[np.arange(n) % CLUSTERS]
                    vna, _ = answers(rng, np.where(worse, 0.9 * p, p), k)
                    vnb, _ = answers(rng, np.where(worse, p, 0.9 * p), k)
                    a, b, null_a, null_b = (repeats.reduce_repeats(v, items) for v in (va, vb, vna, vnb))
                    groups = dict(zip(range(n), np.arange(n) % CLUSTERS))
                    out = repeats.paired_difference(a, b, clusters=groups, n_perm=999)
                    hit.append(_covers({"ci_low": out["ci_low"], "ci_high": out["ci_high"]}, 0.1 * mean))
                    width.append(out["ci_high"] - out["ci_low"])
                    size_c.append(repeats.paired_difference(null_a, null_b, clusters=groups, n_perm=999)["p_value"] <= 0.05)
                    size_i.append(repeats.paired_difference(null_a, null_b, n_perm=999)["p_value"] <= 0.05)
                print(f"| {mean} | {n} | {k} | {np.mean(hit):.3f} | {np.mean(width):.3f} | {np.mean(size_c):.3f} | "
                      f"{np.mean(size_i):.3f} |", flush=True)
    print()


def table_6(R: int) -> None:
    print(f"(6) Miller's projection from k=3 to k=10 (n=100), {R} datasets")
    print("| mean | shape | projected SE (median) | simulated SD of the estimate at k=10 | ratio |")
    print("|---|---|---|---|---|")
    for mean in MEANS:
        for name, s in SHAPES.items():
            rng = np.random.default_rng([6, int(mean * 100), int(s)])
            projected, estimates = [], []
            for _ in range(R):
                out = repeats.repeat_interval(*answers(rng, item_probs(rng, mean, s, 100), 3))
                projected.append(repeats.projected_interval(out, repeats=10)["se"])
                estimates.append(float(np.mean(answers(rng, item_probs(rng, mean, s, 100), 10)[0])))
            sd = float(np.std(estimates, ddof=1))
            print(f"| {mean} | {name} | {np.median(projected):.4f} | {sd:.4f} | {np.median(projected) / sd:.3f} |")


TABLES = {"1": table_1, "2": table_2, "3": table_3, "4": table_4, "5": table_5, "6": table_6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="200 datasets per cell")
    ap.add_argument("--tables", default="123456", help="which tables to run, e.g. 45")
    args = ap.parse_args()
    R = 200 if args.quick else args.datasets
    t0 = time.time()
    for num in args.tables:
        TABLES[num](R)
        print()
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
