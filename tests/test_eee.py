"""results.eee.jsonl against the facts of the Every Eval Ever schema that evekit relies on.

The official schema is `eval.schema.json` at tag v0.2.1 of github.com/evaleval/every_eval_ever; it is
not copied here (no network in tests). EEE_FACTS below restates, as a small JSON schema, only what
evekit's records depend on, as that file says at v0.2.1:
- the top-level required fields;
- `source_data` is exactly one of three variants, told apart by `source_type`: `url` (requires
  dataset_name, source_type, url), `hf_dataset` (requires dataset_name, source_type; optional hf_repo,
  hf_split, samples_number, sample_ids, additional_details), `other` (requires dataset_name,
  source_type; optional additional_details); there is no `local_file`;
- every `additional_details` / `details` value is a string;
- a metric result: `score` a number, `confidence_interval` with `lower` and `upper` numbers,
  `num_samples` an integer, `lower_is_better` a boolean, a continuous score has min/max scores.
Stricter than the official schema in one way: a `source_data` may carry only the fields its variant
defines (the official variants do not forbid others), so evekit never writes fields EEE does not know.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from evekit import report
from evekit.runs import records
from evekit.runs.task import files as task_files, results as task_results
from evekit.paths import REPO_ROOT

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_NUMBER = {"type": "number"}

EEE_FACTS = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["schema_version", "evaluation_id", "retrieved_timestamp", "source_metadata", "model_info",
                 "eval_library", "evaluation_results"],
    "properties": {
        "schema_version": {"const": "0.2.1"},
        "evaluation_id": {"type": "string"},
        "evaluation_timestamp": {"type": "string"},
        "retrieved_timestamp": {"type": "string", "pattern": "^[0-9]+$"},
        "source_metadata": {
            "type": "object",
            "required": ["source_type", "source_organization_name", "evaluator_relationship"],
            "properties": {
                "source_type": {"enum": ["documentation", "evaluation_run"]},
                "evaluator_relationship": {"enum": ["first_party", "third_party", "collaborative", "other"]},
                "additional_details": _STRINGS,
            },
        },
        "model_info": {"type": "object", "required": ["name", "id"],
                       "properties": {"additional_details": _STRINGS}},
        "eval_library": {"type": "object", "required": ["name", "version"],
                         "properties": {"version": {"type": "string"}, "additional_details": _STRINGS}},
        "evaluation_results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["evaluation_name", "source_data", "metric_config", "score_details"],
                "properties": {
                    "evaluation_name": {"type": "string"},
                    "source_data": {"oneOf": [{"$ref": "#/$defs/url"}, {"$ref": "#/$defs/hf"},
                                              {"$ref": "#/$defs/other"}]},
                    "metric_config": {
                        "type": "object",
                        "required": ["lower_is_better"],
                        "properties": {"lower_is_better": {"type": "boolean"},
                                       "score_type": {"enum": ["binary", "continuous", "levels"]},
                                       "min_score": _NUMBER, "max_score": _NUMBER},
                        "if": {"properties": {"score_type": {"const": "continuous"}}},
                        "then": {"required": ["min_score", "max_score"]},
                    },
                    "score_details": {
                        "type": "object",
                        "required": ["score"],
                        "properties": {
                            "score": _NUMBER,
                            "details": _STRINGS,
                            "uncertainty": {
                                "type": "object",
                                "properties": {
                                    "confidence_interval": {
                                        "type": "object", "required": ["lower", "upper"],
                                        "properties": {"lower": _NUMBER, "upper": _NUMBER,
                                                       "confidence_level": {"type": "number", "minimum": 0,
                                                                            "maximum": 1},
                                                       "method": {"type": "string"}},
                                    },
                                    "num_samples": {"type": "integer"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "$defs": {
        "url": {"type": "object", "required": ["dataset_name", "source_type", "url"], "additionalProperties": False,
                "properties": {"dataset_name": {"type": "string"}, "source_type": {"const": "url"},
                               "url": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                               "additional_details": _STRINGS}},
        "hf": {"type": "object", "required": ["dataset_name", "source_type"], "additionalProperties": False,
               "properties": {"dataset_name": {"type": "string"}, "source_type": {"const": "hf_dataset"},
                              "hf_repo": {"type": "string"}, "hf_split": {"type": "string"},
                              "samples_number": {"type": "integer"},
                              "sample_ids": {"type": "array", "items": {"type": "string"}},
                              "additional_details": _STRINGS}},
        "other": {"type": "object", "required": ["dataset_name", "source_type"], "additionalProperties": False,
                  "properties": {"dataset_name": {"type": "string"}, "source_type": {"const": "other"},
                                 "additional_details": _STRINGS}},
    },
}


def _results(**params):
    return task_results.build_results(
        task="mcqa_single_answer", model="m",
        samples=pd.DataFrame({"unparsed": [False, True, False], "failed": [False, False, False]}),
        metrics={"acc": {"value": 0.5, "ci_low": 0.1, "ci_high": 0.9, "n": 2},
                 "fleiss_kappa": {"value": 0.2, "ci_low": -0.3, "ci_high": 0.6, "n": 2},
                 "no_ci": {"value": 0.4, "ci_low": None, "ci_high": float("nan"), "n": 2},
                 "nan": {"value": float("nan"), "ci_low": None, "ci_high": None, "n": 0}},
        usage={"requests": 3}, params={"api": "chat", "num_fewshot": 0, **params})


def _check(record: dict) -> None:
    jsonschema.Draft7Validator.check_schema(EEE_FACTS)
    errors = sorted(jsonschema.Draft7Validator(EEE_FACTS).iter_errors(record), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    assert [r["evaluation_name"] for r in record["evaluation_results"]] == ["acc", "fleiss_kappa", "no_ci"]


def _strings(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _assert_no_absolute_path(record: dict, *roots: Path) -> None:
    text = json.dumps(record)
    for root in (REPO_ROOT, *roots):
        assert str(root) not in text
    for s in _strings(record):
        assert not os.path.isabs(s) and not s.startswith("~"), s


def test_hub_dataset_is_the_hf_dataset_variant():
    record = task_results.to_eee(_results(split="test"), dataset="eve-esa/mcqa-single-answer")
    _check(record)
    for r in record["evaluation_results"]:
        assert r["source_data"] == {"dataset_name": "eve-esa/mcqa-single-answer", "source_type": "hf_dataset",
                                    "hf_repo": "eve-esa/mcqa-single-answer", "hf_split": "test"}
    _assert_no_absolute_path(record)


def test_hub_dataset_without_a_known_split_leaves_hf_split_out():
    record = task_results.to_eee(_results(split=None), dataset="eve-esa/open-ended")
    _check(record)
    assert "hf_split" not in record["evaluation_results"][0]["source_data"]


@pytest.mark.parametrize("given", ["data/mcqa_single_answer.jsonl", str(REPO_ROOT / "data/mcqa_single_answer.jsonl")])
def test_local_dataset_in_the_repository_is_other_with_its_relative_path(given):
    record = task_results.to_eee(_results(dataset=given), dataset=given)
    _check(record)
    for r in record["evaluation_results"]:
        assert r["source_data"] == {
            "dataset_name": "mcqa_single_answer.jsonl", "source_type": "other",
            "additional_details": {"path": "data/mcqa_single_answer.jsonl", "format": "jsonl"}}
    _assert_no_absolute_path(record)


def test_local_dataset_outside_the_repository_keeps_only_its_file_name(tmp_path):
    data = tmp_path / "private" / "my_items.csv"
    data.parent.mkdir()
    data.write_text("question,answer\nq,a\n")
    record = task_results.to_eee(_results(), dataset=str(data))
    _check(record)
    assert record["evaluation_results"][0]["source_data"] == {
        "dataset_name": "my_items.csv", "source_type": "other",
        "additional_details": {"path": "my_items.csv", "format": "csv"}}
    _assert_no_absolute_path(record, tmp_path)


def test_uncertainty_has_an_interval_only_with_numeric_bounds():
    results = {r["evaluation_name"]: r for r in task_results.to_eee(_results(), dataset="x/y")["evaluation_results"]}
    assert results["acc"]["score_details"]["uncertainty"] == {
        "confidence_interval": {"lower": 0.1, "upper": 0.9, "confidence_level": 0.95, "method": "bootstrap"},
        "num_samples": 2}
    assert results["no_ci"]["score_details"]["uncertainty"] == {"num_samples": 2}
    assert results["fleiss_kappa"]["metric_config"]["min_score"] == -1


def test_written_file_holds_a_record_that_meets_the_facts(tmp_path):
    samples = pd.DataFrame({"unparsed": [False, True, False], "failed": [False, False, False]})
    out = task_files.write_run(tmp_path / "r", samples, _results(run_name="demo"), dataset=str(tmp_path / "d.jsonl"))
    (line,) = (out / "results.eee.jsonl").read_text().splitlines()
    record = json.loads(line)
    _check(record)
    _assert_no_absolute_path(record, tmp_path)
