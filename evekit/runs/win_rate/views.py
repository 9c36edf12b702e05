"""What a reader sees of a win-rate run: tables, the verdict paragraph, plots and the saved files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from evekit.atomic import write_csv_atomic, write_text_atomic
from evekit.paths import display_path
from evekit.report import json_safe
from evekit.runs.records import calls_outcome, write_run_record
from evekit.runs.win_rate.kind import KIND
from evekit.runs.win_rate.analysis import agreement_matrix, eve_metrics
from evekit.runs.win_rate.eve_definitions import eve_definitions
from evekit.runs.win_rate.params import ALPHA, WinRateParams
from evekit.runs.win_rate.matching import Comparison

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["setup_table", "judge_table", "matching_table", "unmatched_table", "summary_table", "summary_view", "verdict_text",
           "sample_rationales", "plot_comparison", "plot_position_bias", "plot_agreement", "save_outputs"]

# "average" is evekit's mean of the judges' per-question rates (orders combined), not EVE's pooled or
# averaged figures over decisions (those are in `eve_view` and under EVE's names in metrics.json).
_AGGREGATE_LABELS = {"majority": "majority vote", "average": "average of judges"}


def matching_table(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """How many rows each comparison read, matched, excluded and will judge."""
    return pd.DataFrame([{
        "comparison": c.label, "rows_a": c.n_rows_a, "rows_b": c.n_rows_b, "matched": c.n_matched,
        "unmatched_a": int((c.unmatched["model"] == c.name_a).sum()),
        "unmatched_b": int((c.unmatched["model"] == c.name_b).sum()),
        "failed_generation_excluded": len(c.failed_generation), "beyond_limit": c.n_over_limit,
        "judged": len(c.pairs), "identical_answers": int(c.pairs["identical"].sum()),
        "target_mismatch": c.target_mismatch,
    } for c in comparisons])


def unmatched_table(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """Every row left out of the judging, with the reason: no partner question, or a failed generation."""
    parts = []
    for c in comparisons:
        if len(c.unmatched):
            parts.append(c.unmatched.assign(comparison=c.label, reason="no matching question in the other file"))
        if len(c.failed_generation):
            f = c.failed_generation
            parts.append(pd.DataFrame({"comparison": c.label, "model": f["failed_in"], "file": "",
                                       "row": f["row_a"], "doc_id": "", "question": f["question"],
                                       "reason": "generation failed: " + f["error"].astype(str)}))
    cols = ["comparison", "reason", "model", "file", "row", "doc_id", "question"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def setup_table(cfg: WinRateParams) -> pd.DataFrame:
    """Who is compared and who judges: one row per model and per judge (no secrets)."""
    rows = [{"role": side, "name": m.name, "source": m.shown_file, "endpoint": "", "temperature": ""}
            for side, models in (("model_a", cfg.model_a_specs), ("model_b", cfg.model_b_specs)) for m in models]
    rows += [{"role": "judge", "name": j.name, "source": j.model, "endpoint": j.base_url,
              "temperature": cfg.judge_temperature if j.temperature is None else j.temperature}
             for j in cfg.judge_specs()]
    return pd.DataFrame(rows)


def judge_table(comparisons: Sequence[Comparison], cfg: WinRateParams, usage: pd.DataFrame) -> pd.DataFrame:
    """Per judge: its usage, its decisions without a usable verdict with their reasons (a copied
    template, a rationale naming the other side, ...), and with `judge_validation` its validated
    accuracy and kappa (a warning printed when kappa < 0.4); a note when a judge is the demo model."""
    from evekit.judges.validation import judge_trust, trust_columns, trust_warnings
    from evekit.judges.verdicts import abstention_reasons, reasons_text
    from evekit.paths import resolve_path

    table = usage.copy()
    results = pd.concat([c.results for c in comparisons], ignore_index=True)
    names = [j.name for j in cfg.judge_specs()]
    table = table.reindex(names)
    table["abstained"] = [int(results.loc[results["judge"] == n, "failed"].sum()) for n in names]
    table["abstention reasons"] = [reasons_text(abstention_reasons(results.loc[results["judge"] == n, "error"])) or "–"
                                   for n in names]
    notes = []
    if cfg.judge_validation:
        trust = judge_trust(resolve_path(cfg.judge_validation), names, kind="pairwise")
        table = table.join(trust_columns(trust))
        notes += [f"Warning: {w}" for w in trust_warnings(trust)]
    # the demo judges' caveat is said once, with the setup (WinRateRun.setup_table)
    for note in notes:
        print(f"Note: {note}" if not note.startswith("Warning") else note)
    table.index.name = "judge"
    return table


def summary_table(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """Every comparison's summary (as in summary.csv), one after the other."""
    return pd.concat([c.summary for c in comparisons], ignore_index=True)


def _pct_ci(v: float, lo: float, hi: float) -> str:
    if pd.isna(v):
        return ""
    return f"{v:.1%}" + (f" [{lo:.1%}, {hi:.1%}]" if not pd.isna(lo) else "")


