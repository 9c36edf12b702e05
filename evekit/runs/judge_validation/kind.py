"""The judge-validation kind: judges measured against expert-labelled answers."""
from __future__ import annotations

import json
from typing import Any, Mapping

from evekit.report import format_metric
from evekit.runs.judge_validation.params import ValidationParams
from evekit.runs.kind import RunKind
from evekit.runs.records import RunRecord
from evekit.tracking import Tracked, read_json, read_table

__all__ = ["KIND"]


def headline(record: RunRecord) -> str:
    """The vote's accuracy and kappa against the expert labels, with intervals."""
    try:
        data = json.loads((record.dir / "results.json").read_text())
        vote = next(r for r in data["table"] if r["judge"] == "vote")
        acc = format_metric({"value": vote["accuracy"], "ci_low": vote["accuracy_ci_low"],
                             "ci_high": vote["accuracy_ci_high"]})
        kappa = format_metric({"value": vote["kappa"], "ci_low": vote["kappa_ci_low"], "ci_high": vote["kappa_ci_high"]})
        return f"(panel vote: accuracy {acc}, kappa {kappa}, n = {vote['n']} of {data['n_decisions']} decisions)"
    except Exception:  # a half-written or foreign file must not break the index
        return ""


RATES = ("accuracy", "kappa", "sensitivity", "specificity")


def track(record: RunRecord, sample_count: int) -> Tracked:
    """A judge validation for a tracker: `<judge_kind>/<judge>/<rate>` with `_ci_low`, `_ci_high`,
    `_n` for accuracy, kappa, sensitivity and specificity (the panel's vote too) and the abstentions;
    tables: the per-judge table and every verdict."""
    data = read_json(record.dir / "results.json")
    kind = str(data.get("judge_kind") or record.details.get("judge_kind"))
    metrics: dict[str, dict[str, float]] = {"metrics": {}, "counts": {}}
    for row in data.get("table") or []:
        base = f"{kind}/{row.get('judge')}"
        for rate in RATES:
            for suffix in ("", "_ci_low", "_ci_high"):
                value = row.get(rate + suffix)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics["metrics"][f"{base}/{rate}{suffix}"] = float(value)
            if isinstance(row.get("n"), (int, float)) and row.get(rate) is not None:
                metrics["metrics"][f"{base}/{rate}_n"] = float(row["n"])
        if isinstance(row.get("abstained"), (int, float)):
            metrics["counts"][f"{base}/abstained"] = float(row["abstained"])
    for key in ("n", "n_decisions"):
        if isinstance(data.get(key), (int, float)):
            metrics["counts"][f"{kind}/{key}"] = float(data[key])
    tables: dict[str, tuple[str, Any]] = {}
    for name, file, key in (("judge_validation", "judge_validation.csv", "tables"), ("verdicts", "verdicts.csv", "samples")):
        table = read_table(record.dir / file)
        if table is not None:
            tables[name] = (key, table)
    return Tracked(folder=record.dir, params=dict(data.get("params") or {}), metrics=metrics, tables=tables,
                   tags={"evekit.judge_kind": kind})


def _subject(record: RunRecord, params: Mapping[str, Any]) -> str | None:
    """Judges measured, no model: name the judges."""
    judges = record.details.get("judges") or [j.get("name") for j in params.get("judges") or [] if isinstance(j, dict)]
    kind = record.details.get("judge_kind") or params.get("judge_kind") or ""
    return f"{kind} judges {', '.join(str(j) for j in judges)}".strip()


KIND = RunKind(name="judge_validation", title="judge validation", phase=0, notebooks=("judge_validation",),
               params=ValidationParams, runner="evekit.runs.judge_validation.run:ValidationRun", headline=headline, subject=_subject,
               plan_note="not planned yet", track=track)
