"""The summary across runs: leaderboard, paired significance between models, total usage."""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evekit import stats
from evekit.report import format_metric, headline, write_run_record

# Per-sample columns that hold 0/1 outcomes (McNemar) vs graded scores (paired bootstrap).
BINARY = ("acc", "judge_voting", "llm_as_judge")


@dataclass
class Entry:
    run: str
    model: str
    task: str
    results: dict[str, Any]
    folder: Path

    @property
    def label(self) -> str:
        return f"{self.model} ({self.run})"


def collect(output_dir: Path, runs: list[str]) -> list[Entry]:
    """Every `results.json` under `<output_dir>/<run>/<model>/<task>/` for the given runs."""
    entries = []
    for run in runs:
        for res_file in sorted((Path(output_dir) / run).glob("*/*/results.json")):
            res = json.loads(res_file.read_text())
            entries.append(Entry(run, res["model"], res["task"], res, res_file.parent))
    return entries


def leaderboard(entries: list[Entry]) -> pd.DataFrame:
    """One row per (model, run) and task: headline metric, value, 95% CI, n, unparsed, failed."""
    rows = []
    for e in entries:
        name, m = headline(e.results)
        rows.append({
            "model": e.label, "task": e.task, "metric": name,
            "value": None if m is None else m["value"],
            "ci_low": None if m is None else m.get("ci_low"),
            "ci_high": None if m is None else m.get("ci_high"),
            "n": e.results["n"], "unparsed": e.results.get("n_unparsed", 0),
            "failed": e.results.get("n_failed", 0),
        })
    return pd.DataFrame(rows)


def leaderboard_wide(board: pd.DataFrame) -> pd.DataFrame:
    """Models x tasks, each cell 'value [low, high]'."""
    if board.empty:
        return board
    cell = board.apply(lambda r: format_metric(None if pd.isna(r["value"]) else r.to_dict()), axis=1)
    wide = board.assign(cell=cell).pivot_table(index="model", columns="task", values="cell", aggfunc="first")
    return wide.fillna("–")


def paired_tests(entries: list[Entry], seed: int = 0) -> pd.DataFrame:
    """For every task and pair of models: the headline metric compared on the items both answered.

    0/1 metrics use McNemar's exact test; graded ones a paired bootstrap of the mean difference.
    Items are matched by doc_id; failed items of either model are left out and the count says so.
    """
    rows = []
    by_task: dict[str, list[Entry]] = {}
    for e in entries:
        by_task.setdefault(e.task, []).append(e)
    read: dict[Path, pd.DataFrame] = {}

    def samples(e: Entry) -> pd.DataFrame:  # each samples.csv read once, however many pairs it is in
        if e.folder not in read:
            read[e.folder] = pd.read_csv(e.folder / "samples.csv")
        return read[e.folder]

    for task, group in sorted(by_task.items()):
        for a, b in itertools.combinations(group, 2):
            metric, _ = headline(a.results)
            sa, sb = samples(a), samples(b)
            if metric not in sa.columns or metric not in sb.columns:
                continue
            merged = sa[["doc_id", metric]].merge(sb[["doc_id", metric]], on="doc_id", suffixes=("_a", "_b"))
            merged = merged.dropna()
            if merged.empty:
                continue
            x, y = merged[f"{metric}_a"].to_numpy(float), merged[f"{metric}_b"].to_numpy(float)
            row = {"task": task, "metric": metric, "model_a": a.label, "model_b": b.label,
                   "n_shared": len(merged), "mean_a": x.mean(), "mean_b": y.mean(), "difference": x.mean() - y.mean()}
            if metric in BINARY and set(np.unique(np.concatenate([x, y]))) <= {0.0, 1.0}:
                row.update(test="McNemar exact", p_value=stats.mcnemar_exact(x, y), ci_low=np.nan, ci_high=np.nan)
            else:
                pb = stats.paired_bootstrap(x, y, seed=seed)
                row.update(test="paired bootstrap", p_value=pb["p_value"], ci_low=pb["ci_low"], ci_high=pb["ci_high"])
            rows.append(row)
    return pd.DataFrame(rows)


def usage_totals(entries: list[Entry]) -> pd.DataFrame:
    rows = [{"model": e.label, "task": e.task, **e.results.get("usage", {})} for e in entries]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    numeric = df.select_dtypes("number").columns
    total = {"model": "total", "task": "", **df[numeric].sum().to_dict()}
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    counts = [c for c in numeric if c != "seconds"]
    df[counts] = df[counts].fillna(0).astype(int)
    return df


def save_summary(out_dir: Path, board: pd.DataFrame, tests: pd.DataFrame, usage: pd.DataFrame,
                 figure: Any | None, *, run_name: str | None = None) -> Path:
    """`summary/`: leaderboard.csv, paired_tests.csv, usage.csv, leaderboard.png and run.json.

    `run_name` defaults to the parent folder's name (the notebook saves to `<output_dir>/<run_name>/summary`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = ["leaderboard.csv", "paired_tests.csv", "usage.csv"]
    board.to_csv(out_dir / "leaderboard.csv", index=False)
    tests.to_csv(out_dir / "paired_tests.csv", index=False)
    usage.to_csv(out_dir / "usage.csv", index=False)
    if figure is not None:
        figure.savefig(out_dir / "leaderboard.png", dpi=110, bbox_inches="tight")
        files.append("leaderboard.png")
    write_run_record(out_dir, kind="summary", notebook="summary", run_name=run_name or out_dir.parent.name,
                     files=files)
    return out_dir
