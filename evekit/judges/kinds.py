"""The catalogue of judge kinds: each kind is data, the same panel runs them all.

A kind says what its judges are shown (prompt templates and how a case is rendered), what they
must reply (the JSON schema, a parser for prose replies, a normalizer, the reminder sent after an
unusable reply) and how the panel's verdicts become one (its reducer, see `evekit.judges.voting`).

Pointwise kinds judge one answer, verdict 1 = PASS, 0 = FAIL:

- `fact_check` (open_ended): EVE's strict binary fact check against the reference answer
  (fail on any contradiction, fail on a missing essential fact, extra correct information is
  fine, substance over style).
- `context` (open_ended_w_context): the same rules, with the context documents also shown.
- `refusal`: PASS when the model declines / says the context lacks the information.

The pairwise kind (`pairwise`, the win rate) compares two answers: winner "A" (the answer shown
first), "B" or "tie".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from evekit.judges.prompts import answers_shown, read_prompt_file, render_pairwise, render_pointwise
from evekit.judges.verdicts import (REPEATED, all_copied, answers_json, copied_spans, first_json_with, pairwise_flag,
                                    pointwise_flag, screen_pairwise, screen_pointwise, stated_verdict, stated_winner,
                                    unquoted, verdict_value)
from evekit.judges.voting import majority_vote, vote
from evekit.structured import UnusableReply, extract_json

__all__ = ["JudgeKind", "KindName", "KINDS", "POINTWISE_KINDS", "VERDICT_SCHEMA", "PAIRWISE_SCHEMA",
           "JUDGE_REMINDER", "PAIRWISE_REMINDER", "get_kind", "load_prompt", "parse_verdict_text",
           "normalize_verdict", "parse_pairwise_text", "extract_verdict_json", "extract_pairwise_json"]

KindName = Literal["fact_check", "context", "refusal", "pairwise"]
POINTWISE_KINDS: tuple[str, ...] = ("fact_check", "context", "refusal")

# --------------------------------------------------------------------------- pointwise verdicts
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "verdict": {"type": "integer", "enum": [0, 1]},
    },
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}

JUDGE_REMINDER = (
    "Your previous reply could not be used ({reason}). Reply again with only this JSON object: "
    '{{"reasoning": "<one or two sentences>", "verdict": 1}} for PASS or the same with '
    '"verdict": 0 for FAIL, writing your own reasons in place of the text in angle brackets. '
    "The verdict must be the number 0 or 1."
)

_TRAILING_DIGIT = re.compile(r"(?:^|[\s:>(\[\"'*])([01])[\s.)\]\"'*]*$")


def extract_verdict_json(text: str, quoted: Sequence[str] = ()) -> dict[str, Any] | None:
    """The reply's JSON for the JSON methods: the first object with "verdict" the judge states
    itself (`verdicts.first_json_with`; `quoted`: the answers under judgement), else the generic
    extraction (so the schema names what is missing, and the screen what is repeated)."""
    return first_json_with(text, "verdict", quoted) or extract_json(text)


def _nothing_own(text: str, quoted: Sequence[str]) -> None:
    """Raise `UnusableReply` when every word of a prose reply is copied from the answers."""
    if all_copied(text, quoted):
        raise UnusableReply(f"{REPEATED}: every word of it is copied from the answer")


def _only_theirs(text: str, key: str, quoted: Sequence[str]) -> None:
    """Raise `UnusableReply` when the one verdict object in a prose reply is the answer's own JSON."""
    if answers_json(text, key, quoted):
        raise UnusableReply(f"{REPEATED}: its only verdict is the answer's own JSON")


