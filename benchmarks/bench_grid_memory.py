"""Peak memory and time of a grid-sized run: 150,000 calls through ModelClient against a stub.

A study of 10 models x 6 tasks x 3 judges is about 150,000 calls. This sends that many distinct
requests (cache on, a fresh cache directory) to the stub server (tests/stub_server.py, its own
process, 20 ms per answer), split over `--models` clients of one call each, and reports:

  seconds, req/s        wall time of the calls
  peak RSS              this process's maximum resident set (getrusage ru_maxrss), and what it
                        was before the first call (interpreter + imports + the request list)
  max asyncio tasks     the most tasks alive at once, sampled while the calls run: bounded by
                        the concurrency, not by the number of requests
  cache rows            answers on disk afterwards (every one, written as it came)

Acceptance (issue 16): peak RSS under 1 GB, every answer cached and correct.

    python benchmarks/bench_grid_memory.py                        # 150,000 calls, concurrency 64
    python benchmarks/bench_grid_memory.py --n 20000              # quick try
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from stub_server import StubServer  # noqa: E402

from evekit.cache import ResponseCache  # noqa: E402
from evekit.client import ModelClient  # noqa: E402
from evekit.types import GenerationRequest  # noqa: E402

LIMIT_MB = 1024.0


def rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def grid_requests(n: int, models: int) -> list[list[GenerationRequest]]:
    """`n` distinct short EO requests, dealt to `models` clients (a few-shot-sized prompt each)."""
    system = {"role": "system", "content": "You are an Earth-Observation expert. Answer with one letter."}
    per = -(-n // models)
    return [[GenerationRequest(messages=(system, {"role": "user", "content":
                                                  f"Model {m}, item {i}: which band does NDVI use besides red? "
                                                  "A. near infrared B. thermal C. blue D. SWIR"}),
                               max_tokens=8)
             for i in range(m * per, min(n, (m + 1) * per))] for m in range(models)]


async def run_grid(base_url: str, grid: list[list[GenerationRequest]], concurrency: int,
                   cache_dir: str) -> dict:
    max_tasks = 0
    max_rss = 0.0
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal max_tasks, max_rss
        while not stop.is_set():
            max_tasks = max(max_tasks, len(asyncio.all_tasks()) - 2)  # not this sampler, not main
            max_rss = max(max_rss, rss_now_mb())
            await asyncio.sleep(0.25)

    sampler = asyncio.ensure_future(sample())
    n_ok = 0
    t = time.perf_counter()
    for m, reqs in enumerate(grid):
        client = ModelClient(f"stub-model-{m}", base_url, concurrency=concurrency, cache_dir=cache_dir,
                             progress=False, timeout=30)
        results = await client.agenerate(reqs)
        n_ok += sum(1 for r, q in zip(results, reqs) if r.text == f"echo: {q.messages[-1]['content']}")
        client.close()
        del results
    seconds = time.perf_counter() - t
    stop.set()
    await sampler
    return {"seconds": seconds, "answers_ok": n_ok, "max_asyncio_tasks": max_tasks,
            "max_sampled_rss_mb": round(max_rss, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=150_000)
    p.add_argument("--models", type=int, default=1, help="clients the calls are split over (run in turn)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--latency", type=float, default=0.02)
    p.add_argument("--out", default=str(HERE / "results" / "bench_grid_memory.json"))
    a = p.parse_args(argv)

    grid = grid_requests(a.n, a.models)
    before = rss_peak_mb()
    with StubServer(latency=a.latency) as stub, tempfile.TemporaryDirectory() as tmp:
        run = asyncio.run(run_grid(stub.base_url, grid, a.concurrency, tmp))
        sent = stub.stats()["total"]
        with ResponseCache(tmp) as cache:
            rows = len(cache)
    peak = rss_peak_mb()
    report = {"benchmark": "bench_grid_memory", "python": platform.python_version(), "cpus": os.cpu_count(),
              "n": a.n, "models": a.models, "concurrency": a.concurrency, "latency_s": a.latency,
              "ideal_seconds": round(a.n * a.latency / a.concurrency, 1),
              "seconds": round(run["seconds"], 1), "req_per_s": round(a.n / run["seconds"], 1),
              "rss_before_calls_mb": round(before, 1), "peak_rss_mb": round(peak, 1),
              "max_asyncio_tasks": run["max_asyncio_tasks"], "requests_sent": sent,
              "cache_rows": rows, "answers_ok": run["answers_ok"], "loadavg_end": os.getloadavg()}
    ok = peak < LIMIT_MB and rows == a.n and run["answers_ok"] == a.n and sent == a.n
    report["acceptance_met"] = ok
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{a.n} calls ({a.models} client(s), concurrency {a.concurrency}, stub {a.latency * 1000:.0f} ms): "
          f"{report['seconds']} s ({report['req_per_s']} req/s; ideal {report['ideal_seconds']} s), "
          f"peak RSS {report['peak_rss_mb']} MB (before the calls {report['rss_before_calls_mb']} MB), "
          f"at most {report['max_asyncio_tasks']} asyncio tasks, {rows} cache rows, "
          f"{run['answers_ok']} correct answers")
    print(f"acceptance (peak RSS < {LIMIT_MB:.0f} MB, every answer cached and right): "
          f"{'met' if ok else 'NOT met'}; wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