def _ci(v: float, lo: float, hi: float) -> str:
    if pd.isna(v):
        return ""
    return f"{v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if not pd.isna(lo) else "")


def summary_view(comp: Comparison) -> pd.DataFrame:
    """The summary for reading: model names in the headers, rates as percentages with 95% CIs."""
    s = comp.summary
    a, b = comp.name_a, comp.name_b
    fmt = lambda col: s[col].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")  # noqa: E731
    fmt_ci = lambda col: [_ci(*r) for r in s[[col, f"{col}_ci_low", f"{col}_ci_high"]].to_numpy()]  # noqa: E731
    return pd.DataFrame({
        "judge": s["judge"].replace(_AGGREGATE_LABELS), "n": s["n"].map(lambda v: "" if pd.isna(v) else str(v)),
        **{f"{name} win rate [95% CI]": [_pct_ci(*r) for r in s[[f"win_rate_{x}", f"win_rate_{x}_ci_low",
                                                                    f"win_rate_{x}_ci_high"]].to_numpy()]
           for x, name in (("a", a), ("b", b))},
        "ties": s["tie_rate"].map(lambda v: "" if pd.isna(v) else f"{v:.1%}"),
        f"{a} alpaca [95% CI]": fmt_ci("alpaca_win_rate_a"), f"{b} alpaca [95% CI]": fmt_ci("alpaca_win_rate_b"),
        "win rate difference [95% CI]": fmt_ci("win_rate_difference"),
        "sign test p": s["sign_test_p"].map(lambda v: "" if pd.isna(v) else f"{v:.3g}"),
        "better (sign test)": s["better"].fillna(""),
        "position bias [95% CI]": fmt_ci("position_bias"), "longer answer wins": fmt("longer_wins"),
        "judge agreement [95% CI]": fmt_ci("judge_agreement"),
        **({"position consistency": fmt("position_consistency")} if comp.both_orders else {}),
        "failed": s["failed"].map(str),
    }).set_index("judge")


def verdict_text(comp: Comparison, alpha: float = ALPHA) -> str:
    """One paragraph a reader can quote: majority-vote counts, sign test, and the judges' average
    (evekit's, per question; EVE's own numbers are in `eve_view`)."""
    s = comp.summary.set_index("judge")
    m, avg = s.loc["majority"], s.loc["average"]
    avg_diff = (avg["win_rate_difference"], avg["win_rate_difference_ci_low"], avg["win_rate_difference_ci_high"])
    avg_alpaca = (avg["alpaca_win_rate_a"], avg["alpaca_win_rate_a_ci_low"], avg["alpaca_win_rate_a_ci_high"])
    if not m["n"]:
        return f"{comp.name_a} vs {comp.name_b}: no question received a usable verdict."
    p = m["sign_test_p"]
    if p < alpha:
        concl = f"{m['better']} is better (p = {p:.3g} < {alpha})"
    else:
        concl = (f"no significant difference at alpha = {alpha} (p = {p:.3g})" if not np.isnan(p)
                 else "no decisive verdicts")
    return (
        f"{comp.name_a} vs {comp.name_b}, {int(m['n'])} questions, majority of {len(comp.judges)} judge(s): "
        f"{comp.name_a} wins {int(m['wins_a'])} ({m['win_rate_a']:.0%}, 95% CI {m['win_rate_a_ci_low']:.0%}-"
        f"{m['win_rate_a_ci_high']:.0%}), {comp.name_b} wins {int(m['wins_b'])} ({m['win_rate_b']:.0%}), "
        f"{int(m['ties'])} ties. Sign test: {concl}. Average across judges: win rate "
        f"{avg['win_rate_a']:.3f} vs {avg['win_rate_b']:.3f} (difference {_ci(*avg_diff)}, 95% CI over "
        f"questions), alpaca win rate {_ci(*avg_alpaca)} vs {avg['alpaca_win_rate_b']:.3f}."
    )


