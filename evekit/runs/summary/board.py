"""The summary across runs: leaderboard, paired significance between models, what each task's size
can detect, total usage."""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evekit.atomic import write_csv_atomic
from evekit import repeats, stats
from evekit.cards import MARK, comparison_card, comparisons_card
from evekit.naming import configuration_name
from evekit.paths import safe_name
from evekit.report import format_metric
from evekit.runs.ranking.kind import KIND as RANKING
from evekit.runs.records import RUN_RECORD, all_calls_failed, read_attempts, read_run_record, stale_reason, write_run_record
from evekit.runs.summary.kind import KIND
from evekit.runs.task.kind import KIND as TASK, headline_flags
from evekit.runs.task.corrected import PPI_SUFFIX
from evekit.runs.task.results import headline
from evekit.demo import DEMO_MODEL_NOTE, demo_judge_note, demo_judges, is_demo_model

__all__ = ["Entry", "collect", "leaderboard", "leaderboard_wide", "paired_tests", "detectable_differences",
           "usage_totals", "save_summary", "verdicts", "demo_model_note", "rankings", "RANKING_COLUMNS",
           "RAW_COLUMNS", "raw_of", "PAIRED_RAW_NOTE"]

_DECIMALS = 12


@dataclass
class Entry:
    run: str
    model: str
    task: str
    results: dict[str, Any]
    folder: Path
    stale: str = ""  # why this result is not current (runs.records.stale_reason, every call failed)

    @property
    def label(self) -> str:
        """The configuration's display name, the same on every page (`naming.configuration_name`)."""
        return configuration_name(self.model, self.run)


def collect(output_dir: Path, runs: list[str]) -> list[Entry]:
    """Every `results.json` under `<output_dir>/<run>/<model>/<task>/` for the given runs (each run's
    folder is its name made safe, as the notebooks write it)."""
    entries = []
    for run in runs:
        attempts = read_attempts(Path(output_dir) / safe_name(run))
        for res_file in sorted((Path(output_dir) / safe_name(run)).glob("*/*/results.json")):
            if _kind(res_file.parent) not in (None, TASK.name):
                continue  # a ranking's results.json (outputs/<run>/ranking/<task>/) is not a task result
            res = json.loads(res_file.read_text())
            if res.get("kind") not in (None, TASK.name) or "model" not in res or "task" not in res:
                continue  # outputs/<run>/judge_validation/<kind>/: judges measured, no model result
            entries.append(Entry(run, res["model"], res["task"], res, res_file.parent,
                                 _not_current(res_file.parent, attempts)))
    return entries


def _not_current(folder: Path, attempts: dict[str, dict[str, Any]]) -> str:
    """Why a result is not a current one ("" when it is): every call failed, or stale
    (`runs.records.stale_reason`)."""
    try:
        record = read_run_record(folder / RUN_RECORD)
    except (OSError, ValueError):
        return ""
    return all_calls_failed(record) or stale_reason(record, attempts) or ""


def _kind(folder: Path) -> str | None:
    """The kind of the run.json record in `folder` (None: no readable record)."""
    try:
        return read_run_record(folder / RUN_RECORD).kind
    except (OSError, ValueError):
        return None


RANKING_COLUMNS = ["run", "task", "rank", "model", "rating", "ci_low", "ci_high", "style_rating", "style_ci_low",
                   "style_ci_high", "n_battles", "judges", "folder"]


