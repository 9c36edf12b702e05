"""How `evekit.ranking.rate` scales with models and battles: wall time and peak memory of the
pooled and per-judge Bradley–Terry fits with 1,000 question bootstraps, plain and style-controlled.

Battles are simulated (vectorised, seeded): N models with N(0, 1) log-strengths, Q questions,
k pairs per question taken in turn from a random permutation of all pairs (as
`ranking.sample_pairs` does), both orders, J judges, ties ~10%, answer lengths per question and
model (so the style fit has cells that differ by question) and a length bias of 0.5. Each cell
runs in its own process; its peak memory is the high-water mark of the process's RSS during
`rate` (reset after the simulation, /proc/self/clear_refs), which includes Python, numpy, pandas
and the battles table.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ranking_scale.py            # the table below
    PYTHONPATH=. .venv/bin/python benchmarks/bench_ranking_scale.py --quick    # two small cells

Where the time goes: the plain fit works on per-question count tables (pairs x questions), so a
resample costs a sparse product over the (question, pair) cells and a Newton solve on the K x K
Laplacian: O(n_boot x (cells + K^3)) per Newton step, about 3 steps, independent of how many
judges or orders produced a cell. The style fit's covariate differs by question, so its cells are
(question, pair, length difference): all judges and both orders of one pair on one question pool,
and a step costs O(n_boot x cells) elementwise work, about 90% of the total at 300,000 battles.
BLAS runs on one thread (threadpoolctl): OpenBLAS's threads spin-wait for each other, and with
them a 100-model bootstrap on a busy 2-core machine took 9 times as long.

Figures (1,000 bootstraps; "style yes" is what `rate` does when the table has len_a/len_b: plain
and style-controlled fits, pooled and per judge; 2 shared cores, load average 4.6-5.3, so wall
time is about twice the CPU time; peak = the process's RSS high-water mark during `rate`):

    models  questions  judges  pairs/q   battles  style  seconds  cpu s  peak MB
        10       2000       3       25   300,000     no      1.5    0.7      333
        10       2000       3       25   300,000    yes     14.8    7.3      360
        25       2000       3       25   300,000     no      2.3    1.1      332
        25       2000       3       25   300,000    yes     18.6    9.1      359
        50       2000       3       25   300,000     no      2.9    1.4      345
        50       2000       3       25   300,000    yes     24.9   12.3      350
       100       2000       3       25   300,000     no      7.6    3.7      333
       100       2000       3       25   300,000    yes     33.6   16.6      358
       200       2000       3       25   300,000     no     31.0   15.2      339
       200       2000       3       25   300,000    yes     74.2   37.0      385
        50        200       3       25    30,000     no      2.0    1.3      257
        50        200       3       25    30,000    yes      6.7    4.5      285
        50        500       3       25    75,000     no      1.9    1.3      266
        50        500       3       25    75,000    yes      7.1    4.8      271
        50       5000       3       25   750,000     no      3.9    2.5      464
        50       5000       3       25   750,000    yes     50.0   30.5      505
        20        500       3      190   570,000     no      1.7    1.1      382
        20        500       3      190   570,000    yes     30.6   18.9      397

At load 3.3 the 50-model, 300,000-battle cell took 12.1 s with style (10.9 s CPU) and 1.7 s
without. The style fit grows with the (question, pair) cells (x2.5 battles: x2.5 time); the plain
fit hardly grows with battles and goes as K^3 beyond ~100 models (the Newton solves).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent

# (models, questions, judges, pairs per question): ~300,000 battles across model counts, then
# 50 models across battle counts
CELLS = [(10, 2000, 3, 25), (25, 2000, 3, 25), (50, 2000, 3, 25), (100, 2000, 3, 25), (200, 2000, 3, 25),
         (50, 200, 3, 25), (50, 500, 3, 25), (50, 5000, 3, 25), (20, 500, 3, 190)]
QUICK = [(10, 200, 3, 10), (50, 500, 3, 25)]


def simulate(n_models: int, n_questions: int, n_judges: int, k: int, seed: int = 0) -> pd.DataFrame:
    """A battles table: k pairs per question, both orders, every judge; see the module docstring."""
    rng = np.random.default_rng(seed)
    beta = rng.normal(0.0, 1.0, n_models)
    names = np.array([f"model-{i:03d}" for i in range(n_models)])
    pairs = np.array(np.triu_indices(n_models, 1)).T
    k = min(k, len(pairs))
    perm = rng.permutation(len(pairs))
    chosen = perm[(np.arange(n_questions)[:, None] * k + np.arange(k)[None, :]) % len(pairs)].ravel()
    a, b = pairs[chosen, 0], pairs[chosen, 1]
    q = np.repeat(np.arange(n_questions), k)
    lengths = rng.normal(400, 80, (n_questions, n_models)).clip(20).round()
    a, b, q = np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([q, q])
    a, b, q = np.tile(a, n_judges), np.tile(b, n_judges), np.tile(q, n_judges)
    judge = np.repeat(np.arange(n_judges), len(a) // n_judges)
    la, lb = lengths[q, a], lengths[q, b]
    p = 1.0 / (1.0 + np.exp(-(beta[a] - beta[b] + 0.5 * (la - lb) / (la + lb))))
    tie = np.minimum(0.1, np.minimum(2 * p, 2 * (1 - p)))  # keeps the expected score Bradley–Terry
    u, v = rng.random(len(a)), rng.random(len(a))
    winner = np.where(u < tie, "tie", np.where(v < (p - tie / 2) / (1 - tie), names[a], names[b]))
    return pd.DataFrame({"question_id": np.char.add("q", q.astype(str)), "model_a": names[a], "model_b": names[b],
                         "judge": np.char.add("judge", judge.astype(str)), "winner": winner, "rationale": "",
                         "len_a": la, "len_b": lb})


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise KeyError(field)


def reset_peak_rss() -> float:
    """Resets the kernel's high-water mark of this process's RSS (Linux: clear_refs 5) so that the
    peak measured next is the fit's, not the simulator's; returns the RSS now (MB)."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def peak_rss_since_reset() -> float:
    return _status_mb("VmHWM")


