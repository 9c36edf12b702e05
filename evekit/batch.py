"""Batch runs: papermill over YAML parameter files, HTML reports, and the run index.

A parameter file is named `<notebook>[.<variant>].yaml`: `open_ended.yaml` and
`open_ended.5shot.yaml` both run `notebooks/open_ended.ipynb`. Task notebooks run first, then
`win_rate`, then `summary`, so the later ones find the earlier results. With `serve=True` the
embedded model server is started first and `${EVEKIT_SERVER_URL}` in the YAML becomes its URL;
the server is stopped even when a notebook fails.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import yaml

from evekit.paths import REPO_ROOT, display_path

SERVER_URL_PLACEHOLDER = "${EVEKIT_SERVER_URL}"
LAST = ("win_rate", "summary")


def notebook_name(params_file: Path) -> str:
    return params_file.name.split(".")[0]


def run_order(files: list[Path]) -> list[Path]:
    """Task notebooks first (in the order given), then win_rate, then summary."""
    def rank(f: Path) -> int:
        name = notebook_name(f)
        return LAST.index(name) + 1 if name in LAST else 0
    return sorted(files, key=rank)


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


def render_html(executed_notebook: Path, html_path: Path) -> None:
    """The executed notebook as HTML without code cells (what readers of the report need)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(executed_notebook, as_version=4)
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": html_path.parent.name}})
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(body, encoding="utf-8")


def run_one(params_file: Path, notebooks_dir: Path, server_url: str | None,
            output_dir: str | None, html: bool) -> tuple[bool, list[Path], Path]:
    """Execute one parameter file; (passed, folders its save steps wrote, run folder)."""
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
    # The kernel inherits this environment variable; the records its save steps write carry it.
    execution = f"{params_file.stem}-{uuid.uuid4().hex[:12]}"
    previous = os.environ.get(EXECUTION_ENV)
    os.environ[EXECUTION_ENV] = execution
    try:
        pm.execute_notebook(str(notebook), str(executed), parameters=params, cwd=str(REPO_ROOT),
                            kernel_name="python3", progress_bar=False, log_output=False)
    except Exception as exc:  # papermill has written the notebook with its error banner
        ok = False
        message = str(exc).strip().splitlines()
        print(f"  FAILED: {notebook.name} with {params_file}: {message[-1] if message else exc!r}",
              file=sys.stderr)
    finally:
        if previous is None:
            os.environ.pop(EXECUTION_ENV, None)
        else:
            os.environ[EXECUTION_ENV] = previous
    dirs = saved_output_dirs(out_root, execution)
    if ok and not dirs:
        print(f"  note: {notebook.name} with {params_file} saved no outputs (no {RUN_RECORD} was written "
              f"under {display_path(out_root)}); its report goes to {display_path(out_root / run_name / 'failed')}",
              file=sys.stderr)
    if html and executed.exists():
        targets = dirs or [out_root / run_name / "failed" / params_file.stem]
        for d in targets:
            render_html(executed, d / "report.html")
    return ok, dirs, out_root / run_name


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


def run_batch(param_files: list[str], *, serve: bool = False, output_dir: str | None = None,
              html: bool = True, notebooks_dir: str | None = None) -> int:
    """Run every parameter file; return a process exit code (0 only when all notebooks passed)."""
    from evekit.report import write_index

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
    try:
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
        for f in files:
            t0 = time.monotonic()
            print(f"running {notebook_name(f)} with {f} ...", flush=True)
            try:
                ok, dirs, run_dir = run_one(f, nb_dir, server_url, output_dir, html)
                run_dirs.add(run_dir)
            except Exception as exc:
                ok, dirs = False, []
                print(f"  FAILED: {f}: {exc}", file=sys.stderr)
                traceback.print_exc()
            for d in dirs:
                print(f"  -> {d}", flush=True)
            print(f"  {'ok' if ok else 'FAILED'} in {time.monotonic() - t0:.1f} s", flush=True)
            if not ok:
                failed.append(str(f))
    finally:
        if server is not None:
            server.stop()
            print("embedded server stopped", flush=True)
    for run_dir in sorted(run_dirs):
        index = write_index(run_dir)
        print(f"index: {index}")
    print(f"{len(files) - len(failed)} of {len(files)} notebooks passed in "
          f"{time.monotonic() - started:.0f} s")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0
