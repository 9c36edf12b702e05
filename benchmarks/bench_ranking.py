"""Wall time and peak memory of a ranking: N models x Q questions x J judges against the stub server.

The stub (tests/stub_server.py, its own process) answers every judge call after a fixed latency
with a pairwise verdict from the [[strength_N]] markers in the two answers (known preferences plus
noise), so the ratings have a true order to recover. Measured, per phase of `RankingRun`: load
(read and match the files), judge (every call through the real ModelClient, SQLite cache and the
structured-output chain), rate (pooled and per-judge Bradley–Terry fits with `n_boot` question
bootstraps, plain and style-controlled), save (CSVs, results.json, three PNGs); then the same run
again replayed from the cache. Peak RSS is this process's high-water mark (ru_maxrss; the stub is
another process).

``--against REV`` also times the rate phase of another version of `evekit.ranking` (the file at git
revision REV) back to back with this one on the same battles and seed, alternating, three times
each, and reports the medians and the largest difference of every rating and interval column.

    python benchmarks/bench_ranking.py                      # 6 models x 200 questions x 3 judges, 50 ms
    python benchmarks/bench_ranking.py --questions 40       # quick try
    python benchmarks/bench_ranking.py --against 61dd9ec    # and the battle-by-battle fits of that commit

Figures (--against 61dd9ec, 2 shared cores, load average 4.0-5.9; the rate phase: pooled and three
judges, plain and style-controlled, 1,000 bootstraps each): 61dd9ec 18.3 / 16.5 / 16.4 s (CPU
16.3 s median), this version 1.30 / 1.22 / 1.00 s (CPU 1.20 s median); largest difference of any
rating or interval 2.6e-5 points, the same ranks. 61dd9ec alone at load ~2: rate_s 13.1 s; at
load 10-11, 71.4 s against 5.9 s (this branch before fitting on one BLAS thread).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

import pandas as pd  # noqa: E402
from stub_server import StubServer  # noqa: E402

import evekit.runs.ranking.run as run_module  # noqa: E402
from evekit import ranking  # noqa: E402
from evekit.runs.ranking import RankingRun  # noqa: E402

COMPARED = ["rating", "ci_low", "ci_high", "style_rating", "style_ci_low", "style_ci_high"]


def write_models(folder: Path, n_models: int, n_questions: int) -> tuple[list[dict], list[str]]:
    """samples.csv per model; model k's answers carry [[strength_<2k>]] (the last model strongest)."""
    names = [f"model-{k}" for k in range(n_models)]
    qs = [f"Question {i}: which Sentinel-2 band is used for index {i}?" for i in range(n_questions)]
    out = []
    for k, name in enumerate(names):
        answers = [f"{name} says band B{(i + k) % 12 + 1} [[strength_{2 * k}]]" + " because" * (i % 4)
                   for i in range(n_questions)]
        path = folder / f"{name}.csv"
        pd.DataFrame({"doc_id": range(n_questions), "doc.Question": qs, "target": "reference answer",
                      "filtered_resps": answers}).to_csv(path, index=False)
        out.append({"name": name, "file": str(path)})
    return out, names[::-1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def one_run(params: dict) -> tuple[dict, RankingRun]:
    times = {}
    t = time.perf_counter()
    run = RankingRun.from_params(**params)
    run.load()
    run.plan()
    times["load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    run.judge()
    times["judge_s"] = time.perf_counter() - t
    t = time.perf_counter()
    run.rate()
    times["rate_s"] = time.perf_counter() - t
    t = time.perf_counter()
    run.save()
    times["save_s"] = time.perf_counter() - t
    times["total_s"] = sum(times.values())
    return times, run


def ranking_at(rev: str) -> ModuleType:
    """evekit/ranking.py as it was at git revision `rev`, imported under its own name."""
    text = subprocess.run(["git", "-C", str(HERE.parent), "show", f"{rev}:evekit/ranking.py"], check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"ranking_{rev}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"ranking_{rev}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_rate(run: RankingRun, module: ModuleType) -> tuple[float, float, pd.DataFrame]:
    """`run.rate()` (pooled, then each judge, as the notebook does) with `module` as evekit.ranking:
    wall seconds, CPU seconds of this process (less sensitive to other work on the machine), ratings."""
    saved = run_module.R
    run_module.R = module
    try:
        t, c = time.perf_counter(), time.process_time()
        run.rate()
        return time.perf_counter() - t, time.process_time() - c, run.ratings.copy()
    finally:
        run_module.R = saved


def compare(run: RankingRun, rev: str, repeats: int = 3) -> dict:
    """The rate phase of `rev`'s ranking module and of this one, alternating, `repeats` times each."""
    old = ranking_at(rev)
    times: dict[str, list[float]] = {"old": [], "new": []}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    load = [os.getloadavg()[0]]
    for _ in range(repeats):
        for name, module in (("old", old), ("new", ranking)):
            seconds, cpu_seconds, table = timed_rate(run, module)
            times[name].append(round(seconds, 3))
            cpu[name].append(round(cpu_seconds, 3))
            load.append(os.getloadavg()[0])
            if name == "old":
                before = table
            else:
                after = table
    key = ["judge", "model"]
    merged = before.merge(after, on=key, suffixes=("_old", "_new"))
    assert len(merged) == len(before) == len(after)
    diff = {c: float((merged[f"{c}_old"] - merged[f"{c}_new"]).abs().max()) for c in COMPARED}
    return {"against": rev, "old_rate_s": times["old"], "new_rate_s": times["new"],
            "old_median_s": statistics.median(times["old"]), "new_median_s": statistics.median(times["new"]),
            "old_cpu_s": cpu["old"], "new_cpu_s": cpu["new"],
            "old_cpu_median_s": statistics.median(cpu["old"]), "new_cpu_median_s": statistics.median(cpu["new"]),
            "loadavg_1min": load, "max_abs_difference": diff,
            "same_ranks": bool((merged["rank_old"] == merged["rank_new"]).all())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=6)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=8, help="per judge endpoint")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--one-order", action="store_true", help="both_orders=False")
    ap.add_argument("--against", metavar="REV", help="also time evekit/ranking.py of this git revision")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, StubServer(latency=a.latency) as stub:
        tmp = Path(tmp)
        models, truth = write_models(tmp, a.models, a.questions)
        params = dict(task="open_ended", models=models, judges=[{"name": f"judge{j}", "model": f"stub-{j}", "base_url": stub.base_url,
                                              "api_key_env": None} for j in range(a.judges)],
                      both_orders=not a.one_order, n_boot=a.n_boot, concurrency=a.concurrency,
                      cache_dir=str(tmp / "cache"), output_dir=str(tmp / "out"), run_name="bench", seed=1)
        fresh, run = one_run(params)
        calls = stub.stats()["total"]
        rss_fresh = peak_rss_mb()
        replay, run2 = one_run(params)
        replay_calls = stub.stats()["total"] - calls
    compared = compare(run2, a.against) if a.against else None
    pooled = run.ratings[run.ratings["judge"] == "pooled"].sort_values("rating", ascending=False)
    result = {
        "models": a.models, "questions": a.questions, "judges": a.judges, "latency_s": a.latency,
        "concurrency_per_judge": a.concurrency, "n_boot": a.n_boot, "both_orders": not a.one_order,
        "judge_calls_planned": run.call_plan["judge_calls"], "http_requests": calls,
        "battles": len(run.battles), "failed_battles": int(run.battles["winner"].isna().sum()),
        "ideal_judge_s": run.call_plan["judge_calls"] * a.latency / (a.concurrency * a.judges),
        "fresh": {k: round(v, 2) for k, v in fresh.items()},
        "replay": {k: round(v, 2) for k, v in replay.items()}, "replay_http_requests": replay_calls,
        "peak_rss_mb_after_fresh": round(rss_fresh, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
        "true_order_recovered": pooled["model"].tolist() == truth,
        "pooled": pooled[["model", "rating", "ci_low", "ci_high", "rank"]].round(1).to_dict(orient="records"),
        "compare": compared,
        "machine": {"cpus": os.cpu_count(), "loadavg": os.getloadavg(), "python": platform.python_version()},
    }
    print(json.dumps(result, indent=2))
    out = HERE / "results" / "bench_ranking.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["true_order_recovered"] else 1


if __name__ == "__main__":
    sys.exit(main())
