"""Task notebooks under papermill: secrets stay out of every output, parameters are checked in the
first cell, and the reports show the numbers of results.json. They replay the committed recording
of the embedded model (tests/fixtures/recorded_cache), so they need no server."""
from __future__ import annotations

import json
import os
from pathlib import Path

import papermill as pm
import pytest

from evekit.paths import REPO_ROOT as ROOT

SENTINEL = "evekit-sentinel-not-a-real-key-7f3a9c0e5b1d"


def _execute(notebook: str, out: Path, cwd: Path, **params) -> Path:
    executed = out / f"{notebook}.ipynb"
    pm.execute_notebook(str(ROOT / "notebooks" / f"{notebook}.ipynb"), str(executed), parameters=params,
                        cwd=str(cwd), kernel_name="python3", progress_bar=False)
    return executed


def test_secret_key_never_reaches_any_output(tmp_path, monkeypatch):
    monkeypatch.setenv("EVEKIT_TEST_KEY", SENTINEL)
    judges = [{"name": "smollm2-strict", "model": "smollm2-135m-instruct", "base_url": "http://127.0.0.1:8080/v1",
               "api_key_env": "EVEKIT_TEST_KEY", "max_tokens": 192, "reasoning_max_chars": 300},
              {"name": "smollm2-sampled", "model": "smollm2-135m-instruct", "base_url": "http://127.0.0.1:8080/v1",
               "api_key_env": "EVEKIT_TEST_KEY", "temperature": 0.7, "max_tokens": 192, "reasoning_max_chars": 300}]
    out = tmp_path / "outputs"
    executed = _execute("open_ended", tmp_path, ROOT, api_key_env="EVEKIT_TEST_KEY", judges=judges,
                        output_dir=str(out))
    from evekit.batch import render_html

    render_html(executed, out / "report.html")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "results.json" for p in files) and len(files) >= 6
    for path in files:
        assert SENTINEL not in path.read_text(errors="replace"), f"secret leaked into {path}"
    results = json.loads(next(p for p in files if p.name == "results.json").read_text())
    assert results["params"]["api_key_env"] == "EVEKIT_TEST_KEY"


@pytest.mark.parametrize("cwd", ["root", "elsewhere"])
def test_notebook_runs_from_any_working_directory_and_report_matches_results(tmp_path, cwd):
    workdir = ROOT if cwd == "root" else tmp_path
    out = tmp_path / "outputs"
    executed = _execute("mcqa_single_answer", tmp_path, workdir, output_dir=str(out))
    results = json.loads(next(out.rglob("results.json")).read_text())
    from evekit.batch import render_html

    render_html(executed, tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    acc = results["metrics"]["acc"]
    assert f"{acc['value']:.4f}".rstrip("0") in html
    assert acc["n"] == results["n"] - results["n_failed"] and results["n"] >= 40
    from evekit.runs.records import find_run_records

    (record,), _ = find_run_records(out)                                # the save step's hand-off
    assert (record.kind, record.notebook, record.run_name) == ("task", "mcqa_single_answer", "recorded")
    assert set(record.files) >= {"samples.csv", "results.json", "results.eee.jsonl", "letter_bias.png"}
    assert all((record.dir / f).is_file() for f in record.files)


@pytest.mark.parametrize("params, message", [
    ({"limit": "ten"}, "parameter limit='ten' has type str; expected int or None"),
    ({"api": "rest"}, "api='rest' is not valid; use one of: chat, completions"),
    ({"task": "mcqa"}, "unknown task 'mcqa'; valid tasks: mcqa_single_answer"),
])
def test_bad_parameter_fails_in_the_first_cell_with_the_valid_values(tmp_path, params, message):
    with pytest.raises(pm.PapermillExecutionError) as info:
        _execute("mcqa_single_answer", tmp_path, ROOT, output_dir=str(tmp_path / "outputs"), **params)
    assert message in str(info.value)
    assert "TaskRun.from_notebook" in info.value.source  # the first cell after the parameters
    assert not (tmp_path / "outputs").exists()


def test_misspelt_parameter_stops_the_notebook_and_writes_nothing(tmp_path):
    out = tmp_path / "outputs"
    with pytest.raises(pm.PapermillExecutionError, match=r"unknown parameter 'modle_name' \(did you mean 'model_name'\?\)"):
        _execute("mcqa_single_answer", tmp_path, ROOT, modle_name="Org/Model-7B", output_dir=str(out))
    assert not out.exists()


def test_a_base_url_without_offline_calls_the_endpoint(tmp_path):
    """The notebooks' defaults replay the recording but do not forbid the network: pointed at an
    endpoint, the calls not in the cache are sent."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from stub_server import StubServer

    with StubServer() as stub:
        _execute("mcqa_single_answer", tmp_path, ROOT, base_url=stub.base_url, model_name="stub-model",
                 cache_dir=str(tmp_path / "cache"), limit=3, output_dir=str(tmp_path / "out"))
        sent = stub.stats()["total"]
    assert sent == 3
    results = json.loads(next((tmp_path / "out").rglob("results.json")).read_text())
    assert results["usage"]["requests"] == 3 and results["n"] == 3


def test_the_committed_defaults_replay_without_any_call(tmp_path):
    """Every call of the judged demo notebook is in the recording (the judges' format probes too)."""
    _execute("open_ended", tmp_path, ROOT, output_dir=str(tmp_path / "out"))
    results = json.loads(next((tmp_path / "out").rglob("results.json")).read_text())
    assert results["usage"]["requests"] == 0 and results["n_judge_failed"] == 0


def test_judge_validation_notebook_runs_and_writes_its_outputs(tmp_path):
    """Against the stub server, which echoes the last message: no reply is a verdict (the answers'
    fake verdicts sit inside the <answer> block; the echo of the reminder is its template, copied),
    so every decision is an abstention and every rate is empty, never 0; files and report are written."""
    import sys

    import pandas as pd

    sys.path.insert(0, str(ROOT / "tests"))
    from stub_server import StubServer

    with StubServer() as stub:
        judges = [{"name": "echo", "model": "stub-model", "base_url": stub.base_url, "api_key_env": None}]
        executed = _execute("judge_validation", tmp_path, ROOT, judges=judges, limit=6, max_retries=0,
                            cache_dir=str(tmp_path / "cache"), output_dir=str(tmp_path / "out"), run_name="t")
    out = tmp_path / "out" / "t" / "judge_validation" / "fact_check"
    table = pd.read_csv(out / "judge_validation.csv")
    assert list(table["judge"]) == ["echo", "vote"] and list(table["abstained"]) == [6, 6]
    assert table[["accuracy", "kappa", "sensitivity", "specificity"]].isna().all().all()
    results = json.loads((out / "results.json").read_text())
    assert results["n"] == 6 and results["abstentions"]["echo"] == {"copied the template": 6}
    from evekit.batch import render_html
    from evekit.runs.records import find_run_records

    (record,), _ = find_run_records(tmp_path / "out")
    assert (record.kind, record.notebook) == ("judge_validation", "judge_validation")
    render_html(executed, out / "report.html", record_dir=out)
    html = (out / "report.html").read_text()
    assert "Judge validation" in html and "no usable verdict" in html


def test_judge_validation_notebook_rejects_an_unknown_parameter(tmp_path):
    with pytest.raises(pm.PapermillExecutionError) as info:
        _execute("judge_validation", tmp_path, ROOT, judge_kind="fact", output_dir=str(tmp_path / "o"))
    assert "judge_kind='fact' is not valid" in str(info.value)
