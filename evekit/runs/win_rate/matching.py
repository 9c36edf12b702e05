"""Reading the two models' answer CSVs and pairing their rows by question.

Accepts evekit's samples.csv and the CSVs of EVE's evalkit / lm-evaluation-harness (columns
doc.Question, target, filtered_resps; optional failed, error, doc_id and context columns).
Nothing is dropped silently: rows without a partner and pairs whose generation failed are kept
in the `Comparison` with the reason.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evekit.errors import ParameterError
from evekit.naming import entry_name
from evekit.paths import display_path, resolve_path, safe_name
from evekit.runs.params import check_files

__all__ = ["REQUIRED_COLUMNS", "DOC_PREFIXES", "doc_column", "doc_spellings", "ModelSpec", "Comparison", "normalize_ws",
           "unwrap_response", "read_answers", "cluster_column", "item_keys", "question_clusters", "require_clusters",
           "match_files", "load_comparisons"]

REQUIRED_COLUMNS = ("doc.Question", "target", "filtered_resps")
# How a dataset field (`Question`, `Answer`, `Choices`, ...) is spelt in an answers CSV: EVE's evalkit
# writes `doc\\.Question` (the two backslashes lm-eval's flattening leaves), evekit and lm-eval
# `doc.Question`, and EVE's own loader also takes a bare `Question`. Matched case-insensitively.
DOC_PREFIXES = ("doc\\\\.", "doc\\.", "doc.", "")


def doc_spellings(name: str) -> list[str]:
    """Every accepted spelling of a `doc.` column (`doc.Question` or `Question`), evekit's first."""
    bare = name[4:] if name.lower().startswith("doc.") else name
    return [f"doc.{bare}", f"doc\\\\.{bare}", f"doc\\.{bare}", bare]


def doc_column(columns: Sequence[str], name: str) -> str | None:
    """The column of `columns` that holds the doc field `name` (`doc.Question` or `Question`) in any
    accepted spelling (`doc_spellings`), case-insensitive; None when there is none. The one place
    that knows the spellings: every reader of answer CSVs asks it."""
    lower = {str(c).strip().lower(): c for c in columns}
    for spelling in doc_spellings(name):
        if spelling.lower() in lower:
            return lower[spelling.lower()]
    return None
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f", ""}


@dataclass(frozen=True)
class ModelSpec:
    """One side of a comparison: a display name and the CSV with that model's answers."""

    name: str
    file: str

    @classmethod
    def from_dict(cls, d: "dict[str, Any] | ModelSpec", side: str) -> "ModelSpec":
        """An entry {file, name}; without a name, the configuration name of the run that wrote the
        file (`naming.entry_name`), so the pages call it what the index and summary call it."""
        if isinstance(d, ModelSpec):
            return d
        if not isinstance(d, dict) or not d.get("file"):
            raise ParameterError(f"{side}: each entry needs a `file` (and optionally a `name`), got {d!r}")
        name = d.get("name") or entry_name(resolve_path(str(d["file"])))
        return cls(name=str(name), file=str(d["file"]))

    @property
    def shown_file(self) -> str:
        """The file as the pages show it: relative to the checkout or the working directory."""
        return display_path(resolve_path(self.file))


def model_specs(values: Any, side: str) -> list[ModelSpec]:
    """A parameter's list of {name, file} as ModelSpecs: at least one, unique names, files that
    exist (relative paths resolve like every user path). `side` names the parameter in errors."""
    if isinstance(values, dict):
        values = [values]
    if not isinstance(values, (list, tuple)) or not values:
        raise ParameterError(f"{side} must be a non-empty list of {{name, file}}, got {values!r}")
    specs = [ModelSpec.from_dict(d, side) for d in values]
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ParameterError(f"{side}: model names must be unique; repeated: {', '.join(dupes)} "
                             "(give each entry its own `name`)")
    for s in specs:
        if check_files() and not resolve_path(s.file).is_file():
            raise ParameterError(f"{side} {s.name!r}: file not found: {s.file} "
                                 f"(tried {Path(s.file).resolve()} and {resolve_path(s.file)})")
    return specs


def normalize_ws(text: Any) -> str:
    """Collapse runs of whitespace and trim: the form in which questions and answers are compared."""
    return " ".join(str(text).split())


