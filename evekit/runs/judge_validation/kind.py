"""The judge-validation kind: judges measured against expert-labelled answers."""
from __future__ import annotations

import json
from typing import Any, Mapping

from evekit.report import format_metric
from evekit.runs.judge_validation.params import ValidationParams
from evekit.runs.kind import RunKind
from evekit.runs.records import RunRecord

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


def _subject(record: RunRecord, params: Mapping[str, Any]) -> str | None:
    """Judges measured, no model: name the judges."""
    judges = record.details.get("judges") or [j.get("name") for j in params.get("judges") or [] if isinstance(j, dict)]
    kind = record.details.get("judge_kind") or params.get("judge_kind") or ""
    return f"{kind} judges {', '.join(str(j) for j in judges)}".strip()


KIND = RunKind(name="judge_validation", title="judge validation", phase=0, notebooks=("judge_validation",),
               params=ValidationParams, runner="evekit.runs.judge_validation.run:ValidationRun", headline=headline, subject=_subject,
               plan_note="not planned yet")
