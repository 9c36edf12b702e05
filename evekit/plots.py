"""Shared plotting helpers: small, labelled, readable figures for notebooks and reports.

Each helper draws on a given Axes (or a new figure) and returns the Axes, so notebooks can show
it and `save_figure` can write it. Owner: winrate; others may append helpers at the end.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

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


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write `fig` as an image (format from the suffix), creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def heatmap(matrix: pd.DataFrame, *, ax: Axes | None = None, title: str = "", xlabel: str = "",
            ylabel: str = "", cbar_label: str = "", fmt: str = ".2f", vmin: float | None = None,
            vmax: float | None = None, cmap: str = "Blues") -> Axes:
    """Annotated heatmap of a square or rectangular DataFrame (index = rows, columns = columns)."""
    n_rows, n_cols = matrix.shape
    ax = _axes(ax, 3.2 + 1.1 * max(n_cols, 2), 1.8 + 0.8 * max(n_rows, 2))
    sns.heatmap(matrix.astype(float), ax=ax, annot=True, fmt=fmt, vmin=vmin, vmax=vmax, cmap=cmap,
                square=n_rows == n_cols, cbar_kws={"label": cbar_label} if cbar_label else None,
                linewidths=0.5, linecolor="white")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", rotation=30)
    ax.tick_params(axis="y", rotation=0)
    return ax


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
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.figure.legend(loc="outside lower center", ncol=len(shares.columns), frameon=False)
    return ax


def proportion_hbar(values: Sequence[float], low: Sequence[float], high: Sequence[float], *,
                    labels: Sequence[str], reference: float | None = None, reference_label: str = "",
                    ax: Axes | None = None,
                    title: str = "", xlabel: str = "", ylabel: str = "") -> Axes:
    """Horizontal bars of proportions with confidence-interval whiskers and an optional reference line."""
    values, low, high = (np.asarray(v, dtype=float) for v in (values, low, high))
    labels = [str(x) for x in labels]
    ax = _axes(ax, 7.0, 1.4 + 0.5 * max(len(values), 1))
    y = np.arange(len(values))[::-1]
    err = np.vstack([np.nan_to_num(values - low), np.nan_to_num(high - values)])
    ax.barh(y, values, xerr=err, color="#4C72B0", capsize=4, ecolor="#333333")
    for yi, v in zip(y, values):
        if np.isfinite(v):
            ax.text(0.01, yi, f"{v:.0%}", va="center", fontsize=9,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5, "alpha": 0.8})
    if reference is not None:
        ax.axvline(reference, color="#C44E52", linestyle="--", linewidth=1, label=reference_label or f"{reference:g}")
        ax.figure.legend(loc="outside lower center", frameon=False)
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if not len(values):
        ax.text(0.5, 0.5, "no decisive verdicts", ha="center", va="center", transform=ax.transAxes)
    return ax
