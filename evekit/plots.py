"""Shared plotting helpers: small, labelled, readable figures for notebooks and reports.

Each helper draws on a given Axes (or a new figure) and returns the Axes, so notebooks can show
it and `save_figure` can write it. Owner: winrate; others may append helpers at the end.
"""
from __future__ import annotations

import base64
import weakref
from pathlib import Path
from typing import Any, Callable, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure


def _axes(ax: Axes | None, width: float, height: float) -> Axes:
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return ax


TICK_LABEL_LIMIT = 36  # characters; a longer model or run name would squeeze the axes to nothing


def tick_label(text: str, limit: int = TICK_LABEL_LIMIT) -> str:
    """`text` shortened in the middle to `limit` characters ("start…end"): both ends of a name
    usually tell models apart (a run prefix, a checkpoint suffix); the tables keep the full name."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]


SAVE_DPI = 110  # every saved plot; a notebook shows the same PNG, scaled to the figure's own dpi
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
# The PNG each figure was shown as, until the figure changes (`show`): save_figure writes it as it is.
_SHOWN: "weakref.WeakKeyDictionary[Figure, tuple[int, bytes]]" = weakref.WeakKeyDictionary()


def _kernel_shell() -> Any:
    """The IPython shell this runs in, or None (a script, or IPython not installed)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - comes with ipykernel
        return None
    return get_ipython()


def _inline_png(shell: Any, fig: Figure) -> bool:
    """True in a Jupyter kernel with the inline matplotlib backend whose display shows a figure as
    PNG only (the default; not after `set_matplotlib_formats('svg')` and the like)."""
    if shell is None or not hasattr(shell, "kernel") or matplotlib.get_backend() != INLINE_BACKEND:
        return False
    shown_as = set()
    for mime in ("image/png", "image/svg+xml", "image/jpeg", "application/pdf"):
        try:
            shell.display_formatter.formatters[mime].lookup(fig)
            shown_as.add(mime)
        except KeyError:
            pass
    return shown_as == {"image/png"}


