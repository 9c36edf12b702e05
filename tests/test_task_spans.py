"""Hallucination detection's `level` in the task notebook (issue 27): the binary question, the
hallucinated spans (hard, soft) or all, scored as Mu-SHROOM's scorer defines them; the expected
values here are computed independently from those definitions (character index sets)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from evekit.errors import ParameterError
from evekit.runs.task.run import TaskRun

sys.path.insert(0, str(Path(__file__).parent))
from scripted_client import ScriptedClient  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "hallucination_detection.jsonl"
PHRASE = "B5"


def _respond(request):
    if request.response_format is not None:  # the span question (json_schema first)
        return json.dumps({"spans": [{"text": PHRASE, "confidence": 0.9}]})
    return "A"


def _run(tmp_path, level, client=None, **extra) -> TaskRun:
    run = TaskRun.from_notebook({"task": "hallucination_detection", "model_name": "m",
                                 "base_url": "http://127.0.0.1:9/v1", "dataset": str(extra.pop("dataset", DATA)),
                                 "limit": 12, "level": level, "cache_dir": str(tmp_path / "cache"),
                                 "output_dir": str(tmp_path / "out"), "run_name": level, **extra})
    run._client = lambda *a, **k: client or ScriptedClient(_respond)  # type: ignore[method-assign]
    run.load()
    return run


def _expected_iou(rows) -> float:
    """Mu-SHROOM's hard IoU per item from character index sets, averaged; 1 when both are empty."""
    values = []
    for row in rows:
        gold = {i for s, e in row["Hard labels"] for i in range(s, e)}
        at = row["Answer"].find(PHRASE)
        pred = set(range(at, at + len(PHRASE))) if at >= 0 else set()
        values.append(1.0 if not gold and not pred else len(gold & pred) / len(gold | pred))
    return float(np.mean(values))


def test_level_all_asks_both_questions_and_scores_both(tmp_path):
    client = ScriptedClient(_respond)
    run = _run(tmp_path, "all", client)
    run.generate()
    assert len(client.calls) == 24                                       # the binary and the span question
    m = run.compute_metrics()
    assert {"acc", "mcc", "hard_iou", "soft_spearman", "span_f1"} <= set(m)
    rows = [json.loads(line) for line in DATA.read_text().splitlines()][:12]
    assert m["hard_iou"]["value"] == pytest.approx(_expected_iou(rows), abs=1e-12)
    assert m["hard_iou"]["n"] == 12 and run.headline == "acc"
    assert {"pred_spans", "gold_hard_labels", "span_response", "filtered_resps"} <= set(run.samples.columns)
    out = run.save()
    results = json.loads((out / "results.json").read_text())
    assert results["level"] == "all" and results["span_counts"]["n_spans"] == 12
    assert "no_span" in results["span_baselines"] and "hard_iou" in results["metrics"]
    record = json.loads((out / "model_outputs.jsonl").read_text().splitlines()[0])
    assert record["span_messages"][-1]["content"] != record["messages"][-1]["content"]
    assert record["pred_spans"] == [{"text": PHRASE, "start": 41, "end": 43, "confidence": 0.9}]  # JSON, not text
    assert record["gold_hard_labels"] == rows[0]["Hard labels"] and record["pred_hard_labels"] == [[41, 43]]
    assert "hard_iou_distribution.png" in run.plots() and "confusion_matrix.png" in run.figures


@pytest.mark.parametrize("level", ["hard_spans", "soft_spans"])
def test_a_span_level_asks_only_the_spans_and_is_summarised_by_iou(tmp_path, level):
    client = ScriptedClient(_respond)
    run = _run(tmp_path, level, client)
    assert all(r.response_format is not None for r in run.requests)       # what model_outputs shows was sent
    run.generate()
    assert len(client.calls) == 12
    m = run.compute_metrics()
    assert "acc" not in m and run.headline == "hard_iou"
    assert ("soft_spearman" in m) == (level == "soft_spans")
    table = run.metrics_table()
    assert "hard_iou (no span)" in table.index and "hard_iou (whole answer)" in table.index


