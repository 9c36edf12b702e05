"""Embedded server: start-up time, requests/s and completion tokens/s by concurrency, peak memory.

    .venv/bin/python benchmarks/bench_server.py [--concurrency 1 4 8] [--max-tokens 64]
    .venv/bin/python benchmarks/bench_server.py --engine llama-cpp-python   # the server evekit used before
    .venv/bin/python benchmarks/bench_server.py --weights packaged         # the Q4_1 file, not its BF16 rewrite
    .venv/bin/python benchmarks/bench_server.py --long-prompts             # ~500 prompt tokens per request
    .venv/bin/python benchmarks/bench_server.py --background-load 1 --threads 1 --poll 0  # under contention

Each concurrency level sends the same 24 short EO questions (temperature 0, `--max-tokens`) from a
thread pool of that size, after one warm-up request. `llama-server` is evekit's EmbeddedServer
(`--parallel` slots, continuous batching); `llama-cpp-python` is llama-cpp-python's own server
(`python -m llama_cpp.server`, which needs that package installed) for the before/after figures.
`--weights packaged` serves the Q4_1 GGUF as installed instead of its BF16 rewrite
(`evekit.server.served_model_path`). `--long-prompts` puts the other questions, twice, before each
question (each prompt starts differently, so no cached prefix helps): the prompt-bound case of the
multiple-choice notebooks, where the weights' format matters most.
Memory is read from /proc/<pid>/status (VmHWM: the peak resident set of the server process).
The load average is printed too: on a shared machine, compare runs made under similar load.
`--background-load N` starts N busy-loop processes for the run (a core each, as a browser or a
build beside the demo would take), so a contention figure can be reproduced; with neither
`--threads` nor `--poll` the server uses evekit's own rule (`evekit.server.thread_plan`), measured
while the busy loops already run.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from openai import OpenAI

from evekit.server import EmbeddedServer, default_model_path, served_model_path

QUESTIONS = [
    "What does Sentinel-1 measure?",
    "What is the spatial resolution of Sentinel-2's visible bands?",
    "Name one use of synthetic aperture radar.",
    "What is NDVI?",
    "Which orbit do most Earth-observation satellites use?",
    "What does a thermal infrared sensor detect?",
    "What is the revisit time of a satellite?",
    "Why does radar see through clouds?",
    "What is a digital elevation model?",
    "What does Sentinel-5P monitor?",
    "What is hyperspectral imaging?",
    "What is the purpose of atmospheric correction?",
    "What does LiDAR measure?",
    "What is sea surface temperature used for?",
    "What is interferometric SAR used for?",
    "What is a sun-synchronous orbit?",
    "What does the Copernicus programme provide?",
    "What is land cover classification?",
    "How is soil moisture observed from space?",
    "What is the difference between active and passive sensors?",
    "What does Sentinel-3 observe over the ocean?",
    "What is a multispectral band?",
    "Why are clouds a problem for optical imagery?",
    "What is change detection in remote sensing?",
]


class LlamaCppPythonServer(EmbeddedServer):
    """llama-cpp-python's server (one request at a time), as evekit ran it before llama-server."""

    def command(self, model_path: Path, port: int) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", self.model,
                "--host", self.host, "--port", str(port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.thread_plan().threads)]

    def _wait_ready(self) -> None:  # it has no /health: ready once /v1/models names the model
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited early; log: {self.log_file}")
            try:
                return self._check_model(f"http://{self.host}:{self.port}/v1/models")
            except Exception:
                time.sleep(0.5)
        raise RuntimeError(f"llama_cpp.server not ready in {self.ready_timeout} s; log: {self.log_file}")


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def prompts(long: bool, level: int) -> list[str]:
    """The questions; long: each after all the others, twice. Each level's prompts start with its
    own number, so no level reads prompts a level before it left in the server's prompt cache."""
    if not long:
        return [f"({level}) {q}" for q in QUESTIONS]
    return [f"({level}) " + " ".join((QUESTIONS[i + 1:] + QUESTIONS[:i]) * 2) + "\n\nAnswer this one: " + q
            for i, q in enumerate(QUESTIONS)]