def unwrap_response(value: Any) -> str:
    """The answer text of a `filtered_resps` cell.

    lm-evaluation-harness (and EVE's evalkit) write it as a stringified list, "['answer']";
    evekit writes the plain text. Only a cell that parses as a Python list is unwrapped.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    text = str(value)
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
        if isinstance(parsed, list):
            while len(parsed) == 1 and isinstance(parsed[0], list):  # [['x']] from some harness versions
                parsed = parsed[0]
            return "" if not parsed else str(parsed[0]) if len(parsed) == 1 else "\n".join(map(str, parsed))
    return text


def _parse_failed(value: str, path: Path, row: int) -> bool:
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE or v == "nan":
        return False
    raise ValueError(f"{path}: row {row}, column 'failed': expected True/False, got {value!r}")


def cluster_column(path: Path, columns: Sequence[str], cluster_by: str) -> str | None:
    """The column of an answers file that holds `cluster_by`: the column itself in any spelling of a
    `doc.` field (`doc_column`), or the `cluster` column of an evekit samples.csv whose run set
    `cluster_by` to it (its results.json says so); None when the file has neither."""
    found = doc_column(columns, cluster_by)
    if found is not None:
        return found
    lower = {str(c).lower(): c for c in columns}
    results = path.parent / "results.json"
    if "cluster" in lower and results.is_file():
        import json

        try:
            design = json.loads(results.read_text()).get("design") or {}
        except (OSError, ValueError):
            return None
        if str(design.get("cluster_by") or "").lower() == cluster_by.lower():
            return lower["cluster"]
    return None


def read_answers(path: str | Path, cluster_by: str | None = None) -> pd.DataFrame:
    """One model's answers from a samples CSV (evekit, EVE evalkit or lm-evaluation-harness).

    Returns columns row (1-based data row), doc_id, question, key (normalised question), target,
    answer, failed, error. A missing column is an error naming the file and listing its columns.
    With `cluster_by` also `cluster` (its value per row, None where empty or where the file lacks
    the column: `cluster_column`; attrs["cluster_column"] names the column read, or None).
    """
    path = resolve_path(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"answers file not found: {path}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty (expected columns {', '.join(REQUIRED_COLUMNS)})") from None
    _check_header(path, raw.columns)
    lower = {c.lower(): c for c in raw.columns}
    cols = {need: need if need in raw.columns else lower.get(need.lower()) for need in REQUIRED_COLUMNS}
    cols["doc.Question"] = doc_column(raw.columns, "doc.Question")
    missing = [need for need, have in cols.items() if have is None]
    if missing:
        spelt = [" or ".join(repr(s) for s in doc_spellings(m)) if m.startswith("doc.") else repr(m) for m in missing]
        raise ValueError(f"{path}: missing column(s) {', '.join(spelt)}; "
                         f"the file has columns: {', '.join(map(repr, raw.columns))}")
    failed_col = lower.get("failed")
    error_col = lower.get("error")
    df = pd.DataFrame({
        "row": np.arange(1, len(raw) + 1),
        "doc_id": raw[lower["doc_id"]] if "doc_id" in lower else pd.Series(range(len(raw)), dtype=str),
        "question": raw[cols["doc.Question"]],
        "target": raw[cols["target"]].map(unwrap_response),
        "answer": raw[cols["filtered_resps"]].map(unwrap_response),
        "failed": [_parse_failed(v, path, i + 1) for i, v in enumerate(raw[failed_col])]
        if failed_col else False,
        "error": raw[error_col] if error_col else "",
    })
    df["key"] = df["question"].map(normalize_ws)
    df["context"] = _context(raw)
    if cluster_by:
        column = cluster_column(path, raw.columns, cluster_by)
        df["cluster"] = (raw[column].map(lambda v: v.strip() or None) if column is not None
                         else pd.Series([None] * len(raw), dtype=object))
        df.attrs["cluster_column"] = column
    df.attrs["has_doc_id"] = "doc_id" in lower
    df.attrs["file"] = str(path)
    df.attrs["columns"] = list(raw.columns)
    return df


_CONTEXT_COLUMN = re.compile(r"(?:doc\\{0,2}\.)?(doc \d+|context)", re.IGNORECASE)


def _check_header(path: Path, columns: Sequence[str]) -> None:
    """A first line that is not the header (a stray line of text before it, as in some of EVE's
    exported CSVs) is an error naming the file and line 1, not a file with odd column names."""
    first = str(columns[0]) if len(columns) else ""
    if '"' in first or (first.startswith("Unnamed") and len(columns) > 1 and all(
            str(c).startswith("Unnamed") for c in columns[1:])):
        raise ValueError(f"{path}: line 1 is not the header row: it starts with {first[:60]!r}; remove the text "
                         "before the column names (doc_id, doc.Question, target, filtered_resps, ...)")


def _context(raw: pd.DataFrame) -> list[tuple[str, ...]]:
    """Per row, the context documents (`doc.Doc 1..n` or `doc.Context`, as evekit and lm-eval write
    them); empty for tasks without context."""
    cols = sorted((c for c in raw.columns if _CONTEXT_COLUMN.fullmatch(c.strip())), key=lambda c: c.lower())
    return [tuple(str(v).strip() for v in row if str(v).strip()) for row in raw[cols].itertuples(index=False)] \
        if cols else [()] * len(raw)


_SEP = "\x1f"


def _rows(df: pd.DataFrame, mask: Any) -> str:
    rows = df.loc[mask, "row"].astype(int).tolist()
    return "row" + ("s " if len(rows) > 1 else " ") + ", ".join(map(str, rows))


def item_keys(frames: dict[str, pd.DataFrame]) -> None:
    """Give each row of each answers file its item: `key` (and `occ`), equal across files exactly
    when the rows are the same item, so that answers are paired by item, never by position.

    The key is the question (whitespace-normalised), with its context documents when every file
    has them (a question asked over two documents is two items). Where a question repeats in a
    file, the reference answer (`target`) is added, then `doc_id` when every file has that column
    and the repeated rows' ids agree across the files. Rows alike on all of that are the same item
    asked again (the judge would see the same thing), paired by occurrence. A repeated question
    that one file tells apart by its documents and another cannot is ambiguous: ValueError naming
    the files and rows. `frames` maps a name to a `read_answers` frame; `key`/`occ` are set in place.
    """
    with_context = all(any(len(c) for c in df["context"]) for df in frames.values())
    for df in frames.values():
        base = df["question"].map(normalize_ws)
        if with_context:
            base = base + _SEP + df["context"].map(lambda c: _SEP.join(normalize_ws(d) for d in c))
        df["key"] = base

    def repeated() -> set[str]:
        return set().union(*(set(df["key"][df["key"].duplicated(keep=False)]) for df in frames.values()))

    again = repeated()
    for df in frames.values():
        mask = df["key"].isin(again)
        df.loc[mask, "key"] = df.loc[mask, "key"] + _SEP + "target=" + df.loc[mask, "target"].map(normalize_ws)
    again = repeated()
    by_id = all(df.attrs.get("has_doc_id") for df in frames.values())
    for key in sorted(again):
        having = {n: df["key"] == key for n, df in frames.items() if (df["key"] == key).any()}
        ids = {n: frames[n].loc[m, "doc_id"].astype(str) for n, m in having.items()}
        if by_id and all(v.is_unique for v in ids.values()) and len({frozenset(v) for v in ids.values()}) == 1:
            for n, m in having.items():
                frames[n].loc[m, "key"] = key + _SEP + "doc_id=" + frames[n].loc[m, "doc_id"].astype(str)
            continue
        contexts = {n: {tuple(normalize_ws(d) for d in c) for c in frames[n].loc[m, "context"]}
                    for n, m in having.items()}
        if any(len(c) > 1 for c in contexts.values()):  # distinct items that some file cannot tell apart
            first = frames[next(iter(having))].loc[next(iter(having.values())), "question"].iloc[0]
            where = "; ".join(f"{frames[n].attrs.get('file', n)} {_rows(frames[n], m)}" for n, m in having.items())
            raise ValueError(
                f"ambiguous pairing: the question {normalize_ws(first)[:80]!r} is asked over different documents "
                f"with the same reference answer, and not every file has the documents (doc.Doc 1.., doc.Context) "
                f"or doc_ids that agree, so its rows cannot be paired: {where}. Give every file its context "
                "columns or matching doc_id values")
    for df in frames.values():
        df["occ"] = df.groupby("key").cumcount()


def question_clusters(frames: dict[str, pd.DataFrame], cluster_by: str) -> dict[tuple[str, int], str]:
    """Each item's (`key`, `occ` of `item_keys`) cluster, from every answers file read with
    `cluster_by` that has it. No file with the column, or two files that put one item in different
    clusters, is a ValueError naming the files (and rows); an item no file gives a value has none
    here (`require_clusters` names it when it is used)."""
    having = {n: df for n, df in frames.items() if df.attrs.get("cluster_column")}
    if not having:
        shown = "; ".join(f"{df.attrs.get('file', n)}: {', '.join(map(repr, df.attrs.get('columns', [])))}"
                          for n, df in frames.items())
        raise ValueError(f"cluster_by={cluster_by!r}: no answers file has that column (as {cluster_by!r}, "
                         f"'doc.{cluster_by}', or the 'cluster' column of an evekit samples.csv whose run set "
                         f"cluster_by={cluster_by!r}); files and columns: {shown}")
    out: dict[tuple[str, int], str] = {}
    where: dict[tuple[str, int], str] = {}
    for name, df in having.items():
        for r in df.itertuples():
            if r.cluster is None or pd.isna(r.cluster):
                continue
            key = (r.key, r.occ)
            here = f"{df.attrs.get('file', name)} row {r.row}"
            if key in out and out[key] != r.cluster:
                raise ValueError(f"cluster_by={cluster_by!r}: the question {normalize_ws(r.question)[:80]!r} is in "
                                 f"cluster {out[key]!r} in {where[key]} but {r.cluster!r} in {here}; one question "
                                 "belongs to one cluster")
            out.setdefault(key, r.cluster)
            where.setdefault(key, here)
    return out


def require_clusters(clusters: dict[tuple[str, int], str], keys: Sequence[tuple[str, int]], cluster_by: str,
                     frames: dict[str, pd.DataFrame]) -> list[str]:
    """The clusters of `keys` in order; a key without one is a ValueError naming its file and row."""
    missing = [k for k in keys if k not in clusters]
    if missing:
        key = missing[0]
        name, df = next((n, f) for n, f in frames.items() if ((f["key"] == key[0]) & (f["occ"] == key[1])).any())
        row = int(df.loc[(df["key"] == key[0]) & (df["occ"] == key[1]), "row"].iloc[0])
        raise ValueError(f"cluster_by={cluster_by!r}: {df.attrs.get('file', name)} row {row} (and "
                         f"{len(missing) - 1} more question(s)) has no {cluster_by!r} value in any answers file")
    return [clusters[k] for k in keys]


@dataclass
class Comparison:
    """One model pair: the matched questions, what could not be matched, and (after judging) results."""

    name_a: str
    name_b: str
    file_a: str
    file_b: str
    pairs: pd.DataFrame            # qid, question, target, answer_a, answer_b, doc_id_a/b, row_a/b, len_a/b, identical
    unmatched: pd.DataFrame        # model, file, row, doc_id, question
    failed_generation: pd.DataFrame  # question, row_a, row_b, failed_in, error
    n_rows_a: int = 0
    n_rows_b: int = 0
    n_matched: int = 0
    n_over_limit: int = 0
    target_mismatch: int = 0
    judges: list[str] = field(default_factory=list)
    results: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    outcomes: pd.DataFrame | None = None
    both_orders: bool = False
    corrected: dict | None = None  # the win rate corrected by expert labels (`runs.win_rate.corrected`)

    @property
    def label(self) -> str:
        return f"{safe_name(self.name_a)}_vs_{safe_name(self.name_b)}"


def match_files(spec_a: ModelSpec, spec_b: ModelSpec, *, limit: int | None = None,
                cluster_by: str | None = None) -> Comparison:
    """Pair the two models' rows by item (`item_keys`: the question, its documents, and where it
    repeats its reference answer and doc_id; never the row's position). Rows without a
    partner are reported in `unmatched`; pairs where either generation failed are excluded and
    listed in `failed_generation`; `limit` keeps the first N usable pairs in model A's order.
    `cluster_by`: `pairs` gains each question's `cluster` (`question_clusters`).
    """
    a, b = read_answers(spec_a.file, cluster_by), read_answers(spec_b.file, cluster_by)
    item_keys({"a": a, "b": b})
    clusters = question_clusters({"a": a, "b": b}, cluster_by) if cluster_by else None
    m = a.merge(b, on=["key", "occ"], how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"].sort_values("row_a")
    if both.empty:
        raise ValueError(
            f"{spec_a.file} ({spec_a.name}) and {spec_b.file} ({spec_b.name}) have no question in common "
            f"(compared after whitespace normalisation; {len(a)} and {len(b)} rows). First questions: "
            f"{a['question'].map(normalize_ws).head(2).tolist()} vs {b['question'].map(normalize_ws).head(2).tolist()}"
        )
    def left_over(side: str, spec: ModelSpec) -> pd.DataFrame:
        rows = m[m["_merge"] == ("left_only" if side == "a" else "right_only")]
        return pd.DataFrame({"model": spec.name, "file": spec.shown_file, "row": rows[f"row_{side}"].astype(int),
                             "doc_id": rows[f"doc_id_{side}"], "question": rows[f"question_{side}"]})

    unmatched = pd.concat([left_over("a", spec_a), left_over("b", spec_b)], ignore_index=True)
    fa, fb = both["failed_a"].astype(bool), both["failed_b"].astype(bool)
    failed_in = np.where(fa & fb, "both", np.where(fa, spec_a.name, spec_b.name))
    bad = both[fa | fb]
    failed_generation = pd.DataFrame({
        "question": bad["question_a"], "row_a": bad["row_a"].astype(int), "row_b": bad["row_b"].astype(int),
        "failed_in": failed_in[(fa | fb).to_numpy()],
        "error": [ea or eb for ea, eb in zip(bad["error_a"], bad["error_b"])],
    }).reset_index(drop=True)
    good = both[~(fa | fb)]
    n_usable = len(good)
    if limit is not None:
        good = good.head(limit)
    answer_a, answer_b = good["answer_a"].map(normalize_ws), good["answer_b"].map(normalize_ws)
    pairs = pd.DataFrame({
        "qid": np.arange(len(good)),
        "question": good["question_a"].to_numpy(),
        "target": good["target_a"].to_numpy(),
        "answer_a": good["answer_a"].to_numpy(),
        "answer_b": good["answer_b"].to_numpy(),
        "context": [ca or cb for ca, cb in zip(good["context_a"], good["context_b"])],
        "doc_id_a": good["doc_id_a"].to_numpy(),
        "doc_id_b": good["doc_id_b"].to_numpy(),
        "row_a": good["row_a"].astype(int).to_numpy(),
        "row_b": good["row_b"].astype(int).to_numpy(),
        "len_a": answer_a.str.len().to_numpy(),
        "len_b": answer_b.str.len().to_numpy(),
        "identical": (answer_a == answer_b).to_numpy(),
    })
    if clusters is not None:
        pairs["cluster"] = require_clusters(clusters, list(zip(good["key"], good["occ"])), str(cluster_by),
                                            {"a": a, "b": b})
    return Comparison(
        name_a=spec_a.name, name_b=spec_b.name, file_a=spec_a.file, file_b=spec_b.file, pairs=pairs,
        unmatched=unmatched, failed_generation=failed_generation, n_rows_a=len(a), n_rows_b=len(b),
        n_matched=len(both), n_over_limit=n_usable - len(good),
        target_mismatch=int((both["target_a"].map(normalize_ws) != both["target_b"].map(normalize_ws)).sum()),
    )


def load_comparisons(model_a: Sequence[ModelSpec], model_b: Sequence[ModelSpec], *,
                     limit: int | None = None, cluster_by: str | None = None) -> list[Comparison]:
    """Every model_a x model_b pair, matched and ready to judge (`cluster_by`: see `match_files`)."""
    return [match_files(a, b, limit=limit, cluster_by=cluster_by) for a in model_a for b in model_b]
