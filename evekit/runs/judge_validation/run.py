"""One judge-validation run, step by step, for notebooks/judge_validation.ipynb::

    run = ValidationRun.from_notebook(globals())   # parameters, validated (unknown name -> error)
    run.settings()                                 # who judges what, and the demo-model caveat
    run.load()                                     # expert-labelled items (CSV, JSONL, Parquet)
    run.judge()                                    # every judge on every item (cached, concurrent)
    run.table()                                    # accuracy, kappa, sensitivity, specificity per judge + vote
    run.per_case()                                 # accuracy per case type
    run.abstentions()                              # why judges gave no verdict
    run.plots()                                    # heatmap judge x case, accuracy with intervals
    run.disagreements(5)                           # items the panel got wrong, in full
    run.save()                                     # judge_validation.csv, per_case.csv, results.json, PNGs

The statistics are `evekit.judges.validation`; this module is the notebook's story and its files.
"""
from __future__ import annotations

from evekit.atomic import write_csv_atomic
import json
from pathlib import Path
from typing import Any

import pandas as pd

from evekit.judges import validation as V
from evekit.judges.verdicts import abstention_reasons
from evekit.paths import display_path, resolve_path, safe_name
from evekit.report import MISSING, json_safe, shown, write_text_atomic
from evekit.runs.base import NotebookRun
from evekit.runs.judge_validation.kind import KIND
from evekit.runs.judge_validation.params import ValidationParams
from evekit.runs.records import calls_outcome, write_run_record
from evekit.demo import demo_judge_note

__all__ = ["ValidationRun"]


