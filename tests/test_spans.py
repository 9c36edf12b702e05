"""Hallucinated spans (issue 27): Mu-SHROOM's scores against an independent reading of its
scorer's definitions, the phrase locator, the reply contract, the samples columns, metrics,
baselines, the HTML view, and a seeded coverage check of the hard_iou / soft_spearman intervals.

The reference functions below are written from the definitions of Helsinki-NLP/mu-shroom's
`participant_kit/scorer.py` (character index sets; a list of per-character probabilities that
each soft span overwrites in order; constant = one distinct value at 8 decimals; scipy's
spearmanr), in plain Python, sharing no code with evekit.spans.
"""
from __future__ import annotations

import html
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from evekit import metrics as M
from evekit import spans as S
from evekit import tasks as T
from evekit.data import items_from_rows
from evekit.errors import DataError
from evekit.types import GenerationResult

from scripted_client import ScriptedClient

# ---------------------------------------------------------------------------------------------
# The reference: the scorer's definitions, re-derived


def ref_iou(gold_hard, pred_hard):
    g = {i for s, e in gold_hard for i in range(s, e)}
    p = {i for s, e in pred_hard for i in range(s, e)}
    if not g and not p:
        return 1.0
    return len(g & p) / len(g | p)


def ref_vector(soft, n):
    vec = [0.0] * n
    for span in soft:
        for i in range(span["start"], span["end"]):
            vec[i] = span["prob"]
    return vec


def ref_cor(gold_soft, pred_soft, n):
    g, p = ref_vector(gold_soft, n), ref_vector(pred_soft, n)
    kg, kp = len({round(x, 8) for x in g}), len({round(x, 8) for x in p})
    if kg == 1 or kp == 1:
        return float(kg == kp)
    return spearmanr(g, p).correlation


def ref_hard_from_soft(soft):
    return {i for s in soft if s["prob"] > 0.5 for i in range(s["start"], s["end"])}


# ---------------------------------------------------------------------------------------------
# Random items: random text, spans (overlapping, adjacent, empty), probabilities with ties

PROBS = (0.0, 0.1, 0.25, 0.5, 0.5000000001, 0.7, 0.7, 0.9, 1.0)  # ties, the 0.5 edge and a 1e-10 neighbour


def random_spans(rng, n, kind):
    if n == 0 or rng.random() < 0.25:
        return []
    out = []
    for _ in range(int(rng.integers(1, 5))):
        if out and rng.random() < 0.3:  # adjacent to the previous one
            s = out[-1][1] if not isinstance(out[-1], dict) else out[-1]["end"]
            s = min(s, n - 1)
        else:
            s = int(rng.integers(0, n))
        e = int(rng.integers(s + 1, min(n, s + 25) + 1))
        if kind == "hard":
            out.append([s, e])
        else:
            out.append({"start": s, "end": e, "prob": float(rng.choice(PROBS))})
    return out


def random_item(rng):
    n = int(rng.choice([0, 1, 2, 5, 20, 60, 150], p=[0.03, 0.05, 0.07, 0.15, 0.25, 0.25, 0.2]))
    return n, random_spans(rng, n, "hard"), random_spans(rng, n, "soft"), random_spans(rng, n, "hard"), \
        random_spans(rng, n, "soft")


ITEMS = [random_item(np.random.default_rng(seed)) for seed in range(400)]


def test_random_items_cover_the_edge_cases():
    assert len(ITEMS) >= 200
    assert sum(not gh and not ph for _, gh, _, ph, _ in ITEMS) >= 10  # both empty
    assert sum(1 for n, *_ in ITEMS if n == 0) >= 5
    overlapping = adjacent = 0
    for _, gh, gs, ph, ps in ITEMS:
        pairs = [(a, b) for spans in (gh, ph) for a in spans for b in spans if a is not b]
        overlapping += any(a[0] < b[1] and b[0] < a[1] for a, b in pairs)
        adjacent += any(a[1] == b[0] for a, b in pairs)
    assert overlapping >= 20 and adjacent >= 20
    ties = sum(len(ps) >= 2 and len({s["prob"] for s in ps}) < len(ps) for *_, ps in ITEMS)
    assert ties >= 10


