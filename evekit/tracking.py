"""Experiment tracking: one MLflow or Weights & Biases run per notebook run, from the run's own files.

The `tracking` parameter of every notebook kind (`TrackingConfig`) says where: MLflow (a tracking
server, `MLFLOW_TRACKING_URI`, else a local SQLite store `<output_dir>/mlruns/mlflow.db`) or W&B (in
offline mode unless `WANDB_MODE` says otherwise; its files under `uri`, `WANDB_DIR` or `<output_dir>`,
for a later `wandb sync`). EVE's `wandb:` block maps onto it unchanged (`TrackingConfig.from_eve_wandb`).

What one run logs is a `Tracked`, which each notebook kind builds from the files its save step wrote
(`RunKind.track`): the parameters (the public record of results.json: no secret, no key, no
environment value), metrics under flat names (`<task>/<metric>` with `_ci_low`, `_ci_high`, `_n`),
counts, usage, tables (the samples first, in EVE's column order), the plots as images, report.html and
the output folder as an artifact. `log_run` sends it. A tracker that fails (no extra installed, a
server down, bad credentials) is reported once and recorded in the status returned (run.json's
`tracking`, with the `evekit track FOLDER` command that logs the folder later); it never fails the
evaluation, and its HTTP calls are bounded in time (no retries, a short timeout). An online W&B that
fails is logged offline instead (status `fallback`), its files kept for `wandb sync`. A replay of a
run already logged (same fingerprint: parameters, metrics, tables; usage and timings left out) is not
logged again unless `log_replays`.

The tracker libraries are the optional extra `evekit[tracking]`, imported only when a run is tracked.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import urlsplit

import pandas as pd

from evekit.errors import EvekitError, ParameterError, unknown_names
from evekit.paths import display_path
from evekit.report import json_safe
from evekit.tasks import DESIGN_COLUMNS, GROUP_COLUMN, SAMPLE_COLUMNS

__all__ = ["BACKENDS", "LOG_KEYS", "EVE_LOG_KEYS", "INSTALL_HINT", "TrackingConfig", "TrackingError", "Tracked",
           "safe_key", "run_label", "metric_entries", "numbers", "samples_table", "read_table", "folder_images", "read_json", "fingerprint",
           "TrackerRun", "describe", "log_run", "retry_command", "default_mlflow_uri", "EVE_SAMPLE_COLUMNS"]

BACKENDS = ("mlflow", "wandb")
INSTALL_HINT = "pip install 'evekit[tracking]'"
DEFAULT_PROJECT = "evekit"
DEFAULT_SAMPLE_COUNT = 5  # EVE's `log.sample_count`: sample rationales logged
# What a tracker run can carry; each is on unless `log: {<key>: false}`.
LOG_KEYS = {
    "params": "the parameters (the public record: no secret)",
    "metrics": "every metric with its ci_low, ci_high and n",
    "counts": "items, unparsed, failed, truncated, abstained",
    "usage": "tokens, requests, cache hits, seconds",
    "baselines": "the constant baselines",
    "samples": "the per-item table (samples, battles, decisions, verdicts)",
    "tables": "the kind's summary tables (win rates, ratings, judge validation, leaderboard)",
    "plots": "the PNG plots as images",
    "report": "report.html",
    "folder": "the whole output folder as an artifact",
    "win_rates": "win rates and alpaca win rates",
    # Accepted so EVE's wandb blocks load unchanged, but nothing is logged under it.
    "accuracy_rates": "accepted from EVE's wandb block but logs nothing: evekit's win rate computes no per-model "
                      "accuracy rates (each model's task run logs its own accuracy)",
    "judge_agreement": "the judges' agreement",
    "position_bias": "the judges' position bias",
    "sample_rationales": "`sample_count` judged decisions with their rationales",
}
# EVE's `wandb.log` keys that name one of ours differently.
EVE_LOG_KEYS = {"visualizations": "plots", "raw_results": "samples"}
# The columns EVE's evalkit and lm-eval put first in a samples table.
EVE_SAMPLE_COLUMNS = ("doc_id", "doc.Topic", "doc.Question", "target", "filtered_resps")
# The samples columns that are neither scores nor EVE's (the task's bookkeeping and design columns),
# the judge columns that are detail (kept between the rationales and the failures) and the failures.
_FAILURE_COLUMNS = ("failed", "error")
_BOOKKEEPING_COLUMNS = frozenset({*SAMPLE_COLUMNS, GROUP_COLUMN, *DESIGN_COLUMNS})
_JUDGE_DETAIL_SUFFIXES = ("_raw", "_method", "_flag")
# Bounds on one tracker's network calls: a server that is down costs a refused connection, one that
# hangs at most this long per call; set MLFLOW_HTTP_REQUEST_TIMEOUT / _MAX_RETRIES to override.
HTTP_TIMEOUT_S = 10
WANDB_INIT_TIMEOUT_S = 30
MLFLOW_PARAM_MAX = 6000  # MLflow's longest parameter value
_LOCK = threading.Lock()  # one tracker call at a time in a process (SQLite stores, W&B's service)
_REPORTED: set[str] = set()  # failures already reported in this process: each is said once


class TrackingError(EvekitError, RuntimeError):
    """A tracker could not log: the extra is missing, the server is down, the credentials are bad."""


# ---------------------------------------------------------------------------------- configuration
def _check_str(where: str, value: Any, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(f"{where}={value!r} must be a non-empty string{' or None' if optional else ''}")
    return value


def _check_uri(uri: str | None) -> str | None:
    """A tracking URI with no credentials in it (they come from the tracker's own variables)."""
    if uri is None:
        return None
    parts = urlsplit(uri)
    if parts.username or parts.password:
        raise ParameterError("tracking.uri carries credentials; give them to the tracker through its own "
                             "environment variables (MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD / "
                             "MLFLOW_TRACKING_TOKEN, WANDB_API_KEY), never in a parameter")
    return uri


@dataclass(frozen=True)
class TrackingConfig:
    """Where a run is tracked and what is logged (the `tracking` parameter).

    `backend`: "mlflow" or "wandb". `uri`: MLflow's tracking URI (default `MLFLOW_TRACKING_URI`, else
    `sqlite:///<output_dir>/mlruns/mlflow.db`); for W&B the folder its `wandb/` files go to (default
    `WANDB_DIR`, else `<output_dir>`). `project`: the MLflow experiment or W&B project ("evekit").
    `entity`: the W&B entity. `run_name`: the tracker run's name (default: the output folder, e.g.
    `demo/smollm2-135m-instruct/open_ended`). `tags`: a list of strings or a mapping. `log`: which of
    `LOG_KEYS` to log (each on by default; EVE's `visualizations` and `raw_results` are accepted).
    `sample_count`: judged decisions logged with their rationales. `log_replays`: log a replay of a
    run already logged again. `notes`: a description of the run (W&B's run notes, MLflow's run
    description, the tag `mlflow.note.content`; EVE's `wandb.notes`).
    """

    backend: str
    uri: str | None = None
    project: str | None = None
    entity: str | None = None
    run_name: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    log: tuple[tuple[str, bool], ...] = ()
    sample_count: int = DEFAULT_SAMPLE_COUNT
    log_replays: bool = False
    notes: str | None = None

    FIELDS = ("backend", "uri", "project", "entity", "run_name", "tags", "log", "sample_count", "log_replays", "notes")

    @classmethod
    def from_param(cls, value: Any) -> "TrackingConfig | None":
        """The `tracking` parameter: None (off), a backend's name, or a mapping of `FIELDS`.
        ParameterError naming the field for anything else."""
        if value is None or value is False:
            return None
        if isinstance(value, TrackingConfig):
            return value
        if isinstance(value, str):
            value = {"backend": value}
        if not isinstance(value, Mapping):
            raise ParameterError(f"tracking={value!r} must be None, \"mlflow\", \"wandb\" or a mapping "
                                 f"{{{', '.join(cls.FIELDS)}}}")
        problem = unknown_names(list(value), cls.FIELDS, what="tracking field")
        if problem:
            raise ParameterError(problem)
        backend = value.get("backend")
        if backend not in BACKENDS:
            raise ParameterError(f"tracking.backend={backend!r} is not valid; use one of: {', '.join(BACKENDS)}")
        log = value.get("log") or {}
        if not isinstance(log, Mapping):
            raise ParameterError(f"tracking.log={log!r} must be a mapping of {', '.join(LOG_KEYS)} to true/false")
        log = dict(log)
        sample_count = value.get("sample_count", log.pop("sample_count", DEFAULT_SAMPLE_COUNT))
        known = [*LOG_KEYS, *EVE_LOG_KEYS]
        problem = unknown_names(list(log), known, what="tracking.log key")
        if problem:
            raise ParameterError(problem)
        switches: dict[str, bool] = {}
        for key, on in log.items():
            if not isinstance(on, bool):
                raise ParameterError(f"tracking.log.{key}={on!r} must be true or false")
            switches[EVE_LOG_KEYS.get(key, key)] = on
        if isinstance(sample_count, bool) or not isinstance(sample_count, int) or sample_count < 0:
            raise ParameterError(f"tracking.sample_count={sample_count!r} must be a whole number, 0 or more")
        tags = value.get("tags") or ()
        if isinstance(tags, Mapping):
            pairs = tuple((str(k), str(v)) for k, v in tags.items())
        elif isinstance(tags, (list, tuple)) and all(isinstance(t, str) and t for t in tags):
            pairs = tuple((t, "") for t in tags)
        else:
            raise ParameterError(f"tracking.tags={tags!r} must be a list of strings or a mapping")
        replays = value.get("log_replays", False)
        if not isinstance(replays, bool):
            raise ParameterError(f"tracking.log_replays={replays!r} must be true or false")
        return cls(backend=backend, uri=_check_uri(_check_str("tracking.uri", value.get("uri"))),
                   project=_check_str("tracking.project", value.get("project")),
                   entity=_check_str("tracking.entity", value.get("entity")),
                   run_name=_check_str("tracking.run_name", value.get("run_name")),
                   tags=pairs, log=tuple(switches.items()), sample_count=sample_count, log_replays=replays,
                   notes=_check_str("tracking.notes", value.get("notes")))

    @classmethod
    def from_eve_wandb(cls, block: Mapping[str, Any] | None) -> "TrackingConfig | None":
        """EVE's `wandb: {enabled, project, entity, run_name, tags, notes, log: {win_rates, accuracy_rates,
        judge_agreement, position_bias, visualizations, raw_results, sample_rationales, sample_count}}`
        (evals.yaml, win_rate_config.yaml), unchanged; None when it is absent or not enabled."""
        if not block:
            return None
        if not isinstance(block, Mapping):
            raise ParameterError(f"wandb: {block!r} must be a mapping (EVE's wandb block)")
        block = dict(block)
        enabled = block.pop("enabled", True)
        if not isinstance(enabled, bool):
            raise ParameterError(f"wandb.enabled={enabled!r} must be true or false")
        problem = unknown_names(list(block), ("project", "entity", "run_name", "tags", "notes", "log"),
                                what="wandb field")
        if problem:
            raise ParameterError(problem)
        if not enabled:
            return None
        return cls.from_param({"backend": "wandb", **{k: v for k, v in block.items() if v is not None}})

    def logs(self, key: str) -> bool:
        """Whether `key` (one of LOG_KEYS) is logged."""
        return dict(self.log).get(key, True)

    def public(self) -> dict[str, Any]:
        """The record of this configuration (results.json, run.json): every field, as given."""
        return {"backend": self.backend, "uri": self.uri, "project": self.project, "entity": self.entity,
                "run_name": self.run_name, "tags": {k: v for k, v in self.tags} if any(v for _, v in self.tags)
                else [k for k, _ in self.tags], "log": dict(self.log), "sample_count": self.sample_count,
                "log_replays": self.log_replays, **({"notes": self.notes} if self.notes is not None else {})}


# ---------------------------------------------------------------------------------- what is logged
@dataclass
class Tracked:
    """What one notebook run logs, built by its kind from its files (`RunKind.track`).

    `metrics`: log key (`LOG_KEYS`) -> {flat name: number}; `tables`: name -> (log key, table);
    `images`: PNG files; `tags`: evekit's own (kind, run name, task, model).
    """

    folder: Path
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    tables: dict[str, tuple[str, pd.DataFrame]] = field(default_factory=dict)
    images: list[Path] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    label: str | None = None

    def flat_metrics(self, cfg: TrackingConfig) -> dict[str, float]:
        return {k: v for key, group in self.metrics.items() if cfg.logs(key) for k, v in group.items()}

    def logged_tables(self, cfg: TrackingConfig) -> dict[str, pd.DataFrame]:
        return {name: t for name, (key, t) in self.tables.items() if cfg.logs(key)}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        try:
            x = float(value)
        except (TypeError, ValueError):
            return None
        return x if math.isfinite(x) else None
    return None


def metric_entries(prefix: str, metrics: Mapping[str, Any] | None) -> dict[str, float]:
    """`{name: {value, ci_low, ci_high, n}}` (or `{name: number}`) as flat names: `<prefix>/<name>`,
    `<prefix>/<name>_ci_low`, `_ci_high`, `_n`. Missing values (None, NaN) are left out."""
    out: dict[str, float] = {}
    for name, m in (metrics or {}).items():
        base = f"{prefix}/{name}" if prefix else str(name)
        if isinstance(m, Mapping):
            for key, suffix in (("value", ""), ("ci_low", "_ci_low"), ("ci_high", "_ci_high"), ("n", "_n")):
                x = _number(m.get(key))
                if x is not None:
                    out[base + suffix] = x
        else:
            x = _number(m)
            if x is not None:
                out[base] = x
    return out


def numbers(prefix: str, mapping: Mapping[str, Any] | None) -> dict[str, float]:
    """Every number in a nested mapping, under `<prefix>/<key>/<key>...`."""
    out: dict[str, float] = {}
    for key, value in (mapping or {}).items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(numbers(name, value))
        else:
            x = _number(value)
            if x is not None:
                out[name] = x
    return out


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file's mapping; {} when it is missing or unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_table(path: Path) -> pd.DataFrame | None:
    """A CSV the run wrote, every text cell as text (None when the file is not there)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""], low_memory=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None


def samples_table(samples: pd.DataFrame) -> pd.DataFrame:
    """A samples table in EVE's column order: doc_id, doc.Topic, doc.Question, target, filtered_resps;
    then the scores, the judges' votes, their rationales, the rest (raw responses, parsing, the item's
    other parts) and the failures (failed, error, the judges' errors) last; file order within each."""
    columns = [str(c) for c in samples.columns]
    eve = [c for c in EVE_SAMPLE_COLUMNS if c in columns]
    judge = [c for c in columns if c.startswith("judge_")]
    failures = [c for c in columns if c in _FAILURE_COLUMNS
                or (c in judge and (c.endswith("_error") or c == "judge_failed"))]
    rationales = [c for c in judge if c.endswith("_reasoning")]
    votes = [c for c in judge if c not in failures and c not in rationales
             and not c.endswith(_JUDGE_DETAIL_SUFFIXES)]
    # A score is a number the task computed per item: any numeric column that is not bookkeeping.
    scores = [c for c in columns if c not in eve and c not in failures and c not in _BOOKKEEPING_COLUMNS
              and not c.startswith(("doc.", "judge_"))
              and (pd.api.types.is_numeric_dtype(samples[c]) or pd.api.types.is_bool_dtype(samples[c]))]
    placed = {*eve, *scores, *votes, *rationales, *failures}
    rest = [c for c in columns if c not in placed]
    return samples[eve + scores + votes + rationales + rest + failures]


def folder_images(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("*.png"))


def fingerprint(tracked: Tracked) -> str:
    """What makes a run the same experiment: its parameters, metrics and tables; usage (cache hits,
    seconds) and anything else that differs between a run and its replay from the cache left out."""
    h = hashlib.sha256()
    h.update(json.dumps(json_safe(tracked.params), sort_keys=True, default=str).encode())
    metrics = {k: g for k, g in tracked.metrics.items() if k != "usage"}
    h.update(json.dumps(json_safe(metrics), sort_keys=True, default=str).encode())
    for name in sorted(tracked.tables):
        key, table = tracked.tables[name]
        h.update(f"{name}:{key}:".encode())
        h.update(table.to_csv(index=False).encode())
    return h.hexdigest()[:32]


# ---------------------------------------------------------------------------------- logging
def _flat_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested parameters as MLflow's flat string parameters (`judges` and other lists as JSON)."""
    out: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flat_params(value, f"{name}."))
            continue
        text = value if isinstance(value, str) else json.dumps(json_safe(value), ensure_ascii=False, default=str)
        out[name] = text if len(text) <= MLFLOW_PARAM_MAX else text[:MLFLOW_PARAM_MAX - 1] + "…"
    return out


