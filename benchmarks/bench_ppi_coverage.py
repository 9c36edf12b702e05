"""Coverage of evekit.correction's judge-corrected intervals, by simulation. Seeded.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ppi_coverage.py [--datasets 2000] [--seed 0]

PPI++ (`ppi_mean`): a run of N = 1,000 judged items with true pass rate p, judged by a judge of
sensitivity se and specificity sp; n of them (a uniform draw) labelled by an expert. Per cell:
the coverage of the true p by the kit's interval (`ppi`), by ppi_py's own power-tuned interval
without the kit's pseudo-pair (`ppi_py`), by the judge-only Wilson interval over all 1,000
verdicts (`judge`, what a judged score shows without labels) and by the labels-only Wilson
interval (`labels`); the mean width ratio PPI / labels-only (`ratio`: < 1 = the judge helps; its
inverse squared is the effective number of labels per label) and the mean PPI width.

Rogan-Gladen (`rogan_gladen`): a validation set of 100 items (50 gold PASS, 50 gold FAIL) judged
with (se, sp), the task's 1,000 items judged with the same rates (transport held) or with each
0.1 lower (transport broken: the judge errs more on the task than on the validation set).
Coverage among the datasets where the correction is defined; `undef`: the share where the
validation's sensitivity + specificity <= 1 (a judge no better than chance: NaN, no correction).
The simulators are tests/test_correction.py's (`ppi_coverage`, `rg_coverage`).

Figures (2,000 datasets per cell, seed 0; 366 s at load 9 on the 2 shared cores):

       p    se    sp    n |    ppi ppi_py  judge labels | ratio  width
     0.3  0.95  0.95   30 |  0.990  0.912  0.710  0.934 |  0.71  0.217
     0.3  0.95  0.95  100 |  0.963  0.934  0.710  0.934 |  0.61  0.107
     0.3  0.95  0.95  300 |  0.948  0.941  0.710  0.947 |  0.69  0.071
     0.3  0.90  0.70   30 |  0.957  0.928  0.000  0.934 |  0.92  0.282
     0.3  0.90  0.70  100 |  0.946  0.940  0.000  0.934 |  0.88  0.154
     0.3  0.90  0.70  300 |  0.951  0.951  0.000  0.947 |  0.89  0.092
     0.3  0.60  0.60   30 |  0.947  0.936  0.000  0.934 |  1.01  0.311
     0.3  0.60  0.60  100 |  0.943  0.934  0.000  0.934 |  0.99  0.175
     0.3  0.60  0.60  300 |  0.949  0.949  0.000  0.947 |  0.99  0.102
     0.6  0.95  0.95   30 |  0.990  0.942  0.905  0.969 |  0.67  0.219
     0.6  0.95  0.95  100 |  0.966  0.939  0.905  0.949 |  0.59  0.110
     0.6  0.95  0.95  300 |  0.947  0.943  0.905  0.948 |  0.68  0.074
     0.6  0.90  0.70   30 |  0.955  0.913  0.024  0.969 |  0.88  0.287
     0.6  0.90  0.70  100 |  0.954  0.945  0.024  0.949 |  0.84  0.157
     0.6  0.90  0.70  300 |  0.950  0.944  0.024  0.948 |  0.86  0.095
     0.6  0.60  0.60   30 |  0.949  0.922  0.001  0.969 |  1.01  0.327
     0.6  0.60  0.60  100 |  0.943  0.940  0.001  0.949 |  0.99  0.186
     0.6  0.60  0.60  300 |  0.947  0.947  0.001  0.948 |  0.99  0.109
     0.9  0.95  0.95   30 |  1.000  0.811  0.022  0.968 |  0.85  0.180
     0.9  0.95  0.95  100 |  0.961  0.911  0.022  0.934 |  0.76  0.089
     0.9  0.95  0.95  300 |  0.954  0.939  0.022  0.949 |  0.78  0.053
     0.9  0.90  0.70   30 |  0.990  0.836  0.001  0.968 |  0.93  0.201
     0.9  0.90  0.70  100 |  0.954  0.920  0.001  0.934 |  0.92  0.108
     0.9  0.90  0.70  300 |  0.943  0.937  0.001  0.949 |  0.92  0.063
     0.9  0.60  0.60   30 |  0.977  0.839  0.000  0.968 |  1.00  0.217
     0.9  0.60  0.60  100 |  0.950  0.926  0.000  0.934 |  1.00  0.118
     0.9  0.60  0.60  300 |  0.943  0.935  0.000  0.949 |  1.00  0.068

    Rogan-Gladen, validation 50 + 50 items, task N = 1,000
       p    se    sp |   held  width  undef | broken  width  undef
     0.3  0.95  0.95 |  0.949  0.134  0.000 |  0.748  0.132  0.000
     0.3  0.90  0.70 |  0.950  0.334  0.000 |  0.866  0.332  0.000
     0.3  0.60  0.60 |  0.949  0.769  0.025 |  0.876  0.827  0.025
     0.6  0.95  0.95 |  0.950  0.131  0.000 |  0.890  0.131  0.000
     0.6  0.90  0.70 |  0.954  0.293  0.000 |  0.923  0.298  0.000
     0.6  0.60  0.60 |  0.948  0.812  0.025 |  0.925  0.828  0.025
     0.9  0.95  0.95 |  0.942  0.122  0.000 |  0.460  0.137  0.000
     0.9  0.90  0.70 |  0.947  0.192  0.000 |  0.607  0.269  0.000
     0.9  0.60  0.60 |  0.952  0.616  0.025 |  0.729  0.827  0.025

PPI covers 0.943-1.000 in every cell (ppi_py's own interval: 0.811-0.951, under 0.93 in 10 of
27 cells, all at n <= 100); the judge-only interval 0.000-0.905 (0.000-0.024 for the two weaker
judges and for p = 0.9). A good judge (0.95/0.95) narrows the interval to 0.6-0.85 of the labels'
(worth 1.4-2.9 labels each); a 0.6/0.6 judge buys nothing (ratio 1.0: lambda near 0). Rogan-Gladen
covers 0.942-0.954 when the validation transports, and 0.46-0.92 when the judge's sensitivity
and specificity on the task are 0.1 lower than on the validation set: its interval is only as
good as that assumption.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# tests/ by path, not as the package `tests`: ppi-python's wheel installs a top-level `tests`
# package into site-packages, which would shadow this folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_correction import ppi_coverage, rg_coverage  # noqa: E402

PREVALENCES = (0.3, 0.6, 0.9)
JUDGES = ((0.95, 0.95), (0.9, 0.7), (0.6, 0.6))
LABELS = (30, 100, 300)
SHIFT = 0.1  # transport broken: the task's sensitivity and specificity this much lower


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/ppi_coverage.json")
    args = ap.parse_args()
    started = time.monotonic()
    rows, rg_rows = [], []
    print(f"PPI++, N = 1,000 judged items, {args.datasets} datasets per cell")
    print(f"{'p':>4} {'se':>5} {'sp':>5} {'n':>4} | {'ppi':>6} {'ppi_py':>6} {'judge':>6} {'labels':>6} | "
          f"{'ratio':>5} {'width':>6}")
    for p in PREVALENCES:
        for se, sp in JUDGES:
            for n in LABELS:
                got = ppi_coverage(p, se, sp, n, datasets=args.datasets, seed=args.seed)
                rows.append({"p": p, "se": se, "sp": sp, "n": n, **got})
                print(f"{p:4.1f} {se:5.2f} {sp:5.2f} {n:4d} | {got['ppi']:6.3f} {got['ppi_py']:6.3f} "
                      f"{got['judge_only']:6.3f} {got['labels_only']:6.3f} | {got['width_ratio']:5.2f} "
                      f"{got['width']:6.3f}", flush=True)
    print(f"\nRogan-Gladen, validation 50 + 50 items, task N = 1,000, {args.datasets} datasets per cell")
    print(f"{'p':>4} {'se':>5} {'sp':>5} | {'held':>6} {'width':>6} {'undef':>6} | {'broken':>6} {'width':>6} "
          f"{'undef':>6}")
    for p in PREVALENCES:
        for se, sp in JUDGES:
            held = rg_coverage(p, se, sp, datasets=args.datasets, seed=args.seed)
            broken = rg_coverage(p, se, sp, task_se=se - SHIFT, task_sp=sp - SHIFT, datasets=args.datasets,
                                 seed=args.seed)
            rg_rows.append({"p": p, "se": se, "sp": sp, "held": held, "broken": broken})
            print(f"{p:4.1f} {se:5.2f} {sp:5.2f} | {held['coverage']:6.3f} {held['width']:6.3f} "
                  f"{held['undefined']:6.3f} | {broken['coverage']:6.3f} {broken['width']:6.3f} "
                  f"{broken['undefined']:6.3f}", flush=True)
    seconds = time.monotonic() - started
    print(f"\n{seconds:.0f} s, load average {os.getloadavg()[0]:.1f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"datasets": args.datasets, "seed": args.seed, "ppi": rows, "rogan_gladen": rg_rows,
                               "seconds": round(seconds, 1), "load": os.getloadavg()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