@pytest.mark.parametrize("k", range(len(ITEMS)))
def test_hard_iou_and_soft_spearman_equal_the_scorers_definitions(k):
    n, gold_hard, gold_soft, pred_hard, pred_soft = ITEMS[k]
    assert S.hard_iou(gold_hard, pred_hard, n) == pytest.approx(ref_iou(gold_hard, pred_hard), abs=1e-9)
    ours, ref = S.soft_spearman(gold_soft, pred_soft, n), ref_cor(gold_soft, pred_soft, n)
    if n == 0:
        assert math.isnan(ours) and math.isnan(ref)  # no character: undefined on both sides
    else:
        assert ours == pytest.approx(ref, abs=1e-9)
    g = {i for s, e in gold_hard for i in range(s, e)}
    p = {i for s, e in pred_hard for i in range(s, e)}
    assert S.char_counts(gold_hard, pred_hard, n) == (len(g & p), len(p - g), len(g - p))
    derived = {i for s, e in S.hard_from_soft(pred_soft) for i in range(s, e)}
    assert derived == ref_hard_from_soft(pred_soft)


def test_scorer_rules_by_hand():
    assert S.hard_iou([], [], 10) == 1.0  # no gold and no predicted span: perfect
    assert S.hard_iou([[0, 4]], [], 10) == 0.0
    assert S.hard_iou([[0, 4], [2, 6]], [[4, 8]], 10) == pytest.approx(2 / 8)  # overlaps count once
    # constant sides: both constant (even different constants) -> 1, only one -> 0
    assert S.soft_spearman([], [], 5) == 1.0
    assert S.soft_spearman([], [{"start": 0, "end": 5, "prob": 1.0}], 5) == 1.0
    assert S.soft_spearman([{"start": 0, "end": 2, "prob": 0.8}], [], 5) == 0.0
    # a later span overwrites an earlier one
    assert S.soft_vector([{"start": 0, "end": 4, "prob": 0.9}, {"start": 2, "end": 3, "prob": 0.1}], 4).tolist() \
        == [0.9, 0.9, 0.1, 0.9]
    # constancy is judged at 8 decimals: 1e-10 apart is constant (the scorer's rule)
    tiny = [{"start": 0, "end": 2, "prob": 1e-10}]
    assert S.soft_spearman(tiny, [], 4) == ref_cor(tiny, [], 4) == 1.0
    assert S.soft_spearman(tiny, [{"start": 0, "end": 2, "prob": 1.0}], 4) == 0.0  # only the gold is constant
    with pytest.raises(ValueError, match="outside the text"):
        S.hard_iou([[3, 12]], [], 10)


# ---------------------------------------------------------------------------------------------
# Predicted labels from located phrases


@pytest.mark.parametrize("seed", range(60))
def test_predicted_labels_are_the_max_confidence_and_the_scorer_reads_them_alike(seed):
    rng = np.random.default_rng(10_000 + seed)
    n = int(rng.integers(1, 80))
    answer = "".join(rng.choice(list("abc de")) for _ in range(n))
    located = []
    for _ in range(int(rng.integers(0, 6))):
        s = int(rng.integers(0, n))
        e = int(rng.integers(s + 1, n + 1))
        conf = None if rng.random() < 0.2 else float(rng.choice(PROBS))
        located.append(S.Located(answer[s:e], s, e, conf))
    located.append(S.Located("not there", None, None, 0.9))
    hard, soft = S.predicted_labels(located, answer)
    expected = [0.0] * n
    for p in located:
        if p.start is not None:
            for i in range(p.start, p.end):
                expected[i] = max(expected[i], 1.0 if p.confidence is None else p.confidence)
    assert ref_vector(soft, n) == expected  # any reading order: the soft labels do not overlap
    assert all(a["end"] <= b["start"] for a, b in zip(soft, soft[1:]))
    assert all(s["text"] == answer[s["start"]:s["end"]] for s in soft)
    assert {i for s, e in hard for i in range(s, e)} == ref_hard_from_soft(soft) == \
        {i for i, v in enumerate(expected) if v > 0.5}


