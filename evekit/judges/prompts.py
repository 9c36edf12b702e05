"""What a judge is shown: the cases, the prompt templates of `evekit/prompts/` and their rendering.

Every template has a `[system]` and a `[user]` section with `{{placeholders}}`. User-provided text
(questions, answers, references, documents) is inserted in one pass and its delimiter tags are
neutralised, so an answer cannot close its own block and pose as instructions to the judge.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

__all__ = ["JudgeCase", "PairCase", "read_prompt_file", "neutralise", "render_pointwise", "render_pairwise",
           "answers_shown"]

# Delimiter tags of the judge prompts; occurrences inside user-provided text are neutralised.
# ("answer" also covers the pairwise templates' <answer_a> and <answer_b>.)
_TAGS = ("question", "reference", "answer", "documents", "document", "context")
_TAG_RE = re.compile(r"<(\s*/?\s*)(" + "|".join(_TAGS) + r")", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
# The block of an answer under judgement in a rendered prompt (pointwise <answer>, pairwise
# <answer_a> / <answer_b>); the answer's own tags are neutralised, so its block ends at the first
# closing tag.
_ANSWER_BLOCK = re.compile(r"<(answer(?:_a|_b)?)>\n(.*?)\n</\1>", re.DOTALL)


@dataclass
class JudgeCase:
    """What a pointwise judge sees for one sample: the model's answer plus reference and/or context."""

    question: str
    answer: str
    reference: str | None = None
    context: list[str] | None = None


@dataclass
class PairCase:
    """What the pairwise judge sees for one decision: `first` is shown as answer A, `second` as B."""

    question: str
    reference: str
    first: str
    second: str
    context: Sequence[str] = ()


@lru_cache(maxsize=None)
def read_prompt_file(fname: str) -> tuple[str, str]:
    """(system, user) sections of a template file in `evekit/prompts/` (`[system]` then `[user]`)."""
    text = resources.files("evekit").joinpath("prompts", fname).read_text(encoding="utf-8")
    m = re.fullmatch(r"\s*\[system\]\n(.*?)\n\[user\]\n(.*)", text, re.DOTALL)
    if not m:
        raise ValueError(f"evekit/prompts/{fname}: expected a [system] section then a [user] section")
    return m.group(1).strip(), m.group(2).strip()


def neutralise(text: str) -> str:
    """Make delimiter tags inside user-provided text inert ("</answer>" -> "&lt;/answer>").

    So that an answer cannot close its own block and pose as instructions to the judge.
    """
    return _TAG_RE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def _fill(template: str, values: Mapping[str, str], where: str) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise ValueError(f"{where}: unknown placeholder {{{{{m.group(1)}}}}}")
        return values[m.group(1)]
    return _PLACEHOLDER.sub(sub, template)  # one pass: inserted text is never re-expanded


def render_pointwise(kind: str, case: JudgeCase, index: int = 0) -> list[dict[str, str]]:
    """The chat of a fact_check / context / refusal judge for one case; `index` only serves errors."""
    fname = f"judge_{kind}.txt"
    system, user = read_prompt_file(fname)
    where = f"judge case {index} ({kind})"
    if not isinstance(case.answer, str):
        raise ValueError(f"{where}: field 'answer' must be a string, got {type(case.answer).__name__}")
    if not (case.question or "").strip():
        raise ValueError(f"{where}: field 'question' is empty")
    if kind in ("fact_check", "context") and not (case.reference or "").strip():
        raise ValueError(f"{where}: field 'reference' is empty; the {kind} judge needs the reference answer")
    docs = [d for d in (case.context or []) if d and str(d).strip()]
    if kind in ("context", "refusal") and not docs:
        raise ValueError(f"{where}: field 'context' is empty; the {kind} judge needs the context documents")
    documents = "\n".join(f'<document index="{k}">\n{neutralise(str(d).strip())}\n</document>'
                          for k, d in enumerate(docs, 1))
    values = {
        "question": neutralise(case.question.strip()),
        "answer": neutralise(case.answer.strip()),
        "reference": neutralise((case.reference or "").strip()),
        "documents": documents,
    }
    return [{"role": "system", "content": system},
            {"role": "user", "content": _fill(user, values, f"evekit/prompts/{fname}")}]


def render_pairwise(case: PairCase, index: int = 0) -> list[dict[str, str]]:
    """The pairwise judge's chat for one decision (`index` only serves error messages).

    With context (the documents of open_ended_w_context or refusal) the judge sees them too and
    judges grounding in them.
    """
    fname = "pairwise_context.txt" if case.context else "pairwise.txt"
    system, user = read_prompt_file(fname)
    values = {"question": case.question, "reference": case.reference, "answer_a": case.first,
              "answer_b": case.second,
              "documents": "\n\n".join(f"Document {i}:\n{d}" for i, d in enumerate(case.context, 1))}
    values = {k: neutralise(str(v).strip()) for k, v in values.items()}
    return [{"role": "system", "content": system},
            {"role": "user", "content": _fill(user, values, f"pairwise judge case {index} (evekit/prompts/{fname})")}]


def answers_shown(messages: Sequence[Mapping[str, str]]) -> list[str]:
    """The answers under judgement in a rendered judge chat, as the judge saw them (the text of
    its <answer>, <answer_a> and <answer_b> blocks): what a reply may quote or repeat but never
    states as the judge's own (`evekit.judges.verdicts`). A chat that is not a rendered judge
    prompt has none."""
    return [m.group(2) for msg in messages if msg.get("role") == "user"
            for m in _ANSWER_BLOCK.finditer(msg.get("content") or "")]
