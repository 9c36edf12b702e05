"""The summary notebook's parameters."""
from __future__ import annotations

from dataclasses import dataclass

from evekit.runs.params import Output, Seeded, param

__all__ = ["SummaryParams"]


@dataclass(kw_only=True)
class SummaryParams(Seeded, Output):
    """Which runs go on one board: `run_name` and `compare_runs`."""

    compare_runs: list = param(help='more runs to put on the same board, e.g. ["demo-5shot"]', group="what",
                               factory=list)
