"""Parsing of model responses: <think> stripping, option letters, hallucination verdicts, spans."""
from __future__ import annotations

import pytest

from evekit.parsing import format_labels, parse_hallucination, parse_letters, strip_think

ABCD = ["A", "B", "C", "D"]


@pytest.mark.parametrize(
    "text, answer, reasoning",
    [
        ("<think>B looks right</think>\nB", "B", "B looks right"),
        ("<think>one</think> mid <think>two</think> end", "mid  end", "one\n\ntwo"),
        ("<THINK>x</THINK>C", "C", "x"),
        ("  <think>ran out of tokens while thinking", "", "ran out of tokens while thinking"),
        ("the template opened it</think>\nAnswer: A", "Answer: A", "the template opened it"),
        ("plain answer", "plain answer", None),
        ("<think></think>B", "B", None),
        ("", "", None),
        (None, "", None),
    ],
)
def test_strip_think(text, answer, reasoning):
    assert strip_think(text) == (answer, reasoning)
    assert strip_think(answer) == (answer, None)  # applying it again changes nothing


def test_strip_think_removes_every_stray_closing_tag_at_once():
    # One call does what the three layers (client, tasks, parser) used to do one tag at a time.
    assert strip_think("a</think>b</think>C") == ("C", "a\n\nb")


@pytest.mark.parametrize("raw, parse, expected", [
    ("<think>It could be A. Hmm.</think>\nThe answer is B", lambda t: parse_letters(t, ABCD, multiple=False), ["B"]),
    ("<think>Let me check the swath.</think>A", parse_hallucination, ["A"]),
])
def test_raw_responses_go_through_strip_think_before_the_parsers(raw, parse, expected):
    # The client strips <think>; a text that did not come through it goes through strip_think first.
    answer, reasoning = strip_think(raw)
    result = parse(answer)
    assert result.ok and result.labels == expected and reasoning


SINGLE_OK = [
    ("B", "B"),
    ("B.", "B"),
    ("B) 10 meters", "B"),
    ("(B) 10 meters", "B"),
    ("B. 10 meters", "B"),
    ("Answer: C", "C"),
    ("**Answer:** D", "D"),
    ("**B**", "B"),
    ("**(A)**", "A"),
    ("*C*", "C"),
    ("b", "B"),
    ("the answer is (B)", "B"),
    ("The answer is b.", "B"),
    ("I think the answer is B.", "B"),
    ("The correct option is B because its bands are 10 m.", "B"),
    ("Option C is correct.", "C"),
    ("I pick **B** since it matches.", "B"),
    ("B\n\nExplanation: the visible bands are at 10 m.", "B"),
    ("Answer: B\nC is wrong because it is 20 m.", "B"),
    # reasoning followed by a final answer statement: the final one wins
    ("Option A is wrong because it is 60 m. At first I thought the answer is D, but no. "
     "Therefore, the answer is C.", "C"),
    ("Sentinel-2 MSI has 13 bands; the visible ones are at 10 m.\n\nC", "C"),
    ("The correct answer is: B) 786 km", "B"),
    ("B is the answer.", "B"),
    ("The answer would be option (D).", "D"),
]


@pytest.mark.parametrize("text, expected", SINGLE_OK)
def test_single_letter_cases(text, expected):
    result = parse_letters(text, ABCD, multiple=False)
    assert result.ok, result
    assert result.labels == [expected]


MULTI_OK = [
    ("A, C", ["A", "C"]),
    ("A and C", ["A", "C"]),
    ("C, A", ["A", "C"]),
    ("a, c", ["A", "C"]),
    ("the answers are A and C", ["A", "C"]),
    ("Final answer: A, C, D", ["A", "C", "D"]),
    ("**A**, **C**", ["A", "C"]),
    ("A) B2 (blue)\nC) B4 (red)", ["A", "C"]),
    ("B2 and B3 are at 10 m, B5 is not. The correct answers are A, B and F.", ["A", "B", "F"]),
    ("E, G", ["E", "G"]),  # choices beyond D
]


@pytest.mark.parametrize("text, expected", MULTI_OK)
def test_multiple_letter_cases(text, expected):
    result = parse_letters(text, list("ABCDEFG"), multiple=True)
    assert result.ok, result
    assert result.labels == expected


def test_choices_beyond_d_single():
    assert parse_letters("F", list("ABCDEF"), multiple=False).labels == ["F"]


@pytest.mark.parametrize(
    "text",
    [
        "A satellite in a sun-synchronous orbit passes at the same local time.",
        "I think it depends on the band.",
        "I am not sure.",
        "The answer is A satellite constellation.",
        "answer isn't clear",
        "",
        "   ",
    ],
)
def test_prose_capitals_are_not_answers(text):
    result = parse_letters(text, ABCD, multiple=False)
    assert not result.ok
    assert result.labels is None
    assert result.reason in {"no answer letter found", "empty response"}