def run_level(client: OpenAI, model: str, concurrency: int, max_tokens: int, long: bool) -> dict:
    def ask(question: str) -> tuple[int, int]:
        r = client.chat.completions.create(model=model, max_tokens=max_tokens, temperature=0,
                                           messages=[{"role": "user", "content": question}])
        return r.usage.prompt_tokens, r.usage.completion_tokens

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        counts = list(pool.map(ask, prompts(long, concurrency)))
    seconds = time.monotonic() - started
    prompt_tokens, tokens = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return {"concurrency": concurrency, "requests": len(counts), "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens, "seconds": round(seconds, 2),
            "requests_per_second": round(len(counts) / seconds, 2),
            "completion_tokens_per_second": round(tokens / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=["llama-server", "llama-cpp-python"], default="llama-server")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--n-ctx", type=int, default=8192, help="context of one request")
    parser.add_argument("--parallel", type=int, default=4, help="llama-server slots")
    parser.add_argument("--threads", type=int, default=None, help="server threads (default: evekit's rule)")
    parser.add_argument("--poll", type=int, default=None, help="llama.cpp's --poll 0-100 (default: evekit's rule)")
    parser.add_argument("--background-load", type=int, default=0, metavar="N",
                        help="busy-loop processes beside the server for the run")
    parser.add_argument("--weights", choices=["served", "packaged"], default="served",
                        help="served: what EmbeddedServer loads (the BF16 rewrite); packaged: the Q4_1 file")
    parser.add_argument("--long-prompts", action="store_true", help="~500 prompt tokens per request")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="appended to llama-server's command line (repeat: --server-arg=--prio --server-arg=2)")
    args = parser.parse_args()

    cls = LlamaCppPythonServer if args.engine == "llama-cpp-python" else EmbeddedServer
    if args.server_arg:
        if cls is not EmbeddedServer:
            parser.error("--server-arg is for llama-server")
        cls = _with_server_args(args.server_arg)
    busy = [start_foreign_busy_loop() for _ in range(args.background_load)]
    try:
        figures = measure(cls, args)
    finally:
        for pid in busy:
            os.kill(pid, signal.SIGKILL)
    print(json.dumps(figures, indent=2))


def start_foreign_busy_loop() -> int:
    """A busy-loop process that is not this process's descendant (a go-between starts it in its
    own session and exits): `evekit.server.busy_cores` leaves out the processes one started, so a
    child's loop would be invisible to the rule, unlike a user's other work. Returns its pid."""
    # The loop also ends once this process is gone (checked every few million turns), so a
    # benchmark killed by a timeout leaves no loop behind.
    loop = ("import os\n"
            f"owner, n = '/proc/{os.getpid()}', 0\n"
            "while n != 5_000_000 or os.path.exists(owner):\n"
            "    n = 0 if n == 5_000_000 else n + 1\n")
    go_between = ("import subprocess, sys\n"
                  f"loop = subprocess.Popen([sys.executable, '-c', {loop!r}], start_new_session=True,\n"
                  "                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                  "print(loop.pid)")
    done = subprocess.run([sys.executable, "-c", go_between], capture_output=True, text=True, check=True)
    return int(done.stdout)


def _with_server_args(extra: list[str]) -> type[EmbeddedServer]:
    """EmbeddedServer with llama.cpp options it does not set itself (`--prio`, `--cpu-strict`, ...)
    after its own; llama.cpp takes the last value of an option given twice."""

    class WithServerArgs(EmbeddedServer):
        def command(self, model_path: Path, port: int) -> list[str]:
            return [*super().command(model_path, port), *extra]

    return WithServerArgs


def measure(cls: type[EmbeddedServer], args: argparse.Namespace) -> dict:
    if args.background_load:
        time.sleep(1.0)  # the busy loops are running before the rule looks at the machine
    load_before = os.getloadavg()
    t0 = time.monotonic()
    model_path = served_model_path() if args.weights == "served" else default_model_path()
    with cls(model_path, n_ctx=args.n_ctx, n_parallel=args.parallel, n_threads=args.threads,
             poll=args.poll, ready_timeout=300) as server:
        ready = time.monotonic() - t0
        pid = server.process.pid
        idle_mb = vm_hwm_mb(pid)
        client = OpenAI(base_url=server.base_url, api_key="EMPTY", timeout=600, max_retries=0)
        client.chat.completions.create(model=server.model, max_tokens=8, temperature=0,
                                       messages=[{"role": "user", "content": "Hello"}])  # warm-up
        levels = [run_level(client, server.model, c, args.max_tokens, args.long_prompts) for c in args.concurrency]
        figures = {
            "engine": args.engine,
            "weights": model_path.name,
            "long_prompts": args.long_prompts,
            "parallel_slots": args.parallel if args.engine == "llama-server" else 1,
            "threads": server.n_threads,
            "poll": server.plan.poll if server.plan else None,
            "plan": server.plan.reason if server.plan else None,
            "background_load": args.background_load,
            "server_args": args.server_arg,
            "ready_seconds": round(ready, 2),
            "levels": levels,
            "peak_rss_mb_idle": round(idle_mb, 1),
            "peak_rss_mb": round(vm_hwm_mb(pid), 1),
            "n_ctx_per_request": args.n_ctx,
            "max_tokens": args.max_tokens,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
    return figures


if __name__ == "__main__":
    main()
