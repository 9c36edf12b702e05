"""The item explorer: every unit of a run (an item, a win-rate decision, a ranking battle, a
validated answer) as one row of a sortable, searchable, filterable table that opens into the
unit's whole story (what was sent, what came back, what was parsed, the gold answer, each judge's
verdict and rationale, scores, tokens, errors).

One self-contained widget, the same in JupyterLab, in `report.html` (nbconvert) and in a page
opened from disk: a JSON blob in a `<script type="application/json">` element and a small
vanilla-JS renderer, no network and no library assets. Chosen over `itables` (DataTables) because
a row's story (nested, collapsible, every string as text) needs custom JavaScript there anyway,
and its data would be embedded uncompressed.

Everything a dataset, a model or a judge wrote is text, never markup: the blob is JSON with every
`<`, `>` and `&` written as a \\u escape (nothing in it can close the script element or open a
comment), and the renderer only ever sets `textContent` (no `innerHTML`, no `href` from data).
Large runs: above `INLINE_LIMIT` characters the blob is gzip-compressed and base64-encoded (the
browser's `DecompressionStream` inflates it), repeated long texts (few-shot examples) are stored
once, and the table renders one page of rows at a time.

Links: `#explorer?outcome=wrong&group=x&q=text&fail=acc&open=<id>` (the element's id, then the
filter) opens the explorer filtered; the page's "link to this view" gives that address.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from evekit.report import MISSING, format_metric, write_text_atomic

__all__ = ["Explorer", "Column", "TASK_OUTCOMES", "task_explorer", "decision_explorer", "battle_explorer",
           "validation_explorer", "text", "kv", "messages", "INLINE_LIMIT"]

# The outcomes a task item can have (an item may have several: wrong and truncated, say).
CORRECT, WRONG, UNPARSED, FAILED, TRUNCATED, DISAGREE, ABSTAINED = (
    "correct", "wrong", "unparsed", "failed", "truncated", "judges disagree", "abstained")
TASK_OUTCOMES = (CORRECT, WRONG, UNPARSED, FAILED, TRUNCATED, DISAGREE, ABSTAINED)
TIE = "tie"
INLINE_LIMIT = 1_500_000  # characters of JSON above which the blob is compressed
CELL_CHARS = 140  # a table cell shows this much of a long text; the story shows it all
INTERN_CHARS = 80  # texts at least this long that occur twice are stored once


@dataclass(frozen=True)
class Column:
    """A column of the explorer's table: the row's `cells` key, its heading, numeric sort or text."""

    key: str
    label: str
    numeric: bool = False


# -- story sections (what a row opens into) ----------------------------------------------------
def _float(value: float) -> str:
    """Below 1 in size, four decimals (as the score tables show), not four significant digits: a
    cosine of float32 embeddings near 0 differs in its sixth decimal between torch builds, and the
    committed notebooks' explorers must not."""
    if value == 0 or abs(value) >= 1 or math.isinf(value):
        return f"{value:.4g}"
    if abs(value) < 5e-5:
        return f"{value:.1e}"
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return _float(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _str(value.item())
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)


def text(title: str, value: Any, *, fold: bool = False) -> dict[str, Any] | None:
    """A section of text shown as it is (pre-wrapped); `fold`: collapsed until clicked. None when empty."""
    s = _str(value)
    if s is None or s == "":
        return None
    return {"t": "text", "h": title, "v": s, **({"fold": 1} if fold else {})}


def kv(title: str, pairs: Iterable[tuple[str, Any]], *, fold: bool = False) -> dict[str, Any] | None:
    """A section of name: value lines (missing values left out). None when nothing is left."""
    rows = [[str(k), s] for k, v in pairs if (s := _str(v)) is not None and s != ""]
    if not rows:
        return None
    return {"t": "kv", "h": title, "v": rows, **({"fold": 1} if fold else {})}


def messages(title: str, msgs: Sequence[Mapping[str, Any]], shots: int = 0) -> dict[str, Any] | None:
    """The chat messages sent, the first `shots` of them (few-shot examples, after any system
    message) collapsed under one heading."""
    if not msgs:
        return None
    return {"t": "msgs", "h": title, "v": [{"r": str(m.get("role", "")), "c": _str(m.get("content")) or ""}
                                         for m in msgs], "shots": int(shots)}


