"""Custom tasks: your own EO data and prompts, evaluated by the same engine as the EVE tasks.

A task file (YAML) says what kind of task it is, where the data is, which columns hold what,
and how prompts look. `load_task` turns it into a `CustomTask`, a subclass of the engine's
`Task`, so `load_items`, `build_requests`, `score_samples`, `task_metrics`, the judges and the
report writer work unchanged. Two spellings are read:

- evekit's own (see params/examples/tasks/*.yaml): `kind`, `dataset`, `input_column`, ...,
  `labels`, `label_mapping`, `prompt: {prefix, template, instruction, system}`, `num_fewshot`,
  `max_tokens`, `metrics`;
- a dataset's own Inspect AI `eval.yaml` as EuroEval reads it: `tasks[0].field_spec`
  {input, target, choices}, `tasks[0].split` / `config`; a `multiple_choice` solver or a
  `field_spec.choices` means multiple choice; top-level `input_column` / `target_column` /
  `choices_column` win over `field_spec`; "literal:..." targets and bare integers are not
  column names and are ignored. EuroEval's own key names (`task`, `num_few_shot_examples`,
  `max_generated_tokens`, `prompt_label_mapping`, `prompt_prefix`, ...) are accepted too.

Kinds and their metrics: `multiple_choice` and `classification` (`acc`, `mcc`, `macro_f1`),
`open_qa` (LLM judges, plus `bleu` / `rougeL` for reference), `text_to_text` (`rougeL`,
`bleu`), `extractive_qa` (`token_f1`, `exact_match` with SQuAD answer normalisation),
`token_classification` (`micro_f1` over entity spans, as EuroEval; see `_prep_tokens`).

`scoring: logprobs` (or `both`) in a multiple-choice or classification task file scores the
first answer token's log-probabilities instead of (or beside) the parsed text (`evekit.tasks`
`add_logprob_scores`); the notebook parameter `scoring` overrides it.
"""
from __future__ import annotations

import json
import re
import string
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from evekit import tasks as T
from evekit.data import LOCAL_FORMATS, Item, Row, choices_of, parse_list
from evekit.errors import RowError, TaskFileError
from evekit.paths import display_path
from evekit.metrics import entities_from_tags, entity_counts, tags_from_spans
from evekit.parsing import parse_letters
from evekit.structured import extract_json

__all__ = [
    "CustomTask",
    "TaskFileError",
    "KINDS",
    "PLACEHOLDERS",
    "load_task",
    "task_from_dict",
    "squad_normalize",
    "token_f1",
    "exact_match",
]

KINDS = ("multiple_choice", "classification", "open_qa", "text_to_text", "extractive_qa",
         "token_classification")
SCORING = ("text", "logprobs", "both")
PLACEHOLDERS = ("text", "question", "context", "choices", "label", "labels_str", "target_text")

# Schema names the mapping fills for custom tasks (see evekit.data.apply_column_mapping).
ROLES = {"input": "input", "target": "target", "choices": "choices", "context": "context"}

# EuroEval's default column names, used when the task file names none.
DEFAULT_COLUMNS: dict[str, dict[str, Any]] = {
    "multiple_choice": {"input_column": "text", "target_column": "label", "choices_column": "choices"},
    "classification": {"input_column": "text", "target_column": "label"},
    "open_qa": {"input_column": "text", "target_column": "target_text"},
    "text_to_text": {"input_column": "text", "target_column": "target_text"},
    "extractive_qa": {"input_column": "question", "target_column": "answers", "context_columns": ["context"]},
    "token_classification": {"input_column": "tokens", "target_column": "labels"},
}
METRICS = {
    "multiple_choice": (("acc", "mcc", "macro_f1"), ("acc", "mcc", "macro_f1")),  # (default, allowed)
    "classification": (("acc", "mcc", "macro_f1"), ("acc", "mcc", "macro_f1")),
    "open_qa": (("bleu", "rougeL"), ("bleu", "rougeL", "cosine")),
    "text_to_text": (("rougeL", "bleu"), ("rougeL", "bleu", "cosine")),
    "extractive_qa": (("token_f1", "exact_match"), ("token_f1", "exact_match")),
    "token_classification": (("micro_f1",), ("micro_f1",)),
}
DEFAULT_FEWSHOT = {"multiple_choice": 5, "classification": 12, "open_qa": 0, "text_to_text": 3, "extractive_qa": 4,
                   "token_classification": 8}
DEFAULT_MAX_TOKENS = {"multiple_choice": 10, "classification": 10, "open_qa": 512, "text_to_text": 256,
                      "extractive_qa": 32, "token_classification": 128}
