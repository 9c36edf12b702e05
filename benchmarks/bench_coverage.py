"""Coverage of the 95% intervals: old (percentile bootstrap over items, what evekit used before;
kept here as `_percentile` and `_paired_percentile`) vs new (evekit.stats.interval /
compare_paired), per cell, with mean interval width. Seeded.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_coverage.py [--datasets 2000] [--n-boot 1000]

Distributions (true value in brackets):
  acc        i.i.d. Bernoulli(p)                                                  [p]
  iou        20% 0, 30% 1, 50% Beta(4,2)                                          [0.633]
  skew       5% 0, 85% 1, 10% Beta(5,2)                                           [0.921]
  rare0      2% 0, 90% 1, 8% Beta(20,1)  (rare total misses among near-perfect)   [0.976]
  cosine     Beta(40,8)                                                           [0.833]
  f1         prevalence 0.1, sensitivity 0.8, false-positive rate 0.05            [0.711]
  paired     cells (11, 10, 01, 00) = (0.60, 0.10, 0.06, 0.24): Delta = 0.04      [0.04]
  size       two independent Beta(2,2) graded scores, n=10: rejection rate at alpha=0.05
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from evekit import stats
from evekit.metrics import binary_prf


def _cov(lo, hi, truth):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    ok = np.isfinite(lo) & np.isfinite(hi)
    return float(np.mean(ok & (lo <= truth + 1e-12) & (truth <= hi + 1e-12))), float(np.nanmean(hi - lo))


def _percentile(values, stat=np.mean, n_boot=1000, seed=0):
    """The old interval: percentile bootstrap of `stat` over the items (rows)."""
    dist = stats.bootstrap_distribution(values, stat, n_boot, seed)
    if np.isnan(dist).all():
        return float("nan"), float("nan")
    low, high = np.nanpercentile(dist, [2.5, 97.5])
    return float(low), float(high)


def _paired_percentile(a, b, n_boot=1000, seed=0):
    """The old paired comparison: percentile interval of the mean difference and the share of
    resampled differences, re-centred on zero, at least as far from zero as the observed one."""
    d = np.asarray(a, float) - np.asarray(b, float)
    dist = stats.bootstrap_distribution(d, np.mean, n_boot, seed)
    low, high = np.percentile(dist, [2.5, 97.5])
    extreme = np.abs(dist - d.mean()) >= abs(d.mean()) - 1e-12
    return {"ci_low": float(low), "ci_high": float(high), "p_value": min(1.0, (1 + int(extreme.sum())) / (n_boot + 1))}


def _mix(rng, size, p0, p1, a, b):
    u = rng.random(size)
    return np.where(u < p0, 0.0, np.where(u < p0 + p1, 1.0, rng.beta(a, b, size)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=1000)
    args = ap.parse_args()
    R, B = args.datasets, args.n_boot
    rows = []
    t0 = time.time()

    def row(cell, old, new, note=""):
        rows.append((cell, *old, *new, note))
        print(f"{cell:<28} old {old[0]:.3f} ({old[1]:.3f})   new {new[0]:.3f} ({new[1]:.3f})  {note}", flush=True)

    for p in (0.5, 0.9, 0.98):
        for n in (20, 50, 200):
            rng = np.random.default_rng(int(1000 * p) + n)
            data = (rng.random((R, n)) < p).astype(float)
            old = [_percentile(x, n_boot=B, seed=i) for i, x in enumerate(data)]
            new = [stats.interval(x, "proportion") for x in data]
            row(f"acc p={p} n={n}", _cov(*zip(*old), p),
                _cov([r["ci_low"] for r in new], [r["ci_high"] for r in new], p), "wilson")

    graded = {"iou": (0.2, 0.3, 4, 2), "skew": (0.05, 0.85, 5, 2), "rare0": (0.02, 0.90, 20, 1),
              "cosine": (0.0, 0.0, 40, 8)}
    for name, (p0, p1, a, b) in graded.items():
        truth = p1 + (1 - p0 - p1) * a / (a + b)
        for n in ((20, 50, 200) if name == "iou" else (20, 50)):
            rng = np.random.default_rng(n + len(name))
            data = _mix(rng, (R, n), p0, p1, a, b)
            old = [_percentile(x, n_boot=B, seed=i) for i, x in enumerate(data)]
            new = [stats.interval(x, "graded_mean", seed=i, n_boot=B) for i, x in enumerate(data)]
            const = sum(r["method"] == "constant_bound" for r in new)
            row(f"graded {name} n={n}", _cov(*zip(*old), truth),
                _cov([r["ci_low"] for r in new], [r["ci_high"] for r in new], truth),
                f"bca; {const} constant samples")

    def f1_old(data, axis=1):
        data = np.asarray(data)
        return binary_prf(data[..., 0], data[..., 1], axis=-1)[2]

    tp, fn, fp = 0.08, 0.02, 0.045
    truth = 2 * tp / (2 * tp + fp + fn)
    for n in (20, 50, 200):
        rng = np.random.default_rng(3 + n)
        gold = rng.random((R, n)) < 0.1
        pred = np.where(gold, rng.random((R, n)) < 0.8, rng.random((R, n)) < 0.05)
        pairs = [np.column_stack([p_, g_]).astype(float) for p_, g_ in zip(pred, gold)]
        old = [_percentile(x, f1_old, n_boot=B, seed=i) for i, x in enumerate(pairs)]
        new = [stats.interval(x, "corpus") for x in pairs]
        undefined = sum(not np.isfinite(r["value"]) for r in new)
        row(f"corpus F1 n={n}", _cov(*zip(*old), truth),
            _cov([r["ci_low"] for r in new], [r["ci_high"] for r in new], truth),
            f"wilson_conditional; {undefined} datasets with F1 undefined (count as misses)")

    for n in (20, 50):
        rng = np.random.default_rng(4 + n)
        cells = rng.choice(4, p=[0.60, 0.10, 0.06, 0.24], size=(R, n))
        a = np.isin(cells, (0, 1)).astype(float)
        b = np.isin(cells, (0, 2)).astype(float)
        old = [_paired_percentile(x, y, n_boot=B, seed=i) for i, (x, y) in enumerate(zip(a, b))]
        new = [stats.compare_paired(x, y) for x, y in zip(a, b)]
        row(f"paired 0/1 d=0.04 n={n}", _cov([r["ci_low"] for r in old], [r["ci_high"] for r in old], 0.04),
            _cov([r["ci_low"] for r in new], [r["ci_high"] for r in new], 0.04), "bonett_price")

    rng = np.random.default_rng(10)
    a, b = rng.beta(2, 2, (R, 10)), rng.beta(2, 2, (R, 10))
    old = np.mean([_paired_percentile(x, y, n_boot=B, seed=i)["p_value"] <= 0.05 for i, (x, y) in enumerate(zip(a, b))])
    new = np.mean([stats.compare_paired(x, y, n_boot=200)["p_value"] <= 0.05 for x, y in zip(a, b)])
    print(f"size of the graded paired test, n=10, alpha=0.05: old {old:.3f}  new {new:.3f}")

    print(f"\n{R} datasets per cell, {B} resamples; {time.time() - t0:.0f} s\n")
    print("| cell | old coverage | old width | new coverage | new width | new method |")
    print("|---|---|---|---|---|---|")
    for cell, oc, ow, nc, nw, note in rows:
        print(f"| {cell} | {oc:.3f} | {ow:.3f} | {nc:.3f} | {nw:.3f} | {note} |")
    print(f"| graded paired test size, n=10 (rejections of a true null, alpha=0.05) | {old:.3f} | | {new:.3f} | | sign_flip_exact |")


if __name__ == "__main__":
    main()