class ValidationRun(NotebookRun):
    """The parameters, the labelled items and the judges' verdicts of one validation run."""

    Params = ValidationParams
    Kind = KIND

    def __init__(self, config: ValidationParams, clients: dict[str, Any] | None = None) -> None:
        super().__init__(config, clients)
        self.items: list[V.LabelItem] = []
        self.judged: pd.DataFrame | None = None
        self.results: pd.DataFrame | None = None
        self.cases: pd.DataFrame | None = None
        self.usage: dict[str, Any] = {}
        self.figures: dict[str, Any] = {}

    @property
    def judge_names(self) -> list[str]:
        return [j.name for j in self.config.judge_specs()]

    @property
    def pairwise(self) -> bool:
        return self.config.pairwise

    @property
    def both_orders(self) -> bool:
        """Both orders apply to pairwise judging only."""
        return self.config.both_orders and self.pairwise

    def settings(self) -> pd.DataFrame:
        """What is validated with what (no secrets); prints the demo-model caveat when it applies."""
        c = self.config
        if self.demo_judges:
            print(f"Note: {demo_judge_note(self.demo_judges)}")
        rows = {"judge kind": c.judge_kind, "labels": display_path(resolve_path(c.labels)),
                "limit": c.limit if c.limit else "all",
                **({"both orders": self.both_orders} if self.pairwise else {}),
                **{f"judge {j.name}": f"{j.model} at {j.base_url}" for j in c.judge_specs()},
                **{k: v for k, v in c.columns.items() if v}, "offline (replay from cache)": c.offline}
        return pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=pd.Index(list(rows), name="setting"))

    # -- load ---------------------------------------------------------------------------------
    def load(self) -> pd.DataFrame:
        """The labelled items; returns how many per case type and label."""
        c = self.config
        self.items, notes = V.load_labels(c.labels_path, c.judge_kind, limit=c.limit, **c.columns)
        for note in notes:
            print(f"Note: {note}")
            self.notes.append(note)
        df = pd.DataFrame([{"case": it.case or "(none)", "label": it.label} for it in self.items])
        counts = df.groupby(["case", "label"], sort=False).size().unstack("label", fill_value=0)
        counts.columns = [f"label {v}" for v in counts.columns]
        counts["items"] = counts.sum(axis=1)
        print(f"{len(self.items)} labelled items from {display_path(resolve_path(c.labels))}")
        return counts

    # -- judge --------------------------------------------------------------------------------
    def judge(self) -> pd.DataFrame:
        """Every judge on every item (pairwise: and swapped, with both_orders); returns per judge the
        verdicts, abstentions and requests."""
        c = self.config
        assert self.items, "run load() first"
        panel = self.judge_panel(c.judge_kind)
        try:
            self.judged = panel.judge(V.judge_cases(self.items, c.judge_kind, self.both_orders))
            self.usage = panel.usage_by_judge()
        finally:
            self.close_panel(panel)
        self._score()
        rows = []
        for name in self.judge_names:
            col = self.judged[f"judge_{name}"]
            used = col.notna()
            rows.append({"judge": name, "verdicts": int(used.sum()), "abstained": int((~used).sum()),
                         "requests": self.usage.get(name, {}).get("requests"),
                         "from cache": self.usage.get(name, {}).get("cache_hits")})
        return pd.DataFrame(rows).set_index("judge")

    def _score(self) -> None:
        c, names = self.config, self.judge_names
        if self.pairwise:
            self.results = V.pairwise_table(self.items, self.judged, names, both_orders=self.both_orders, seed=c.seed)
        else:
            self.results = V.pointwise_table(self.items, self.judged, names, seed=c.seed)
        self.cases = V.per_case_table(self.items, self.judged, names, both_orders=self.both_orders)

    def _judged(self) -> pd.DataFrame:
        assert self.judged is not None and self.results is not None, "run judge() first"
        return self.judged

    # -- tables -------------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """Per judge and the panel's vote: n, accuracy, kappa, sensitivity, specificity [95% CI], abstained."""
        self._judged()
        t = self.results.copy()
        out = pd.DataFrame({"judge": t["judge"], "n": t["n"]})

        def ci(name: str, pct: bool) -> list[str]:
            f = (lambda v: f"{v:.0%}") if pct else (lambda v: f"{v:.2f}")  # noqa: E731
            return [MISSING if pd.isna(v) else f"{f(v)} [{f(lo)}, {f(hi)}]" if pd.notna(lo) else f(v)
                    for v, lo, hi in t[[name, f"{name}_ci_low", f"{name}_ci_high"]].to_numpy()]

        out["accuracy [95% CI]"] = ci("accuracy", True)
        out["kappa [95% CI]"] = ci("kappa", False)
        if self.pairwise:
            if self.both_orders:
                out["position consistency [95% CI]"] = ci("position_consistency", True)
            out["position bias [95% CI]"] = ci("position_bias", True)
            out["ties"] = [MISSING if pd.isna(v) else f"{v:.0%}" for v in t["tie_rate"]]
        else:
            out["sensitivity [95% CI]"] = ci("sensitivity", True)
            out["specificity [95% CI]"] = ci("specificity", True)
        out["abstained"] = t["abstained"]
        out["judge"] = out["judge"].replace({V.VOTE: "panel vote"})
        for note in self.table_notes():
            print(f"Note: {note}")
        return out.set_index("judge")

    def table_notes(self) -> list[str]:
        """Sentences a reader needs next to the table (kappa below the warning threshold, no verdicts)."""
        notes = []
        for r in self.results.itertuples():
            who = "the panel's vote" if r.judge == V.VOTE else f"judge {r.judge}"
            if r.n == 0:
                notes.append(f"{who} gave no usable verdict: it has no accuracy (not 0)")
            elif pd.isna(r.kappa):
                notes.append(f"{who}: kappa is undefined (every verdict and every label the same)")
            elif r.kappa < V.KAPPA_WARNING:
                notes.append(f"{who}: kappa {r.kappa:.2f} < {V.KAPPA_WARNING}, little agreement with the experts "
                             "beyond chance: scores it gives are not to be trusted")
        return notes

    def per_case(self) -> pd.DataFrame:
        """Accuracy per case type (rows) and judge (columns), as 'k/n'."""
        self._judged()
        t = self.cases.assign(judge=self.cases["judge"].replace({V.VOTE: "panel vote"}))
        t["shown"] = [MISSING if n == 0 else f"{a:.0%} ({int(k)}/{int(n)})"
                      for a, k, n in zip(t["accuracy"], t["correct"], t["n"])]
        wide = t.pivot(index="case", columns="judge", values="shown")
        wide = wide.reindex(index=list(dict.fromkeys(t["case"])), columns=list(dict.fromkeys(t["judge"])))
        return wide

    def abstentions(self) -> pd.DataFrame:
        """Per judge: why it gave no verdict, with counts (copied template, conflicting verdicts, ...)."""
        judged = self._judged()
        rows = [{"judge": n, **{r: c for r, c in abstention_reasons(judged[f"judge_{n}_error"]).items()}}
                for n in self.judge_names]
        table = pd.DataFrame(rows).set_index("judge").fillna(0).astype(int)
        if table.empty or table.shape[1] == 0:
            print("No abstentions: every judge gave a usable verdict on every item.")
        return table

    def disagreements(self, n: int = 5) -> pd.DataFrame:
        """Items where the panel's vote differs from the label (or the vote is missing), in full."""
        judged = self._judged()
        if self.pairwise:
            decisions = V.pairwise_decisions(self.items, self.both_orders)
            rows = []
            for (it, order), (_, r) in zip(decisions, judged.iterrows()):
                vote = r["judge_voting"]
                oriented = None if vote is None else (vote if order == 0 else V.SWAP[vote])
                if oriented != it.label:
                    rows.append({"row": it.row, "case": it.case, "order": "as given" if order == 0 else "swapped",
                                 "question": it.question, "answer_a": it.answer_a, "answer_b": it.answer_b,
                                 "label": it.label, "vote (file's orientation)": oriented,
                                 **{f"{j} rationale": r[f"judge_{j}_reasoning"] or r[f"judge_{j}_error"]
                                    for j in self.judge_names}})
        else:
            rows = []
            for it, (_, r) in zip(self.items, judged.iterrows()):
                vote = r["judge_voting"]
                if pd.isna(vote) or int(vote) != it.label:
                    rows.append({"row": it.row, "case": it.case, "question": it.question, "answer": it.answer,
                                 "label": it.label, "vote": MISSING if pd.isna(vote) else int(vote),
                                 **{f"{j} rationale": r[f"judge_{j}_reasoning"] or r[f"judge_{j}_error"]
                                    for j in self.judge_names}})
        table = pd.DataFrame(rows)
        print(f"{len(table)} of {len(judged)} decisions where the panel's vote is not the label"
              + (f" (showing {min(n, len(table))})" if len(table) > n else ""))
        return shown(table.head(n)) if len(table) else table

    # -- plots --------------------------------------------------------------------------------
    def plots(self) -> dict[str, Any]:
        """Heatmap of accuracy per judge and case type, and accuracy per judge with its interval."""
        from evekit import plots

        for fig in self._draw_figures().values():
            plots.show(fig)
        return self.figures

    def _draw_figures(self) -> dict[str, Any]:
        from evekit import plots

        self._judged()
        c = self.cases.assign(judge=self.cases["judge"].replace({V.VOTE: "panel vote"}))
        matrix = c.pivot(index="judge", columns="case", values="accuracy")
        matrix = matrix.reindex(index=list(dict.fromkeys(c["judge"])), columns=list(dict.fromkeys(c["case"])))
        title = f"{self.config.judge_kind} judges vs expert labels"
        ax = plots.heatmap(matrix, vmin=0.0, vmax=1.0, cmap="RdYlGn", xlabel="case type", ylabel="judge",
                           cbar_label="accuracy (share of items judged right)", fmt=".0%",
                           title=f"Accuracy per case type · {title}\n(blank: no usable verdict)")
        ax.tick_params(axis="x", rotation=35)
        for label in ax.get_xticklabels():
            label.set_ha("right")
        self.figures = {"accuracy_by_case.png": ax.figure}
        t = self.results
        ax2 = plots.proportion_hbar(t["accuracy"], t["accuracy_ci_low"], t["accuracy_ci_high"],
                                    labels=t["judge"].replace({V.VOTE: "panel vote"}), n=t["n"], ylabel="judge",
                                    xlabel="accuracy against the expert labels (95% CI)",
                                    reference=self.majority_share, reference_label=(
                                        f"always the majority label ({self.majority_share:.0%})"),
                                    title=f"Accuracy · {title}")
        self.figures["accuracy.png"] = ax2.figure
        return self.figures

    @property
    def majority_share(self) -> float:
        """Accuracy of always giving the most frequent label (what a constant judge scores)."""
        labels = pd.Series([it.label for it in self.items])
        return float(labels.value_counts(normalize=True).iloc[0]) if len(labels) else float("nan")

    # -- save ---------------------------------------------------------------------------------
    def interpretation(self) -> str:
        """What the numbers mean for the scores these judges give (Markdown)."""
        t = self.results.set_index("judge")
        lines = []
        vote = t.loc[V.VOTE]
        base = self.majority_share
        if pd.isna(vote["accuracy"]):
            lines.append("The panel gave no usable verdict: nothing can be said about its accuracy.")
        else:
            lines.append(f"The panel's vote agrees with the expert labels on {vote['accuracy']:.0%} of {int(vote['n'])} "
                         f"decisions (95% CI {vote['accuracy_ci_low']:.0%} to {vote['accuracy_ci_high']:.0%}); always "
                         f"giving the most frequent label would score {base:.0%}.")
            if pd.notna(vote["kappa"]):
                lines.append(f"Cohen's kappa against the labels is {vote['kappa']:.2f}: "
                             + ("below 0.4, so its verdicts say little beyond chance." if vote["kappa"] < V.KAPPA_WARNING
                                else "judged scores from this panel can be read with the interval in mind."))
        if self.demo_judges:
            lines.append(demo_judge_note(self.demo_judges))
        lines.append("Pass `judge_validation` (this run's results.json) to a task or win-rate notebook to show "
                     "these numbers next to the judges' scores.")
        return "\n\n".join(lines)

    def save(self) -> Path:
        """judge_validation.csv, per_case.csv, verdicts.csv, the PNGs, results.json and run.json."""
        import matplotlib.pyplot as plt

        from evekit import plots

        judged = self._judged()
        c = self.config
        d = c.run_dir / KIND.name / safe_name(c.judge_kind)
        d.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(self.results, d / "judge_validation.csv", index=False)
        write_csv_atomic(self.cases, d / "per_case.csv", index=False)
        verdicts = self._verdicts_table(judged)
        write_csv_atomic(verdicts, d / "verdicts.csv", index=False)
        if not self.figures:  # drawn here, not shown: the notebook skipped its plots cell
            self._draw_figures()
        for name, fig in self.figures.items():
            plots.save_figure(fig, d / name)
            plt.close(fig)
        usage = dict(self.usage)
        notes = list(self.notes) + self.table_notes()
        if self.demo_judges:
            notes.append(demo_judge_note(self.demo_judges))
        record = {
            "kind": KIND.name, "judge_kind": c.judge_kind, "labels": c.labels, "n": len(self.items),
            "n_decisions": len(judged), "judges": self.judge_names, "demo_judges": self.demo_judges,
            "majority_label_share": self.majority_share,
            "table": self.results.to_dict("records"), "per_case": self.cases.to_dict("records"),
            "abstentions": {n: abstention_reasons(judged[f"judge_{n}_error"]) for n in self.judge_names},
            "notes": notes, "usage": usage, "seconds": self.seconds,
            "params": c.as_dict(),
        }
        write_text_atomic(d / "results.json", json.dumps(json_safe(record), indent=2, ensure_ascii=False) + "\n")
        given = pd.concat([judged[f"judge_{n}"] for n in self.judge_names]) if self.judge_names else pd.Series([])
        errors = [e for n in self.judge_names for e in judged[f"judge_{n}_error"]]
        write_run_record(d, kind=KIND, notebook=KIND.notebooks[0], run_name=c.run_name,
                         judge_kind=c.judge_kind, judges=self.judge_names,
                         calls=[calls_outcome("judge calls", len(given), errors=errors)])
        print(f"Saved outputs to {display_path(d)}")
        return d

    def explorer(self) -> Any:
        """Every validated answer (or pairwise decision), filterable by whether the panel's vote is
        the expert label, abstentions, judges disagree and case type; a row opens into the question,
        reference, answer(s), label and each judge's verdict and reasoning (`evekit.explorer`)."""
        from evekit.explorer import validation_explorer

        return validation_explorer(self._verdicts_table(self._judged()), self.judge_names, items=self.items,
                                   pairwise=self.pairwise, title=f"{self.config.judge_kind} judges")

    def _verdicts_table(self, judged: pd.DataFrame) -> pd.DataFrame:
        """One row per decision: the item, its label and every judge's verdict, reasoning and error."""
        if self.pairwise:
            decisions = V.pairwise_decisions(self.items, self.both_orders)
            base = pd.DataFrame([{"row": it.row, "case": it.case, "order": order, "label": it.label,
                                  "question": it.question} for it, order in decisions])
        else:
            base = pd.DataFrame([{"row": it.row, "case": it.case, "label": it.label, "question": it.question,
                                  "answer": it.answer} for it in self.items])
        keep = [col for n in self.judge_names for col in (f"judge_{n}", f"judge_{n}_reasoning", f"judge_{n}_error",
                                                          f"judge_{n}_method", f"judge_{n}_raw")]
        return pd.concat([base, judged[keep + ["judge_voting"]].reset_index(drop=True)], axis=1)

