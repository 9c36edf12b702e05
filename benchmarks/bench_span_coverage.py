"""Coverage of the span metrics' 95% intervals (issue 27), on items simulated with
tests/test_spans.py's `simulated_item`: per detector and number of items n, how often the
interval holds the population value, and its mean width. Seeded.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_span_coverage.py [--datasets 1000] [--n-boot 1000]

A population of 20,000 simulated items is drawn per detector; its mean (hard_iou,
soft_spearman) or pooled ratio (span_precision/recall/f1: sums of tp, fp, fn) is the truth; each
dataset draws n items from it. Intervals: evekit.metrics' (BCa for the two per-item means, a
percentile bootstrap over items for the pooled ratios). For span_f1 the table also shows what a
Wilson interval on the characters would give (as if every character were an independent draw):
the reason the pooled ratios resample items.

Detectors (tests/test_spans.py DETECTORS): "noisy" finds 60% of the gold spans with boundaries off
by up to 3 characters and adds a false span 30% of the time; "good" 90%, 1, 10%; "tiny" replies
nothing 40% of the time, marks the whole answer 20%, otherwise finds 30% with boundaries off by up
to 8 characters (per-item values pile up at 0 and 1, as the demo's tiny model's do).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test_spans imports its helpers by name

from evekit import metrics as M  # noqa: E402
from test_spans import DETECTORS, simulated_item  # noqa: E402

METRICS = ("hard_iou", "soft_spearman", "span_precision", "span_recall", "span_f1")
SIZES = (20, 50, 100, 300)


def truth_of(pool: pd.DataFrame) -> dict[str, float]:
    tp, fp, fn = (pool[c].sum() for c in ("span_tp", "span_fp", "span_fn"))
    return {"hard_iou": pool["hard_iou"].mean(), "soft_spearman": pool["soft_spearman"].mean(),
            "span_precision": tp / (tp + fp), "span_recall": tp / (tp + fn), "span_f1": 2 * tp / (2 * tp + fp + fn)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--pool", type=int, default=20_000)
    ap.add_argument("--out", default="benchmarks/results/span_coverage.json")
    args = ap.parse_args()
    t0 = time.time()
    rows = []
    print(f"{'detector':<8} {'n':>4}  " + "  ".join(f"{m:>21}" for m in METRICS) + "  f1 Wilson on chars")
    for d, detector in enumerate(DETECTORS):
        rng = np.random.default_rng(100 + d)
        pool = pd.DataFrame([simulated_item(rng, detector) for _ in range(args.pool)])
        truth = truth_of(pool)
        for n in SIZES:
            rng = np.random.default_rng(1000 * d + n)
            hits = {m: [] for m in METRICS}
            widths = {m: [] for m in METRICS}
            naive = []
            for r in range(args.datasets):
                frame = pool.iloc[rng.integers(0, len(pool), n)]
                for m in METRICS:
                    out = M.get_metric(m).summarize(frame, seed=r, n_boot=args.n_boot)
                    lo, hi = out["ci_low"], out["ci_high"]
                    ok = lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi)
                    hits[m].append(bool(ok and lo - 1e-12 <= truth[m] <= hi + 1e-12))
                    if ok:
                        widths[m].append(hi - lo)
                tp, fp, fn = (int(frame[c].sum()) for c in ("span_tp", "span_fp", "span_fn"))
                lo, hi = proportion_confint(tp, tp + fp + fn, method="wilson") if tp + fp + fn else (np.nan, np.nan)
                lo, hi = 2 * lo / (1 + lo), 2 * hi / (1 + hi)
                naive.append(bool(lo <= truth["span_f1"] <= hi))
            cell = {"detector": detector, "n": n, "truth": truth,
                    **{f"{m}_coverage": float(np.mean(hits[m])) for m in METRICS},
                    **{f"{m}_width": float(np.mean(widths[m])) if widths[m] else None for m in METRICS},
                    "span_f1_chars_wilson_coverage": float(np.mean(naive))}
            rows.append(cell)
            print(f"{detector:<8} {n:>4}  " + "  ".join(
                f"{cell[f'{m}_coverage']:>8.3f} ({cell[f'{m}_width'] or float('nan'):.3f})    " for m in METRICS)
                + f"{cell['span_f1_chars_wilson_coverage']:.3f}", flush=True)
    print("truth per detector:", json.dumps({r["detector"]: {k: round(v, 3) for k, v in r["truth"].items()}
                                             for r in rows}))
    seconds = time.time() - t0
    print(f"{seconds:.0f} s, load {os.getloadavg()}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"datasets": args.datasets, "n_boot": args.n_boot, "pool": args.pool, "cells": rows,
                               "seconds": seconds, "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
