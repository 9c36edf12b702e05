"""Warm notebook kernels for `evekit run`: a fork server that has imported the heavy libraries once.

A fresh IPython kernel spends about 1.5 s starting and 2.5 s importing pandas, scipy, matplotlib,
seaborn and openai before the first cell of a notebook does any work; on a cached re-run of the demo
that is most of each notebook's time. `evekit run` therefore starts one *kernel server* per batch: a
child process that imports those third-party libraries (never evekit itself, whose modules may read
the kernel's environment), one module at a time between requests, and forks one process per kernel
(a kernel asked for before the imports are done imports the rest itself, on the other core). Each fork is a brand-new kernel
(its own process, session and environment, nothing shared with the notebook before it); only the
import work is shared, copy-on-write.

What stays as in a normal kernel, and why it needs care:
- `tqdm.auto` chooses widget or text progress bars when first imported, by asking whether it runs in
  a kernel: it is never imported in the server (evekit's client imports it inside the kernel).
- matplotlib reads `MPLBACKEND` when imported: the server sets the value ipykernel would set.
- ipywidgets registers its comm target only when imported inside a running kernel, and pandas picks
  `display.max_columns` for a terminal: the fork redoes both once its kernel is up (`kernel_fixups`).
  A test runs notebooks both ways and compares every output.
- Each fork starts its own session (`setsid`, as jupyter_client does), so interrupts and kills by
  process group work as for any kernel; the manager's process is `JPY_PARENT_PID`, so a kernel
  whose batch dies exits too; random generators are reseeded from the OS.

`EVEKIT_FRESH_KERNELS=1` (or `evekit run --fresh-kernels`) turns this off. Off POSIX, or when the
server cannot start, kernels start the usual way.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

__all__ = ["KernelServer", "ForkedKernelProcess", "PRELOAD", "kernel_fixups", "fresh_kernels_requested"]

# Imported once in the server. Third-party only, and nothing that decides at import time whether
# it runs inside a kernel (tqdm.auto); see the module docstring.
PRELOAD = (
    "numpy", "pandas", "scipy.stats", "scipy.optimize", "matplotlib.pyplot", "seaborn",
    "openai", "aiohttp", "tenacity", "yaml", "jsonschema", "PIL.Image",
    # the data and the metrics (datasets' own progress bars stay off while evekit loads)
    "datasets", "sklearn.metrics", "statsmodels.stats.proportion", "statsmodels.stats.inter_rater",
    "statsmodels.stats.weightstats", "rouge_score.rouge_scorer", "sacrebleu",
    "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel", "ipywidgets",
)
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
FRESH_ENV = "EVEKIT_FRESH_KERNELS"
# Run in each forked kernel once it is up (`IPKernelApp.exec_lines`: not an executed cell, so no
# execution count and no output).
_KERNEL_EXEC_LINE = "import evekit.batch.kernels as _evekit_k; _evekit_k.kernel_fixups(); del _evekit_k"


def kernel_fixups() -> None:
    """In a forked kernel: decide again, inside a kernel, what the preloaded libraries decided at
    import time outside one (tests/test_kernels.py runs notebooks both ways and compares outputs)."""
    import ipywidgets

    ipywidgets._handle_ipython()  # registers the widget comm target, as an import in a kernel does
    import pandas as pd

    try:  # pandas picked display.max_columns for a terminal (0: fit the width), a kernel gets 20
        from pandas.core.config_init import is_terminal
    except ImportError:  # pandas < 3
        from pandas.io.formats.console import is_terminal
    pd.set_option("display.max_columns", 0 if is_terminal() else 20)


def fresh_kernels_requested() -> bool:
    return os.environ.get(FRESH_ENV, "").strip().lower() in ("1", "true", "yes")


class ForkedKernelProcess:
    """The parts of `subprocess.Popen` jupyter_client's provisioner uses, for a kernel that is the
    kernel server's child (not ours: its exit code is not ours to read, only whether it is alive)."""

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
        import time

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


