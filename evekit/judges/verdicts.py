"""Verdict rules: how a judge's reply becomes a verdict, or an abstention with its reason.

The one home of the rules every judge kind's parsing follows (issues 14 and 24). Nothing the
answer under test says may move its verdict or its denominator:

- **The structured field decides.** A reply that gives its verdict in the requested field
  (`"verdict": 0 | 1`, `"winner": "A" | "B" | "tie"`) has that verdict. What its rationale says
  never turns it into an abstention: a rationale that quotes the answer ("it only asks for a PASS
  verdict") or states the other side is *flagged* (`pointwise_flag`, `pairwise_flag`: counted and
  shown per judge), never discarded, so an answer cannot make an honest judge abstain by being quoted.
- **Prose is read by the strict rule.** A reply without the field (the plain-text end of the
  structured-output chain) is read by the verdict it states first and explicitly; quoted or tagged
  material is ignored, and so is text copied from the answer under test (`copied_spans`: a run
  of three or more words of the answer), because the answer may hold a fake verdict
  (`{"verdict": 1}`, "output PASS", "verdict: 1") that an honest judge repeats while rejecting it.
  A reply stating conflicting verdicts, none first, abstains.

A reply is not a verdict, and the judge abstains with the reason, when

- its rationale is the template's placeholder (`<one or two sentences>`): the judge copied the
  format instead of judging;
- it repeats the answer under test (`repeated_reason`): its JSON is one of the answer's own JSON
  objects (or has the rationale of one), or every word of it is copied from the answer (a
  rationale that is the answer's prose beside the judge's own verdict is flagged: `copied_note`);
- it is prose stating conflicting verdicts and none of them first and explicitly.

Texts are compared after Unicode normalisation (`evekit.parsing.normalize_text`), so a look-alike
copy (fullwidth, zero-width characters) is still a copy. `UnusableReply` carries the reason;
`evekit.structured.ask_json` turns it into an unusable reply (one reminder, then an abstention),
never into a PASS, a FAIL or a tie.
"""
from __future__ import annotations

import html
import json
import re
from functools import lru_cache
from typing import Any, Callable, Sequence

from evekit.parsing import normalize_text
from evekit.structured import UnusableReply, json_spans

__all__ = ["UnusableReply", "quoted_spans", "copied_spans", "all_copied", "unquoted", "first_json_with",
           "placeholder_reason", "repeated_reason", "answers_json", "copied_note", "verdict_value", "stated_verdict", "stated_winner",
           "claimed_side", "screen_pointwise", "screen_pairwise", "pointwise_flag",
           "pairwise_flag", "abstention_reason", "abstention_reasons", "reasons_text", "REPEATED",
           "COPY_MIN_WORDS"]

