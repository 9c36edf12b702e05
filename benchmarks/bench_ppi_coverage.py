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

Figures: see the issue-31 note, or run this (about 3 minutes on the 2 shared cores).
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