def rankings(output_dir: Path, runs: list[str]) -> pd.DataFrame:
    """The pooled Bradley–Terry ranking of every ranking notebook run of `runs`
    (`<output_dir>/<run>/ranking/<task>/ratings.csv`): one row per run, task and model, best first."""
    parts = []
    for run in runs:
        for ratings_csv in sorted((Path(output_dir) / safe_name(run) / RANKING.name).glob("*/ratings.csv")):
            if _kind(ratings_csv.parent) != RANKING.name:
                continue
            df = pd.read_csv(ratings_csv)
            judges = ", ".join(sorted(j for j in df["judge"].astype(str).unique() if j != "pooled"))
            pooled = df[df["judge"] == "pooled"].sort_values(["rank", "rating"], ascending=[True, False])
            task = ratings_csv.parent.name
            try:
                task = json.loads((ratings_csv.parent / "results.json").read_text()).get("task", task)
            except (OSError, ValueError):
                pass
            parts.append(pooled.assign(run=run, task=task, judges=judges, folder=str(ratings_csv.parent)))
    if not parts:
        return pd.DataFrame(columns=RANKING_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    return out[[c for c in RANKING_COLUMNS if c in out.columns]].reset_index(drop=True)


def _tidy(v: Any) -> Any:
    """Round floats to 12 decimals so float noise (2.8e-17) reads 0."""
    if isinstance(v, (float, np.floating)) and np.isfinite(v):
        return round(float(v), _DECIMALS) + 0.0
    return v


def demo_model_note(entries: list[Entry]) -> str | None:
    """The demo model's caveat when any model on the board, or any judge behind a score on it, is
    the embedded demo model, else None."""
    demo = sorted({e.model for e in entries if is_demo_model(e.model)})
    judges = sorted({j for e in entries for j in demo_judges((e.results.get("params") or {}).get("judges") or [])})
    notes = []
    if demo:
        notes.append(f"Note: {DEMO_MODEL_NOTE} (on this board: {', '.join(demo)})")
    if judges:
        notes.append(f"Note: {demo_judge_note(judges)}")
    return "\n".join(notes) or None


RAW_COLUMNS = ["raw_metric", "raw_value", "raw_ci_low", "raw_ci_high"]


def raw_of(results: dict[str, Any], name: str) -> tuple[str, dict[str, Any] | None] | None:
    """(name, metric) of the raw judge score behind a corrected headline (`<metric>_ppi`: its `raw`
    field, else the name without the suffix); None when the headline is not a corrected one."""
    if not name.endswith(PPI_SUFFIX):
        return None
    metrics = results.get("metrics", {})
    raw = (metrics.get(name) or {}).get("raw") or name[: -len(PPI_SUFFIX)]
    return raw, metrics.get(raw)


def leaderboard(entries: list[Entry]) -> pd.DataFrame:
    """One row per (model, run) and task: headline metric, value, 95% CI, n, items, unparsed, failed.

    `n` is the number of items behind the headline metric (results.json metrics[name]["n"]: failed
    items, abstentions and unscored items left out); `items` is how many items the run had. When a
    headline is corrected by expert labels (`<metric>_ppi`), `raw_metric`, `raw_value`, `raw_ci_low`
    and `raw_ci_high` give the judges' own score beside it (the columns appear only when some
    headline on the board is corrected, and are empty on the rows that are not).
    """
    rows = []
    for e in entries:
        name, m = headline(e.results)
        row = {
            "model": e.label, "task": e.task, "metric": name,
            "value": None if m is None else m["value"],
            "ci_low": None if m is None else m.get("ci_low"),
            "ci_high": None if m is None else m.get("ci_high"),
            "n": e.results["n"] if m is None else m.get("n", e.results["n"]), "items": e.results.get("n_items", e.results["n"]),
            "unparsed": e.results.get("n_unparsed", 0), "failed": e.results.get("n_failed", 0),
            # why the number is not to be read at face value (cards.judge_flags): the CSV column
            "trust": ", ".join(f.kind for f in headline_flags(e.results)),
            "design": design_label(e.results),
            "stale": e.stale,
        }
        raw = raw_of(e.results, name)
        if raw is not None:
            # the judges' own score stays beside the corrected one, so the size of the correction shows
            raw_name, rm = raw
            row.update({"raw_metric": raw_name, "raw_value": None if rm is None else rm.get("value"),
                        "raw_ci_low": None if rm is None else rm.get("ci_low"),
                        "raw_ci_high": None if rm is None else rm.get("ci_high")})
        rows.append(row)
    board = pd.DataFrame(rows)
    if "raw_metric" in board:  # the raw columns right after the corrected value and its interval
        cols = [c for c in board.columns if c not in RAW_COLUMNS]
        at = cols.index("ci_high") + 1
        board = board[cols[:at] + RAW_COLUMNS + cols[at:]]
    return board


def design_label(results: dict[str, Any]) -> str:
    """What a run's interval accounts for beyond one answer per item ('' when nothing): repeats,
    clusters, shuffled options (results.json `design`)."""
    d = results.get("design") or {}
    parts = []
    if (d.get("repeats") or 1) > 1:
        parts.append(f"{d['repeats']} repeats over {d.get('repeat_over')}"
                     + (f" ({d['reducer']})" if d.get("reducer", "mean") != "mean" else ""))
    if d.get("cluster_by"):
        parts.append(f"clusters by {d['cluster_by']}")
    if d.get("permutations"):
        parts.append(f"{d['permutations']} option orders")
    return "; ".join(parts)


def _raw_cell(r: pd.Series) -> str:
    """' (raw judge_voting 1.000 [0.76, 1.00])' after a corrected headline, '' otherwise."""
    name = r.get("raw_metric")
    if not isinstance(name, str) or not name:
        return ""
    value = r.get("raw_value")
    raw = None if value is None or pd.isna(value) else {
        "value": value, **{k: (None if pd.isna(r.get(f"raw_{k}")) else r.get(f"raw_{k}")) for k in ("ci_low", "ci_high")}}
    return f" (raw {name} {format_metric(raw)})"


def leaderboard_wide(board: pd.DataFrame) -> pd.DataFrame:
    """Models x tasks, each cell 'value [low, high]' (with ⚠ when its trust column flags it, and
    the design its interval accounts for: repeats, clusters, option orders); a headline corrected
    by expert labels is followed by the raw judge score it corrects, '(raw judge_voting 1.000 [0.76, 1.00])'."""
    if board.empty:
        return board
    cell = board.apply(lambda r: format_metric(None if pd.isna(r["value"]) else r.to_dict())
                       + _raw_cell(r)
                       + (f" ({r['design']})" if r.get("design") else "")
                       + (f" {MARK} {r['trust']}" if r.get("trust") else "")
                       + (f" ({r['stale']})" if r.get("stale") else ""), axis=1)
    wide = board.assign(cell=cell).pivot_table(index="model", columns="task", values="cell", aggfunc="first")
    return wide.fillna("–")


def verdicts(tests: pd.DataFrame, detectable: pd.DataFrame | None = None) -> list[str]:
    """The paired tests in words: per pair of models across tasks, then one sentence per task
    (with the smallest difference its n can detect), never claiming more than the Holm-adjusted test."""
    if tests is None or not len(tests):
        return []
    rows = tests.to_dict("records")
    mdd = {} if detectable is None else dict(zip(detectable["task"], detectable["mdd"]))
    return comparisons_card(rows) + [comparison_card(r, mdd=mdd.get(r["task"])) for r in rows]


def _judge_names(e: Entry, samples: pd.DataFrame) -> list[str]:
    names = e.results.get("judges")
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return names
    from evekit.judges import judge_names_in

    return judge_names_in(samples)


class _Samples:
    """Each samples.csv read once, however many pairs it is in."""

    def __init__(self) -> None:
        self.read: dict[Path, pd.DataFrame] = {}

    def __call__(self, e: Entry) -> pd.DataFrame:
        if e.folder not in self.read:
            self.read[e.folder] = pd.read_csv(e.folder / "samples.csv")
        return self.read[e.folder]

    def scores(self, e: Entry, metric: str) -> pd.DataFrame | None:
        """doc_id and the per-item values of `metric` (column `value`), plus the item's `cluster`
        when the run set `cluster_by`; None if the run has no per-item `metric`."""
        from evekit.tasks import CLUSTER_COLUMN, metric_column

        df = self(e)
        col = metric_column(metric, _judge_names(e, df))
        if col not in df.columns or "doc_id" not in df.columns:
            return None
        if "permutation" in df:  # shuffled options: the headline is the original order's
            df = df[df["permutation"] == 0]
        keep = ["doc_id", col] + ([CLUSTER_COLUMN] if cluster_by(e) and CLUSTER_COLUMN in df else [])
        values = df[keep].rename(columns={col: "value", CLUSTER_COLUMN: "cluster"})
        if "repeat" in df:  # repeats: one value per item, its mean over repeats (the run's own metric)
            values = values.dropna(subset=["value"]).groupby("doc_id", as_index=False, sort=False).agg(
                {"value": "mean", **({"cluster": "first"} if "cluster" in values else {})})
        return values


def cluster_by(e: Entry) -> str | None:
    """The dataset column whose values grouped the run's items (results.json `design`), or None."""
    return (e.results.get("design") or {}).get("cluster_by") or None


def _pair_clusters(merged: pd.DataFrame, a: Entry, b: Entry) -> tuple[np.ndarray | None, str]:
    """The resampling units of a paired test on `merged` (doc_id, value_a, value_b and the runs'
    cluster columns) and what to call them. A run's clusters bind its items together whatever the
    other model did, so items that share a cluster in either run share a unit (the connected
    components of both groupings: never finer than either); no cluster column: items."""
    columns = [c for c in ("cluster_a", "cluster_b", "cluster") if c in merged]
    if not columns:
        return None, "items"
    names = " and ".join(dict.fromkeys(n for n in (cluster_by(a), cluster_by(b)) if n))
    # union-find over item positions: one parent per item, items of one cluster linked to its first
    parent = np.arange(len(merged))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for column in columns:
        first: dict[Any, int] = {}
        for i, label in enumerate(merged[column].to_numpy()):
            j = first.setdefault(label, i)
            parent[root(i)] = root(j)
    units = np.array([root(i) for i in range(len(merged))])
    g = len(set(units.tolist()))
    joined = " (both runs' clusters joined)" if len(columns) == 2 and cluster_by(a) != cluster_by(b) else ""
    return units, f"clusters by {names}{joined}: {g} clusters"


def _by_task(entries: list[Entry]) -> dict[str, list[Entry]]:
    by_task: dict[str, list[Entry]] = {}
    for e in entries:
        by_task.setdefault(e.task, []).append(e)
    return dict(sorted(by_task.items()))


# Why the paired tests compare the raw verdicts when the headline is corrected by expert labels
# (shown under the table, `paired_note`).
PAIRED_RAW_NOTE = ("The paired tests compare the judges' raw verdicts even where the headline is corrected by "
                   "expert labels (metric {raw} for {corrected}): a corrected paired difference needs an expert's "
                   "labels of both models' answers to the same items, and each run's sheet labels only its own "
                   "random draw of its own answers.")


def _compared(metric: str) -> str:
    """The metric a paired test compares for a headline: a corrected one (`<metric>_ppi`) on its raw verdicts."""
    return metric[: -len(PPI_SUFFIX)] if metric.endswith(PPI_SUFFIX) else metric


def paired_note(entries: list[Entry]) -> str | None:
    """The sentence under the paired tests when a compared headline is corrected (`PAIRED_RAW_NOTE`), else None."""
    corrected = sorted(m for m in _headlines(entries) if m.endswith(PPI_SUFFIX))
    if not corrected:
        return None
    return PAIRED_RAW_NOTE.format(raw=", ".join(_compared(m) for m in corrected), corrected=", ".join(corrected))


def _headlines(entries: list[Entry]) -> set[str]:
    """The headlines of tasks with two or more results (those that get a paired test)."""
    return {headline(e.results)[0] for group in _by_task(entries).values() if len(group) > 1 for e in group}


PAIRED_COLUMNS = ["task", "metric", "model_a", "model_b", "n_shared", "mean_a", "mean_b", "difference",
                  "test", "p_value", "p_holm", "ci_low", "ci_high", "ci_method", "resampled", "n_clusters",
                  "n_discordant", "note"]


def paired_tests(entries: list[Entry], seed: int = 0) -> pd.DataFrame:
    """For every task and pair of models: the headline metric compared on the items both answered.

    `evekit.stats.compare_paired`: exact McNemar test and a Bonett-Price 95% interval of the
    difference for 0/1 scores, a sign-flip permutation test and a BCa interval otherwise. The
    per-item values are read from samples.csv through `evekit.tasks.metric_column` (a single
    judge's `llm_as_judge` is its judge_<name> column). Items are matched by doc_id; failed items
    of either model are left out (`n_shared` counts the pairs used). `p_holm`: Holm-adjusted
    p-values over every pair of the table (`stats.holm`). A pair that cannot be compared keeps
    its row with the reason in `note`. A headline corrected by expert labels (`<metric>_ppi`) is
    compared on its raw verdicts: `metric` names the raw one and `note` says so (why: `PAIRED_RAW_NOTE`).

    When either run set `cluster_by`, items of one cluster are not independent: the test is
    `repeats.paired_difference` over clusters (a sign-flip test of the clusters' summed
    differences, a t interval on the cluster-robust SE; with every cluster a single item, the
    item-level test above). `resampled` says what the test resampled ("items", or the clusters and
    their number, `n_clusters`).
    """
    rows = []
    samples = _Samples()
    for task, group in _by_task(entries).items():
        for a, b in itertools.combinations(group, 2):
            metric, _ = headline(a.results)
            other, _ = headline(b.results)
            raw = _compared(metric)
            # `metric` names what was compared: the raw verdicts when the headline is corrected
            row: dict[str, Any] = {"task": task, "metric": raw, "model_a": a.label, "model_b": b.label}
            sa, sb = samples.scores(a, raw), samples.scores(b, raw)
            if other != metric:
                rows.append({**row, "note": f"{b.label} is summarised by {other}, {a.label} by {metric}"})
                continue
            if sa is None or sb is None:
                missing = a.label if sa is None else b.label
                rows.append({**row, "note": f"samples.csv of {missing} has no per-item {raw}"})
                continue
            merged = sa.merge(sb, on="doc_id", suffixes=("_a", "_b")).dropna()
            if merged.empty:
                rows.append({**row, "n_shared": 0, "note": "no item scored for both models"})
                continue
            x, y = merged["value_a"].to_numpy(float), merged["value_b"].to_numpy(float)
            units, resampled = _pair_clusters(merged, a, b)
            if units is None:
                cp = stats.compare_paired(x, y, seed=seed)
            else:  # clustered items: the test flips, and the interval resamples, whole clusters
                index = pd.Index(merged["doc_id"])
                cp = repeats.paired_difference(pd.Series(x, index=index), pd.Series(y, index=index),
                                               clusters=pd.Series(units, index=index), seed=seed)
            rows.append({**row, "n_shared": cp["n"], "mean_a": _tidy(x.mean()), "mean_b": _tidy(y.mean()),
                         "difference": cp["diff"], "test": cp["test"], "p_value": cp["p_value"],
                         "ci_low": cp["ci_low"], "ci_high": cp["ci_high"], "ci_method": cp["ci_method"],
                         "resampled": resampled, "n_clusters": cp.get("n_clusters"),
                         "n_discordant": cp.get("n_discordant"),
                         "note": "" if raw == metric else f"the raw {raw}, not the corrected headline {metric}"})
    table = pd.DataFrame(rows, columns=PAIRED_COLUMNS)
    if len(table):
        table["p_holm"] = stats.holm(table["p_value"].to_numpy(float))
        table["note"] = table["note"].fillna("")
        table["n_discordant"] = table["n_discordant"].astype("Int64")
        table["n_shared"] = table["n_shared"].astype("Int64")
        table["n_clusters"] = table["n_clusters"].astype("Int64")
        table["resampled"] = table["resampled"].fillna("")
    return table


MDD_COLUMNS = ["task", "metric", "n", "mdd", "basis", "note"]


def detectable_differences(entries: list[Entry], *, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """For each task: the smallest difference in its headline metric a paired test of two models
    detects with 80% power at alpha 0.05 for its n (`stats.min_detectable_difference`).

    With two or more models on the task, from the observed pairs (the largest n of shared items
    and, for it, the discordance rate of 0/1 scores or the SD of graded differences). With one
    model, from the assumption that a second model of the same score errs independently
    (discordance 2p(1 - p) for 0/1 scores, SD of differences sqrt(2) x SD of the scores); `basis`
    says which. `note`: the sentence for the reader ("with n = 12, differences below 0.35 cannot
    be detected"). A headline corrected by expert labels is sized on its raw verdicts, as the paired
    tests compare them (`PAIRED_RAW_NOTE`).
    """
    samples = _Samples()
    rows = []
    for task, group in _by_task(entries).items():
        headline_name, _ = headline(group[0].results)
        metric = _compared(headline_name)  # a corrected headline is compared on its raw verdicts (PAIRED_RAW_NOTE)
        best: dict[str, Any] | None = None
        for a, b in itertools.combinations(group, 2):
            if headline(b.results)[0] != headline_name:
                continue
            sa, sb = samples.scores(a, metric), samples.scores(b, metric)
            if sa is None or sb is None:
                continue
            merged = sa.merge(sb, on="doc_id", suffixes=("_a", "_b")).dropna()
            if len(merged) and (best is None or len(merged) > best["n"]):
                res = stats.min_detectable_difference(merged["value_a"].to_numpy(float),
                                                      merged["value_b"].to_numpy(float), alpha=alpha, power=power)
                basis = (f"observed {a.label} vs {b.label}: "
                         + (f"discordance {res['discordance']:.3f}" if res["kind"] == "paired_binary"
                            else f"SD of differences {res['sd']:.3f}"))
                best = {**res, "basis": basis}
        if best is None:
            s = samples.scores(group[0], metric)
            if s is None:
                rows.append({"task": task, "metric": metric, "n": None, "mdd": np.nan, "basis": "",
                             "note": f"{task}: no per-item {metric} to size a comparison"})
                continue
            v = s["value"].dropna().to_numpy(float)
            if len(v) and np.isin(v, (0.0, 1.0)).all():
                p = float(v.mean())
                res = stats.min_detectable_difference(n=len(v), kind="paired_binary", discordance=2 * p * (1 - p),
                                                      alpha=alpha, power=power)
                basis = f"assumed: a second model with the same score ({p:.3f}), independent errors"
            else:
                sd = float(np.sqrt(2) * v.std(ddof=1)) if len(v) >= 2 else float("nan")
                res = stats.min_detectable_difference(n=len(v), kind="graded", sd=sd, alpha=alpha, power=power)
                basis = f"assumed: independent scores, SD of differences {sd:.3f}"
            best = {**res, "basis": basis}
        n, mdd = best["n"], best["mdd"]
        if np.isfinite(mdd):
            note = (f"{task}: with n = {n}, differences in {metric} below {mdd:.2f} cannot be detected "
                    f"({power:.0%} power, alpha {alpha})")
        elif best["kind"] == "paired_binary" and best.get("discordance", 0) > 0:
            note = (f"{task}: with n = {n}, no difference in {metric} can be detected with {power:.0%} power: "
                    f"even {best['discordance']:.2f}, every item on which the models disagree going one way, "
                    "is too small a set to separate two models")
        else:
            note = f"{task}: n = {n} is too small, or the scores never differ, to size a comparison"
        rows.append({"task": task, "metric": metric, "n": n, "mdd": _tidy(mdd), "basis": best["basis"],
                     "note": note})
    table = pd.DataFrame(rows, columns=MDD_COLUMNS)
    table["n"] = table["n"].astype("Int64")
    return table


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
                 figure: Any | None, *, run_name: str | None = None,
                 detectable: pd.DataFrame | None = None) -> Path:
    """`summary/`: leaderboard.csv, paired_tests.csv, usage.csv, detectable_differences.csv (when
    given), leaderboard.png and run.json.

    `run_name` defaults to the parent folder's name (the notebook saves to `<output_dir>/<run_name>/summary`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = ["leaderboard.csv", "paired_tests.csv", "usage.csv"]
    write_csv_atomic(board, out_dir / "leaderboard.csv", index=False)
    write_csv_atomic(tests, out_dir / "paired_tests.csv", index=False)
    write_csv_atomic(usage, out_dir / "usage.csv", index=False)
    if detectable is not None:
        write_csv_atomic(detectable, out_dir / "detectable_differences.csv", index=False)
        files.append("detectable_differences.csv")
    if figure is not None:
        from evekit import plots  # matplotlib only when there is a figure

        plots.save_figure(figure, out_dir / "leaderboard.png")
        files.append("leaderboard.png")
    write_run_record(out_dir, kind=KIND, notebook=KIND.notebooks[0], run_name=run_name or out_dir.parent.name,
                     files=files)
    return out_dir