def _clip(value: Any, n: int = CELL_CHARS) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if isinstance(value, float) and math.isnan(value) else value
    s = _str(value)
    if s is None:
        return None
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _num(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


# -- the widget -------------------------------------------------------------------------------
@dataclass
class Explorer:
    """Rows of one run for reading one by one. `rows`: dicts with `id`, `cells` (by column key),
    `outcomes` (labels of `outcomes`), `group`, `fails` (metric names the row fails) and `story`
    (sections from `text`, `kv`, `messages`). Shown by Jupyter (`_repr_html_`), written into any
    page with `to_html()`, or as a page of its own with `save()`."""

    unit: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    outcomes: Sequence[str] = TASK_OUTCOMES
    title: str = ""
    group_label: str | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)  # name, value (text), failing (count)
    anchor: str = "explorer"
    page_size: int = 25
    note: str = ""

    def __len__(self) -> int:
        return len(self.rows)

    def count(self, outcome: str) -> int:
        """Rows with `outcome` (what the explorer's filter shows for it)."""
        return sum(outcome in r.get("outcomes", ()) for r in self.rows)

    def failing(self, metric: str) -> int:
        return sum(metric in r.get("fails", ()) for r in self.rows)

    # The data as the page reads it: short keys, outcome and metric names as indices, long texts
    # that repeat (few-shot examples, the same question in several decisions) stored once.
    def data(self) -> dict[str, Any]:
        outcomes = list(dict.fromkeys([*self.outcomes, *(o for r in self.rows for o in r.get("outcomes", ()))]))
        index = {o: i for i, o in enumerate(outcomes)}
        metric_names = [m["name"] for m in self.metrics]
        mindex = {m: i for i, m in enumerate(metric_names)}
        texts: list[str] = []
        seen: dict[str, int] = {}
        first: dict[str, list] = {}

        def intern(holder: dict | list, key: Any, s: str) -> None:
            if len(s) < INTERN_CHARS:
                return
            if s in seen:
                holder[key] = seen[s]
                return
            if s in first:  # its second occurrence: move it to the table, point both at it
                i = seen[s] = len(texts)
                texts.append(s)
                for h, k in first.pop(s):
                    h[k] = i
                holder[key] = i
                return
            first[s] = [(holder, key)]

        rows = []
        for r in self.rows:
            story = []
            for sec in r.get("story", ()):
                if sec is None:
                    continue
                # a copy the interning may rewrite (the texts themselves are shared, never changed)
                sec = {**sec, "v": [dict(m) for m in sec["v"]]} if sec["t"] == "msgs" else dict(sec)
                if sec["t"] == "text":
                    intern(sec, "v", sec["v"])
                elif sec["t"] == "msgs":
                    for m in sec["v"]:
                        intern(m, "c", m["c"])
                story.append(sec)
            cells = r.get("cells", {})
            out = {"id": str(r["id"]), "c": [_clip(cells.get(c.key)) for c in self.columns],
                   "o": [index[o] for o in r.get("outcomes", ())], "s": story}
            if r.get("group") is not None:
                out["g"] = str(r["group"])
            fails = [mindex[m] for m in r.get("fails", ()) if m in mindex]
            if fails:
                out["f"] = fails
            rows.append(out)
        groups = sorted({r["g"] for r in rows if "g" in r}) if self.group_label else []
        return {"unit": self.unit, "title": self.title, "note": self.note,
                "cols": [{"k": c.key, "l": c.label, **({"n": 1} if c.numeric else {})} for c in self.columns],
                "outcomes": outcomes, "groups": groups, "group_label": self.group_label,
                # failing: None where a metric has no per-item pass/fail to filter on
                "metrics": [{"name": m["name"], "value": m.get("value", ""),
                             "failing": self.failing(m["name"]) if m.get("linkable", True) else None}
                            for m in self.metrics],
                "page": self.page_size, "texts": texts, "rows": rows}

    def payload(self) -> tuple[str, str]:
        """(encoding, blob): the JSON with every <, > and & escaped ("json"), or gzip+base64 of it
        when it is longer than INLINE_LIMIT."""
        raw = json.dumps(self.data(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        raw = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        if len(raw) <= INLINE_LIMIT:
            return "json", raw
        packed = gzip.compress(raw.encode("utf-8"), compresslevel=9, mtime=0)  # mtime=0: the same bytes every run
        return "gzip+base64", base64.b64encode(packed).decode("ascii")

    def to_html(self) -> str:
        encoding, blob = self.payload()
        # A stable id from the content: the same notebook output on every run (nbval compares it).
        uid = "ee" + hashlib.sha256(blob.encode("ascii", "backslashreplace")).hexdigest()[:12]
        count = f"{len(self.rows)} {self.unit}{'' if len(self.rows) == 1 else 's'}"
        return (f'<div class="evekit-explorer" id="{html.escape(self.anchor)}" data-ee="{uid}">'
                f"<style>{_CSS}</style>"
                f'<p class="ee-fallback">Item explorer ({html.escape(count)}): it needs JavaScript, which runs in '
                "report.html and in a trusted notebook (run the cell).</p>"
                f'<script type="application/json" class="ee-data" data-encoding="{encoding}">{blob}</script>'
                f'<script>{_JS.replace("__UID__", uid)}</script></div>')

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        counts = ", ".join(f"{o}: {self.count(o)}" for o in self.outcomes if self.count(o))
        return f"Explorer of {len(self.rows)} {self.unit}s ({counts})"

    def save(self, path: Path, title: str | None = None) -> Path:
        """A page of its own holding only the explorer."""
        name = html.escape(title or self.title or f"{self.unit}s")
        page = (f'<!doctype html><html><head><meta charset="utf-8"><title>{name}</title></head>'
                f"<body><h1>{name}</h1>{self.to_html()}</body></html>\n")
        return write_text_atomic(Path(path), page)


# -- a task run's items ---------------------------------------------------------------------
def _verdict_word(value: Any, method: Any) -> str:
    v = _num(value)
    if method == "rule":
        return "FAIL by rule"
    if v is None:
        return "abstained"
    return "PASS" if v >= 1 else "FAIL" if v <= 0 else f"{v:.3g}"


def _binary(values: pd.Series) -> bool:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return len(v) > 0 and bool(v.isin([0.0, 1.0]).all())


def _sent_sections(out: Mapping[str, Any] | None) -> list[dict[str, Any] | None]:
    """What the model was sent: chat messages with the few-shot turns collapsed, or the prompt
    (few-shot part collapsed)."""
    if not out:
        return []
    msgs = out.get("messages")
    if msgs:
        lead = 1 if msgs and msgs[0].get("role") == "system" else 0
        return [messages("Sent to the model (chat messages)", msgs, shots=max(0, len(msgs) - lead - 1))]
    prompt, own = _str(out.get("prompt")) or "", _str(out.get("item_prompt")) or ""
    if own and prompt.endswith(own) and len(prompt) > len(own):
        return [text("Few-shot examples (the start of the prompt)", prompt[: -len(own)], fold=True),
                text("Sent to the model (the item's prompt)", own)]
    return [text("Sent to the model (prompt)", prompt)]


_SHOWN = {"doc_id", "doc.Question", "target", "filtered_resps", "response", "reasoning", "parsed", "unparsed",
          "unparsed_reason", "failed", "error", "finish_reason", "completion_tokens", "truncated", "group",
          "doc.Choices", "doc.Answer", "doc.Context"}


def task_explorer(samples: pd.DataFrame, outputs: Sequence[Mapping[str, Any]] | None = None, *,
                  judges: Sequence[str] = (), headline: str | None = None,
                  metrics: Mapping[str, Mapping[str, Any]] | None = None, group_by: str | None = None,
                  title: str = "", metric_column: Any = None) -> Explorer:
    """A task run's items: `samples` (samples.csv's rows), `outputs` (model_outputs.jsonl's records,
    aligned with them: what was sent), the judges' names, the headline metric (which decides
    correct / wrong) and the run's metrics (each links to the items it fails).
    `metric_column(metric, judges)` names a metric's per-item column (default: the metric's name)."""
    col_of = metric_column or (lambda m, j: m)
    s = samples.reset_index(drop=True)
    metrics = dict(metrics or {})
    key = col_of(headline, list(judges)) if headline else None
    if key not in s.columns:  # a corpus headline (f1): the per-item score that says which items went wrong
        key = next((c for c in ("acc", "entity_f1") if c in s.columns), None)
    graded = key is not None and bool((pd.to_numeric(s[key], errors="coerce") > 1).any())
    # A metric links to the items it fails when its per-item column is 0/1 (0: fails).
    fail_cols = {m: col_of(m, list(judges)) for m in metrics
                 if col_of(m, list(judges)) in s.columns and _binary(s[col_of(m, list(judges))])}
    outputs = list(outputs or [])
    by_doc = {str(o.get("doc_id")): o for o in outputs}
    doc_cols = [c for c in s.columns if c.startswith("doc.Doc ")]
    rows = []
    # Rows as plain dicts: a Series per row (iterrows) costs ten times as much on a large run.
    for i, r in enumerate(s.to_dict("records")):
        failed = bool(r.get("failed"))
        unparsed = bool(r.get("unparsed"))
        tags: list[str] = []
        value = _num(r.get(key)) if key else None
        if failed:
            tags.append(FAILED)
        elif key is not None and not graded and value is not None:
            tags.append(CORRECT if value >= 1 and not unparsed else WRONG)
        elif unparsed:
            tags.append(WRONG)
        if unparsed:
            tags.append(UNPARSED)
        if bool(r.get("truncated")):
            tags.append(TRUNCATED)
        verdicts, words = [], []
        for j in judges:
            method = r.get(f"judge_{j}_method")
            v = _num(r.get(f"judge_{j}"))
            words.append(f"{j}: {_verdict_word(v, method)}")
            if method != "rule" and v is not None:
                verdicts.append(v)
            if not failed and method != "rule" and v is None and f"judge_{j}" in s.columns:
                if ABSTAINED not in tags:
                    tags.append(ABSTAINED)
        if len(set(verdicts)) > 1:
            tags.append(DISAGREE)
        fails = [m for m, c in fail_cols.items() if not failed and _num(r.get(c)) == 0.0]
        out = outputs[i] if i < len(outputs) and str(outputs[i].get("doc_id")) == str(r.get("doc_id")) \
            else by_doc.get(str(r.get("doc_id")))
        answer = r.get("parsed") if _str(r.get("parsed")) else r.get("filtered_resps")
        story: list[Any] = [
            text("Question", r.get("doc.Question")),
            text("Choices", _str(r.get("doc.Choices")).replace(" | ", "\n") if _str(r.get("doc.Choices")) else None),
            text("Answer under test", r.get("doc.Answer")),
            text("Gold answer", r.get("target")),
            text("Context", r.get("doc.Context"), fold=True),
            *(text(f"Context document {c[len('doc.Doc '):]}", r.get(c), fold=True) for c in doc_cols),
            *_sent_sections(out),
            text("Reasoning (stripped from the reply)", r.get("reasoning"), fold=True),
            text("Raw reply", r.get("response")),
            kv("Parsed", [("answer used", r.get("filtered_resps")),
                          ("parsed answer", r.get("parsed") if _str(r.get("parsed")) != _str(r.get("filtered_resps")) else None),
                          ("why unparsed", r.get("unparsed_reason"))]),
        ]
        for j in judges:
            method = r.get(f"judge_{j}_method")
            story.append(kv(f"Judge {j}", [
                ("verdict", _verdict_word(r.get(f"judge_{j}"), method)), ("how", method),
                ("rationale", r.get(f"judge_{j}_reasoning")),
                ("flag", r.get(f"judge_{j}_flag")),
                ("abstention / error", r.get(f"judge_{j}_error"))]))
            story.append(text(f"Judge {j}: raw reply", r.get(f"judge_{j}_raw"), fold=True))
        judge_cols = {f"judge_{j}{suf}" for j in judges for suf in ("", "_reasoning", "_raw", "_error", "_method",
                                                                    "_flag")}
        story.append(kv("Scores", [(c, r.get(c)) for c in s.columns
                                   if c not in _SHOWN and c not in judge_cols and not c.startswith("doc.")]))
        story.append(kv("Generation", [("finish_reason", r.get("finish_reason")),
                                       ("completion tokens", r.get("completion_tokens")),
                                       ("truncated", "yes" if bool(r.get("truncated")) else None),
                                       ("failed", "yes" if failed else None), ("error", r.get("error"))]))
        cells = {"doc_id": r.get("doc_id"), "question": r.get("doc.Question"), "gold": r.get("target"),
                 "answer": answer, "score": value, "outcome": ", ".join(tags),
                 "judges": "; ".join(words)}
        if group_by:
            cells["group"] = r.get("group")
        rows.append({"id": _str(r.get("doc_id")) or str(i), "cells": cells, "outcomes": tags,
                     "group": _str(r.get("group")) if group_by else None, "fails": fails, "story": story})
    columns = [Column("doc_id", "doc_id", numeric=bool(pd.api.types.is_numeric_dtype(s.get("doc_id", pd.Series()))))]
    if group_by:
        columns.append(Column("group", group_by))
    columns += [Column("question", "question"), Column("gold", "gold"), Column("answer", "answer"),
                Column("score", key or "score", numeric=True), Column("outcome", "outcome")]
    if judges:
        columns.append(Column("judges", "judges"))
    return Explorer("item", columns, rows, TASK_OUTCOMES, title=title, group_label=group_by,
                    metrics=[{"name": m, "value": format_metric(v) if _num((v or {}).get("value")) is not None else MISSING,
                              "linkable": m in fail_cols}
                             for m, v in metrics.items()])


# -- a win rate's decisions -----------------------------------------------------------------
def _pair_outcomes(df: pd.DataFrame, winner_label: Any) -> list[list[str]]:
    """Per decision: who won (`winner_label(row)`), abstained, and "judges disagree" when the
    judges' usable verdicts on the same question and order differ."""
    labels = [winner_label(r) for _, r in df.iterrows()]
    keys = list(zip(df["_q"], df["_order"]))
    by_key: dict[Any, set] = {}
    for k, lab in zip(keys, labels):
        if lab is not None:
            by_key.setdefault(k, set()).add(lab)
    return [[lab if lab is not None else ABSTAINED] + ([DISAGREE] if len(by_key.get(k, ())) > 1 else [])
            for k, lab in zip(keys, labels)]


def decision_explorer(results: pd.DataFrame, *, title: str = "",
                      metrics: Mapping[str, Any] | None = None) -> Explorer:
    """A win rate's decisions (results.csv's rows: one per judge, question and order): who was shown
    first, both answers, the judge's verdict and rationale; outcomes "<model> wins", tie, abstained,
    judges disagree; the filter's groups are the judges."""
    df = results.reset_index(drop=True).assign(_q=lambda d: d["comparison"].astype(str) + "/" + d["qid"].astype(str),
                                               _order=lambda d: d["order"])
    several = df["comparison"].nunique() > 1

    def who(r: pd.Series) -> str | None:
        w = _str(r.get("winner_model"))
        if w is None or bool(r.get("failed")):
            return None
        return TIE if w == "tie" else f"{r[w]} wins" if w in ("model_a", "model_b") else f"{w} wins"

    tags = _pair_outcomes(df, who)
    rows = []
    for (i, r), t in zip(df.iterrows(), tags):
        others = df[(df["_q"] == r["_q"]) & (df["_order"] == r["_order"]) & (df.index != i)]
        story = [
            text("Question", r.get("question")), text("Reference answer", r.get("target")),
            kv("Shown to the judge", [("answer A (shown first)", r.get("shown_first")),
                                      ("answer B (shown second)", r.get("shown_second")), ("order", r.get("order"))]),
            text(f"Answer of {r.get('model_a')} (model_a)", r.get("answer_a")),
            text(f"Answer of {r.get('model_b')} (model_b)", r.get("answer_b")),
            kv(f"Judge {r.get('judge')}", [("said", r.get("judge_said")), ("winner", r.get("winner")),
                                           ("how", r.get("method")), ("rationale", r.get("rationale")),
                                           ("abstention / error", r.get("error"))]),
            text("Judge's raw reply", r.get("raw"), fold=True),
            kv("Other judges on this question and order",
               [(o["judge"], f"{_str(o['winner']) or 'abstained'}: {_str(o['rationale']) or _str(o['error']) or ''}")
                for _, o in others.iterrows()]),
        ]
        cells = {"comparison": r.get("comparison"), "qid": r.get("qid"), "order": r.get("order"),
                 "judge": r.get("judge"), "question": r.get("question"), "first": r.get("shown_first"),
                 "winner": _str(r.get("winner")) or "abstained", "outcome": ", ".join(t),
                 "rationale": r.get("rationale") or r.get("error")}
        rows.append({"id": f"{r['_q']}/{r.get('order')}/{r.get('judge')}", "cells": cells, "outcomes": t,
                     "group": _str(r.get("judge")), "story": story})
    columns = ([Column("comparison", "comparison")] if several else []) + [
        Column("qid", "question id", numeric=True), Column("order", "order", numeric=True), Column("judge", "judge"),
        Column("question", "question"), Column("first", "shown first"), Column("winner", "winner"),
        Column("outcome", "outcome"), Column("rationale", "rationale")]
    names = [f"{n} wins" for n in dict.fromkeys([*df.get("model_a", []), *df.get("model_b", [])])]
    return Explorer("decision", columns, rows, [*names, TIE, ABSTAINED, DISAGREE], title=title, group_label="judge",
                    metrics=[{"name": k, "value": v} for k, v in (metrics or {}).items()])


# -- a ranking's battles ----------------------------------------------------------------------
def battle_explorer(battles: pd.DataFrame, answers: pd.DataFrame | None = None,
                    questions: pd.DataFrame | None = None, *, title: str = "",
                    metrics: Mapping[str, Any] | None = None) -> Explorer:
    """A ranking's battles (battles.csv's rows): both answers (`answers`: index question_id, one
    column per model), the reference (`questions`: question_id, target, context), the winner and the
    judge's rationale; outcomes "A wins (shown first)", "B wins", tie, abstained, judges disagree."""
    first, second = "A wins (shown first)", "B wins (shown second)"
    df = battles.reset_index(drop=True).assign(_q=lambda d: d["question_id"], _order=lambda d: d["order"])
    q = questions.set_index("question_id") if questions is not None and "question_id" in questions else None

    def who(r: pd.Series) -> str | None:
        w = _str(r.get("winner"))
        if w is None:
            return None
        return TIE if w == "tie" else first if w == r["model_a"] else second

    tags = _pair_outcomes(df, who)
    rows = []
    for (i, r), t in zip(df.iterrows(), tags):
        qid = r["question_id"]

        def answer(model: str) -> Any:
            if answers is None or qid not in answers.index or model not in answers.columns:
                return None
            return answers.at[qid, model]

        ctx = q.at[qid, "context"] if q is not None and "context" in q.columns and qid in q.index else None
        ctx_text = "\n\n".join(str(c) for c in ctx if c) if isinstance(ctx, (list, tuple)) else ctx
        others = df[(df["_q"] == qid) & (df["_order"] == r["_order"]) & (df["model_a"] == r["model_a"])
                    & (df["model_b"] == r["model_b"]) & (df.index != i)]
        story = [
            text("Question", r.get("question")),
            text("Reference answer", q.at[qid, "target"] if q is not None and qid in q.index else None),
            text("Context", ctx_text, fold=True),
            text(f"Answer A (shown first): {r['model_a']}", answer(r["model_a"])),
            text(f"Answer B (shown second): {r['model_b']}", answer(r["model_b"])),
            kv(f"Judge {r.get('judge')}", [("said", r.get("judge_said")), ("winner", r.get("winner")),
                                           ("how", r.get("method")), ("rationale", r.get("rationale")),
                                           ("abstention / error", r.get("error")),
                                           ("answer lengths (A, B)", f"{r.get('len_a')}, {r.get('len_b')}")]),
            kv("Other judges on this battle",
               [(o["judge"], f"{_str(o['winner']) or 'abstained'}: {_str(o['rationale']) or _str(o['error']) or ''}")
                for _, o in others.iterrows()]),
        ]
        cells = {"qid": qid, "order": r.get("order"), "judge": r.get("judge"), "question": r.get("question"),
                 "a": r.get("model_a"), "b": r.get("model_b"), "winner": _str(r.get("winner")) or "abstained",
                 "outcome": ", ".join(t), "rationale": r.get("rationale") or r.get("error")}
        rows.append({"id": f"{qid}/{r.get('order')}/{r['model_a']}/{r['model_b']}/{r.get('judge')}", "cells": cells,
                     "outcomes": t, "group": _str(r.get("judge")), "story": story})
    columns = [Column("qid", "question id", numeric=True), Column("order", "order", numeric=True),
               Column("judge", "judge"), Column("question", "question"), Column("a", "model A (shown first)"),
               Column("b", "model B"), Column("winner", "winner"), Column("outcome", "outcome"),
               Column("rationale", "rationale")]
    return Explorer("battle", columns, rows, [first, second, TIE, ABSTAINED, DISAGREE], title=title,
                    group_label="judge", metrics=[{"name": k, "value": v} for k, v in (metrics or {}).items()])


# -- a judge validation's answers -------------------------------------------------------------
def validation_explorer(verdicts: pd.DataFrame, judges: Sequence[str], *, items: Sequence[Any] = (),
                        pairwise: bool = False, title: str = "",
                        metrics: Mapping[str, Any] | None = None) -> Explorer:
    """A judge validation's decisions (verdicts.csv's rows; `items`: the labelled items, for the
    reference and context): the label, the panel's vote, each judge's verdict and reasoning;
    outcomes correct (the vote is the label), wrong, abstained, judges disagree; groups: case types."""
    by_row = {getattr(it, "row", None): it for it in items}
    rows = []
    df = verdicts.reset_index(drop=True)
    for i, r in df.iterrows():
        it = by_row.get(r.get("row"))
        label, vote = _str(r.get("label")), r.get("judge_voting")
        if pairwise and _str(vote) is not None and _num(r.get("order")) == 1:
            vote = {"A": "B", "B": "A"}.get(str(vote), vote)  # the vote in the file's orientation
        vote_s = _str(_num(vote) if not pairwise and _num(vote) is not None else vote)
        vote_s = vote_s if vote_s is None or pairwise else str(int(float(vote_s)))
        tags = [ABSTAINED] if vote_s is None else [CORRECT if vote_s == label else WRONG]
        used = [_str(r.get(f"judge_{j}")) for j in judges]
        if any(u is None for u in used) and ABSTAINED not in tags:
            tags.append(ABSTAINED)
        if len({u for u in used if u is not None}) > 1:
            tags.append(DISAGREE)
        story = [text("Question", r.get("question")),
                 text("Reference answer", getattr(it, "reference", None)),
                 text("Context", "\n\n".join(getattr(it, "context", None) or []) or None, fold=True)]
        if pairwise:
            story += [text("Answer A", getattr(it, "answer_a", None)), text("Answer B", getattr(it, "answer_b", None))]
        else:
            story.append(text("Answer judged", r.get("answer")))
        story.append(kv("Expert label and the panel", [("label", label), ("case", r.get("case")),
                                                       ("order", ("as given" if _num(r.get("order")) == 0 else "swapped")
                                                        if pairwise else None), ("panel's vote", vote_s)]))
        for j in judges:
            v = r.get(f"judge_{j}")
            story.append(kv(f"Judge {j}", [("verdict", _str(v) if pairwise else _verdict_word(v, r.get(f"judge_{j}_method"))),
                                          ("how", r.get(f"judge_{j}_method")),
                                          ("rationale", r.get(f"judge_{j}_reasoning")),
                                          ("abstention / error", r.get(f"judge_{j}_error"))]))
            story.append(text(f"Judge {j}: raw reply", r.get(f"judge_{j}_raw"), fold=True))
        cells = {"row": r.get("row"), "case": r.get("case"), "question": r.get("question"),
                 "answer": r.get("answer") if not pairwise else None, "label": label, "vote": vote_s or "abstained",
                 "outcome": ", ".join(tags)}
        rid = f"{r.get('row')}" + (f"/{r.get('order')}" if pairwise else "")
        rows.append({"id": rid, "cells": cells, "outcomes": tags, "group": _str(r.get("case")) or "(none)",
                     "story": story})
    columns = [Column("row", "row", numeric=True), Column("case", "case"), Column("question", "question")]
    if not pairwise:
        columns.append(Column("answer", "answer"))
    columns += [Column("label", "label"), Column("vote", "panel's vote"), Column("outcome", "outcome")]
    return Explorer("validated answer", columns, rows, [CORRECT, WRONG, ABSTAINED, DISAGREE], title=title,
                    group_label="case", metrics=[{"name": k, "value": v} for k, v in (metrics or {}).items()])


_CSS = """
.evekit-explorer{font-family:system-ui,sans-serif;font-size:13px;margin:1em 0}
.evekit-explorer .ee-bar{display:flex;flex-wrap:wrap;gap:.5em;align-items:center;margin:.4em 0}
.evekit-explorer input,.evekit-explorer select,.evekit-explorer button{font-size:13px;padding:.15em .4em}
.evekit-explorer table{border-collapse:collapse;width:100%}
.evekit-explorer th,.evekit-explorer td,.evekit-explorer pre,.evekit-explorer .ee-h{text-align:left!important}
.evekit-explorer th,.evekit-explorer td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}
.evekit-explorer th{background:#eee;cursor:pointer;user-select:none;white-space:nowrap}
.evekit-explorer tr.ee-row{cursor:pointer}.evekit-explorer tr.ee-row:hover{background:#f4f8ff}
.evekit-explorer tr.ee-open{background:#e8f0fe}
.evekit-explorer td.ee-story{background:#fafafa;padding:.6em 1em}
.evekit-explorer .ee-sec{margin:.5em 0}.evekit-explorer .ee-h{font-weight:bold;margin:.2em 0}
.evekit-explorer pre{white-space:pre-wrap;word-break:break-word;margin:.2em 0;font-size:12px;
 background:#fff;border:1px solid #e0e0e0;padding:.3em .5em;max-height:30em;overflow:auto}
.evekit-explorer .ee-role{font-weight:bold;color:#555}
.evekit-explorer .ee-kv td:first-child{white-space:nowrap;color:#444;width:12em}
.evekit-explorer .ee-kv td{white-space:pre-wrap;word-break:break-word}
.evekit-explorer table.ee-metrics{width:auto;margin-bottom:.5em}
.evekit-explorer .ee-metrics td,.evekit-explorer .ee-metrics th{cursor:default}
.evekit-explorer .ee-tag{display:inline-block;border-radius:.6em;padding:0 .45em;margin:0 .15em .1em 0;background:#ddd}
.evekit-explorer .ee-tag-correct{background:#cfe9cf}.evekit-explorer .ee-tag-wrong{background:#f6cccc}
.evekit-explorer .ee-tag-failed,.evekit-explorer .ee-tag-unparsed{background:#f3dfb5}
"""

# The renderer. It never uses innerHTML: every string from the data becomes a text node, and the
# only links it makes are its own "#<id>?..." addresses.
_JS = r"""
(function () {
  "use strict";
  var UID = "__UID__";
  function el(tag, cls, txt) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (txt !== undefined && txt !== null) e.textContent = String(txt);
    return e;
  }
  function load(node) {
    var s = node.querySelector("script.ee-data");
    var raw = s.textContent;
    if (s.getAttribute("data-encoding") === "gzip+base64") {
      var bin = atob(raw.trim()), bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      return new Response(stream).text().then(JSON.parse);
    }
    return Promise.resolve(JSON.parse(raw));
  }
  function init(node, D) {
    var T = D.texts || [];
    function txt(v) { return typeof v === "number" ? T[v] : v; }
    var st = {q: "", outcome: "", group: "", fail: "", sort: -1, desc: false, page: 0, open: {}};
    var hay = null;
    function haystack(r) {
      var parts = r.c.slice();
      r.s.forEach(function (s) {
        parts.push(s.h);
        if (s.t === "text") parts.push(txt(s.v));
        else if (s.t === "kv") s.v.forEach(function (p) { parts.push(p[1]); });
        else if (s.t === "msgs") s.v.forEach(function (m) { parts.push(txt(m.c)); });
      });
      return parts.join("\n").toLowerCase();
    }
    var root = el("div", "ee-root");
    var head = el("div", "ee-head");
    var unitPl = D.unit + "s";
    head.appendChild(el("div", "ee-h", "Explorer: " + D.rows.length + " " + (D.rows.length === 1 ? D.unit : unitPl) +
                        (D.title ? " \u00b7 " + D.title : "") + " (click a row to open its whole story)"));
    if (D.note) head.appendChild(el("div", "", D.note));
    root.appendChild(head);
    if (D.metrics && D.metrics.length) {
      var mt = el("table", "ee-metrics"), mh = el("tr");
      ["metric", "value [95% CI]", D.unit + "s it fails"].forEach(function (h) { mh.appendChild(el("th", "", h)); });
      mt.appendChild(mh);
      D.metrics.forEach(function (m, i) {
        var tr = el("tr"); tr.setAttribute("data-metric", m.name);
        tr.appendChild(el("td", "", m.name)); tr.appendChild(el("td", "", m.value));
        var td = el("td");
        if (m.failing) {
          var a = el("a", "ee-fail-link", m.failing + " " + (m.failing === 1 ? D.unit : unitPl));
          a.setAttribute("href", "#" + node.id + "?fail=" + encodeURIComponent(m.name));
          td.appendChild(a);
        } else td.textContent = m.failing === null ? "\u2013" : "0";
        tr.appendChild(td); mt.appendChild(tr);
      });
      root.appendChild(mt);
    }
    var bar = el("div", "ee-bar");
    var search = el("input"); search.type = "search"; search.placeholder = "search every text"; search.className = "ee-search";
    var outSel = el("select", "ee-outcome"), grpSel = el("select", "ee-group"), failSel = el("select", "ee-fail");
    function opt(sel, value, label) { var o = el("option", "", label); o.value = value; sel.appendChild(o); }
    var counts = D.outcomes.map(function () { return 0; });
    D.rows.forEach(function (r) { r.o.forEach(function (k) { counts[k]++; }); });
    opt(outSel, "", "every outcome (" + D.rows.length + ")");
    D.outcomes.forEach(function (o, k) { if (counts[k]) opt(outSel, o, o + " (" + counts[k] + ")"); });
    bar.appendChild(el("label", "", "outcome ")); bar.appendChild(outSel);
    if (D.groups && D.groups.length) {
      opt(grpSel, "", "every " + D.group_label);
      D.groups.forEach(function (g) { opt(grpSel, g, g); });
      bar.appendChild(el("label", "", D.group_label + " ")); bar.appendChild(grpSel);
    }
    if (D.metrics && D.metrics.some(function (m) { return m.failing; })) {
      opt(failSel, "", "any metric");
      D.metrics.forEach(function (m) { if (m.failing) opt(failSel, m.name, "fails " + m.name); });
      bar.appendChild(failSel);
    }
    bar.appendChild(search);
    var shownTxt = el("span", "ee-count");
    var link = el("a", "ee-permalink", "link to this view");
    bar.appendChild(shownTxt); bar.appendChild(link);
    root.appendChild(bar);
    var table = el("table", "ee-table"), thead = el("thead"), htr = el("tr"), tbody = el("tbody");
    D.cols.forEach(function (c, k) {
      var th = el("th", "", c.l); th.setAttribute("data-col", c.k);
      th.addEventListener("click", function () {
        if (st.sort === k) st.desc = !st.desc; else { st.sort = k; st.desc = false; }
        st.page = 0; render();
      });
      htr.appendChild(th);
    });
    thead.appendChild(htr); table.appendChild(thead); table.appendChild(tbody); root.appendChild(table);
    var pager = el("div", "ee-bar"), prev = el("button", "ee-prev", "\u2190 previous"),
        pageTxt = el("span", "ee-page"), next = el("button", "ee-next", "next \u2192");
    pager.appendChild(prev); pager.appendChild(pageTxt); pager.appendChild(next); root.appendChild(pager);
    prev.addEventListener("click", function () { if (st.page > 0) { st.page--; render(); } });
    next.addEventListener("click", function () { st.page++; render(); });
    function changed(key, value) { st[key] = value; st.openOnly = ""; st.page = 0; render(); }
    search.addEventListener("input", function () { changed("q", search.value); });
    outSel.addEventListener("change", function () { changed("outcome", outSel.value); });
    grpSel.addEventListener("change", function () { changed("group", grpSel.value); });
    failSel.addEventListener("change", function () { changed("fail", failSel.value); });

    function section(s) {
      var box, body;
      if (s.fold) { box = el("details", "ee-sec"); box.appendChild(el("summary", "ee-h", s.h)); body = box; }
      else { box = el("div", "ee-sec"); box.appendChild(el("div", "ee-h", s.h)); body = box; }
      box.setAttribute("data-section", s.h);
      if (s.t === "text") body.appendChild(el("pre", "", txt(s.v)));
      else if (s.t === "kv") {
        var t = el("table", "ee-kv");
        s.v.forEach(function (p) { var tr = el("tr"); tr.appendChild(el("td", "", p[0])); tr.appendChild(el("td", "", p[1])); t.appendChild(tr); });
        body.appendChild(t);
      } else if (s.t === "msgs") {
        var lead = s.v.length && s.v[0].r === "system" ? 1 : 0, shots = s.shots || 0, holder = body;
        s.v.forEach(function (m, i) {
          if (shots && i === lead) {
            holder = el("details", "ee-shots");
            holder.appendChild(el("summary", "", "few-shot examples (" + shots + " messages)"));
            body.appendChild(holder);
          }
          if (shots && i === lead + shots) holder = body;
          var d = el("div", "ee-msg"); d.appendChild(el("span", "ee-role", "[" + m.r + "]"));
          d.appendChild(el("pre", "", txt(m.c))); holder.appendChild(d);
        });
      }
      return box;
    }
    function visible() {
      var q = st.q.toLowerCase(), oi = st.outcome ? D.outcomes.indexOf(st.outcome) : -1,
          fi = -1;
      if (st.fail) D.metrics.forEach(function (m, i) { if (m.name === st.fail) fi = i; });
      if (q && !hay) hay = D.rows.map(haystack);
      var out = [];
      D.rows.forEach(function (r, i) {
        if (st.outcome && r.o.indexOf(oi) < 0) return;
        if (st.group && r.g !== st.group) return;
        if (st.fail && (!r.f || r.f.indexOf(fi) < 0)) return;
        if (st.openOnly && r.id !== st.openOnly) return;
        if (q && hay[i].indexOf(q) < 0) return;
        out.push(i);
      });
      if (st.sort >= 0) {
        var k = st.sort, num = D.cols[k].n, sign = st.desc ? -1 : 1;
        out.sort(function (a, b) {
          var x = D.rows[a].c[k], y = D.rows[b].c[k];
          if (x === null || x === undefined) return (y === null || y === undefined) ? a - b : 1;
          if (y === null || y === undefined) return -1;
          var c = num ? (Number(x) - Number(y)) : String(x).localeCompare(String(y), undefined, {numeric: true});
          return c ? sign * c : a - b;
        });
      }
      return out;
    }
    function viewHash() {
      var p = new URLSearchParams();
      if (st.outcome) p.set("outcome", st.outcome);
      if (st.group) p.set("group", st.group);
      if (st.fail) p.set("fail", st.fail);
      if (st.q) p.set("q", st.q);
      if (st.openOnly) p.set("open", st.openOnly);
      var s = p.toString();
      return "#" + node.id + (s ? "?" + s : "");
    }
    function render() {
      var idx = visible(), size = D.page || 25, pages = Math.max(1, Math.ceil(idx.length / size));
      if (st.page >= pages) st.page = pages - 1;
      while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
      idx.slice(st.page * size, st.page * size + size).forEach(function (i) {
        var r = D.rows[i], tr = el("tr", "ee-row");
        tr.setAttribute("data-id", r.id);
        r.c.forEach(function (v, k) {
          var td = el("td");
          if (D.cols[k].k === "outcome") {
            r.o.forEach(function (o) { td.appendChild(el("span", "ee-tag ee-tag-" + D.outcomes[o].replace(/[^a-z]/g, ""), D.outcomes[o])); });
          } else td.textContent = (v === null || v === undefined) ? "\u2013" : String(v);
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
        var dr = null;
        function show() {
          dr = el("tr", "ee-detail"); var td = el("td", "ee-story"); td.colSpan = D.cols.length;
          td.appendChild(el("div", "ee-h", D.unit + " " + r.id));
          r.s.forEach(function (s) { td.appendChild(section(s)); });
          dr.appendChild(td); tr.parentNode.insertBefore(dr, tr.nextSibling); tr.classList.add("ee-open");
        }
        tr.addEventListener("click", function () {
          if (dr) { dr.parentNode.removeChild(dr); dr = null; tr.classList.remove("ee-open"); delete st.open[r.id]; }
          else { st.open[r.id] = 1; show(); }
        });
        if (st.open[r.id]) show();
      });
      Array.prototype.forEach.call(htr.children, function (th, k) {
        th.setAttribute("aria-sort", k === st.sort ? (st.desc ? "descending" : "ascending") : "none");
        th.textContent = D.cols[k].l + (k === st.sort ? (st.desc ? " \u25bc" : " \u25b2") : "");
      });
      shownTxt.textContent = idx.length + " of " + D.rows.length + " " + unitPl + " shown";
      pageTxt.textContent = "page " + (st.page + 1) + " of " + pages;
      prev.disabled = st.page === 0; next.disabled = st.page >= pages - 1;
      link.setAttribute("href", viewHash());
      node.setAttribute("data-shown", String(idx.length));
      node.setAttribute("data-page", String(st.page + 1));
    }
    function fromHash() {
      var h = decodeURIComponent(location.hash || "");
      var own = "#" + node.id;
      if (h !== own && h.indexOf(own + "?") !== 0) return false;
      var p = new URLSearchParams((location.hash || "").slice(own.length + 1));
      st.outcome = p.get("outcome") || ""; st.group = p.get("group") || ""; st.fail = p.get("fail") || "";
      st.q = p.get("q") || ""; st.openOnly = p.get("open") || ""; st.page = 0; st.open = {};
      if (st.openOnly) st.open[st.openOnly] = 1;
      outSel.value = st.outcome; grpSel.value = st.group; failSel.value = st.fail; search.value = st.q;
      render();
      node.scrollIntoView();
      return true;
    }
    var fb = node.querySelector(".ee-fallback"); if (fb) fb.parentNode.removeChild(fb);
    node.appendChild(root);
    window.addEventListener("hashchange", fromHash);
    if (!fromHash()) render();
    node.setAttribute("data-total", String(D.rows.length));
    node.setAttribute("data-ready", "1");
  }
  var nodes = document.querySelectorAll('div.evekit-explorer[data-ee="' + UID + '"]');
  Array.prototype.forEach.call(nodes, function (node) {
    if (node.getAttribute("data-started")) return;
    node.setAttribute("data-started", "1");
    load(node).then(function (D) { init(node, D); }, function (err) {
      node.setAttribute("data-error", String(err));
      node.appendChild(el("p", "", "The explorer could not read its data: " + err));
    });
  });
})();
"""
