"""Executing parameter files with papermill: one file (`run_one`), and the whole batch (`run_batch`)."""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from evekit.batch.html import render_html, warm_html_exporter
from evekit.batch.kernels import forward_kernel_stderr, kernel_manager_class, start_kernel_server
from evekit.batch.lock import RunFolderLock, locked_run_folders
from evekit.batch.paramfiles import RunFile, check_param_files, read_run_file
from evekit.batch.schedule import _run_scheduled, endpoint_limits, run_order, start_priority, waits_for
from evekit.errors import EvekitError, OutputError, RunLockedError
from evekit.paths import REPO_ROOT, display_path, output_path, resolve_path, safe_name
from evekit.runs.records import (EXECUTION_ENV, RUN_RECORD, all_calls_failed, find_run_records, fingerprint,
                                 write_attempt)
from evekit.runs.tracked import BATCH_ENV, finish_tracking, open_tracking
from evekit.tracking import describe

# papermill saves the executed notebook as it goes (at each cell's start and end): through this scheme
# each save is atomic (`evekit.atomic`), so a kill or a full disk leaves the last whole notebook.
ATOMIC_SCHEME = "evekit-atomic:"
_ATOMIC_REGISTERED = False

def _register_atomic_notebooks() -> None:
    """Teach papermill (its public I/O registry, `papermill.iorw.papermill_io`) the atomic scheme."""
    from papermill.engines import papermill_engines
    from papermill.iorw import LocalHandler, papermill_io

    from evekit.atomic import write_text_atomic

    class AtomicLocalHandler(LocalHandler):
        def write(self, buf: str, path: str) -> None:
            write_text_atomic(path[len(ATOMIC_SCHEME):], buf)

        def read(self, path: str) -> str:
            return super().read(path[len(ATOMIC_SCHEME):])

        def pretty_path(self, path: str) -> str:
            return path[len(ATOMIC_SCHEME):]

    global _ATOMIC_REGISTERED
    if not _ATOMIC_REGISTERED:
        papermill_io.register(ATOMIC_SCHEME, AtomicLocalHandler())
        papermill_engines.register(THROTTLED_ENGINE, _throttled_engine())
        _ATOMIC_REGISTERED = True


# papermill saves the whole notebook at every cell's start and end (nbformat.writes: about 10 ms
# for a demo notebook with its outputs, 50-60 saves a notebook: about a third of the batch process's
# CPU on a cached re-run). This engine saves at most every SAVE_EVERY seconds while cells run and
# always at the end (papermill's `notebook_complete`), so the executed notebook is the same; a kill
# leaves a whole notebook at most SAVE_EVERY seconds older. The progress lines read it every 30 s.
THROTTLED_ENGINE = "evekit-throttled"
SAVE_EVERY = 1.0
# The cell each running notebook is in, keyed by its executed notebook's path, set by the engine
# below at every cell's start: a throttled save may skip the start of a long cell, so the progress
# lines read this first and the file only when the notebook runs elsewhere.
LIVE_CELL: dict[str, tuple[int, int]] = {}


def _throttled_engine() -> type:
    from papermill.engines import NBClientEngine, NotebookExecutionManager

    class ThrottledManager(NotebookExecutionManager):  # type: ignore[misc]
        _last_write = float("-inf")
        _final = False

        def save(self, **kwargs: Any) -> None:
            nb = kwargs.get("nb")
            if nb:  # papermill's own `catch_nb_assignment`: a replaced notebook object
                self.nb = nb
            now = time.monotonic()
            if self._final or now - self._last_write >= SAVE_EVERY:
                super().save()
                self._last_write = time.monotonic()

        def cell_start(self, cell: Any, cell_index: int | None = None, **kwargs: Any) -> None:
            if self.output_path and cell_index is not None:
                LIVE_CELL[self.output_path[len(ATOMIC_SCHEME):]] = (cell_index + 1, len(self.nb.cells))
            super().cell_start(cell, cell_index, **kwargs)

        def notebook_complete(self, **kwargs: Any) -> None:
            self._final = True  # its closing save always writes
            if self.output_path:
                LIVE_CELL.pop(self.output_path[len(ATOMIC_SCHEME):], None)
            super().notebook_complete(**kwargs)

    class ThrottledEngine(NBClientEngine):  # type: ignore[misc]
        @classmethod
        def execute_notebook(cls, nb: Any, kernel_name: str, output_path: str | None = None,
                             progress_bar: bool = True, log_output: bool = False, autosave_cell_every: int = 30,
                             **kwargs: Any) -> Any:
            # As papermill's Engine.execute_notebook, with the manager above.
            nb_man = ThrottledManager(nb, output_path=output_path, progress_bar=progress_bar,
                                      log_output=log_output, autosave_cell_every=autosave_cell_every)
            nb_man.notebook_start()
            try:
                cls.execute_managed_notebook(nb_man, kernel_name, log_output=log_output, **kwargs)
            finally:
                nb_man.cleanup_pbar()
                nb_man.notebook_complete()
            return nb_man.nb

    return ThrottledEngine