def parse_verdict_text(text: str, quoted: Sequence[str] = ()) -> dict[str, Any] | None:
    """Read a verdict out of a prose reply (the last step of the fallback chain), by the strict
    rule of `evekit.judges.verdicts`: the verdict stated first and explicitly, quoted or tagged
    material and material copied from the answers under judgement (`quoted`) ignored.

    In order: the first JSON object with "verdict" outside quotations; a verdict the reply opens
    with ("FAIL. ..."); the first labelled verdict ("verdict: 1", "Verdict: PASS"); upper-case
    PASS or FAIL words when they all agree; a lone 0 or 1 at the very end. A label with an unusable
    value ("verdict: maybe", "verdict: 2") and nothing else is returned as is, so that the schema
    check names it. PASS and FAIL both stated, neither first: `UnusableReply` (an abstention with
    that reason); so is a reply every word of which is copied from the answer. None when there is
    no verdict at all.
    """
    obj = first_json_with(text, "verdict", quoted)
    if obj is not None and "verdict" in obj:
        return obj
    _nothing_own(text, quoted)
    reasoning = text.strip()
    verdict, why = stated_verdict(text, quoted)
    if why:
        raise UnusableReply(why)
    if verdict in (0, 1):
        return {"reasoning": reasoning, "verdict": verdict}
    own = unquoted(text).rstrip()
    m = _TRAILING_DIGIT.search(own)
    if m and not any(a <= m.start(1) < b for a, b in copied_spans(text, quoted)):
        return {"reasoning": reasoning, "verdict": int(m.group(1))}
    if verdict is not None:
        return {"reasoning": reasoning, "verdict": verdict}
    _only_theirs(text, "verdict", quoted)
    return None


def normalize_verdict(obj: dict[str, Any]) -> dict[str, Any]:
    """Fill a missing reasoning and map "PASS"/"FAIL"/"1"/true verdicts to 1/0 before validation."""
    obj.setdefault("reasoning", "")
    if obj["reasoning"] is None:
        obj["reasoning"] = ""
    if "verdict" in obj:
        obj["verdict"] = verdict_value(obj["verdict"])
    return obj


# --------------------------------------------------------------------------- pairwise verdicts
PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    # rationale first: with grammar-constrained decoding the judge reasons before it decides.
    "properties": {
        "rationale": {"type": "string"},
        "winner": {"type": "string", "enum": ["A", "B", "tie"]},
    },
    "required": ["rationale", "winner"],
    "additionalProperties": False,
}
PAIRWISE_REMINDER = (
    "Your previous reply could not be used ({reason}). Reply again with only this JSON object: "
    '{{"rationale": "<one or two sentences>", "winner": "A"}}, where "winner" is "A", "B" or "tie", '
    "writing your own reasons in place of the text in angle brackets."
)


def extract_pairwise_json(text: str, quoted: Sequence[str] = ()) -> dict[str, Any] | None:
    """The first JSON object with "winner" the judge states itself, else the generic extraction."""
    return first_json_with(text, "winner", quoted) or extract_json(text)


def parse_pairwise_text(text: str, quoted: Sequence[str] = ()) -> dict[str, Any] | None:
    """A verdict from a prose reply (last step of ask_json's chain), by the strict rule: the first
    JSON object with "winner" outside quotations, else the first labelled ("winner: A") or
    bracketed ("[[A]]") winner outside quotations; material copied from the answers (`quoted`)
    ignored, and a reply made only of it is `UnusableReply`."""
    obj = first_json_with(text, "winner", quoted)
    if obj is not None and "winner" in obj:
        return obj
    _nothing_own(text, quoted)
    winner, why = stated_winner(text, quoted)
    if why:
        raise UnusableReply(why)
    if winner:
        return {"rationale": text.strip(), "winner": winner}
    _only_theirs(text, "winner", quoted)
    return None


