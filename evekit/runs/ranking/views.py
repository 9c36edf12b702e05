"""What a reader sees of a ranking: the tables, the notes, the three plots and the saved files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from evekit.atomic import write_csv_atomic, write_text_atomic
from evekit import ranking as R
from evekit.paths import display_path
from evekit.report import json_safe
from evekit.runs.ranking.kind import KIND
from evekit.runs.records import calls_outcome, write_run_record

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["fmt_ci", "ratings_view", "judges_view", "plan_text", "plot_forest", "plot_win_matrix",
           "plot_judges", "sample_rationales", "save_outputs"]


def fmt_ci(v: float, lo: float, hi: float, digits: int = 0) -> str:
    """'1032 [1010, 1051]'; the value alone when there is no interval."""
    if pd.isna(v):
        return ""
    f = f"{{:.{digits}f}}"
    return f.format(v) + (f" [{f.format(lo)}, {f.format(hi)}]" if not (pd.isna(lo) or pd.isna(hi)) else "")


def _pct_ci(v: float, lo: float, hi: float) -> str:
    if pd.isna(v):
        return ""
    return f"{v:.1%}" + (f" [{lo:.1%}, {hi:.1%}]" if not (pd.isna(lo) or pd.isna(hi)) else "")


def ratings_view(ratings: pd.DataFrame, judge: str = R.POOLED, level: float = 0.95) -> pd.DataFrame:
    """One judge's (default: the pooled) ratings for reading: rank, rating [CI], style-controlled
    rating [CI], battles, and the win rate vs the baseline when there is one."""
    r = ratings[ratings["judge"] == judge]
    pct = f"{level:.0%}"
    out = pd.DataFrame({
        "rank": r["rank"].astype(int).to_numpy(), "model": r["model"].to_numpy(),
        f"rating [{pct} CI]": [fmt_ci(*x) for x in r[["rating", "ci_low", "ci_high"]].to_numpy()],
        f"style-controlled rating [{pct} CI]": [fmt_ci(*x) for x in
                                                r[["style_rating", "style_ci_low", "style_ci_high"]].to_numpy()],
        "battles": r["n_battles"].astype(int).to_numpy(),
    })
    if "win_rate_vs_baseline" in r.columns:
        out[f"win rate vs baseline [{pct} CI]"] = [_pct_ci(*x) for x in r[R.BASELINE_COLUMNS].to_numpy()]
    return out.set_index("rank")


def judges_view(ratings: pd.DataFrame) -> pd.DataFrame:
    """Each judge's ranking beside the pooled one: one row per model (pooled order), one column
    per judge: 'rank · rating [CI]'."""
    judges = [R.POOLED] + sorted(j for j in ratings["judge"].unique() if j != R.POOLED)
    order = ratings[ratings["judge"] == R.POOLED].sort_values(["rank", "rating"], ascending=[True, False])["model"]
    cells = {}
    for j in judges:
        r = ratings[ratings["judge"] == j].set_index("model")
        cells[j] = [f"{int(r.at[m, 'rank'])} · {fmt_ci(*r.loc[m, ['rating', 'ci_low', 'ci_high']])}"
                    if m in r.index else "–" for m in order]
    return pd.DataFrame(cells, index=pd.Index(order.to_numpy(), name="model"))


def plan_text(plan: dict[str, Any]) -> str:
    """The judge calls before they are made, and what sampling pairs costs in precision."""
    orders = "both orders" if plan["both_orders"] else "one order"
    text = (f"{plan['n_questions']} questions x {plan['pairs_per_question']} pair(s) of {plan['n_models']} models "
            f"(of {plan['all_pairs']}) x {orders} x {plan['n_judges']} judge(s) = {plan['decisions']} decisions; "
            f"{plan['identical_pairs']} pair(s) with identical answers are ties without a call, so "
            f"{plan['judge_calls']} judge calls (calls already in the cache are replayed, not sent).")
    if plan["pairs_per_question"] < plan["all_pairs"]:
        text += (f" With {plan['pairs_per_question']} of {plan['all_pairs']} pairs per question, each model has "
                 f"about {plan['battles_per_model'] / (2 if plan['both_orders'] else 1):.0f} battles per judge "
                 f"instead of {plan['battles_per_model'] * plan['ci_width_factor'] ** 2 / (2 if plan['both_orders'] else 1):.0f}: "
                 f"the intervals get about {plan['ci_width_factor']:.2f}x wider (sqrt of the ratio of battles; "
                 "a planning figure).")
    return text


# --------------------------------------------------------------------------- plots
def plot_forest(ratings: pd.DataFrame, *, title: str = "", level: float = 0.95) -> "Figure":
    """Pooled ratings with their intervals, best at the top; the style-controlled rating beside
    each (open marker). The vertical line is 1000 (the mean, or the baseline)."""
    import matplotlib.pyplot as plt

    from evekit import plots

    r = ratings[ratings["judge"] == R.POOLED].sort_values("rating")
    y = np.arange(len(r))
    fig, ax = plt.subplots(figsize=(9.5, 1.4 + 0.55 * len(r)))
    ax.errorbar(r["rating"], y + 0.12, xerr=_err(r, "rating", "ci_low", "ci_high"), fmt="o", color="#4C72B0",
                capsize=3, label=f"rating, {level:.0%} CI")
    if r["style_rating"].notna().any():
        ax.errorbar(r["style_rating"], y - 0.12, xerr=_err(r, "style_rating", "style_ci_low", "style_ci_high"),
                    fmt="o", mfc="white", color="#DD8452", capsize=3, label="style-controlled (length)")
    ax.axvline(R.CENTER, color="#999999", lw=0.8, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels([f"{plots.tick_label(m)}  (rank {int(k)})" for m, k in zip(r["model"], r["rank"])])
    ax.set_xlabel("rating (Elo scale: +400 = 10x the odds of winning)")
    ax.set_title(title or "Bradley–Terry ratings, all judges pooled")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # outside: never over a bar
    fig.tight_layout()
    return fig


def _err(r: pd.DataFrame, v: str, lo: str, hi: str) -> np.ndarray | None:
    if r[lo].isna().all():
        return None
    return np.vstack([(r[v] - r[lo]).clip(lower=0).fillna(0), (r[hi] - r[v]).clip(lower=0).fillna(0)])


def plot_win_matrix(ratings: pd.DataFrame, *, title: str = "") -> "Figure":
    """P(row model beats column model) predicted by the pooled ratings (ties half)."""
    from evekit import plots

    ax = plots.heatmap(R.win_probability_matrix(ratings), vmin=0.0, vmax=1.0, cmap="RdBu_r", xlabel="opponent",
                       ylabel="model", cbar_label="P(model beats opponent)",
                       title=title or "Predicted win probability (pooled Bradley–Terry ratings)")
    return ax.figure


def plot_judges(ratings: pd.DataFrame, *, title: str = "") -> "Figure":
    """Each judge's ratings (points with intervals, no lines: judges are categories) side by side
    with the pooled fit; a judge that rates every model the same is marked ⚠ on its label."""
    import matplotlib.pyplot as plt

    from evekit import plots

    judges = [R.POOLED] + sorted(j for j in ratings["judge"].unique() if j != R.POOLED)
    models = ratings[ratings["judge"] == R.POOLED].sort_values("rating", ascending=False)["model"].tolist()
    fig, ax = plt.subplots(figsize=(2.2 + 1.8 * len(judges), 4.5))
    offsets = np.linspace(-0.15, 0.15, len(models)) if len(models) > 1 else [0.0]
    for k, (m, off) in enumerate(zip(models, offsets)):
        r = ratings[ratings["model"] == m].set_index("judge").reindex(judges)
        x = np.arange(len(judges)) + off
        ax.errorbar(x, r["rating"], yerr=_err(r, "rating", "ci_low", "ci_high"), fmt="o", capsize=2,
                    color=plt.cm.tab10(k % 10), label=plots.tick_label(m), lw=1)
    ax.axhline(R.CENTER, color="#999999", lw=0.8, ls="--")
    from evekit.cards import MARK, degenerate_judge_flag

    degenerate = {j for j in judges if j != R.POOLED
                  and degenerate_judge_flag(j, ratings.loc[ratings["judge"] == j, "rating"]) is not None}
    ax.set_xticks(np.arange(len(judges)))
    ax.set_xticklabels([plots.tick_label(j) + (f"\n{MARK} rates all alike" if j in degenerate else "") for j in judges])
    ax.set_xlabel("judge")
    ax.set_ylabel("rating (Elo scale)")
    ax.set_title(title or "Ratings per judge and pooled")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="model")
    fig.tight_layout()
    return fig


def sample_rationales(battles: pd.DataFrame, n: int = 5, seed: int = 0) -> pd.DataFrame:
    """A few judged decisions (not identical-answer ties) with what the judge said."""
    r = battles[battles["method"] != "identical"]
    cols = ["question_id", "judge", "model_a", "model_b", "winner", "rationale", "error"]
    return r.sample(min(n, len(r)), random_state=seed)[cols].reset_index(drop=True) if len(r) else \
        pd.DataFrame(columns=cols)


# --------------------------------------------------------------------------- files
PLOTS = {"ratings_forest.png": plot_forest, "win_probability.png": plot_win_matrix,
         "ratings_by_judge.png": plot_judges}


def save_outputs(out_dir: Path, *, battles: pd.DataFrame, ratings: pd.DataFrame, record: dict[str, Any],
                 run_name: str, task: str, models: Sequence[str], extra_tables: dict[str, pd.DataFrame],
                 figures: dict[str, Any] | None = None) -> Path:
    """Write battles.csv, ratings.csv, the extra tables, results.json, the plots and run.json; a plot
    in `figures` (the notebook's, drawn from these ratings) is written as shown, the others drawn."""
    import matplotlib.pyplot as plt

    from evekit import plots

    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(battles, out_dir / "battles.csv", index=False)
    write_csv_atomic(ratings, out_dir / "ratings.csv", index=False)
    for name, table in extra_tables.items():
        write_csv_atomic(table, out_dir / name, index=False)
    for name, make in PLOTS.items():
        fig = (figures or {}).get(name) or make(ratings)
        plots.save_figure(fig, out_dir / name)
        plt.close(fig)
    write_text_atomic(out_dir / "results.json", json.dumps(json_safe(record), indent=2, ensure_ascii=False) + "\n")
    undecided = battles["winner"].isna() | (battles["winner"].astype(str) == "") if "winner" in battles else ()
    errors = battles["error"][undecided] if "error" in battles and len(battles) else ()
    write_run_record(out_dir, kind=KIND, notebook=KIND.notebooks[0], run_name=run_name, task=task, models=list(models),
                     calls=[calls_outcome("judge calls", len(battles), errors=errors)])
    print(f"Saved outputs to {display_path(out_dir)}")
    return out_dir