def show(fig: Figure, dpi: int = SAVE_DPI) -> Figure:
    """Show `fig` in the notebook as the PNG `save_figure` will write, drawn once: the inline backend
    would draw it at the end of the cell and save_figure again (two tight-bbox renders each; a third
    of a cached re-run's plotting time). The figure is closed in pyplot (so the backend does not draw
    it again) but stays usable: save it, or change it and show it again. Outside a kernel with the
    inline PNG backend (a script, another backend) it is only closed, or shown by IPython's own
    display where that is the backend's way."""
    shell = _kernel_shell()
    if shell is not None:
        from IPython.display import display

        if _inline_png(shell, fig):
            from evekit.atomic import figure_bytes

            png = figure_bytes(fig, format="png", dpi=dpi, bbox_inches="tight")
            _SHOWN[fig] = (dpi, png)
            fig.stale = False  # any change to an artist sets it again (matplotlib's stale propagation)
            width = int.from_bytes(png[16:20], "big")  # the PNG's IHDR width
            display({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": repr(fig)}, raw=True,
                    metadata={"image/png": {"width": round(width * fig.dpi / dpi)}})
        else:
            display(fig)
    plt.close(fig)
    return fig


def save_figure(fig: Figure, path: str | Path, dpi: int = SAVE_DPI) -> Path:
    """Write `fig` as an image (format from the suffix), creating the folder; the PNG it was shown
    as (`show`) when it has not changed since."""
    from evekit.atomic import save_figure_atomic, write_bytes_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shown = _SHOWN.get(fig)
    if shown is not None and shown[0] == dpi and path.suffix.lower() == ".png" and not fig.stale:
        return write_bytes_atomic(path, shown[1])
    return save_figure_atomic(fig, path, dpi=dpi, bbox_inches="tight")


def heatmap(matrix: pd.DataFrame, *, ax: Axes | None = None, title: str = "", xlabel: str = "",
            ylabel: str = "", cbar_label: str = "", fmt: str = ".2f", vmin: float | None = None,
            vmax: float | None = None, cmap: str = "Blues", empty: Callable[[Any, Any], str] | None = None) -> Axes:
    """Annotated heatmap of a square or rectangular DataFrame (index = rows, columns = columns);
    `empty(row, column)` says in the cell why a value is missing, rather than leave it blank."""
    n_rows, n_cols = matrix.shape
    ax = _axes(ax, 3.2 + 1.1 * max(n_cols, 2), 1.8 + 0.8 * max(n_rows, 2))
    matrix = matrix.rename(index=tick_label, columns=tick_label)
    sns.heatmap(matrix.astype(float), ax=ax, annot=True, fmt=fmt, vmin=vmin, vmax=vmax, cmap=cmap,
                square=n_rows == n_cols, cbar_kws={"label": cbar_label} if cbar_label else None,
                linewidths=0.5, linecolor="white")
    if empty is not None:
        for r, row in enumerate(matrix.index):
            for c, col in enumerate(matrix.columns):
                if pd.isna(matrix.iloc[r, c]):
                    ax.text(c + 0.5, r + 0.5, empty(row, col), ha="center", va="center", fontsize=7, color="#666666")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", rotation=30)
    ax.tick_params(axis="y", rotation=0)
    return ax


def _share_axis(ax: Axes, y: np.ndarray, labels: Sequence[str], title: str, xlabel: str, ylabel: str) -> None:
    """Bars labelled on y, shares 0-100% on x."""
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def stacked_hbar(shares: pd.DataFrame, *, ax: Axes | None = None, colors: Sequence[str] | None = None,
                 title: str = "", xlabel: str = "", ylabel: str = "", min_label: float = 0.05) -> Axes:
    """Horizontal bars of shares (rows = bars top to bottom, columns = stacked segments, values 0..1).

    Segments wider than `min_label` are labelled with their percentage; NaN rows are left empty.
    """
    ax = _axes(ax, 8.0, 1.4 + 0.55 * len(shares))
    labels = [str(i) for i in shares.index]
    y = np.arange(len(shares))[::-1]
    left = np.zeros(len(shares))
    for k, col in enumerate(shares.columns):
        values = shares[col].astype(float).fillna(0.0).to_numpy()
        color = colors[k] if colors is not None else None
        bars = ax.barh(y, values, left=left, color=color, label=str(col), edgecolor="white")
        for bar, v in zip(bars, values):
            if v >= min_label:
                ax.text(bar.get_x() + v / 2, bar.get_y() + bar.get_height() / 2, f"{v:.0%}",
                        ha="center", va="center", fontsize=9)
        left += values
    _share_axis(ax, y, labels, title, xlabel, ylabel)
    ax.figure.legend(loc="outside lower center", ncol=len(shares.columns), frameon=False)
    return ax


def proportion_hbar(values: Sequence[float], low: Sequence[float], high: Sequence[float], *,
                    labels: Sequence[str], n: Sequence[float] | None = None, reference: float | None = None,
                    reference_label: str = "", ax: Axes | None = None,
                    title: str = "", xlabel: str = "", ylabel: str = "") -> Axes:
    """Horizontal bars of proportions with confidence-interval whiskers and an optional reference line;
    `n` (the count behind each proportion) is printed beside its value."""
    values, low, high = (np.asarray(v, dtype=float) for v in (values, low, high))
    labels = [str(x) for x in labels]
    counts = [None] * len(values) if n is None else list(n)
    ax = _axes(ax, 7.0, 1.4 + 0.5 * max(len(values), 1))
    y = np.arange(len(values))[::-1]
    err = np.vstack([np.nan_to_num(values - low), np.nan_to_num(high - values)])
    ax.barh(y, values, xerr=err, color="#4C72B0", capsize=4, ecolor="#333333")
    for yi, v, k in zip(y, values, counts):
        if np.isfinite(v):
            text = f"{v:.0%}" if k is None or not np.isfinite(k) else f"{v:.0%} (n={int(k)})"
            ax.text(0.01, yi, text, va="center", fontsize=9,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5, "alpha": 0.8})
    if reference is not None:
        ax.axvline(reference, color="#C44E52", linestyle="--", linewidth=1, label=reference_label or f"{reference:g}")
        ax.figure.legend(loc="outside lower center", frameon=False)
    _share_axis(ax, y, labels, title, xlabel, ylabel)
    if not len(values):
        ax.text(0.5, 0.5, "no decisive verdicts", ha="center", va="center", transform=ax.transAxes)
    return ax


