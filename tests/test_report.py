"""results.json and the Every Eval Ever record: fields, counts, no secrets, JSON-safe numbers."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from evekit.runs.registry import KINDS
from evekit import report
from evekit.runs import records
from evekit.runs.task import files as task_files, results as task_results


def _samples() -> pd.DataFrame:
    return pd.DataFrame({
        "doc_id": [0, 1, 2, 3],
        "unparsed": [False, True, False, False],
        "failed": [False, False, True, False],
        "acc": [1.0, 0.0, np.nan, 1.0],
    })


def _results(**params):
    return task_results.build_results(
        task="mcqa_single_answer", model="m", samples=_samples(),
        metrics={"acc": {"value": 2 / 3, "ci_low": 0.0, "ci_high": 1.0, "n": 3},
                 "f1": {"value": float("nan"), "ci_low": None, "ci_high": None, "n": 0}},
        usage={"requests": 4, "cache_hits": 0}, params={"api": "chat", "num_fewshot": 2, **params})


def test_counts_and_json_safety():
    res = _results()
    assert (res["n"], res["n_unparsed"], res["n_failed"]) == (4, 1, 1)
    assert res["metrics"]["f1"]["value"] is None  # NaN is not valid JSON
    json.dumps(res, allow_nan=False)


def test_secret_values_never_recorded_only_variable_names():
    res = _results(api_key="do-not-record", api_key_env="MY_KEY",
                   judges=[{"name": "j", "model": "x", "base_url": "u", "api_key": "sk-nope", "api_key_env": "J"}])
    text = json.dumps(res)
    assert "do-not-record" not in text and "sk-nope" not in text
    assert res["params"]["api_key_env"] == "MY_KEY" and res["params"]["judges"][0]["api_key_env"] == "J"


def test_eee_record_has_the_schema_fields_and_item_counts():
    eee = task_results.to_eee(_results(), dataset="eve-esa/mcqa-single-answer")
    assert eee["schema_version"] == "0.2.1"
    for key in ("evaluation_id", "evaluation_timestamp", "retrieved_timestamp", "source_metadata", "model_info",
                "eval_library", "evaluation_results"):
        assert key in eee
    assert eee["evaluation_id"].startswith("mcqa_single_answer/m/")
    assert eee["retrieved_timestamp"].isdigit()
    assert eee["model_info"]["id"] == "m" and eee["eval_library"]["name"] == "evekit"
    (acc,) = eee["evaluation_results"]  # the NaN metric is left out, not reported as 0
    assert acc["evaluation_name"] == "acc"
    assert acc["source_data"] == {"dataset_name": "eve-esa/mcqa-single-answer", "source_type": "hf_dataset",
                                  "hf_repo": "eve-esa/mcqa-single-answer"}  # no split among the params
    details = acc["score_details"]
    assert math.isclose(details["score"], 2 / 3)
    ci = details["uncertainty"]["confidence_interval"]
    assert (ci["lower"], ci["upper"], ci["confidence_level"], ci["method"]) == (0.0, 1.0, 0.95, "bootstrap")
    assert details["uncertainty"]["num_samples"] == 3  # items behind the metric, not resamples
    # EuroEval's count (unparsed included), beside evekit's split into unparsed and failed calls
    assert details["details"]["num_failed_instances"] == "2.0"
    assert details["details"]["num_unparsed_instances"] == "1.0"
    assert details["details"]["num_infrastructure_failed_instances"] == "1.0"


def test_write_run_writes_the_three_files_and_its_record(tmp_path):
    out = task_files.write_run(tmp_path / "r", _samples(), _results(run_name="demo"), dataset="data/x.jsonl")
    assert sorted(p.name for p in out.iterdir()) == ["results.eee.jsonl", "results.json", "run.json", "samples.csv"]
    record = records.read_run_record(out / "run.json")
    assert (record.kind, record.notebook, record.run_name, record.dir) == ("task", "mcqa_single_answer", "demo", out)
    assert record.files == ("samples.csv", "results.json", "results.eee.jsonl")
    assert record.details["model"] == "m"
    line = (out / "results.eee.jsonl").read_text().splitlines()
    source = json.loads(line[0])["evaluation_results"][0]["source_data"]
    assert len(line) == 1 and source["source_type"] == "other"  # EEE 0.2.1 has no local-file variant
    assert source["additional_details"]["path"] == "data/x.jsonl"


def test_index_shows_the_baseline_and_win_rates_with_their_intervals(tmp_path):
    import pandas as pd

    from evekit.batch.index import write_index
    from evekit.runs.records import write_run_record

    run = tmp_path / "demo"
    task_dir = run / "m" / "mcqa_single_answer"
    task_dir.mkdir(parents=True)
    results = {"task": "mcqa_single_answer", "model": "m", "n": 61, "n_unparsed": 0, "n_failed": 0,
               "metrics": {"acc": {"value": 0.213, "ci_low": 0.129, "ci_high": 0.331, "n": 61}},
               "baselines": {"most_frequent": {"answer": "A", "value": 0.262, "ci_low": 0.168, "ci_high": 0.384,
                                               "n": 61}}}
    (task_dir / "results.json").write_text(json.dumps(results))
    write_run_record(task_dir, kind=KINDS["task"], notebook="mcqa_single_answer", run_name="demo")
    wr = run / "win_rate" / "a_vs_b"
    wr.mkdir(parents=True)
    pd.DataFrame([{"judge": "j", "model_a": "a", "model_b": "b", "n": 12, "win_rate_a": 0.5, "win_rate_b": 0.25,
                   "tie_rate": 0.25, "alpaca_win_rate_a": 0.625, "win_rate_a_ci_low": 0.25, "win_rate_a_ci_high": 0.75,
                   "win_rate_b_ci_low": 0.09, "win_rate_b_ci_high": 0.53, "tie_rate_ci_low": 0.09,
                   "tie_rate_ci_high": 0.53, "alpaca_win_rate_a_ci_low": 0.44, "alpaca_win_rate_a_ci_high": 0.79},
                  {"judge": "average", "model_a": "a", "model_b": "b", "n": None, "win_rate_a": 0.5,
                   "win_rate_b": 0.25, "tie_rate": 0.25, "alpaca_win_rate_a": 0.625, "win_rate_a_ci_low": 0.25,
                   "win_rate_a_ci_high": 0.75, "win_rate_b_ci_low": 0.09, "win_rate_b_ci_high": 0.53,
                   "tie_rate_ci_low": 0.09, "tie_rate_ci_high": 0.53, "alpaca_win_rate_a_ci_low": 0.44,
                   "alpaca_win_rate_a_ci_high": 0.79}]).to_csv(wr / "summary.csv", index=False)
    write_run_record(wr, kind=KINDS["win_rate"], notebook="win_rate", run_name="demo")
    page = write_index(run).read_text()
    assert 'always "A": 0.262 [0.17, 0.38] (not beaten)' in page.replace("&quot;", '"')
    assert ("a 0.500 [0.25, 0.75], b 0.250 [0.09, 0.53], ties 0.250 [0.09, 0.53]; "
            "alpaca win rate of a 0.625 [0.44, 0.79]; n = 12 questions") in page
