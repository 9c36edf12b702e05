"""The task kind: the six EVE task notebooks and custom_task.ipynb (one model on one task)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from evekit.cards import n_of, score_flags, task_card
from evekit.metrics import METRICS
from evekit.naming import configuration_name
from evekit.report import format_metric
from evekit.runs.kind import IndexRow, RunKind
from evekit.runs.records import RunRecord
from evekit.runs.task.params import TaskParams
from evekit.runs.task.results import headline
from evekit.tasks import TASKS
from evekit.tracking import Tracked, metric_entries, numbers, read_table, samples_table

__all__ = ["KIND", "CUSTOM_NOTEBOOK", "headline_flags", "result_name"]

# The notebook of tasks defined in a YAML file; every EVE task has a notebook of its name.
CUSTOM_NOTEBOOK = "custom_task"


def _metric_n(res: dict[str, Any], m: dict[str, Any] | None) -> str:
    """The n behind the headline metric (failed items and abstentions left out), and the item count
    when it differs."""
    return n_of(res, res.get("n_items", res["n"]) if m is None else m.get("n", res.get("n_items", res["n"])))


def _failed_cell(res: dict[str, Any]) -> str:
    judge_failed = res.get("n_judge_failed", 0)
    return f"{res.get('n_failed', 0)}" + (f" + {judge_failed} without verdict" if judge_failed else "")


def _baseline_cell(res: dict[str, Any]) -> str:
    """'always "C": 0.262 [0.17, 0.38]' (and 'not beaten' when acc's interval reaches down to it)."""
    constant = (res.get("baselines") or {}).get("most_frequent")
    if not constant:
        return "–"
    acc = res.get("metrics", {}).get("acc", {})
    beaten = acc.get("ci_low") is not None and constant.get("value") is not None and acc["ci_low"] > constant["value"]
    return f'always "{constant["answer"]}": {format_metric(constant)}' + ("" if beaten else " (not beaten)")


def result_name(res: dict[str, Any]) -> str:
    """A task result's configuration name: its model under its run (`naming.configuration_name`)."""
    return configuration_name(str(res["model"]), (res.get("params") or {}).get("run_name"))


def _results(record: RunRecord) -> dict[str, Any]:
    try:
        res = json.loads((record.dir / "results.json").read_text())
        res["task"], res["model"], res["n"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{record.dir / 'results.json'}: {exc}") from None
    return res


def headline_flags(res: dict[str, Any]) -> list:
    """The trust flags of a result's headline number (`cards.score_flags`: judged and not corrected by expert labels)."""
    name, _ = headline(res)
    return score_flags(res, name)


def index_row(record: RunRecord, results: dict[str, Any] | None = None) -> IndexRow:
    """The index's row of one task result; ValueError when its results.json is unreadable."""
    res = results if results is not None else _results(record)
    name, m = headline(res)
    return IndexRow((str(res["task"]), result_name(res), name, format_metric(m), _metric_n(res, m),
                     str(res.get("n_unparsed", 0)), _failed_cell(res), _baseline_cell(res)),
                    flags=tuple(headline_flags(res)))


def card(record: RunRecord) -> str:
    """'open_ended · smollm2-135m-instruct · demo-5shot: judge_voting 0.55 [0.40, 0.70], n = 12 of 14
    (higher is better). ⚠ Judges failed validation ...'"""
    try:
        res = _results(record)
    except ValueError:
        return ""
    name, m = headline(res)
    metric = METRICS.get(name)
    return task_card(res, name, m,
                     better="higher" if metric is None or metric.higher_is_better else "lower")


COUNTS = ("n", "n_unparsed", "n_failed", "n_truncated", "n_judge_failed", "n_judge_rule")


def track(record: RunRecord, sample_count: int) -> Tracked:
    """A task run for a tracker: `<task>/<metric>` with `_ci_low`, `_ci_high`, `_n`; the counts (items,
    unparsed, failed, truncated, judges' abstentions); usage; the baselines; samples.csv in EVE's
    column order; the plots."""
    res = _results(record)
    task = str(res["task"])
    counts = {k: res[k] for k in COUNTS if k in res}
    if isinstance(res.get("judge_counts"), dict):
        counts["judge_counts"] = res["judge_counts"]
    metrics = {"metrics": metric_entries(task, res.get("metrics")), "counts": numbers(task, counts),
               "usage": numbers(f"{task}/usage", res.get("usage")),
               "baselines": metric_entries(f"{task}/baseline", res.get("baselines"))}
    by_group = res.get("by_group") if isinstance(res.get("by_group"), dict) else {}
    for group, rows in (by_group.get("groups") or {}).items():
        if isinstance(rows, dict):
            metrics["metrics"].update(metric_entries(f"{task}/group/{group}", rows))
    samples = read_table(record.dir / "samples.csv")
    tables = {"samples": ("samples", samples_table(samples))} if samples is not None else {}
    return Tracked(folder=record.dir, params=dict(res.get("params") or {}), metrics=metrics, tables=tables,
                   tags={"evekit.task": task, "evekit.model": str(res["model"])})


def _subject(record: RunRecord, params: Mapping[str, Any]) -> str | None:
    return record.details.get("model") or params.get("model_name")


def _reads(p: Any) -> list[str]:
    return [p.judge_validation] if p.judge_validation else []


def _implied(notebook: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """An EVE task notebook's task is its name; a custom task's is its file's (its stem stands in
    until the notebook reads the file)."""
    if notebook in TASKS:
        return {"task": notebook}
    return {"task": Path(str(values.get("task_file") or CUSTOM_NOTEBOOK)).stem}


KIND = RunKind(
    name="task", title="task", phase=1, notebooks=(*TASKS, CUSTOM_NOTEBOOK), params=TaskParams, runner="evekit.runs.task.run:TaskRun",
    reads=_reads, index_row=index_row, card=card, subject=_subject,
    implied=_implied, variant=lambda notebook: "custom" if notebook == CUSTOM_NOTEBOOK else notebook, plan_note=None,
    track=track,
)