# -- task notebooks ----------------------------------------------------------------------------
def corrected_scores(table: pd.DataFrame, *, title: str = "") -> Figure:
    """Raw judge, corrected and labels-only estimates with their 95% intervals, one bar each
    (`TaskRun.corrected_scores`' table, indexed by score)."""
    ax = proportion_hbar(table["value"], table["ci_low"], table["ci_high"], labels=list(table.index),
                         n=table["n"] if "n" in table else None, title=title,
                         xlabel="score with 95% interval (raw: the judges alone; _ppi: corrected by the expert "
                                "labels; _rg: by the judge validation)")
    ax.set_xlim(0, 1)
    return ax.figure



def letter_bias(samples: pd.DataFrame, *, title: str = "") -> Figure:
    """How often each letter is predicted vs how often it is gold: answer-position bias at a glance."""
    def letters(column: str) -> pd.Series:
        values = samples.loc[~samples["failed"], column].fillna("").astype(str)
        return values.str.findall(r"[A-Z]").explode().dropna()

    predicted, gold = letters("parsed"), letters("target")
    labels = sorted(set(predicted) | set(gold))
    table = pd.DataFrame({
        "gold": gold.value_counts().reindex(labels, fill_value=0),
        "predicted": predicted.value_counts().reindex(labels, fill_value=0),
    })
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(labels) + 2), 3.4))
    table.plot.bar(ax=ax, color=["#9aa5b1", "#2f6f9f"], rot=0, width=0.75)
    ax.set_xlabel("answer letter")
    ax.set_ylabel("count")
    ax.yaxis.get_major_locator().set_params(integer=True)
    unparsed = int(samples["unparsed"].sum())
    ax.set_title(f"{title}\npredicted vs gold letters (unparsed answers: {unparsed})" if title
                 else "predicted vs gold letters", fontsize=10)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def position_preference(table: pd.DataFrame, *, orders: int, title: str = "") -> Figure:
    """Share of answers at each option position against the share of gold answers there, over every
    shuffled option order (`evekit.robustness.position_preference`'s table, indexed by position)."""
    labels = [str(v) for v in table["label"]]
    shares = pd.DataFrame({"gold": table["gold_share"].to_numpy(), "answered": table["answer_share"].to_numpy()},
                          index=labels)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(labels) + 2), 3.4))
    shares.plot.bar(ax=ax, color=["#9aa5b1", "#2f6f9f"], rot=0, width=0.75)
    ax.set_xlabel("option position (letter shown)")
    ax.set_ylabel("share of letters")
    ax.set_ylim(0, max(1e-9, float(np.nanmax(shares.to_numpy()))) * 1.15)
    heading = f"answer position vs gold position over {orders} option orders"
    ax.set_title(f"{title}\n{heading}" if title else heading, fontsize=10)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def score_distribution(samples: pd.DataFrame, column: str, *, title: str = "") -> Figure:
    """Histogram of a per-item score (IoU, ROUGE-L, ...) over the items that were answered."""
    values = samples.loc[~samples["failed"], column].dropna()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.hist(values, bins=np.linspace(0, 1, 11), color="#2f6f9f", edgecolor="white")
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"{column} per item")
    ax.set_ylabel("items")
    ax.set_title(f"{title}\n{column}: mean {values.mean():.3f} over {len(values)} items" if len(values)
                 else f"{title}\nno scored items", fontsize=10)
    fig.tight_layout()
    return fig


