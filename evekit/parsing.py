"""Turning a model's free text into an answer.

Models answer multiple-choice questions in many shapes ("B", "**B**", "B) 10 m", "Answer: B",
a paragraph of reasoning ending in "so the answer is B"). The parser accepts those shapes and
refuses to guess: a stray capital in prose (the "I" of "I think", the article "A") is not an
answer. When nothing usable is found the sample is the model's failure: it is scored wrong and
flagged `unparsed` with the reason, never silently dropped. Letters are read after Unicode
normalisation (`normalize_text`): a fullwidth "Ｂ" or a "B" wrapped in zero-width or bidi
control characters is the letter B.
"""
from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple, Sequence

__all__ = [
    "ParseResult",
    "normalize_text",
    "strip_think",
    "parse_letters",
    "parse_hallucination",
    "format_labels",
]


class ParseResult(NamedTuple):
    """What was read from a response.

    `labels` are the letters read (upper case, in choice order, letters outside the choices
    last) or None when nothing was found. `reason` is None when the answer is usable; otherwise
    it says why not ("no answer letter found", "letter F not among choices A-D", "several
    letters: A, C"). `labels` may be set together with a reason: a letter outside the choices
    still counts as a (wrong) pick when scoring IoU.
    """

    labels: list[str] | None
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.reason is None


# ---------------------------------------------------------------------------------------------
# Unicode

def normalize_text(text: str) -> str:
    """`text` in Unicode NFKC with its format characters (category Cf: zero-width spaces and
    joiners, bidi embeddings, overrides and isolates, the BOM, soft hyphens) and its control
    characters other than tab and line breaks (category Cc: NUL, escape sequences' ESC) removed.

    NFKC folds compatibility forms into the plain ones (fullwidth "Ｂ" -> "B", "：" -> ":");
    format characters are invisible, so a reader should never see a letter they hide or split.
    Look-alikes from other scripts (Cyrillic "В") stay what they are: they are other letters.
    """
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf" and (ch in _KEPT_CONTROLS or
                                                                            unicodedata.category(ch) != "Cc"))


_KEPT_CONTROLS = frozenset("\t\n\r")  # line structure; every other control character (NUL, ESC, ...) is invisible


# ---------------------------------------------------------------------------------------------
# <think> blocks

_THINK_BLOCK = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"^\s*<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)


def strip_think(text: str | None) -> tuple[str, str | None]:
    """Split a response into (answer, reasoning): the one place `<think>` blocks are removed.

    Reasoning models wrap their chain of thought in `<think>...</think>`; only what follows is
    the answer. Handles several blocks, a closing tag without an opening one (some chat
    templates put `<think>` in the prompt) and an unclosed leading `<think>` (the model ran out
    of tokens while thinking: the answer is then empty). `reasoning` is None when there was none.

    The client (evekit.client) calls it on every response, so `GenerationResult.text` is already
    the answer and the parsers below take it as it is. Call it yourself only for texts that did
    not come through the client (e.g. a CSV of raw responses). It repeats until nothing is left
    to remove, so applying it again never changes an answer (`strip_think(a)[0] == a`).
    """
    if not text:
        return "", None
    reasoning: list[str] = []
    while True:
        before = text
        # A closing tag with no opening tag before it: everything up to it is reasoning.
        close = _THINK_CLOSE.search(text)
        if close and not re.search(r"<think(?:ing)?>", text[: close.start()], re.IGNORECASE):
            reasoning.append(text[: close.start()])
            text = text[close.end():]
        for m in _THINK_BLOCK.finditer(text):
            reasoning.append(m.group(1))
        text = _THINK_BLOCK.sub("", text)
        m = _THINK_OPEN.match(text)
        if m:  # unclosed: the rest is unfinished reasoning
            reasoning.append(text[m.end():])
            text = ""
        if text == before:
            break
    parts = [r.strip() for r in reasoning if r.strip()]
    return text.strip(), ("\n\n".join(parts) if parts else None)


# ---------------------------------------------------------------------------------------------
# Letters

