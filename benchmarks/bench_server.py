"""Embedded server: start-up time, tokens per second and peak memory (RSS) under a small load.

    .venv/bin/python benchmarks/bench_server.py [--requests 20] [--n-ctx 8192]

Memory is read from /proc/<pid>/status (VmHWM: the peak resident set of the server process).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from openai import OpenAI

from evekit.server import EmbeddedServer


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--n-ctx", type=int, default=8192)
    args = parser.parse_args()

    t0 = time.monotonic()
    with EmbeddedServer(n_ctx=args.n_ctx) as server:
        ready = time.monotonic() - t0
        pid = server.process.pid
        idle_mb = vm_hwm_mb(pid)
        client = OpenAI(base_url=server.base_url, api_key="EMPTY", timeout=300)
        tokens = 0
        t1 = time.monotonic()
        for i in range(args.requests):
            r = client.chat.completions.create(
                model=server.model, max_tokens=args.max_tokens, temperature=0,
                messages=[{"role": "user", "content": f"Explain in two sentences what Sentinel-{1 + i % 6} observes."}])
            tokens += r.usage.completion_tokens
        elapsed = time.monotonic() - t1
        figures = {
            "ready_seconds": round(ready, 2),
            "requests": args.requests,
            "completion_tokens": tokens,
            "seconds": round(elapsed, 2),
            "completion_tokens_per_second": round(tokens / elapsed, 1),
            "peak_rss_mb_idle": round(idle_mb, 1),
            "peak_rss_mb": round(vm_hwm_mb(pid), 1),
            "n_ctx": args.n_ctx,
        }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