def confusion(samples: pd.DataFrame, *, title: str = "") -> Figure:
    """Confusion matrix of hallucination detection; unparsed answers get their own column."""
    answered = samples[~samples["failed"]]
    gold = answered["target"].map({"A": "hallucinated", "B": "correct"})
    pred = answered["parsed"].map({"A": "hallucinated", "B": "correct"}).fillna("unparsed")
    table = pd.crosstab(gold, pred).reindex(index=["hallucinated", "correct"],
                                            columns=["hallucinated", "correct", "unparsed"], fill_value=0)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    sns.heatmap(table, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax)
    ax.set_xlabel("model's answer")
    ax.set_ylabel("gold")
    ax.set_title(f"{title}\nhallucination detection, {len(answered)} items" if title else "confusion matrix",
                 fontsize=10)
    fig.tight_layout()
    return fig


def judge_pass_rates(metrics: dict[str, dict], judge_names: Sequence[str], *, title: str = "") -> Figure:
    """Pass rate per judge and for the vote, with 95% intervals."""
    names = [f"llm_as_judge_{n}" for n in judge_names] if len(judge_names) > 1 else ["llm_as_judge"]
    names += [n for n in ("judge_voting", "llm_as_judge_avg") if n in metrics]
    names = [n for n in names if metrics.get(n, {}).get("value") is not None]
    labels = [n.replace("llm_as_judge_", "judge: ") for n in names]
    values = [metrics[n]["value"] for n in names]
    low = [metrics[n].get("ci_low", v) for n, v in zip(names, values)]
    high = [metrics[n].get("ci_high", v) for n, v in zip(names, values)]
    fig, ax = plt.subplots(figsize=(6, 0.55 * max(len(names), 1) + 1.4))
    y = np.arange(len(names))
    ax.barh(y, values, color="#2f6f9f")
    ax.errorbar(values, y, xerr=[np.subtract(values, low), np.subtract(high, values)], fmt="none",
                ecolor="black", capsize=3)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of answers judged PASS (95% CI)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def leaderboard_chart(board: pd.DataFrame) -> Figure:
    """One panel per task, each on its own metric's scale (named in the panel's title): each model's
    headline value as a point with its 95% interval, models named beside their points; a flagged
    number (the board's `trust` column) carries ⚠ and its flags. A headline corrected by expert labels
    has the raw judge score it corrects (`raw_value`) drawn just below it as a hollow grey point."""
    from evekit.metrics import METRICS

    tasks = list(dict.fromkeys(board["task"]))
    models = list(dict.fromkeys(board["model"]))
    palette = dict(zip(models, sns.color_palette("colorblind", len(models))))
    fig, axes = plt.subplots(len(tasks), 1, figsize=(7.5, sum(0.42 * len(board[board["task"] == t]) + 0.9
                                                               for t in tasks) + 0.3), squeeze=False)
    for ax, task in zip(axes[:, 0], tasks):
        rows = board[board["task"] == task].reset_index(drop=True)
        metric = str(rows["metric"].iloc[0])
        y = np.arange(len(rows))
        v = rows["value"].to_numpy(float)
        lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
        for i, r in rows.iterrows():
            ax.errorbar(v[i], y[i], xerr=[[v[i] - lo[i]], [hi[i] - v[i]]], fmt="o", color=palette[r["model"]],
                        ecolor="black", elinewidth=1, capsize=3)
            raw = r.get("raw_value")
            if raw is not None and pd.notna(raw):  # the judges' own score under its correction
                rlo, rhi = (float(r.get(k)) if pd.notna(r.get(k)) else float(raw) for k in ("raw_ci_low", "raw_ci_high"))
                ax.errorbar(float(raw), y[i] + 0.25, xerr=[[max(float(raw) - rlo, 0.0)], [max(rhi - float(raw), 0.0)]], fmt="o",
                            mfc="none", color="grey", ecolor="grey", elinewidth=1, capsize=2, markersize=4,
                            label=f"raw {r.get('raw_metric')} (before the expert-label correction)")
        flags = rows["trust"].fillna("") if "trust" in rows else pd.Series([""] * len(rows))
        ax.set_yticks(y, [f"{m}  \u26a0 {f}" if f else str(m) for m, f in zip(rows["model"], flags)], fontsize=8)
        ax.invert_yaxis()
        m = METRICS.get(metric)
        bounds = getattr(m, "bounds", None) or (0.0, 1.0)
        ax.set_xlim(bounds[0] - 0.02 * (bounds[1] - bounds[0]), bounds[1] + 0.02 * (bounds[1] - bounds[0]))
        better = "" if m is None else (" (higher is better)" if m.higher_is_better else " (lower is better)")
        ax.set_title(f"{task}: {metric}{better}, 95% CI", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        handles, names = ax.get_legend_handles_labels()
        if handles:
            keep = dict(zip(names, handles))
            ax.legend(keep.values(), keep.keys(), fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def label_confusion(samples: pd.DataFrame, labels: Sequence[str], *, title: str = "") -> Figure:
    """Gold label vs the model's label for a custom classification task; unparsed get a column."""
    answered = samples[~samples["failed"]]
    pred = answered["parsed"].where(answered["parsed"].isin(labels), "unparsed")
    table = pd.crosstab(answered["target"], pred).reindex(index=list(labels), columns=[*labels, "unparsed"],
                                                          fill_value=0)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.8 * len(labels) + 2.5), max(3.2, 0.5 * len(labels) + 1.5)))
    sns.heatmap(table, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax)
    ax.set_xlabel("model's label")
    ax.set_ylabel("gold label")
    ax.set_title(f"{title}\n{len(answered)} items" if title else "confusion matrix", fontsize=10)
    fig.tight_layout()
    return fig