# ---------------------------------------------------------------------------------------------
# The phrase locator

ANSWER = "Sentinel-2 acquires bands B2, B3, B4 and B5 at 10 m resolution; B5 is at 20 m, its swath is 290 km."


def _at(answer, located):
    return [None if p.start is None else answer[p.start:p.end] for p in located]


def test_a_phrase_occurring_twice_maps_to_its_first_free_occurrence():
    first, second = ANSWER.index("B5"), ANSWER.index("B5", ANSWER.index("B5") + 1)
    one = S.locate(ANSWER, [{"text": "B5"}])
    assert (one[0].start, one[0].end) == (first, first + 2)  # the first occurrence
    two = S.locate(ANSWER, [{"text": "B5"}, {"text": "B5"}])  # listed twice: both occurrences
    assert [(p.start, p.end) for p in two] == [(first, first + 2), (second, second + 2)]
    three = S.locate(ANSWER, ["B5", "B5", "B5"])  # more copies than occurrences: the first again, still found
    assert [p.start for p in three] == [first, second, first] and all(p.found for p in three)


def test_a_phrase_inside_an_earlier_one_takes_a_free_occurrence_if_there_is_one():
    text = "10 m bands and 10 m pixels"
    out = S.locate(text, ["10 m bands", "10 m"])
    assert _at(text, out) == ["10 m bands", "10 m"] and out[1].start == text.index("10 m pixels")
    out = S.locate("the 10 m bands", ["10 m bands", "10 m"])  # only one occurrence: overlaps, still found
    assert out[1].start == 4 and out[1].found


def test_case_and_whitespace_differences():
    text = "Its swath  width is\n290 km at the Equator."
    out = S.locate(text, ["SWATH WIDTH IS 290 KM", "  at the equator  ", "Swath\twidth"])
    assert _at(text, out) == ["swath  width is\n290 km", "at the Equator", "swath  width"]
    assert out[0].start == 4  # offsets into the text as given


def test_quotes_around_a_phrase_and_phrases_not_in_the_text():
    out = S.locate(ANSWER, ['"290 km"', "“B4”", "300 km", "   ", {"text": "B9", "confidence": 0.7}])
    assert _at(ANSWER, out) == ["290 km", "B4", None, None, None]
    assert [p.text for p in out if not p.found] == ["300 km", "   ", "B9"]  # kept, never dropped
    assert out[-1].confidence == 0.7


def test_unicode_accents_rtl_and_emoji():
    text = "Le capteur e\u0301tudie la Straße \u200fمدار\u200f, 👨\u200d👩\u200d👧 et ❤\ufe0f 👍🏽 OK"
    out = S.locate(text, ["étudie", "STRASSE", "مدار", "👨‍👩‍👧", "❤", "👍🏽", "capteur étudie"])
    got = _at(text, out)
    assert got[0] == "e\u0301tudie"  # composed phrase, decomposed text: the whole accented letter
    assert got[1] == "Straße"  # casefold: ß = ss
    assert got[2] == "مدار"  # the RTL word, without the bidi marks around it
    assert got[3] == "👨\u200d👩\u200d👧"  # the joiners inside the family are inside the span
    assert got[4] == "❤\ufe0f"  # the variation selector stays with its emoji
    assert got[5] == "👍🏽"
    assert got[6] is not None and got[6].startswith("capteur")
    nfc = S.locate("Caf\u00e9 ouvert", ["cafe\u0301"])  # the other way round
    assert _at("Caf\u00e9 ouvert", nfc) == ["Café"]


# ---------------------------------------------------------------------------------------------
# The reply contract