# ------------------------------------------------------------------------- quoted material
# A region of a reply that quotes something rather than states the judge's own view: a tagged
# block (<answer>...</answer>, the prompt's delimiters or any other tag), a quotation in double
# or typographic quotes, inline code, or a line starting with ">" (a Markdown quotation).
_TAG_BLOCK = re.compile(r"<\s*([A-Za-z_][\w-]*)[^<>]*>.*?<\s*/\s*\1\s*>", re.DOTALL)
# (a double-quoted single token, as in `"verdict": "1"`, is a key or value, not a quotation)
_QUOTES = re.compile(r"\"[^\"\n]*\s[^\"\n]*\"|“[^”]*”|«[^»]*»|`[^`\n]*\s[^`\n]*`")
_QUOTE_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the quoted or tagged regions of `text` (JSON objects themselves are not
    quotations: their own double quotes are masked before quotations are looked for)."""
    masked = list(text)
    for start, end, _ in json_spans(text):
        masked[start:end] = "#" * (end - start)
    flat = "".join(masked)
    spans = [m.span() for pattern in (_TAG_BLOCK, _QUOTE_LINE) for m in pattern.finditer(text)]
    spans += [m.span() for m in _QUOTES.finditer(flat)]
    return sorted(spans)


# ------------------------------------------------------------------------- copied material
# Words and punctuation marks, the units copies are found in. A copy is a run of at least
# COPY_MIN_WORDS of them that also occurs, in that order, in a text under judgement: "verdict: 1"
# is three ("verdict", ":", "1"), so a copied fake verdict is found, while two shared words
# ("the answer") are the language both use, not a copy.
_WORDS = re.compile(r"\w+|[^\w\s]")
_SIGNIFICANT = re.compile(r"\w")
COPY_MIN_WORDS = 3


@lru_cache(maxsize=1024)  # one reply and its answers are read several times (extract, screen, flag)
def _words(text: str) -> tuple[tuple[str, int, int], ...]:
    """(normalised word, start, end) of `text`, start and end in `text` itself. Each character is
    normalised on its own (`normalize_text`), so a format character inside a word ("PA\u200bSS")
    neither splits nor hides it and a fullwidth word is its plain self."""
    if text.isascii():  # nothing to normalise: positions are the text's own
        return tuple((m.group(), m.start(), m.end()) for m in _WORDS.finditer(text))
    flat, origin = [], []
    for i, ch in enumerate(text):
        for c in (ch if ch.isascii() else normalize_text(ch)):
            flat.append(c)
            origin.append(i)
    norm = "".join(flat)
    return tuple((m.group(), origin[m.start()], origin[m.end() - 1] + 1) for m in _WORDS.finditer(norm))


@lru_cache(maxsize=256)
def _grams(texts: tuple[str, ...], n: int = COPY_MIN_WORDS) -> frozenset[tuple[str, ...]]:
    grams: set[tuple[str, ...]] = set()
    for t in texts:
        words = [w for w, _, _ in _words(t)]
        grams.update(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    return frozenset(grams)


def _comparable(texts: Sequence[str]) -> list[str]:
    """The texts under judgement as a judge may have copied them: as shown (the prompt's tags
    neutralised, "&lt;answer>") and with those entities read back."""
    out: list[str] = []
    for t in texts:
        if t and t.strip():
            out += [t] + ([html.unescape(t)] if html.unescape(t) != t else [])
    return out


def copied_spans(text: str, quoted: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of the runs of `text` copied from any of the `quoted` texts (the answers under
    judgement): maximal runs covered by COPY_MIN_WORDS consecutive words that occur in one of them,
    compared after Unicode normalisation."""
    texts = _comparable(quoted)
    if not texts or not text:
        return []
    grams, words, n = _grams(tuple(texts)), _words(text), COPY_MIN_WORDS
    covered = [False] * len(words)
    for i in range(len(words) - n + 1):
        if tuple(w for w, _, _ in words[i:i + n]) in grams:
            covered[i:i + n] = [True] * n
    spans: list[tuple[int, int]] = []
    for k, (_, start, end) in enumerate(words):
        if not covered[k]:
            continue
        if spans and covered[k - 1]:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def unquoted(text: str) -> str:
    """`text` with its quoted and tagged regions blanked out (same length, so positions hold)."""
    return _blank(text, quoted_spans(text))


def all_copied(text: str, quoted: Sequence[str]) -> bool:
    """Whether `text` has words and every one of them is copied from the answers (`quoted`)."""
    return bool(_SIGNIFICANT.search(text or "")) and not _SIGNIFICANT.search(_blank(text, copied_spans(text, quoted)))


def _answer_objects(quoted: Sequence[str]) -> list[dict[str, Any]]:
    return [obj for t in _comparable(quoted) for _, _, obj in json_spans(normalize_text(t))]


def _same_object(obj: dict[str, Any], objects: list[dict[str, Any]]) -> bool:
    norm = json.loads(normalize_text(json.dumps(obj, ensure_ascii=False)))
    return any(norm == o for o in objects)


def first_json_with(text: str | None, key: str, quoted: Sequence[str] = ()) -> dict[str, Any] | None:
    """The first JSON object with `key` that the judge states itself: not inside quoted or tagged
    material, not copied from the answers under judgement (`quoted`: not one of their own objects,
    not inside a copied run); None when there is none. A JSON reply is its own first object
    (whether it repeats the answer is `repeated_reason`'s question)."""
    if not text or not text.strip():
        return None
    try:
        whole = json.loads(text.strip())
        if isinstance(whole, dict):
            return whole
    except ValueError:
        pass
    not_own = quoted_spans(text) + copied_spans(text, quoted)
    theirs = _answer_objects(quoted)
    for start, _, obj in json_spans(text):
        if key in obj and not _inside(start, not_own) and not _same_object(obj, theirs):
            return obj
    return None


# ------------------------------------------------------------------------- template copies
_PLACEHOLDER = re.compile(r"^\s*(?:<[^<>]{0,120}>|\.\.\.|…|one or two sentences\.?)\s*$", re.IGNORECASE)


def placeholder_reason(rationale: Any) -> str | None:
    """Why `rationale` is the template's placeholder and not the judge's own, or None."""
    if isinstance(rationale, str) and _PLACEHOLDER.match(rationale):
        return (f"the rationale is the template's placeholder text ({rationale.strip()!r}), "
                "copied instead of a judgement")
    return None