def safe_key(name: str) -> str:
    """A metric or table name both trackers take: letters, digits, `_-./ `, the rest as `_`."""
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in name)[:250]


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def _plain_table(table: pd.DataFrame) -> pd.DataFrame:
    """A table as the trackers take it: numbers and booleans as they are (missing = None), every
    other column as text (an empty cell = "")."""
    out = pd.DataFrame(index=range(len(table)))
    for col in table.columns:
        s = table[col].reset_index(drop=True)
        if pd.api.types.is_bool_dtype(s) or pd.api.types.is_numeric_dtype(s):
            out[str(col)] = s.astype(object).map(_cell)
        else:
            out[str(col)] = s.map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return out


def default_mlflow_uri(out_root: Path) -> str:
    """The local store: `sqlite:///<output_dir>/mlruns/mlflow.db` (MLflow 3 no longer takes a folder)."""
    return f"sqlite:///{(Path(out_root).resolve() / 'mlruns' / 'mlflow.db').as_posix()}"


@contextlib.contextmanager
def _bounded_http() -> Iterator[None]:
    """MLflow's HTTP calls without retries and with a short timeout (unless the user set them)."""
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(HTTP_TIMEOUT_S))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


CONNECT_TIMEOUT_S = 5


def _check_reachable(uri: str, what: str = "the MLflow server") -> None:
    """A tracking server's port answers (a refused connection is known in milliseconds, before the
    tracker is even imported); TrackingError naming the address otherwise. Other URIs pass."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    import socket

    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise TrackingError(f"{what} at {parts.scheme}://{parts.hostname}:{port} cannot be reached "
                            f"({exc.strerror or exc})") from None


def _public_uri(uri: str) -> str:
    """A tracking URI as records show it: any user:password@ in MLFLOW_TRACKING_URI left out."""
    parts = urlsplit(uri)
    if not (parts.username or parts.password):
        return uri
    host = parts.hostname or ""
    return parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")).geturl()


class _MLflow:
    """One MLflow run through `MlflowClient` (no global state: the fluent API's active run stays free)."""

    name = "mlflow"

    def __init__(self, cfg: TrackingConfig, out_root: Path) -> None:
        _check_reachable(cfg.uri or os.environ.get("MLFLOW_TRACKING_URI") or "")
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise TrackingError(f"MLflow is not installed ({exc}); {INSTALL_HINT}") from None
        import logging

        # The store's one-time "Creating initial MLflow database tables..." is not news to a notebook reader.
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
        self.cfg = cfg
        self.local = not (cfg.uri or os.environ.get("MLFLOW_TRACKING_URI"))
        self.uri = cfg.uri or os.environ.get("MLFLOW_TRACKING_URI") or default_mlflow_uri(out_root)
        if self.local:
            (Path(out_root) / "mlruns").mkdir(parents=True, exist_ok=True)
        self.artifacts = (Path(out_root).resolve() / "mlruns" / "artifacts").as_uri() if self.local else None
        self.client = MlflowClient(tracking_uri=self.uri)
        self.run_id: str | None = None
        self.experiment_id: str | None = None

    def _experiment(self) -> str:
        name = self.cfg.project or DEFAULT_PROJECT
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        return self.client.create_experiment(name, artifact_location=self.artifacts)

    def url(self, run_id: str) -> str | None:
        if urlsplit(self.uri).scheme in ("http", "https"):
            return f"{_public_uri(self.uri).rstrip('/')}/#/experiments/{self.experiment_id}/runs/{run_id}"
        return None

    def where(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": _public_uri(self.uri)}
        if not self.url("x"):
            out["ui"] = f"mlflow ui --backend-store-uri {_public_uri(self.uri)}"
        return out

    def find(self, fp: str) -> str | None:
        self.experiment_id = self._experiment()
        # Only a run that was logged whole counts: one that failed half-way is logged again.
        runs = self.client.search_runs([self.experiment_id], max_results=1, filter_string=(
            f"tags.`evekit.fingerprint` = '{fp}' and attributes.status = 'FINISHED'"))
        return runs[0].info.run_id if runs else None

    def start(self, label: str, tags: dict[str, str], group: str | None) -> str:
        from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

        if self.experiment_id is None:
            self.experiment_id = self._experiment()
        all_tags = {**tags, **({"evekit.batch": group} if group else {}), MLFLOW_RUN_NAME: label,
                    **({MLFLOW_RUN_NOTE: self.cfg.notes} if self.cfg.notes else {})}  # the UI's "Description"
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=label)
        self.run_id = run.info.run_id
        return self.run_id

    def log(self, tracked: Tracked, report: Path | None) -> None:
        from mlflow.entities import Metric, Param

        cfg, client, run_id = self.cfg, self.client, self.run_id
        assert run_id is not None
        now = int(time.time() * 1000)
        if cfg.logs("params"):
            params = [Param(safe_key(k), v) for k, v in _flat_params(tracked.params).items()]
            for i in range(0, len(params), 100):
                client.log_batch(run_id, params=params[i:i + 100])
        metrics = [Metric(safe_key(k), v, now, 0) for k, v in tracked.flat_metrics(cfg).items()]
        for i in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[i:i + 1000])
        for name, table in tracked.logged_tables(cfg).items():
            client.log_table(run_id, data=_plain_table(table), artifact_file=f"tables/{safe_key(name)}.json")
        if cfg.logs("plots"):
            for png in tracked.images:
                client.log_artifact(run_id, str(png), "plots")
        if report is not None and cfg.logs("report"):
            client.log_artifact(run_id, str(report))
        if cfg.logs("folder"):
            client.log_artifacts(run_id, str(tracked.folder), "outputs")

    def close(self, ok: bool) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, "FINISHED" if ok else "FAILED")


