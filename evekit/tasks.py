"""The task catalogue: every task evekit knows, as data, and the steps shared by all of them.

A `Task` says everything that differs between tasks (schema, prompt, parser, scorer, metrics
with the headline first, judge kind, how samples carry the context documents, plots); the
functions below it (`build_requests`, `score_samples`, `task_metrics`, `headline_metric`) are
the same for all of them, so nothing else branches on a task's name. Defaults (few-shot count,
max_tokens, metrics) follow EVE's task definitions so results are comparable. Custom tasks
(`evekit.custom`) are `Task`s built from a YAML file. See docs/ARCHITECTURE.md, "Adding a task".
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from collections import Counter
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from evekit import data, repeats, spans, stats
from evekit import metrics as M
from evekit.data import Item, Row, choices_of, items_from_rows, parse_list
from evekit.errors import DataError, RowError
from evekit.parsing import format_labels, parse_hallucination, parse_letters
from evekit.structured import as_results, ask_json, first_requests
from evekit.types import Api, GenerationRequest, GenerationResult

__all__ = [
    "Task",
    "Parsed",
    "PlotSpec",
    "TASKS",
    "REFUSAL_ANSWER",
    "get_task",
    "load_items",
    "items_from_rows",
    "Item",
    "DataError",
    "select_fewshot",
    "build_requests",
    "score_samples",
    "score_codes",
    "task_metrics",
    "headline_metric",
    "metric_column",
    "context_columns",
    "judge_case_fields",
    "HALLUCINATION_LEVELS",
    "SPAN_MAX_TOKENS",
    "span_max_tokens",
    "level_metrics",
    "gold_spans",
    "span_request",
    "level_task",
    "ask_spans",
    "add_span_columns",
    "span_metrics",
    "span_baselines",
    "span_counts",
    "worst_spans_html",
    "SAMPLE_COLUMNS",
    "GROUP_COLUMN",
    "grouped",
    "baselines",
    "baseline_note",
    "metrics_by_group",
]

log = logging.getLogger(__name__)

# The pointwise kinds of `evekit.judges.KINDS` (the judge catalogue; a test keeps them in step).
JudgeKind = Literal["fact_check", "context", "refusal"]
DocColumns = Literal["Doc {n}", "Context"]
Sampler = Literal["first_n", "random"]

REFUSAL_ANSWER = ("I'm sorry, but the provided context does not contain enough information to "
                  "answer that question.")

# Columns every samples DataFrame starts with (then the per-sample metrics, then extras).
SAMPLE_COLUMNS = ["doc_id", "doc.Question", "target", "filtered_resps", "response", "reasoning", "parsed",
                  "unparsed", "unparsed_reason", "failed", "error", "finish_reason", "completion_tokens",
                  "truncated"]
# How a multiple-choice item's options read in samples.csv (`doc.Choices`): "A. text | B. text | ...".
CHOICES_SEPARATOR = " | "
# `max_tokens: None` means the task's EVE default, capped here: EVE's 10,000 and 40,000 are more than
# many servers accept (vLLM refuses more than the model's context window less the prompt). Set
# max_tokens to EVE's value to reproduce EVE exactly; an answer cut off is marked `truncated`.
MAX_TOKENS_CAP = 2048


def default_max_tokens(task: "Task") -> int:
    """The reply length of `max_tokens: None`: the task's EVE default, at most MAX_TOKENS_CAP."""
    return min(task.default_max_tokens, MAX_TOKENS_CAP)


# The finish_reason of an answer cut off at max_tokens (OpenAI-compatible servers).
TRUNCATED_REASON = "length"


class Parsed(NamedTuple):
    """A parsed response: `value` as shown in samples.csv, `labels` for letter tasks, `reason`
    set when the answer is unusable (the model's failure: scored wrong)."""

    value: str | None
    labels: list[str] | None
    reason: str | None


class PlotSpec(NamedTuple):
    """One figure of a task: `recipe` names a function of `evekit.plots.TASK_PLOTS`, drawn on the
    samples (and `metric`, for distributions) and saved as `file`. `without_judges`: only when no
    judge scored the run (the judges' own plots take its place)."""

    recipe: str
    file: str
    metric: str | None = None
    without_judges: bool = False


@dataclass(frozen=True)
class Task:
    """One task. Callables take and return plain values so tasks can be added as data.

    `metrics` lists the task's own metrics, headline first; a judged task's headline is its
    judges' verdict (`headline_metric`). `column_roles` says which schema column the column
    mapping parameters fill (`input`, `target`, `choices`, `context`; "Doc {n}" spreads several
    documents over Doc 1, Doc 2, ...). `doc_columns` says how samples.csv carries the context
    documents, named as lm-evaluation-harness flattens them (`doc.Doc 1..3` or `doc.Context`),
    so that the win-rate judges see them in EVE's CSVs too. `head_to_head`: the answers are free
    text that a pairwise judge can compare (win rate, ranking).
    """

    name: str
    hub_id: str
    description: str
    default_num_fewshot: int
    default_max_tokens: int
    judge_kind: JudgeKind | None
    metrics: tuple[str, ...]
    columns: tuple[str, ...]  # required columns (matched case-insensitively)
    optional_columns: tuple[str, ...] = ()
    prepare: Callable[[Row], tuple[str, str, dict[str, Any]]] = field(default=None, repr=False)  # type: ignore[assignment]
    render: Callable[[Item], str] = field(default=None, repr=False)  # type: ignore[assignment]
    parse: Callable[[str, Item], Parsed] = field(default=None, repr=False)  # type: ignore[assignment]
    score: Callable[[Parsed, Item], dict[str, float]] = field(default=None, repr=False)  # type: ignore[assignment]
    answer_prefix: str = "Answer:"
    completion_stop: tuple[str, ...] = ("\nQuestion:",)
    kind: str = "eve"
    column_roles: Mapping[str, str] = field(default_factory=dict, compare=False)
    column_mapping: Mapping[str, Any] = field(default_factory=dict, compare=False)
    doc_columns: DocColumns | None = None
    plots: tuple[PlotSpec, ...] = ()
    head_to_head: bool = False
    # The items' gold answer is one label, `item.target`, among `item.fields["labels"]` (else the
    # task's `labels`): chance and the best constant answer are shown next to acc (`baselines`).
    constant_baselines: bool = False
    labels: tuple[str, ...] = ()
    split: str = "train"
    config: str | None = None

    def shot_answer(self, item: Item) -> str:
        """What the assistant says in a few-shot example: the gold target."""
        return item.target

    def chat_messages(self, item: Item, shots: Sequence[Item] = ()) -> tuple[dict[str, str], ...]:
        """System = task description; each shot a user/assistant pair; the item last."""
        messages = [{"role": "system", "content": self.description}]
        for shot in shots:
            messages.append({"role": "user", "content": self.render(shot)})
            messages.append({"role": "assistant", "content": self.shot_answer(shot)})
        messages.append({"role": "user", "content": self.render(item)})
        return tuple(messages)

    def completion_prompt(self, item: Item, shots: Sequence[Item] = ()) -> str:
        """Plain text: description, shots with their answers, then the item ending in `Answer:`."""
        blocks = [self.description]
        blocks += [f"{self.render(s)}\n{self.answer_prefix} {self.shot_answer(s)}" for s in shots]
        blocks.append(self.completion_item(item))
        return "\n\n".join(blocks)

    def completion_item(self, item: Item) -> str:
        """The item's own block of a completions prompt (no description, no shots)."""
        return f"{self.render(item)}\n{self.answer_prefix}"

    def item_prompt(self, item: Item, api: Api = "chat") -> str:
        """What the model is asked about this item alone, without the few-shot examples: the last
        user message (chat) or the item's block of the prompt (completions)."""
        if api == "chat":
            return self.chat_messages(item)[-1]["content"]
        return self.completion_item(item)


# ---------------------------------------------------------------------------------------------
# Row preparation (schema + validation). Each returns (question, target, fields).