def reliability(samples: pd.DataFrame, *, title: str = "") -> Figure:
    """Reliability diagram of log-probability answers: per equal-width confidence bin, the share
    answered right against the mean confidence (on the diagonal = calibrated), with the number of
    items per bin below; the title gives the ECE and the Brier score."""
    from evekit.metrics import ECE_BINS, expected_calibration_error, reliability_table

    used = samples[~samples["failed"].astype(bool)].dropna(subset=["logprob_confidence", "acc_logprobs"])
    conf, correct = used["logprob_confidence"].to_numpy(float), used["acc_logprobs"].to_numpy(float)
    bins = reliability_table(conf, correct)
    fig, (ax, ax_n) = plt.subplots(2, 1, figsize=(5.4, 5.2), sharex=True, height_ratios=(3, 1),
                                   layout="constrained")
    width = 1 / ECE_BINS
    centres = [b["low"] + width / 2 for b in bins]
    accs = [b["accuracy"] if b["accuracy"] is not None else 0.0 for b in bins]
    filled = [b["n"] > 0 for b in bins]
    ax.bar([c for c, f in zip(centres, filled) if f], [a for a, f in zip(accs, filled) if f], width=width * 0.92,
           color="#2f6f9f", edgecolor="white", label="share right in the bin")
    ax.plot([b["confidence"] for b in bins if b["n"]], [b["accuracy"] for b in bins if b["n"]], "o",
            color="#e07b39", label="(mean confidence, share right)")
    ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=1, label="calibrated")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share answered right")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ece = float(expected_calibration_error(np.column_stack([conf, correct]))) if len(conf) else float("nan")
    brier = float(used["brier"].mean()) if "brier" in used and len(used) else float("nan")
    ax.set_title(f"{title}\nreliability of first-token answers: ECE {ece:.3f}, Brier {brier:.3f}, "
                 f"{len(used)} items" if title else f"ECE {ece:.3f}", fontsize=10)
    ax_n.bar(centres, [b["n"] for b in bins], width=width * 0.92, color="#8c8c8c", edgecolor="white")
    ax_n.set_ylabel("items")
    ax_n.set_xlabel(f"confidence: probability of the chosen answer ({ECE_BINS} equal-width bins)")
    return fig