# (prefix, few-shot template, instruction prompt), after EuroEval's English defaults.
DEFAULT_PROMPTS = {
    "multiple_choice": ("The following are multiple-choice questions (with answers).",
                        "Question: {text}\nAnswer: {label}",
                        "Question: {text}\n\nAnswer the question above by replying with {labels_str}, and nothing else."),
    "classification": ("The following are texts and their categories, which can be {labels_str}.",
                       "Text: {text}\nCategory: {label}",
                       "Text: {text}\n\nClassify the text into one of the categories {labels_str}, and answer "
                       "with only the category."),
    "open_qa": ("The following are questions with answers.",
                "{context}Question: {text}\nAnswer: {label}",
                "{context}Question: {text}"),
    "text_to_text": ("", "{context}Input: {text}\nOutput: {target_text}", "{context}{text}"),
    "extractive_qa": ("Below are texts with questions and answers.",
                      "Text: {text}\nQuestion: {question}\nAnswer in max 3 words: {label}",
                      "Text: {text}\n\nAnswer the following question about the text above in max 3 words."
                      "\n\nQuestion: {question}"),
    "token_classification": ("Each text below is followed by a JSON object listing, per category, the spans of "
                             "the text that belong to it.",
                             "Text: {text}\nCategories: {label}",
                             "Text: {text}\n\nFind the spans of the text above that belong to the categories "
                             "{labels_str}. Reply with a JSON object whose keys are those categories and whose "
                             "values are lists of the spans, copied exactly as they are written in the text."),
}
# EuroEval task names -> our kinds.
TASK_ALIASES = {
    "classification": "classification", "text-classification": "classification",
    "sentiment-classification": "classification", "multiple-choice": "multiple_choice",
    "multiple-choice-classification": "multiple_choice", "knowledge": "multiple_choice",
    "reading-comprehension": "extractive_qa", "question-answering": "extractive_qa",
    "summarization": "text_to_text", "text-to-text": "text_to_text", "token-classification": "token_classification",
    "named-entity-recognition": "token_classification", "ner": "token_classification", **{k: k for k in KINDS},
}
NATIVE_KEYS = {
    "name", "description", "kind", "task", "dataset", "split", "config", "input_column", "target_column",
    "choices_column", "context_columns", "labels", "label_mapping", "prompt_label_mapping", "prompt",
    "prompt_prefix", "prompt_template", "instruction_prompt", "system_prompt", "num_fewshot",
    "num_few_shot_examples", "max_tokens", "max_generated_tokens", "metrics", "judge_kind", "languages",
    "pretty_name", "scoring",
}


# ---------------------------------------------------------------------------------------------
# SQuAD-style answer comparison