def test_reply_parsing_and_schema():
    assert S.parse_reply('{"spans": []}', "hard_spans") == ([], None)
    spans, reason = S.parse_reply('Sure: ```json\n{"spans": [{"text": "B5", "confidence": "0.8"}, "290 km"]}\n```',
                                  "hard_spans")
    assert reason is None and spans == [{"text": "B5", "confidence": 0.8}, {"text": "290 km"}]
    # the soft levels need every confidence; in [0, 1]
    assert S.parse_reply('{"spans": [{"text": "B5"}]}', "soft_spans")[0] is None
    assert "confidence" in S.parse_reply('{"spans": [{"text": "B5", "confidence": 1.5}]}', "all")[1]
    assert S.parse_reply("B5 is wrong", "hard_spans") == (None, "no JSON object in the reply")
    assert S.parse_reply("", "hard_spans") == (None, "empty reply")
    assert S.parse_reply('{"spans": [{"text": ""}]}', "hard_spans")[0] is None
    assert S.parse_reply('{"verdict": 1}', "hard_spans")[0] is None
    request = S.reply_schema("hard_spans", request=True)  # strict json_schema: all required, no extra keys
    item = request["properties"]["spans"]["items"]
    assert item["required"] == ["text"] and item["additionalProperties"] is False
    assert S.reply_schema("soft_spans", request=True)["properties"]["spans"]["items"]["required"] == \
        ["text", "confidence"]
    with pytest.raises(ValueError, match="use one of"):
        S.check_level("spans")


def test_span_prompt_shows_the_answer_as_given_and_asks_confidence_at_the_soft_levels():
    item = _items()[0]
    hard = T.span_request(item, "hard_spans").messages
    soft = T.span_request(item, "all").messages
    assert item.fields["answer"] in hard[1]["content"] and "{{" not in hard[0]["content"] + hard[1]["content"]
    assert "confidence" not in hard[0]["content"] and "confidence" in soft[0]["content"]
    req = T.span_request(item, "soft_spans")
    assert req.response_format["type"] == "json_schema"
    assert T.span_request(item, "hard_spans", api="completions").prompt.endswith("\n")


# ---------------------------------------------------------------------------------------------
# Samples columns, metrics, baselines, counts

A0 = "Sentinel-2 acquires bands B2, B3, B4 and B5 at 10 m resolution."
A1 = "Landsat 9 carries OLI-2 and TIRS-2."
A2 = "The swath is 290 km wide & <b>bold</b>."


def _items():
    b5 = A0.index("B5")
    rows = [
        {"Question": "Which bands?", "Answer": A0, "is_hallucinated": True, "Hard labels": [[b5, b5 + 2]],
         "Soft labels": [{"start": b5, "end": b5 + 2, "text": "B5", "prob": 0.9}]},
        {"Question": "Landsat 9?", "Answer": A1, "is_hallucinated": False, "Hard labels": [], "Soft labels": []},
        {"Question": "Swath?", "Answer": A2, "is_hallucinated": True, "Hard labels": [[13, 19]], "Soft labels": []},
        {"Question": "Again?", "Answer": A1, "is_hallucinated": False, "Hard labels": [], "Soft labels": []},
    ]
    return items_from_rows(T.get_task("hallucination_detection"), rows, source="test.jsonl")


def _replies():
    return [GenerationResult(text=json.dumps({"spans": [{"text": "b5", "confidence": 0.8},
                                                        {"text": "10 m", "confidence": 0.3},
                                                        {"text": "B9", "confidence": 0.9}]})),
            GenerationResult(text='{"spans": []}'),
            GenerationResult(text="The swath is wrong."),  # unusable: a miss
            GenerationResult(text=None, error="HTTP 500")]  # failed: excluded


