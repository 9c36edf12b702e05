"""Hallucinated spans: the phrase locator, the reply contract, labels and the per-item scores.

EVE's hallucination task has three levels: binary (is the answer hallucinated?), hard spans (which
characters are) and soft spans (with what probability). Its labels follow SemEval-2025 Task 3,
Mu-SHROOM, and the span levels are scored as that task's official scorer
(Helsinki-NLP/mu-shroom, `participant_kit/scorer.py`) scores them, re-derived here:

- Hard labels are end-exclusive character spans ``[start, end]`` into the answer; an item's
  hard characters are the union of its spans (overlaps count once). ``hard_iou`` is
  |gold ∩ predicted| / |gold ∪ predicted| of those character sets, and 1.0 when both are empty.
- Soft labels are ``{start, end, prob}``. An item's per-character probabilities start at 0 and
  each span, in the order given, writes its `prob` over its characters (a later span overwrites
  an earlier one). ``soft_spearman`` is Spearman's rho between the gold and the predicted
  probabilities of the characters. When either side is constant (one distinct value after
  rounding to 8 decimals: no hallucination marked, or the whole answer marked alike) rho is
  undefined and the scorer's rule applies: 1.0 when both sides are constant, 0.0 when only one is.
- Hard labels derived from soft ones are the characters with prob > 0.5 (`HARD_THRESHOLD`); soft
  labels derived from hard ones give those characters prob 1.0.

The model is asked, through the structured-output chain, for
``{"spans": [{"text": "<phrase copied from the answer>", "confidence": 0..1}]}`` (`reply_schema`;
``confidence`` may be left out at the hard level, where it counts as 1.0; ``{"spans": []}`` says
nothing is hallucinated). `locate` maps the phrases to character offsets: each phrase goes to its
first occurrence in the answer whose characters no earlier phrase took (`locate`'s docstring
says how case, whitespace and Unicode are matched). A phrase that does not occur is kept with no
offsets and counted (``spans_not_in_text``). A predicted character's probability is the highest
confidence of the phrases covering it; its hard label is that probability > 0.5, as the scorer
derives hard labels from soft ones (`predicted_labels`).

Failures follow evekit's rule: a reply that cannot be read is the model's failure, scored as a
miss (`miss_scores`: ``hard_iou`` 0 and ``soft_spearman`` 0 even where the gold has no span,
no true positive, every gold character missed); a call that failed is excluded (NaN scores).
"""
from __future__ import annotations

import html
import json
import re
import unicodedata
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import jsonschema
import numpy as np

from evekit.structured import extract_json

__all__ = [
    "LEVELS",
    "SPAN_LEVELS",
    "HARD_THRESHOLD",
    "asks_confidence",
    "check_level",
    "Located",
    "fold",
    "locate",
    "hard_mask",
    "soft_vector",
    "hard_from_soft",
    "soft_from_hard",
    "predicted_labels",
    "hard_iou",
    "soft_spearman",
    "char_counts",
    "item_scores",
    "miss_scores",
    "reply_schema",
    "normalize_reply",
    "parse_reply",
    "span_messages",
    "spans_html",
    "labels_json",
]

LEVELS = ("binary", "hard_spans", "soft_spans", "all")
SPAN_LEVELS = ("hard_spans", "soft_spans", "all")  # the levels that ask for spans
HARD_THRESHOLD = 0.5  # a probability above this makes a character a hard span (the scorer's rule)
_ROUND = 8  # the scorer tells a constant series by its values rounded to 8 decimals

Hard = Sequence[Sequence[int]]
Soft = Sequence[Mapping[str, Any]]


def check_level(level: str) -> str:
    """`level` if it is one of `LEVELS`, else a ValueError listing them."""
    if level not in LEVELS:
        raise ValueError(f"level={level!r}; use one of: {', '.join(LEVELS)}")
    return level


def asks_confidence(level: str) -> bool:
    """True when the level asks each phrase's confidence (soft spans, and `all`, whose one span
    call serves both span levels)."""
    return check_level(level) in ("soft_spans", "all")


# ---------------------------------------------------------------------------------------------
# The phrase locator

# Quotes a model may wrap a copied phrase in; stripped only when the phrase as given is not found.
_QUOTES = "\"'`“”„‘’‚«»‹›"


def _variation_selector(ch: str) -> bool:
    return "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef"


def _modifier(ch: str) -> bool:
    """A character that changes the one before it: a combining mark, a variation selector, an
    emoji skin-tone modifier. It stays in that character's unit (offsets never split them)."""
    return bool(unicodedata.combining(ch)) or _variation_selector(ch) or "\U0001f3fb" <= ch <= "\U0001f3ff"


