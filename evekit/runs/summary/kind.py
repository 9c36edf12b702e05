"""The summary kind: one leaderboard over every result of a run (and of the runs it compares)."""
from __future__ import annotations

from evekit.runs.kind import RunKind
from evekit.runs.summary.params import SummaryParams

__all__ = ["KIND"]


KIND = RunKind(name="summary", title="summary leaderboard", phase=3, notebooks=("summary",), params=SummaryParams,
               runner="evekit.runs.summary.run:SummaryRun", reads=None, plan_note="makes no model calls",
               one_per_run=True)
