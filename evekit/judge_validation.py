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

import inspect
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evekit.errors import ParameterError
from evekit.judges import JudgePanel, validate_judges
from evekit.judges import validation as V
from evekit.judges.kinds import KINDS
from evekit.judges.verdicts import abstention_reasons
from evekit.params import check_injected, check_type
from evekit.paths import display_path, resolve_path, safe_name
from evekit.report import json_safe, public_params, write_run_record
from evekit.server import demo_judge_note, is_demo_model
from evekit.types import JUDGE_MAX_TOKENS, JudgeSpec

__all__ = ["ValidationConfig", "ValidationRun", "validate_params", "parameter_defaults", "PARAMETER_HELP", "DEFAULT_LABELS"]

DEFAULT_LABELS = {"pairwise": "data/judge_validation/pairwise.jsonl"}
POINTWISE_LABELS = "data/judge_validation/pointwise.jsonl"
MISSING = "–"


@dataclass
class ValidationConfig:
    """The validated parameters of the judge-validation notebook (see `validate_params`)."""

    labels: str
    judge_kind: str
    judges: list[JudgeSpec]
    limit: int | None = None
    both_orders: bool = False
    seed: int = 1234
    temperature: float = 0.0
    max_tokens: int = JUDGE_MAX_TOKENS
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 4
    cache_dir: str = "outputs/cache"
    offline: bool = False
    run_name: str = "demo"
    output_dir: str = "outputs"
    columns: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> "ValidationConfig":
        """Pick the parameter names out of a notebook's globals() and validate them; a name papermill
        injected that is not a parameter is an error."""
        names = inspect.signature(validate_params).parameters
        check_injected(namespace, list(names))
        return validate_params(**{k: namespace[k] for k in names if k in namespace})

    @property
    def out_dir(self) -> Path:
        return resolve_path(self.output_dir) / safe_name(self.run_name) / "judge_validation" / safe_name(self.judge_kind)

    @property
    def labels_path(self) -> Path:
        return resolve_path(self.labels)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["judges"] = [{k: v for k, v in asdict(j).items() if v is not None} for j in self.judges]
        d.update(d.pop("columns"))
        return public_params(d)


# One line of help per parameter: the comments of the notebook's parameters cell
# (scripts/build_notebooks.py writes that cell from `validate_params`' signature and these).
PARAMETER_HELP = {
    "labels": "CSV, JSONL or Parquet of expert labels (None: the bundled set of the kind)",
    "judge_kind": '"fact_check", "context", "refusal" or "pairwise"',
    "judges": "list of {name, model, base_url, api_key_env}",
    "limit": "None: every item",
    "both_orders": "pairwise: judge each pair as given and swapped",
    "seed": "fixes the bootstrap intervals",
    "temperature": "the judges' (a judge entry may set its own)",
    "max_tokens": "per judge reply",
    "concurrency": "requests in flight at once",
    "timeout": "seconds per request",
    "max_retries": "retries of a failed request, with backoff",
    "cache_dir": "every call is cached here; a rerun resumes",
    "offline": "True: replay from the cache only, a miss is an error",
    "run_name": "outputs go to <output_dir>/<run_name>/judge_validation/<judge_kind>/",
    "output_dir": "root folder of every run",
    "question_column": "your file's column names (None: question, reference, answer, ...)",
    "reference_column": "None: reference", "answer_column": "None: answer (pointwise)",
    "answer_a_column": "None: answer_a (pairwise, shown first)", "answer_b_column": "None: answer_b (pairwise)",
    "label_column": "None: label (1/0 or PASS/FAIL; pairwise A/B/tie)", "case_column": "None: case (optional)",
    "context_column": "None: context (documents; context and refusal kinds)",
}


def parameter_defaults() -> dict[str, Any]:
    """Every notebook parameter with its default, in order (the parameters cell's lines)."""
    return {name: p.default for name, p in inspect.signature(validate_params).parameters.items()}