def _ignorable(ch: str) -> bool:
    """Characters a copy often drops or adds without changing what the text says: format characters
    (bidi marks, zero-width joiners and spaces, soft hyphens: category Cf) and variation selectors."""
    return unicodedata.category(ch) == "Cf" or _variation_selector(ch)


def fold(text: str) -> tuple[str, list[int], list[int]]:
    """`text` as phrases are matched, with each folded character's origin in `text`.

    The text is cut into units: a character with the modifiers that follow it (`_modifier`:
    combining marks, variation selectors, skin tones). Each unit is NFC-normalised and case-folded
    (str.casefold: "Straße" matches "STRASSE", "é" written as e + U+0301 matches "é"); a run of
    whitespace units becomes one space; ignorable characters (`_ignorable`: bidi marks, zero-width
    joiners, variation selectors) are left out of the folded text. Returns (folded, starts, ends):
    folded character k comes from the unit text[starts[k]:ends[k]], so a match maps back to whole
    units of the original text; an ignorable character between two matched units lies inside the
    span, one before or after it outside.
    """
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        j = i + 1
        while j < n and _modifier(text[j]):
            j += 1
        unit = "".join(c for c in text[i:j] if not _ignorable(c))
        if not unit:
            pass
        elif ch.isspace():
            if out and out[-1] == " ":
                ends[-1] = j
            else:
                out.append(" ")
                starts.append(i)
                ends.append(j)
        else:
            for c in unicodedata.normalize("NFC", unit).casefold():
                out.append(c)
                starts.append(i)
                ends.append(j)
        i = j
    return "".join(out), starts, ends


class Located(NamedTuple):
    """One phrase of a reply: the text as the model wrote it, its end-exclusive character offsets in
    the answer (None when it does not occur there) and its confidence (None when not given)."""

    text: str
    start: int | None
    end: int | None
    confidence: float | None

    @property
    def found(self) -> bool:
        return self.start is not None

    @property
    def prob(self) -> float:
        """The probability it gives its characters: its confidence, 1.0 when none was given
        (the scorer's reading of hard labels as soft ones)."""
        return 1.0 if self.confidence is None else float(self.confidence)


def _occurrences(haystack: str, needle: str) -> list[int]:
    """Every start of `needle` in `haystack`, overlapping ones included."""
    found, pos = [], haystack.find(needle)
    while pos != -1:
        found.append(pos)
        pos = haystack.find(needle, pos + 1)
    return found


def locate(answer: str, spans: Sequence[Mapping[str, Any] | str]) -> list[Located]:
    """The phrases of a reply (dicts with "text" and optional "confidence", or plain strings) mapped
    to character offsets in `answer`, in reply order.

    Matching: both sides are folded alike (`fold`: NFC, casefold, whitespace runs as one space,
    format characters and variation selectors ignored); the phrase's own leading and trailing
    whitespace is dropped, and when the phrase as given does not occur, once more with the quotes
    around it stripped. Offsets always point into `answer` as given (whole characters with their
    combining marks). Which occurrence: the first whose characters no earlier phrase of the reply
    took, so a phrase listed twice marks its first two occurrences ("listed twice" is how the
    prompt asks for a repeated error); when every occurrence overlaps an earlier phrase's
    characters, the first occurrence (it then adds no character of its own). A phrase that does
    not occur keeps start/end None: counted as not in the text, never dropped.
    """
    folded, starts, ends = fold(answer)
    taken = np.zeros(len(answer), dtype=bool)
    out: list[Located] = []
    for span in spans:
        text = span if isinstance(span, str) else str(span.get("text", ""))
        conf = None if isinstance(span, str) else span.get("confidence")
        conf = None if conf is None else float(conf)
        hits: list[tuple[int, int]] = []
        for candidate in (text, text.strip().strip(_QUOTES)):
            needle = fold(candidate)[0].strip(" ")
            if needle:
                hits = [(starts[k], ends[k + len(needle) - 1]) for k in _occurrences(folded, needle)]
            if hits:
                break
        if not hits:
            out.append(Located(text, None, None, conf))
            continue
        start, end = next(((s, e) for s, e in hits if not taken[s:e].any()), hits[0])
        taken[start:end] = True
        out.append(Located(text, start, end, conf))
    return out


# ---------------------------------------------------------------------------------------------
# Labels: character masks and probability vectors