def sample_rationales(comparisons: Sequence[Comparison], n: int = 5, seed: int = 0) -> pd.DataFrame:
    """A few judged decisions with their rationale, for reading what the judges actually said."""
    parts = []
    for c in comparisons:
        r = c.results[~c.results["identical"]]
        parts.append(r.sample(min(n, len(r)), random_state=seed) if len(r) else r)
    cols = ["comparison", "judge", "question", "shown_first", "judge_said", "winner", "rationale", "error"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


# --------------------------------------------------------------------------- plots and files
def plot_comparison(comp: Comparison) -> "Figure":
    """Stacked horizontal bars: share of questions won by A, tied, won by B, per judge and aggregate."""
    from evekit import plots

    s = comp.summary.set_index("judge").rename(index=_AGGREGATE_LABELS)
    shares = pd.DataFrame({f"{comp.name_a} wins": s["win_rate_a"], "tie": s["tie_rate"],
                           f"{comp.name_b} wins": s["win_rate_b"]})
    ax = plots.stacked_hbar(shares, xlabel="share of questions", ylabel="judge",
                            title=f"{comp.name_a} vs {comp.name_b} (n = {len(comp.pairs)} questions)",
                            colors=["#4C72B0", "#BBBBBB", "#DD8452"])
    return ax.figure


def plot_position_bias(comp: Comparison) -> "Figure":
    """Share of decisive verdicts for the answer shown first, with 95% Wilson intervals; 0.5 = no bias."""
    from evekit import plots

    s = comp.summary[comp.summary["kind"] != "average"].dropna(subset=["position_bias"])
    ax = plots.proportion_hbar(s["position_bias"], s["position_bias_ci_low"], s["position_bias_ci_high"],
                               labels=s["judge"].replace(_AGGREGATE_LABELS), n=s["position_votes"], reference=0.5,
                               reference_label="0.5 = no position bias", ylabel="judge",
                               xlabel="share of decisive verdicts for the answer shown first",
                               title=f"Position bias: {comp.name_a} vs {comp.name_b}")
    return ax.figure


def plot_agreement(comp: Comparison) -> "Figure":
    """Annotated matrix: share of questions on which two judges gave the same verdict."""
    from evekit import plots

    matrix = agreement_matrix(comp.outcomes)
    ax = plots.heatmap(matrix, vmin=0.0, vmax=1.0, xlabel="judge", ylabel="judge", cbar_label="agreement",
                       title="Judge agreement (share of questions with the same verdict)\n"
                             f"{comp.name_a} vs {comp.name_b}")
    empty = [(r, c) for r, row in enumerate(matrix.to_numpy(float)) for c, v in enumerate(row) if np.isnan(v)]
    for r, c in empty:  # say why a cell is blank rather than leave it white
        ax.text(c + 0.5, r + 0.5, "no question\nboth decided", ha="center", va="center", fontsize=7, color="#666666")
    return ax.figure


def _reasons(results: pd.DataFrame, judge: str) -> dict[str, int]:
    from evekit.judges.verdicts import abstention_reasons

    return abstention_reasons(results.loc[results["judge"] == judge, "error"])


PLOTS = {"comparison.png": plot_comparison, "position_bias.png": plot_position_bias,
         "agreement_heatmap.png": plot_agreement}  # file name -> drawing, in the order shown


def save_outputs(comparisons: Sequence[Comparison], cfg: WinRateParams,
                 usage: dict[str, Any] | None = None, figures: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    """Write each comparison's folder with its run.json record (what the batch runner reads); a
    plot in `figures` (per comparison label: the notebook's, drawn from its results) is written as
    shown, the others drawn.

    metrics.json's `metrics` holds EVE's numbers by EVE's definitions under EVE's names and evekit's
    own figures under `evekit/...` (`analysis.eve_metrics`); `eve_definitions` repeats EVE's part
    alone (for readers of earlier files). Then the counts, the parameters (no secrets) and `usage`,
    the judge usage of the whole run (all comparisons share the judges' clients).
    """
    import matplotlib.pyplot as plt

    from evekit import plots

    dirs = []
    for comp in comparisons:
        d = cfg.run_dir / KIND.name / comp.label
        d.mkdir(parents=True, exist_ok=True)
        write_csv_atomic(comp.results, d / "results.csv", index=False)
        write_csv_atomic(comp.summary, d / "summary.csv", index=False)
        write_csv_atomic(unmatched_table([comp]), d / "unmatched.csv", index=False)
        write_csv_atomic(agreement_matrix(comp.outcomes), d / "agreement.csv")
        for name, make in PLOTS.items():
            fig = (figures or {}).get(comp.label, {}).get(name) or make(comp)
            plots.save_figure(fig, d / name)
            plt.close(fig)
        record = {
            "task": cfg.task, "model_a": comp.name_a, "model_b": comp.name_b, "n": len(comp.pairs),
            "n_failed": int(comp.summary.set_index("judge").at["majority", "failed"]),
            "n_failed_decisions": int(comp.results["failed"].sum()),
            "n_unmatched": len(comp.unmatched), "n_failed_generation": len(comp.failed_generation),
            "metrics": eve_metrics(comp),  # EVE's names = EVE's definitions; evekit's under evekit/
            "eve_definitions": eve_definitions(comp.results, comp.name_a, comp.name_b, comp.judges),
            "verdict": verdict_text(comp, cfg.alpha),
            "usage": usage or {}, "params": cfg.as_dict(),
            "abstention_reasons": {j: _reasons(comp.results, j) for j in comp.judges},
            **({"corrected": comp.corrected} if comp.corrected else {}),
        }
        write_text_atomic(d / "metrics.json", json.dumps(json_safe(record), indent=2, ensure_ascii=False) + "\n")
        failed = comp.results["failed"].astype(bool)
        errors = comp.results["error"][failed] if "error" in comp.results else ()
        write_run_record(d, kind=KIND, notebook=KIND.notebooks[0], run_name=cfg.run_name, task=cfg.task,
                         model_a=comp.name_a, model_b=comp.name_b,
                         calls=[calls_outcome("judge calls", len(comp.results), errors=errors)])
        print(f"Saved outputs to {display_path(d)}")
        dirs.append(d)
    return dirs
