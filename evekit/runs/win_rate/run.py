"""One win-rate run, step by step, for the win-rate notebook (the shape of `evekit.run.TaskRun`)::

    run = WinRateRun.from_notebook(globals())   # parameters, validated
    run.setup_table()                           # who is compared, who judges
    run.load()                                  # read the CSVs, match questions, one comparison per model pair
    run.unmatched_table()                       # rows left out, with the reason
    run.judge()                                 # judge calls (cached, concurrent); per judge: abstentions, trust
    run.summary_table()                         # verdict paragraph and win rates per comparison
    run.plots()                                 # shares won, position bias, judge agreement
    run.rationales(5)                           # what the judges said
    run.save()                                  # results.csv, summary.csv, plots, metrics.json per comparison
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from evekit.report import markdown_text, shown
from evekit.runs.base import NotebookRun
from evekit.runs.win_rate import views
from evekit.runs.win_rate.kind import KIND
from evekit.runs.win_rate.params import WinRateParams
from evekit.runs.win_rate.judging import run_judges
from evekit.runs.win_rate.matching import Comparison, load_comparisons

__all__ = ["WinRateRun"]


class WinRateRun(NotebookRun):
    """The parameters, the comparisons and what the judges said, for one notebook run."""

    Params = WinRateParams
    Kind = KIND

    def __init__(self, config: WinRateParams, clients: dict[str, Any] | None = None) -> None:
        super().__init__(config, clients)
        self.comparisons: list[Comparison] = []
        self.usage: dict[str, dict[str, Any]] = {}
        # Per comparison (its label): the results plots() drew from, and its figures.
        self.figures: dict[str, tuple[pd.DataFrame, dict[str, Any]]] = {}

    def setup_table(self) -> pd.DataFrame:
        """Who is compared and who judges: one row per model and per judge (no secrets); a note
        when a judge is the embedded demo model."""
        for note in self.demo_notes():
            print(f"Note: {note}")
        return views.setup_table(self.config).set_index("role")  # a named first column, not 0..n

    def load(self) -> pd.DataFrame:
        """Every model_a x model_b pair, matched by question; returns what was read, matched and left out."""
        c = self.config
        self.comparisons = load_comparisons(c.model_a_specs, c.model_b_specs, limit=c.limit, cluster_by=c.cluster_by)
        return views.matching_table(self.comparisons).set_index("comparison")

    def unmatched_table(self) -> pd.DataFrame:
        """Every row left out of the judging, with the reason."""
        return views.unmatched_table(self._loaded())

    def judge(self) -> pd.DataFrame:
        """Ask every judge about every pair of every comparison; returns the usage per judge."""
        c = self.config
        panel = self.judge_panel("pairwise")
        try:
            self.usage = run_judges(self._loaded(), panel, seed=c.seed, both_orders=c.both_orders, alpha=c.alpha)
        finally:
            self.close_panel(panel)
        table = pd.DataFrame.from_dict(self.usage, orient="index")
        counts = [c for c in table.columns if c != "seconds"]
        table[counts] = table[counts].fillna(0).astype(int)  # counts as counts (26, not 26.0)
        return views.judge_table(self._judged(), self.config, table)

    def summary_table(self) -> None:
        """Per comparison: a heading, the verdict paragraph and the summary for reading."""
        from IPython.display import Markdown, display

        for comp in self._judged():
            # The models' names are the user's: text, never Markdown.
            display(Markdown(f"### {markdown_text(comp.name_a)} vs {markdown_text(comp.name_b)}\n\n"
                             f"{markdown_text(views.verdict_text(comp, self.config.alpha))}"))
            display(views.summary_view(comp))

    def eve_table(self) -> None:
        """Per comparison, the numbers by EVE's own definitions (`eve_definitions`): every judge
        decision counted, failed ones in the total, pooled and averaged over judges."""
        from IPython.display import Markdown, display

        from evekit.runs.win_rate.eve_definitions import eve_view

        for comp in self._judged():
            display(Markdown(f"### {markdown_text(comp.name_a)} vs {markdown_text(comp.name_b)}, by EVE's definitions"))
            display(eve_view(comp.results, comp.name_a, comp.name_b, comp.judges))

    def plots(self) -> None:
        """Show each comparison's plots (save() writes them as PNG, the same images while its
        results stay)."""
        from evekit import plots

        self.figures = {comp.label: (comp.results, {name: plots.show(make(comp)) for name, make in views.PLOTS.items()})
                        for comp in self._judged()}

    def corrected_scores(self) -> pd.DataFrame | None:
        """Per comparison with a labelled sheet (`expert_labels`): shows the panel's alpaca win rate
        of A, the same corrected by the expert's labels (PPI++) and from the labels alone, with their
        intervals, the width ratio and the panel's agreement with the labels (`corrected_table`);
        returns each judge's and the vote's accuracy and kappa against the labels with their
        intervals (`label_agreement`), as the task notebooks do. None, with a line saying how,
        without sheets."""
        from IPython.display import display

        table = self.corrected_table()
        if table is None:
            return None
        display(shown(table))
        print("The judges against the expert labels on each comparison's labelled questions:")
        return shown(self.label_agreement().round(4))

    def label_agreement(self) -> pd.DataFrame | None:
        """Per comparison with a labelled sheet, each judge and the panel's vote against the expert's
        A / B / tie labels: n, accuracy and Cohen's kappa with their 95% intervals, abstained
        (`corrected.judges_against_labels`); None without sheets."""
        if not any(c.corrected for c in self._judged()):
            self.corrected_table()
        parts = [pd.DataFrame(c.corrected["judges"]).assign(comparison=c.label)
                 for c in self._judged() if c.corrected]
        if not parts:
            return None
        table = pd.concat(parts, ignore_index=True).set_index(["comparison", "judge"])
        for count in ("n", "abstained"):
            table[count] = pd.to_numeric(table[count]).astype("Int64")
        return table

    def corrected_table(self) -> pd.DataFrame | None:
        """The corrected win rates of `corrected_scores` (rows: comparison, score), or None with a
        line saying how to get them."""
        from evekit.runs.win_rate import corrected

        rows = {}
        for comp in self._judged():
            sheet = corrected.sheet_of(self.config.expert_labels, comp, len(self.comparisons))
            if sheet is None:
                continue
            fixed = corrected.corrected_win_rate(comp, sheet, seed=self.config.seed)
            comp.corrected = fixed
            raw = comp.summary.set_index("judge").loc["majority"]
            m = fixed["metric"]
            keys = ("value", "ci_low", "ci_high", "n", "method")
            rows[(comp.label, "alpaca_win_rate_a (raw vote)")] = {
                "value": raw["alpaca_win_rate_a"], "ci_low": raw.get("alpaca_win_rate_a_ci_low"),
                "ci_high": raw.get("alpaca_win_rate_a_ci_high"), "n": raw["n"], "method": "the panel's vote"}
            rows[(comp.label, corrected.METRIC)] = {**{k: m.get(k) for k in keys}, "n_labels": m["n_labels"],
                                                   "width_ratio": m.get("width_ratio"),
                                                   "agreement_with_labels": fixed["agreement"]["value"]}
            alone = m.get("labels_only") or {}
            rows[(comp.label, "alpaca_win_rate_a (labels only)")] = {k: alone.get(k) for k in keys}
            for note in fixed["notes"]:
                print(f"Note ({comp.label}): {note}")
        if not rows:
            print("No judge-corrected win rate: set expert_labels (a sheet from `evekit label sample "
                  "<comparison folder>`) to correct the judges' win rate for their errors.")
            return None
        table = pd.DataFrame.from_dict(rows, orient="index").dropna(axis=1, how="all")
        table.index = pd.MultiIndex.from_tuples(table.index, names=["comparison", "score"])
        for count in ("n", "n_labels"):
            if count in table:
                table[count] = pd.to_numeric(table[count]).astype("Int64")
        return table.round(4)

    def rationales(self, n: int = 5) -> pd.DataFrame:
        """A few judged decisions per comparison with the judge's rationale (sampled with the run's seed)."""
        return views.sample_rationales(self._judged(), n=n, seed=self.config.seed)

    def explorer(self) -> Any:
        """Every judge decision (per question, order and judge), filterable by who won, tie,
        abstained and judges disagree, and by judge; a row opens into both answers, who was shown
        first, the verdict and the rationale, and what the other judges said (`evekit.explorer`)."""
        from evekit.explorer import decision_explorer

        comps = self._judged()
        return decision_explorer(pd.concat([c.results for c in comps], ignore_index=True),
                                 title=", ".join(f"{c.name_a} vs {c.name_b}" for c in comps))

    def save(self) -> list[Path]:
        """Write one folder per comparison and print where (see `views.save_outputs`)."""
        comps = self._judged()
        figures = {comp.label: drawn[1] for comp in comps
                   if (drawn := self.figures.get(comp.label)) is not None and drawn[0] is comp.results}
        return views.save_outputs(comps, self.config, self.usage, figures=figures)

    def _loaded(self) -> list[Comparison]:
        assert self.comparisons, "run load() first"
        return self.comparisons

    def _judged(self) -> list[Comparison]:
        comps = self._loaded()
        assert all(c.summary is not None for c in comps), "run judge() first"
        return comps