def _bounds(start: Any, end: Any, n: int, what: str) -> tuple[int, int]:
    s, e = int(start), int(end)
    if not 0 <= s <= e <= n:
        raise ValueError(f"{what} span [{s}, {e}] is outside the text (length {n}; offsets are end-exclusive)")
    return s, e


def hard_mask(hard: Hard, n: int, what: str = "hard") -> np.ndarray:
    """The characters (of a text of length `n`) inside any of the `hard` spans."""
    mask = np.zeros(n, dtype=bool)
    for span in hard:
        s, e = _bounds(span[0], span[1], n, what)
        mask[s:e] = True
    return mask


def soft_vector(soft: Soft, n: int, what: str = "soft") -> np.ndarray:
    """Per-character probabilities of `soft` spans: 0 outside them, each span in order writing its
    prob over its characters (a later span overwrites an earlier one, as the scorer reads them)."""
    vec = np.zeros(n, dtype=float)
    for span in soft:
        s, e = _bounds(span["start"], span["end"], n, what)
        vec[s:e] = float(span["prob"])
    return vec


def _runs(mask: np.ndarray) -> list[list[int]]:
    """Maximal runs of True as [start, end] (end exclusive)."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return [[int(s), int(e)] for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def hard_from_soft(soft: Soft) -> list[list[int]]:
    """Hard labels from soft ones: the characters of the spans with prob > 0.5, as maximal runs."""
    keep = [s for s in soft if float(s["prob"]) > HARD_THRESHOLD]
    n = max((int(s["end"]) for s in keep), default=0)
    return _runs(hard_mask([(s["start"], s["end"]) for s in keep], n))


def soft_from_hard(hard: Hard) -> list[dict[str, Any]]:
    """Soft labels from hard ones: each span with prob 1.0."""
    return [{"start": int(s), "end": int(e), "prob": 1.0} for s, e in hard]


def predicted_labels(located: Sequence[Located], answer: str) -> tuple[list[list[int]], list[dict[str, Any]]]:
    """(hard, soft) labels of the located phrases, in the dataset's formats.

    A character's probability is the highest of the phrases covering it (a phrase without a
    confidence gives 1.0); soft labels are the runs of equal non-zero probability
    ({start, end, text, prob}, not overlapping, so any reading order gives the same vector); hard
    labels are the runs with probability > 0.5 — the scorer's rule for hard labels from soft ones.
    """
    n = len(answer)
    prob = np.zeros(n, dtype=float)
    for p in located:
        if p.found:
            prob[p.start:p.end] = np.maximum(prob[p.start:p.end], p.prob)
    soft = []
    if n:
        cuts = np.flatnonzero(np.diff(prob)) + 1
        for s, e in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [n]))):
            if prob[s] > 0:
                soft.append({"start": int(s), "end": int(e), "text": answer[s:e], "prob": float(prob[s])})
    return _runs(prob > HARD_THRESHOLD), soft


# ---------------------------------------------------------------------------------------------
# Per-item scores


def hard_iou(gold: Hard, pred: Hard, n: int) -> float:
    """Mu-SHROOM's IoU of one item: |G ∩ P| / |G ∪ P| of the hard characters; 1.0 when both are empty."""
    g, p = hard_mask(gold, n, "gold"), hard_mask(pred, n, "predicted")
    union = int((g | p).sum())
    return 1.0 if union == 0 else int((g & p).sum()) / union


def _distinct(vec: np.ndarray) -> int:
    return len(np.unique(np.round(vec, _ROUND)))


def soft_spearman(gold: Soft, pred: Soft, n: int) -> float:
    """Mu-SHROOM's correlation of one item: Spearman's rho of the per-character probabilities.

    Either side constant (one distinct value at 8 decimals): 1.0 when both are, else 0.0 (the
    scorer's rule). An empty text (no character to correlate) is NaN.
    """
    g, p = soft_vector(gold, n, "gold"), soft_vector(pred, n, "predicted")
    if n == 0:
        return float("nan")
    kg, kp = _distinct(g), _distinct(p)
    if kg == 1 or kp == 1:
        return float(kg == kp)
    # rho is Pearson's r of the ranks (ties get their average rank)
    from scipy.stats import rankdata  # at use: scipy.stats takes a second to import

    return float(np.corrcoef(rankdata(g), rankdata(p))[0, 1])


