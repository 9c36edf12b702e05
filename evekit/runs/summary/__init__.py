"""The summary: one leaderboard over a run's results (`SummaryRun`; the tables are `board`)."""
from evekit.runs.summary.kind import KIND
from evekit.runs.summary.params import SummaryParams
from evekit.runs.summary.run import SummaryRun

__all__ = ["KIND", "SummaryRun", "SummaryParams"]