def _prep_mcqa_single(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("Question")
    labels, texts = choices_of(row, "Choices")
    gold = _letter(row.text("Answer"))
    if gold not in labels:
        raise RowError("Answer", f"gold letter {row.text('Answer')!r} is not among the choices {format_labels(labels)}")
    return question, gold, {"labels": labels, "choices": texts, "gold": [gold]}


def _prep_mcqa_multiple(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("Question")
    labels, texts = choices_of(row, "Choices")
    given = [_letter(str(x)) for x in row.listing("Answers")]
    if not given:
        raise RowError("Answers", "no correct answer given (empty list)")
    bad = [g for g in given if g not in labels]
    if bad:
        raise RowError("Answers", f"gold letter(s) {', '.join(map(repr, bad))} not among the choices "
                                  f"{format_labels(labels)}")
    gold = [lab for lab in labels if lab in set(given)]
    return question, ", ".join(gold), {"labels": labels, "choices": texts, "gold": gold}


def _letter(text: str) -> str:
    return text.strip().strip("().").strip().upper()


def _prep_open(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("Question")
    answer = row.text("Answer")
    return question, answer, {"reference": answer}


def _doc_columns(row: Row) -> list[str]:
    n = 1
    cols = []
    while n <= 3 or row.has(f"Doc {n}"):
        cols.append(f"Doc {n}")
        n += 1
    return cols


def _prep_context(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("Question")
    answer = row.text("Answer")
    docs, sources, paths = [], [], []
    for n, col in enumerate(_doc_columns(row), start=1):
        doc = row.text(col, required=False)
        if doc:
            docs.append(doc)
            sources.append(row.text(f"Source {n}", required=False))
            paths.append(row.text(f"file_path_{n}", required=False))
    if not docs:
        raise RowError("Doc 1", "no context document (Doc 1, Doc 2 and Doc 3 are all empty)")
    return question, answer, {"reference": answer, "docs": docs, "sources": sources, "file_paths": paths}


def _prep_refusal(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("Question")
    value = row.raw("Context")
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = parse_list(value, "Context")
        except RowError:
            pass  # plain text that happens to start with "["
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        docs = [str(d).strip() for d in parse_list(value, "Context") if d is not None and str(d).strip()]
        if not docs:
            raise RowError("Context", "no context document (empty list)")
    else:
        docs = [row.text("Context")]
    return question, REFUSAL_ANSWER, {"reference": REFUSAL_ANSWER, "docs": docs}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _spans(row: Row, column: str, text_len: int) -> list[dict[str, Any]]:
    value = row.raw(column)
    if _missing(value):
        return []
    spans = []
    for i, span in enumerate(parse_list(value, column)):
        if isinstance(span, dict):
            start, end = span.get("start"), span.get("end")
            extra = {k: span[k] for k in ("text", "prob") if k in span}
        elif isinstance(span, (list, tuple)) and len(span) == 2:
            start, end = span
            extra = {}
        else:
            raise RowError(column, f"span {i} is {span!r}; expected [start, end] or {{start, end, ...}}")
        if not all(isinstance(x, (int, np.integer)) or (isinstance(x, float) and x.is_integer())
                   for x in (start, end)):
            raise RowError(column, f"span {i} {[start, end]} has non-integer offsets")
        start, end = int(start), int(end)  # type: ignore[arg-type]
        if not 0 <= start < end <= text_len:
            raise RowError(column, f"span {i} [{start}, {end}] is outside the Answer text "
                                   f"(length {text_len}; offsets are end-exclusive)")
        prob = extra.get("prob")
        if prob is not None and not 0.0 <= float(prob) <= 1.0:
            raise RowError(column, f"span {i} has probability {prob} outside [0, 1]")
        spans.append({"start": start, "end": end, **extra})
    return spans


def _prep_hallucination(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("Question")
    answer = row.text("Answer", strip=False)  # offsets point into the text as given
    flag = row.flag("is_hallucinated")
    hard = [[s["start"], s["end"]] for s in _spans(row, "Hard labels", len(answer))]
    soft = _spans(row, "Soft labels", len(answer))
    # Which label columns this row has (a missing one is derived from the other: `gold_spans`).
    given = tuple(c for c in ("Hard labels", "Soft labels") if not _missing(row.raw(c)))
    return question, "A" if flag else "B", {"answer": answer, "is_hallucinated": flag,
                                           "hard_labels": hard, "soft_labels": soft, "span_columns": given}


# ---------------------------------------------------------------------------------------------
# Rendering


def _render_choices(item: Item) -> str:
    options = "\n".join(f"{lab}. {text}" for lab, text in zip(item.fields["labels"], item.fields["choices"]))
    return f"Question: {item.question}\n{options}"


def _render_docs(docs: Sequence[str]) -> str:
    return "\n\n".join(f"Document {n}:\n{doc}" for n, doc in enumerate(docs, start=1))


def _render_open(item: Item) -> str:
    return f"Question: {item.question}"


def _render_context(item: Item) -> str:
    return f"{_render_docs(item.fields['docs'])}\n\nQuestion: {item.question}"


HALLUCINATION_OPTIONS = ("A. The answer contains hallucinated (false or unsupported) information.\n"
                         "B. The answer contains no hallucinated information.")


def _render_hallucination(item: Item) -> str:
    return (f"Question: {item.question}\nAnswer to check: {item.fields['answer']}\n"
            f"{HALLUCINATION_OPTIONS}")


# ---------------------------------------------------------------------------------------------
# Parsing and scoring


def _parse_mcqa(multiple: bool) -> Callable[[str, Item], Parsed]:
    def parse(text: str, item: Item) -> Parsed:
        r = parse_letters(text, item.fields["labels"], multiple=multiple)
        return Parsed(", ".join(r.labels) if r.labels else None, r.labels, r.reason)

    return parse


def score_codes(labels: Sequence[str] | None = None) -> Callable[[Parsed, Item], dict[str, float]]:
    """The score of a one-label answer: `acc`, and the label codes `mcc` and `macro_f1` read
    (`gold_code`, `pred_code`: the index in `labels`, default the item's own choice letters
    `item.fields["labels"]`). An unparsed answer is wrong (`acc` 0) and coded `M.UNPARSED_CODE`:
    a miss of its gold label, never a label of its own in macro-F1. mcqa_single_answer,
    hallucination_detection and the custom multiple-choice and classification tasks score with it."""
    def score(p: Parsed, item: Item) -> dict[str, float]:
        labs = list(labels if labels is not None else item.fields["labels"])
        pred = p.value if p.reason is None else None
        return {"acc": float(pred is not None and pred == item.target),
                "gold_code": float(labs.index(item.target)), "pred_code": M.label_code(pred, labs)}

    return score


def _score_multiple(p: Parsed, item: Item) -> dict[str, float]:
    # One rule for unusable answers: an unparsed reply ("A, B, F" with a letter outside the
    # choices) is scored wrong on every metric, IoU 0 included, however many letters it shares.
    if p.reason is not None or not p.labels:
        return {"IoU": 0.0, "acc": 0.0}
    gold = item.fields["gold"]
    return {"IoU": M.iou(p.labels, gold), "acc": M.exact_match(p.labels, gold)}


def _parse_hallucination(text: str, item: Item) -> Parsed:
    r = parse_hallucination(text)
    return Parsed(", ".join(r.labels) if r.labels else None, r.labels, r.reason)


HALLUCINATION_LABELS = ("A", "B")  # A: hallucinated, B: not
_score_hallucination_codes = score_codes(HALLUCINATION_LABELS)


def _score_hallucination(p: Parsed, item: Item) -> dict[str, float]:
    gold = bool(item.fields["is_hallucinated"])
    # An unusable verdict is wrong: for EVE's precision/recall/F1 the opposite of gold; for mcc and
    # macro_f1 coded unparsed (a miss of the gold label), as every one-label task codes it.
    pred = (p.labels == ["A"]) if p.reason is None else (not gold)
    return {**_score_hallucination_codes(p, item), "gold_hallucinated": float(gold), "pred_hallucinated": float(pred)}


def _parse_open(text: str, item: Item) -> Parsed:
    return Parsed(text, None, None if text.strip() else "empty answer")


def _score_open(p: Parsed, item: Item) -> dict[str, float]:
    if p.reason is not None:
        return {"bleu": 0.0, "rougeL": 0.0}
    reference = item.fields["reference"]
    return {"bleu": M.bleu(p.value or "", reference), "rougeL": M.rouge_l(p.value or "", reference)}


# ---------------------------------------------------------------------------------------------
# The tasks

_MCQA = "The following is a multiple-choice question about Earth Observation."
_OPEN_METRICS = ("bleu", "rougeL", "cosine")
_MCQA_ROLES = {"input": "Question", "choices": "Choices"}
_LETTER_BIAS = PlotSpec("letter_bias", "letter_bias.png")
_ROUGE_WITHOUT_JUDGES = PlotSpec("score_distribution", "rougeL_distribution.png", "rougeL", without_judges=True)
_CONTEXT_COLUMNS = ("Doc 2", "Doc 3", "Source 1", "Source 2", "Source 3",
                    "file_path_1", "file_path_2", "file_path_3")

TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task(
            name="mcqa_single_answer",
            hub_id="eve-esa/mcqa-single-answer",
            description=f"{_MCQA} Exactly one option is correct. Answer with the letter of the correct option only.",
            default_num_fewshot=2, default_max_tokens=10000, judge_kind=None, metrics=("acc", "mcc", "macro_f1"),
            columns=("Question", "Choices", "Answer"),
            prepare=_prep_mcqa_single, render=_render_choices, parse=_parse_mcqa(False), score=score_codes(),
            completion_stop=("\n\n", "\nQuestion:"), kind="multiple_choice",
            column_roles={**_MCQA_ROLES, "target": "Answer"}, plots=(_LETTER_BIAS,), constant_baselines=True,
        ),
        Task(
            name="mcqa_multiple_answer",
            hub_id="eve-esa/mcqa-multiple-answers",
            description=(f"{_MCQA} One or more options may be correct. Answer with the letters of all "
                         "correct options, separated by a comma."),
            default_num_fewshot=2, default_max_tokens=10000, judge_kind=None, metrics=("IoU", "acc"),
            columns=("Question", "Answers", "Choices"),
            prepare=_prep_mcqa_multiple, render=_render_choices, parse=_parse_mcqa(True), score=_score_multiple,
            completion_stop=("\n\n", "\nQuestion:"), kind="multiple_answer",
            column_roles={**_MCQA_ROLES, "target": "Answers"},
            plots=(_LETTER_BIAS, PlotSpec("score_distribution", "iou_distribution.png", "IoU")),
        ),
        Task(
            name="open_ended",
            hub_id="eve-esa/open-ended",
            description="Answer the following question about Earth Observation accurately and completely.",
            default_num_fewshot=5, default_max_tokens=40000, judge_kind="fact_check", metrics=_OPEN_METRICS,
            columns=("Question", "Answer"),
            prepare=_prep_open, render=_render_open, parse=_parse_open, score=_score_open, kind="open_qa",
            column_roles={"input": "Question", "target": "Answer"}, plots=(_ROUGE_WITHOUT_JUDGES,),
            head_to_head=True,
        ),
        Task(
            name="open_ended_w_context",
            hub_id="eve-esa/open-ended-w-context",
            description=("Answer the question about Earth Observation using the information in the "
                         "documents provided."),
            default_num_fewshot=5, default_max_tokens=40000, judge_kind="context", metrics=_OPEN_METRICS,
            columns=("Question", "Answer", "Doc 1"), optional_columns=_CONTEXT_COLUMNS,
            prepare=_prep_context, render=_render_context, parse=_parse_open, score=_score_open,
            completion_stop=("\nQuestion:", "\nDocument 1:"), kind="open_qa",
            column_roles={"input": "Question", "target": "Answer", "context": "Doc {n}"},
            doc_columns="Doc {n}", plots=(_ROUGE_WITHOUT_JUDGES,), head_to_head=True,
        ),
        Task(
            name="refusal",
            hub_id="eve-esa/refusal",
            description=("Answer the question about Earth Observation using only the information in the "
                         "documents provided. If they do not contain enough information to answer it, "
                         f"reply: \"{REFUSAL_ANSWER}\""),
            default_num_fewshot=5, default_max_tokens=40000, judge_kind="refusal", metrics=_OPEN_METRICS,
            columns=("Question", "Context"),
            prepare=_prep_refusal, render=_render_context, parse=_parse_open, score=_score_open,
            completion_stop=("\nQuestion:", "\nDocument 1:"), kind="refusal",
            column_roles={"input": "Question", "context": "Context"}, doc_columns="Context",
            plots=(_ROUGE_WITHOUT_JUDGES,),
        ),
        Task(
            name="hallucination_detection",
            hub_id="eve-esa/hallucination-detection",
            description=("You will see a question about Earth Observation and an answer to it. Decide whether "
                         "the answer contains hallucinated (false or unsupported) information. Answer A if it "
                         "does, B if it does not. Answer with the letter only."),
            default_num_fewshot=0, default_max_tokens=100, judge_kind=None,
            metrics=("acc", "precision", "recall", "f1", "mcc", "macro_f1"),
            columns=("Question", "Answer", "is_hallucinated"), optional_columns=("Hard labels", "Soft labels"),
            prepare=_prep_hallucination, render=_render_hallucination, parse=_parse_hallucination,
            score=_score_hallucination, completion_stop=("\n\n", "\nQuestion:"), kind="hallucination",
            column_roles={"input": "Question", "target": "is_hallucinated"},
            plots=(PlotSpec("confusion", "confusion_matrix.png"),), constant_baselines=True, labels=HALLUCINATION_LABELS,
        ),
    ]
}

# EVE's own spellings of the same tasks.
ALIASES = {"mcqa_multiple_answers": "mcqa_multiple_answer", "is_mcqa": "mcqa_multiple_answer"}


def get_task(name: str | Task) -> Task:
    """The task called `name` (EVE's aliases accepted); unknown names list the valid ones."""
    if isinstance(name, Task):
        return name
    key = ALIASES.get(name, name)
    if key not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(TASKS)}")
    return TASKS[key]


def head_to_head_tasks() -> tuple[str, ...]:
    """The tasks whose answers a pairwise judge can compare (win rate, ranking)."""
    return tuple(name for name, t in TASKS.items() if t.head_to_head)


def load_items(task: Task | str, dataset: str | None = None, split: str = "train", limit: int | None = None,
               *, group_by: str | None = None, cluster_by: str | None = None, **kwargs: Any) -> list[Item]:
    """`evekit.data.load_items` for a task given by name or as a `Task` (see there).

    `group_by`: a column of the dataset whose value each item carries as `fields["group"]`
    (for metrics per group); `cluster_by`: likewise as `fields["cluster"]` (the unit its intervals
    resample). A column the file does not have is a `DataError` naming the parameter, the file
    and the columns it has.
    """
    task = get_task(task)
    for name, column, key in (("group_by", group_by, GROUP_COLUMN), ("cluster_by", cluster_by, CLUSTER_COLUMN)):
        if column:
            task = grouped(task, column, key)
    try:
        return data.load_items(task, dataset, split, limit, **kwargs)
    except DataError as exc:
        for name, column in (("group_by", group_by), ("cluster_by", cluster_by)):
            if column and f"column {column!r} missing" in str(exc):
                raise DataError(f"{name}={column!r}: {exc}") from None
        raise


# The samples column (and `Item.fields` key) holding an item's group, the value of `group_by`.
GROUP_COLUMN = "group"
MISSING_GROUP = "(missing)"
# ... and its cluster, the value of `cluster_by`; its repeat and option order (`repeats`, `permutations`).
CLUSTER_COLUMN = "cluster"
DESIGN_COLUMNS = (CLUSTER_COLUMN, "repeat", "permutation")


def grouped(task: Task, column: str, key: str = GROUP_COLUMN) -> Task:
    """`task` whose items also carry the value of `column` (required in the file) as `fields[key]`."""
    inner = task.prepare

    def prepare(row: Row) -> tuple[str, str, dict[str, Any]]:
        question, target, fields = inner(row)
        value = row.raw(column)
        missing = value is None or (isinstance(value, float) and math.isnan(value)) or not str(value).strip()
        return question, target, {**fields, key: MISSING_GROUP if missing else str(value).strip()}

    return dataclasses.replace(task, prepare=prepare, columns=(*task.columns, column))


# ---------------------------------------------------------------------------------------------
# Headline metric: one rule, used by the notebooks, the index and the leaderboard

# What a judged task is scored by, in order of preference: the panel's vote, else the one judge;
# corrected by expert labels (PPI++, `evekit.runs.task.corrected`) when the run has them.
JUDGE_HEADLINES = ("judge_voting_ppi", "llm_as_judge_ppi", "judge_voting", "llm_as_judge")


def headline_metric(task: Task | str | None, metric_names: Sequence[str]) -> str | None:
    """The one number a task is summarised by, among the metrics a run computed.

    A judged task is scored by its judges (the majority vote, or the single judge's verdict);
    otherwise the task's first metric (EVE's primary: IoU for several answers, acc, ...). For a
    task evekit does not know (a results.json from elsewhere) the first computed metric.
    """
    names = list(metric_names)
    known = None
    if task is not None:
        try:
            known = get_task(task)
        except ValueError:
            known = None
    order = list(JUDGE_HEADLINES) if known is None or known.judge_kind is not None else []
    order += list(known.metrics) if known is not None else []
    for name in order:
        if name in names:
            return name
    return names[0] if names else None


def metric_column(metric: str, judge_names: Sequence[str] = ()) -> str:
    """The samples.csv column holding the per-item values of `metric` (one judge's verdict is the
    `judge_<name>` column; every other per-item metric has its own column)."""
    if metric == "llm_as_judge" and len(judge_names) == 1:
        return f"judge_{judge_names[0]}"
    if metric.startswith("llm_as_judge_") and metric[len("llm_as_judge_"):] in judge_names:
        return f"judge_{metric[len('llm_as_judge_'):]}"
    return metric


# ---------------------------------------------------------------------------------------------
# Few-shot examples and requests


def _same_item(a: Item, b: Item) -> bool:
    return a is b or (a.source == b.source and a.doc_id == b.doc_id) or a.question.strip() == b.question.strip()


def select_fewshot(item: Item, pool: Sequence[Item], n: int, sampler: Sampler = "first_n", seed: int = 0) -> list[Item]:
    """Few-shot examples for `item`, never the item itself (nor a copy of its question).

    `first_n` (EVE's default) takes the first n other items of the pool; `random` draws n
    without replacement with an rng seeded from (seed, doc_id), so each item's examples are
    the same whatever order or subset of items is run.
    """
    if sampler not in ("first_n", "random"):
        raise ValueError(f"unknown fewshot_sampler {sampler!r}; use 'first_n' or 'random'")
    if n <= 0:
        return []
    if sampler == "first_n":
        return list(itertools.islice((p for p in pool if not _same_item(p, item)), n))
    candidates = [p for p in pool if not _same_item(p, item)]
    rng = np.random.default_rng([seed % 2**32, item.doc_id % 2**32])
    picks = rng.choice(len(candidates), size=min(n, len(candidates)), replace=False)
    return [candidates[int(i)] for i in picks]


def build_requests(
    task: Task | str,
    items: Sequence[Item],
    *,
    api: Api = "chat",
    num_fewshot: int | None = None,
    fewshot_sampler: Sampler = "first_n",
    seed: int = 0,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    pool: Sequence[Item] | None = None,
    shown: Callable[[Item], Item] | None = None,
) -> list[GenerationRequest]:
    """One request per item. Few-shot examples come from `pool` (default: the items).

    EVE datasets have a single split, so examples are other items of the same data. Pass the
    full item list as `pool` when running a `limit`ed subset to keep the same examples.
    `shown`: how the item and its examples are shown (e.g. the question withheld), applied after
    the examples are chosen on the items as they are.
    """
    task = get_task(task)
    if api not in ("chat", "completions"):
        raise ValueError(f"api must be 'chat' or 'completions', got {api!r}")
    n = task.default_num_fewshot if num_fewshot is None else int(num_fewshot)
    max_tokens = default_max_tokens(task) if max_tokens is None else int(max_tokens)
    pool = items if pool is None else pool
    requests, short = [], 0
    for item in items:
        shots = select_fewshot(item, pool, n, fewshot_sampler, seed)
        short += len(shots) < n
        if shown is not None:
            item, shots = shown(item), [shown(shot) for shot in shots]
        if api == "chat":
            requests.append(GenerationRequest(messages=task.chat_messages(item, shots), temperature=temperature,
                                              max_tokens=max_tokens, seed=seed))
        else:
            requests.append(GenerationRequest(prompt=task.completion_prompt(item, shots), temperature=temperature,
                                              max_tokens=max_tokens, seed=seed, stop=task.completion_stop))
    if short:
        warnings.warn(f"{task.name}: {short} item(s) got fewer than {n} few-shot examples: the pool has only "
                      f"{len(pool)} item(s) (pass a larger `pool`, or lower num_fewshot)", stacklevel=2)
    return requests


# ---------------------------------------------------------------------------------------------
# Scoring


def score_samples(task: Task | str, items: Sequence[Item], results: Sequence[GenerationResult], *,
                  embeddings: bool | None = None) -> pd.DataFrame:
    """One row per item: the response, what was parsed, and the per-sample metrics.

    Failed generations (infrastructure) get NaN metrics and `failed=True`; unusable answers
    (the model's failure) are scored wrong with `unparsed=True` and the reason. `embeddings`
    computes the cosine metric for open tasks (None: when the extra is installed); when it
    cannot run, the reason is in `df.attrs["notes"]` and logged.
    """
    task = get_task(task)
    if len(items) != len(results):
        raise ValueError(f"{len(items)} items but {len(results)} results")
    rows: list[dict[str, Any]] = []
    # EVE's `doc.Topic`, second as in EVE's samples, when the dataset has a Topic column; every row
    # gets it then (empty where a row has none), so the column keeps its place.
    topics = any(data.TOPIC_FIELD in item.fields for item in items)
    for item, res in zip(items, results):
        row: dict[str, Any] = {"doc_id": item.doc_id,
                               **({"doc.Topic": item.fields.get(data.TOPIC_FIELD, "")} if topics else {}),
                               "doc.Question": item.question, "target": item.target, **context_columns(task, item)}
        if GROUP_COLUMN in item.fields:
            row[GROUP_COLUMN] = item.fields[GROUP_COLUMN]
        row.update({key: item.fields[key] for key in DESIGN_COLUMNS if key in item.fields})
        raw = res.raw if res.raw is not None else res.text
        if res.failed:
            answer, reasoning, parsed = "", res.reasoning, None
            scores = {k: math.nan for k in task.score(Parsed(None, None, "failed"), item)}
            if "gold_hallucinated" in scores:
                scores["gold_hallucinated"] = float(item.fields["is_hallucinated"])
        else:
            answer, reasoning = res.text or "", res.reasoning  # the client strips <think> blocks
            parsed = task.parse(answer, item)
            if not answer and reasoning and parsed.reason:
                parsed = parsed._replace(reason=f"{parsed.reason} after reasoning (did it run out of max_tokens?)")
            if not answer and res.tool_calls and parsed.reason:  # not an empty answer: its own reason
                parsed = parsed._replace(reason=res.note)
            scores = task.score(parsed, item)
        row.update({
            "filtered_resps": answer,
            "response": raw,
            "reasoning": reasoning,
            "parsed": None if parsed is None else parsed.value,
            "unparsed": bool(parsed is not None and parsed.reason is not None),
            "unparsed_reason": None if parsed is None else parsed.reason,
            "failed": bool(res.failed),
            "error": res.error,
            # How the generation ended: "length" = cut off at max_tokens (`truncated`); none for a failed call.
            "finish_reason": None if res.failed else res.finish_reason,
            "completion_tokens": None if res.failed else int(res.completion_tokens or 0),
            # ... or cut by the client at MAX_REPLY_CHARS (`res.note` says so).
            "truncated": bool(not res.failed and (res.finish_reason == TRUNCATED_REASON or res.clipped is not None)),
            **item_columns(task, item, documents=False),  # after the answer: lm-eval readers expect it 4th
        })
        row.update(scores)
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=SAMPLE_COLUMNS)
    df["completion_tokens"] = df["completion_tokens"].astype("Int64")  # whole numbers; empty when failed
    notes = M.metric_notes(task.metrics, judged=task.judge_kind is not None)
    if "cosine" in task.metrics and not df.empty:
        want = embeddings if embeddings is not None else "cosine" not in notes
        if want and "cosine" in notes:
            log.warning(notes["cosine"])
        elif want:
            df = _add_cosine(df, items)
        else:
            notes.setdefault("cosine", "cosine: not computed (embeddings=False)")
    for note in notes.values():
        log.info(note)
    df.attrs["notes"] = list(notes.values())
    return df


def _add_cosine(df: pd.DataFrame, items: Sequence[Item]) -> pd.DataFrame:
    ok = (~df["failed"] & ~df["unparsed"]).to_numpy()
    values = np.full(len(df), np.nan)
    values[(~df["failed"]).to_numpy()] = 0.0  # unparsed: scored wrong
    if ok.any():
        refs = [items[i].fields["reference"] for i in np.flatnonzero(ok)]
        values[ok] = M.cosine_similarities(df.loc[ok, "filtered_resps"].tolist(), refs)
    df = df.copy()
    position = df.columns.get_loc("rougeL") + 1 if "rougeL" in df.columns else len(df.columns)
    df.insert(position, "cosine", values)
    return df


def task_metrics(task: Task | str, df: pd.DataFrame, *, seed: int = 0, n_boot: int = 2000,
                 design: repeats.Design | None = None) -> dict[str, dict]:
    """{metric: {"value", "ci_low", "ci_high", "n", "method", ...}} for the task's metrics, in its order.

    Each metric (`evekit.metrics.get_metric`) knows its kind, which decides how it is summarised
    and its interval computed (`method` says which). Failed rows and NaN values are excluded
    (`n` = items used); an undefined value is NaN with a `note`.
    Metrics not computed (e.g. cosine without the embeddings extra) are absent;
    `evekit.metrics.metric_notes` says why.

    With a `design` (repeats per item, clusters of items: `evekit.repeats.Design`), a per-item
    metric is the mean over items of their reduced repeats and its interval resamples items or
    clusters (`repeats.repeat_interval`; `n` = items, `n_answers` = rows); a corpus or agreement
    statistic keeps its value over all rows and gets no interval, with a note saying why.
    """
    task = get_task(task)
    used = df[~df["failed"].astype(bool)] if "failed" in df.columns else df
    out: dict[str, dict] = {}
    for name in task.metrics:
        metric = M.get_metric(name)
        summary = metric.summarize(used, seed=seed, n_boot=n_boot)
        if summary is not None and design is not None:
            summary = design_summary(metric, used, summary, design, seed=seed, n_boot=n_boot)
        if summary is not None:
            out[name] = summary
    return out


NO_DESIGN_INTERVAL = ("no interval: a {kind} statistic is not yet resampled by item or cluster with repeats or "
                      "cluster_by (the value pools every answer)")


def design_summary(metric: M.Metric, used: pd.DataFrame, summary: dict[str, Any], design: repeats.Design, *,
                   seed: int = 0, n_boot: int = 2000) -> dict[str, Any]:
    """`summary` (over every row) redone under `design`: see `task_metrics`."""
    if metric.per_item:
        out = design.interval(used, metric.inputs[0], kind=metric.kind, bounds=metric.bounds, seed=seed,
                              n_boot=n_boot)
        return {**out, **({"note": summary["note"]} if summary.get("note") else {})}
    return {**summary, "ci_low": float("nan"), "ci_high": float("nan"), "method": "none",
            "note": NO_DESIGN_INTERVAL.format(kind=metric.kind)}


# ---------------------------------------------------------------------------------------------
# Scoring from log-probabilities (`scoring: logprobs` / `both`)

SCORING = ("text", "logprobs", "both")
LOGPROB_TOP = 20  # top alternatives asked for the first answer token (OpenAI allows up to 20)
LOGPROB_MAX_TOKENS = 1  # only the first answer token is read
RELIABILITY_PLOT = PlotSpec("reliability", "reliability.png")
_TOKEN_STRIP = " \t\n.:,;)(*\"'`[]"


def supports_logprobs(task: Task | str) -> bool:
    """Multiple choice with one answer and classification: one label answers the item."""
    return get_task(task).kind in ("multiple_choice", "classification")


def scoring_task(task: Task | str, scoring: str) -> Task:
    """`task` scored as `scoring` says: "text" as it is; "logprobs" adds `brier` and `ece` (its `acc`
    then comes from the log-probabilities); "both" adds `acc_logprobs`, `brier`, `ece` beside the
    parsed-text metrics. Both add the reliability diagram."""
    task = get_task(task)
    if scoring not in SCORING:
        raise ValueError(f"scoring={scoring!r}; use one of: {', '.join(SCORING)}")
    if scoring == "text":
        return task
    if not supports_logprobs(task):
        raise ValueError(f"scoring={scoring!r} needs a multiple-choice (one answer) or classification task; "
                         f"{task.name} is {task.kind}")
    extra = ("brier", "ece") if scoring == "logprobs" else ("acc_logprobs", "brier", "ece")
    return dataclasses.replace(task, metrics=(*task.metrics, *extra), plots=(*task.plots, RELIABILITY_PLOT))


def logprob_requests(requests: Sequence[GenerationRequest], top: int = LOGPROB_TOP,
                     max_tokens: int = LOGPROB_MAX_TOKENS) -> list[GenerationRequest]:
    """The same prompts, asking for the first answer token and its `top` alternatives."""
    return [dataclasses.replace(r, max_tokens=max_tokens, top_logprobs=top) for r in requests]


def answer_options(task: Task, item: Item) -> list[tuple[str, list[str]]]:
    """(label, the words that name it) for every valid answer of `item`: its choice letters, or the
    task's labels with their prompt words (`label_mapping`)."""
    if item.fields.get("labels"):
        return [(lab, [lab]) for lab in item.fields["labels"]]
    mapping = getattr(task, "label_mapping", {}) or {}
    return [(lab, list(dict.fromkeys([mapping.get(lab, lab), lab]))) for lab in task.labels]


def first_token_probs(task: Task, item: Item, logprobs: Sequence[Mapping[str, Any]] | None
                      ) -> tuple[dict[str, float], float, str | None]:
    """({label: probability}, mass, reason) from the first generated token's top alternatives.

    A token names a label when, stripped of spaces and punctuation and lower-cased, it is a choice
    letter, or the start of exactly one label's word (classification: "Sent" does not tell
    Sentinel-1 from Sentinel-2 and names none). The probabilities of the tokens naming a label
    are added (" A" and "A" alike), then renormalised over the labels; `mass` is the share of the
    whole distribution they had. No label among them: ({}, 0, the reason) — an unparsed answer."""
    if not logprobs:
        return {}, 0.0, "no log-probabilities came back for this answer"
    first = logprobs[0]
    alts = list(first.get("top_logprobs") or []) or [{"token": first.get("token"), "logprob": first.get("logprob")}]
    options = answer_options(task, item)
    letters = bool(item.fields.get("labels"))
    mass: dict[str, float] = {}
    for alt in alts:
        if alt.get("logprob") is None:
            continue
        word = str(alt.get("token") or "").strip(_TOKEN_STRIP).lower()
        if not word:
            continue
        named = [lab for lab, words in options
                 if any(w.lower() == word or (not letters and w.lower().startswith(word)) for w in words)]
        if len(named) == 1:
            mass[named[0]] = mass.get(named[0], 0.0) + math.exp(float(alt["logprob"]))
    total = sum(mass.values())
    if total <= 0:
        shown = repr(first.get("token"))
        return {}, 0.0, (f"no valid answer among the {len(alts)} most probable first tokens "
                         f"(the first token was {shown})")
    return {lab: mass.get(lab, 0.0) / total for lab, _ in options}, min(1.0, total), None


def add_logprob_scores(task: Task | str, items: Sequence[Item], results: Sequence[GenerationResult],
                       samples: pd.DataFrame, *, replace_text: bool) -> pd.DataFrame:
    """`samples` with the log-probability scores of `results` (one per item, asked with
    `logprob_requests`): `logprob_answer` (the most probable valid label; ties: label order),
    `logprob_confidence` (its renormalised probability; 0 when no label was found), `logprob_mass`,
    `logprob_probs` (JSON), `logprob_reason`, `acc_logprobs` and `brier`. An item whose call failed
    gets NaN (excluded). `replace_text` (scoring "logprobs"): `parsed`, `unparsed`, `acc` (and
    `pred_code`) are the log-probability answer's."""
    task = get_task(task)
    df = samples.copy()
    rows = []
    for item, res in zip(items, results):
        if res.failed:
            rows.append({"logprob_answer": None, "logprob_confidence": math.nan, "logprob_mass": math.nan,
                         "logprob_probs": None, "logprob_reason": None, "acc_logprobs": math.nan,
                         "brier": math.nan})
            continue
        probs, total, reason = first_token_probs(task, item, res.logprobs)
        labels = [lab for lab, _ in answer_options(task, item)]
        answer = max(labels, key=lambda lab: (probs.get(lab, 0.0), -labels.index(lab))) if probs else None
        rows.append({
            "logprob_answer": answer, "logprob_confidence": probs.get(answer, 0.0) if answer else 0.0,
            "logprob_mass": total, "logprob_probs": json.dumps({k: round(v, 6) for k, v in probs.items()}),
            "logprob_reason": reason, "acc_logprobs": float(answer == item.target),
            "brier": M.brier_score([probs.get(lab, 0.0) for lab in labels], labels.index(item.target)
                                   if item.target in labels else -1),
        })
    lp = pd.DataFrame(rows, index=df.index)
    for col in lp.columns:
        df[col] = lp[col]
    if replace_text:
        ok = ~df["failed"].astype(bool)
        df.loc[ok, "parsed"] = lp.loc[ok, "logprob_answer"]
        df.loc[ok, "unparsed"] = lp.loc[ok, "logprob_reason"].notna()
        df.loc[ok, "unparsed_reason"] = lp.loc[ok, "logprob_reason"]
        df.loc[ok, "acc"] = lp.loc[ok, "acc_logprobs"]
        # One token is all that was asked for: stopping there is no truncation of an answer.
        df.loc[ok, "truncated"] = False
        if "pred_code" in df.columns:
            codes = [M.label_code(a, [lab for lab, _ in answer_options(task, it)])
                     for it, a in zip(items, lp["logprob_answer"])]
            df.loc[ok, "pred_code"] = pd.Series(codes, index=df.index)[ok]
    return df


def metrics_by_group(df: pd.DataFrame, summarize: Callable[[pd.DataFrame], dict[str, dict]]) -> pd.DataFrame:
    """A tidy table: one row per (group, metric) with value, ci_low, ci_high, n and method.

    `summarize` turns the samples of one group into {metric: summary} (e.g. `task_metrics`, plus
    the judges' metrics); groups in sorted order, metrics in the order `summarize` gives them.
    """
    columns = ["group", "metric", "value", "ci_low", "ci_high", "n", "method"]
    if GROUP_COLUMN not in df.columns:
        raise ValueError("the samples have no group column (load the items with group_by=...)")
    rows = []
    for group, part in df.groupby(GROUP_COLUMN, sort=True):
        for metric, m in summarize(part).items():
            rows.append({"group": group, "metric": metric, **{k: m.get(k) for k in columns[2:]}})
    return pd.DataFrame(rows, columns=columns)


def baselines(task: Task | str, items: Sequence[Item], df: pd.DataFrame) -> dict[str, dict] | None:
    """What answering without reading the question scores on the items `df` answered (not failed).

    For tasks with `constant_baselines`: "chance", the mean over items of 1 / number of choices
    (a uniform random guess), and "most_frequent", always giving the most frequent gold answer
    (ties: the first in label order), with its accuracy's interval. That answer is picked on these
    very items, so it is a slightly optimistic baseline. None for other tasks or no items.
    """
    task = get_task(task)
    if not task.constant_baselines or df is None or df.empty:
        return None
    used = df[~df["failed"].astype(bool)] if "failed" in df.columns else df
    by_id = {it.doc_id: it for it in items}
    chosen = [by_id[d] for d in used["doc_id"] if d in by_id]
    n_choices = [len(it.fields.get("labels") or task.labels) for it in chosen]
    if not chosen or not all(n_choices):
        return None
    golds = [it.target for it in chosen]
    order = list(dict.fromkeys([*task.labels, *(lab for it in chosen for lab in it.fields.get("labels", ()))]))
    counts = Counter(golds)
    rank = {lab: i for i, lab in enumerate(order)}
    answer = min(counts, key=lambda a: (-counts[a], rank.get(a, len(rank)), a))
    hits = np.array([float(g == answer) for g in golds])
    return {
        "chance": {"value": round(float(np.mean([1.0 / k for k in n_choices])), 12), "n": len(chosen),
                   "method": "exact: mean of 1 / number of choices (no interval: not an estimate)"},
        "most_frequent": {"answer": answer, **stats.interval(hits, "proportion")},
    }


def baseline_note(metrics: Mapping[str, Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]] | None,
                  metric: str = "acc") -> str | None:
    """A sentence when the model's `metric` does not beat a baseline: its interval reaches the
    baseline's value or lies below it. None when it beats both (or there is nothing to compare)."""
    m = metrics.get(metric) or {}
    low = m.get("ci_low")
    if not base or low is None or not np.isfinite(low):
        return None
    chance, constant = base.get("chance", {}), base.get("most_frequent", {})
    beaten = [(f'always answering "{constant["answer"]}"', constant.get("value")), ("chance", chance.get("value"))]
    missed = [(what, value) for what, value in beaten if value is not None and low <= value]
    if not missed:
        return None
    what, value = max(missed, key=lambda wv: wv[1])
    return (f"{metric} {m['value']:.3f} [{low:.3f}, {m['ci_high']:.3f}] does not beat {what} ({value:.3f}): "
            f"its 95% interval {'lies below' if m['ci_high'] < value else 'reaches down to'} that value.")


def context_columns(task: Task, item: Item) -> dict[str, str]:
    """The documents an item came with, named as lm-evaluation-harness flattens them (`doc.Doc 1`,
    `doc.Context`; the task's `doc_columns`), so a samples.csv carries them to the win-rate judges
    like EVE's CSVs do."""
    docs = list(item.fields.get("docs") or [])
    if task.doc_columns == "Context":
        return {"doc.Context": docs[0] if docs else ""}
    if task.doc_columns == "Doc {n}":
        return {f"doc.Doc {i}": docs[i - 1] if i <= len(docs) else "" for i in range(1, 4)}
    return {}


def item_columns(task: Task, item: Item, *, documents: bool = True) -> dict[str, str]:
    """The parts of an item a reader of samples.csv needs next to the answer: the options of a
    multiple-choice item (`doc.Choices`, "A. text | B. text | ..."), the answer under test of a
    hallucination item (`doc.Answer`) and the context documents (`context_columns`)."""
    f = item.fields
    out: dict[str, str] = {}
    if f.get("choices") and f.get("labels"):
        out["doc.Choices"] = CHOICES_SEPARATOR.join(f"{lab}. {text}" for lab, text in zip(f["labels"], f["choices"]))
    if "is_hallucinated" in f and "answer" in f:
        out["doc.Answer"] = f["answer"]
    return {**out, **(context_columns(task, item) if documents else {})}


def judge_case_fields(task: Task | str, item: Item, response: str) -> dict[str, Any]:
    """Keyword arguments for `evekit.judges.JudgeCase` for one answered item."""
    task = get_task(task)
    if task.judge_kind is None:
        raise ValueError(f"task {task.name} is not judged")
    return {"question": item.question, "answer": response, "reference": item.fields.get("reference"),
            "context": list(item.fields["docs"]) if "docs" in item.fields else None}


# ---------------------------------------------------------------------------------------------
# Hallucination detection at the span levels: EVE's hard and soft span detection, scored as
# Mu-SHROOM's official scorer scores them (`evekit.spans` holds the definitions)

HALLUCINATION_LEVELS = spans.LEVELS
# The span reply is a JSON list of copied phrases: more than the binary level's 100 tokens, and
# never more than `span_max_tokens` gives for the longest answer asked about.
SPAN_MAX_TOKENS = 512
SPAN_MIN_TOKENS = 128
_HARD_SPAN_METRICS = ("hard_iou", "span_precision", "span_recall", "span_f1")
_SOFT_SPAN_METRICS = ("hard_iou", "soft_spearman", "span_precision", "span_recall", "span_f1")
# The span call's own columns in samples.csv (at level `all` the unprefixed ones are the binary call's).
SPAN_CALL_COLUMNS = ("span_response", "span_failed", "span_error", "span_unparsed", "span_unparsed_reason")


def _span_metric_names(level: str) -> tuple[str, ...]:
    spans.check_level(level)
    if level == "binary":
        return ()
    return _SOFT_SPAN_METRICS if spans.asks_confidence(level) else _HARD_SPAN_METRICS


def level_metrics(level: str) -> tuple[str, ...]:
    """The metrics of hallucination_detection at `level`, headline first: binary -> EVE's
    (acc, precision, recall, f1, mcc, macro_f1); hard_spans -> hard_iou, span_precision,
    span_recall, span_f1; soft_spans -> those and soft_spearman; all -> binary's, then soft_spans'."""
    names = _span_metric_names(level)
    binary = get_task("hallucination_detection").metrics
    return binary if level == "binary" else (*binary, *names) if level == "all" else names


SPAN_PLOT = PlotSpec("score_distribution", "hard_iou_distribution.png", "hard_iou")


def level_task(task: Task | str, level: str) -> Task:
    """hallucination_detection at `level`: its metrics (`level_metrics`), the per-item IoU plot at
    the span levels, and the constant baselines only where the binary level is asked."""
    task = get_task(task)
    spans.check_level(level)
    if level == "binary":
        return task
    binary = level == "all"
    return dataclasses.replace(task, metrics=level_metrics(level), constant_baselines=binary and task.constant_baselines,
                               plots=(*(task.plots if binary else ()), SPAN_PLOT))


def _check_hallucination_items(items: Sequence[Item]) -> None:
    bad = [it for it in items if "is_hallucinated" not in it.fields or "answer" not in it.fields]
    if bad:
        raise ValueError(f"span levels need hallucination_detection items; item {bad[0].doc_id} is not one")


def gold_spans(item: Item) -> tuple[list[list[int]], list[dict[str, Any]]]:
    """(hard, soft) gold labels of a hallucination item. A row with only one of the two label
    columns gets the other derived as the scorer derives it (hard = soft prob > 0.5; soft = hard
    with prob 1.0); a row with neither cannot be scored at a span level: a DataError naming it."""
    f = item.fields
    given = f.get("span_columns", ("Hard labels", "Soft labels"))
    hard, soft = [list(map(int, h)) for h in f.get("hard_labels", [])], list(f.get("soft_labels", []))
    if not given:
        raise DataError(f"{item.source or 'dataset'}: row {item.row} (0-based) has neither 'Hard labels' nor "
                        "'Soft labels': the span levels (hard_spans, soft_spans, all) need one of them; "
                        "use level='binary'")
    if "Hard labels" not in given:
        hard = spans.hard_from_soft(soft)
    if "Soft labels" not in given:
        soft = spans.soft_from_hard(hard)
    answer = f["answer"]
    soft = [{"start": int(s["start"]), "end": int(s["end"]), "text": answer[int(s["start"]):int(s["end"])],
             "prob": float(s["prob"]) if s.get("prob") is not None else 1.0} for s in soft]
    return hard, soft


def _span_ask(items: Sequence[Item], level: str, *, api: Api, temperature: float,
              max_tokens: int) -> tuple[list[list[dict[str, str]]], dict[str, Any]]:
    """(the chats, `ask_json`'s arguments) of the span question for `items` at `level`: the one
    recipe `ask_spans` sends and `span_request` shows."""
    if level == "binary":
        raise ValueError("level 'binary' asks no spans (use build_requests)")
    _check_hallucination_items(items)
    messages = [spans.span_messages(it.question, it.fields["answer"], level) for it in items]
    return messages, {"schema": spans.reply_schema(level), "max_tokens": max_tokens, "temperature": temperature,
                      "name": "spans", "normalize": spans.normalize_reply, "api": api,
                      "request_schema": spans.reply_schema(level, request=True)}


def span_max_tokens(items: Sequence[Item]) -> int:
    """The span call's max_tokens for these items: the phrases are copied from the answer, so a
    reply needs about the answer's own length (a token per ~2 characters, generous for JSON
    quoting and many short spans) plus the JSON around it (96 tokens), within [SPAN_MIN_TOKENS,
    SPAN_MAX_TOKENS]. Small models that repeat one phrase until cut off stop there, not at 512
    (the demo's span calls took 536 s of its 934, 16 of 26 at the cap). One bound for the whole
    run, so the plan, the sent requests and model_outputs.jsonl agree."""
    longest = max((len(str(it.fields.get("answer") or "")) for it in items), default=0)
    return max(SPAN_MIN_TOKENS, min(SPAN_MAX_TOKENS, 96 + (longest + 1) // 2))


def span_request(item: Item, level: str = "soft_spans", *, api: Api = "chat", temperature: float = 0.0,
                 max_tokens: int = SPAN_MAX_TOKENS) -> GenerationRequest:
    """The request asking for the hallucinated phrases of the item's answer at `level` (zero-shot;
    evekit/prompts/hallucination_spans.txt), as `ask_spans` sends it first (`structured.first_requests`:
    json_schema on chat; for completions the chat joined into one prompt)."""
    messages, args = _span_ask([item], level, api=api, temperature=temperature, max_tokens=max_tokens)
    return first_requests(messages, **args)[0]


def ask_spans(client: Any, items: Sequence[Item], level: str, *, api: Api = "chat", temperature: float = 0.0,
              max_tokens: int = SPAN_MAX_TOKENS, desc: str = "") -> list[GenerationResult]:
    """One span reply per item through the structured-output chain (`structured.ask_json`:
    json_schema -> json_object -> text, one reminder after an unusable reply), as generation
    results for `add_span_columns`: a validated reply as its JSON, an unusable one as the text
    that came back (read again there: unparsed, with the reason), no reply at all as a failed
    result (`error`)."""
    if level == "binary":
        raise ValueError("level 'binary' asks no spans")
    messages, args = _span_ask(items, level, api=api, temperature=temperature, max_tokens=max_tokens)
    return as_results(ask_json(client, messages, **args, desc=desc or f"spans ({level})"))


def _span_row(item: Item, res: GenerationResult, level: str) -> dict[str, Any]:
    """The span columns of one item."""
    answer, n, soft = item.fields["answer"], len(item.fields["answer"]), spans.asks_confidence(level)
    gold_hard, gold_soft = gold_spans(item)
    row: dict[str, Any] = {
        "span_response": res.raw if res.raw is not None else res.text, "span_failed": bool(res.failed),
        "span_error": res.error, "span_unparsed": False, "span_unparsed_reason": None,
        "pred_spans": None, "spans_not_in_text": None,
        "gold_hard_labels": spans.labels_json(gold_hard), "gold_soft_labels": spans.labels_json(gold_soft),
        "pred_hard_labels": None, "pred_soft_labels": None,
    }
    names = ("hard_iou", "soft_spearman") if soft else ("hard_iou",)
    if res.failed:  # excluded: no score
        return {**row, **{k: math.nan for k in (*names, "span_tp", "span_fp", "span_fn")}}
    phrases, reason = spans.parse_reply(res.text, level)
    if phrases is None:  # the model's failure: a miss
        return {**row, "span_unparsed": True, "span_unparsed_reason": reason, "spans_not_in_text": 0,
                **spans.miss_scores(gold_hard, n, soft=soft)}
    located = spans.locate(answer, phrases)
    pred_hard, pred_soft = spans.predicted_labels(located, answer)
    row.update({
        "pred_spans": spans.labels_json([{"text": p.text, "start": p.start, "end": p.end,
                                          "confidence": p.confidence} for p in located]),
        "spans_not_in_text": sum(not p.found for p in located),
        "pred_hard_labels": spans.labels_json(pred_hard), "pred_soft_labels": spans.labels_json(pred_soft),
    })
    return {**row, **spans.item_scores(gold_hard, gold_soft, pred_hard, pred_soft, n, soft=soft)}


def _span_parser(level: str) -> Callable[[str, Item], Parsed]:
    def parse(text: str, item: Item) -> Parsed:
        phrases, reason = spans.parse_reply(text, level)
        return Parsed(None if phrases is None else spans.labels_json([p["text"] for p in phrases]), None, reason)

    return parse


def add_span_columns(samples: pd.DataFrame | None, items: Sequence[Item], results: Sequence[GenerationResult],
                     level: str) -> pd.DataFrame:
    """The samples table with the span level's columns, from one span reply per item (`ask_spans`).

    `samples`: the binary level's table (level `all`), rows in the order of `items`; None at
    hard_spans / soft_spans, where the span call is the only call: the table's usual columns
    (`response`, `parsed` = the JSON list of phrases, `unparsed`, `failed`, ...) then come from it.
    Added, per item: the span call's `span_response`, `span_failed`, `span_error`, `span_unparsed`,
    `span_unparsed_reason`; `pred_spans` (JSON [{text, start, end, confidence}], start/end null for
    a phrase not in the answer), `spans_not_in_text`, `gold_hard_labels` ([[start, end]]),
    `gold_soft_labels` ([{start, end, text, prob}]), `pred_hard_labels`, `pred_soft_labels` (same
    formats), and the per-item scores `hard_iou`, `soft_spearman` (soft levels), `span_tp`,
    `span_fp`, `span_fn`. A failed call: NaN scores (excluded); an unusable reply: the miss scores
    (`spans.miss_scores`).
    """
    if level == "binary":
        raise ValueError("level 'binary' has no span columns")
    spans.check_level(level)
    if len(items) != len(results):
        raise ValueError(f"{len(items)} items but {len(results)} span results")
    _check_hallucination_items(items)
    task = get_task("hallucination_detection")
    if samples is None:
        span_task = dataclasses.replace(task, parse=_span_parser(level), score=lambda p, item: {}, metrics=(),
                                        constant_baselines=False)
        samples = score_samples(span_task, items, results)
    elif len(samples) != len(items) or list(samples["doc_id"]) != [it.doc_id for it in items]:
        raise ValueError("samples and items differ: add_span_columns needs the samples rows in the order of items")
    extra = pd.DataFrame([_span_row(it, res, level) for it, res in zip(items, results)], index=samples.index)
    extra["spans_not_in_text"] = extra["spans_not_in_text"].astype("Int64")
    out = samples.drop(columns=[c for c in extra.columns if c in samples.columns])
    return pd.concat([out, extra], axis=1)


def _span_rows(samples: pd.DataFrame) -> pd.DataFrame:
    if "span_failed" not in samples.columns:
        raise ValueError("the samples have no span columns (add_span_columns)")
    return samples[~samples["span_failed"].astype(bool)]


def span_metrics(samples: pd.DataFrame, level: str, *, seed: int = 0, n_boot: int = 2000) -> dict[str, dict]:
    """{metric: {"value", "ci_low", "ci_high", "n", "method", ...}} of the span level, over the items
    whose span call did not fail (at level `all` a failed binary call does not exclude an item
    here). hard_iou and soft_spearman are means of per-item values with a BCa interval;
    span_precision/recall/f1 pool the characters over items (sums of span_tp/fp/fn, then the ratio)
    with a percentile bootstrap over items, and carry `n_chars` beside `n` (items)."""
    used = _span_rows(samples)
    out: dict[str, dict] = {}
    for name in _span_metric_names(level):
        summary = M.get_metric(name).summarize(used, seed=seed, n_boot=n_boot)
        if summary is not None:
            out[name] = summary
    return out


def span_baselines(samples: pd.DataFrame, level: str, *, seed: int = 0, n_boot: int = 2000
                   ) -> dict[str, dict[str, dict]]:
    """The span metrics of two answers that read nothing, on the items the model was scored on:
    "no_span" (never a hallucination: {"spans": []}) and "whole_answer" (every character
    hallucinated, probability 1). {baseline: {metric: summary}}, summaries as `span_metrics`."""
    used = _span_rows(samples)
    soft = spans.asks_confidence(level)
    rows: dict[str, list[dict[str, float]]] = {"no_span": [], "whole_answer": []}
    for answer, hard_json, soft_json in zip(used["doc.Answer"], used["gold_hard_labels"], used["gold_soft_labels"]):
        n, gold_hard, gold_soft = len(answer), json.loads(hard_json), json.loads(soft_json)
        whole = [[0, n]] if n else []
        rows["no_span"].append(spans.item_scores(gold_hard, gold_soft, [], [], n, soft=soft))
        rows["whole_answer"].append(spans.item_scores(gold_hard, gold_soft, whole,
                                                      spans.soft_from_hard(whole), n, soft=soft))
    out: dict[str, dict[str, dict]] = {}
    for base, values in rows.items():
        frame = pd.DataFrame(values, columns=["hard_iou", *(["soft_spearman"] if soft else []),
                                              "span_tp", "span_fp", "span_fn"])
        out[base] = {name: s for name in _span_metric_names(level)
                     if (s := M.get_metric(name).summarize(frame, seed=seed, n_boot=n_boot)) is not None}
    return out


def span_counts(samples: pd.DataFrame) -> dict[str, int]:
    """The span call's counts: items, `n_unparsed` (scored as misses), `n_failed` (excluded),
    `n_spans` (phrases in the readable replies) and `spans_not_in_text` (of those, not found in
    the answer: shown in `pred_spans` with null offsets, never dropped)."""
    failed = samples["span_failed"].astype(bool)
    unparsed = samples["span_unparsed"].astype(bool) & ~failed
    listed = [json.loads(v) for v in samples["pred_spans"] if isinstance(v, str)]
    return {"n": int(len(samples)), "n_unparsed": int(unparsed.sum()), "n_failed": int(failed.sum()),
            "n_spans": int(sum(len(v) for v in listed)),
            "spans_not_in_text": int(pd.to_numeric(samples["spans_not_in_text"]).fillna(0).sum())}


def worst_spans_html(samples: pd.DataFrame, k: int = 5, by: str = "hard_iou") -> str:
    """The `k` items with the lowest `by` (hard_iou or soft_spearman; ties: doc_id order), each as its
    answer with gold and predicted spans side by side (`spans.spans_html`, all text escaped),
    headed by doc_id, scores and question. Failed items are left out; "" when none is left."""
    if by not in samples.columns:
        raise ValueError(f"the samples have no {by!r} column")
    used = _span_rows(samples)
    used = used[pd.to_numeric(used[by]).notna()]
    worst = used.assign(_key=pd.to_numeric(used[by])).sort_values(["_key", "doc_id"], kind="stable").head(k)
    blocks = []
    for _, r in worst.iterrows():
        scores = " · ".join(f"{m} {float(r[m]):.2f}" for m in ("hard_iou", "soft_spearman") if m in r.index)
        caption = f"doc_id {r['doc_id']} · {scores} · {r['doc.Question']}"
        if r["span_unparsed"]:
            caption += f" · unparsed reply ({r['span_unparsed_reason']}): scored as a miss"
        located = json.loads(r["pred_spans"]) if isinstance(r["pred_spans"], str) else []
        blocks.append(spans.spans_html(
            r["doc.Answer"], gold_hard=json.loads(r["gold_hard_labels"]), gold_soft=json.loads(r["gold_soft_labels"]),
            pred_hard=json.loads(r["pred_hard_labels"]) if isinstance(r["pred_hard_labels"], str) else [],
            pred_soft=json.loads(r["pred_soft_labels"]) if isinstance(r["pred_soft_labels"], str) else [],
            not_found=[p["text"] for p in located if p["start"] is None], caption=caption))
    return "".join(f'<div style="margin-bottom: 12px">{b}</div>' for b in blocks)
