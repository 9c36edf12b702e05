"""Batch runs: papermill over YAML parameter files, HTML reports, and the run index.

A parameter file is named `<notebook>[.<variant>].yaml`: `open_ended.yaml` and
`open_ended.5shot.yaml` both run `notebooks/open_ended.ipynb`. Notebooks run in phases
(`PHASES`): judge validation, task notebooks, win rate and ranking, summary, so the later ones
find the earlier results; with `jobs > 1` up to that many run at the same time, each as soon as
the files it waits for (`waits_for`) have finished, each log line prefixed with its parameter
file's name. Kernels are forked from a warm kernel server (`evekit.kernels`); an interrupt kills
the running ones (`stop_kernels`). Every endpoint gets one limit for the whole
batch, the smallest `concurrency` any run sets for it (`endpoint_limits`), shared by all kernels
through `evekit.endpoints`. With `serve=True` the embedded model server is started first and
`${EVEKIT_SERVER_URL}` in the YAML becomes its URL; the server is stopped even when a notebook fails.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import yaml

from evekit.paths import REPO_ROOT, display_path

SERVER_URL_PLACEHOLDER = "${EVEKIT_SERVER_URL}"
# The phase of each notebook that must wait for others (every other notebook is a task notebook,
# phase 1): judge validation first (a task may show its results), then the notebooks that read the
# task runs' samples, then the summary of everything. Notebooks of one phase are independent and
# may run at the same time (`--jobs`); a phase starts when the one before it has finished.
PHASES = {"judge_validation": 0, "win_rate": 2, "ranking": 2, "summary": 3}
TASK_PHASE = 1


def notebook_name(params_file: Path) -> str:
    return params_file.name.split(".")[0]


def phase_of(params_file: Path) -> int:
    return PHASES.get(notebook_name(params_file), TASK_PHASE)


def run_order(files: list[Path]) -> list[Path]:
    """By phase (`PHASES`); within a phase in the order given."""
    return sorted(files, key=phase_of)


def phases(files: list[Path]) -> list[list[Path]]:
    """The files of each phase that has any, in `run_order` (the grouping `PHASES` makes; the
    scheduler itself starts files by `waits_for`)."""
    groups: dict[int, list[Path]] = {}
    for f in run_order(files):
        groups.setdefault(phase_of(f), []).append(f)
    return [groups[k] for k in sorted(groups)]


def _substitute(value: Any, server_url: str | None) -> Any:
    if isinstance(value, str) and SERVER_URL_PLACEHOLDER in value:
        if server_url is None:
            raise ValueError(f"{SERVER_URL_PLACEHOLDER} is used but no server was started (pass --serve)")
        return value.replace(SERVER_URL_PLACEHOLDER, server_url)
    if isinstance(value, dict):
        return {k: _substitute(v, server_url) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, server_url) for v in value]
    return value


def load_params(path: Path, server_url: str | None = None) -> dict[str, Any]:
    with open(path) as f:
        params = yaml.safe_load(f) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping of parameter names to values")
    return _substitute(params, server_url)


def notebook_defaults(notebook: Path) -> dict[str, Any]:
    """Literal default values of the notebook's `parameters` cell (what runs when a YAML omits them)."""
    import ast

    import papermill as pm

    values = {}
    for name, info in pm.inspect_notebook(str(notebook)).items():
        try:
            values[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            pass
    return values


def saved_output_dirs(out_root: Path, execution: str) -> list[Path]:
    """Folders the execution `execution` saved, from the run.json records its save steps wrote.

    The runner sets `report.EXECUTION_ENV` for the notebook's kernel; every record carries it, so
    outputs of earlier runs or of other notebooks in the same folder are not picked up.
    """
    from evekit.report import find_run_records

    if not Path(out_root).exists():
        return []
    records, _ = find_run_records(out_root, execution=execution)
    return [r.dir for r in records]


# A reproduce line in a notebook's markdown: `papermill notebooks/x.ipynb out.ipynb -f params/...yaml`.
_REPRODUCE = re.compile(r"(papermill\s+\S*?(?P<nb>[\w.-]+)\.ipynb\s+\S+\s+-f\s+)(?P<file>[^\s`'\"<>]+)")


def report_identity(executed_notebook: Path, *, params_file: Path | None = None,
                    record_dir: Path | None = None) -> dict[str, Any]:
    """What a report is: run name, notebook, model, few-shot count (when it has one) and the
    parameter file it ran with, from the run.json record and results.json of `record_dir`, then
    the parameters papermill stored in the executed notebook."""
    import nbformat

    nb = nbformat.read(executed_notebook, as_version=4)
    params = dict(nb.metadata.get("papermill", {}).get("parameters") or {})
    record: dict[str, Any] = {}
    results: dict[str, Any] = {}
    if record_dir is not None:
        from evekit.report import RUN_RECORD

        for name, target in ((RUN_RECORD, record), ("results.json", results)):
            try:
                target.update(json.loads((Path(record_dir) / name).read_text()))
            except (OSError, ValueError):
                pass
    res_params = results.get("params") or {}
    notebook = record.get("notebook") or (notebook_name(params_file) if params_file else executed_notebook.stem)
    fewshot = res_params.get("num_fewshot", params.get("num_fewshot"))
    model = results.get("model") or params.get("model_name")
    if record.get("kind") == "win_rate":
        model = " vs ".join(str(m) for m in (params.get("model_a"), params.get("model_b")) if m) or model
    if record.get("kind") == "judge_validation":  # judges measured, no model: name the judges
        model = f"{record.get('judge_kind', '')} judges {', '.join(record.get('judges') or [])}".strip()
    elif record.get("kind") == "ranking":
        model = ", ".join(str(m) for m in record.get("models") or []) or model
    return {"run_name": record.get("run_name") or params.get("run_name"), "notebook": notebook,
            "kind": record.get("kind"), "model": model,
            "num_fewshot": fewshot if isinstance(fewshot, int) and record.get("kind") != "summary" else None,
            "params_file": display_path(params_file) if params_file is not None else None}


def report_title(identity: dict[str, Any]) -> str:
    """'demo-5shot · open_ended · smollm2-135m-instruct · 5-shot'."""
    parts = [identity.get("run_name"), identity.get("notebook"), identity.get("model")]
    if identity.get("num_fewshot") is not None:
        parts.append(f"{identity['num_fewshot']}-shot")
    return " · ".join(str(p) for p in parts if p)


def render_html(executed_notebook: Path, html_path: Path, *, params_file: Path | None = None,
                record_dir: Path | None = None) -> None:
    """The executed notebook as HTML without code cells (what readers of the report need).

    A header names the run, notebook, model and few-shot count, and how to reproduce it with the
    parameter file it really ran with; reproduce lines in the notebook's own text are corrected
    to that file (the notebook's text names its default parameter file).
    """
    import nbformat
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_markdown_cell

    nb = nbformat.read(executed_notebook, as_version=4)
    identity = report_identity(executed_notebook, params_file=params_file, record_dir=record_dir)
    title = report_title(identity) or html_path.parent.name
    lines = [f"# {title}", ""]
    facts = [f"run `{identity['run_name']}`" if identity.get("run_name") else None,
             f"notebook `{identity['notebook']}`",
             f"model `{identity['model']}`" if identity.get("model") else None,
             f"{identity['num_fewshot']}-shot" if identity.get("num_fewshot") is not None else None]
    lines.append(" · ".join(f for f in facts if f))
    if identity.get("params_file"):
        real = identity["params_file"]
        lines += ["", f"Reproduce: `papermill notebooks/{identity['notebook']}.ipynb out.ipynb -f {real}`"
                      + (" (with `evekit serve` running and `EVEKIT_SERVER_URL` exported, or "
                         f"`evekit run --serve {real}`)" if "demo" in Path(real).parts else "")]
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = _REPRODUCE.sub(
                    lambda m: m.group(1) + real if m.group("nb") == identity["notebook"] else m.group(0), cell.source)
    nb.cells.insert(0, new_markdown_cell("\n".join(lines)))
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(body, encoding="utf-8")


def warm_html_exporter() -> threading.Thread:
    """Import nbconvert and render one empty notebook in a background thread: the first report
    costs about 2.5 s of imports and template loading, which this moves off the first notebook's
    way (the thread runs while the first kernels start)."""
    def warm() -> None:
        from nbconvert import HTMLExporter
        from nbformat.v4 import new_notebook

        HTMLExporter(exclude_input=True).from_notebook_node(new_notebook())

    thread = threading.Thread(target=warm, name="evekit-warm-html", daemon=True)
    thread.start()
    return thread


PROGRESS_EVERY = 30.0  # seconds between the progress lines of a running notebook

# What the kernel process writes to its stderr that says nothing to the user of `evekit run`: the
# transport warning (the kernel listens on loopback only) and the shutdown noise.
KERNEL_NOISE = ("Kernel is running over TCP without encryption", "KeyboardInterrupt caught in kernel")


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
            last = notebook_progress(self.executed) or last
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
            from evekit.kernels import ForkedKernelProcess

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


def run_one(params_file: Path, notebooks_dir: Path, server_url: str | None,
            output_dir: str | None, html: bool,
            progress_every: float = PROGRESS_EVERY, prefix: str = "",
            env: dict[str, str] | None = None, kernel_server: Any = None) -> tuple[bool, list[Path], Path]:
    """Execute one parameter file; (passed, folders its save steps wrote, run folder).

    `prefix` starts every line this prints (the batch's parallel mode names the notebook there);
    `env` is added to the kernel's environment; `kernel_server` (`evekit.kernels.KernelServer`)
    forks the kernel instead of starting a new interpreter.
    """
    import papermill as pm

    from evekit.report import EXECUTION_ENV, RUN_RECORD

    name = notebook_name(params_file)
    notebook = notebooks_dir / f"{name}.ipynb"
    if not notebook.exists():
        raise FileNotFoundError(f"{params_file}: no notebook {notebook}")
    params = load_params(params_file, server_url)
    if output_dir is not None:
        params["output_dir"] = output_dir
    defaults = notebook_defaults(notebook)
    out_root = Path(params.get("output_dir", defaults.get("output_dir", "outputs")))
    out_root = out_root if out_root.is_absolute() else REPO_ROOT / out_root
    run_name = str(params.get("run_name", defaults.get("run_name", "demo")))
    executed = out_root / run_name / "notebooks" / f"{params_file.stem}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    ok = True
    # The kernel gets this environment variable; the records its save steps write carry it.
    execution = f"{params_file.stem}-{uuid.uuid4().hex[:12]}"
    kernel_env = {**(env or {}), EXECUTION_ENV: execution}
    fd, kernel_stderr = tempfile.mkstemp(prefix="evekit-kernel-", suffix=".stderr")
    os.close(fd)
    try:
        with ProgressReporter(params_file.stem, executed, progress_every, prefix):
            pm.execute_notebook(str(notebook), str(executed), parameters=params, cwd=str(REPO_ROOT),
                                kernel_name="python3", progress_bar=False, log_output=False,
                                kernel_manager_class=_quiet_kernel_manager(kernel_stderr, kernel_env,
                                                                           kernel_server))
    except Exception as exc:  # papermill has written the notebook with its error banner
        ok = False
        message = str(exc).strip().splitlines()
        print(f"{prefix}  FAILED: {notebook.name} with {params_file}: {message[-1] if message else exc!r}",
              file=sys.stderr)
    finally:
        with open(kernel_stderr, encoding="utf-8", errors="replace") as stream:
            forward_kernel_stderr(stream.read(), prefix=prefix)
        os.unlink(kernel_stderr)
    dirs = saved_output_dirs(out_root, execution)
    if ok and not dirs:
        print(f"{prefix}  note: {notebook.name} with {params_file} saved no outputs (no {RUN_RECORD} was written "
              f"under {display_path(out_root)}); its report goes to {display_path(out_root / run_name / 'failed')}",
              file=sys.stderr)
    if html and executed.exists():
        targets = dirs or [out_root / run_name / "failed" / params_file.stem]
        for d in targets:
            render_html(executed, d / "report.html", params_file=params_file, record_dir=d if dirs else None)
    return ok, dirs, out_root / run_name


def endpoint_limits(files: list[Path], notebooks_dir: Path, server_url: str | None) -> dict[str, int]:
    """{endpoint: limit} over every run of the batch: the smallest `concurrency` any run sets for an
    endpoint (a judge entry's own `concurrency`, else its run's). Offline runs send nothing and
    count for no endpoint; a base_url that is not an http(s) URL is left to the notebook to report."""
    from evekit.endpoints import endpoint_key, merge_limits

    pairs: list[tuple[str, int]] = []
    for f in files:
        run = {**notebook_defaults(notebooks_dir / f"{notebook_name(f)}.ipynb"), **load_params(f, server_url)}
        concurrency = run.get("concurrency")
        if run.get("offline") or not isinstance(concurrency, int):
            continue
        urls = [(run.get("base_url"), concurrency)]
        for judge in run.get("judges") or []:
            if isinstance(judge, dict):
                urls.append((judge.get("base_url"), judge.get("concurrency") or concurrency))
        for url, limit in urls:
            if not isinstance(url, str) or not isinstance(limit, int) or limit < 1:
                continue
            url = os.path.expandvars(url)
            try:
                endpoint_key(url)
            except ValueError:
                continue
            pairs.append((url, limit))
    return merge_limits(pairs)


def check_param_files(files: list[Path], notebooks_dir: Path) -> list[str]:
    """Every problem that would stop a parameter file, found before anything runs: a missing
    file, a notebook that does not exist, YAML that is not a mapping, an unknown parameter name."""
    import papermill as pm

    from evekit.errors import unknown_names

    notebooks = sorted(p.stem for p in notebooks_dir.glob("*.ipynb"))
    problems = []
    for f in files:
        if not f.is_file():
            problems.append(f"{f}: no such file")
            continue
        name = notebook_name(f)
        if name not in notebooks:
            problems.append(f"{f}: no notebook {name!r} (a parameter file is named <notebook>[.<variant>].yaml; "
                            f"notebooks: {', '.join(notebooks)})")
            continue
        try:
            params = load_params(f, server_url="http://server.invalid")  # only the names matter here
        except (ValueError, yaml.YAMLError) as exc:
            problems.append(f"{f}: {exc}")
            continue
        known = pm.inspect_notebook(str(notebooks_dir / f"{name}.ipynb"))
        problem = unknown_names(params, known)
        if problem:
            problems.append(f"{f}: notebook {name}: {problem}")
    return problems


def _run_file(f: Path, nb_dir: Path, server_url: str | None, output_dir: str | None, html: bool,
              progress_every: float, env: dict[str, str], prefix: str,
              kernel_server: Any = None) -> tuple[bool, Path | None, list[Path]]:
    """One parameter file with its log lines: (passed, run folder, folders its save steps wrote)."""
    t0 = time.monotonic()
    print(f"{prefix}running {notebook_name(f)} with {f} ...", flush=True)
    run_dir = None
    try:
        ok, dirs, run_dir = run_one(f, nb_dir, server_url, output_dir, html, progress_every, prefix, env,
                                    kernel_server)
    except Exception as exc:
        ok, dirs = False, []
        print(f"{prefix}  FAILED: {f}: {exc}", file=sys.stderr)
        tb = traceback.format_exc().rstrip().splitlines()
        print("\n".join(f"{prefix}{line}" for line in tb), file=sys.stderr)
    for d in dirs:
        print(f"{prefix}  -> {d}", flush=True)
    print(f"{prefix}  {'ok' if ok else 'FAILED'} in {time.monotonic() - t0:.1f} s", flush=True)
    return ok, run_dir, dirs


# Notebooks that read every result under the output folder, not files named in their parameters.
READS_EVERYTHING = {"summary"}


def inputs_of(run: dict[str, Any]) -> list[Path]:
    """The files a run reads that another run of the batch may write: its judge-validation results
    and its models' answer files (win rate, ranking), as the notebook (cwd: the repo) resolves them."""
    named = [run.get("judge_validation")] + [m.get("file") for m in run.get("models") or [] if isinstance(m, dict)]
    paths = [Path(os.path.expandvars(p)).expanduser() for p in named if isinstance(p, str) and p]
    return [p if p.is_absolute() else REPO_ROOT / p for p in paths]


class Needs:
    """What one file of a batch waits for: it may start once every file of an earlier phase
    (`earlier`) has finished, or sooner, once every file it reads (`inputs`) lies in a folder that
    a finished file of `earlier` wrote. A task that reads nothing (no `judge_validation`) waits for
    nothing; the summary (`READS_EVERYTHING`) waits for everything before it."""

    def __init__(self, earlier: list[Path], inputs: list[Path] | None) -> None:
        self.earlier, self.inputs = earlier, inputs

    def met(self, finished: dict[Path, list[Path]]) -> bool:
        if all(e in finished for e in self.earlier):
            return True
        if not self.inputs:  # reads everything, or names nothing: only the whole earlier phase will do
            return False
        written = [d.resolve() for e in self.earlier for d in finished.get(e, [])]
        return all(any(p.resolve().is_relative_to(d) for d in written) for p in self.inputs)


def waits_for(files: list[Path], nb_dir: Path, server_url: str | None) -> dict[Path, Needs]:
    """`Needs` of every file of the batch (`PHASES` order, narrowed by what each file reads)."""
    needs: dict[Path, Needs] = {}
    for f in files:
        name = notebook_name(f)
        earlier = [g for g in files if phase_of(g) < phase_of(f)]
        run = {**notebook_defaults(nb_dir / f"{name}.ipynb"), **load_params(f, server_url)}
        inputs = None if name in READS_EVERYTHING else inputs_of(run)
        if phase_of(f) == TASK_PHASE and not inputs:
            earlier = []  # a task reads nothing the batch writes
        needs[f] = Needs(earlier, inputs)
    return needs


def _start_priority(f: Path) -> int:
    phase = phase_of(f)
    return 0 if phase < TASK_PHASE else 1 if phase > TASK_PHASE else 2


def _run_scheduled(files: list[Path], needs: dict[Path, Needs], jobs: int,
                   run: Any) -> list[tuple[Path, bool, Path | None]]:
    """Run `files` (in `run_order`), `jobs` at a time, each once its `Needs` are met by the files
    finished so far (passed or not); results in the order of `files`. `run(file, prefix)` returns
    (passed, run folder, folders written).

    With more than one job each line a notebook's run prints starts with `[<file stem>] `.
    Threads suffice: each notebook's work happens in its own kernel process. An interrupt
    (Ctrl-C, SIGTERM) kills the running notebooks' kernels, so it does not wait for them.
    """
    if jobs == 1 or len(files) == 1:
        return [(f, *run(f, "")[:2]) for f in files]
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    width = max(len(f.stem) for f in files)
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(files)), thread_name_prefix="evekit-run")
    pending: list[Path] = list(files)
    running: dict[Any, Path] = {}
    done: dict[Path, tuple[bool, Path | None, list[Path]]] = {}
    try:
        while pending or running:
            written = {f: r[2] for f, r in done.items()}
            # What others wait for first: judge validation, then a win rate or ranking that may
            # start (the summary waits for them), then the tasks in the given order.
            for f in sorted((f for f in pending if needs[f].met(written)), key=_start_priority):
                if len(running) >= jobs:
                    break
                pending.remove(f)
                running[pool.submit(run, f, f"[{f.stem}]".ljust(width + 3))] = f
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done[running.pop(future)] = future.result()
        return [(f, *done[f][:2]) for f in files]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        n = stop_kernels()
        if n:
            print(f"evekit run: interrupted; stopped {n} running notebook kernel(s)", file=sys.stderr, flush=True)
        raise
    finally:
        pool.shutdown(wait=True)