def validate_params(*, labels: str | None = None, judge_kind: str = "fact_check", judges: Any = (),
                    limit: int | None = None, both_orders: bool = False, seed: int = 1234,
                    temperature: float = 0.0, max_tokens: int = JUDGE_MAX_TOKENS, concurrency: int = 8,
                    timeout: float = 120.0, max_retries: int = 4, cache_dir: str = "outputs/cache",
                    offline: bool = False, run_name: str = "demo", output_dir: str = "outputs",
                    question_column: str | None = None, reference_column: str | None = None,
                    answer_column: str | None = None, answer_a_column: str | None = None,
                    answer_b_column: str | None = None, label_column: str | None = None,
                    case_column: str | None = None, context_column: str | None = None) -> ValidationConfig:
    """Check the notebook's parameters at once, so a typo fails before any judge call.

    `labels` None: the bundled set of the kind (data/judge_validation/pairwise.jsonl for
    pairwise, pointwise.jsonl otherwise). `both_orders` applies to the pairwise kind.
    """
    if judge_kind not in KINDS:
        raise ParameterError(f"judge_kind={judge_kind!r} is not valid; use one of: {', '.join(KINDS)}")
    columns = {"question_column": question_column, "reference_column": reference_column,
               "answer_column": answer_column, "answer_a_column": answer_a_column,
               "answer_b_column": answer_b_column, "label_column": label_column, "case_column": case_column,
               "context_column": context_column}
    for name, value, types, optional in (
        ("labels", labels, (str,), True), ("limit", limit, (int,), True), ("both_orders", both_orders, (bool,), False),
        ("seed", seed, (int,), False), ("temperature", temperature, (int, float), False),
        ("max_tokens", max_tokens, (int,), False), ("concurrency", concurrency, (int,), False),
        ("timeout", timeout, (int, float), False), ("max_retries", max_retries, (int,), False),
        ("cache_dir", cache_dir, (str,), False), ("offline", offline, (bool,), False),
        ("run_name", run_name, (str,), False), ("output_dir", output_dir, (str,), False),
        *((k, v, (str,), True) for k, v in columns.items()),
    ):
        check_type(name, value, types, optional)
    for name, value in (("limit", limit), ("concurrency", concurrency), ("max_tokens", max_tokens)):
        if value is not None and value < 1:
            raise ParameterError(f"parameter {name}={value!r} must be at least 1")
    if max_retries < 0:
        raise ParameterError(f"parameter max_retries={max_retries!r} must be 0 or more")
    if both_orders and judge_kind != "pairwise":
        raise ParameterError("both_orders=True applies to judge_kind='pairwise' only")
    if not isinstance(judges, (list, tuple)) or not judges:
        raise ParameterError(f"judges must be a non-empty list of {{name, model, base_url, api_key_env}}, got {judges!r}")
    specs = validate_judges(list(judges))
    labels = labels or DEFAULT_LABELS.get(judge_kind, POINTWISE_LABELS)
    if not resolve_path(labels).is_file():
        raise ParameterError(f"labels: file not found: {labels} (tried {Path(labels).resolve()} and {resolve_path(labels)})")
    return ValidationConfig(labels=labels, judge_kind=judge_kind, judges=specs, limit=limit, both_orders=both_orders,
                            seed=seed, temperature=float(temperature), max_tokens=max_tokens, concurrency=concurrency,
                            timeout=float(timeout), max_retries=max_retries, cache_dir=cache_dir, offline=offline,
                            run_name=run_name, output_dir=output_dir, columns=columns)


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    """A table as a reader sees it: floats rounded, missing values as '–' (never NaN or 0)."""
    t = table.copy()
    floats = t.select_dtypes("float").columns
    t[floats] = t[floats].round(3)
    return t.astype(object).where(t.notna(), MISSING)


