"""One ranking run, step by step, for the ranking notebook (the shape of `WinRateRun`)::

    run = RankingRun.from_notebook(globals())   # parameters, validated
    run.setup_table()                           # who is ranked, who judges
    run.load()                                  # read the files, match questions across models
    run.left_out_table()                        # rows left out, with the reason
    run.plan()                                  # which pairs on which question; the judge calls, printed
    run.judge()                                 # the pairwise panel -> battles (cached, concurrent)
    run.rate()                                  # Bradley–Terry ratings, pooled and per judge
    run.judges_table(); run.judge_agreement()   # per-judge rankings, Kendall's tau, disagreements
    run.plots()                                 # forest plot, win probabilities, rankings per judge
    run.save()                                  # battles.csv, ratings.csv, results.json, plots, run.json
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from evekit import ranking as R
from evekit.errors import DataError
from evekit.paths import safe_name
from evekit.runs.base import NotebookRun
from evekit.runs.ranking import battles as B
from evekit.runs.ranking import views
from evekit.runs.ranking.kind import KIND
from evekit.runs.ranking.params import RankingParams
from evekit.demo import DEMO_MODEL_NOTE, is_demo_model

__all__ = ["RankingRun"]


class RankingRun(NotebookRun):
    """The parameters, the matched answers, the battles and the ratings of one notebook run."""

    Params = RankingParams
    Kind = KIND

    def __init__(self, config: RankingParams, clients: dict[str, Any] | None = None) -> None:
        super().__init__(config, clients)
        self.matched: B.Matched | None = None
        self.pairs: pd.DataFrame | None = None
        self.call_plan: dict[str, Any] = {}
        self.battles: pd.DataFrame | None = None
        self.ratings: pd.DataFrame | None = None
        self.figures: tuple[pd.DataFrame, dict[str, Any]] | None = None  # the ratings plots() drew, its figures
        self.usage: dict[str, dict[str, Any]] = {}
        self.judge_seconds = 0.0

    # ------------------------------------------------------------------ before judging
    @property
    def demo_note(self) -> str | None:
        """The tiny-model caveat when the embedded model answers or judges."""
        c = self.config
        names = [m.name for m in c.model_specs] + [m.file for m in c.model_specs] + [j.model for j in c.judge_specs()]
        return DEMO_MODEL_NOTE if any(is_demo_model(n) for n in names) else None

    def setup_table(self) -> pd.DataFrame:
        """Who is ranked and who judges: one row per model and per judge (no secrets)."""
        c = self.config
        rows = [{"role": "baseline" if m.name == c.baseline else "model", "name": m.name, "source": m.shown_file,
                 "endpoint": "", "temperature": ""} for m in c.model_specs]
        rows += [{"role": "judge", "name": j.name, "source": j.model, "endpoint": j.base_url,
                  "temperature": c.judge_temperature if j.temperature is None else j.temperature} for j in c.judge_specs()]
        return pd.DataFrame(rows)

    def load(self) -> pd.DataFrame:
        """Read every model's file and match the questions; returns rows read and usable per model."""
        self.matched = B.match_models(self.config.model_specs, limit=self.config.limit, cluster_by=self.config.cluster_by)
        m = self.matched
        table = m.read.copy()
        table["questions_ranked_on"] = [int(m.answers[n].notna().sum()) for n in table["model"]]
        for note in m.notes + ([f"{m.n_over_limit} more matched question(s) beyond limit={self.config.limit} "
                                "are not judged"] if m.n_over_limit else []):
            print(note)
        return table

    def left_out_table(self) -> pd.DataFrame:
        """Every row not ranked on, with the reason (a failed generation, no other model's answer)."""
        return self._matched().left_out

    def plan(self) -> dict[str, Any]:
        """Choose the pairs per question and print the number of judge calls before any is made."""
        c = self.config
        m = self._matched()
        self.pairs = B.plan_pairs(m, max_pairs_per_question=c.max_pairs_per_question, seed=c.seed,
                                  both_orders=c.both_orders)
        self.call_plan = B.call_plan(m, self.pairs, len(c.judge_specs()), both_orders=c.both_orders,
                                     max_pairs_per_question=c.max_pairs_per_question)
        print(views.plan_text(self.call_plan))
        return self.call_plan

    # ------------------------------------------------------------------ judging and rating
    def judge(self) -> pd.DataFrame:
        """Every planned decision by every judge -> `battles`; returns the usage per judge."""
        if self.pairs is None:
            self.plan()
        panel = self.judge_panel("pairwise")
        start = time.perf_counter()
        try:
            self.battles = B.judge_battles(self._matched(), self.pairs, panel)
            self.usage = panel.usage_by_judge()
        finally:
            self.close_panel(panel)
        self.judge_seconds = time.perf_counter() - start
        table = pd.DataFrame.from_dict(self.usage, orient="index")
        counts = [col for col in table.columns if col != "seconds"]
        table[counts] = table[counts].fillna(0).astype(int)  # counts as counts (26, not 26.0)
        return table

    def counts(self) -> pd.DataFrame:
        """Per judge and pooled: battles, usable, ties, and those without a verdict (excluded)."""
        return R.battle_counts(self._battles())

    def rate(self) -> pd.DataFrame:
        """Bradley–Terry ratings (pooled, then each judge alone) with question-bootstrap intervals and
        the style-controlled variant; returns the pooled ratings for reading. A judge whose battles
        cannot be fitted (too few verdicts, models that never met) gets a note instead of rows."""
        c = self.config
        battles = self._battles()
        self.notes = []
        clusters = self.clusters()
        parts = [R.rate(battles, baseline=c.baseline, n_boot=c.n_boot, seed=c.seed, per_judge=False,
                        clusters=clusters)]
        for judge in sorted(battles["judge"].astype(str).unique()):
            try:
                part = R.rate(battles[battles["judge"] == judge], baseline=c.baseline, n_boot=c.n_boot,
                              seed=c.seed, per_judge=False, clusters=clusters)
            except DataError as exc:
                self.notes.append(f"judge {judge}: no rating of its own ({exc})")
                continue
            parts.append(part.assign(judge=judge))
        self.ratings = pd.concat(parts, ignore_index=True)
        self.ratings.attrs.update(parts[0].attrs)
        return views.ratings_view(self.ratings)

    def clusters(self) -> dict[str, str] | None:
        """question_id -> its cluster under `cluster_by` (the bootstrap resamples clusters), else None."""
        q = self._matched().questions
        return dict(zip(q["question_id"], q["cluster"])) if "cluster" in q else None

    def judges_table(self) -> pd.DataFrame:
        """Each judge's 'rank · rating [CI]' beside the pooled one."""
        return views.judges_view(self._rated())

    def judge_agreement(self) -> pd.DataFrame:
        """Kendall's tau between every two judges' rankings; prints the judges' disagreements on
        models whose pooled intervals do not overlap."""
        ratings = self._rated()
        tau = R.kendall_tau_between_judges(ratings)
        for note in self.notes + self.disagreements():
            print(note)
        if tau.empty:
            print("One judge with its own ratings: no agreement between judges to show.")
        return tau

    def disagreements(self) -> list[str]:
        return R.judge_disagreements(self._rated())

    def judge_validation_table(self) -> pd.DataFrame | None:
        """Per judge: its battles, those without a verdict, and (with `judge_validation`, a
        judge-validation results.json of the pairwise kind) its validated accuracy and kappa against
        expert labels; a warning is printed for each judge whose kappa is below 0.4."""
        from evekit.judges.validation import judge_trust, trust_columns, trust_warnings
        from evekit.paths import resolve_path

        path = self.config.judge_validation
        if path is None:
            print("No judge_validation given: how far these judges can be trusted is not shown "
                  "(run notebooks/judge_validation.ipynb with judge_kind='pairwise' and pass its results.json).")
            return None
        battles = self._battles()
        names = [j.name for j in self.config.judge_specs()]
        trust = judge_trust(resolve_path(path), names, kind="pairwise").set_index("judge")
        table = pd.DataFrame(index=pd.Index(names, name="judge"))
        table["battles"] = [int((battles["judge"] == n).sum()) for n in names]
        no_verdict = battles["winner"].fillna("").astype(str).eq("")
        table["no verdict"] = [int(((battles["judge"] == n) & no_verdict).sum()) for n in names]
        table = table.join(trust_columns(trust))
        self.trust = trust
        for warning in trust_warnings(trust.reset_index()):
            print(f"Warning: {warning}")
        return table

    def plots(self) -> None:
        """Show the three plots (save() writes them as PNG, the same images while the ratings stay)."""
        from evekit import plots

        ratings = self._rated()
        self.figures = (ratings, {name: plots.show(make(ratings)) for name, make in views.PLOTS.items()})

    def rationales(self, n: int = 5) -> pd.DataFrame:
        """A few judged decisions with the judge's rationale (sampled with the run's seed)."""
        return views.sample_rationales(self._battles(), n=n, seed=self.config.seed)

    # ------------------------------------------------------------------ saving
    def results(self) -> dict[str, Any]:
        """What results.json holds."""
        c, ratings, battles = self.config, self._rated(), self._battles()
        counts = R.battle_counts(battles)
        pooled = ratings[ratings["judge"] == R.POOLED]
        return {
            "task": c.task, "models": [m.name for m in c.model_specs], "baseline": c.baseline,
            "judges": [j.name for j in c.judge_specs()], "n_questions": len(self._matched().questions),
            **({"n_clusters": len(set(cl.values()))} if (cl := self.clusters()) is not None else {}),
            "n_battles": len(battles), "n_failed": int(counts.set_index("judge").at[R.POOLED, "excluded"]),
            "method": {"model": "Bradley–Terry, maximum likelihood (scipy), ties half a win, each battles.csv "
                                "row once", "scale": "Elo: 400 log10 odds, " +
                                ("baseline = 1000" if c.baseline else "mean = 1000"),
                       "interval": f"percentile bootstrap over {self._resampled()}, {c.n_boot} resamples, seed {c.seed}",
                       "rank": "1 + the number of models whose interval lies entirely above",
                       "style": "normalised answer-length difference as a covariate"},
            "ratings": pooled.drop(columns="judge").to_dict(orient="records"),
            "ratings_by_judge": {j: g.drop(columns="judge").to_dict(orient="records")
                                 for j, g in ratings[ratings["judge"] != R.POOLED].groupby("judge")},
            "counts": counts.to_dict(orient="records"),
            "undefined_resamples": ratings.attrs.get("undefined_resamples", {}),
            "kendall_tau": R.kendall_tau_between_judges(ratings).to_dict(orient="records"),
            "disagreements": self.disagreements(), "notes": self.notes + self._matched().notes,
            "judge_trust": (None if getattr(self, "trust", None) is None
                            else self.trust.reset_index().to_dict(orient="records")),
            "plan": self.call_plan, "usage": self.usage, "seconds": self.judge_seconds,
            "demo_model_note": self.demo_note, "params": c.as_dict(),
        }

    def _resampled(self) -> str:
        """What the bootstrap resampled, in words: "questions", or "12 clusters of questions (cluster_by source)"."""
        clusters = self.clusters()
        if clusters is None:
            return "questions"
        return f"{len(set(clusters.values()))} clusters of questions (cluster_by {self.config.cluster_by})"

    def save(self) -> Path:
        """Write outputs/<run_name>/ranking/<task>/ and print where."""
        c = self.config
        matched = self._matched()
        return views.save_outputs(
            c.run_dir / KIND.name / safe_name(c.task), battles=self._battles(), ratings=self._rated(), record=self.results(),
            run_name=c.run_name, task=c.task, models=matched.models,
            figures=self.figures[1] if self.figures and self.figures[0] is self._rated() else None,
            extra_tables={"left_out.csv": matched.left_out,
                          "kendall_tau.csv": R.kendall_tau_between_judges(self._rated())})

    def explorer(self) -> Any:
        """Every battle (per question, pair, order and judge), filterable by winner position, tie,
        abstained and judges disagree, and by judge; a row opens into both answers, the reference,
        the verdict and the rationale (`evekit.explorer`)."""
        from evekit.explorer import battle_explorer

        matched = self._matched()
        return battle_explorer(self._battles(), matched.answers, matched.questions, title=self.config.task)

    # ------------------------------------------------------------------ guards
    def _matched(self) -> B.Matched:
        assert self.matched is not None, "run load() first"
        return self.matched

    def _battles(self) -> pd.DataFrame:
        assert self.battles is not None, "run judge() first"
        return self.battles

    def _rated(self) -> pd.DataFrame:
        assert self.ratings is not None, "run rate() first"
        return self.ratings