def test_letter_outside_choices_is_flagged_but_kept():
    result = parse_letters("F", ABCD, multiple=False)
    assert result.labels == ["F"]
    assert result.reason == "letter F not among choices A-D"
    multi = parse_letters("A, F", ABCD, multiple=True)
    assert multi.labels == ["A", "F"]  # F stays in: it is a wrong pick for IoU
    assert multi.reason == "letter F not among choices A-D"
    two = parse_letters("E, F", ABCD, multiple=True)
    assert two.reason == "letters E, F not among choices A-D"


@pytest.mark.parametrize("text, letters", [("A, C", "A, C"), ("B or C", "B, C"), ("the answers are A and D", "A, D")])
def test_single_answer_with_several_letters_is_unparsed(text, letters):
    result = parse_letters(text, ABCD, multiple=False)
    assert not result.ok
    assert result.reason == f"several letters: {letters}"


def test_no_answer_reason():
    assert parse_letters("I do not know", ABCD, multiple=False).reason == "no answer letter found"


@pytest.mark.parametrize(
    "text, label",
    [
        ("A", "A"),
        ("B", "B"),
        ("B. The answer contains no hallucinated information.", "B"),
        ("Yes", "A"),
        ("Yes, it contains a hallucinated band.", "A"),
        ("No, it's accurate.", "B"),
        ("no", "B"),
        ("The answer contains hallucinated details.", "A"),
        ("It does not contain hallucinated information.", "B"),
        ("The answer is accurate.", "B"),
        ("The answer is not accurate.", "A"),
        ("False", "A"),
        ("True", "B"),
    ],
)
def test_hallucination_verdicts(text, label):
    result = parse_hallucination(text)
    assert result.ok, result
    assert result.labels == [label]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("hmm", "no verdict found (expected A/B or yes/no)"),
        ("", "empty response"),
        ("C", "letter C not among choices A, B"),
        ("A, B", "several letters: A, B"),
    ],
)
def test_hallucination_unusable(text, reason):
    assert parse_hallucination(text).reason == reason


def test_format_labels():
    assert format_labels(["A", "B", "C", "D"]) == "A-D"
    assert format_labels(["A", "C", "F"]) == "A, C, F"
    assert format_labels(["A", "B"]) == "A, B"


@pytest.mark.parametrize("text, rest", [("A, B12", "B12"), ("C, ICEYE", "ICEYE"), ("A, C, EVI", "EVI")])
def test_letters_mixed_with_choice_text_are_unparsed_with_a_clear_reason(text, rest):
    result = parse_letters(text, list("ABCDEFG"), multiple=True)
    assert result.labels is None
    assert result.reason == f"letters mixed with other text ({rest!r}); expected letters only"


# ---------------------------------------------------------------------------------------------
# Unicode (issue 24): letters are read after NFKC, format characters removed

@pytest.mark.parametrize("text", [
    "\u200bB",                 # zero-width space
    "B\u200b",
    "\ufeffB",                 # byte-order mark
    "Ｂ",                      # fullwidth
    "ｂ",
    "\u202bB\u202c",           # right-to-left embedding ... pop
    "\u2067B\u2069",           # right-to-left isolate ... pop isolate
    "\u200eB\u200f",           # left-to-right / right-to-left marks
    "Answer: \u2066Ｂ\u2069",
    "**Ｂ**",
    "The answer is B\u200d.",  # zero-width joiner
    "Ｂ）１０ ｍ",               # fullwidth bracket and digits
])
def test_letters_hidden_in_unicode_forms_are_read(text):
    result = parse_letters(text, ABCD, multiple=False)
    assert result.ok and result.labels == ["B"], result


def test_several_unicode_letters_and_a_hallucination_verdict():
    assert parse_letters("Ａ, \u200bＣ", ABCD, multiple=True).labels == ["A", "C"]
    assert parse_hallucination("\u202bＡ\u202c").labels == ["A"]
    assert parse_hallucination("ｎｏ").labels == ["B"]


@pytest.mark.parametrize("text", ["\u0412", "\u0412.", "\u200b", "\u202e\u202c"])
def test_look_alikes_from_other_scripts_and_invisible_text_are_not_letters(text):
    # Cyrillic В is another letter, not B; a reply of format characters only is empty.
    result = parse_letters(text, ABCD, multiple=False)
    assert not result.ok and result.labels is None


def test_normalize_text():
    from evekit.parsing import normalize_text
    assert normalize_text("Ｂ\u200b\u202b：１\u00ad") == "B:1"
    assert normalize_text("\u0412") == "\u0412"
