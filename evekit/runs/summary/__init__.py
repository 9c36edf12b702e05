"""The summary: one leaderboard over a run's results (`SummaryRun`; the tables are `board`).

Names are imported on first use (`evekit.lazy`): the batch runner reads `KIND` without the runner."""
from evekit.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {"kind": ("KIND",), "params": ("SummaryParams",),
                                                      "run": ("SummaryRun",)})