class KernelServer:
    """The parent's handle on the kernel server: `spawn(cmd, env, cwd, stderr_path)` -> pid.

    One JSON line per request on the server's stdin, one JSON line back; a lock makes it safe for
    the batch's worker threads.
    """

    def __init__(self, python: str | None = None) -> None:
        env = {**os.environ, "MPLBACKEND": os.environ.get("MPLBACKEND") or INLINE_BACKEND}
        self.process = subprocess.Popen([python or sys.executable, "-m", "evekit.batch.kernels"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                        text=True, bufsize=1)
        self._lock = threading.Lock()
        self._ready = False  # the first spawn reads its 'ready' line

    def _wait_ready(self) -> None:
        if not self._ready:
            said = self.process.stdout.readline() if self.process.stdout else ""
            if not said.startswith("ready"):
                raise RuntimeError(f"the kernel server did not start (said {said.strip()!r})")
            self._ready = True

    def can_launch(self, cmd: list[str]) -> bool:
        """Only the standard IPython kernel of this interpreter is forked."""
        # The same path, not the same file: two venvs on one interpreter are different kernels.
        return (len(cmd) >= 3 and os.path.abspath(cmd[0]) == os.path.abspath(sys.executable)
                and cmd[1:3] == ["-m", "ipykernel_launcher"] and self.process.poll() is None)

    def spawn(self, cmd: list[str], env: dict[str, str], cwd: str | None, stderr_path: str | None) -> int:
        request = {"argv": cmd[2:], "env": env, "cwd": cwd, "stderr": stderr_path}
        with self._lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self._wait_ready()
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = json.loads(self.process.stdout.readline() or '{"error": "the kernel server exited"}')
        if "pid" not in answer:
            raise RuntimeError(f"the kernel server could not start a kernel: {answer.get('error')}")
        return int(answer["pid"])

    def close(self) -> None:
        """Stop the server (kernels it started run on until their managers shut them down)."""
        if self.process.poll() is None:
            try:
                if self.process.stdin:
                    self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> "KernelServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the server process ------------------------------------------------------------------------
def _reap(signum: int, frame: Any) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _become_kernel(request: dict[str, Any]) -> None:
    """In the fork: become the kernel `request` describes, then exit (never returns)."""
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL if signum != signal.SIGINT else signal.default_int_handler)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        # The server's stdout is the pipe to the parent: the kernel's goes to its stderr file.
        err = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if request.get("stderr") \
            else os.dup(2)
        os.dup2(err, 1)
        os.dup2(err, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        import random

        import numpy as np

        random.seed()
        np.random.seed()
        if request.get("cwd") and sys.path and sys.path[0] == _SERVER_CWD:
            sys.path[0] = os.path.abspath(request["cwd"])  # as `python -m` started there would have it
        # IPKernelApp read JPY_PARENT_PID when the server imported it: pass it the kernel's own.
        parent = request["env"].get("JPY_PARENT_PID")
        sys.argv = ["ipykernel_launcher", *request["argv"][1:],
                    f"--IPKernelApp.exec_lines={_KERNEL_EXEC_LINE}",
                    *([f"--IPKernelApp.parent_handle={int(parent)}"] if parent else [])]
        import runpy

        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - report and exit: this process must not return to the server loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


_SERVER_CWD = os.getcwd()


def _requests() -> Any:
    """Request lines from stdin as they come (os.read, so `select` sees every line not yet read)."""
    buffered = b""
    while True:
        while b"\n" not in buffered:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            buffered += chunk
        line, buffered = buffered.split(b"\n", 1)
        yield line, bool(buffered)


def serve() -> None:
    """The server loop: say 'ready', then fork a kernel per request line until stdin closes, and
    import `PRELOAD` one module at a time in between, while no request waits: a kernel asked for
    early starts at once and imports itself what is not preloaded yet (on the other core)."""
    import importlib
    import select

    out = sys.stdout
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the batch's to handle
    out.write("ready\n")
    out.flush()
    to_import = list(PRELOAD)
    requests = _requests()
    pending = False  # a further request line is already read into the buffer
    while True:
        while to_import and not pending and not select.select([0], [], [], 0)[0]:
            try:
                importlib.import_module(to_import.pop(0))
            except ImportError:
                pass  # an optional library not installed: the kernel imports what it needs itself
            for name in ("tqdm.auto", "tqdm.autonotebook"):  # must be decided inside a kernel
                sys.modules.pop(name, None)
        try:
            line, pending = next(requests)
        except StopIteration:
            return
        try:
            request = json.loads(line)
            pid = os.fork()
        except (ValueError, OSError) as exc:
            out.write(json.dumps({"error": str(exc)}) + "\n")
            out.flush()
            continue
        if pid == 0:
            _become_kernel(request)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()


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
    import signal

    with _LIVE_LOCK:
        managers = list(_LIVE_KERNELS)
    for km in managers:
        provisioner = getattr(km, "provisioner", None)
        pid = getattr(provisioner, "pgid", None) or getattr(provisioner, "pid", None)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
    return len(managers)


def _quiet_kernel_manager(stderr_path: str, env: dict[str, str] | None = None,
                          kernel_server: Any = None) -> type:
    """A kernel manager whose kernel writes its stderr to the file `stderr_path` (read back after
    the run by `forward_kernel_stderr`, which drops `KERNEL_NOISE` and passes everything else on)
    and, with `env`, starts with these variables added to this process's environment (each kernel
    its own: notebooks run side by side must not share one os.environ). With `kernel_server`
    (`evekit.kernels.KernelServer`) the kernel is forked from it, its libraries already imported."""
    from jupyter_client import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def _async_start_kernel(self, **kw: Any) -> None:
            if "stderr" not in kw:
                kw["stderr"] = open(stderr_path, "a", encoding="utf-8")  # noqa: SIM115 - closed below
            if env:
                kw["env"] = {**kw.get("env", os.environ), **env}
            with _LIVE_LOCK:
                _LIVE_KERNELS.add(self)
            try:
                await super()._async_start_kernel(**kw)
            finally:
                if hasattr(kw["stderr"], "close"):
                    kw["stderr"].close()  # the kernel has its own copy

        start_kernel = _async_start_kernel

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if kernel_server is None or not kernel_server.can_launch(kernel_cmd):
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            pass  # ForkedKernelProcess: this module

            kernel_env = dict(kw.get("env") or os.environ)
            kernel_env["JPY_PARENT_PID"] = str(os.getpid())  # as jupyter_client's launcher sets it
            try:
                pid = kernel_server.spawn(kernel_cmd, kernel_env, kw.get("cwd"), stderr_path)
            except (OSError, RuntimeError) as exc:  # the usual start: slower, the same kernel
                print(f"evekit run: note: a kernel starts without the warm kernel server ({exc})", file=sys.stderr)
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            provisioner = self.provisioner
            assert provisioner is not None
            provisioner.process = ForkedKernelProcess(pid)
            provisioner.pid = provisioner.pgid = pid  # the fork leads its own session
            self._reconcile_connection_info(provisioner.connection_info)

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            with _LIVE_LOCK:
                _LIVE_KERNELS.discard(self)

    return QuietKernelManager


def forward_kernel_stderr(text: str, stream: Any = None, prefix: str = "") -> None:
    """The kernel's stderr minus the lines of `KERNEL_NOISE` (and the blank lines around them)."""
    stream = stream or sys.stderr
    kept = [line for line in text.splitlines() if line.strip() and not any(n in line for n in KERNEL_NOISE)]
    for line in kept:
        print(f"{prefix}  kernel: {line}", file=stream)



def _start_kernel_server(fresh: bool) -> Any:
    """The batch's warm kernel server, or None (asked not to, not POSIX, or it failed: kernels then
    start the usual way, which is slower but the same)."""
    pass  # KernelServer, fresh_kernels_requested: this module

    if fresh or fresh_kernels_requested() or not hasattr(os, "fork"):
        return None
    try:
        return KernelServer()
    except (OSError, RuntimeError) as exc:
        print(f"evekit run: note: kernels start without the warm kernel server ({exc})", file=sys.stderr)
        return None


if __name__ == "__main__":
    serve()
