"""`evekit run --jobs N` on a grid, and pipelined judging, against 200 ms stub endpoints.

Two measurements (stub servers from tests/stub_server.py, each in its own process):

  grid    six task notebooks (mcqa_single_answer, mcqa_multiple_answer, hallucination_detection,
          two variants each, 45 items, concurrency 2) on three endpoints, two notebooks per
          endpoint, run by `evekit run --jobs J` with a fresh cache. Goal: --jobs 3 takes at most
          0.5 x the time of --jobs 1.
  judged  one open_ended run of 160 items (concurrency 8) with its model and its judge on two
          endpoints: generation alone, then judging alone (judge() after generate(), as before
          pipelining), against the pipelined run (the judge starts on each answer as it arrives).
          Goal: pipelined span <= 0.6 x (generation alone + judging alone).

    python benchmarks/bench_grid.py grid --jobs 1        # one grid run; prints its wall time
    python benchmarks/bench_grid.py grid --jobs 3 --urls URL1,URL2,URL3   # on running stubs
    python benchmarks/bench_grid.py stubs                # start three stubs, print their URLs, wait
    python benchmarks/bench_grid.py judged [--items 160] # the judged-task comparison

For whole-command figures time the grid command with /usr/bin/time or any process timer;
`--urls` keeps the stubs' start out of it.
"""
from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT))

from stub_server import StubServer  # noqa: E402

LATENCY = 0.2
GRID = [("mcqa_single_answer", "a"), ("mcqa_multiple_answer", "a"), ("hallucination_detection", "a"),
        ("mcqa_single_answer", "b"), ("mcqa_multiple_answer", "b"), ("hallucination_detection", "b")]


def grid_params(urls: list[str], dest: Path, items: int = 45, concurrency: int = 2) -> list[Path]:
    """Six parameter files, notebook k on endpoint k % 3, one fresh cache under `dest`."""
    files = []
    for k, (notebook, variant) in enumerate(GRID):
        f = dest / f"{notebook}.{variant}.yaml"
        f.write_text(json.dumps({  # JSON is YAML
            "model_name": f"stub-{variant}", "base_url": urls[k % len(urls)], "api_key_env": None,
            "dataset": str(ROOT / "data" / f"{notebook}.jsonl"), "limit": items, "num_fewshot": 0,
            "max_tokens": 32, "concurrency": concurrency, "cache_dir": str(dest / "cache"),
            "output_dir": str(dest / "outputs"), "run_name": "grid", "offline": False}))
        files.append(f)
    return files


def run_grid(urls: list[str], jobs: int) -> float:
    with tempfile.TemporaryDirectory(prefix="evekit-grid-") as tmp:
        files = grid_params(urls, Path(tmp))
        t0 = time.monotonic()
        code = subprocess.call([sys.executable, "-m", "evekit.cli", "run", "--jobs", str(jobs),
                                "--progress-every", "0", *map(str, files)], cwd=ROOT,
                               stdout=subprocess.DEVNULL)
        seconds = time.monotonic() - t0
    if code != 0:
        raise SystemExit(f"evekit run exited with {code}")
    return seconds


def judged(items: int, concurrency: int) -> dict[str, float]:
    import numpy as np
    import pandas as pd

    from evekit import metrics
    from evekit.runs.task.run import TaskRun

    # The cosine metric embeds every answer on the CPU (seconds for 160 items on these cores), the
    # same work in both modes and no call: a constant stands in, so the figures are about the calls.
    metrics.cosine_similarities = lambda answers, refs: np.zeros(len(answers))

    out: dict[str, float] = {}
    with StubServer(latency=LATENCY) as model, StubServer(latency=LATENCY, verdicts=True) as judge, \
            tempfile.TemporaryDirectory(prefix="evekit-judged-") as tmp:
        data = Path(tmp) / "questions.jsonl"
        with open(data, "w") as f:
            for i in range(items):
                f.write(json.dumps({"Question": f"What does Earth-observation question {i} ask?",
                                    "Answer": f"Reference answer {i}."}) + "\n")

        def new_run(name: str) -> TaskRun:
            run = TaskRun.from_notebook({
                "task": "open_ended", "model_name": "stub", "base_url": model.base_url, "api_key_env": None,
                "dataset": str(data), "num_fewshot": 0, "max_tokens": 64, "concurrency": concurrency,
                "judges": [{"name": "j", "model": "stub", "base_url": judge.base_url, "api_key_env": None}],
                "cache_dir": str(Path(tmp) / name), "output_dir": str(Path(tmp) / "out"), "run_name": name})
            run.load()
            return run

        # Warm-up: the first scoring loads what the metrics need (embeddings, tokenizers); the
        # figures are about the calls, so that one-time cost is left out of all three.
        warm = new_run("warm")
        warm._judge_stream = lambda client: None
        warm.items, warm.requests = warm.items[:2], warm.requests[:2]
        warm.generate()
        warm.judge()

        serial = new_run("serial")
        serial._judge_stream = lambda client: None  # as before: judge() waits for the last answer
        t0 = time.monotonic()
        serial.generate()
        t1 = time.monotonic()
        serial.judge()
        t2 = time.monotonic()
        out["generation_alone_s"], out["judging_alone_s"] = t1 - t0, t2 - t1

        piped = new_run("piped")
        t0 = time.monotonic()
        piped.generate()
        piped.judge()
        out["pipelined_span_s"] = time.monotonic() - t0
        pd.testing.assert_frame_equal(piped.samples, serial.samples)  # the same samples
    out["ratio"] = out["pipelined_span_s"] / (out["generation_alone_s"] + out["judging_alone_s"])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    g = sub.add_parser("grid")
    g.add_argument("--jobs", type=int, default=1)
    g.add_argument("--urls", default=None, help="three comma-separated base URLs of running stubs")
    sub.add_parser("stubs")
    j = sub.add_parser("judged")
    j.add_argument("--items", type=int, default=160)
    j.add_argument("--concurrency", type=int, default=8)
    a = p.parse_args()
    if a.what == "stubs":
        import signal

        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))  # kill stops them too
        stubs = [StubServer(latency=LATENCY).start() for _ in range(3)]
        print(",".join(s.base_url for s in stubs), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            for s in stubs:
                s.stop()
        return 0
    if a.what == "grid":
        if a.urls:
            seconds = run_grid(a.urls.split(","), a.jobs)
        else:
            stubs = [StubServer(latency=LATENCY).start() for _ in range(3)]
            try:
                seconds = run_grid([s.base_url for s in stubs], a.jobs)
            finally:
                for s in stubs:
                    s.stop()
        print(json.dumps({"jobs": a.jobs, "seconds": round(seconds, 2), "load": os.getloadavg()[0]}))
        return 0
    result = judged(a.items, a.concurrency)
    print(json.dumps({k: round(v, 3) for k, v in result.items()} | {"items": a.items, "load": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