# --------------------------------------------------------------------------- the catalogue
@dataclass(frozen=True)
class JudgeKind:
    """One kind of judge, as data: what it is shown, what it must reply, how its votes combine.

    `render(case, index)` gives the chat for one case; `schema` (named `schema_name` in the
    request) is what the reply must match, `text_parser` reads prose replies, `normalize` (may be
    None) fixes a parsed reply up before validation, `reminder` follows an unusable reply;
    `verdict_key` / `reasoning_key` name the verdict and its justification in the reply; `reduce`
    combines the verdicts cast for one sample; `binary`: verdicts 0/1 (pass rates, averages)
    rather than labels; `desc` labels progress bars. `extract` reads the JSON of a JSON-mode reply
    and `screen(parsed, reply, quoted)` names why a valid reply is still no verdict (the verdict
    rules of `evekit.judges.verdicts`: a copied template, a repetition of the answer); `flag(parsed,
    reply, quoted)` notes a valid verdict whose justification states the other side (counted, the
    verdict stands). `shown(chat)` gives the answers under judgement in a rendered chat (`quoted`:
    what a reply may repeat but never states as its own); the parsers, `extract` and `screen` take
    them as their `quoted` argument.
    """

    name: str
    templates: tuple[str, ...]
    render: Callable[[Any, int], list[dict[str, str]]]
    schema: dict[str, Any]
    text_parser: Callable[..., dict[str, Any] | None]
    normalize: Callable[[dict[str, Any]], dict[str, Any]] | None
    reminder: str
    verdict_key: str
    reasoning_key: str
    reduce: Callable[[Sequence[Any]], Any]
    binary: bool
    schema_name: str = "verdict"
    desc: str = "judge"
    extract: Callable[..., dict[str, Any] | None] | None = None
    screen: Callable[..., str | None] | None = None
    flag: Callable[..., str | None] | None = None
    shown: Callable[[Sequence[dict[str, str]]], list[str]] = answers_shown

    def request_schema(self, reasoning_max_chars: int | None = None) -> dict[str, Any]:
        """The schema a request sends: `schema`, with the justification bounded to
        `reasoning_max_chars` characters when that is set (a judge entry's `reasoning_max_chars`)."""
        if reasoning_max_chars is None:
            return self.schema
        properties = dict(self.schema["properties"])
        properties[self.reasoning_key] = {**properties[self.reasoning_key], "maxLength": reasoning_max_chars}
        return {**self.schema, "properties": properties}

    def value(self, parsed: dict[str, Any]) -> Any:
        """The verdict of a validated reply: 1.0 / 0.0 for binary kinds, else the label."""
        v = parsed[self.verdict_key]
        return float(v) if self.binary else v


def _pointwise(name: str) -> JudgeKind:
    return JudgeKind(
        name=name, templates=(f"judge_{name}.txt",),
        render=lambda case, index=0: render_pointwise(name, case, index),
        schema=VERDICT_SCHEMA, text_parser=parse_verdict_text, normalize=normalize_verdict,
        reminder=JUDGE_REMINDER, verdict_key="verdict", reasoning_key="reasoning", reduce=vote, binary=True,
        extract=extract_verdict_json, screen=screen_pointwise, flag=pointwise_flag,
    )


KINDS: dict[str, JudgeKind] = {
    **{name: _pointwise(name) for name in POINTWISE_KINDS},
    "pairwise": JudgeKind(
        name="pairwise", templates=("pairwise.txt", "pairwise_context.txt"), render=render_pairwise,
        schema=PAIRWISE_SCHEMA, text_parser=parse_pairwise_text, normalize=None, reminder=PAIRWISE_REMINDER,
        verdict_key="winner", reasoning_key="rationale", reduce=majority_vote, binary=False,
        schema_name="pairwise_verdict", desc="pairwise judge",
        extract=extract_pairwise_json, screen=screen_pairwise, flag=pairwise_flag,
    ),
}


def get_kind(kind: str | JudgeKind) -> JudgeKind:
    """The catalogue entry of `kind` (a name or a JudgeKind)."""
    if isinstance(kind, JudgeKind):
        return kind
    if kind not in KINDS:
        raise ValueError(f"unknown judge kind {kind!r}; expected one of {tuple(KINDS)}")
    return KINDS[kind]


def load_prompt(kind: str) -> tuple[str, str]:
    """(system, user) template of a kind (its first template: without context for pairwise)."""
    return read_prompt_file(get_kind(kind).templates[0])
