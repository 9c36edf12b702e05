"""Warm notebook kernels for `evekit run`: a kernel provisioner that forks kernels from a warm server.

A fresh IPython kernel spends about 1.5 s starting and 2.5 s importing pandas, scipy, matplotlib,
seaborn and statsmodels before the first cell of a notebook does any work; on a cached re-run of the demo
that is most of each notebook's time. `evekit run` therefore starts one *kernel server* per batch: a
child process that imports those third-party libraries and then evekit's notebook modules
(`PRELOAD`), one module at a time between requests, and forks one process per kernel (a kernel asked
for before the imports are done imports the rest itself, on the other core). evekit's modules read
no environment variable when imported (tests/test_kernels.py records every read), so the kernel's
own `EVEKIT_*` variables reach them as in a fresh kernel.
Each fork is a brand-new kernel (its own process, session and environment); only the import work is
shared, copy-on-write.

How it plugs in: jupyter_client's kernel-provisioner API. `WarmKernelProvisioner` (a
`LocalProvisioner`) is registered under the `jupyter_client.kernel_provisioners` entry point as
`evekit-warm-kernel` (pyproject.toml); the kernel managers of `evekit run` (`kernel_manager_class`)
read kernelspecs through a `KernelSpecManager` that names it in the spec's
`metadata.kernel_provisioner`, with the server's socket as its config. The provisioner asks the
server for a fork and falls back to the usual `Popen` start when the server cannot give one.

What stays as in a fresh kernel, and why it needs care:
- fork without exec is only safe in a single-threaded process: the server's environment keeps
  OpenBLAS (`OPENBLAS_NUM_THREADS=1`) and Arrow's jemalloc (no background thread) from starting
  threads at import, and the server refuses to fork while it has more than one thread
  (/proc/self/task). In the fork, threadpoolctl sets each BLAS library back to the thread count a
  fresh interpreter with the kernel's environment has (read once per batch from one).
- the server freezes what its imports made (`gc.freeze`, the collector's API for fork without exec)
  before it forks: a kernel's collections, and the full one at its exit, never touch (and so copy)
  those pages, and a kernel exits as fast as a fresh one.
- a library that decides at import time whether it runs in a kernel is not preloaded (`tqdm.auto`,
  and `datasets`, which imports it; the server refuses to fork once one is imported). Two that
  are preloaded get the kernel's decision through public means: pandas' `display.max_columns`
  is set to its documented default outside a terminal (20) before the kernel starts (so IPython
  startup files and notebooks still override it), and ipywidgets (imported by seaborn) registers
  its comm target through its IPython extension (`--IPKernelApp.extra_extensions=ipywidgets`).
- matplotlib reads `MPLBACKEND` when imported: the server sets the value ipykernel would set.
- the kernel's environment must be the server's (libraries read it at import): a kernel whose
  environment differs in anything but `EVEKIT_*`/`JPY_*` variables (read by evekit only when its
  functions run, never at import, and by the kernel itself) starts the usual way.
- each fork starts its own session (`setsid`, as jupyter_client's launcher does), gets the stdout
  and stderr the launcher would give it (sent over the socket), its environment and working folder;
  the server (which exits with the batch) is its `parent_handle`; random generators are reseeded
  from the OS. What cannot be redone: the fork shares the server's string-hash seed (a fresh kernel
  draws its own) and its process title (`ps`) is the server's command.
- tests/test_kernels.py runs a probe notebook both ways and compares every output.

Linux only (fork without exec of a process that has loaded these libraries is not safe on macOS,
and the thread check reads /proc). `EVEKIT_FRESH_KERNELS=1` (or `evekit run --fresh-kernels`) turns
it off. Elsewhere, or when the server cannot start, kernels start the usual way, with a note.
"""
from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

__all__ = ["KernelServer", "WarmKernelProvisioner", "ForkedKernelProcess", "PRELOAD", "THIRD_PARTY_PRELOAD",
           "EVEKIT_PRELOAD", "PROVISIONER_NAME",
           "kernel_manager_class", "start_kernel_server", "request_kernel", "warm_kernels_unavailable",
           "fresh_kernels_requested", "stop_kernels", "forward_kernel_stderr"]

PROVISIONER_GROUP = "jupyter_client.kernel_provisioners"
PROVISIONER_NAME = "evekit-warm-kernel"  # pyproject.toml registers WarmKernelProvisioner under it