def squad_normalize(text: str) -> str:
    """Lower case, no punctuation, no articles (a, an, the), single spaces (SQuAD v1.1)."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction: str, gold: str) -> float:
    """Token-overlap F1 of the normalised strings (1.0 when both are empty, 0.0 when one is)."""
    p, g = squad_normalize(prediction).split(), squad_normalize(gold).split()
    if not p or not g:
        return float(p == g)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(squad_normalize(prediction) == squad_normalize(gold))


# ---------------------------------------------------------------------------------------------
# The task


@dataclass(frozen=True)
class CustomTask(T.Task):
    """A `Task` defined by a task file: templates with placeholders instead of fixed prompts."""

    kind: str = "text_to_text"
    column_roles: Mapping[str, str] = field(default_factory=lambda: dict(ROLES), compare=False)
    label_mapping: Mapping[str, str] = field(default_factory=dict, compare=False)
    prompt_prefix: str = ""
    prompt_template: str = ""
    instruction_prompt: str = ""
    system_prompt: str | None = None
    task_file: str = ""
    # Token classification: the reply's JSON schema (asked through evekit.structured.ask_json).
    json_schema: Mapping[str, Any] | None = field(default=None, compare=False)
    # "text" (parse the reply), "logprobs" (first-token log-probabilities) or "both".
    scoring: str = "text"

    @property
    def categories(self) -> list[str]:
        """Token classification: the readable category names, in label-list order."""
        return list(dict.fromkeys(self.label_mapping[lab] for lab in self.labels if lab in self.label_mapping))

    # -- prompts ------------------------------------------------------------------------------
    def values(self, item: Item, answer: str = "") -> dict[str, str]:
        """The placeholder values for `item`; `answer` fills {label}/{target_text} (few-shot)."""
        f = item.fields
        choices = "\n".join(f"{lab}. {txt}" for lab, txt in zip(f.get("labels", ()), f.get("choices", ())))
        docs = f.get("docs") or []
        context = "".join(f"Document {n}:\n{d}\n\n" for n, d in enumerate(docs, start=1))
        if self.kind == "multiple_choice":
            text = f"{item.question}\nChoices:\n{choices}"
            labels_str = _or_list(f["labels"])
        elif self.kind == "extractive_qa":
            text = "\n\n".join(docs)
            labels_str = ""
        elif self.kind == "token_classification":
            text = item.question
            labels_str = _or_list(self.categories)
        else:
            text = item.question
            labels_str = _or_list([self.label_mapping.get(lab, lab) for lab in self.labels])
        return {"text": text, "question": item.question, "context": context, "choices": choices,
                "label": answer, "target_text": answer, "labels_str": labels_str}

    def shot_answer(self, item: Item) -> str:
        if self.kind == "classification":
            return self.label_mapping.get(item.target, item.target)
        if self.kind == "extractive_qa":
            return item.fields["answers"][0]
        if self.kind == "token_classification":  # every category, so the model sees empty lists too
            return json.dumps({c: item.fields["spans"].get(c, []) for c in self.categories}, ensure_ascii=False)
        return item.target

    def chat_messages(self, item: Item, shots: Sequence[Item] = ()) -> tuple[dict[str, str], ...]:
        """Optional system prompt; each shot = instruction prompt + its answer; the item last."""
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        for shot in shots:
            messages.append({"role": "user", "content": self.instruction_prompt.format_map(self.values(shot))})
            messages.append({"role": "assistant", "content": self.shot_answer(shot)})
        messages.append({"role": "user", "content": self.instruction_prompt.format_map(self.values(item))})
        return tuple(messages)

    def completion_prompt(self, item: Item, shots: Sequence[Item] = ()) -> str:
        """Prefix, shots in the few-shot template with their answers, the item with an empty answer."""
        blocks = [self.prompt_prefix.format_map(self.values(item))] if self.prompt_prefix else []
        blocks += [self.prompt_template.format_map(self.values(s, self.shot_answer(s))) for s in shots]
        blocks.append(self.completion_item(item))
        return "\n\n".join(blocks)

    def completion_item(self, item: Item) -> str:
        return self.prompt_template.format_map(self.values(item)).rstrip()


def _or_list(words: Sequence[str]) -> str:
    words = [str(w) for w in words]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


# ---------------------------------------------------------------------------------------------
# Row preparation, parsing and scoring per kind


def _docs(row: Row) -> list[str]:
    if not row.has("context"):
        return []
    value = row.raw("context")
    if isinstance(value, str) and not value.strip().startswith("["):
        return [value.strip()] if value.strip() else []
    if value is None:
        return []
    return [str(d).strip() for d in parse_list(value, "context") if d is not None and str(d).strip()]


def _prep_mc(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("input")
    labels, texts = choices_of(row, "choices")
    given = row.text("target")
    letter = given.strip("().").strip().upper()
    if letter not in labels:  # the answer may be given as the text of the right choice
        by_text = [lab for lab, txt in zip(labels, texts) if txt.lower() == given.lower()]
        if len(by_text) != 1:
            raise RowError("target", f"answer {given!r} is neither a choice letter "
                                     f"({', '.join(labels)}) nor the text of one choice")
        letter = by_text[0]
    return question, letter, {"labels": labels, "choices": texts, "gold": [letter], "docs": _docs(row)}


def _prep_classification(labels: Sequence[str]):
    lookup = {lab.lower(): lab for lab in labels}

    def prep(row: Row) -> tuple[str, str, dict[str, Any]]:
        question = row.text("input")
        given = row.text("target")
        if given.lower() not in lookup:
            raise RowError("target", f"label {given!r} is not in the label list: "
                                     f"{', '.join(repr(lab) for lab in labels)}")
        return question, lookup[given.lower()], {"docs": _docs(row)}

    return prep


def _prep_text(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("input")
    answer = row.text("target")
    docs = _docs(row)
    return question, answer, {"reference": answer, **({"docs": docs} if docs else {})}


def _answers(row: Row) -> tuple[list[str], list[int | None]]:
    value = row.raw("target")
    if isinstance(value, str) and value.strip()[:1] in "[{":
        value = row.struct("target")
    if isinstance(value, Mapping):
        lower = {str(k).lower(): v for k, v in value.items()}
        if "text" not in lower:
            raise RowError("target", f"expected {{text, answer_start}}, got keys {sorted(value)}")
        texts = [str(t) for t in parse_list(lower["text"], "target")]
        starts = [int(s) for s in parse_list(lower.get("answer_start", []), "target")] or [None] * len(texts)
        if len(starts) != len(texts):
            raise RowError("target", f"{len(texts)} answers but {len(starts)} answer_start values")
        return texts, starts
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        texts = [str(t) for t in parse_list(value, "target")]
        return texts, [None] * len(texts)
    return [row.text("target")], [None]


def _prep_extractive(row: Row) -> tuple[str, str, dict[str, Any]]:
    question = row.text("input")
    docs = _docs(row)
    if not docs:
        raise RowError("context", "no context passage")
    passage = "\n\n".join(docs)
    texts, starts = _answers(row)
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise RowError("target", "no answer text")
    for text, start in zip(texts, starts):
        if start is not None and passage[start:start + len(text)] != text:
            raise RowError("target", f"answer {text!r} is not at answer_start {start} of the context")
        if text not in passage:
            raise RowError("target", f"answer {text!r} does not occur in the context passage")
    return question, texts[0], {"answers": texts, "docs": docs}


def _parse_classification(labels: Sequence[str], mapping: Mapping[str, str]):
    phrases = {lab: mapping.get(lab, lab) for lab in labels}

    def parse(text: str, item: Item) -> T.Parsed:
        answer = text.strip().strip(".!\"'`*").strip()
        if not answer:
            return T.Parsed(None, None, "empty answer")
        for lab, phrase in phrases.items():
            if answer.lower() in (phrase.lower(), lab.lower()):
                return T.Parsed(lab, [lab], None)
        found = [lab for lab, phrase in phrases.items()
                 if any(re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", text, re.I) for p in {phrase, lab})]
        if len(found) == 1:
            return T.Parsed(found[0], found, None)
        if found:
            return T.Parsed(None, found, f"names several labels: {', '.join(found)}")
        return T.Parsed(None, None, "no label from the list found")

    return parse


def _parse_mc(text: str, item: Item) -> T.Parsed:
    r = parse_letters(text, item.fields["labels"], multiple=False)
    return T.Parsed(", ".join(r.labels) if r.labels else None, r.labels, r.reason)


def _score_extractive(p: T.Parsed, item: Item) -> dict[str, float]:
    if p.reason is not None:
        return {"token_f1": 0.0, "exact_match": 0.0}
    golds = item.fields["answers"]
    return {"token_f1": max(token_f1(p.value or "", g) for g in golds),
            "exact_match": max(exact_match(p.value or "", g) for g in golds)}


# -- token classification -----------------------------------------------------------------------


def _bio_labels(labels: Sequence[str], raw_map: Any, where: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The BIO tag list (with "O") and its mapping tag -> readable category (B-X and I-X alike)."""
    if not isinstance(labels, list) or not all(isinstance(x, str) and x.strip() for x in labels):
        raise TaskFileError(f"{where}: key 'labels': a token_classification task needs the list of its BIO "
                            f"tags, e.g. [O, B-SAT, I-SAT], got {labels!r}")
    tags = tuple(x.strip() for x in labels)
    if "o" not in {t.lower() for t in tags}:
        raise TaskFileError(f"{where}: key 'labels': the BIO tag list must include O (outside any entity)")
    bad = [t for t in tags if t.lower() != "o" and t[:2].lower() not in ("b-", "i-")]
    if bad:
        raise TaskFileError(f"{where}: key 'labels': {bad} are not BIO tags (O, B-<type>, I-<type>)")
    by_lower = {t.lower(): t for t in tags}
    mapping: dict[str, str] = {}
    if raw_map not in (None, "auto"):
        if not isinstance(raw_map, Mapping):
            raise TaskFileError(f"{where}: key 'label_mapping' must map BIO tags to category names, or be 'auto'")
        for k, v in raw_map.items():
            if str(k).lower() not in by_lower:
                raise TaskFileError(f"{where}: key 'label_mapping': {k!r} is not in the label list: "
                                    f"{', '.join(map(repr, tags))}")
            if str(k).lower() != "o":
                mapping[by_lower[str(k).lower()]] = str(v).strip()
    for t in tags:
        if t.lower() != "o":
            mapping.setdefault(t, t[2:].lower())  # "auto": the type after the prefix
    types: dict[str, str] = {}
    for t, cat in mapping.items():
        other = types.setdefault(t[2:].lower(), cat)
        if other != cat:
            raise TaskFileError(f"{where}: key 'label_mapping': B-{t[2:]} and I-{t[2:]} must map to the same "
                                f"category, got {other!r} and {cat!r}")
    return tags, mapping


