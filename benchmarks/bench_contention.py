"""The embedded server under CPU contention: requests/s at concurrency 4 for each thread/poll setting,
with 0, 1 or 2 busy-loop processes beside it, short and long prompts (the table behind
`evekit.server.thread_plan`'s rule; figures in benchmarks/README.md).

    .venv/bin/python benchmarks/bench_contention.py [--loads 0 1 2] [--timeout 180] [--max-tokens 32]

Each cell is one `benchmarks/bench_server.py --concurrency 4` process (its own server start, its own
busy loops); a cell that does not finish within `--timeout` seconds is reported as such (the
contended spin-wait case can take many minutes). The machine's own load average is printed beside
every cell: on a shared machine the "0 busy loops" column is not a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "before: 2 threads, --poll 50": ["--threads", "2", "--poll", "50"],
    "1 thread, --poll 50": ["--threads", "1", "--poll", "50"],
    "2 threads, --poll 0": ["--threads", "2", "--poll", "0"],
    "1 thread, --poll 0": ["--threads", "1", "--poll", "0"],
    "evekit's rule": [],
    # llama.cpp's other scheduling options, on the thread count that suffers (2 threads, --poll 50)
    "2 threads, --poll 50, --prio 2": ["--threads", "2", "--poll", "50", "--server-arg=--prio", "--server-arg=2"],
    "2 threads, --poll 50, --cpu-strict 1": ["--threads", "2", "--poll", "50", "--server-arg=--cpu-strict",
                                             "--server-arg=1"],
}


def cell(setting: list[str], load: int, long: bool, timeout: float, max_tokens: int) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_server.py"), "--concurrency", "4",
           "--max-tokens", str(max_tokens), "--background-load", str(load), *setting,
           *(["--long-prompts"] if long else [])]
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=True).stdout
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-f", "while True: pass"], check=False)  # the cell's busy loops
        return {"timed_out": True, "seconds": round(time.monotonic() - started, 1), "load": round(load_before, 2)}
    figures = json.loads(out[out.index("{"):])
    level = figures["levels"][0]
    return {"rps": level["requests_per_second"], "tps": level["completion_tokens_per_second"],
            "threads": figures["threads"], "poll": figures["poll"], "plan": figures["plan"],
            "load": round(load_before, 2), "seconds": level["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--prompts", nargs="+", default=["short", "long"], choices=["short", "long"])
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()}", flush=True)
    print("| prompts | setting | busy loops | requests/s | tokens/s | threads, poll chosen | machine load |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for prompts in args.prompts:
        for name in args.settings:
            for load in args.loads:
                r = cell(SETTINGS[name], load, prompts == "long", args.timeout, args.max_tokens)
                if r.get("timed_out"):
                    row = f"| {prompts} | {name} | {load} | not done in {r['seconds']:.0f} s | – | – | {r['load']} |"
                else:
                    row = (f"| {prompts} | {name} | {load} | {r['rps']} | {r['tps']} | {r['threads']}, "
                           f"{r['poll']} | {r['load']} |")
                print(row, flush=True)


if __name__ == "__main__":
    main()