# Imported once in the server, in this order: nothing that decides at import time whether it runs
# inside a kernel (see the module docstring): `datasets` imports tqdm.auto, so only what it is
# built on is here (evekit imports datasets only to read from the hub), and evekit imports tqdm.auto
# only where it draws a bar. Not `openai`: no evekit module imports it (the client posts with
# aiohttp), and it costs the server over a second of CPU.
THIRD_PARTY_PRELOAD = (
    "numpy", "pandas", "scipy.stats", "scipy.optimize", "matplotlib.pyplot", "seaborn",
    "aiohttp", "tenacity", "yaml", "jsonschema", "PIL.Image",
    "pyarrow", "huggingface_hub", "fsspec",
    "statsmodels.stats.proportion", "statsmodels.stats.inter_rater", "statsmodels.stats.weightstats",
    "rouge_score.rouge_scorer", "sacrebleu",
    "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel",
)
# What the notebooks import, and what their cells import on first use (the explorer, the judges'
# stream, the registry the summary reads): a cached re-run's `from evekit...` cell took 0.17-0.30 s
# a notebook without them, 0.05-0.11 s with them.
EVEKIT_PRELOAD = (
    "evekit.runs.task", "evekit.runs.win_rate", "evekit.runs.ranking", "evekit.runs.summary",
    "evekit.runs.judge_validation", "evekit.runs.win_rate.corrected", "evekit.runs.registry",
    "evekit.runs.tracked", "evekit.explorer", "evekit.judges.stream", "evekit.glossary", "evekit.leaderboard",
)
PRELOAD = THIRD_PARTY_PRELOAD + EVEKIT_PRELOAD
# Modules that decide at import time whether they run in a kernel: never imported by the server.
KERNEL_DECIDED = ("tqdm.auto", "tqdm.autonotebook")
# pandas' `display.max_columns` when not in a terminal ("... defaults to 20", its option's docs).
PANDAS_KERNEL_MAX_COLUMNS = 20
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
FRESH_ENV = "EVEKIT_FRESH_KERNELS"
# Environment variables that may differ between the server and a kernel forked from it: nothing
# the server imports reads them (evekit's modules read them only when called; JPY_* are the
# kernel's own).
KERNEL_ONLY_PREFIXES = ("EVEKIT_", "JPY_")
_ORIGINAL_ENV = "EVEKIT_KERNEL_SERVER_ORIGINAL"  # the server's own variables, before `_single_threaded`
REQUEST_TIMEOUT = 120.0  # seconds a kernel request may wait (the server imports between requests)
# Run with the kernel's environment: the thread count of each BLAS library a fresh kernel has.
_FRESH_THREADS = """
import json
for name in ("numpy", "scipy.linalg"):
    try:
        __import__(name)
    except ImportError:
        pass
from threadpoolctl import threadpool_info
print(json.dumps(threadpool_info()))
"""
# Starts the server from this file without importing the evekit package.
_BOOTSTRAP = "import runpy, sys; del sys.argv[0]; runpy.run_path(sys.argv[0], run_name='__main__')"


def fresh_kernels_requested() -> bool:
    return os.environ.get(FRESH_ENV, "").strip().lower() in ("1", "true", "yes")


def warm_kernels_unavailable() -> str | None:
    """Why kernels cannot be forked here, or None when they can."""
    if not sys.platform.startswith("linux"):
        return f"warm kernels are Linux-only (this is {sys.platform})"
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    if not entry_points(group=PROVISIONER_GROUP, name=PROVISIONER_NAME):
        return f"the kernel provisioner {PROVISIONER_NAME!r} is not registered (reinstall evekit: pip install -e .)"
    if find_spec("threadpoolctl") is None:
        return "threadpoolctl is not installed"
    return None


def _single_threaded(env: dict[str, str]) -> dict[str, str]:
    """What the server's environment sets so that its imports start no thread."""
    arrow = env.get("JE_ARROW_MALLOC_CONF")
    return {"OPENBLAS_NUM_THREADS": "1",
            "JE_ARROW_MALLOC_CONF": f"{arrow},background_thread:false" if arrow else "background_thread:false"}