def _prep_tokens(tags: Sequence[str], mapping: Mapping[str, str]):
    """Row -> (the tokens joined by single spaces, the gold spans as JSON, fields with the tokens,
    tags, gold entities as (category, start, end) token spans and the gold spans per category)."""
    lookup = {t.lower(): t for t in tags}

    def prep(row: Row) -> tuple[str, str, dict[str, Any]]:
        tokens = row.raw("input")
        tokens = parse_list(tokens, "input") if tokens is not None else None
        if not tokens or not all(isinstance(t, str) and t.strip() and not any(c.isspace() for c in t.strip())
                                 for t in tokens):
            raise RowError("input", "expected a non-empty list of tokens (strings without spaces)")
        tokens = [t.strip() for t in tokens]
        given = parse_list(row.raw("target"), "target") if row.raw("target") is not None else None
        if given is None:
            raise RowError("target", "value is missing (null)")
        if len(given) != len(tokens):
            raise RowError("target", f"{len(given)} labels for {len(tokens)} tokens (one BIO tag per token)")
        unknown = sorted({str(g) for g in given if str(g).lower() not in lookup})
        if unknown:
            raise RowError("target", f"tag(s) {unknown} not in the label list: {', '.join(tags)}")
        canon = [lookup[str(g).lower()] for g in given]
        gold = entities_from_tags(canon, category=lambda tag: mapping[tag])
        spans: dict[str, list[str]] = {}
        for cat, start, end in sorted(gold, key=lambda e: (e[1], e[2], e[0])):
            spans.setdefault(cat, []).append(" ".join(tokens[start:end]))
        text = " ".join(tokens)
        return text, json.dumps(spans, ensure_ascii=False), {
            "tokens": tokens, "tags": canon, "spans": spans,
            "entities": sorted([list(e) for e in gold], key=lambda e: (e[1], e[2]))}

    return prep


