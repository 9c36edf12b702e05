"""The item explorer's data (evekit.explorer), without a browser: each item's outcomes against an
independent count of samples' columns, every payload escaped in the blob and back intact after
decoding, repeated texts stored once, large runs compressed. The browser tests are in
tests/test_browser.py."""
from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest

from evekit import explorer as E
from evekit import tasks

PAYLOADS = ["<script>alert('x')</script>", '<img src=x onerror="alert(1)">', "</textarea><b>bold</b>",
            "[click](javascript:alert(1))", "<a href=\"javascript:alert(2)\">j</a>", "**Verdict:** <!-- c --> <s>",
            "</script><script>alert(3)</script>", "&lt;already escaped&gt;"]


def _samples(n: int = 40, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    failed = rng.random(n) < 0.1
    unparsed = ~failed & (rng.random(n) < 0.15)
    strict = np.where(rng.random(n) < 0.6, 1.0, 0.0)
    sampled = np.where(rng.random(n) < 0.6, 1.0, 0.0)
    sampled[rng.random(n) < 0.1] = np.nan  # abstentions
    method = np.where(unparsed, "rule", "json_schema")
    strict[unparsed], sampled[unparsed] = 0.0, 0.0
    strict[failed], sampled[failed] = np.nan, np.nan
    with np.errstate(all="ignore"):
        stacked = np.vstack([strict, sampled])
        votes = np.where(np.isnan(stacked).all(axis=0), np.nan, np.nansum(stacked, axis=0)
                         / np.maximum(1, (~np.isnan(stacked)).sum(axis=0)))
    voting = np.where(np.isnan(votes), np.nan, (votes > 0.5).astype(float))
    return pd.DataFrame({
        "doc_id": range(n), "doc.Question": [f"Q{i} {PAYLOADS[i % len(PAYLOADS)]}" for i in range(n)],
        "target": "786 km", "filtered_resps": [PAYLOADS[(i + 1) % len(PAYLOADS)] for i in range(n)],
        "response": [PAYLOADS[(i + 2) % len(PAYLOADS)] for i in range(n)], "parsed": None,
        "unparsed": unparsed, "unparsed_reason": np.where(unparsed, "empty answer", None), "failed": failed,
        "error": np.where(failed, "HTTP 500 after 4 retries", None), "finish_reason": "stop",
        "completion_tokens": 12, "truncated": rng.random(n) < 0.2,
        "judge_strict": strict, "judge_strict_reasoning": PAYLOADS[3], "judge_strict_error": None,
        "judge_strict_method": method, "judge_strict_raw": "{}",
        "judge_sampled": sampled, "judge_sampled_reasoning": PAYLOADS[5],
        "judge_sampled_error": np.where(np.isnan(sampled) & ~failed & ~unparsed, "no usable verdict", None),
        "judge_sampled_method": method, "judge_sampled_raw": "{}",
        "judge_voting": voting,
    })


def _decode(explorer: E.Explorer) -> dict:
    encoding, blob = explorer.payload()
    raw = gzip.decompress(base64.b64decode(blob)).decode() if encoding == "gzip+base64" else blob
    return json.loads(raw)


def test_each_item_has_the_outcomes_its_columns_say():
    s = _samples()
    ex = E.task_explorer(s, judges=["strict", "sampled"], headline="judge_voting",
                         metrics={"judge_voting": {"value": 0.5}, "llm_as_judge_strict": {"value": 0.5}},
                         metric_column=tasks.metric_column)
    answered = ~s["failed"]
    rule = s["judge_strict_method"] == "rule"
    opinion = answered & ~rule
    both = s["judge_strict"].notna() & s["judge_sampled"].notna()
    expect = {
        "failed": int(s["failed"].sum()),
        "unparsed": int(s["unparsed"].sum()),
        "truncated": int(s["truncated"].sum()),
        "correct": int((answered & ~s["unparsed"] & (s["judge_voting"] == 1)).sum()),
        "wrong": int((answered & (s["unparsed"] | (s["judge_voting"] == 0))).sum()),
        "judges disagree": int((opinion & both & (s["judge_strict"] != s["judge_sampled"])).sum()),
        "abstained": int((opinion & (s["judge_strict"].isna() | s["judge_sampled"].isna())).sum()),
    }
    assert {o: ex.count(o) for o in E.TASK_OUTCOMES} == expect
    assert all(expect.values())  # the sample exercises every outcome
    # A metric links to the items whose per-item value is 0 (the strict judge's verdict column).
    assert ex.failing("llm_as_judge_strict") == int((answered & (s["judge_strict"] == 0)).sum())
    assert len(ex) == len(s)


def test_every_text_is_escaped_in_the_blob_and_intact_after_decoding():
    s = _samples()
    ex = E.task_explorer(s, judges=["strict", "sampled"], headline="judge_voting", metric_column=tasks.metric_column)
    page = ex.to_html()
    blob = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S).group(1)
    assert "<" not in blob and ">" not in blob and "&" not in blob
    for p in PAYLOADS:  # nothing of the data reaches the page as markup
        assert p not in page or "<" not in p and page.count(p) == blob.count(p)  # plain text: only inside the data
    data = _decode(ex)
    texts = data["texts"]

    def strings(row):
        for sec in row["s"]:
            vals = [sec["v"]] if sec["t"] == "text" else [v for _, v in sec["v"]] if sec["t"] == "kv" else \
                [m["c"] for m in sec["v"]]
            yield from (texts[v] if isinstance(v, int) else v for v in vals)

    first = data["rows"][0]
    assert s.loc[0, "doc.Question"] in set(strings(first))
    assert s.loc[0, "response"] in set(strings(first))
    assert "innerHTML" not in E._JS and "insertAdjacentHTML" not in E._JS and "document.write" not in E._JS