def test_span_columns_scores_and_counts():
    items = _items()
    df = T.add_span_columns(None, items, _replies(), "soft_spans")
    b5 = A0.index("B5")
    assert df["hard_iou"].tolist()[:3] == [1.0, 1.0, 0.0] and math.isnan(df["hard_iou"][3])
    assert df["span_unparsed"].tolist() == [False, False, True, False]
    assert df["unparsed"].tolist() == [False, False, True, False] and df["failed"].tolist()[3]
    assert json.loads(df["pred_hard_labels"][0]) == [[b5, b5 + 2]]
    soft0 = json.loads(df["pred_soft_labels"][0])
    assert [(s["text"], s["prob"]) for s in soft0] == [("B5", 0.8), ("10 m", 0.3)]
    pred0 = json.loads(df["pred_spans"][0])
    assert pred0[2] == {"text": "B9", "start": None, "end": None, "confidence": 0.9}
    assert df["spans_not_in_text"].tolist()[:3] == [1, 0, 0]
    # the gold soft labels of row 2 are [] as given (hard [13, 19] stays the hard gold)
    assert json.loads(df["gold_hard_labels"][2]) == [[13, 19]] and json.loads(df["gold_soft_labels"][2]) == []
    expected_rho = ref_cor([{"start": b5, "end": b5 + 2, "prob": 0.9}], soft0, len(A0))
    assert df["soft_spearman"][0] == pytest.approx(expected_rho, abs=1e-12)
    # the unparsed item: a miss, every gold character a false negative, no false positive
    assert (df["span_tp"][2], df["span_fp"][2], df["span_fn"][2], df["soft_spearman"][2]) == (0, 0, 6, 0)
    assert T.span_counts(df) == {"n": 4, "n_unparsed": 1, "n_failed": 1, "n_spans": 3, "spans_not_in_text": 1}

    m = T.span_metrics(df, "soft_spans", n_boot=500)
    assert list(m) == ["hard_iou", "soft_spearman", "span_precision", "span_recall", "span_f1"]
    assert m["hard_iou"]["n"] == 3 and m["hard_iou"]["value"] == pytest.approx(2 / 3)
    assert m["hard_iou"]["method"] == "bca"
    tp, fp, fn = 2, 0, 6
    assert m["span_precision"]["value"] == pytest.approx(tp / (tp + fp)) and m["span_precision"]["n_chars"] == 2
    assert m["span_recall"]["value"] == pytest.approx(tp / (tp + fn)) and m["span_recall"]["n_chars"] == 8
    assert m["span_f1"]["value"] == pytest.approx(2 * tp / (2 * tp + fp + fn)) and m["span_f1"]["n"] == 3
    assert m["span_f1"]["method"] == "percentile" and m["span_f1"]["ci_low"] <= m["span_f1"]["value"]
    assert "bench_span_coverage" in m["span_f1"]["note"] and "bench_span_coverage" in m["soft_spearman"]["note"]
    hard = T.span_metrics(T.add_span_columns(None, items, _replies(), "hard_spans"), "hard_spans", n_boot=200)
    assert "soft_spearman" not in hard


def test_level_all_adds_span_columns_to_the_binary_table_and_excludes_by_the_span_call():
    items = _items()
    binary = [GenerationResult(text=None, error="timeout"), GenerationResult(text="B"),
              GenerationResult(text="A"), GenerationResult(text="B")]
    samples = T.score_samples("hallucination_detection", items, binary)
    df = T.add_span_columns(samples, items, _replies(), "all")
    assert df["failed"].tolist() == [True, False, False, False]  # the binary call's
    assert df["span_failed"].tolist() == [False, False, False, True]  # the span call's
    assert df["parsed"].tolist()[1:] == ["B", "A", "B"]
    m = T.span_metrics(df, "all", n_boot=200)
    assert m["hard_iou"]["n"] == 3  # item 0 counts for spans although its binary call failed
    assert T.level_metrics("all")[:6] == T.get_task("hallucination_detection").metrics
    assert T.level_metrics("hard_spans") == ("hard_iou", "span_precision", "span_recall", "span_f1")
    with pytest.raises(ValueError, match="order of items"):
        T.add_span_columns(samples.iloc[::-1], items, _replies(), "all")