def _token_schema(categories: Sequence[str]) -> dict[str, Any]:
    # No category is required: {} (or a missing category) means no entity of it.
    return {"type": "object", "additionalProperties": False,
            "properties": {c: {"type": "array", "items": {"type": "string"}} for c in categories}}


def _parse_tokens(categories: Sequence[str]):
    by_lower = {c.lower(): c for c in categories}

    def parse(text: str, item: Item) -> T.Parsed:
        obj = extract_json(text)
        if obj is None:
            return T.Parsed(None, None, "no JSON object in the answer")
        spans: dict[str, list[str]] = {}
        for key, value in obj.items():
            cat = by_lower.get(str(key).strip().lower())
            if cat is None:
                continue  # a key that is no category names no entity we score
            if value is None:
                value = []
            elif isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return T.Parsed(None, None, f"the value of {key!r} is not a list of span strings")
            spans[cat] = [v for v in value if v.strip()]
        return T.Parsed(json.dumps(spans, ensure_ascii=False), None, None)

    return parse


def _score_tokens(p: T.Parsed, item: Item) -> dict[str, float]:
    """Entity counts for micro_f1, spans that are not in the text, and `entity_f1`, the item's own F1
    (1 with no gold and no predicted entity): not a reported metric, it says which items went wrong."""
    gold = {tuple(e) for e in item.fields["entities"]}
    missing = 0
    if p.reason is not None or p.value is None:  # unparsed: no entity found, every gold one missed
        counts = entity_counts(gold, set())
    else:
        tags, missing = tags_from_spans(item.fields["tokens"], json.loads(p.value))
        counts = entity_counts(gold, entities_from_tags(tags))
    den = 2 * counts["ner_tp"] + counts["ner_fp"] + counts["ner_fn"]
    return {**counts, "spans_not_in_text": float(missing),
            "entity_f1": 2 * counts["ner_tp"] / den if den else 1.0}


def _render(task_ref: list[CustomTask]):
    # Task.render is used by other tools (e.g. win rate) to show an item: the instruction prompt.
    return lambda item: task_ref[0].instruction_prompt.format_map(task_ref[0].values(item))


# ---------------------------------------------------------------------------------------------
# Reading task files


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return slug or "custom_task"


def _column_name(value: Any) -> str | None:
    """A field_spec value that names a column; 'literal:...' and integers do not (as EuroEval)."""
    if isinstance(value, str) and value.strip() and not value.startswith("literal:"):
        return value.strip()
    return None


