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


def card(record: Any) -> str:
    """The summary's verdict in words, first on its report and in the index: per pair of models
    across tasks, what the Holm-adjusted paired tests support (`cards.comparisons_card`), and how
    many headline scores carry a trust flag."""
    from evekit.cards import MARK, comparisons_card

    try:
        tests = read_table(record.dir / "paired_tests.csv")
        board = read_table(record.dir / "leaderboard.csv")
        parts = (comparisons_card(tests.to_dict("records")) if tests is not None and len(tests)
                 else ["Only one model per task: nothing to compare."])
        if board is not None and len(board) and "trust" in board:
            flagged = board[board["trust"].fillna("").astype(str).str.len() > 0]
            if len(flagged):
                parts.append(f"{MARK} {len(flagged)} of {len(board)} headline scores carry a trust flag "
                             f"({', '.join(sorted(set(', '.join(flagged['trust']).split(', '))))}): "
                             "read them as marked in the leaderboard.")
        return " ".join(parts)
    except Exception:  # a half-written or foreign table must not break the index or the report
        return ""


KIND = RunKind(name="summary", title="summary leaderboard", phase=3, notebooks=("summary",), params=SummaryParams,
               runner="evekit.runs.summary.run:SummaryRun", reads=None, plan_note="makes no model calls",
               one_per_run=True, track=track, card=card)