# One option letter, optionally in brackets, not glued to other letters or digits ("I'm" is no "I").
_TOK = r"[(\[]?[ \t]*(?<![A-Za-z0-9])[A-Za-z](?![A-Za-z0-9'’])[ \t]*[)\]]?"
# Separators stay on one line: "A\nB is wrong" is not the list "A, B".
_SEP = r"(?:[ \t]*[,;/&+][ \t]*(?:and[ \t]+|or[ \t]+)?|[ \t]+(?:and|or)[ \t]+|[ \t]+)"
_LIST = rf"{_TOK}(?:{_SEP}{_TOK})*"
# What may follow a letter in an answer statement: end, punctuation, or a word that cannot
# continue an article ("the answer is A satellite" is prose, "the answer is B because" is not).
_AFTER = (
    r"(?=\s*(?:$|[^\w\s]|\n|\b(?:because|since|as|which|is|are|was|were|for|with|from|in|"
    r"given|due|that|option|options|choice|choices)\b))"
)
_LEADER = r"(?:options?|choices?|letters?)\s*:?\s*"
_STATEMENTS = [
    # "Answer: C", "the answer is (B)", "the answers are A and C", "final answer = B"
    re.compile(
        rf"\banswers?\s*(?:(?:is|are|would\s+be|should\s+be|will\s+be)\s*[:=\-–—]?|[:=\-–—])\s*"
        rf"(?:{_LEADER})?({_LIST}){_AFTER}",
        re.IGNORECASE,
    ),
    # "the correct option is B", "best choices are A, C"
    re.compile(
        rf"\b(?:correct|right|best|final)\s+(?:options?|choices?|letters?)\s*(?:is|are|[:=\-–—])\s*({_LIST}){_AFTER}",
        re.IGNORECASE,
    ),
    # "I choose B", "I would select options A and C"
    re.compile(rf"\b(?:choose|select|pick)\s+(?:{_LEADER})?({_LIST}){_AFTER}", re.IGNORECASE),
    # "Option B is correct", "A and C are correct", "B is the right answer", "B is the answer"
    re.compile(
        rf"(?:\b(?:options?|choices?)\s+)?({_LIST})\s+(?:is|are)\s+(?:the\s+)?"
        rf"(?:correct|right|best|(?:final\s+)?answers?\b)\b",
        re.IGNORECASE,
    ),
]
# A whole text (or line) that is only letters: "B", "B.", "A, C", "A and C", "(A)", "Options: A, C"
_ONLY = re.compile(rf"^\s*(?:{_LEADER})?({_LIST})\s*[.!]?\s*$", re.IGNORECASE)
# A line that starts with a labelled choice: "B) 10 m", "B. 10 m", "(B) 10 m", "B: 10 m"
_LEADING = re.compile(r"^\s*\(?([A-Za-z])\s*[).:]\s*\S")
# Bold letters anywhere, e.g. "I pick **B** because" (looked at before markdown is removed)
_BOLD = re.compile(r"\*\*\s*[(\[]?([A-Za-z])[)\]]?\s*\*\*")
_MARKDOWN = re.compile(r"[*_`#>]+")


# Letters followed by something that is not a letter: "A, B12", "C, ICEYE" (no answer is read from it).
_MIXED = re.compile(r"^\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*,\s*([^,\s][^\n]*?)\s*$")


def format_labels(labels: Sequence[str]) -> str:
    """"A-D" for a run of consecutive letters from A, else "A, C, F"."""
    labels = list(labels)
    run = [chr(ord("A") + i) for i in range(len(labels))]
    if len(labels) > 2 and labels == run:
        return f"{labels[0]}-{labels[-1]}"
    return ", ".join(labels)


def _letters(fragment: str) -> list[str]:
    found = re.findall(r"(?<![A-Za-z0-9])([A-Za-z])(?![A-Za-z0-9'’])", fragment)
    out: list[str] = []
    for letter in found:
        up = letter.upper()
        if up not in out:
            out.append(up)
    return out