def _check_placeholders(template: str, key: str, where: str) -> None:
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise TaskFileError(f"{where}: {key}: {exc} (write a literal brace as {{{{ or }}}})") from None
    bad = [n for n in names if n.split(".")[0].split("[")[0].split("!")[0] not in PLACEHOLDERS]
    if bad:
        raise TaskFileError(f"{where}: {key}: unknown placeholder(s) {', '.join('{' + b + '}' for b in bad)}; "
                            f"valid: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")


def _resolve_dataset(value: str, base: Path | None) -> str:
    """A data file named relative to the task file, else as given (cwd / repo root / hub id)."""
    if base is not None and Path(value).suffix.lower() in LOCAL_FORMATS and not Path(value).is_absolute():
        candidate = base / value
        if candidate.is_file():
            return display_path(candidate)
    return value


def _beside(base: Path, split: str) -> str | None:
    """The data file next to an eval.yaml: `<split>.<ext>`, else the only data file there."""
    files = [p for p in sorted(base.iterdir()) if p.suffix.lower() in LOCAL_FORMATS and p.is_file()]
    named = [p for p in files if p.stem == split]
    pick = named[0] if named else (files[0] if len(files) == 1 else None)
    return None if pick is None else _resolve_dataset(pick.name, base)


def task_from_dict(spec: Mapping[str, Any], where: str = "<task>", base: Path | None = None) -> CustomTask:
    """A `CustomTask` from the parsed YAML `spec`; `where` names it in errors, `base` is its folder."""
    if not isinstance(spec, Mapping):
        raise TaskFileError(f"{where}: expected a mapping of keys to values, got {type(spec).__name__}")
    spec = dict(spec)
    inspect_tasks = spec.get("tasks")
    t0: dict[str, Any] = {}
    if inspect_tasks is not None:
        if not isinstance(inspect_tasks, list) or not inspect_tasks or not isinstance(inspect_tasks[0], Mapping):
            raise TaskFileError(f"{where}: key 'tasks' must be a list of task mappings (Inspect AI eval.yaml)")
        t0 = dict(inspect_tasks[0])
    else:
        unknown = sorted(set(spec) - NATIVE_KEYS)
        if unknown:
            raise TaskFileError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; valid keys: "
                                f"{', '.join(sorted(NATIVE_KEYS))}")
    field_spec = t0.get("field_spec") or {}
    solvers = [s.get("name") if isinstance(s, Mapping) else s for s in t0.get("solvers") or []]
    scorers = [s.get("name") if isinstance(s, Mapping) else s for s in t0.get("scorers") or []]

    # kind
    kind_value = spec.get("kind", spec.get("task"))
    if kind_value is not None:
        kind = TASK_ALIASES.get(str(kind_value).strip().lower().replace(" ", "_"))
        if kind is None:
            raise TaskFileError(f"{where}: kind {kind_value!r} is not known; use one of: {', '.join(KINDS)}")
    elif "multiple_choice" in solvers or field_spec.get("choices") or spec.get("choices_column"):
        kind = "multiple_choice"
    elif spec.get("labels"):
        kind = "classification"
    elif any(str(s).startswith("model_graded") for s in scorers):
        kind = "open_qa"
    else:
        raise TaskFileError(f"{where}: cannot tell the kind of task; add `kind:` with one of: {', '.join(KINDS)}")

    # columns: defaults < field_spec < top-level keys
    mapping: dict[str, Any] = dict(DEFAULT_COLUMNS[kind])
    for key, fs_key in (("input_column", "input"), ("target_column", "target"), ("choices_column", "choices")):
        if (name := _column_name(field_spec.get(fs_key))) is not None:
            mapping[key] = name
    for key in ("input_column", "target_column", "choices_column", "context_columns"):
        if spec.get(key) is not None:
            mapping[key] = spec[key]
    if kind != "multiple_choice":
        mapping.pop("choices_column", None)

    # labels and their prompt words
    labels: tuple[str, ...] = ()
    label_mapping: dict[str, str] = {}
    if kind == "token_classification":
        labels, label_mapping = _bio_labels(spec.get("labels"), spec.get("label_mapping",
                                                                          spec.get("prompt_label_mapping", "auto")), where)
    if kind == "classification":
        raw_labels = spec.get("labels")
        if not isinstance(raw_labels, list) or len(raw_labels) < 2 or not all(
                isinstance(x, (str, int)) and str(x).strip() for x in raw_labels):
            raise TaskFileError(f"{where}: key 'labels': a classification task needs a list of at least two "
                                f"labels, got {raw_labels!r}")
        labels = tuple(str(x).strip() for x in raw_labels)
        if len({lab.lower() for lab in labels}) != len(labels):
            raise TaskFileError(f"{where}: key 'labels': duplicate labels in {list(labels)}")
        raw_map = spec.get("label_mapping", spec.get("prompt_label_mapping", "auto"))
        if raw_map not in (None, "auto"):
            if not isinstance(raw_map, Mapping):
                raise TaskFileError(f"{where}: key 'label_mapping' must be a mapping label -> prompt word, or 'auto'")
            by_lower = {lab.lower(): lab for lab in labels}
            for k, v in raw_map.items():
                if str(k).lower() not in by_lower:
                    raise TaskFileError(f"{where}: key 'label_mapping': {k!r} is not in the label list: "
                                        f"{', '.join(map(repr, labels))}")
                label_mapping[by_lower[str(k).lower()]] = str(v)
            words = [label_mapping.get(lab, lab).lower() for lab in labels]
            if len(set(words)) != len(words):
                raise TaskFileError(f"{where}: key 'label_mapping': two labels map to the same word")

    # prompts
    prompt = spec.get("prompt") or {}
    if not isinstance(prompt, Mapping):
        raise TaskFileError(f"{where}: key 'prompt' must be a mapping with prefix, template, instruction, system")
    bad = sorted(set(prompt) - {"prefix", "template", "instruction", "system"})
    if bad:
        raise TaskFileError(f"{where}: key 'prompt': unknown key(s) {bad}; valid: prefix, template, instruction, system")
    d_prefix, d_template, d_instruction = DEFAULT_PROMPTS[kind]
    prefix = prompt.get("prefix", spec.get("prompt_prefix", d_prefix)) or ""
    template = prompt.get("template", spec.get("prompt_template", d_template)) or d_template
    instruction = prompt.get("instruction", spec.get("instruction_prompt", d_instruction)) or d_instruction
    system = prompt.get("system", spec.get("system_prompt"))
    for key, value in (("prompt.prefix", prefix), ("prompt.template", template),
                       ("prompt.instruction", instruction), ("prompt.system", system or "")):
        if not isinstance(value, str):
            raise TaskFileError(f"{where}: {key} must be text")
        _check_placeholders(value, key, where)

    # numbers and metrics
    def number(keys: Sequence[str], default: int, minimum: int) -> int:
        for key in keys:
            if spec.get(key) is not None:
                value = spec[key]
                if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                    raise TaskFileError(f"{where}: key {key!r} must be an integer >= {minimum}, got {value!r}")
                return value
        return default

    num_fewshot = number(("num_fewshot", "num_few_shot_examples"), DEFAULT_FEWSHOT[kind], 0)
    max_tokens = number(("max_tokens", "max_generated_tokens"), DEFAULT_MAX_TOKENS[kind], 1)
    default_metrics, allowed = METRICS[kind]
    metrics = spec.get("metrics") or list(default_metrics)
    if not isinstance(metrics, list) or any(m not in allowed for m in metrics):
        raise TaskFileError(f"{where}: key 'metrics': {metrics!r} not valid for a {kind} task; "
                            f"choose from: {', '.join(allowed)}")
    judge_kind = None
    if kind == "open_qa":
        judge_kind = spec.get("judge_kind") or ("context" if "context_columns" in mapping else "fact_check")
        if judge_kind not in ("fact_check", "context", "refusal"):
            raise TaskFileError(f"{where}: key 'judge_kind' must be fact_check, context or refusal")

    # data
    split = str(spec.get("split") or t0.get("split") or "train")
    dataset = spec.get("dataset")
    if dataset is None and base is not None:
        dataset = _beside(base, split)
    if not isinstance(dataset, str) or not dataset.strip():
        raise TaskFileError(f"{where}: key 'dataset': name a local file (CSV, JSONL, Parquet) or a hub id")
    dataset = _resolve_dataset(dataset.strip(), base)
    name = _slug(str(t0.get("id") or spec.get("name") or (Path(where).stem if where != "<task>" else "custom")))
    if name in T.TASKS:
        raise TaskFileError(f"{where}: key 'name': {name!r} is a built-in EVE task; choose another name")

    scoring = spec.get("scoring", "text")
    if scoring not in SCORING:
        raise TaskFileError(f"{where}: key 'scoring': {scoring!r}; use one of: {', '.join(SCORING)}")
    if scoring != "text" and kind not in ("multiple_choice", "classification"):
        raise TaskFileError(f"{where}: key 'scoring': {scoring!r} needs a multiple_choice or classification "
                            f"task, not {kind}")
    categories = list(dict.fromkeys(label_mapping[t] for t in labels if t in label_mapping)) \
        if kind == "token_classification" else []
    required = {"multiple_choice": ("input", "target", "choices"), "extractive_qa": ("input", "target", "context")}
    prepare, parse, score = {
        "multiple_choice": (_prep_mc, _parse_mc, T.score_codes()),
        "classification": (_prep_classification(labels), _parse_classification(labels, label_mapping),
                           T.score_codes(labels)),
        "token_classification": (_prep_tokens(labels, label_mapping), _parse_tokens(categories), _score_tokens),
        "open_qa": (_prep_text, T._parse_open, T._score_open),
        "text_to_text": (_prep_text, T._parse_open, T._score_open),
        "extractive_qa": (_prep_extractive, T._parse_open, _score_extractive),
    }[kind]
    plots: tuple[T.PlotSpec, ...] = {
        "multiple_choice": (T.PlotSpec("letter_bias", "letter_bias.png"),),
        "classification": (T.PlotSpec("label_confusion", "label_confusion.png"),),
        "text_to_text": (T.PlotSpec("score_distribution", f"{metrics[0]}_distribution.png", metrics[0]),),
        "extractive_qa": (T.PlotSpec("score_distribution", f"{metrics[0]}_distribution.png", metrics[0]),),
        "open_qa": ((T.PlotSpec("score_distribution", "rougeL_distribution.png", "rougeL", without_judges=True),)
                    if "rougeL" in metrics else ()),
        "token_classification": (T.PlotSpec("entity_counts", "entity_counts.png"),),
    }[kind]
    ref: list[CustomTask] = []
    task = CustomTask(
        name=name, hub_id=dataset, description=str(spec.get("description") or f"Custom {kind} task {name}"),
        default_num_fewshot=num_fewshot, default_max_tokens=max_tokens, judge_kind=judge_kind,
        metrics=tuple(metrics), columns=required.get(kind, ("input", "target")),
        optional_columns=("context",), prepare=prepare, render=_render(ref), parse=parse, score=score,
        answer_prefix="", completion_stop=("\n\n",), kind=kind, labels=labels, label_mapping=label_mapping,
        prompt_prefix=prefix, prompt_template=template, instruction_prompt=instruction, system_prompt=system,
        column_mapping=mapping, split=split, plots=plots, config=spec.get("config") or t0.get("config"), task_file=where,
        constant_baselines=kind in ("multiple_choice", "classification"),
        json_schema=_token_schema(categories) if kind == "token_classification" else None, scoring=scoring,
    )
    ref.append(task)
    return task