def one_cell(n_models: int, n_questions: int, n_judges: int, k: int, n_boot: int, style: bool) -> dict:
    """Runs in the child: simulate, then time `rate` (pooled and per judge)."""
    from evekit import ranking as R

    battles = simulate(n_models, n_questions, n_judges, k)
    gc.collect()
    sim_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_before = reset_peak_rss()
    t, c = time.perf_counter(), time.process_time()
    out = R.rate(battles, n_boot=n_boot, seed=1, style=style)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    rate_peak = peak_rss_since_reset()
    return {"models": n_models, "questions": n_questions, "judges": n_judges, "pairs_per_question": k,
            "battles": len(battles), "style": style, "n_boot": n_boot, "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "peak_rss_mb": round(rate_peak, 1), "rss_before_rate_mb": round(rss_before, 1),
            "simulation_peak_rss_mb": round(sim_peak, 1),
            "undefined_resamples": int(sum(out.attrs["undefined_resamples"].values()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="two small cells")
    ap.add_argument("--cell", help=argparse.SUPPRESS)  # models,questions,judges,k,style: run one cell here
    a = ap.parse_args()
    if a.cell:
        m, q, j, k, s = (int(x) for x in a.cell.split(","))
        print(json.dumps(one_cell(m, q, j, k, a.n_boot, bool(s))))
        return 0
    rows = []
    print(f"{'models':>6} {'questions':>9} {'judges':>6} {'pairs/q':>7} {'battles':>9} {'style':>5} "
          f"{'seconds':>8} {'cpu s':>6} {'peak MB':>8} {'load':>5}", flush=True)
    env = dict(os.environ, PYTHONPATH=str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for cell in QUICK if a.quick else CELLS:
        for style in (False, True):
            arg = ",".join(str(x) for x in (*cell, int(style)))
            res = subprocess.run([sys.executable, __file__, "--cell", arg, "--n-boot", str(a.n_boot)],
                                 capture_output=True, text=True, env=env, check=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row["loadavg"] = os.getloadavg()[0]
            rows.append(row)
            print(f"{row['models']:6d} {row['questions']:9d} {row['judges']:6d} {row['pairs_per_question']:7d} "
                  f"{row['battles']:9,d} {'yes' if style else 'no':>5} {row['seconds']:8.1f} {row['cpu_seconds']:6.1f} "
                  f"{row['peak_rss_mb']:8.0f} {row['loadavg']:5.1f}",
                  flush=True)
    out = HERE / "results" / "bench_ranking_scale.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"n_boot": a.n_boot, "cpus": os.cpu_count(), "cells": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