def char_counts(gold: Hard, pred: Hard, n: int) -> tuple[int, int, int]:
    """(tp, fp, fn) of one item's hard characters: the counts pooled span precision/recall/F1 read."""
    g, p = hard_mask(gold, n, "gold"), hard_mask(pred, n, "predicted")
    return int((g & p).sum()), int((p & ~g).sum()), int((g & ~p).sum())


def item_scores(gold_hard: Hard, gold_soft: Soft, pred_hard: Hard, pred_soft: Soft, n: int, *,
                soft: bool) -> dict[str, float]:
    """`hard_iou`, `soft_spearman` (when `soft`) and `span_tp`/`span_fp`/`span_fn` of one item."""
    tp, fp, fn = char_counts(gold_hard, pred_hard, n)
    out = {"hard_iou": hard_iou(gold_hard, pred_hard, n)}
    if soft:
        out["soft_spearman"] = soft_spearman(gold_soft, pred_soft, n)
    return {**out, "span_tp": float(tp), "span_fp": float(fp), "span_fn": float(fn)}


def miss_scores(gold_hard: Hard, n: int, *, soft: bool) -> dict[str, float]:
    """The scores of an unreadable reply (the model's failure): a miss with no partial credit.
    hard_iou 0 and soft_spearman 0 (the scorer's value for a mismatch) even where the gold has no
    span (reading the reply as "no span" would have earned 1.0 there); no true positive, every gold
    character a false negative. No false positive: the reply marked no character, and reading it
    as marking all of them would let the length of unreadable answers decide span precision."""
    g = int(hard_mask(gold_hard, n, "gold").sum())
    out = {"hard_iou": 0.0}
    if soft:
        out["soft_spearman"] = 0.0
    return {**out, "span_tp": 0.0, "span_fp": 0.0, "span_fn": float(g)}


# ---------------------------------------------------------------------------------------------
# The reply contract


