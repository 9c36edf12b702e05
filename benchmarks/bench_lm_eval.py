"""Compare evekit's client with lm-evaluation-harness's `local-chat-completions` model.

Same stub server (tests/stub_server.py, own process, fixed latency), same requests, same
concurrency. lm_eval pulls torch and transformers, so it lives in its own virtual environment,
never in evekit's:

    python -m venv /work/lm_eval_venv
    /work/lm_eval_venv/bin/pip install torch==2.13.0        # CPU build; install it first
    /work/lm_eval_venv/bin/pip install "lm_eval[api]"
    /work/lm_eval_venv/bin/python benchmarks/bench_lm_eval.py [--n 2000] [--latency 0.2]

bench_client.py runs this script with `--base-url` to put an lm_eval row next to bare aiohttp and
evekit at each latency (`--lm-eval-python /work/lm_eval_venv/bin/python`).

Rows: a bare aiohttp loop (the machine's limit, measured in this run), lm_eval without a
cache, lm_eval with its SQLite request cache (`CachingLM`) and that cache's replay, and evekit
(first run and cached replay), which runs in evekit's own interpreter (`--evekit-python`,
default: the repository's .venv) against the same stub.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

MODEL = "stub-model"


def messages(i: int) -> list[dict[str, str]]:  # the same requests as bench_client.make_requests
    return [{"role": "system", "content": "You are an EO expert."},
            {"role": "user", "content": f"Question {i}: what does SAR measure?"}]


async def bare_aiohttp(base_url: str, n: int, concurrency: int) -> float:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def one(i: int) -> dict:
            async with sem:
                async with s.post(base_url + "/chat/completions",
                                  json={"model": MODEL, "messages": messages(i), "max_tokens": 16,
                                        "temperature": 0.0}) as r:
                    return await r.json()

        t = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - t


def lm_eval_run(base_url: str, n: int, concurrency: int, cache_db: str | None) -> float:
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import CachingLM
    from lm_eval.models.api_models import JsonChatStr
    from lm_eval.models.openai_completions import LocalChatCompletion

    lm = LocalChatCompletion(model=MODEL, base_url=base_url + "/chat/completions",
                             num_concurrent=concurrency, tokenizer_backend=None,
                             tokenized_requests=False, max_gen_toks=16, max_retries=3)
    if cache_db:
        lm = CachingLM(lm, cache_db)
    instances = [Instance(request_type="generate_until", doc={}, idx=0,
                          arguments=(JsonChatStr(json.dumps(messages(i))),
                                     {"until": [], "max_gen_toks": 16, "temperature": 0.0}))
                 for i in range(n)]
    t = time.perf_counter()
    out = lm.generate_until(instances)
    elapsed = time.perf_counter() - t
    assert len(out) == n and all(isinstance(o, str) and o.startswith("echo:") for o in out), out[:3]
    return elapsed


def evekit_run(python: str, base_url: str, n: int, concurrency: int) -> dict | None:
    proc = subprocess.run([python, str(HERE / "bench_client.py"), "--base-url", base_url,
                           "--n", str(n), "--concurrency", str(concurrency)],
                          capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        print(f"evekit run failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--evekit-python", default=str(ROOT / ".venv" / "bin" / "python"))
    p.add_argument("--out", default=None, help="default: results/bench_lm_eval-<latency ms>.json")
    p.add_argument("--base-url", help="only time lm_eval (no request cache) against this running server "
                                      "and print JSON (used by bench_client.py)")
    a = p.parse_args(argv)
    try:
        from importlib.metadata import version

        from lm_eval.models.openai_completions import LocalChatCompletion  # noqa: F401
        lm_eval_version = version("lm_eval")
    except ImportError as e:
        print(f"lm_eval is not importable with {sys.executable} ({e}).\n"
              "It needs torch and transformers, so it is kept out of evekit's environment. To run "
              "this comparison:\n" + __doc__.split("\n\n")[2], file=sys.stderr if a.base_url else sys.stdout)
        return 1 if a.base_url else 0

    import logging
    logging.getLogger("lm-eval").setLevel(logging.ERROR)
    if a.base_url:
        lm_eval_run(a.base_url, 2 * a.concurrency, a.concurrency, None)  # warm-up: imports, connections
        cpu = time.process_time()
        seconds = lm_eval_run(a.base_url, a.n, a.concurrency, None)
        print(json.dumps({"seconds": seconds, "req_per_s": a.n / seconds, "lm_eval": lm_eval_version,
                          "cpu_seconds": time.process_time() - cpu}))
        return 0
    from stub_server import StubServer

    n, c = a.n, a.concurrency
    rows: dict[str, dict] = {}
    with StubServer(latency=a.latency) as stub, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bare_aiohttp(stub.base_url, 2 * c, c))  # warm-up
        rows["bare aiohttp"] = {"seconds": asyncio.run(bare_aiohttp(stub.base_url, n, c))}
        rows["lm_eval local-chat-completions"] = {"seconds": lm_eval_run(stub.base_url, n, c, None)}
        db = os.path.join(tmp, "lm_eval_cache.db")
        rows["lm_eval + CachingLM"] = {"seconds": lm_eval_run(stub.base_url, n, c, db)}
        before = stub.stats()["total"]
        rows["lm_eval CachingLM replay"] = {"seconds": lm_eval_run(stub.base_url, n, c, db),
                                            "requests_sent": stub.stats()["total"] - before}
        if Path(a.evekit_python).exists():
            ev = evekit_run(a.evekit_python, stub.base_url, n, c)
            if ev:
                rows["evekit"] = {"seconds": ev["seconds"]}
                rows["evekit cached replay"] = {"seconds": ev["cached_replay_seconds"]}
        else:
            print(f"evekit row skipped: {a.evekit_python} not found (--evekit-python)", file=sys.stderr)
    bare = rows["bare aiohttp"]["seconds"]
    for name, row in rows.items():
        row["req_per_s"] = round(n / row["seconds"], 1)
        # a replay sends nothing, so a share of the network loop's rate means nothing there
        row["pct_of_bare"] = None if "replay" in name else round(100 * bare / row["seconds"], 1)
        row["seconds"] = round(row["seconds"], 3)
    report = {"benchmark": "bench_lm_eval", "lm_eval": lm_eval_version, "n": n, "concurrency": c,
              "latency_s": a.latency, "ideal_req_per_s": c / a.latency, "rows": rows,
              "loadavg_end": os.getloadavg()}
    print(f"\n{n} requests, concurrency {c}, latency {a.latency * 1000:.0f} ms, lm_eval {lm_eval_version}")
    print(f"{'method':32} {'seconds':>8} {'req/s':>8} {'% bare':>8}")
    for name, row in rows.items():
        pct = "" if row["pct_of_bare"] is None else f"{row['pct_of_bare']:7.1f}%"
        print(f"{name:32} {row['seconds']:8.2f} {row['req_per_s']:8.1f} {pct:>8}")
    out = Path(a.out or HERE / "results" / f"bench_lm_eval-{a.latency * 1000:.0f}ms.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