def _start_kernel_server(fresh: bool) -> Any:
    """The batch's warm kernel server, or None (asked not to, not POSIX, or it failed: kernels then
    start the usual way, which is slower but the same)."""
    from evekit.kernels import KernelServer, fresh_kernels_requested

    if fresh or fresh_kernels_requested() or not hasattr(os, "fork"):
        return None
    try:
        return KernelServer()
    except (OSError, RuntimeError) as exc:
        print(f"evekit run: note: kernels start without the warm kernel server ({exc})", file=sys.stderr)
        return None


def run_batch(param_files: list[str], *, serve: bool = False, output_dir: str | None = None,
              html: bool = True, notebooks_dir: str | None = None,
              progress_every: float = PROGRESS_EVERY, jobs: int = 1, fresh_kernels: bool = False) -> int:
    """Run every parameter file; return a process exit code (0 only when all notebooks passed).

    `jobs`: at most this many notebooks at the same time, each once the notebooks it waits for
    (`waits_for`) have finished. Kernels are forked from a warm kernel server (`evekit.kernels`)
    unless `fresh_kernels` (or EVEKIT_FRESH_KERNELS=1) asks for a new interpreter each.
    """
    import shutil

    from evekit.endpoints import limit_environment
    from evekit.report import write_index

    if int(jobs) < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    files = run_order([Path(p) for p in param_files])
    nb_dir = Path(notebooks_dir) if notebooks_dir else REPO_ROOT / "notebooks"
    problems = check_param_files(files, nb_dir)
    if problems:
        for problem in problems:
            print(f"evekit run: {problem}", file=sys.stderr)
        print(f"evekit run: nothing was run ({len(problems)} problem(s) in the parameter files)", file=sys.stderr)
        return 2
    server = None
    failed: list[str] = []
    run_dirs: set[Path] = set()
    started = time.monotonic()
    slots_dir = None
    kernel_server = None
    try:
        # Its imports overlap the embedded server's start. One notebook gains nothing from it.
        kernel_server = _start_kernel_server(fresh_kernels) if len(files) > 1 else None
        if html:
            warm_html_exporter()
        server_url = None
        if serve:
            from evekit.server import EmbeddedServer, ServerError

            server = EmbeddedServer()
            try:
                server.start()
            except ServerError as exc:
                print(f"evekit run: {exc}", file=sys.stderr)
                return 1
            server_url = server.base_url
            os.environ["EVEKIT_SERVER_URL"] = server_url
            print(f"embedded model {server.model} at {server_url}", flush=True)
        limits = endpoint_limits(files, nb_dir, server_url)
        env: dict[str, str] = {}
        if limits:
            slots_dir = Path(tempfile.mkdtemp(prefix="evekit-slots-"))
            env = limit_environment(limits, slots_dir)
            print("calls in flight at most: " + ", ".join(f"{n} to {url}" for url, n in sorted(limits.items())),
                  flush=True)

        def run(f: Path, prefix: str) -> tuple[bool, Path | None, list[Path]]:
            return _run_file(f, nb_dir, server_url, output_dir, html, progress_every, env, prefix, kernel_server)

        for f, ok, run_dir in _run_scheduled(files, waits_for(files, nb_dir, server_url), int(jobs), run):
            if run_dir is not None:
                run_dirs.add(run_dir)
            if not ok:
                failed.append(str(f))
    finally:
        if kernel_server is not None:
            kernel_server.close()
        if server is not None:
            server.stop()
            print("embedded server stopped", flush=True)
        if slots_dir is not None:
            shutil.rmtree(slots_dir, ignore_errors=True)
    for run_dir in sorted(run_dirs):
        index = write_index(run_dir, batch_runs=sorted(run_dirs))
        print(f"index: {index}")
    print(f"{len(files) - len(failed)} of {len(files)} notebooks passed in "
          f"{time.monotonic() - started:.0f} s")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0
