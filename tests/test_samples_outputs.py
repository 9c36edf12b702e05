"""Every item inspectable: samples.csv columns (finish_reason, completion_tokens, truncated, the
choices, the answer under test, the documents), model_outputs.jsonl (what was sent and what came
back), worst() and show_failures(); and a run whose every call failed still saves its results."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from evekit import tasks as T
from evekit.data import items_from_rows
from evekit.errors import EndpointError
from evekit.runs.task.run import MISSING, RULE_REASON, TaskRun
from evekit.types import GenerationResult, Usage

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from stub_server import StubServer  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_client import ScriptedClient  # noqa: E402


MODEL = "fake-model"


def _mcqa_file(tmp_path, golds="ABCAB") -> Path:
    data = tmp_path / "m.jsonl"
    data.write_text("".join(json.dumps({"Question": f"q{i}?", "Choices": ["red", "green", "blue"], "Answer": g}) + "\n"
                            for i, g in enumerate(golds)))
    return data


def _params(tmp_path, data, **extra):
    return {"task": "mcqa_single_answer", "model_name": MODEL, "dataset": str(data),
            "base_url": "http://127.0.0.1:9/v1", "cache_dir": str(tmp_path / "cache"),
            "output_dir": str(tmp_path / "out"), "run_name": "t", **extra}


def _letter_run(monkeypatch, tmp_path, **extra):
    """q0 right, q1 cut off at max_tokens (unparsed), q2 wrong, q3 right, q4 right; 1 shot."""
    def respond(req):
        q = req.messages[-1]["content"].split("\n")[0].removeprefix("Question: ")
        if q == "q1?":
            return GenerationResult(text="The answer is probably", raw="The answer is probably",
                                    completion_tokens=8, finish_reason="length")
        letter = {"q0?": "A", "q2?": "A", "q3?": "A", "q4?": "B"}[q]
        return GenerationResult(text=letter, raw=letter, completion_tokens=1, finish_reason="stop")

    run = TaskRun.from_notebook(_params(tmp_path, _mcqa_file(tmp_path), num_fewshot=1, **extra))
    client = ScriptedClient(respond)
    monkeypatch.setattr(run, "_client", lambda *a, **k: client)
    return run, client


def test_samples_carry_finish_reason_tokens_truncation_and_choices(tmp_path, monkeypatch, capsys):
    run, client = _letter_run(monkeypatch, tmp_path)
    run.load()
    counts = run.generate()
    assert counts.loc["truncated at max_tokens", "count"] == 1
    assert counts["count"].dtype.kind == "i"  # counts are whole numbers
    out = run.save()
    s = pd.read_csv(out / "samples.csv")
    assert list(s.columns[:3]) == ["doc_id", "doc.Question", "target"]
    assert {"filtered_resps", "response", "parsed", "unparsed", "failed", "error", "acc"} <= set(s.columns)
    assert s["finish_reason"].tolist() == ["stop", "length", "stop", "stop", "stop"]
    assert s["truncated"].tolist() == [False, True, False, False, False]
    assert s["completion_tokens"].tolist() == [1, 8, 1, 1, 1]
    assert s["doc.Choices"][0] == "A. red | B. green | C. blue"
    results = json.loads((out / "results.json").read_text())
    assert results["n_truncated"] == 1 and results["n_unparsed"] == 1 and results["n_failed"] == 0
    assert "model_outputs.jsonl" in json.loads((out / "run.json").read_text())["files"]


def test_model_outputs_hold_the_requests_sent_and_what_came_back(tmp_path, monkeypatch):
    run, client = _letter_run(monkeypatch, tmp_path)
    run.load()
    run.generate()
    out = run.save()
    records = [json.loads(line) for line in (out / "model_outputs.jsonl").read_text().splitlines()]
    assert [r["doc_id"] for r in records] == [0, 1, 2, 3, 4]
    for record, sent, item in zip(records, client.calls, run.items):
        assert record["messages"] == [dict(m) for m in sent.messages]  # exactly what was sent
        assert len(record["messages"]) == 4  # system, one shot (user + assistant), the item
        assert record["item_prompt"] == sent.messages[-1]["content"]
        assert record["item"]["question"] == item.question and record["item"]["choices"] == ["red", "green", "blue"]
        assert record["logprobs"] is None and "prompt" not in record
    assert records[1]["response"] == "The answer is probably" and records[1]["parsed"] is None
    assert records[1]["finish_reason"] == "length" and records[1]["truncated"] is True
    assert records[1]["completion_tokens"] == 8 and records[1]["unparsed_reason"]
    assert records[0]["parsed"] == "A" and records[0]["finish_reason"] == "stop"


def test_model_outputs_of_a_completions_run_hold_the_prompt(tmp_path, monkeypatch):
    run, client = _letter_run(monkeypatch, tmp_path, api="completions")
    client.respond = lambda req: "A"
    run.load()
    run.generate()
    records = run.model_outputs()
    assert [r["prompt"] for r in records] == [req.prompt for req in client.calls]
    assert all("messages" not in r for r in records)
    assert records[0]["item_prompt"] == "Question: q0?\nA. red\nB. green\nC. blue\nAnswer:"
    assert client.calls[0].prompt.endswith(records[0]["item_prompt"])
    assert client.calls[0].prompt.count("Question:") == 2  # the shot is in the prompt, not the item's part


def test_worst_lists_only_failing_items_in_full(tmp_path, monkeypatch, capsys):
    run, _ = _letter_run(monkeypatch, tmp_path)
    run.load()
    run.generate()
    table = run.worst(5).data  # shown in full and wrapped (FullText); .data is the DataFrame
    assert table["doc_id"].tolist() == [1, 2]  # unparsed and wrong; the right answers are not listed
    assert table.set_index("doc_id")["truncated"].tolist() == [True, False]
    assert "2 failing item(s)" in capsys.readouterr().out
    assert run.worst(1).data["doc_id"].tolist() == [1]
    assert "showing 1 of 2 failing items" in capsys.readouterr().out
    html = run.worst(5).to_html()
    assert "pre-wrap" in html and "..." not in html and "nan" not in html.lower().replace("nan;", "")


def test_worst_says_so_when_nothing_fails(tmp_path, monkeypatch, capsys):
    run, client = _letter_run(monkeypatch, tmp_path)
    client.respond = lambda req: {"q0?": "A", "q1?": "B", "q2?": "C", "q3?": "A", "q4?": "B"}[
        req.messages[-1]["content"].split("\n")[0].removeprefix("Question: ")]
    run.load()
    run.generate()
    assert run.worst(5) is None
    assert "No failing items" in capsys.readouterr().out


def test_worst_of_a_judged_task_shows_the_judges_rationales(tmp_path, monkeypatch, capsys):
    data = tmp_path / "open.jsonl"
    data.write_text("".join(json.dumps({"Question": f"q{i}?", "Answer": f"ref {i}"}) + "\n" for i in range(4)))
    judges = [{"name": n, "model": f"judge-model-{n}", "base_url": "http://127.0.0.1:9/v1"} for n in ("j1", "j2")]
    run = TaskRun.from_notebook({"task": "open_ended", "model_name": MODEL, "base_url": "http://127.0.0.1:9/v1",
                                 "dataset": str(data), "cache_dir": str(tmp_path / "cache"), "num_fewshot": 0,
                                 "output_dir": str(tmp_path / "out"), "run_name": "t", "judges": judges})
    long = "a long answer " * 40
    answers = {"q0?": "good", "q1?": "bad " + long, "q2?": "", "q3?": "good"}
    model = ScriptedClient(lambda req: answers[req.messages[-1]["content"].removeprefix("Question: ")])
    monkeypatch.setattr(run, "_client", lambda *a, **k: model)

    def verdict(req):
        bad = "bad" in req.messages[-1]["content"]
        return json.dumps({"reasoning": "wrong: contradicts the reference" if bad else "matches", "verdict": 0 if bad else 1})

    monkeypatch.setattr(run, "client_factory", lambda *a, **k: ScriptedClient(verdict))
    run.load()
    run.generate()
    run.judge()
    table = run.worst(5).data
    assert table["doc_id"].tolist() == [1, 2]  # judge_voting 0 (the vote) and the empty answer (by rule)
    by_id = table.set_index("doc_id")
    assert by_id.loc[1, "judge_j1_reasoning"] == "wrong: contradicts the reference"
    assert by_id.loc[2, "judge_j2_reasoning"] == RULE_REASON
    assert by_id.loc[1, "filtered_resps"] == "bad " + long  # in full
    assert "judge_voting" in table.columns and "truncated" in table.columns


def test_show_failures_says_when_it_cuts_the_list(tmp_path, monkeypatch, capsys):
    run, client = _letter_run(monkeypatch, tmp_path)
    client.respond = lambda req: "no idea"
    run.load()
    run.generate()
    run.show_failures(2)
    out = capsys.readouterr().out
    assert "5 unparsed answers (scored wrong) (showing 2 of 5):" in out
    assert "0 failed calls" in out


def test_items_of_every_task_carry_what_a_reader_needs():
    halluc = T.get_task("hallucination_detection")
    items = items_from_rows(halluc, [{"Question": "q?", "Answer": "Sentinel-2 has 13 bands.", "is_hallucinated": False}],
                            source="h.jsonl")
    s = T.score_samples(halluc, items, [GenerationResult(text="B", raw="B", finish_reason="stop", completion_tokens=1)])
    assert s["doc.Answer"][0] == "Sentinel-2 has 13 bands."
    multi = T.get_task("mcqa_multiple_answer")
    items = items_from_rows(multi, [{"Question": "q?", "Choices": ["x", "y"], "Answers": ["A"]}], source="m.jsonl")
    s = T.score_samples(multi, items, [GenerationResult(text=None, error="timeout")])
    assert s["doc.Choices"][0] == "A. x | B. y"
    assert s["truncated"][0] is False or not s["truncated"][0]
    assert pd.isna(s["finish_reason"][0]) and pd.isna(s["completion_tokens"][0])
    assert list(T.score_samples(multi, [], []).columns) == T.SAMPLE_COLUMNS


def test_metrics_table_spells_missing_values_one_way(tmp_path, monkeypatch):
    run, client = _letter_run(monkeypatch, tmp_path)
    run.load()
    run.generate()
    table = run.metrics_table()
    cells = table.to_numpy().ravel().tolist()
    assert not any(c is None or (isinstance(c, float) and c != c) for c in cells)
    assert MISSING in cells  # the chance baseline has no interval
    assert all(isinstance(n, int) for n in table["n"])


# ------------------------------------------------------------------------ every call failed

def test_a_run_whose_every_call_failed_saves_its_results(tmp_path, capsys):
    data = tmp_path / "m.jsonl"
    data.write_text("".join(json.dumps({"Question": f"[[fail]] q{i}?", "Choices": ["a", "b", "c"], "Answer": "A"}) + "\n"
                            for i in range(3)))
    with StubServer() as stub:
        run = TaskRun.from_notebook({**_params(tmp_path, data, num_fewshot=0, max_retries=1, timeout=5),
                                     "base_url": stub.base_url})
        run.load()
        counts = run.generate()
        assert stub.stats()["faults"]["500"] == 6  # every item tried twice (one retry)
    assert counts.loc["failed (excluded)", "count"] == 3 and counts.loc["answered", "count"] == 0
    table = run.metrics_table()
    assert table.loc["acc", "value"] == MISSING and "undefined" in table.loc["acc", "note"]
    assert run.plots() == {}
    assert run.worst(5) is None
    run.show_failures()
    out = run.save()
    printed = capsys.readouterr().out
    assert "Every call failed after its retries" in printed and "Plots skipped" in printed
    files = json.loads((out / "run.json").read_text())["files"]
    assert files == ["samples.csv", "results.json", "results.eee.jsonl", "model_outputs.jsonl"]
    results = json.loads((out / "results.json").read_text())
    assert results["n"] == results["n_failed"] == 3 and results["n_unparsed"] == 0
    assert all(m["value"] is None for m in results["metrics"].values())
    assert any("Every call failed" in n for n in results["notes"])
    s = pd.read_csv(out / "samples.csv")
    assert s["failed"].all() and s["error"].str.contains("HTTP 500").all() and s["acc"].isna().all()
    records = [json.loads(line) for line in (out / "model_outputs.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["failed"] and r["response"] is None for r in records)
    assert records[0]["messages"][-1]["content"].startswith("Question: [[fail]] q0?")
    eee = json.loads((out / "results.eee.jsonl").read_text())
    assert eee["evaluation_results"] == []  # no score to report


def test_a_configuration_error_still_stops_at_once(tmp_path):
    with StubServer(models=("another-model",)) as stub:
        run = TaskRun.from_notebook({**_params(_mcqa_file(tmp_path).parent, _mcqa_file(tmp_path), num_fewshot=0),
                                     "base_url": stub.base_url})
        run.load()
        with pytest.raises(EndpointError):
            run.generate()
    assert run.samples is None


def test_worst_as_plain_text_keeps_every_character(tmp_path, monkeypatch):
    run, client = _letter_run(monkeypatch, tmp_path)
    long = "because " * 60 + "the end"
    client.respond = lambda req: long
    run.load()
    run.generate()
    shown = run.worst(1)
    assert long in repr(shown) and long in shown.to_html()
    assert "Styler" not in repr(shown)
