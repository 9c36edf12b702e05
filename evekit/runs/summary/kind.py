"""The summary kind: one leaderboard over every result of a run (and of the runs it compares)."""
from __future__ import annotations

from typing import Any

from evekit.runs.kind import RunKind
from evekit.runs.summary.params import SummaryParams
from evekit.tracking import Tracked, read_table

__all__ = ["KIND"]


def track(record: Any, sample_count: int) -> Tracked:
    """The summary for a tracker: every leaderboard value with its interval (`<task>/<model>/<metric>`,
    `_ci_low`, `_ci_high`, `_n`); tables: the leaderboard, the paired tests, the usage."""
    metrics: dict[str, float] = {}
    tables: dict[str, tuple[str, Any]] = {}
    board = read_table(record.dir / "leaderboard.csv")
    if board is not None:
        tables["leaderboard"] = ("tables", board)
        for _, r in board.iterrows():
            base = f"{r.get('task')}/{r.get('model')}/{r.get('metric')}"
            for suffix, key in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high"), ("_n", "n")):
                value = r.get(key)
                if value is not None and not isinstance(value, str) and value == value:
                    metrics[base + suffix] = float(value)
    for name in ("paired_tests", "usage", "detectable_differences"):
        table = read_table(record.dir / f"{name}.csv")
        if table is not None:
            tables[name] = ("tables", table)
    return Tracked(folder=record.dir, metrics={"metrics": metrics}, tables=tables)


KIND = RunKind(name="summary", title="summary leaderboard", phase=3, notebooks=("summary",), params=SummaryParams,
               runner="evekit.runs.summary.run:SummaryRun", reads=None, plan_note="makes no model calls",
               one_per_run=True, track=track)
