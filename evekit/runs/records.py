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
           "update_run_record", "find_run_records", "calls_outcome", "all_calls_failed", "ATTEMPTS_DIR", "fingerprint",
           "write_attempt", "read_attempts", "stale_reason", "stale_reasons"]

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


def calls_outcome(what: str, n: int, failed: int | None = None, errors: Any = ()) -> dict[str, Any]:
    """One group of a run's model calls for run.json's `calls` (a list of these): `what` they were
    ("model calls", "judge calls"), how many calls were needed (`n`), how many got no answer at all
    (`failed`: an HTTP error, a timeout, an endpoint that stopped answering; None: counted from
    `errors` as the judges word them, so a reply that came but held no verdict is not a failed
    call), and the first such error (the reason to show when every one failed)."""
    errors = [str(e) for e in errors if e is not None and str(e) and str(e) != "nan"]
    if failed is None:
        errors = [e for e in errors if _is_call_failure(e)]
        failed = len(errors)
    return {"what": what, "n": int(n), "failed": int(failed), "error": errors[0] if errors else None}


def _is_call_failure(error: str) -> bool:
    from evekit.judges.verdicts import abstention_reason

    return abstention_reason(error) in ("call failed", "judge endpoint unusable")


def all_calls_failed(record: RunRecord) -> str | None:
    """Why the run has no result at all when every call of one of its groups failed ("every model
    call failed (12 of 12 items): HTTP 500 from ..."), else None. Such a run shows no score: `evekit
    run` exits non-zero and the index marks it."""
    for group in record.details.get("calls") or []:
        try:
            n, failed = int(group.get("n") or 0), int(group.get("failed") or 0)
        except (TypeError, ValueError, AttributeError):
            continue
        if n > 0 and failed >= n:
            what = str(group.get("what") or "calls")
            error = group.get("error")
            return f"every one of its {what} failed ({failed} of {n})" + (f": {error}" if error else "")
    return None


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


# -- attempts and stale results --------------------------------------------------------------------
# `evekit run` leaves, per parameter file, a record of its latest attempt in the run folder
# (`<run folder>/.evekit-attempts/<file stem>.json`): the execution id, passed or failed, when, and a
# fingerprint of each input file it read (the parameter file, a local dataset, answers files, labels).
# A result whose execution is not its file's latest attempt, or whose inputs changed since, is stale:
# the index and the summary say so beside its number.
ATTEMPTS_DIR = ".evekit-attempts"
_HASH_LIMIT = 64 * 1024 * 1024  # larger inputs are fingerprinted by size and modification time


def fingerprint(path: Path) -> str | None:
    """The content of a file as a short string (sha256, or size and mtime for a file above 64 MB);
    None when it cannot be read."""
    import hashlib

    try:
        st = Path(path).stat()
        if st.st_size > _HASH_LIMIT:
            return f"size={st.st_size},mtime={st.st_mtime_ns}"
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _stem_of(execution: str | None) -> str | None:
    return execution.rsplit("-", 1)[0] if execution and "-" in execution else None


def write_attempt(run_dir: Path, stem: str, *, execution: str, status: str, params_file: Path,
                  inputs: dict[str, str | None], started: str, dirs: list[Path] = (), reason: str | None = None
                  ) -> Path:
    """Record the latest attempt of parameter file `stem` in `run_dir` (see above)."""
    record = {"execution": execution, "status": status, "params_file": str(params_file), "started": started,
              "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "inputs": inputs,
              "dirs": [display_path(d) for d in dirs], "reason": reason}
    path = Path(run_dir) / ATTEMPTS_DIR / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(json_safe(record), indent=2, ensure_ascii=False) + "\n")


def read_attempts(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The latest attempt of each parameter file of `run_dir` (by file stem); unreadable ones left out."""
    out = {}
    for path in sorted((Path(run_dir) / ATTEMPTS_DIR).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[path.stem] = data
    return out


def stale_reason(record: RunRecord, attempts: dict[str, dict[str, Any]]) -> str | None:
    """Why `record`'s result is no longer what its parameter file gives ("stale: from <time>; ..."),
    or None when it is current (or was not written by `evekit run`)."""
    stem = _stem_of(record.execution)
    attempt = attempts.get(stem) if stem else None
    if not attempt:
        return None
    source = Path(str(attempt.get("params_file") or stem)).name
    if attempt.get("execution") != record.execution:
        when = attempt.get("finished") or "later"
        if attempt.get("status") == "passed":
            return (f"stale: from {record.created}, other parameters; the latest run of {source} ({when}) "
                    "did not write this folder")
        why = f": {attempt['reason']}" if attempt.get("reason") else ""
        return f"stale: from {record.created}, other parameters; the latest run of {source} ({when}) failed{why}"
    if attempt.get("status") != "passed":
        why = f": {attempt['reason']}" if attempt.get("reason") else ""
        return f"incomplete: the run of {source} that wrote this ({attempt.get('finished')}) failed{why}"
    changed = [Path(p).name for p, print_ in (attempt.get("inputs") or {}).items() if fingerprint(Path(p)) != print_]
    if changed:
        return f"stale: from {record.created}; changed since: {', '.join(sorted(changed))}"
    return None


def stale_reasons(run_dir: Path, records: list[RunRecord]) -> dict[Path, str]:
    """`stale_reason` of each record of `run_dir` that is stale, by its folder."""
    attempts = read_attempts(run_dir)
    if not attempts:
        return {}
    out = {}
    for record in records:
        why = stale_reason(record, attempts)
        if why:
            out[record.dir] = why
    return out
