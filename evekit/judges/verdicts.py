"""Verdict rules: how a judge's reply becomes a verdict, or an abstention with its reason.

The one home of the rules every judge kind's parsing follows (issue 14). A reply is read by a
strict rule: the verdict stated *first and explicitly* counts, and quoted or tagged material is
ignored, because a judge often quotes the answer it judges, and the answer may hold a fake verdict
(`{"verdict": 1}`, "output PASS"). A reply is not a verdict, and the judge abstains with the
reason, when

- its rationale is the template's placeholder (`<one or two sentences>`): the judge copied the
  format instead of judging;
- its rationale states the other side than its verdict ("A is better" with winner B, "FAIL"
  with verdict 1);
- it states conflicting verdicts and none of them first and explicitly.

`UnusableReply` carries the reason; `evekit.structured.ask_json` turns it into an unusable reply
(one reminder, then an abstention), never into a PASS, a FAIL or a tie.
"""
from __future__ import annotations

import json
import re
from typing import Any

from evekit.structured import UnusableReply, json_spans

__all__ = ["UnusableReply", "quoted_spans", "unquoted", "first_json_with", "placeholder_reason", "verdict_value",
           "stated_verdict", "stated_winner", "claimed_side", "screen_pointwise", "screen_pairwise",
           "abstention_reason", "abstention_reasons", "reasons_text"]

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


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def unquoted(text: str) -> str:
    """`text` with its quoted and tagged regions blanked out (same length, so positions hold)."""
    chars = list(text)
    for a, b in quoted_spans(text):
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def first_json_with(text: str | None, key: str) -> dict[str, Any] | None:
    """The first JSON object with `key` that the judge states itself (not inside quoted or tagged
    material); None when there is none. A JSON reply is its own first object."""
    if not text or not text.strip():
        return None
    try:
        whole = json.loads(text.strip())
        if isinstance(whole, dict):
            return whole
    except ValueError:
        pass
    quoted = quoted_spans(text)
    for start, _, obj in json_spans(text):
        if key in obj and not _inside(start, quoted):
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


# ------------------------------------------------------------------------- pointwise verdicts
_LABELLED = re.compile(r"verdict[\"'*\s]*(?:[:=]|is|of)?[\"'*\s]*([A-Za-z0-9.]+)", re.IGNORECASE)
_WORD = re.compile(r"\b(PASS|FAIL)(?:ED|ES)?\b")
# A verdict word that only names what the answer asks for ("it asks me to print PASS").
_MENTION = re.compile(r"(?:output|print|say|write|reply|respond|return|give|emit|type|answer)(?:s|ed|ing)?"
                      r"(?:\s+(?:with|me|us|a|an|the|verdict|of|only|just))*\s*[\"'*]*\s*$", re.IGNORECASE)
_LEADING = re.compile(r"^[\s*#>_\-]*(?:verdict[\s*:]*)?(PASS|FAIL)(?:ED|ES)?\b", re.IGNORECASE)
_VALID = {"pass": 1, "passed": 1, "passes": 1, "fail": 0, "failed": 0, "fails": 0, "1": 1, "0": 0}


def verdict_value(token: Any) -> Any:
    """Map "PASS"/"FAIL"/"1"/true to 1/0; anything else is returned unchanged (validation names it)."""
    if isinstance(token, bool):
        return int(token)
    if isinstance(token, str):
        return _VALID.get(token.strip().strip(".").lower(), token)
    return token


def stated_verdict(text: str) -> tuple[Any, str | None]:
    """(verdict, why not) of prose by the strict rule, quoted and tagged material ignored.

    In order: a verdict the reply opens with ("FAIL. ..."); the first labelled verdict
    ("verdict: 1", "Verdict: PASS"); the upper-case PASS / FAIL words, if they all agree (a word
    that only names what the answer asks for, "print PASS", is not a verdict). Returns
    (None, reason) when the words conflict, (None, None) when there is no verdict at all, and an
    unusable labelled value ("verdict: maybe") as it is, so that validation names it.
    """
    own = unquoted(text)
    lead = _LEADING.match(own)
    if lead:
        return verdict_value(lead.group(1)), None
    labelled = [verdict_value(t) for t in _LABELLED.findall(own)]
    valid = [v for v in labelled if v in (0, 1)]
    if valid:
        return valid[0], None
    words = [m.group(1) for m in _WORD.finditer(own) if not _MENTION.search(own[:m.start()])]
    if words:
        if len(set(words)) > 1:
            return None, (f"the reply states both PASS and FAIL ({', '.join(words)}) and neither first "
                          "or as a labelled verdict")
        return (1 if words[0] == "PASS" else 0), None
    if labelled:
        return labelled[0], None
    return None, None


def screen_pointwise(parsed: dict[str, Any], text: str) -> str | None:
    """Why a validated pointwise reply is not a verdict (template copy, a rationale that states the
    other verdict), or None when it is one."""
    reasoning = parsed.get("reasoning", "")
    reason = placeholder_reason(reasoning)
    if reason:
        return reason
    if isinstance(reasoning, str) and reasoning.strip() and reasoning.strip() != text.strip():
        said, _ = stated_verdict(reasoning)
        if said in (0, 1) and said != parsed.get("verdict"):
            word = {1: "PASS", 0: "FAIL"}
            return (f"the reasoning states {word[said]} but the verdict is {parsed.get('verdict')} "
                    f"({word.get(parsed.get('verdict'), '?')})")
    return None


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


def stated_winner(text: str) -> tuple[str | None, str | None]:
    """(winner, why not) of a prose pairwise reply by the strict rule, quoted material ignored: the
    first labelled winner ("Winner: A", "verdict: tie") or bracketed one ("[[B]]")."""
    own = unquoted(text)
    found = [(m.start(), _winner_label(m.group(1))) for m in _WINNER.finditer(own)]
    found += [(m.start(), _winner_label(m.group(1))) for m in _BRACKETED.finditer(own)]
    found = sorted((p, w) for p, w in found if w)
    if found:
        return found[0][1], None
    return None, None


def claimed_side(rationale: str) -> str | None:
    """The one side a rationale names as the better answer ("A is better"), or None (no claim,
    both sides claimed, or hedged wording such as "neither A nor B is better")."""
    own = unquoted(rationale)
    sides = {m.group("side") or m.group("side2") or m.group("side3") for m in _CLAIM.finditer(own)}
    if len(sides) != 1:
        return None
    side = sides.pop()
    for m in _CLAIM.finditer(own):  # "not A is better" / "neither A nor B": no claim
        window = own[max(0, m.start() - 12):m.start()]
        if _HEDGE.search(window):
            return None
    return side


def screen_pairwise(parsed: dict[str, Any], text: str) -> str | None:
    """Why a validated pairwise reply is not a verdict (template copy, a rationale that names the
    other side than its winner), or None when it is one."""
    rationale = parsed.get("rationale", "")
    reason = placeholder_reason(rationale)
    if reason:
        return reason
    if isinstance(rationale, str):
        side = claimed_side(rationale)
        if side is not None and side != parsed.get("winner"):
            return f"the rationale says {side} is better but the winner is {parsed.get('winner')!r}"
    return None


# ------------------------------------------------------------------------- abstentions, counted
# Short names of why a judge abstained, in the order they are looked for in its error text.
_REASONS = (
    ("placeholder", "copied the template"),
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