WANDB_DEFAULT_BASE_URL = "https://api.wandb.ai"
# WANDB_MODE values that send nothing (anything else is online).
_WANDB_LOCAL_MODES = ("offline", "dryrun", "disabled")


class _Wandb:
    """One W&B run, offline unless WANDB_MODE says otherwise: its files stay for `wandb sync`.

    Online, a W&B that cannot be used (its server unreachable, bad or no credentials) is not a lost
    run: it is logged offline instead (`fallback` says why), for a later `wandb sync`.
    """

    name = "wandb"
    LEDGER = "evekit-logged.json"  # fingerprint -> run id of what this folder's offline runs logged

    def __init__(self, cfg: TrackingConfig, out_root: Path) -> None:
        try:
            import wandb  # noqa: F401
        except ImportError as exc:
            raise TrackingError(f"wandb is not installed ({exc}); {INSTALL_HINT}") from None
        self.cfg = cfg
        self.dir = Path(cfg.uri or os.environ.get("WANDB_DIR") or out_root).resolve()
        self.mode = os.environ.get("WANDB_MODE") or "offline"
        self.run: Any = None
        self.fallback: str | None = None  # why an online run was logged offline
        self.ledger = self.dir / "wandb" / self.LEDGER

    def url(self, run_id: str) -> str | None:
        if self.run is None or self.mode in ("offline", "disabled"):
            return None  # an offline run has no address until `wandb sync`
        return getattr(self.run, "url", None)

    def where(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode}
        if self.fallback:
            out["fallback"] = self.fallback
        if self.run is not None:
            sync_dir = Path(self.run.settings.sync_dir)
            out["dir"] = display_path(sync_dir)
            if self.mode == "offline":
                out["sync"] = f"wandb sync {display_path(sync_dir)}"
        return out

    def _seen(self) -> dict[str, str]:
        return read_json(self.ledger)

    def find(self, fp: str) -> str | None:
        return self._seen().get(fp)

    def remember(self, fp: str, run_id: str) -> None:
        seen = self._seen()
        seen[fp] = run_id
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        from evekit.report import write_text_atomic

        write_text_atomic(self.ledger, json.dumps(seen, indent=1) + "\n")

    def start(self, label: str, tags: dict[str, str], group: str | None, params: dict[str, Any]) -> str:
        import wandb

        self.dir.mkdir(parents=True, exist_ok=True)
        # No console capture, no code or git snapshot, no system monitor: the run's files hold what
        # evekit logs and W&B's own run metadata, nothing of the process's environment.
        settings = wandb.Settings(console="off", save_code=False, disable_git=True, x_disable_stats=True,
                                  init_timeout=WANDB_INIT_TIMEOUT_S, silent=True, disable_job_creation=True)
        words = [f"{k}:{v}" if v else k for k, v in tags.items()]
        args = dict(project=self.cfg.project or DEFAULT_PROJECT, entity=self.cfg.entity, name=label, group=group,
                    tags=[w[:64] for w in words], config=json_safe(params), notes=self.cfg.notes, dir=str(self.dir), settings=settings,
                    reinit="create_new")
        if self.mode not in _WANDB_LOCAL_MODES:
            try:
                # A server that refuses is known at once; otherwise wandb.init retries until init_timeout.
                _check_reachable(os.environ.get("WANDB_BASE_URL") or WANDB_DEFAULT_BASE_URL, "the W&B server")
                self.run = wandb.init(**args, mode=self.mode)
            except Exception as exc:  # noqa: BLE001 - no network, bad credentials: offline instead
                self.fallback = (f"online W&B failed ({_short(exc)}); logged offline instead, for a later "
                                 "`wandb sync`")
                _report_once(f"tracking to wandb: {self.fallback}")
                self.mode, self.run = "offline", None
        if self.run is None:
            self.run = wandb.init(**args, mode=self.mode)
        return str(self.run.id)

    def log(self, tracked: Tracked, report: Path | None) -> None:
        import wandb

        cfg, run = self.cfg, self.run
        metrics = {safe_key(k): v for k, v in tracked.flat_metrics(cfg).items()}
        payload: dict[str, Any] = dict(metrics)
        for name, table in tracked.logged_tables(cfg).items():
            # W&B keeps a logged table's first `Table.MAX_ROWS` (10,000) rows; every row is in the folder artifact.
            payload[f"tables/{safe_key(name)}"] = wandb.Table(dataframe=_plain_table(table.head(wandb.Table.MAX_ROWS)))
        if cfg.logs("plots"):
            for png in tracked.images:
                payload[f"plots/{safe_key(png.stem)}"] = wandb.Image(str(png))
        if report is not None and cfg.logs("report"):
            payload["report"] = wandb.Html(report.read_text(encoding="utf-8"), inject=False)
        run.log(payload)
        run.summary.update(metrics)
        if cfg.logs("folder"):
            art = wandb.Artifact(_artifact_name(tracked.label or tracked.folder.name), type="evekit-run")
            art.add_dir(str(tracked.folder))
            run.log_artifact(art)

    def close(self, ok: bool) -> None:
        if self.run is not None:
            self.run.finish(exit_code=0 if ok else 1)