class ForkedKernelProcess:
    """The parts of `subprocess.Popen` LocalProvisioner uses, for a kernel that is the kernel
    server's child (not ours: its exit code is not ours to read, only whether it is alive)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except (ProcessLookupError, PermissionError):  # gone (the server reaps it at once), or reused
                self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.02)
        return self.returncode or 0

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _fileno(stream: Any, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


def request_kernel(address: str, cmd: list[str], env: dict[str, str], cwd: str,
                   stdout: int, stderr: int) -> int:
    """Ask the kernel server at `address` to fork the kernel `cmd`; its pid. The kernel's stdout
    and stderr are these descriptors (sent with the request). RuntimeError names why not."""
    request = json.dumps({"cmd": cmd, "env": env, "cwd": cwd}).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(REQUEST_TIMEOUT)
        try:
            conn.connect(address)
            sent = socket.send_fds(conn, [request], [stdout, stderr])
            conn.sendall(request[sent:])
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except OSError as exc:  # refused: the server is gone; a timeout: it is stuck
            raise RuntimeError(f"the kernel server did not answer ({exc})") from exc
    said = json.loads(answer or b'{"error": "the kernel server exited"}')
    if "pid" not in said:
        raise RuntimeError(said.get("error", "no answer"))
    return int(said["pid"])


def _provisioner_class() -> type:
    from jupyter_client.provisioning import LocalProvisioner
    from traitlets import Unicode

    class WarmKernelProvisioner(LocalProvisioner):  # type: ignore[misc]
        """A LocalProvisioner whose kernel is forked from the kernel server at `server` when it can
        be (the server decides: the standard IPython kernel of its interpreter, its environment, one
        thread), and started the usual way otherwise."""

        server = Unicode("", config=True, help="The kernel server's socket ('': start kernels the usual way).")

        async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
            if not self.server:
                return await super().launch_kernel(cmd, **kwargs)
            env = dict(kwargs.get("env") or os.environ)
            if not kwargs.get("independent"):
                env["JPY_PARENT_PID"] = str(os.getpid())  # as jupyter_client's launcher sets it
            cwd = os.fspath(kwargs.get("cwd") or os.getcwd())
            try:
                pid = await asyncio.to_thread(request_kernel, self.server, cmd, env, cwd,
                                              _fileno(kwargs.get("stdout"), 1), _fileno(kwargs.get("stderr"), 2))
            except (OSError, RuntimeError, ValueError) as exc:
                print(f"evekit run: note: a kernel starts without the warm kernel server ({exc})", file=sys.stderr)
                return await super().launch_kernel(cmd, **kwargs)
            self.process = ForkedKernelProcess(pid)
            self.pid = self.pgid = pid  # the fork leads its own session
            self.cwd = cwd
            return self.connection_info

    WarmKernelProvisioner.__module__, WarmKernelProvisioner.__qualname__ = __name__, "WarmKernelProvisioner"
    return WarmKernelProvisioner


def __getattr__(name: str) -> Any:
    """`WarmKernelProvisioner` is built on first use: importing jupyter_client takes most of a
    second, which neither the CLI nor the kernel server should pay up front."""
    if name == "WarmKernelProvisioner":
        cls = globals()[name] = _provisioner_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class KernelServer:
    """The batch's kernel server: started here, stopped by `close()` (or when the batch exits).

    `address` is its socket, in a folder only this user may enter: whoever connects can start a
    process. The socket is bound before the server starts, so a request made while it is still
    starting waits for it instead of failing.
    """

    def __init__(self, python: str | None = None) -> None:
        self._dir = tempfile.mkdtemp(prefix="evekit-kernels-")
        self.address = os.path.join(self._dir, "server.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.address)
            listener.listen(64)
            limits = _single_threaded(dict(os.environ))
            env = {**os.environ, **limits, "MPLBACKEND": os.environ.get("MPLBACKEND") or INLINE_BACKEND,
                   _ORIGINAL_ENV: json.dumps({k: os.environ.get(k) for k in [*limits, "MPLBACKEND"]})}
            self.process = subprocess.Popen(
                [python or sys.executable, "-c", _BOOTSTRAP, os.path.abspath(__file__), str(listener.fileno())],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, pass_fds=(listener.fileno(),))
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        finally:
            listener.close()  # the server's copy is the only one: if it dies, requests are refused

    def close(self) -> None:
        """Stop the server (kernels it started run on until their managers shut them down)."""
        if self.process.poll() is None:
            try:
                if self.process.stdin:
                    self.process.stdin.close()  # end of its stdin: it exits
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "KernelServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_kernel_server(fresh: bool = False) -> KernelServer | None:
    """The batch's warm kernel server, or None (asked not to, not available here, or it failed to
    start: kernels then start the usual way, which is slower but the same)."""
    if fresh or fresh_kernels_requested():
        return None
    reason = warm_kernels_unavailable()
    if reason is None:
        try:
            return KernelServer()
        except OSError as exc:
            reason = str(exc)
    print(f"evekit run: note: kernels start the usual way ({reason})", file=sys.stderr)
    return None


# -- the server process ------------------------------------------------------------------------
_KERNELS: set[int] = set()  # the server's children, reaped as they exit
_STARTING_SIGINT: Any = signal.default_int_handler


def _reap(signum: int, frame: Any) -> None:
    for pid in list(_KERNELS):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _KERNELS.discard(pid)


def _fork_refusal(request: dict[str, Any], start_env: dict[str, str]) -> str | None:
    """Why the server must not fork this kernel, or None."""
    cmd = request["cmd"]
    # The same path, not the same file: two venvs on one interpreter are different kernels.
    if not (len(cmd) >= 3 and os.path.abspath(cmd[0]) == os.path.abspath(sys.executable)
            and cmd[1:3] == ["-m", "ipykernel_launcher"]):
        return "not this interpreter's IPython kernel"
    differ = sorted(k for k in {*request["env"], *start_env} if request["env"].get(k) != start_env.get(k)
                    and not k.startswith(KERNEL_ONLY_PREFIXES))
    if differ:
        return "the kernel's environment differs from the server's in " + ", ".join(differ)
    decided = [m for m in KERNEL_DECIDED if m in sys.modules]
    if decided:
        return f"{', '.join(decided)} was imported outside a kernel"
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        return f"the kernel server runs {threads} threads"
    return None


def _become_kernel(request: dict[str, Any], fds: list[int], threads: list[dict[str, Any]]) -> int:
    """In the fork: become the kernel `request` describes; its exit code."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the two the server changed, back as they were
    signal.signal(signal.SIGINT, _STARTING_SIGINT)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the launcher gives a pipe it closes at once
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in {devnull, *fds} - {0, 1, 2}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    import random

    random.seed()
    argv = ["ipykernel_launcher", *request["cmd"][3:]]
    if "numpy" in sys.modules:
        import numpy as np

        np.random.seed()
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)  # the BLAS thread counts of a fresh kernel
    if "pandas" in sys.modules:
        import pandas as pd

        pd.set_option("display.max_columns", PANDAS_KERNEL_MAX_COLUMNS)
    if "ipywidgets" in sys.modules:  # imported here, outside a kernel: its comm target is not registered
        argv.append("--IPKernelApp.extra_extensions=ipywidgets")
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.path.abspath(request["cwd"])  # as `python -m` started there would have it
    # IPKernelApp exits when its parent does. The fork's parent is the server, which exits when
    # the batch does (its stdin closes), so the server is the parent to watch. (IPKernelApp read
    # JPY_PARENT_PID when the server imported it: the option is needed either way.)
    if request["env"].get("JPY_PARENT_PID"):
        argv.append(f"--IPKernelApp.parent_handle={os.getppid()}")
    sys.argv = argv
    sys.orig_argv = list(request["cmd"])  # as the interpreter started by the launcher has it
    import runpy

    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
    return 0


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 65536, 2)
    while data and not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    try:
        request = json.loads(data)
        if len(fds) != 2:
            raise ValueError(f"{len(fds)} file descriptors sent, not 2 (stdout, stderr)")
        return request, fds
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise


class _Server:
    """The server's state: its socket, the environment its imports saw, a fresh kernel's BLAS
    thread counts (read by a fresh interpreter, once, before the first fork)."""

    def __init__(self, listen_fd: int) -> None:
        self.listener = socket.socket(fileno=listen_fd)
        original = json.loads(os.environ.pop(_ORIGINAL_ENV, "{}"))
        self.start_env = {**os.environ, **{k: v for k, v in original.items() if v is not None}}
        for name in [k for k, v in original.items() if v is None]:
            self.start_env.pop(name, None)
        self._measuring = subprocess.Popen([sys.executable, "-c", _FRESH_THREADS], stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL, env=self.start_env, text=True)
        self._threads: list[dict[str, Any]] | None = None
        self._frozen_at = 0  # len(sys.modules) at the last gc.freeze()

    def fresh_threads(self) -> list[dict[str, Any]]:
        if self._threads is None:
            out, _ = self._measuring.communicate(timeout=REQUEST_TIMEOUT / 2)
            if self._measuring.returncode != 0:
                raise RuntimeError("a fresh kernel's BLAS thread counts could not be read")
            self._threads = json.loads(out)
        return self._threads

    def _freeze(self) -> None:
        """Move what the imports made into the collector's permanent generation (`gc.freeze`, meant
        for fork without exec): the kernel's collections, and the full one at its exit, then never
        touch (and so copy) those objects' pages. Without it a kernel takes 1.5 s more to exit."""
        if len(sys.modules) != self._frozen_at:
            gc.collect()
            gc.freeze()
            self._frozen_at = len(sys.modules)

    def handle(self, conn: socket.socket) -> tuple[dict[str, Any], list[int], list[dict[str, Any]]] | None:
        """Answer one connection; in the fork, return what `_become_kernel` needs instead."""
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError) as exc:
            self._answer(conn, {"error": f"a bad request ({exc})"})
            return None
        pid = None
        try:
            threads = self.fresh_threads()
            refusal = _fork_refusal(request, self.start_env)
            if refusal is None:
                self._freeze()
                pid = os.fork()
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
            refusal = str(exc)
        if pid == 0:
            self.listener.close()
            conn.close()
            return request, fds, threads
        for fd in fds:
            os.close(fd)  # the kernel has its own copies
        if pid:
            _KERNELS.add(pid)
        self._answer(conn, {"pid": pid} if pid else {"error": refusal})
        return None

    @staticmethod
    def _answer(conn: socket.socket, answer: dict[str, Any]) -> None:
        try:
            conn.sendall(json.dumps(answer).encode() + b"\n")
        except OSError:
            pass  # the batch gave up waiting: a kernel it asked for finds its parent gone and exits
        conn.close()


