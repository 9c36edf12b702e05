"""run.json: the machine-readable record each notebook's save step leaves next to its outputs.

`evekit run` finds what an execution wrote by reading these records (never printed text); the
index and the summary list runs from them. A record names its kind (`evekit.runs.kind.RunKind`),
the notebook, the run name and the files written.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import evekit
from evekit.paths import display_path
from evekit.report import json_safe, write_text_atomic
from evekit.runs.kind import RunKind

__all__ = ["RUN_RECORD", "RUN_RECORD_SCHEMA", "EXECUTION_ENV", "RunRecord", "write_run_record", "read_run_record",
           "update_run_record", "find_run_records"]

RUN_RECORD = "run.json"
RUN_RECORD_SCHEMA = "evekit.run/1"
# Set by the batch runner around one papermill execution; the kernel inherits it, so each record
# says which execution wrote it and the runner finds exactly that execution's outputs.
EXECUTION_ENV = "EVEKIT_EXECUTION"


@dataclass(frozen=True)
class RunRecord:
    """One `run.json`: what a notebook's save step wrote, and where (`dir` is the folder it sits in)."""

    dir: Path
    kind: str
    notebook: str
    run_name: str
    files: tuple[str, ...]
    created: str
    execution: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def write_run_record(out_dir: Path, *, kind: RunKind, notebook: str, run_name: str,
                     files: list[str] | None = None, **details: Any) -> Path:
    """Write `<out_dir>/run.json`, the machine-readable hand-off of a notebook's save step.

    `files` are the names written into `out_dir` (None: every file there now, except run.json and
    report.html, which the batch runner adds later). `details` are extra fields (task, model, ...).
    """
    if not isinstance(kind, RunKind):
        raise TypeError(f"kind must be a RunKind (evekit.runs.registry), got {kind!r}")
    out_dir = Path(out_dir)
    if files is None:
        files = sorted(p.name for p in out_dir.iterdir() if p.is_file() and p.name not in (RUN_RECORD, "report.html"))
    record = {
        "schema": RUN_RECORD_SCHEMA,
        "kind": kind.name,
        "notebook": notebook,
        "run_name": run_name,
        "output_dir": display_path(out_dir),
        "files": list(files),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "execution": os.environ.get(EXECUTION_ENV),
        "evekit_version": evekit.__version__,
        **json_safe(details),
    }
    path = out_dir / RUN_RECORD
    write_text_atomic(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return path


def update_run_record(out_dir: Path, **fields: Any) -> Path:
    """Set `fields` in `<out_dir>/run.json` (e.g. `tracking`: where the run was logged), the rest as it was."""
    path = Path(out_dir) / RUN_RECORD
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(json_safe(fields))
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path


def read_run_record(path: Path) -> RunRecord:
    """Parse one run.json; ValueError names the file when it is not a record."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        core = {k: data.pop(k) for k in ("kind", "notebook", "run_name", "files", "created")}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not an evekit run record ({exc})") from None
    data.pop("schema", None)
    data.pop("output_dir", None)  # informational: the folder is where the file is (runs can be moved)
    return RunRecord(dir=path.parent, files=tuple(core.pop("files")), execution=data.pop("execution", None),
                     details=data, **core)


def find_run_records(root: Path, *, execution: str | None = None) -> tuple[list[RunRecord], list[Path]]:
    """Every run.json under `root` (only those of `execution` when given), sorted by folder.

    Returns (records, unreadable files) so a caller can list a broken record instead of failing.
    """
    records, unreadable = [], []
    for path in sorted(Path(root).rglob(RUN_RECORD)):
        try:
            record = read_run_record(path)
        except ValueError:
            unreadable.append(path)
            continue
        if execution is None or record.execution == execution:
            records.append(record)
    return records, unreadable