def test_baselines_no_span_and_whole_answer():
    items = _items()
    df = T.add_span_columns(None, items, _replies(), "soft_spans")
    base = T.span_baselines(df, "soft_spans", n_boot=200)
    none, whole = base["no_span"], base["whole_answer"]
    assert none["hard_iou"]["value"] == pytest.approx(1 / 3)  # perfect only on the item without gold
    assert math.isnan(none["span_precision"]["value"]) and "no character" in none["span_precision"]["note"]
    assert none["span_recall"]["value"] == 0.0 and none["hard_iou"]["n"] == 3
    assert whole["hard_iou"]["value"] == pytest.approx((2 / len(A0) + 0 + 6 / len(A2)) / 3)
    assert whole["span_recall"]["value"] == 1.0
    assert whole["span_precision"]["value"] == pytest.approx(8 / (len(A0) + len(A1) + len(A2)))
    # a constant prediction (nothing, or everything alike): rho 1 where the gold is constant too
    assert none["soft_spearman"]["value"] == whole["soft_spearman"]["value"] == pytest.approx(2 / 3)


def test_gold_labels_derived_when_one_column_is_missing_and_an_error_when_both_are():
    task = T.get_task("hallucination_detection")
    only_soft = items_from_rows(task, [{"Question": "Q", "Answer": "abcdefgh", "is_hallucinated": True,
                                        "Soft labels": [{"start": 0, "end": 2, "prob": 0.9},
                                                        {"start": 2, "end": 4, "prob": 0.6},
                                                        {"start": 5, "end": 7, "prob": 0.4}]}], "t.jsonl")[0]
    hard, soft = T.gold_spans(only_soft)
    assert hard == [[0, 4]] and [s["text"] for s in soft] == ["ab", "cd", "fg"]
    only_hard = items_from_rows(task, [{"Question": "Q", "Answer": "abcdefgh", "is_hallucinated": True,
                                        "Hard labels": [[1, 3]]}], "t.jsonl")[0]
    assert T.gold_spans(only_hard) == ([[1, 3]], [{"start": 1, "end": 3, "text": "bc", "prob": 1.0}])
    neither = items_from_rows(task, [{"Question": "Q", "Answer": "abc", "is_hallucinated": False}], source="x.csv")
    with pytest.raises(DataError, match="x.csv: row 0 .*neither 'Hard labels' nor 'Soft labels'"):
        T.add_span_columns(None, neither, [GenerationResult(text='{"spans": []}')], "hard_spans")


def test_ask_spans_through_the_structured_chain():
    items = _items()[:2]
    seen = []

    def respond(req):
        seen.append(req.response_format)
        return '{"spans": [{"text": "B5", "confidence": 0.9}]}' if "B5" in req.messages[1]["content"] \
            else '{"spans": []}'

    client = ScriptedClient(respond)
    results = T.ask_spans(client, items, "soft_spans")
    assert seen[0]["type"] == "json_schema"
    assert json.loads(results[0].text) == {"spans": [{"text": "B5", "confidence": 0.9}]}
    df = T.add_span_columns(None, items, results, "soft_spans")
    assert df["hard_iou"].tolist() == [1.0, 1.0]

    broken = T.ask_spans(ScriptedClient(lambda req: "no idea"), items, "hard_spans")  # reminder, then unusable
    assert T.add_span_columns(None, items, broken, "hard_spans")["span_unparsed"].all()


# ---------------------------------------------------------------------------------------------
# The view


def test_spans_html_escapes_every_piece_of_text():
    answer = 'The <script>alert("x")</script> band & B5 "at" 10 m'
    s = answer.index("B5")
    out = S.spans_html(answer, gold_hard=[[s, s + 2]], gold_soft=[{"start": s, "end": s + 2, "prob": 0.9}],
                       pred_hard=[[4, 12]], pred_soft=[{"start": 4, "end": 12, "prob": 0.8}],
                       not_found=["<img src=x onerror=alert(1)>"], caption="<b>doc</b> & q")
    assert "<script" not in out and "<img" not in out and "<b>doc" not in out
    assert html.escape("<script>") in out and "&lt;img src=x" in out and "&lt;b&gt;doc&lt;/b&gt; &amp; q" in out
    # the text reads back whole once the markup is taken out, on both sides
    cells = re.findall(r"<td[^>]*>(.*?)</td>", out, re.DOTALL)
    assert len(cells) == 2
    for cell in cells:
        text = re.sub(r"<div.*", "", re.sub(r"</?mark[^>]*>", "", cell), flags=re.DOTALL)
        assert html.unescape(text) == answer
    assert out.count("<mark") == 2 and "text-decoration: underline" in out