def _artifact_name(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label)[:128] or "evekit-run"


_TRACKERS: dict[str, Callable[[TrackingConfig, Path], Any]] = {"mlflow": _MLflow, "wandb": _Wandb}


def _report_once(message: str) -> None:
    if message not in _REPORTED:
        _REPORTED.add(message)
        print(f"evekit: {message}", file=sys.stderr, flush=True)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


_PLACEHOLDER = re.compile(r"\{(model_a|model_b|model|task)\}")


def run_label(cfg: TrackingConfig, tracked: Tracked) -> str:
    """The tracker run's name: `run_name` with EVE's `{model_a}` / `{model_b}` (and `{model}`,
    `{task}`) filled from the run (EVE names each comparison's run so), else the folder's label."""
    if not cfg.run_name:
        return tracked.label or tracked.folder.name
    values = {key: tracked.tags.get(f"evekit.{key}") for key in ("model_a", "model_b", "model", "task")}
    # a placeholder this run has no value for stays as written
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)] or m.group(0)), cfg.run_name)


class TrackerRun:
    """One notebook run's tracker run, in two steps: `open` (the run exists, or is known to be a replay,
    or could not be made) and `finish` (everything logged, the run closed). Between them the caller
    may render a report that names the run. Neither step raises: a failing tracker is reported once
    on stderr and its status says why.

    `status` is what run.json records as `tracking`: `{backend, status, run_id, url, ...}`, status
    "logging" (open), "logged", "replay" (already logged, not again unless `log_replays`) or "failed"
    (with `error`, and `retry`: the `evekit track` command that logs the folder later). W&B adds
    `mode`, `dir`, `sync` and, when online failed and the run was logged offline, `fallback`.
    """

    def __init__(self, tracked: Tracked, cfg: TrackingConfig, tracker: Any, status: dict[str, Any]) -> None:
        self.tracked, self.cfg, self.tracker, self.status = tracked, cfg, tracker, status

    @classmethod
    def open(cls, tracked: Tracked, cfg: TrackingConfig, *, out_root: Path, group: str | None = None) -> "TrackerRun":
        tracker: Any = None
        try:
            with _LOCK, _bounded_http():
                tracker = _TRACKERS[cfg.backend](cfg, Path(out_root))
                fp = fingerprint(tracked)
                label = run_label(cfg, tracked)
                tags = {**tracked.tags, "evekit.fingerprint": fp, **{k: v for k, v in cfg.tags}}
                earlier = None if cfg.log_replays else tracker.find(fp)
                if earlier is not None:
                    return cls(tracked, cfg, None, {
                        "backend": cfg.backend, "status": "replay", "run_id": earlier, "url": tracker.url(earlier),
                        **tracker.where(), "note": "a replay of a run already logged, not logged again "
                                                   "(tracking.log_replays: true logs it)"})
                if cfg.backend == "wandb":
                    run_id = tracker.start(label, tags, group, tracked.params if cfg.logs("params") else {})
                else:
                    run_id = tracker.start(label, tags, group)
                tracker.fingerprint = fp
                return cls(tracked, cfg, tracker, {
                    "backend": cfg.backend, "status": "logging", "run_id": run_id, "url": tracker.url(run_id),
                    "name": label, **({"group": group} if group else {}), **tracker.where()})
        except Exception as exc:  # noqa: BLE001 - a tracker never fails the evaluation
            return cls(tracked, cfg, None, _failed(cfg, {"backend": cfg.backend}, exc, tracked.folder))

    @classmethod
    def failed(cls, tracked: Tracked, cfg: TrackingConfig, exc: BaseException) -> "TrackerRun":
        """A run that could not be prepared (e.g. its files were unreadable): reported, recorded."""
        return cls(tracked, cfg, None, _failed(cfg, {"backend": cfg.backend}, exc, tracked.folder))

    def finish(self, report: Path | None = None) -> dict[str, Any]:
        """Log everything (report.html too when `report` exists) and close the run; the final status."""
        if self.tracker is None or self.status.get("status") != "logging":
            return self.status
        tracker = self.tracker
        try:
            with _LOCK, _bounded_http():
                report_path = Path(report) if report is not None and Path(report).is_file() else None
                tracker.log(self.tracked, report_path)
                tracker.close(True)
                if hasattr(tracker, "remember"):
                    tracker.remember(tracker.fingerprint, self.status["run_id"])
                self.status = {**self.status, "status": "logged", **tracker.where()}
        except Exception as exc:  # noqa: BLE001
            with contextlib.suppress(Exception):
                tracker.close(False)
            self.status = _failed(self.cfg, self.status, exc, self.tracked.folder)
        self.tracker = None
        return self.status