def early_kernels() -> int:
    """How many kernels start before the server's imports are done, importing for themselves: one
    per core the server (importing on one) leaves, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - Linux has it; the server runs only there
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def serve(listen_fd: int) -> tuple[dict[str, Any], list[int], list[dict[str, Any]]] | None:
    """The server loop: fork a kernel per connection to the socket `listen_fd` until stdin closes
    (None), and import `PRELOAD` one module at a time while no request waits. In a fork, it returns
    the kernel to become.

    The first kernels asked for before the imports are done (`early_kernels`: one per core beside
    the server's own) start at once and import themselves what is not preloaded yet; a kernel asked
    for after them waits for the imports: one core imports for every later kernel while the others
    import for one kernel each, instead of every process importing everything on too few cores.
    Timings on a quiet two-core machine are in `benchmarks/bench_demo_rerun.py`'s figures."""
    import importlib
    import select

    global _STARTING_SIGINT
    _STARTING_SIGINT = signal.getsignal(signal.SIGINT)  # what an interpreter the batch starts has
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the batch's to handle
    server = _Server(listen_fd)
    to_import = list(PRELOAD)
    early_left = early_kernels()
    waiting: list[socket.socket] = []  # requests held until the imports are done
    while True:
        if waiting and not to_import:
            conn = waiting.pop(0)  # held while the server imported: it can have them all now
        else:
            ready = select.select([server.listener, sys.stdin], [], [], 0 if to_import else None)[0]
            if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
                return None  # the batch closed our stdin, or exited
            if server.listener not in ready:
                if to_import:
                    try:
                        importlib.import_module(to_import.pop(0))
                    except ImportError:
                        pass  # an optional library not installed: the kernel imports what it needs itself
                continue
            conn = server.listener.accept()[0]
            if to_import and early_left <= 0:
                waiting.append(conn)
                continue
            early_left -= bool(to_import)
        kernel = server.handle(conn)
        if kernel is not None:
            for other in waiting:
                other.close()  # the server's, not this kernel's
            return kernel


# -- the kernel managers of `evekit run` -----------------------------------
# What the kernel process writes to its stderr that says nothing to the user of `evekit run`: the
# transport warning (the kernel listens on loopback only) and the shutdown noise.
KERNEL_NOISE = ("Kernel is running over TCP without encryption", "KeyboardInterrupt caught in kernel")

# Kernels alive in this process (their managers), so an interrupt can stop them at once: each
# kernel runs in its own session and never sees the terminal's Ctrl-C.
_LIVE_KERNELS: set[Any] = set()
_LIVE_LOCK = threading.Lock()


def stop_kernels() -> int:
    """Kill every kernel this process started that is still alive; how many there were."""
    with _LIVE_LOCK:
        managers = list(_LIVE_KERNELS)
    for km in managers:
        provisioner = km.provisioner  # a LocalProvisioner: pid and pgid are its public state
        pid = getattr(provisioner, "pgid", None) or getattr(provisioner, "pid", None)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
    return len(managers)


def _ready_client_class() -> type:
    from queue import Empty

    from jupyter_client import protocol_version_info
    from jupyter_client.asynchronous import AsyncKernelClient

    class ReadyKernelClient(AsyncKernelClient):  # type: ignore[misc]
        """jupyter_client's client, whose `wait_for_ready` does not end by waiting for 0.2 s of
        silence on IOPub (15 kernels of a batch: 3 s of nothing): what is left there answers no
        request of nbclient's, which reads only the replies to its own. The rest is as
        jupyter_client's: a kernel_info reply, then one IOPub message to know IOPub is connected."""

        async def wait_for_ready(self, timeout: float | None = None) -> None:
            deadline = time.time() + (float("inf") if timeout is None else timeout)
            while True:
                self.kernel_info()
                try:
                    msg = await self.shell_channel.get_msg(timeout=1)
                except Empty:
                    pass
                else:
                    if msg["msg_type"] == "kernel_info_reply":
                        try:
                            await self.iopub_channel.get_msg(timeout=0.2)
                        except Empty:
                            pass
                        else:
                            major = int(msg["content"]["protocol_version"].split(".")[0])
                            if major != protocol_version_info[0]:  # as jupyter_client adapts to the kernel
                                self.session.adapt_version = major
                            break
                if not await self.is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.time() > deadline:
                    raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")
            while True:  # what IOPub holds already, without waiting for more
                try:
                    await self.iopub_channel.get_msg(timeout=0)
                except Empty:
                    break

    return ReadyKernelClient


def kernel_manager_class(stderr_path: str, env: dict[str, str] | None = None,
                         kernel_server: KernelServer | None = None) -> type:
    """A kernel manager class for papermill: its kernel writes its stderr to the file `stderr_path`
    (read back after the run by `forward_kernel_stderr`, which drops `KERNEL_NOISE` and passes
    everything else on) and, with `env`, starts with these variables added to this process's
    environment (each kernel its own: notebooks run side by side must not share one os.environ).
    With `kernel_server`, kernelspecs name `WarmKernelProvisioner` and the server: the kernel is
    forked from it, its libraries already imported."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    class WarmKernelSpecManager(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> Any:
            spec = super().get_kernel_spec(kernel_name)
            if kernel_server is not None and "kernel_provisioner" not in spec.metadata:
                spec.metadata = {**spec.metadata, "kernel_provisioner": {
                    "provisioner_name": PROVISIONER_NAME, "config": {"server": kernel_server.address}}}
            return spec

    class EvekitKernelManager(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            if kernel_server is not None:
                kw.setdefault("kernel_spec_manager", WarmKernelSpecManager())
            super().__init__(**kw)
            self.client_factory = _ready_client_class()

        async def start_kernel(self, **kw: Any) -> None:
            if "stderr" not in kw:
                kw["stderr"] = open(stderr_path, "a", encoding="utf-8")  # noqa: SIM115 - closed below
            stderr = kw["stderr"]
            if env:
                kw["env"] = {**kw.get("env", os.environ), **env}
            with _LIVE_LOCK:
                _LIVE_KERNELS.add(self)
            try:
                await super().start_kernel(**kw)
            finally:
                if hasattr(stderr, "close"):
                    stderr.close()  # the kernel has its own copy

        async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
            try:
                await super().shutdown_kernel(now=now, restart=restart)
            finally:
                if not restart:
                    with _LIVE_LOCK:
                        _LIVE_KERNELS.discard(self)

    return EvekitKernelManager


def forward_kernel_stderr(text: str, stream: Any = None, prefix: str = "") -> None:
    """The kernel's stderr minus the lines of `KERNEL_NOISE` (and the blank lines around them)."""
    stream = stream or sys.stderr
    kept = [line for line in text.splitlines() if line.strip() and not any(n in line for n in KERNEL_NOISE)]
    for line in kept:
        print(f"{prefix}  kernel: {line}", file=stream)


if __name__ == "__main__":
    _kernel = serve(int(sys.argv[1]))
    if _kernel is not None:  # a fork: the kernel runs here, and the interpreter exits as a kernel's does
        sys.exit(_become_kernel(*_kernel))
