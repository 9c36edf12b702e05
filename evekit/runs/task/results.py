"""A task run's results: results.json's content, the Every Eval Ever record, model_outputs.jsonl,
and the headline metric a result is summarised by.

The layout is the output contract (README, "What the main job produces"):
`outputs/<run_name>/<model_name>/<task>/{samples.csv, results.json, results.eee.jsonl, report.html, *.png}`.
"""
from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

import evekit
from evekit.paths import display_path, resolve_path
from evekit.report import json_safe, public_params, write_text_atomic

EEE_SCHEMA_VERSION = "0.2.1"


def build_results(*, task: str, model: str, samples: pd.DataFrame, metrics: dict[str, dict],
                  usage: dict[str, Any], params: dict[str, Any], extra: dict[str, Any] | None = None,
                  notes: list[str] | None = None) -> dict[str, Any]:
    n_unparsed = int(samples["unparsed"].fillna(False).astype(bool).sum()) if "unparsed" in samples else 0
    n_failed = int(samples["failed"].fillna(False).astype(bool).sum()) if "failed" in samples else 0
    n_truncated = int(samples["truncated"].fillna(False).astype(bool).sum()) if "truncated" in samples else 0
    results = {
        "task": task,
        "model": model,
        "n": int(len(samples)),
        "n_unparsed": n_unparsed,
        "n_failed": n_failed,
        "n_truncated": n_truncated,  # answers cut off at max_tokens (finish_reason "length")
        "metrics": metrics,
        "usage": usage,
        "params": public_params(params),
        "evekit_version": evekit.__version__,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if notes:
        results["notes"] = list(notes)
    if extra:
        results.update(extra)
    return json_safe(results)


def _is_local_dataset(dataset: str) -> bool:
    """A file (it has a suffix, as `TaskRun.load` decides) or an absolute path; else a hub id."""
    return bool(Path(dataset).suffix) or Path(dataset).expanduser().is_absolute()


def _local_dataset_path(dataset: str) -> str:
    """Where a local dataset is, without machine-specific parts: relative to the repository root
    when inside it, else only the file name (never an absolute path)."""
    shown = display_path(resolve_path(dataset))
    return Path(shown).name if Path(shown).is_absolute() else shown


def _eee_source_data(dataset: str, params: dict[str, Any]) -> dict[str, Any]:
    """`source_data` of EEE 0.2.1: a hub dataset is its `hf_dataset` variant (`hf_repo`, `hf_split`);
    a local file is its `other` variant, the path in `additional_details` (the schema has no local-file
    variant, and its `additional_details` values must be strings)."""
    if not _is_local_dataset(dataset):
        source: dict[str, Any] = {"dataset_name": dataset, "source_type": "hf_dataset", "hf_repo": dataset}
        if isinstance(params.get("split"), str):
            source["hf_split"] = params["split"]
        return source
    path = _local_dataset_path(dataset)
    details = {"path": path}
    if Path(path).suffix:
        details["format"] = Path(path).suffix.lstrip(".").lower()
    return {"dataset_name": Path(path).name, "source_type": "other", "additional_details": details}


def _eee_uncertainty(m: dict[str, Any], n: int) -> dict[str, Any]:
    """`uncertainty` of EEE 0.2.1: the interval only when both bounds are numbers (the schema requires
    `lower` and `upper` as numbers), `num_samples` as an integer."""
    out: dict[str, Any] = {}
    low, high = json_safe(m.get("ci_low")), json_safe(m.get("ci_high"))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        out["confidence_interval"] = {"lower": low, "upper": high, "confidence_level": 0.95,
                                     "method": str(m.get("method") or "bootstrap")}  # the metric's own interval
    num = m.get("n")
    out["num_samples"] = int(num) if isinstance(json_safe(num), (int, float)) else int(n)
    return out


def _eee_range(name: str) -> tuple[float, float, bool]:
    """(min_score, max_score, lower_is_better) of a metric: the registry's facts (mcc and kappa go
    down to -1, the Brier score up to 2, ECE and Brier are better low); 0-1, higher better otherwise."""
    from evekit.metrics import get_metric

    try:
        metric = get_metric(name)
    except KeyError:
        return 0, 1, False
    low, high = metric.bounds
    if name == "fleiss_kappa":
        low = -1
    return (int(low) if float(low).is_integer() else low), (int(high) if float(high).is_integer() else high), \
        not metric.higher_is_better


def failed_instances(samples: Any) -> list[dict[str, Any]]:
    """EuroEval's `failed_instances`: every item the model or the infrastructure failed on, as
    {sample_index (0-based row of samples.csv), error}; an unparsed answer says why it was not
    usable, a failed call its error."""
    if samples is None or len(samples) == 0:
        return []
    out = []
    cols = set(samples.columns)
    for i, row in enumerate(samples.to_dict("records")):
        failed = bool(row.get("failed")) if "failed" in cols else False
        unparsed = bool(row.get("unparsed")) if "unparsed" in cols else False
        if not (failed or unparsed):
            continue
        reason = row.get("error") if failed else row.get("unparsed_reason")
        if reason is None or (isinstance(reason, float) and math.isnan(reason)) or not str(reason).strip():
            reason = "the call failed" if failed else "no usable answer in the model's output"
        out.append({"sample_index": i, "error": f"{'failed' if failed else 'unparsed'}: {reason}"})
    return out


def to_eee(results: dict[str, Any], *, dataset: str, samples: Any = None) -> dict[str, Any]:
    """One result in the Every Eval Ever schema 0.2.1 (its `eval.schema.json`; the fields EuroEval
    documents). Metrics without a numeric value are left out (the schema's `score` is a number).

    What EuroEval's readers look for: `num_failed_instances` counts as EuroEval does, every item
    the model failed on, unparsed answers included (beside it evekit's split: `num_unparsed_instances`,
    `num_infrastructure_failed_instances`); `eval_library.additional_details.raw_results` is the
    JSON text of a one-iteration list (evekit does not bootstrap the run itself) with the metric
    values and `failed_instances` (from `samples`, when given)."""
    now = int(time.time())
    source_data = _eee_source_data(str(dataset), results.get("params") or {})
    failures = results.get("n_failed", 0) + results.get("n_unparsed", 0)
    raw = {name: json_safe(m.get("value")) for name, m in results["metrics"].items()
           if isinstance(json_safe(m.get("value")), (int, float)) and not isinstance(m.get("value"), bool)}
    raw["failed_instances"] = failed_instances(samples)
    evaluation_results = []
    for name, m in results["metrics"].items():
        value = json_safe(m.get("value"))
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        lowest, highest, lower_is_better = _eee_range(name)
        evaluation_results.append({
            "evaluation_name": name,
            "source_data": dict(source_data),
            "metric_config": {
                "lower_is_better": lower_is_better,
                "score_type": "continuous",
                "min_score": lowest,
                "max_score": highest,
            },
            "score_details": {
                "score": value,
                "details": {
                    "num_failed_instances": f"{float(failures)}",
                    "num_unparsed_instances": f"{float(results.get('n_unparsed', 0))}",
                    "num_infrastructure_failed_instances": f"{float(results.get('n_failed', 0))}",
                },
                "uncertainty": _eee_uncertainty(m, results["n"]),
            },
        })
    return json_safe({
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": f"{results['task']}/{results['model']}/{now}",
        "evaluation_timestamp": results.get("timestamp") or datetime.now(timezone.utc).isoformat(),
        "retrieved_timestamp": str(now),
        "source_metadata": {
            "source_name": "evekit",
            "source_type": "evaluation_run",
            "source_organization_name": "evekit",
            "source_organization_url": "https://github.com/eve-esa/evalkit",
            "evaluator_relationship": "third_party",
        },
        "model_info": {
            "id": results["model"],
            "name": results["model"],
            "additional_details": {"generative": "true", "api": str(results["params"].get("api", ""))},
        },
        "eval_library": {
            "name": "evekit",
            "version": evekit.__version__,
            "additional_details": {
                "task": results["task"],
                "few_shot": str(bool(results["params"].get("num_fewshot"))).lower(),
                "num_fewshot": str(results["params"].get("num_fewshot")),
                "num_failed_or_unparsed": str(failures),
                "raw_results": json.dumps([raw], ensure_ascii=False),
            },
        },
        "evaluation_results": evaluation_results,
    })


MODEL_OUTPUTS = "model_outputs.jsonl"


def write_model_outputs(path: Path, outputs: list[dict[str, Any]]) -> Path:
    """One JSON object per line and item (`doc_id` first): what was sent and what came back."""
    text = "".join(json.dumps(json_safe(record), ensure_ascii=False, default=str) + "\n" for record in outputs)
    return write_text_atomic(Path(path), text)


def headline(results: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """(name, metric) of the number a result is summarised by: the task's headline
    (`evekit.tasks.headline_metric`) among the metrics that have a value."""
    from evekit.tasks import headline_metric

    metrics = results.get("metrics", {})
    valued = [name for name, m in metrics.items() if m.get("value") is not None]
    name = headline_metric(results.get("task"), valued)
    return (name, metrics[name]) if name is not None else ("–", None)