def retry_command(folder: Path) -> str:
    """The command that logs an output folder after the fact (`evekit track`, e.g. once the server is up)."""
    import shlex

    return f"evekit track {shlex.quote(display_path(Path(folder)))}"


def _failed(cfg: TrackingConfig, status: dict[str, Any], exc: BaseException, folder: Path) -> dict[str, Any]:
    error = _short(exc)
    # Said once per failure (a batch against a server that is down says it once), without the folder.
    _report_once(f"tracking to {cfg.backend} failed: {error} (the run's outputs are unaffected; the failure is "
                 "recorded in run.json; `evekit track <output folder>` logs the runs later)")
    return {**status, "status": "failed", "error": error, "retry": retry_command(folder)}


_NAMES = {"mlflow": "MLflow", "wandb": "W&B"}


def describe(status: Mapping[str, Any] | None) -> str:
    """One line for a report header, the index and the notebook: where the run was tracked."""
    if not isinstance(status, Mapping) or not status.get("backend"):
        return ""
    name = _NAMES.get(str(status["backend"]), str(status["backend"]))
    state = status.get("status")
    if state == "failed":
        retry = f" · log it later: {status['retry']}" if status.get("retry") else ""
        return f"Tracking in {name} failed: {status.get('error', '')}{retry}"
    run = f"run {status['run_id']}" if status.get("run_id") else "a run"
    where = status.get("url") or status.get("ui") or status.get("sync") or status.get("dir") or ""
    mode = " (offline)" if status.get("mode") == "offline" else ""
    head = f"Tracked in {name}{mode}: {run}" + (" (a replay, logged before)" if state == "replay" else "")
    fallback = f" ({status['fallback']})" if status.get("fallback") else ""
    return head + (f" · {where}" if where else "") + fallback


def log_run(tracked: Tracked, cfg: TrackingConfig, *, out_root: Path, group: str | None = None,
            report: Path | None = None) -> dict[str, Any]:
    """Open, log and close in one go (`TrackerRun`); the status to record in run.json."""
    return TrackerRun.open(tracked, cfg, out_root=out_root, group=group).finish(report)