def load_task(source: str | Path, *, offline: bool = False) -> CustomTask:
    """Read a task file: a local YAML (evekit's or an Inspect AI eval.yaml), or a hub dataset id
    whose repository has an `eval.yaml` (taken from `evekit prepare`'s folder when there)."""
    from evekit.paths import resolve_path

    path = resolve_path(source)
    hub_id = None
    if not path.is_file():
        if Path(str(source)).suffix.lower() in (".yaml", ".yml") or str(source).startswith((".", "/")):
            raise TaskFileError(f"task file {str(source)!r} not found (tried {path})")
        hub_id = str(source)
        path = _hub_eval_yaml(hub_id, offline=offline)
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TaskFileError(f"{display_path(path)}: not valid YAML: {exc}") from None
    if hub_id is not None and isinstance(spec, dict):
        spec.setdefault("dataset", hub_id)
    return task_from_dict(spec, where=display_path(path) if hub_id is None else f"{hub_id}/eval.yaml",
                          base=path.parent if hub_id is None else None)


def _hub_eval_yaml(hub_id: str, *, offline: bool) -> Path:
    from evekit import prepare

    prepared = prepare.prepared_eval_yaml(hub_id)
    if prepared is not None:
        return prepared
    if offline:
        raise TaskFileError(f"{hub_id!r}: no local task file and no prepared eval.yaml for it "
                            f"(run `evekit prepare --dataset {hub_id}` while online)")
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(hub_id, "eval.yaml", repo_type="dataset"))
    except Exception as exc:  # noqa: BLE001 - any hub failure means the same to the user
        raise TaskFileError(f"{hub_id!r} is not a local task file and its eval.yaml cannot be fetched from "
                            f"the Hugging Face Hub: {type(exc).__name__}: {exc}") from None


# Keep DataError importable from here: it is what a bad data file raises.
__all__.append("DataError")