@pytest.mark.parametrize("level", ["hard_spans", "soft_spans"])
def test_model_outputs_carry_the_predicted_and_gold_spans_at_a_span_level(tmp_path, level):
    """Each record holds the reply, the located phrases and the gold and predicted labels as JSON
    values; the expected ones are rebuilt here from the data rows and the scripted replies."""
    missing = "a phrase the answer does not contain"

    def respond(request):
        content = request.messages[-1]["content"]
        if "693 km" in content:  # two phrases, one not in the answer: kept with null offsets
            return json.dumps({"spans": [{"text": "693 km", "confidence": 0.4}, {"text": missing, "confidence": 0.8}]})
        if "visible bands" in content:  # no hallucination
            return json.dumps({"spans": []})
        return json.dumps({"spans": [{"text": PHRASE, "confidence": 0.9}]})

    run = _run(tmp_path, level, ScriptedClient(respond))
    run.generate()
    out = run.save()
    records = [json.loads(line) for line in (out / "model_outputs.jsonl").read_text().splitlines()]
    # the report says how soft_spearman scores an item with a constant side (the scorer's rule)
    notes = json.loads((out / "results.json").read_text())["notes"]
    rule = "counts 1 when both sides are constant and 0 when only one is"
    assert any(rule in n for n in notes) == (level == "soft_spans")
    rows = [json.loads(line) for line in DATA.read_text().splitlines()][:12]
    assert len(records) == len(rows) == 12
    for record, row in zip(records, rows):
        answer = row["Answer"]
        assert record["gold_hard_labels"] == row["Hard labels"]
        assert record["gold_soft_labels"] == [{"start": s["start"], "end": s["end"], "text": answer[s["start"]:s["end"]],
                                               "prob": s["prob"]} for s in row["Soft labels"]]
        assert record["span_response"] == record["response"]  # the span call is the run's only call
        assert "span_messages" not in record                    # `messages` already are the span question
        if "693 km" in answer:
            at = answer.find("693 km")
            phrases = [("693 km", at, at + 6, 0.4), (missing, None, None, 0.8)]
        elif "visible bands" in answer:
            phrases = []
        else:
            at = answer.find(PHRASE)
            phrases = [(PHRASE, at, at + len(PHRASE), 0.9) if at >= 0 else (PHRASE, None, None, 0.9)]
        assert record["pred_spans"] == [{"text": t, "start": s, "end": e, "confidence": c} for t, s, e, c in phrases]
        assert record["spans_not_in_text"] == sum(s is None for _, s, _, _ in phrases)
        found = [(s, e, c) for _, s, e, c in phrases if s is not None]
        # a confidence above 0.5 makes a hard span (Mu-SHROOM derives hard labels so)
        assert record["pred_hard_labels"] == [[s, e] for s, e, c in found if c > 0.5]
        assert record["pred_soft_labels"] == [{"start": s, "end": e, "text": answer[s:e], "prob": c} for s, e, c in found]


def test_the_span_view_shows_model_and_dataset_text_as_text(tmp_path):
    payload = "<img src=x onerror=alert(1)>"
    rows = [{"Question": "Q?", "Answer": f"Band {PHRASE} at 10 m {payload}.", "Hard labels": [[5, 7]],
             "Soft labels": [{"start": 5, "end": 7, "text": PHRASE, "prob": 1.0}], "is_hallucinated": True}]
    data = tmp_path / "h.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = _run(tmp_path, "soft_spans", dataset=data)
    run.generate()
    html = run.span_view(1).data
    assert payload not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_level_is_refused_on_other_tasks_and_plan_counts_the_span_calls(tmp_path):
    from evekit.batch import plan

    with pytest.raises(ParameterError, match="level='all' applies to hallucination_detection"):
        TaskRun.from_notebook({"task": "open_ended", "model_name": "m", "base_url": "http://127.0.0.1:9/v1",
                               "level": "all"})
    params = {"model_name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None, "dataset": str(DATA),
              "limit": 5, "level": "all", "cache_dir": str(tmp_path / "c"), "output_dir": str(tmp_path / "o"),
              "run_name": "p"}
    path = tmp_path / "hallucination_detection.yaml"
    path.write_text(yaml.safe_dump(params))
    table = plan.plan_table(plan.plan_files([path]))
    assert int(table["to_send"].sum()) == 10


def test_the_span_call_is_bounded_by_the_longest_answer_and_sent_as_planned(tmp_path):
    rows = [json.loads(line) for line in DATA.read_text().splitlines()][:12]
    longest = max(len(r["Answer"]) for r in rows)
    client = ScriptedClient(_respond)
    run = _run(tmp_path, "hard_spans", client)
    expected = max(128, min(512, 96 + (longest + 1) // 2))
    assert run.span_max_tokens == expected < 512
    assert {r.max_tokens for r in run.span_requests} == {expected}
    run.generate()
    assert {call.max_tokens for call in client.calls} == {expected}
    assert json.loads((run.save() / "results.json").read_text())["span_max_tokens"] == expected
    # an answer of 2,000 characters asks for the cap, a one-word answer for the floor
    from evekit import tasks
    long_item, short_item = (type(run.items[0])(**{**run.items[0].__dict__,
                                                   "fields": {**run.items[0].fields, "answer": a}})
                             for a in ("x" * 2000, "yes"))
    assert tasks.span_max_tokens([long_item]) == 512 and tasks.span_max_tokens([short_item]) == 128
