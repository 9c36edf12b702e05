"""The cached re-run of the whole demo: every notebook of params/demo/ with every call in the cache.

Issue 16's goal: under 30 s on two cores, excluding the server start (issue 30: 15 s). The cache
starts as the committed recording (imported into a fresh cache). The recording holds the calls of
the notebooks' defaults, not all of the demo's (the demo's own variants: robust, repeats, spans; and
calls whose requests changed since it was made, such as judge reminders), so an untimed fill run
first sends what is missing to a stub server behaving like llama.cpp's (`tests/stub_server.py`:
json_schema refused, judge verdicts from a hash); its count is printed. The timed rounds then point
at a port nothing listens on, so a call that is not cached fails loudly instead of reaching a
server. Nothing else differs from `make demo` run a second time (outputs of the fill run in place).

    python benchmarks/bench_demo_rerun.py                 # --jobs 2, warm kernels, 3 rounds
    python benchmarks/bench_demo_rerun.py --jobs 1 --fresh-kernels   # the way it ran before
    python benchmarks/bench_demo_rerun.py --setup-only DIR           # prepare DIR, print the command
    python benchmarks/bench_demo_rerun.py --dir DIR --rounds 1       # prepare DIR once, reuse it after

Each round prints the wall time, the CPU time of the batch and its kernels, and each notebook's
"ok in" time; the JSON goes to benchmarks/results/demo_rerun.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

from demo_params import write_demo_params  # noqa: E402
from evekit.cache import import_cache  # noqa: E402
from stub_server import StubServer  # noqa: E402

RECORDING = ROOT / "tests" / "fixtures" / "recorded_cache" / "recorded.jsonl"
NOWHERE = "http://127.0.0.1:9/v1"  # the discard port: nothing answers, an uncached call fails


def write_params(dest: Path, url: str, folder: str) -> list[Path]:
    """The demo's parameter files under dest/folder, calling `url`, with their cache in dest/cache
    and outputs in dest/outputs."""
    files = write_demo_params(url, dest / folder)
    for f in files:
        text = f.read_text().replace("cache_dir: outputs/cache", f"cache_dir: {dest / 'cache'}")
        text = re.sub(r"(?m)^output_dir: outputs$", f"output_dir: {dest / 'outputs'}", text)
        f.write_text(text.replace(" outputs/", f" {dest / 'outputs'}/"))
    return files


def prepare(dest: Path, reuse: bool = False) -> list[Path]:
    """The timed parameter files (dest/params, calling nowhere) over a cache holding every call:
    the recording, then what the fill run sent to the stub. With `reuse`, a folder prepared before
    is taken as it is."""
    if reuse and (dest / "filled").exists():
        return sorted((dest / "params").glob("*.yaml"))
    if dest.exists():
        shutil.rmtree(dest)
    files = write_params(dest, NOWHERE, "params")
    import_cache(dest / "cache", RECORDING)
    # Like llama.cpp's server: json_schema refused (HTTP 500), judge verdicts for the other formats.
    with StubServer(reject_json_schema=True, verdicts=True) as stub:
        fill = write_params(dest, stub.base_url, "fill-params")
        done = subprocess.run(command(fill, 2, False), cwd=ROOT, capture_output=True, text=True)
        sent = stub.stats()["total"]
    print(f"fill run: exit {done.returncode}, {sent} calls not in the recording answered by the stub", flush=True)
    if done.returncode != 0:
        print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
        raise SystemExit("the fill run failed: the timed rounds would measure failures")
    (dest / "filled").write_text(f"{sent}\n")
    return files


def command(files: list[Path], jobs: int, fresh: bool) -> list[str]:
    return [sys.executable, "-m", "evekit.cli", "run", "--jobs", str(jobs), *(["--fresh-kernels"] if fresh else []),
            "--progress-every", "0", *map(str, files)]


def one_round(cmd: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stems = re.findall(r"(?m)^\[(\S+)\]\s+ok in ([\d.]+) s", done.stdout) or \
        list(zip(re.findall(r"(?m)^running \S+ with \S+/(\S+)\.yaml", done.stdout),
                 re.findall(r"(?m)^\s+ok in ([\d.]+) s", done.stdout)))
    per = {stem: float(s) for stem, s in stems}
    failed = re.findall(r"FAILED[^\n]*", done.stdout + done.stderr)
    return {"wall_s": round(wall, 2), "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "exit": done.returncode, "notebooks": per, "failed": failed,
            "load_average": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fresh-kernels", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--setup-only", metavar="DIR", default=None)
    ap.add_argument("--dir", metavar="DIR", default=None,
                    help="prepare DIR (or reuse it when it was prepared before) instead of a temporary folder")
    args = ap.parse_args()
    if args.setup_only:
        files = prepare(Path(args.setup_only).resolve())
        print(" ".join(command(files, args.jobs, args.fresh_kernels)))
        return 0
    with tempfile.TemporaryDirectory(prefix="evekit-rerun-") as tmp:
        files = prepare(Path(args.dir).resolve() if args.dir else Path(tmp), reuse=bool(args.dir))
        cmd = command(files, args.jobs, args.fresh_kernels)
        rounds = []
        for i in range(args.rounds):
            r = one_round(cmd)
            rounds.append(r)
            print(f"round {i + 1}: wall {r['wall_s']} s, cpu {r['cpu_s']} s, exit {r['exit']}, load {r['load_average']:.1f}"
                  + (f", FAILED: {r['failed']}" if r["failed"] else ""), flush=True)
            print("  " + ", ".join(f"{k} {v}" for k, v in r["notebooks"].items()), flush=True)
    walls = sorted(r["wall_s"] for r in rounds)
    out = {"jobs": args.jobs, "fresh_kernels": args.fresh_kernels, "rounds": rounds,
           "median_wall_s": walls[len(walls) // 2], "notebooks": len(files)}
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    name = f"demo_rerun_j{args.jobs}{'_fresh' if args.fresh_kernels else ''}.json"
    (results / name).write_text(json.dumps(out, indent=2))
    print(f"median wall {out['median_wall_s']} s over {len(rounds)} rounds ({len(files)} notebooks); "
          f"{results / name}")
    return 0 if all(r["exit"] == 0 for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