def test_repeated_few_shot_messages_are_stored_once():
    shot = "Question: " + "What does SAR stand for? " * 10
    s = _samples(6)
    outputs = [{"doc_id": i, "messages": [{"role": "system", "content": "Answer."},
                                          {"role": "user", "content": shot}, {"role": "assistant", "content": "x" * 90},
                                          {"role": "user", "content": f"Question {i}"}]} for i in range(6)]
    data = _decode(E.task_explorer(s, outputs, judges=["strict", "sampled"], headline="judge_voting",
                                   metric_column=tasks.metric_column))
    assert data["texts"].count(shot) == 1
    msgs = [sec for sec in data["rows"][4]["s"] if sec["t"] == "msgs"][0]
    assert msgs["shots"] == 2 and data["texts"][msgs["v"][1]["c"]] == shot and msgs["v"][3]["c"] == "Question 4"


def test_a_large_run_is_compressed_and_decodes_to_the_same_data(monkeypatch):
    s = _samples(30)
    ex = E.task_explorer(s, judges=["strict", "sampled"], headline="judge_voting", metric_column=tasks.metric_column)
    plain = _decode(ex)
    monkeypatch.setattr(E, "INLINE_LIMIT", 1000)
    encoding, _ = ex.payload()
    assert encoding == "gzip+base64" and _decode(ex) == plain
    assert ex.to_html() == ex.to_html()  # the same bytes every time (nbval compares notebook outputs)


def test_decisions_battles_and_validated_answers():
    results = pd.DataFrame({
        "comparison": "a_vs_b", "qid": [0, 0, 1, 1], "order": 0, "judge": ["j1", "j2", "j1", "j2"],
        "question": ["Q0", "Q0", "Q1", "Q1"], "target": "ref", "model_a": "a", "model_b": "b",
        "answer_a": "ans a", "answer_b": "ans b", "shown_first": "a", "shown_second": "b",
        "winner_model": ["model_a", "model_b", "tie", None], "winner": ["a", "b", "tie", None],
        "judge_said": ["A", "B", "tie", None], "rationale": [PAYLOADS[0], "B better", "same", None],
        "method": "json_schema", "raw": None, "error": [None, None, None, "no usable verdict"],
        "failed": [False, False, False, True]})
    ex = E.decision_explorer(results)
    assert [r["outcomes"] for r in ex.rows] == [["a wins", "judges disagree"], ["b wins", "judges disagree"],
                                               ["tie"], ["abstained"]]
    story = {sec["h"]: sec for sec in ex.rows[0]["story"] if sec}
    assert story["Answer of a (model_a)"]["v"] == "ans a" and story["Answer of b (model_b)"]["v"] == "ans b"
    assert ["rationale", PAYLOADS[0]] in story["Judge j1"]["v"]

    battles = pd.DataFrame({"question_id": [0, 0], "model_a": ["x", "x"], "model_b": ["y", "y"], "judge": ["j1", "j2"],
                            "winner": ["y", "y"], "rationale": ["y is right", "y"], "error": None, "order": 0,
                            "judge_said": "B", "method": "json_schema", "len_a": 3, "len_b": 4, "question": "Q"})
    answers = pd.DataFrame({"x": ["x says"], "y": ["y says"]}, index=pd.Index([0], name="question_id"))
    bx = E.battle_explorer(battles, answers, pd.DataFrame({"question_id": [0], "target": ["ref"], "context": [None]}))
    assert bx.count("B wins (shown second)") == 2 and bx.count("judges disagree") == 0
    texts = {sec["h"]: sec.get("v") for sec in bx.rows[0]["story"] if sec}
    assert texts["Answer A (shown first): x"] == "x says" and texts["Answer B (shown second): y"] == "y says"

    verdicts = pd.DataFrame({"row": [0, 1, 2], "case": ["units", "units", "injection"], "label": [1, 0, 1],
                             "question": "Q", "answer": "A", "judge_j1": [1.0, 1.0, np.nan],
                             "judge_j1_reasoning": "r", "judge_j1_error": [None, None, "abstained"],
                             "judge_j1_method": "json_schema", "judge_j1_raw": None,
                             "judge_voting": [1.0, 1.0, np.nan]})
    vx = E.validation_explorer(verdicts, ["j1"])
    assert [r["outcomes"] for r in vx.rows] == [["correct"], ["wrong"], ["abstained"]]
    assert {r["group"] for r in vx.rows} == {"units", "injection"}


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_runs(n):
    ex = E.task_explorer(_samples(8).head(n), judges=["strict", "sampled"], headline="judge_voting",
                         metric_column=tasks.metric_column)
    assert len(ex) == n and "evekit-explorer" in ex.to_html()
