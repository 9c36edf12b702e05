"""Judge validation: how well each judge (and the panel's vote) agrees with expert labels.

Label files (CSV, JSONL or Parquet; the DESIGN's judge-validation contract):

- pointwise: `question`, `reference`, `answer`, `label` (1 = PASS, 0 = FAIL), optional `context`
  (a list of documents, or one text) and `case` (a free-text case type);
- pairwise: `question`, `reference`, `answer_a`, `answer_b`, `label` (`A`, `B` or `tie`), optional
  `case`.

The tables (`pointwise_table`, `pairwise_table`): one row per judge plus the panel's vote, with
`n` (items with a usable verdict), `accuracy`, `kappa` (Cohen's, against the labels),
`sensitivity` (gold PASS judged PASS), `specificity` (gold FAIL judged FAIL), each with
`<name>_ci_low` / `<name>_ci_high` (`evekit.stats.interval` by kind: Wilson for the rates, the
bootstrap of `kappa_interval` for kappa), and `abstained` (a count). A judge without any usable
verdict has empty (NaN) rates, never 0. Pairwise adds position consistency (with both orders)
and position bias. `judge_trust` reads a validation's results.json for the reports that show
judged scores.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evekit.data import Row, load_rows
from evekit.errors import DataError, RowError
from evekit.judges.kinds import POINTWISE_KINDS, get_kind
from evekit.judges.prompts import JudgeCase, PairCase
from evekit.judges.verdicts import abstention_reasons
from evekit.stats import interval

__all__ = ["LabelItem", "VOTE", "KAPPA_WARNING", "POINTWISE_COLUMNS", "PAIRWISE_COLUMNS", "CASE_COLUMNS",
           "COLUMN_DEFAULTS", "load_labels", "judge_cases", "pointwise_table", "pairwise_table",
           "pairwise_decisions", "per_case_table", "abstention_table", "judge_trust", "trust_warnings"]

VOTE = "vote"  # the row of the panel's vote in every table
KAPPA_WARNING = 0.4  # below this validated kappa a judge's scores are flagged
RATES = ("accuracy", "sensitivity", "specificity", "kappa")
POINTWISE_COLUMNS = ["judge", "n", *[c for r in RATES for c in (r, f"{r}_ci_low", f"{r}_ci_high")], "abstained"]
PAIRWISE_COLUMNS = POINTWISE_COLUMNS[:-1] + [
    "position_consistency", "position_consistency_ci_low", "position_consistency_ci_high", "consistent_pairs",
    "position_bias", "position_bias_ci_low", "position_bias_ci_high", "tie_rate", "abstained"]
CASE_COLUMNS = ["case", "judge", "n", "correct", "accuracy", "accuracy_ci_low", "accuracy_ci_high", "abstained"]

# The label file's columns (the column-mapping parameters rename them).
COLUMN_DEFAULTS = {"question_column": "question", "reference_column": "reference", "answer_column": "answer",
                   "answer_a_column": "answer_a", "answer_b_column": "answer_b", "label_column": "label",
                   "case_column": "case", "context_column": "context"}
PAIR_LABELS = ("A", "B", "tie")
SWAP = {"A": "B", "B": "A", "tie": "tie"}


@dataclass
class LabelItem:
    """One expert-labelled judge case: `row` is its 0-based line in the label file."""

    row: int
    question: str
    reference: str
    label: Any  # 1 / 0 (pointwise) or "A" / "B" / "tie" (pairwise)
    case: str = ""
    answer: str = ""
    answer_a: str = ""
    answer_b: str = ""
    context: list[str] = field(default_factory=list)


def _label(value: Any, pairwise: bool, column: str) -> Any:
    if pairwise:
        text = str(value).strip() if value is not None else ""
        for option in PAIR_LABELS:
            if text.lower() == option.lower():
                return option
        raise RowError(column, f"label must be A, B or tie, got {value!r}")
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().upper() in ("0", "1", "PASS", "FAIL"):
        return {"0": 0, "1": 1, "PASS": 1, "FAIL": 0}[value.strip().upper()]
    raise RowError(column, f"label must be 1 (PASS) or 0 (FAIL), got {value!r}")


def _context(row: Row, column: str) -> list[str]:
    value = row.raw(column)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, str) and not value.strip().startswith("["):
        return [value] if value.strip() else []
    docs = row.listing(column)
    return [str(d) for d in docs if d is not None and str(d).strip()]


def load_labels(path: str | Path, kind: str, *, limit: int | None = None,
                **columns: str | None) -> tuple[list[LabelItem], list[str]]:
    """Expert-labelled cases for a judge `kind` from a CSV, JSONL or Parquet file: (items, notes).

    `columns`: the column mapping (`question_column`, ..., see `COLUMN_DEFAULTS`; None: the
    default name); names match case-insensitively. A row that cannot be used is a `DataError`
    naming the file, the line (1-based) and the column. The `context` kind needs documents: rows
    without any are left out and counted in a note (the bundled set has context on some items
    only); the `refusal` kind needs them on every row. `limit`: the first n usable items.
    """
    unknown = set(columns) - set(COLUMN_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown column parameter(s) {sorted(unknown)}; use {sorted(COLUMN_DEFAULTS)}")
    cols = {k: (columns.get(k) or v) for k, v in COLUMN_DEFAULTS.items()}
    get_kind(kind)
    pairwise = kind == "pairwise"
    rows, names, source = load_rows(str(path))
    required = ["question_column", "reference_column", "label_column"]
    required += ["answer_a_column", "answer_b_column"] if pairwise else ["answer_column"]
    if kind == "refusal":
        required = [c for c in required if c != "reference_column"] + ["context_column"]
    lower = {n.lower() for n in names}
    missing = [cols[c] for c in required if cols[c].lower() not in lower]
    if missing:
        raise DataError(f"{source}: no column(s) {missing} (columns: {', '.join(names)}); set the column "
                        f"mapping ({', '.join(c for c in required if cols[c] in missing)})")
    items: list[LabelItem] = []
    skipped = 0
    for i, data in enumerate(rows):
        row = Row(data)
        try:
            item = LabelItem(
                row=i, question=row.text(cols["question_column"]),
                reference=row.text(cols["reference_column"], required=kind != "refusal"),
                label=_label(row.raw(cols["label_column"]), pairwise, cols["label_column"]),
                case=row.text(cols["case_column"], required=False) if row.has(cols["case_column"]) else "",
            )
            if pairwise:
                item.answer_a = row.text(cols["answer_a_column"])
                item.answer_b = row.text(cols["answer_b_column"])
            else:
                item.answer = row.text(cols["answer_column"], required=False)
                if row.has(cols["context_column"]):
                    item.context = _context(row, cols["context_column"])
        except RowError as e:
            raise DataError(f"{source}: line {i + 1} (row {i}), column {e.column!r}: {e.message}") from None
        if kind in ("context", "refusal") and not item.context:
            if kind == "refusal":
                raise DataError(f"{source}: line {i + 1} (row {i}), column {cols['context_column']!r}: the refusal "
                                "judge needs the context documents")
            skipped += 1
            continue
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    notes = []
    if skipped:
        notes.append(f"{skipped} of {len(rows)} rows have no {cols['context_column']!r} documents and are left out: "
                     f"the context judge is validated on the {len(items)} rows that have them")
    if not items:
        raise DataError(f"{source}: no usable labelled item for the {kind} judge")
    return items, notes


def judge_cases(items: Sequence[LabelItem], kind: str, both_orders: bool = False) -> list[Any]:
    """What the judges are shown: one JudgeCase per item (pointwise), or one PairCase per item and
    order (pairwise: the file's order, then swapped with `both_orders`; see `pairwise_decisions`)."""
    if kind in POINTWISE_KINDS:
        return [JudgeCase(question=it.question, answer=it.answer, reference=it.reference or None,
                          context=it.context or None) for it in items]
    return [PairCase(it.question, it.reference, *((it.answer_a, it.answer_b) if order == 0 else (it.answer_b, it.answer_a)))
            for it, order in pairwise_decisions(items, both_orders)]


def pairwise_decisions(items: Sequence[LabelItem], both_orders: bool) -> list[tuple[LabelItem, int]]:
    """(item, order) per pairwise judge call: order 0 shows answer_a first, order 1 swaps them."""
    return [(it, order) for it in items for order in ((0, 1) if both_orders else (0,))]


# ------------------------------------------------------------------------------------ statistics
def _rate(correct: np.ndarray) -> dict[str, Any]:
    return interval(np.asarray(correct, dtype=float), "proportion")


def _kappa(verdicts: Sequence[Any], gold: Sequence[Any], seed: int, n_boot: int) -> dict[str, Any]:
    """Cohen's kappa of verdicts vs labels (items with a verdict) with its bootstrap interval."""
    pairs = [(v, g) for v, g in zip(verdicts, gold) if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not pairs:
        nan = float("nan")
        return {"value": nan, "ci_low": nan, "ci_high": nan, "n": 0}
    codes = {c: k for k, c in enumerate(sorted({str(x) for p in pairs for x in p}))}
    table = np.array([[codes[str(v)], codes[str(g)]] for v, g in pairs], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):  # statsmodels' SE of a constant judge
        return interval(table, "kappa", stat="cohen", seed=seed, n_boot=n_boot)


def _fill(row: dict[str, Any], name: str, res: dict[str, Any]) -> None:
    row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = res["value"], res["ci_low"], res["ci_high"]


def _verdict_columns(judged: pd.DataFrame, names: Sequence[str]) -> dict[str, pd.Series]:
    cols = {n: judged[f"judge_{n}"] for n in names}
    cols[VOTE] = judged["judge_voting"]
    return cols


def pointwise_table(items: Sequence[LabelItem], judged: pd.DataFrame, judge_names: Sequence[str], *,
                    seed: int = 0, n_boot: int = 2000) -> pd.DataFrame:
    """One row per judge and one for the panel's vote (`VOTE`): see the module docstring.

    `judged`: the panel's table (`JudgePanel.judge`, one row per item in order: judge_<name> 1.0 /
    0.0 / NaN = abstained, judge_voting).
    """
    gold = np.array([it.label for it in items], dtype=float)
    rows = []
    for name, col in _verdict_columns(judged, judge_names).items():
        v = col.to_numpy(dtype=float)
        used = ~np.isnan(v)
        row: dict[str, Any] = {"judge": name, "n": int(used.sum()), "abstained": int((~used).sum())}
        _fill(row, "accuracy", _rate(v[used] == gold[used]))
        _fill(row, "sensitivity", _rate(v[used & (gold == 1)] == 1))
        _fill(row, "specificity", _rate(v[used & (gold == 0)] == 0))
        _fill(row, "kappa", _kappa(list(v), list(gold), seed, n_boot))
        rows.append(row)
    return pd.DataFrame(rows, columns=POINTWISE_COLUMNS)


def _ratio_interval(num: np.ndarray, den: np.ndarray, seed: int, n_boot: int) -> dict[str, Any]:
    """sum(num) / sum(den) over items with a 95% interval resampling items (each item may hold two
    decisions): Wilson when every item holds at most one, else a percentile bootstrap over items."""
    used = den > 0
    num, den = num[used], den[used]
    if len(num) == 0:
        nan = float("nan")
        return {"value": nan, "ci_low": nan, "ci_high": nan, "n": 0}
    if (den == 1).all():
        return interval(num, "proportion")

    def stat(data: Any, axis: int = 0) -> np.ndarray:
        data = np.asarray(data, dtype=float)
        return np.take(data, 0, axis=-1).sum(axis=axis) / np.take(data, 1, axis=-1).sum(axis=axis)

    res = interval(np.column_stack([num, den]), "corpus", stat=stat, seed=seed, n_boot=n_boot)
    res["value"] = float(num.sum() / den.sum())
    return res


def pairwise_table(items: Sequence[LabelItem], judged: pd.DataFrame, judge_names: Sequence[str], *,
                   both_orders: bool = False, seed: int = 0, n_boot: int = 2000) -> pd.DataFrame:
    """One row per judge and the panel's vote for the pairwise kind.

    `judged` has one row per (item, order) of `pairwise_decisions`, verdicts about positions as
    shown. accuracy: share of decisions (turned back to the file's orientation) equal to the label,
    resampling items; kappa: Cohen's over the labels A/B/tie on the file's order (order 0);
    sensitivity and specificity do not apply (NaN); position_consistency (both orders): share of
    items judged in both orders whose verdict did not change with the order; position_bias: share
    of decisive verdicts (A or B as shown) for the answer shown first (0.5 = none); tie_rate:
    share of verdicts that are a tie; abstained: decisions without a usable verdict.
    """
    decisions = pairwise_decisions(items, both_orders)
    if len(decisions) != len(judged):
        raise ValueError(f"{len(judged)} judged rows for {len(decisions)} pairwise decisions")
    index = {id(it): k for k, it in enumerate(items)}
    n_items = len(items)
    rows = []
    for name, col in _verdict_columns(judged, judge_names).items():
        said = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in col]
        oriented = [None if s is None else (s if order == 0 else SWAP[s]) for s, (_, order) in zip(said, decisions)]
        num, den = np.zeros(n_items), np.zeros(n_items)
        first_num, first_den = np.zeros(n_items), np.zeros(n_items)
        by_item: dict[int, dict[int, str]] = {}
        for s, o, (it, order) in zip(said, oriented, decisions):
            if s is None:
                continue
            k = index[id(it)]
            den[k] += 1
            num[k] += float(o == it.label)
            if s in ("A", "B"):
                first_den[k] += 1
                first_num[k] += float(s == "A")
            by_item.setdefault(k, {})[order] = o
        used = [s for s in said if s is not None]
        row: dict[str, Any] = {"judge": name, "n": len(used), "abstained": len(said) - len(used)}
        _fill(row, "accuracy", _ratio_interval(num, den, seed, n_boot))
        nan = {"value": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}
        _fill(row, "sensitivity", nan)
        _fill(row, "specificity", nan)
        first = [(o, it.label) for o, (it, order) in zip(oriented, decisions) if order == 0]
        _fill(row, "kappa", _kappa([o for o, _ in first], [g for _, g in first], seed, n_boot))
        if both_orders:
            both = [v for v in by_item.values() if len(v) == 2]
            consistent = np.array([float(v[0] == v[1]) for v in both])
            _fill(row, "position_consistency", _rate(consistent) if len(both) else nan)
            row["consistent_pairs"] = int(consistent.sum())
        else:
            _fill(row, "position_consistency", nan)
            row["consistent_pairs"] = None
        _fill(row, "position_bias", _ratio_interval(first_num, first_den, seed, n_boot))
        row["tie_rate"] = float(np.mean([s == "tie" for s in used])) if used else float("nan")
        rows.append(row)
    table = pd.DataFrame(rows, columns=PAIRWISE_COLUMNS)
    table["consistent_pairs"] = table["consistent_pairs"].astype("Int64")
    return table


def per_case_table(items: Sequence[LabelItem], judged: pd.DataFrame, judge_names: Sequence[str], *,
                   both_orders: bool = False) -> pd.DataFrame:
    """Accuracy per case type and judge (and the vote): case, judge, n (usable verdicts), correct,
    accuracy with its Wilson interval (over decisions), abstained. Items without a case are "(none)"."""
    if items and isinstance(items[0].label, str):  # pairwise: one row per (item, order)
        decisions = pairwise_decisions(items, both_orders)
        gold = [it.label for it, _ in decisions]
        cases = [it.case or "(none)" for it, _ in decisions]
        orient = [order for _, order in decisions]
    else:
        gold = [it.label for it in items]
        cases = [it.case or "(none)" for it in items]
        orient = [0] * len(items)
    rows = []
    for name, col in _verdict_columns(judged, judge_names).items():
        values = list(col)
        for case in dict.fromkeys(cases):
            correct, abstained = [], 0
            for v, g, c, order in zip(values, gold, cases, orient):
                if c != case:
                    continue
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    abstained += 1
                    continue
                v = SWAP[v] if isinstance(v, str) and order == 1 else v
                correct.append(float(v == g))
            res = _rate(np.array(correct))
            rows.append({"case": case, "judge": name, "n": len(correct), "correct": int(sum(correct)),
                         "accuracy": res["value"], "accuracy_ci_low": res["ci_low"],
                         "accuracy_ci_high": res["ci_high"], "abstained": abstained})
    return pd.DataFrame(rows, columns=CASE_COLUMNS)


def abstention_table(judged: pd.DataFrame, judge_names: Sequence[str]) -> pd.DataFrame:
    """Per judge and reason: how many verdicts were abstentions (see `verdicts.abstention_reasons`)."""
    rows = [{"judge": n, "reason": reason, "count": count}
            for n in judge_names
            for reason, count in abstention_reasons(judged[f"judge_{n}_error"]).items()]
    return pd.DataFrame(rows, columns=["judge", "reason", "count"])


# ------------------------------------------------------------------------------------ trust
def judge_trust(validation_results_path: str | Path, judge_names: Sequence[str], *,
                kind: str | None = None) -> pd.DataFrame:
    """Each judge's validated accuracy and kappa from a judge-validation results.json.

    One row per name of `judge_names` (matched by judge name): judge, validated_kind,
    validated_n, validated_accuracy (+ _ci_low/_ci_high), validated_kappa (+ _ci_low/_ci_high),
    warning ("" when none). A warning is given when kappa is below `KAPPA_WARNING` (or undefined),
    when the judge is not in the validation, and when the validation is of another judge kind
    than `kind`. `trust_warnings(table)` lists them as sentences.
    """
    path = Path(validation_results_path)
    try:
        data = json.loads(path.read_text())
        table = {r["judge"]: r for r in data["table"]}
        vkind = data.get("judge_kind")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a judge-validation results.json ({type(exc).__name__}: {exc})") from None
    rows = []
    for name in judge_names:
        r = table.get(name)
        row: dict[str, Any] = {"judge": name, "validated_kind": vkind}
        for key in ("accuracy", "accuracy_ci_low", "accuracy_ci_high", "kappa", "kappa_ci_low", "kappa_ci_high"):
            row[f"validated_{key}"] = float("nan") if r is None or r.get(key) is None else float(r[key])
        row["validated_n"] = None if r is None else r.get("n")
        kappa = row["validated_kappa"]
        warning = []
        if r is None:
            warning.append(f"judge {name!r} is not in the validation {path.name} (judges there: "
                           f"{', '.join(k for k in table if k != VOTE)})")
        elif math.isnan(kappa):
            warning.append(f"judge {name!r}: kappa against the expert labels is undefined (no usable verdicts, "
                           "or every verdict the same)")
        elif kappa < KAPPA_WARNING:
            warning.append(f"judge {name!r}: kappa against the expert labels is {kappa:.2f} (< {KAPPA_WARNING}): "
                           "its verdicts agree little beyond chance with the experts; do not trust its scores")
        if kind is not None and vkind is not None and vkind != kind:
            warning.append(f"the validation is of the {vkind} judge, these scores come from the {kind} judge")
        row["warning"] = "; ".join(warning)
        rows.append(row)
    out = pd.DataFrame(rows)
    out["validated_n"] = out["validated_n"].astype("Int64")
    return out


def trust_warnings(table: pd.DataFrame) -> list[str]:
    """The warnings of a `judge_trust` table, one sentence each."""
    return [w for w in table.get("warning", pd.Series(dtype=str)) if isinstance(w, str) and w]


def trust_columns(trust: pd.DataFrame) -> pd.DataFrame:
    """The judge-trust columns every judge table shows (one row per judge, indexed by judge):
    'validated accuracy [95% CI]', 'validated kappa', 'validated n'; '–' where a judge was not
    validated or gave no verdict."""
    t = trust.set_index("judge") if "judge" in trust.columns else trust
    out = pd.DataFrame(index=t.index)
    out["validated accuracy [95% CI]"] = [
        "–" if pd.isna(a) else f"{a:.0%} [{lo:.0%}, {hi:.0%}]"
        for a, lo, hi in t[["validated_accuracy", "validated_accuracy_ci_low", "validated_accuracy_ci_high"]].to_numpy()]
    out["validated kappa"] = ["–" if pd.isna(k) else f"{k:.2f}" for k in t["validated_kappa"]]
    out["validated n"] = t["validated_n"].astype(object).where(t["validated_n"].notna(), "–")
    return out