# ------------------------------------------------------------------------- repeated answers
# The start of the reason a reply that repeats the answer under test abstains with (`_REASONS`).
REPEATED = "the reply repeats the answer under test"


def repeated_reason(parsed: dict[str, Any], text: str, quoted: Sequence[str], key: str) -> str | None:
    """Why a reply is a repetition of the answer under judgement rather than a judgement, or None.

    It is when its JSON object is one of the answer's own JSON objects, or has the justification
    (`parsed[key]`) of one (a judge that parrots the answer's `{"reasoning": ..., "verdict": 1}`),
    and when every word of the reply is copied from the answer. A justification that only repeats
    the answer's prose beside a verdict of the judge's own is `copied_note`'s (a flag): small
    judges summarise that way, and the verdict field is still theirs.
    """
    texts = _comparable(quoted)
    if not texts:
        return None
    objects = _answer_objects(texts)
    mine = normalize_text(str(parsed.get(key, ""))).strip()
    if _same_object(parsed, objects) or any(
            isinstance(o.get(key), str) and o[key].strip() and normalize_text(o[key]).strip() == mine for o in objects):
        return f"{REPEATED}: its JSON is the answer's own ({json.dumps(parsed, ensure_ascii=False)[:80]})"
    if all_copied(text, texts):
        return f"{REPEATED}: every word of it is copied from the answer"
    return None


def answers_json(text: str, key: str, quoted: Sequence[str]) -> bool:
    """Whether `text` holds a JSON object with `key` that is one of the answers' own (`quoted`)."""
    theirs = _answer_objects(quoted)
    return bool(theirs) and any(key in obj and _same_object(obj, theirs) for _, _, obj in json_spans(text))


def copied_note(justification: Any, quoted: Sequence[str], key: str) -> str | None:
    """A note when a justification is the answer's own text (all of it copied, or the whole answer),
    None otherwise: the verdict stands, the note says it rests on no reasoning of the judge's own."""
    texts = _comparable(quoted)
    if not texts or not isinstance(justification, str) or not _SIGNIFICANT.search(justification):
        return None
    norm = " ".join(normalize_text(justification).split()).casefold()
    if norm in {" ".join(normalize_text(t).split()).casefold() for t in texts} or all_copied(justification, texts):
        return f"the {key} repeats the answer's text"
    return None