def reply_schema(level: str, *, request: bool = False) -> dict[str, Any]:
    """The JSON schema of a span reply at `level`.

    `request=True`: the schema sent with the request (json_schema in strict mode wants every
    property required and no other keys, so the hard level's asks for the text only and no bounds
    appear); otherwise the one replies are validated against: `text` a non-empty string,
    `confidence` a number in [0, 1], required at the soft levels, optional at the hard level.
    """
    soft = asks_confidence(level)
    if request:
        props: dict[str, Any] = {"text": {"type": "string"}}
        if soft:
            props["confidence"] = {"type": "number"}
        item = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    else:
        item = {"type": "object",
                "properties": {"text": {"type": "string", "minLength": 1},
                               "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
                "required": ["text", "confidence"] if soft else ["text"]}
    return {"type": "object", "properties": {"spans": {"type": "array", "items": item}},
            "required": ["spans"], "additionalProperties": False}


def normalize_reply(obj: dict[str, Any]) -> dict[str, Any]:
    """Forgive harmless slips before validation: a phrase given as a bare string, a confidence
    written as a numeric string ("0.8") or null (= not given); keys other than text and confidence
    dropped. Anything else is left for the schema to refuse."""
    spans = obj.get("spans")
    if not isinstance(spans, list):
        return obj
    fixed = []
    for s in spans:
        if isinstance(s, str):
            s = {"text": s}
        elif isinstance(s, dict):
            s = {k: v for k, v in s.items() if k in ("text", "confidence")}
            conf = s.get("confidence")
            if conf is None:
                s.pop("confidence", None)
            elif isinstance(conf, str):
                try:
                    s["confidence"] = float(conf.strip())
                except ValueError:
                    pass
        fixed.append(s)
    return {**obj, "spans": fixed}


def parse_reply(text: str | None, level: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(the reply's phrases, None) or (None, why the reply is unusable).

    The JSON object is the whole reply, a ```json fence or the last {...} in it
    (`structured.extract_json`); it is normalised (`normalize_reply`) and validated against
    `reply_schema(level)`. An unusable reply is the model's failure: scored as a miss."""
    obj = extract_json(text)
    if obj is None:
        return None, "no JSON object in the reply" if (text or "").strip() else "empty reply"
    obj = normalize_reply(obj)
    try:
        jsonschema.validate(obj, reply_schema(level))
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        return None, f"reply does not match the span schema: {e.message}" + (f" (at {where})" if where else "")
    return list(obj["spans"]), None


# ---------------------------------------------------------------------------------------------
# The request

_PROMPT_FILE = "hallucination_spans.txt"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_CONFIDENCE_RULE = ("For each phrase give your confidence, a number from 0 to 1, that it is hallucinated; "
                    "list also the phrases you are unsure about, with a low confidence.")
_HARD_FORMAT = '{"spans": [{"text": "<phrase copied from the answer>"}]}'
_SOFT_FORMAT = '{"spans": [{"text": "<phrase copied from the answer>", "confidence": <number from 0 to 1>}]}'


@lru_cache(maxsize=None)
def _template() -> tuple[str, str]:
    text = resources.files("evekit").joinpath("prompts", _PROMPT_FILE).read_text(encoding="utf-8")
    head, sep, user = text.partition("\n[user]\n")
    if not sep or not head.startswith("[system]\n"):
        raise ValueError(f"evekit/prompts/{_PROMPT_FILE}: expected a [system] section then a [user] section")
    return head[len("[system]\n"):].strip(), user.strip()


def span_messages(question: str, answer: str, level: str) -> list[dict[str, str]]:
    """The chat asking for the hallucinated phrases of `answer` at `level` (evekit/prompts/
    hallucination_spans.txt). The answer is shown exactly as given, so a phrase copied from it
    matches; the soft levels ask each phrase's confidence."""
    soft = asks_confidence(level)
    values = {"question": question.strip(), "answer": answer,
              "confidence_rule": _CONFIDENCE_RULE if soft else "",
              "reply_format": _SOFT_FORMAT if soft else _HARD_FORMAT}
    system, user = _template()

    def fill(template: str) -> str:  # one pass: inserted text is never re-expanded
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

    return [{"role": "system", "content": re.sub(r"[ ]+\n", "\n", fill(system))},
            {"role": "user", "content": fill(user)}]


# ---------------------------------------------------------------------------------------------
# The view: an answer with its gold and predicted spans, side by side

_MARK = "rgba(255, 160, 0, {alpha:.2f})"


def _marked(answer: str, hard: Hard, soft: Soft) -> str:
    """`answer` as HTML with its spans marked: shade = probability, underline = hard span. Every
    piece of text is escaped; the only markup is ours."""
    n = len(answer)
    mask, vec = hard_mask(hard, n), soft_vector(soft, n)
    vec = np.where(mask & (vec == 0), 1.0, vec)  # a hard span without a soft label reads as prob 1
    cuts = sorted({0, n, *(int(c) for c in np.flatnonzero(np.diff(mask.astype(np.int8)) | (np.diff(vec) != 0)) + 1)})
    parts = []
    for s, e in zip(cuts, cuts[1:]):
        piece = html.escape(answer[s:e])
        if not mask[s] and vec[s] == 0:
            parts.append(piece)
            continue
        style = f"background-color: {_MARK.format(alpha=0.15 + 0.6 * float(vec[s]))}"
        if mask[s]:
            style += "; text-decoration: underline; text-decoration-thickness: 2px"
        title = f"{'hard span, ' if mask[s] else ''}p = {float(vec[s]):.2f}"
        parts.append(f'<mark style="{style}" title="{html.escape(title)}">{piece}</mark>')
    return "".join(parts)


def spans_html(answer: str, *, gold_hard: Hard, gold_soft: Soft, pred_hard: Hard, pred_soft: Soft,
               not_found: Iterable[str] = (), caption: str | None = None) -> str:
    """One answer twice, gold spans left and predicted spans right, as an HTML table.

    Marks are shaded by probability and underlined where the character is a hard span (hover
    shows the value); `not_found` lists the reply's phrases that do not occur in the answer;
    `caption` heads the table. Every piece of text (answer, phrases, caption) goes through
    html.escape: nothing a dataset or a model wrote is ever markup."""
    cell = 'style="vertical-align: top; white-space: pre-wrap; padding: 4px 8px; width: 50%; text-align: left"'
    missing = [html.escape(str(t)) for t in not_found]
    note = (f'<div style="margin-top: 4px; font-size: 90%">not in the answer: '
            f'{"; ".join(f"<q>{m}</q>" for m in missing)}</div>') if missing else ""
    head = f"<caption style=\"text-align: left\">{html.escape(caption)}</caption>" if caption else ""
    return (f'<table style="border-collapse: collapse; width: 100%">{head}'
            f"<tr><th {cell}>gold</th><th {cell}>predicted</th></tr>"
            f"<tr><td {cell}>{_marked(answer, gold_hard, gold_soft)}</td>"
            f"<td {cell}>{_marked(answer, pred_hard, pred_soft)}{note}</td></tr></table>")


def labels_json(value: Any) -> str:
    """A label list as the JSON samples.csv carries (non-ASCII kept as it is)."""
    return json.dumps(value, ensure_ascii=False)
