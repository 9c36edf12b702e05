"""Tracking a notebook run's output folder: what its kind logs (`RunKind.track`), sent to the tracker
of its `tracking` parameter (`evekit.tracking`), and where it went written into its run.json.

The notebook's save step calls `track_folder` when the notebook runs on its own (JupyterLab,
papermill by hand); under `evekit run` the batch runner does, after report.html is written, so the
report is logged too and its header names the tracker run (`open_tracking`, render, `finish_tracking`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evekit.paths import output_path, safe_name
from evekit.runs.kind import RunKind
from evekit.runs.records import RUN_RECORD, RunRecord, read_run_record, update_run_record
from evekit.tracking import Tracked, TrackerRun, TrackingConfig, folder_images, read_json

__all__ = ["BATCH_ENV", "batch_group", "tracked_of", "open_tracking", "finish_tracking", "track_folder",
           "recorded_tracking", "output_root"]

# The batch a run belongs to: its tracker runs share a W&B group and the MLflow tag `evekit.batch`.
# `evekit run` sets it (unless it is set already) for its kernels and itself.
BATCH_ENV = "EVEKIT_BATCH"


def batch_group() -> str | None:
    return os.environ.get(BATCH_ENV) or None


def _params(record: RunRecord) -> dict[str, Any]:
    """The run's public parameter record (results.json's or metrics.json's `params`), {} when none."""
    for name in ("results.json", "metrics.json"):
        params = read_json(record.dir / name).get("params")
        if isinstance(params, dict):
            return params
    return {}


def recorded_tracking(record: RunRecord) -> dict[str, Any] | None:
    """The `tracking` parameter the run was made with (its public record), None when it had none."""
    value = _params(record).get("tracking")
    return value if isinstance(value, dict) and value.get("backend") else None


def output_root(record: RunRecord) -> Path:
    """The run's `output_dir` (where a local MLflow store and W&B's files go, as when it ran): its
    recorded `output_dir` when the folder is under it, else the folder above its run name's (a run
    moved elsewhere), else the folder's parent."""
    folder = record.dir.resolve()
    recorded = _params(record).get("output_dir")
    if isinstance(recorded, str) and recorded:
        root = output_path(recorded).resolve()
        if root in folder.parents:
            return root
    parts = folder.parts
    run = safe_name(record.run_name)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == run:
            return Path(*parts[:i])
    return folder.parent


def _label(record: RunRecord) -> str:
    """The folder from the run's name down: `demo/smollm2-135m-instruct/open_ended`."""
    parts = record.dir.parts
    run = safe_name(record.run_name)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == run:
            return "/".join(parts[i:])
    return record.dir.name


def tracked_of(record: RunRecord, kind: RunKind, sample_count: int) -> Tracked:
    """What one folder logs: its kind's `track`, with the parameters (results.json's or metrics.json's
    public record), the plots, a label and evekit's tags filled in where the kind left them out."""
    tracked = kind.track(record, sample_count) if kind.track is not None else Tracked(folder=record.dir)
    if not tracked.params:
        tracked.params = _params(record)
    if not tracked.images:
        tracked.images = folder_images(record.dir)
    tracked.label = tracked.label or _label(record)
    tracked.tags = {"evekit.kind": kind.name, "evekit.run_name": record.run_name, **tracked.tags}
    return tracked


def open_tracking(folder: Path, kind: RunKind, cfg: TrackingConfig, *, out_root: Path,
                  group: str | None = None) -> TrackerRun:
    """Open the folder's tracker run and record it (status "logging", or "replay" / "failed") in run.json."""
    folder = Path(folder)
    try:
        record = read_run_record(folder / RUN_RECORD)
        tracked = tracked_of(record, kind, cfg.sample_count)
    except Exception as exc:  # noqa: BLE001 - unreadable files fail the tracking, never the run
        session = TrackerRun.failed(Tracked(folder=folder), cfg, exc)
    else:
        session = TrackerRun.open(tracked, cfg, out_root=out_root, group=group)
    update_run_record(folder, tracking=session.status)
    return session


def finish_tracking(folder: Path, session: TrackerRun, report: Path | None = None) -> dict[str, Any]:
    """Log what is left (report.html too when it is there), close the run, record the final status."""
    status = session.finish(report)
    update_run_record(folder, tracking=status)
    return status


def track_folder(folder: Path, kind: RunKind, cfg: TrackingConfig, *, out_root: Path,
                 group: str | None = None) -> dict[str, Any]:
    """`open_tracking` then `finish_tracking`: the status recorded in run.json."""
    folder = Path(folder)
    return finish_tracking(folder, open_tracking(folder, kind, cfg, out_root=out_root, group=group),
                           folder / "report.html")