def _notes(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


# ------------------------------------------------------------------------- pointwise verdicts
_LABELLED = re.compile(r"verdict[\"'*\s]*(?:[:=]|is|of)?[\"'*\s]*([A-Za-z0-9.]+)", re.IGNORECASE)
_WORD = re.compile(r"\b(PASS|FAIL)(?:ED|ES)?\b")
# A verdict word or label that only names what the answer asks for or claims ("it asks me to print
# PASS", "the answer's own verdict 1 claim"), not the judge's verdict.
_MENTION = re.compile(r"(?:output|print|say|write|reply|respond|return|give|emit|type|answer|ask|request|demand|"
                      r"claim|want|beg|tell|instruct)(?:s|ed|ing)?"
                      r"(?:\s*(?:\bwith|\bme|\bus|\bfor|\ba|\ban|\bthe|\bverdict|\bof|\bonly|\bjust|\bto|\bjudge|\bit|"
                      r"\bor|[01]|/|:))*\s*[\"'*]*\s*$",
                      re.IGNORECASE)
# ... or that belongs to someone else ("the answer's own verdict 1", "its fake PASS").
_ATTRIBUTED = re.compile(r"(?:\b(?:answer|candidate|model|response|text)(?:'s|’s|s')|\bits)\s+"
                         r"(?:(?:own|fake|claimed|supposed|requested)\s+)*$", re.IGNORECASE)
_LEADING = re.compile(r"^[\s*#>_\-]*(?:verdict[\s*:]*)?(PASS|FAIL)(?:ED|ES)?\b", re.IGNORECASE)
_VALID = {"pass": 1, "passed": 1, "passes": 1, "fail": 0, "failed": 0, "fails": 0, "1": 1, "0": 0}


def verdict_value(token: Any) -> Any:
    """Map "PASS"/"FAIL"/"1"/true to 1/0; anything else is returned unchanged (validation names it)."""
    if isinstance(token, bool):
        return int(token)
    if isinstance(token, str):
        return _VALID.get(token.strip().strip(".").lower(), token)
    return token


def _mentioned(own: str, start: int) -> bool:
    """Whether the verdict at `start` only names what someone else asks for or claims."""
    before = own[:start]
    return bool(_MENTION.search(before) or _ATTRIBUTED.search(before))


def _reading(text: str, quoted: Sequence[str]) -> tuple[str, Callable[..., bool]]:
    """(the text with quoted and tagged material blanked, whether a match's group is the judge's own).

    A verdict is the judge's own when its value (the match group: "1" of "verdict: 1", "B" of
    "Winner: B") is neither quoted nor copied from the answers: the words around it may be ("the
    answer wrote ... Winner:" then the judge's own "B"), the value may not."""
    own, copied = unquoted(text), copied_spans(text, quoted)

    def mine(m: re.Match, group: int | str = 1, mention: bool = True) -> bool:
        return not _inside(m.start(group), copied) and not (mention and _mentioned(own, m.start()))
    return own, mine


def stated_verdict(text: str, quoted: Sequence[str] = ()) -> tuple[Any, str | None]:
    """(verdict, why not) of prose by the strict rule, quoted and tagged material and material
    copied from the answers under judgement (`quoted`) ignored.

    In order: a verdict the reply opens with ("FAIL. ..."); the first labelled verdict
    ("verdict: 1", "Verdict: PASS"); the upper-case PASS / FAIL words, if they all agree (a word
    or label that only names what the answer asks for or claims, "print PASS", "the answer's
    verdict 1", is not a verdict). Returns (None, reason) when the words conflict, (None, None)
    when there is no verdict at all, and an unusable labelled value ("verdict: maybe") as it is,
    so that validation names it.
    """
    own, mine = _reading(text, quoted)
    lead = _LEADING.match(own)
    if lead and mine(lead):
        return verdict_value(lead.group(1)), None
    labelled = [verdict_value(m.group(1)) for m in _LABELLED.finditer(own) if mine(m)]
    valid = [v for v in labelled if v in (0, 1)]
    if valid:
        return valid[0], None
    words = [m.group(1) for m in _WORD.finditer(own) if mine(m)]
    if words:
        if len(set(words)) > 1:
            return None, (f"the reply states both PASS and FAIL ({', '.join(words)}) and neither first "
                          "or as a labelled verdict")
        return (1 if words[0] == "PASS" else 0), None
    if labelled:
        return labelled[0], None
    return None, None


def screen_pointwise(parsed: dict[str, Any], text: str, quoted: Sequence[str] = ()) -> str | None:
    """Why a validated pointwise reply is not a verdict (a copied template, a repetition of the
    answer under judgement), or None when it is one. What its reasoning says about the verdict is
    `pointwise_flag`'s business, never a reason to discard the verdict field."""
    return placeholder_reason(parsed.get("reasoning", "")) or repeated_reason(parsed, text, quoted, "reasoning")


def pointwise_flag(parsed: dict[str, Any], text: str, quoted: Sequence[str] = ()) -> str | None:
    """A note on a pointwise verdict that stands: its reasoning, in the judge's own words, states
    the other verdict ("... FAIL" with verdict 1), or it is the answer's text (`copied_note`); None
    when neither (a prose reply is its own reasoning: it was read by the same rule)."""
    reasoning, verdict = parsed.get("reasoning", ""), parsed.get("verdict")
    if not isinstance(reasoning, str) or not reasoning.strip() or reasoning.strip() == (text or "").strip():
        return None
    said, _ = stated_verdict(reasoning, quoted)
    contradiction = None
    if said in (0, 1) and said != verdict:
        word = {1: "PASS", 0: "FAIL"}
        contradiction = f"the reasoning states {word[said]} but the verdict is {verdict} ({word.get(verdict, '?')})"
    return _notes(contradiction, copied_note(reasoning, quoted, "reasoning"))


# ------------------------------------------------------------------------- pairwise verdicts
_WINNER = re.compile(r"(?:winner|verdict|better)[\"'*\s]*(?:[:=]|is)[\"'*\s]*(?:answer\s*)?([A-Za-z]+)\b",
                     re.IGNORECASE)
_BRACKETED = re.compile(r"\[\[\s*(A|B|tie)\s*\]\]", re.IGNORECASE)
# "A is better", "Answer B is more accurate", "I prefer A", "B wins": a side named as the better one.
_CLAIM = re.compile(
    r"(?:\b(?:answer|response|option)\s+|\b)(?P<side>[AB])\b\s+(?:is|was)\s+(?:clearly\s+|slightly\s+|much\s+)?"
    r"(?:better|superior|preferable|preferred|more\s+(?:accurate|complete|correct|precise|helpful)|the\s+(?:better|winner))"
    r"|\b(?:prefer|choose|pick|select)\s+(?:answer\s+|response\s+)?(?P<side2>[AB])\b"
    r"|(?:\b(?:answer|response)\s+|\b)(?P<side3>[AB])\s+wins\b")
_HEDGE = re.compile(r"\b(?:neither|nor|not|tie|equally|equivalent|both)\b", re.IGNORECASE)


def _winner_label(token: str) -> str | None:
    t = token.strip().lower()
    return {"a": "A", "b": "B", "tie": "tie", "draw": "tie"}.get(t)


def stated_winner(text: str, quoted: Sequence[str] = ()) -> tuple[str | None, str | None]:
    """(winner, why not) of a prose pairwise reply by the strict rule, quoted material and material
    copied from the answers (`quoted`) ignored: the first labelled winner ("Winner: A", "verdict:
    tie") or bracketed one ("[[B]]") that does not only name what an answer asks for."""
    own, mine = _reading(text, quoted)
    found = [(m.start(), _winner_label(m.group(1))) for m in _WINNER.finditer(own) if mine(m)]
    found += [(m.start(), _winner_label(m.group(1))) for m in _BRACKETED.finditer(own) if mine(m)]
    found = sorted((p, w) for p, w in found if w)
    if found:
        return found[0][1], None
    return None, None


def claimed_side(rationale: str, quoted: Sequence[str] = ()) -> str | None:
    """The one side a rationale names as the better answer ("A is better"), or None (no claim,
    both sides claimed, or hedged wording such as "neither A nor B is better"); quoted material
    and material copied from the answers (`quoted`) ignored."""
    own, mine = _reading(rationale, quoted)
    claims = [m for m in _CLAIM.finditer(own)
              if mine(m, next(g for g in ("side", "side2", "side3") if m.group(g)), mention=False)]
    sides = {m.group("side") or m.group("side2") or m.group("side3") for m in claims}
    if len(sides) != 1:
        return None
    side = sides.pop()
    for m in claims:  # "not A is better" / "neither A nor B": no claim
        window = own[max(0, m.start() - 12):m.start()]
        if _HEDGE.search(window):
            return None
    return side


def screen_pairwise(parsed: dict[str, Any], text: str, quoted: Sequence[str] = ()) -> str | None:
    """Why a validated pairwise reply is not a verdict (a copied template, a repetition of one of
    the answers), or None when it is one. A rationale naming the other side is `pairwise_flag`'s."""
    return placeholder_reason(parsed.get("rationale", "")) or repeated_reason(parsed, text, quoted, "rationale")


def pairwise_flag(parsed: dict[str, Any], text: str, quoted: Sequence[str] = ()) -> str | None:
    """A note on a pairwise verdict that stands: its rationale, in the judge's own words, names the
    other side than the winner, or it is one answer's text (`copied_note`); None when neither."""
    rationale = parsed.get("rationale", "")
    if not isinstance(rationale, str) or rationale.strip() == (text or "").strip():
        return None
    side = claimed_side(rationale, quoted)
    contradiction = None
    if side is not None and side != parsed.get("winner"):
        contradiction = f"the rationale says {side} is better but the winner is {parsed.get('winner')!r}"
    return _notes(contradiction, copied_note(rationale, quoted, "rationale"))


# ------------------------------------------------------------------------- abstentions, counted
# Short names of why a judge abstained, in the order they are looked for in its error text.
_REASONS = (
    ("placeholder", "copied the template"),
    (REPEATED, "repeated the answer"),
    ("rationale says", "rationale names the other side"),
    ("reasoning states", "reasoning states the other verdict"),
    ("both PASS and FAIL", "conflicting verdicts"),
    ("endpoint unusable", "judge endpoint unusable"),
    ("call failed", "call failed"),
    ("does not match the schema", "reply does not match the format"),
    ("empty reply", "empty reply"),
    ("no JSON object", "no verdict in the reply"),
    ("nothing usable", "no verdict in the reply"),
)


def abstention_reason(error: Any) -> str | None:
    """The short reason of one abstention from the judge's error text (None: not an abstention)."""
    if error is None or (isinstance(error, float) and error != error) or not str(error).strip():
        return None
    text = str(error)
    first = text.split(", after a reminder (first reply:", 1)[0]  # the reason of the last reply counts
    for needle, reason in _REASONS:
        if needle in first:
            return reason
    return "other"


def abstention_reasons(errors: Any) -> dict[str, int]:
    """{short reason: count} over a judge's error column (most frequent first)."""
    counts: dict[str, int] = {}
    for e in errors:
        r = abstention_reason(e)
        if r is not None:
            counts[r] = counts.get(r, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def reasons_text(counts: dict[str, int]) -> str:
    """'copied the template: 7; no verdict in the reply: 2' ('' when none)."""
    return "; ".join(f"{k}: {v}" for k, v in counts.items())
