"""Throughput of evekit's ModelClient against a stub OpenAI-compatible server.

The stub (tests/stub_server.py) runs in its own process and answers every request after a
fixed latency, so the ideal rate is concurrency / latency (32 / 0.2 s = 160 req/s). In the same
run we measure, against the same stub and with the same requests:

  bare aiohttp   a semaphore + POST loop, nothing else: what this machine can do
  openai         the plain `openai.AsyncOpenAI` client (chat.completions.create, defaults)
  evekit         ModelClient (fresh cache, progress bar off), then again with the bar on
  evekit cached  a new ModelClient replaying the same requests from the cache (no network)

Acceptance: at 200 ms evekit >= 90% of bare aiohttp's req/s; the cached replay < 2 s.
Each method runs `--rounds` times and the best round counts (others share these CPUs).

    python benchmarks/bench_client.py                 # 2,000 requests, latencies 0.2 and 0.05
    python benchmarks/bench_client.py --n 300         # quick try
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from stub_server import StubServer  # noqa: E402

from evekit.client import ModelClient  # noqa: E402
from evekit.types import GenerationRequest  # noqa: E402

MODEL = "stub-model"


def make_requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=({"role": "system", "content": "You are an EO expert."},
                                        {"role": "user", "content": f"Question {i}: what does SAR measure?"}),
                              max_tokens=16)
            for i in range(n)]


def body(r: GenerationRequest) -> dict:
    return {"model": MODEL, "messages": list(r.messages), "max_tokens": r.max_tokens,
            "temperature": r.temperature}


async def bare_aiohttp(base_url: str, reqs: list[GenerationRequest], concurrency: int) -> float:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    url = base_url + "/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def one(r: GenerationRequest) -> dict:
            async with sem:
                async with s.post(url, json=body(r)) as resp:
                    return await resp.json()

        t = time.perf_counter()
        out = await asyncio.gather(*(one(r) for r in reqs))
        elapsed = time.perf_counter() - t
    assert len(out) == len(reqs) and all(o["choices"] for o in out)
    return elapsed


async def plain_openai(base_url: str, reqs: list[GenerationRequest], concurrency: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY")
    sem = asyncio.Semaphore(concurrency)

    async def one(r: GenerationRequest):
        async with sem:
            return await client.chat.completions.create(**body(r))

    t = time.perf_counter()
    out = await asyncio.gather(*(one(r) for r in reqs))
    elapsed = time.perf_counter() - t
    await client.close()
    assert all(o.choices[0].message.content for o in out)
    return elapsed


def evekit_run(base_url: str, reqs: list[GenerationRequest], concurrency: int, cache_dir: str,
               progress: bool = False) -> tuple[float, ModelClient]:
    t = time.perf_counter()
    client = ModelClient(MODEL, base_url, concurrency=concurrency, cache_dir=cache_dir, progress=progress)
    results = client.generate(reqs, desc="evekit")
    elapsed = time.perf_counter() - t
    assert not any(r.failed for r in results), [r.error for r in results if r.failed][:3]
    client.close()
    return elapsed, client


def bench_latency(latency: float, n: int, concurrency: int, rounds: int) -> dict:
    reqs = make_requests(n)
    ideal = concurrency / latency
    best: dict[str, float] = {}
    with StubServer(latency=latency) as stub, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bare_aiohttp(stub.base_url, reqs[: 2 * concurrency], concurrency))  # warm-up
        cached_s = None
        for rnd in range(rounds):
            runs = {
                "bare aiohttp": lambda: asyncio.run(bare_aiohttp(stub.base_url, reqs, concurrency)),
                "openai": lambda: asyncio.run(plain_openai(stub.base_url, reqs, concurrency)),
                "evekit": lambda: evekit_run(stub.base_url, reqs, concurrency, f"{tmp}/c{rnd}")[0],
                "evekit + progress bar": lambda: evekit_run(stub.base_url, reqs, concurrency,
                                                            f"{tmp}/p{rnd}", progress=True)[0],
            }
            for name, fn in runs.items():
                elapsed = fn()
                best[name] = min(best.get(name, float("inf")), elapsed)
                print(f"  {latency * 1000:.0f} ms round {rnd + 1}: {name:22s} {n / elapsed:7.1f} req/s",
                      file=sys.stderr, flush=True)
        stats_before = stub.stats()["total"]
        cached_s, client = evekit_run(stub.base_url, reqs, concurrency, f"{tmp}/c0")
        assert stub.stats()["total"] == stats_before, "the cached replay touched the network"
        assert client.usage.cache_hits == n and client.usage.requests == 0
    rows = {name: {"seconds": round(s, 3), "req_per_s": round(n / s, 1),
                   "pct_of_ideal": round(100 * n / s / ideal, 1),
                   "pct_of_bare": round(100 * best["bare aiohttp"] / s, 1)} for name, s in best.items()}
    return {"latency_s": latency, "n": n, "concurrency": concurrency, "ideal_req_per_s": ideal,
            "rounds": rounds, "methods": rows, "cached_replay_seconds": round(cached_s, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2000, help="requests per method (default 2000)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--latencies", type=float, nargs="+", default=[0.2, 0.05], help="seconds")
    p.add_argument("--rounds", type=int, default=2, help="repeat each method; the best round counts")
    p.add_argument("--out", default=str(HERE / "results" / "bench_client.json"))
    p.add_argument("--base-url", help="only time evekit (fresh cache, then cached replay) against this "
                                      "running server and print JSON (used by bench_lm_eval.py)")
    a = p.parse_args(argv)

    if a.base_url:
        reqs = make_requests(a.n)
        with tempfile.TemporaryDirectory() as tmp:
            first, _ = evekit_run(a.base_url, reqs, a.concurrency, tmp)
            replay, _ = evekit_run(a.base_url, reqs, a.concurrency, tmp)
        print(json.dumps({"seconds": first, "req_per_s": a.n / first, "cached_replay_seconds": replay}))
        return 0

    report = {"benchmark": "bench_client", "python": platform.python_version(),
              "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "runs": []}
    for latency in a.latencies:
        report["runs"].append(bench_latency(latency, a.n, a.concurrency, a.rounds))
    report["loadavg_end"] = os.getloadavg()

    ok = True
    print(f"\n{a.n} requests, concurrency {a.concurrency}, best of {a.rounds} round(s)")
    print(f"{'latency':>8} {'method':24} {'req/s':>8} {'% ideal':>8} {'% bare':>8}")
    for run in report["runs"]:
        for name, row in run["methods"].items():
            print(f"{run['latency_s'] * 1000:6.0f}ms {name:24} {row['req_per_s']:8.1f} "
                  f"{row['pct_of_ideal']:7.1f}% {row['pct_of_bare']:7.1f}%")
        print(f"{run['latency_s'] * 1000:6.0f}ms {'evekit cached replay':24} "
              f"{run['cached_replay_seconds']:7.2f}s")
        if abs(run["latency_s"] - 0.2) < 1e-9:
            ok &= run["methods"]["evekit"]["pct_of_bare"] >= 90.0
        ok &= run["cached_replay_seconds"] < 2.0
    report["acceptance_met"] = ok
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nacceptance (evekit >= 90% of bare at 200 ms, cached replay < 2 s): "
          f"{'met' if ok else 'NOT met'}; wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
