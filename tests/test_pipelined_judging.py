"""Pipelined judging: judges start on each answer as it arrives, and the samples are the same as
when every judge call waits for the last answer (counted and compared against stub servers)."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from evekit.runs.task.run import TaskRun

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def stubs():
    # The model echoes; the judges' endpoint refuses json_schema as llama.cpp does (so each judge
    # probes its structured-output chain first) and answers json_object requests with a verdict.
    with StubServer(latency=0.1) as model, StubServer(latency=0.02, verdicts=True,
                                                       reject_json_schema=True) as judges:
        yield model, judges


def _run(tmp_path: Path, name: str, model: StubServer, judges: StubServer, **extra) -> TaskRun:
    namespace = {
        "task": "open_ended", "model_name": "stub", "base_url": model.base_url, "api_key_env": None,
        "dataset": str(ROOT / "data" / "open_ended.jsonl"), "limit": 14, "num_fewshot": 0, "max_tokens": 64,
        "judges": [{"name": "strict", "model": "stub", "base_url": judges.base_url, "api_key_env": None},
                   {"name": "warm", "model": "stub", "base_url": judges.base_url, "api_key_env": None,
                    "temperature": 0.7}],
        "concurrency": 2, "cache_dir": str(tmp_path / name / "cache"), "output_dir": str(tmp_path / name),
        "run_name": "t", "offline": False, **extra}
    run = TaskRun.from_notebook(namespace)
    run.load()
    return run


def _judged(run: TaskRun) -> pd.DataFrame:
    run.generate()
    run.judge()
    return run.samples


def test_pipelined_judging_gives_the_same_samples_and_starts_before_generation_ends(tmp_path, stubs, monkeypatch):
    model, judges = stubs
    serial = _run(tmp_path, "serial", model, judges)
    monkeypatch.setattr(serial, "_judge_stream", lambda client: None)  # judge() makes every judge call
    expected = _judged(serial)
    assert serial._streamed is None

    piped = _run(tmp_path, "piped", model, judges)
    delivered, at_first_call = [0], []
    lock = threading.Lock()
    judge_case, make_panel = piped._judge_case, piped._panel

    def counting_case(position, result):
        with lock:
            delivered[0] += 1
        return judge_case(position, result)

    def recording_panel(progress=True):
        panel = make_panel(progress)
        ask = panel.ask_judge

        def ask_judge(spec, chats, max_probe=3):
            with lock:
                at_first_call.append(delivered[0])
            return ask(spec, chats, max_probe)
        panel.ask_judge = ask_judge
        return panel

    monkeypatch.setattr(piped, "_judge_case", counting_case)
    monkeypatch.setattr(piped, "_panel", recording_panel)
    got = _judged(piped)
    assert piped._streamed is not None
    pd.testing.assert_frame_equal(got, expected)
    assert got["judge_strict_method"].eq("json_object").all()   # probed, then the method found
    assert set(got["judge_strict"].dropna()) == {0.0, 1.0}        # real verdicts, both kinds
    # The first judge call went out while most answers were still being generated.
    assert at_first_call and min(at_first_call) < len(piped.items) // 2, at_first_call
    assert piped.judge_usage.requests == serial.judge_usage.requests


def test_a_cached_rerun_replays_the_pipelined_judges_without_a_call(tmp_path, stubs):
    model, judges = stubs
    first = _run(tmp_path, "a", model, judges)
    expected = _judged(first)
    again = _run(tmp_path, "a", model, judges, offline=True)   # same cache, no network allowed
    got = _judged(again)
    pd.testing.assert_frame_equal(got, expected)
    assert again.usage.requests == 0 and again.judge_usage.requests == 0
