"""Time to a ready kernel: forked from the warm kernel server vs started fresh (evekit.batch.kernels).

Each round starts one kernel each way with the kernel managers `evekit run` uses, alternating, and
times (a) `start_kernel` until the kernel answers `kernel_info` and (b) that plus the imports a
notebook's first cell does (evekit's runner: pandas, scipy, matplotlib, seaborn, openai...). The
server is given time to finish its imports first (its CPU time stops growing), as it has by the
second notebook of a batch.

    python benchmarks/bench_kernel_start.py            # 7 rounds
    python benchmarks/bench_kernel_start.py --rounds 3

Prints the medians and the load; the JSON goes to benchmarks/results/kernel_start.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evekit.batch.kernels import KernelServer, kernel_manager_class, warm_kernels_unavailable  # noqa: E402

FIRST_CELL = "import evekit.run, evekit.plots, pandas, scipy.stats, matplotlib.pyplot, seaborn, openai"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(pid: int, quiet: float = 1.5, timeout: float = 180.0) -> float:
    """Seconds until the process `pid` has used no CPU for `quiet` seconds."""
    t0 = time.monotonic()
    last = _cpu_seconds(pid)
    since = time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(0.25)
        now = _cpu_seconds(pid)
        if now > last + 0.01:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return time.monotonic() - t0


async def one_kernel(server: KernelServer | None) -> tuple[float, float]:
    """(seconds to a ready kernel, seconds to a ready kernel that has run FIRST_CELL)."""
    fd, stderr = tempfile.mkstemp(suffix=".stderr")
    os.close(fd)
    km = kernel_manager_class(stderr, {}, server)(kernel_name="python3")
    t0 = time.monotonic()
    await km.start_kernel(cwd=str(ROOT))
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        ready = time.monotonic() - t0
        reply = await kc.execute_interactive(FIRST_CELL, timeout=120, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        imported = time.monotonic() - t0
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        os.unlink(stderr)
    return ready, imported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    reason = warm_kernels_unavailable()
    if reason:
        sys.exit(f"bench_kernel_start: {reason}")
    results: dict[str, list[tuple[float, float]]] = {"forked": [], "fresh": []}
    loads = [os.getloadavg()[0]]
    with KernelServer() as server:
        print(f"kernel server idle after {wait_until_idle(server.process.pid):.1f} s", flush=True)
        for i in range(args.rounds):
            for kind in (("forked", "fresh") if i % 2 == 0 else ("fresh", "forked")):
                results[kind].append(asyncio.run(one_kernel(server if kind == "forked" else None)))
            loads.append(os.getloadavg()[0])
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f} s / {v[-1][1]:.2f} s"
                                                 for k, v in results.items()), flush=True)
    summary = {k: {"ready_s": statistics.median(r for r, _ in v), "with_first_cell_s": statistics.median(c for _, c in v),
                   "rounds": v} for k, v in results.items()}
    summary["load_1min"] = {"min": min(loads), "median": statistics.median(loads), "max": max(loads)}
    for k in ("forked", "fresh"):
        print(f"{k}: median {summary[k]['ready_s']:.2f} s to a ready kernel, "
              f"{summary[k]['with_first_cell_s']:.2f} s with the first cell's imports")
    print(f"load (1 min) {summary['load_1min']}")
    out = ROOT / "benchmarks" / "results" / "kernel_start.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