def test_worst_items_view():
    df = T.add_span_columns(None, _items(), _replies(), "soft_spans")
    out = T.worst_spans_html(df, k=2)
    assert out.count("<table") == 2 and "doc_id 2" in out and "unparsed reply" in out
    assert "&lt;b&gt;bold&lt;/b&gt;" in out and "<b>bold" not in out
    assert "doc_id 3" not in out  # failed: left out


# ---------------------------------------------------------------------------------------------
# Coverage of the hard_iou and soft_spearman intervals (seeded; the full table is
# benchmarks/bench_span_coverage.py)


# Detectors of the coverage simulation: (finds a gold span, boundary error up to, adds a false span,
# replies nothing, marks the whole answer); "tiny" answers mostly alike (soft_spearman's point masses).
DETECTORS = {"noisy": (0.6, 3, 0.3, 0.0, 0.0), "good": (0.9, 1, 0.1, 0.0, 0.0), "tiny": (0.3, 8, 0.5, 0.4, 0.2)}


def simulated_item(rng, detector="noisy"):
    """An EVE-like item and a simulated detector's reply, scored: half the answers (60-200
    characters) hallucinated with 1-2 gold soft spans (prob 0.6, 0.8 or 1; hard = prob > 0.5); the
    detector (`DETECTORS`) finds each gold span with some probability (boundaries off by a few
    characters), may add a false span, reply nothing or mark the whole answer; confidences in
    [0.3, 1]. Returns the per-item scores {hard_iou, soft_spearman, span_tp, span_fp, span_fn}."""
    find, jitter, false, silent, whole = DETECTORS[detector]
    n = int(rng.integers(60, 200))
    gold = []
    if rng.random() < 0.5:
        for _ in range(int(rng.integers(1, 3))):
            s = int(rng.integers(0, n - 20))
            gold.append({"start": s, "end": s + int(rng.integers(3, 20)), "prob": float(rng.choice([0.6, 0.8, 1.0]))})
    pred = []
    u = rng.random()
    if u < whole:
        pred = [{"start": 0, "end": n, "prob": 1.0}]
    elif u >= whole + silent:
        for g in gold:
            if rng.random() < find:
                s = max(0, g["start"] + int(rng.integers(-jitter, jitter + 1)))
                pred.append({"start": s, "end": min(n, max(s + 1, g["end"] + int(rng.integers(-jitter, jitter + 1)))),
                             "prob": float(rng.uniform(0.3, 1))})
        if rng.random() < false:
            s = int(rng.integers(0, n - 10))
            pred.append({"start": s, "end": s + int(rng.integers(2, 10)), "prob": float(rng.uniform(0.3, 1))})
    return S.item_scores(S.hard_from_soft(gold), gold, S.hard_from_soft(pred), pred, n, soft=True)


def test_hard_iou_and_soft_spearman_intervals_cover():
    rng = np.random.default_rng(2027)
    pool = pd.DataFrame([simulated_item(rng) for _ in range(4000)])  # the population
    names = ("soft_spearman", "hard_iou")
    truth = pool[list(names)].mean().to_numpy()
    n, reps = 40, 200
    covered = np.zeros(2)
    for r in range(reps):
        frame = pool.iloc[rng.integers(0, len(pool), n)]
        for j, name in enumerate(names):
            out = M.get_metric(name).summarize(frame, seed=r, n_boot=500)
            covered[j] += out["ci_low"] - 1e-12 <= truth[j] <= out["ci_high"] + 1e-12
    coverage = covered / reps
    print(f"coverage at n={n} over {reps} datasets: soft_spearman {coverage[0]:.3f}, hard_iou {coverage[1]:.3f}")
    assert (coverage >= 0.89).all()