class ValidationRun:
    """The parameters, the labelled items and the judges' verdicts of one validation run.

    `clients` (judge name -> an object with `.generate(requests, desc)` and `.usage`) replaces the
    judges' ModelClients, for tests.
    """

    def __init__(self, config: ValidationConfig, clients: dict[str, Any] | None = None) -> None:
        self.config = config
        self.clients = clients
        self.items: list[V.LabelItem] = []
        self.notes: list[str] = []
        self.judged: pd.DataFrame | None = None
        self.results: pd.DataFrame | None = None
        self.cases: pd.DataFrame | None = None
        self.usage: dict[str, Any] = {}
        self.figures: dict[str, Any] = {}
        self._started = time.monotonic()

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> "ValidationRun":
        return cls(ValidationConfig.from_notebook(namespace))

    @property
    def judge_names(self) -> list[str]:
        return [j.name for j in self.config.judges]

    @property
    def demo_judges(self) -> list[str]:
        return [j.name for j in self.config.judges if is_demo_model(j.model)]

    @property
    def pairwise(self) -> bool:
        return self.config.judge_kind == "pairwise"

    def settings(self) -> pd.DataFrame:
        """What is validated with what (no secrets); prints the demo-model caveat when it applies."""
        c = self.config
        if self.demo_judges:
            print(f"Note: {demo_judge_note(self.demo_judges)}")
        rows = {"judge kind": c.judge_kind, "labels": c.labels, "limit": c.limit if c.limit else "all",
                **({"both orders": c.both_orders} if self.pairwise else {}),
                **{f"judge {j.name}": f"{j.model} at {j.base_url}" for j in c.judges},
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
        print(f"{len(self.items)} labelled items from {c.labels}")
        return counts

    # -- judge --------------------------------------------------------------------------------
    def judge(self) -> pd.DataFrame:
        """Every judge on every item (pairwise: and swapped, with both_orders); returns per judge the
        verdicts, abstentions and requests."""
        c = self.config
        assert self.items, "run load() first"
        panel = JudgePanel(c.judges, c.judge_kind, concurrency=c.concurrency, timeout=c.timeout,
                           max_retries=c.max_retries, cache_dir=resolve_path(c.cache_dir), offline=c.offline,
                           temperature=c.temperature, max_tokens=c.max_tokens, clients=self.clients)
        try:
            self.judged = panel.judge(V.judge_cases(self.items, c.judge_kind, c.both_orders))
            self.usage = panel.usage_by_judge()
        finally:
            if self.clients is None:
                panel.close()
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
            self.results = V.pairwise_table(self.items, self.judged, names, both_orders=c.both_orders, seed=c.seed)
        else:
            self.results = V.pointwise_table(self.items, self.judged, names, seed=c.seed)
        self.cases = V.per_case_table(self.items, self.judged, names, both_orders=c.both_orders)

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
            if self.config.both_orders:
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
            decisions = V.pairwise_decisions(self.items, self.config.both_orders)
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
        return _shown(table.head(n)) if len(table) else table

    # -- plots --------------------------------------------------------------------------------
    def plots(self) -> dict[str, Any]:
        """Heatmap of accuracy per judge and case type, and accuracy per judge with its interval."""
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
        d = c.out_dir
        d.mkdir(parents=True, exist_ok=True)
        self.results.to_csv(d / "judge_validation.csv", index=False)
        self.cases.to_csv(d / "per_case.csv", index=False)
        verdicts = self._verdicts_table(judged)
        verdicts.to_csv(d / "verdicts.csv", index=False)
        if not self.figures:
            self.plots()
        for name, fig in self.figures.items():
            plots.save_figure(fig, d / name)
            plt.close(fig)
        usage = dict(self.usage)
        notes = list(self.notes) + self.table_notes()
        if self.demo_judges:
            notes.append(demo_judge_note(self.demo_judges))
        record = {
            "kind": "judge_validation", "judge_kind": c.judge_kind, "labels": c.labels, "n": len(self.items),
            "n_decisions": len(judged), "judges": self.judge_names, "demo_judges": self.demo_judges,
            "majority_label_share": self.majority_share,
            "table": self.results.to_dict("records"), "per_case": self.cases.to_dict("records"),
            "abstentions": {n: abstention_reasons(judged[f"judge_{n}_error"]) for n in self.judge_names},
            "notes": notes, "usage": usage, "seconds": round(time.monotonic() - self._started, 3),
            "params": c.as_dict(),
        }
        (d / "results.json").write_text(json.dumps(json_safe(record), indent=2, ensure_ascii=False) + "\n")
        write_run_record(d, kind="judge_validation", notebook="judge_validation", run_name=c.run_name,
                         judge_kind=c.judge_kind, judges=self.judge_names)
        print(f"Saved outputs to {display_path(d)}")
        return d

    def _verdicts_table(self, judged: pd.DataFrame) -> pd.DataFrame:
        """One row per decision: the item, its label and every judge's verdict, reasoning and error."""
        if self.pairwise:
            decisions = V.pairwise_decisions(self.items, self.config.both_orders)
            base = pd.DataFrame([{"row": it.row, "case": it.case, "order": order, "label": it.label,
                                  "question": it.question} for it, order in decisions])
        else:
            base = pd.DataFrame([{"row": it.row, "case": it.case, "label": it.label, "question": it.question,
                                  "answer": it.answer} for it in self.items])
        keep = [col for n in self.judge_names for col in (f"judge_{n}", f"judge_{n}_reasoning", f"judge_{n}_error",
                                                          f"judge_{n}_method", f"judge_{n}_raw")]
        return pd.concat([base, judged[keep + ["judge_voting"]].reset_index(drop=True)], axis=1)