def _find(text: str, multiple: bool) -> list[str] | None:
    """The letters the response commits to, or None. Order of attempts: strongest first."""
    bold = _BOLD.findall(text)
    clean = _MARKDOWN.sub("", text).strip()
    if not clean:
        return None
    m = _ONLY.match(clean)
    if m:
        return _letters(m.group(1))
    # The last answer statement wins: reasoning first, conclusion last.
    best: tuple[int, str] | None = None
    for pattern in _STATEMENTS:
        for m in pattern.finditer(clean):
            if best is None or m.start(1) > best[0]:
                best = (m.start(1), m.group(1))
    if best:
        return _letters(best[1])
    lines = [ln.strip() for ln in clean.splitlines() if ln.strip()]
    m = _ONLY.match(lines[0])
    if m:
        return _letters(m.group(1))
    if multiple:
        picked = [m.group(1) for ln in lines if (m := _LEADING.match(ln))]
        if picked:
            return _letters(" ".join(picked))
    else:
        m = _LEADING.match(lines[0])
        if m:
            return _letters(m.group(1))
    m = _ONLY.match(lines[-1])
    if m:
        return _letters(m.group(1))
    if bold:
        return [bold[-1].upper()]
    return None


def parse_letters(text: str | None, valid_labels: Sequence[str], multiple: bool) -> ParseResult:
    """Read the option letter(s) a response commits to.

    `valid_labels` are the item's choice labels (e.g. A-D, or A-G). `multiple` allows several
    letters (mcqa_multiple_answer); for single-answer questions several different letters make
    the answer unusable. Letters outside the choices are returned but flagged. `text` is the
    answer (`GenerationResult.text`, `<think>` already removed by the client; see strip_think),
    read after `normalize_text`.
    """
    answer = normalize_text(text or "").strip()
    valid = [str(v).strip().upper() for v in valid_labels]
    if not answer:
        return ParseResult(None, "empty response")
    found = _find(answer, multiple)
    if not found:
        mixed = _MIXED.match(answer)
        if mixed:  # e.g. "C, ICEYE": a letter, then a choice's text; which one is meant is unclear
            return ParseResult(None, f"letters mixed with other text ({mixed.group(1).strip()!r}); "
                                     "expected letters only")
        return ParseResult(None, "no answer letter found")
    order = {label: i for i, label in enumerate(valid)}
    found.sort(key=lambda x: (order.get(x, len(order)), x))
    bad = [x for x in found if x not in order]
    if bad:
        what = "letter" if len(bad) == 1 else "letters"
        return ParseResult(found, f"{what} {', '.join(bad)} not among choices {format_labels(valid)}")
    if not multiple and len(found) > 1:
        return ParseResult(found, f"several letters: {', '.join(found)}")
    return ParseResult(found, None)


# ---------------------------------------------------------------------------------------------
# Hallucination verdicts

# (pattern, label): A = contains hallucinated information, B = does not. Negations come first
# in the text and so win over the positive word they contain ("not hallucinated").
_VERDICTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:does\s+not|doesn't|do\s+not|no|not|free\s+of|without)\s+(?:contain\s+|include\s+|have\s+)?"
                r"(?:any\s+)?(?:hallucinat\w*|false|fabricated|unsupported|incorrect)", re.I), "B"),
    (re.compile(r"\bnot\s+(?:correct|accurate|true|supported|factual|right)\b", re.I), "A"),
    (re.compile(r"\byes\b", re.I), "A"),
    (re.compile(r"\bno\b", re.I), "B"),
    (re.compile(r"\b(?:hallucinat\w*|false|fabricated|unsupported|incorrect|inaccurate|wrong)\b", re.I), "A"),
    (re.compile(r"\b(?:true|correct|accurate|supported|factual)\b", re.I), "B"),
]


def parse_hallucination(text: str | None) -> ParseResult:
    """Read a hallucination verdict: "A" (hallucinated) or "B" (not).

    Accepts the option letters first; failing that, a verdict in words: "yes" (the answer
    contains hallucinated information) / "no", and judgements of the checked answer such as
    "false", "incorrect", "hallucinated" (-> A) or "true", "accurate", "not hallucinated"
    (-> B). The earliest verdict word in the response wins.
    """
    letters = parse_letters(text, ["A", "B"], multiple=False)
    if letters.ok or letters.labels or letters.reason == "empty response":
        return letters
    answer = normalize_text(text or "").strip()
    best: tuple[int, int, str] | None = None
    for pattern, label in _VERDICTS:
        m = pattern.search(answer)
        if m and (best is None or (m.start(), -len(m.group(0))) < (best[0], best[1])):
            best = (m.start(), -len(m.group(0)), label)
    if best is None:
        return ParseResult(None, "no verdict found (expected A/B or yes/no)")
    return ParseResult([best[2]], None)