def entity_counts(samples: pd.DataFrame, *, title: str = "") -> Figure:
    """Token classification: entities found right (true positives), wrong (false positives: a span or
    category that is not a gold entity), missed (false negatives), and predicted spans that do not
    occur in the text (they cannot be tagged), summed over the answered items."""
    used = samples[~samples["failed"].astype(bool)]
    counts = {"right (TP)": used["ner_tp"].sum(), "wrong (FP)": used["ner_fp"].sum(),
              "missed (FN)": used["ner_fn"].sum()}
    if "spans_not_in_text" in used:
        counts["not in the text (not scored)"] = used["spans_not_in_text"].sum()
    tp, fp, fn = counts["right (TP)"], counts["wrong (FP)"], counts["missed (FN)"]
    f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else float("nan")
    fig, ax = plt.subplots(figsize=(5.8, 2.8), layout="constrained")
    names = list(counts)[::-1]
    values = [int(counts[k]) for k in names]
    ax.barh(names, values, color=["#8c8c8c", "#e07b39", "#c44e52", "#2f6f9f"][-len(names):])
    for y, v in enumerate(values):
        ax.text(v, y, f" {v}", va="center", fontsize=9)
    ax.set_xlabel("entities (exact category and span)")
    ax.set_xlim(0, max(values + [1]) * 1.15)
    ax.set_title(f"{title}\nmicro-F1 {f1:.3f} over {len(used)} items" if title else f"micro-F1 {f1:.3f}",
                 fontsize=10)
    return fig


def _task_plot_score_distribution(samples: pd.DataFrame, task: Any, metric: str | None, title: str) -> Figure:
    return score_distribution(samples, metric or task.metrics[0], title=title)


# The figures a task can ask for by name (`evekit.tasks.PlotSpec.recipe`): (samples, task, metric,
# title) -> Figure. A new kind of task plot is one entry here.
TASK_PLOTS: dict[str, Callable[[pd.DataFrame, Any, "str | None", str], Figure]] = {
    "letter_bias": lambda s, task, metric, title: letter_bias(s, title=title),
    "label_confusion": lambda s, task, metric, title: label_confusion(s, task.labels, title=title),
    "score_distribution": _task_plot_score_distribution,
    "confusion": lambda s, task, metric, title: confusion(s, title=title),
    "reliability": lambda s, task, metric, title: reliability(s, title=title),
    "entity_counts": lambda s, task, metric, title: entity_counts(s, title=title),
}


def group_breakdown(table: pd.DataFrame, metric: str, *, group_by: str = "group", title: str = "",
                    overall: float | None = None) -> Figure:
    """Forest plot of `metric` per group: a point at the value, a line over its 95% interval, the
    number of items on the right (rows of `evekit.tasks.metrics_by_group`: group, metric, value,
    ci_low, ci_high, n). `overall`: the value over all items, drawn as a dashed line."""
    rows = table[table["metric"] == metric].reset_index(drop=True)
    values, low, high = (rows[c].to_numpy(dtype=float) for c in ("value", "ci_low", "ci_high"))
    ax = _axes(None, 7.5, 1.5 + 0.45 * max(len(rows), 1))
    y = np.arange(len(rows))[::-1]
    ax.hlines(y, np.nan_to_num(low, nan=0.0), np.nan_to_num(high, nan=0.0), color="#4C72B0", linewidth=2)
    ax.plot(values, y, "o", color="#4C72B0", markersize=6)
    for yi, v, n in zip(y, values, rows["n"]):
        ax.annotate(f"{v:.2f}  (n={int(n)})" if np.isfinite(v) else f"n/a  (n={int(n)})", (1.0, yi),
                    xycoords=("axes fraction", "data"), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=9)
    if overall is not None and np.isfinite(overall):
        ax.axvline(overall, color="#C44E52", linestyle="--", linewidth=1, label=f"all items: {overall:.2f}")
        ax.legend(loc="lower right", frameon=False, fontsize=8)
    ax.set_yticks(y, [str(g) for g in rows["group"]])
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(f"{metric} (95% interval)")
    ax.set_ylabel(group_by)
    ax.set_title(f"{metric} by {group_by}" + (f"\n{title}" if title else ""), fontsize=10)
    if not len(rows):
        ax.text(0.5, 0.5, f"no {metric} per group", ha="center", va="center", transform=ax.transAxes)
    return ax.figure
