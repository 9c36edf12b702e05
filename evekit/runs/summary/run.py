"""The summary notebook's story, step by step::

    run = SummaryRun.from_notebook(globals())   # parameters, validated; which results were found
    run.leaderboard_wide(); run.board_table()   # headline metric per task and model, value [95% CI]
    run.chart()                                 # the leaderboard as a figure
    run.paired_tests()                          # are two models different? (exact, Holm-adjusted)
    run.detectable()                            # the smallest difference each task's n can detect
    run.rankings()                              # the ranking notebook's pooled ratings, if any
    run.usage()                                 # requests, cache hits, tokens, seconds
    run.save()                                  # leaderboard.csv, paired_tests.csv, ..., run.json
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from evekit.paths import display_path, output_path
from evekit.runs.base import NotebookRun
from evekit.runs.summary import board as lb
from evekit.runs.summary.kind import KIND
from evekit.runs.summary.params import SummaryParams

__all__ = ["SummaryRun"]


class SummaryRun(NotebookRun):
    """Every result of `run_name` (and `compare_runs`) on one board."""

    Params = SummaryParams
    Kind = KIND

    def __init__(self, config: SummaryParams, clients: Any = None) -> None:
        super().__init__(config, clients)
        self.entries = lb.collect(output_path(config.output_dir), self.runs)
        self.board = lb.leaderboard(self.entries)
        self.figure: Any = None
        self.tests: pd.DataFrame | None = None
        self.detectable_table: pd.DataFrame | None = None
        self.usage_table: pd.DataFrame | None = None

    @property
    def runs(self) -> list[str]:
        return [self.config.run_name, *self.config.compare_runs]

    def found(self) -> None:
        """How many results were found, and the demo model's caveat when it is on the board."""
        print(f"{len(self.entries)} results from runs {self.runs}")
        note = lb.demo_model_note(self.entries)
        if note:
            print(note)

    def leaderboard_wide(self) -> pd.DataFrame:
        """Models x tasks, each cell 'value [low, high]'."""
        return lb.leaderboard_wide(self.board)

    def board_table(self) -> pd.DataFrame:
        return self.board.round(4)

    def chart(self) -> Any:
        from evekit import plots

        self.figure = plots.show(plots.leaderboard_chart(self.board)) if len(self.board) else None
        return self.figure

    def paired_tests(self) -> pd.DataFrame | None:
        self.tests = lb.paired_tests(self.entries, seed=self.config.seed)
        if not len(self.tests):
            print("Only one model per task: nothing to compare.")
            return None
        for line in lb.verdicts(self.tests, lb.detectable_differences(self.entries)):
            print(line)
        note = lb.paired_note(self.entries)
        if note:
            print(f"Note: {note}")
        return self.tests.round(4)

    def detectable(self) -> pd.DataFrame:
        self.detectable_table = lb.detectable_differences(self.entries)
        for note in self.detectable_table["note"]:
            print(note)
        # the sentences above say what each row means; mdd '–': no difference is detectable at that n
        table = self.detectable_table[["task", "metric", "n", "mdd"]].round(3)
        return table.astype(object).where(table.notna(), "–")

    def rankings(self) -> pd.DataFrame | None:
        ranked = lb.rankings(output_path(self.config.output_dir), self.runs)
        if not len(ranked):
            print("No ranking in these runs.")
            return None
        return ranked.drop(columns="folder").round(1)

    def usage(self) -> pd.DataFrame:
        self.usage_table = lb.usage_totals(self.entries)
        return self.usage_table

    def save(self) -> Path:
        if self.tests is None:
            self.tests = lb.paired_tests(self.entries, seed=self.config.seed)
        if self.usage_table is None:
            self.usage_table = lb.usage_totals(self.entries)
        out = lb.save_summary(self.config.run_dir / KIND.name, self.board, self.tests, self.usage_table, self.figure,
                              detectable=self.detectable_table, run_name=self.config.run_name)
        print(f"Saved outputs to {display_path(out)}")
        return out