def input_files(run: RunFile) -> dict[str, str | None]:
    """The files a run reads, each with its fingerprint (`runs.records.fingerprint`): the parameter
    file and every parameter value that names an existing file (a dataset, a task file, answers
    files, labels, a judge validation), as the notebook resolves it."""
    found: dict[str, str | None] = {str(Path(run.path).resolve()): fingerprint(Path(run.path))}

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, str) and value and "\0" not in value and len(value) < 4096:
            try:
                path = resolve_path(os.path.expandvars(value))
                if path.is_file():
                    found.setdefault(str(path.resolve()), fingerprint(path))
            except (OSError, ValueError):
                pass

    visit(run.injected)
    return found


def saved_output_dirs(out_root: Path, execution: str) -> list[Path]:
    """Folders the execution `execution` saved, from the run.json records its save steps wrote.

    The runner sets `report.EXECUTION_ENV` for the notebook's kernel; every record carries it, so
    outputs of earlier runs or of other notebooks in the same folder are not picked up.
    """
    if not Path(out_root).exists():
        return []
    records, _ = find_run_records(out_root, execution=execution)
    return [r.dir for r in records]



PROGRESS_EVERY = 30.0  # seconds between the progress lines of a running notebook


def format_elapsed(seconds: float) -> str:
    """'45 s', '2 min 10 s', '1 h 3 min'."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def notebook_progress(executed: Path) -> tuple[int, int] | None:
    """(cell now running or last finished, number of cells) from the notebook papermill writes as
    it goes (it saves the file when each cell starts and ends); None while it is unreadable."""
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:  # noqa: BLE001 - half-written: try again at the next tick
        return None
    cells = nb.cells
    current = 0
    for i, cell in enumerate(cells, 1):
        status = cell.get("metadata", {}).get("papermill", {}).get("status")
        if status == "running":
            return i, len(cells)
        if status in ("completed", "failed"):
            current = i
    return current, len(cells)


class ProgressReporter:
    """Prints '  … open_ended: 2 min 10 s, cell 9 of 25' every `every` seconds while a notebook runs."""

    def __init__(self, label: str, executed: Path, every: float = PROGRESS_EVERY, prefix: str = "") -> None:
        self.label, self.executed, self.every, self.prefix = label, executed, every, prefix
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"progress-{label}", daemon=True)
        self._started = time.monotonic()

    def _loop(self) -> None:
        last: tuple[int, int] | None = None
        while not self._stop.wait(self.every):
            last = LIVE_CELL.get(str(self.executed)) or notebook_progress(self.executed) or last
            where = f", cell {last[0]} of {last[1]}" if last and last[0] else ", starting the kernel"
            print(f"{self.prefix}  … {self.label}: {format_elapsed(time.monotonic() - self._started)}{where}", flush=True)

    def __enter__(self) -> "ProgressReporter":
        if self.every and self.every > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()



def run_one(params_file: Path | RunFile, notebooks_dir: Path, server_url: str | None,
            output_dir: str | None, html: bool,
            progress_every: float = PROGRESS_EVERY, prefix: str = "",
            env: dict[str, str] | None = None, kernel_server: Any = None) -> tuple[bool, list[Path], Path]:
    """Execute one parameter file; (passed, folders its save steps wrote, run folder).

    `prefix` starts every line this prints (the batch's parallel mode names the notebook there);
    `env` is added to the kernel's environment; `kernel_server` (`evekit.batch.kernels.KernelServer`)
    forks the kernel instead of starting a new interpreter.
    """
    run = params_file if isinstance(params_file, RunFile) else read_run_file(
        Path(params_file), notebooks_dir, server_url, output_dir=output_dir, check_files=False)
    notebook = Path(notebooks_dir) / f"{run.notebook}.ipynb"
    out_root = Path(run.output_dir)
    out_root = output_path(out_root)
    # The run folder's name is made safe like every folder name: no `..`, no `/` (never outside output_dir).
    run_dir = out_root / safe_name(run.run_name)
    with RunFolderLock(run_dir):
        return _run_locked(run, notebook, out_root, run_dir, html, progress_every, prefix, env, kernel_server)


def _run_locked(run: RunFile, notebook: Path, out_root: Path, run_dir: Path, html: bool, progress_every: float,
                prefix: str, env: dict[str, str] | None, kernel_server: Any) -> tuple[bool, list[Path], Path]:
    import papermill as pm
    from datetime import datetime, timezone

    _register_atomic_notebooks()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    inputs = input_files(run)
    stem = run.path.stem
    executed = run_dir / "notebooks" / f"{stem}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    ok = True
    reason: str | None = None
    # The kernel gets this environment variable; the records its save steps write carry it.
    execution = f"{stem}-{uuid.uuid4().hex[:12]}"
    kernel_env = {**(env or {}), EXECUTION_ENV: execution}
    fd, kernel_stderr = tempfile.mkstemp(prefix="evekit-kernel-", suffix=".stderr")
    os.close(fd)
    try:
        with ProgressReporter(stem, executed, progress_every, prefix):
            pm.execute_notebook(str(notebook), ATOMIC_SCHEME + str(executed), parameters=run.injected, cwd=os.getcwd(),
                                kernel_name="python3", progress_bar=False, log_output=False, engine_name=THROTTLED_ENGINE,
                                kernel_manager_class=kernel_manager_class(kernel_stderr, kernel_env,
                                                                          kernel_server))
    except Exception as exc:  # papermill has written the notebook with its error banner
        ok = False
        message = str(exc).strip().splitlines()
        reason = message[-1] if message else repr(exc)
        print(f"{prefix}  FAILED: {notebook.name} with {run.path}: {reason}", file=sys.stderr)
    finally:
        with open(kernel_stderr, encoding="utf-8", errors="replace") as stream:
            forward_kernel_stderr(stream.read(), prefix=prefix)
        os.unlink(kernel_stderr)
    records, _ = find_run_records(out_root, execution=execution) if out_root.exists() else ([], [])
    dirs = [r.dir for r in records]
    status = "passed" if ok else "failed"
    for record in records:
        why = all_calls_failed(record)
        if why:  # no result at all: never a report that reads like one, never exit 0
            ok, status, reason = False, "all_failed", why
            print(f"{prefix}  FAILED: {notebook.name} with {run.path}: {why}; "
                  f"{display_path(record.dir)} has no score", file=sys.stderr)
    if ok and not dirs:
        status, reason = "no_outputs", f"saved no outputs (no {RUN_RECORD})"
        print(f"{prefix}  note: {notebook.name} with {run.path} saved no outputs (no {RUN_RECORD} was written "
              f"under {display_path(out_root)}); its report goes to {display_path(run_dir / 'failed')}",
              file=sys.stderr)
    # The run's tracker (its `tracking` parameter) logs each folder it saved once report.html is there,
    # so the report is logged too and its header names the tracker run.
    track = run.params.tracking_config if run.kind is not None and run.params is not None else None
    group = (env or {}).get(BATCH_ENV) or os.environ.get(BATCH_ENV)
    sessions = {d: open_tracking(d, run.kind, track, out_root=out_root, group=group) for d in dirs} if track else {}
    try:
        if html and executed.exists():
            targets = dirs or [run_dir / "failed" / stem]
            for d in targets:
                render_html(executed, d / "report.html", params_file=run.path, record_dir=d if dirs else None)
    except OutputError as exc:  # a full disk: one line naming the file; what was written stays
        ok, status, reason = False, "failed", str(exc)
        print(f"{prefix}  FAILED: {notebook.name} with {run.path}: {exc}", file=sys.stderr)
    for d, session in sessions.items():
        print(f"{prefix}  {describe(finish_tracking(d, session, d / 'report.html'))}", flush=True)
    try:
        write_attempt(run_dir, stem, execution=execution, status=status, params_file=run.path, inputs=inputs,
                      started=started, dirs=dirs, reason=reason)
    except OutputError as exc:
        print(f"{prefix}  note: {exc}", file=sys.stderr)
    return ok, dirs, run_dir


def _run_file(f: RunFile, nb_dir: Path, server_url: str | None, output_dir: str | None, html: bool,
              progress_every: float, env: dict[str, str], prefix: str,
              kernel_server: Any = None) -> tuple[bool, Path | None, list[Path]]:
    """One parameter file with its log lines: (passed, run folder, folders its save steps wrote)."""
    t0 = time.monotonic()
    print(f"{prefix}running {f.notebook} with {f.path} ...", flush=True)
    run_dir = None
    try:
        ok, dirs, run_dir = run_one(f, nb_dir, server_url, output_dir, html, progress_every, prefix, env,
                                    kernel_server)
    except EvekitError as exc:  # a message that says what to do: no traceback
        ok, dirs = False, []
        print(f"{prefix}  FAILED: {f.path}: {exc}", file=sys.stderr)
    except Exception as exc:
        ok, dirs = False, []
        print(f"{prefix}  FAILED: {f.path}: {exc}", file=sys.stderr)
        tb = traceback.format_exc().rstrip().splitlines()
        print("\n".join(f"{prefix}{line}" for line in tb), file=sys.stderr)
    for d in dirs:
        print(f"{prefix}  -> {d}", flush=True)
    print(f"{prefix}  {'ok' if ok else 'FAILED'} in {time.monotonic() - t0:.1f} s", flush=True)
    return ok, run_dir, dirs



def _track_all(files: list[RunFile], backend: str) -> None:
    """`evekit run --track BACKEND`: every run of a notebook kind whose file sets no `tracking`."""
    from evekit.tracking import TrackingConfig

    TrackingConfig.from_param(backend)  # a ParameterError names the backends
    for f in files:
        if f.params is not None and f.params.tracking_config is None:
            f.params.tracking = backend
            if "tracking" in f.injected:
                f.injected["tracking"] = backend


def run_batch(param_files: list[str], *, serve: bool = False, output_dir: str | None = None,
              html: bool = True, notebooks_dir: str | None = None,
              progress_every: float = PROGRESS_EVERY, jobs: int = 1, fresh_kernels: bool = False,
              track: str | None = None) -> int:
    """Run every parameter file; return a process exit code (0 only when all notebooks passed).

    `track` ("mlflow" or "wandb"): track every run whose file sets no `tracking` with that backend.
    The runs' tracker runs are grouped by EVEKIT_BATCH (W&B group, MLflow tag `evekit.batch`), set for
    the batch unless it is set already.
    `jobs`: at most this many notebooks at the same time, each once the notebooks it waits for
    (`waits_for`) have finished. Kernels are forked from a warm kernel server (`evekit.kernels`)
    unless `fresh_kernels` (or EVEKIT_FRESH_KERNELS=1) asks for a new interpreter each.
    """
    import papermill  # noqa: F401  (imported here, once: notebooks started in threads would import it together)

    if int(jobs) < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    paths = [Path(p) for p in param_files]
    server = None
    if serve:
        from evekit.server import EmbeddedServer, ServerError

        server = EmbeddedServer()
        # The server's threads follow what other processes use (`server.thread_plan`): read it
        # before this batch's own kernel server and exporter take the cores.
        try:
            server.thread_plan()
        except ServerError as exc:  # a bad EVEKIT_SERVER_THREADS / EVEKIT_SERVER_POLL
            print(f"evekit run: {exc}", file=sys.stderr)
            return 1
    # Started first: its imports overlap the checks below and the embedded server's start. One
    # notebook gains nothing from it.
    kernel_server = start_kernel_server(fresh_kernels) if len(paths) > 1 else None
    try:
        return _checked_batch(paths, server, kernel_server, output_dir, html, notebooks_dir, progress_every, jobs,
                              track)
    finally:  # the one place it closes, whether or not the batch ran
        if kernel_server is not None:
            kernel_server.close()


def _checked_batch(paths: list[Path], server: Any, kernel_server: Any, output_dir: str | None, html: bool,
                   notebooks_dir: str | None, progress_every: float, jobs: int, track: str | None) -> int:
    """`run_batch` once the kernel server started: the checks, the run folders' locks, the batch."""
    serve = server is not None
    nb_dir = Path(notebooks_dir) if notebooks_dir else REPO_ROOT / "notebooks"
    # With --serve the server's URL is not known yet: a stand-in is checked; without it, an exported
    # EVEKIT_SERVER_URL (a server started with `evekit serve`) fills the placeholder.
    check_url = "http://server.invalid" if serve else os.environ.get("EVEKIT_SERVER_URL")
    problems = check_param_files(paths, nb_dir, check_url, output_dir)
    if problems:
        for problem in problems:
            print(f"evekit run: {problem}", file=sys.stderr)
        print(f"evekit run: nothing was run ({len(problems)} problem(s) in the parameter files)", file=sys.stderr)
        return 2
    # One evekit run at a time per run folder: taken before anything starts, held to the end.
    folders = [output_path(Path(f.output_dir)) / safe_name(f.run_name)
               for f in (read_run_file(p, nb_dir, check_url, output_dir=output_dir, check_files=False) for p in paths)]
    try:
        with locked_run_folders(folders):
            from evekit.atomic import remove_leftovers

            for folder in folders:  # what a killed run's writes left behind (held: nobody else writes here)
                if folder.exists():
                    remove_leftovers(folder)
            return _run_batch_locked(paths, nb_dir, server, check_url, output_dir, html, progress_every, jobs,
                                     kernel_server, track)
    except RunLockedError as exc:
        print(f"evekit run: {exc}", file=sys.stderr)
        print("evekit run: nothing was run", file=sys.stderr)
        return 2


def _run_batch_locked(paths: list[Path], nb_dir: Path, server: Any, check_url: str | None, output_dir: str | None,
                      html: bool, progress_every: float, jobs: int, kernel_server: Any,
                      track: str | None = None) -> int:
    import shutil

    from evekit.batch.index import write_index
    from evekit.endpoints import limit_environment

    serve = server is not None
    failed: list[str] = []
    run_dirs: set[Path] = set()
    started = time.monotonic()
    slots_dir = None
    try:
        if html:
            warm_html_exporter()
        server_url = None if serve else check_url
        if serve:
            from evekit.server import ServerError

            try:
                server.start()
            except ServerError as exc:
                print(f"evekit run: {exc}", file=sys.stderr)
                return 1
            server_url = server.base_url
            os.environ["EVEKIT_SERVER_URL"] = server_url
            print(f"embedded model {server.model} at {server_url}", flush=True)
        files = run_order([read_run_file(p, nb_dir, server_url, output_dir=output_dir, check_files=False)
                           for p in paths])
        if track:
            _track_all(files, track)
        limits = endpoint_limits(files)
        env: dict[str, str] = {BATCH_ENV: os.environ.get(BATCH_ENV) or f"evekit-{time.strftime('%Y%m%d-%H%M%S')}-"
                                                                        f"{uuid.uuid4().hex[:6]}"}
        if limits:
            slots_dir = Path(tempfile.mkdtemp(prefix="evekit-slots-"))
            env.update(limit_environment(limits, slots_dir))
            print("calls in flight at most: " + ", ".join(f"{n} to {url}" for url, n in sorted(limits.items())),
                  flush=True)

        by_path = {f.path: f for f in files}

        def run(path: Path, prefix: str) -> tuple[bool, Path | None, list[Path]]:
            return _run_file(by_path[path], nb_dir, server_url, output_dir, html, progress_every, env, prefix,
                             kernel_server)

        priority = {f.path: start_priority(f) for f in files}
        for f, ok, run_dir in _run_scheduled(list(by_path), waits_for(files), int(jobs), run, priority):
            if run_dir is not None:
                run_dirs.add(run_dir)
            if not ok:
                failed.append(str(f))
    finally:
        if server is not None:
            server.stop()
            print("embedded server stopped", flush=True)
        if slots_dir is not None:
            shutil.rmtree(slots_dir, ignore_errors=True)
    for run_dir in sorted(run_dirs):
        try:
            index = write_index(run_dir, batch_runs=sorted(run_dirs))
        except OutputError as exc:  # a full disk: the earlier index stays
            print(f"evekit run: {exc}", file=sys.stderr)
            failed.append(f"index of {run_dir}")
            continue
        print(f"index: {index}")
    print(f"{len(paths) - len(failed)} of {len(paths)} notebooks passed in "
          f"{time.monotonic() - started:.0f} s")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0
