"""One display name per configuration (`evekit.naming`): the same on the index, the summary, a task
report's card, the win rate and the ranking."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evekit.errors import ParameterError
from evekit.naming import configuration_name, entry_name


def test_configuration_name_joins_model_and_run_unless_the_run_adds_nothing():
    assert configuration_name("smollm2-135m-instruct", "demo-5shot") == "smollm2-135m-instruct · demo-5shot"
    assert configuration_name("m", None) == "m"
    assert configuration_name("m", "") == "m"
    assert configuration_name("my-model-v2", "v2") == "my-model-v2"          # contained in the model's name
    assert configuration_name("gpt-4o", "gpt-4o") == "gpt-4o"                # equal
    assert configuration_name("Org/Model-7B", "Org__Model-7B") == "Org/Model-7B"  # the safe form `evekit init` uses


def _result(folder: Path, model: str, run: str | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"task": "open_ended", "model": model, "n": 1,
                                                     "params": {"run_name": run}}))
    samples = folder / "samples.csv"
    samples.write_text("doc_id,doc.Question,target,filtered_resps\n0,q,t,a\n")
    return samples


def test_entry_name_reads_results_json_beside_the_answers(tmp_path):
    # The folders say "Org__M" and "r_x"; results.json has the names as the user wrote them.
    samples = _result(tmp_path / "out" / "r_x" / "Org__M" / "open_ended", "Org/M", "r x")
    assert entry_name(samples) == "Org/M · r x"


def test_entry_name_falls_back_to_the_layout_then_eve_then_the_stem(tmp_path):
    assert entry_name(tmp_path / "out" / "demo-5shot" / "smollm2" / "open_ended" / "samples.csv") == "smollm2 · demo-5shot"
    assert entry_name(tmp_path / "eve" / "gpt-4o" / "samples_open_ended.csv") == "gpt-4o"
    assert entry_name(tmp_path / "answers_of_b.csv") == "answers_of_b"


def test_win_rate_and_ranking_entries_without_a_name_get_the_configuration_name(tmp_path):
    from evekit.runs.ranking.params import RankingParams
    from evekit.runs.win_rate.matching import model_specs

    a = _result(tmp_path / "out" / "demo" / "m" / "open_ended", "m", "demo")
    b = _result(tmp_path / "out" / "demo-5shot" / "m" / "open_ended", "m", "demo-5shot")
    specs = model_specs([{"file": str(a)}, {"file": str(b), "name": "chosen"}], "model_a")
    assert [s.name for s in specs] == ["m · demo", "chosen"]
    with pytest.raises(ParameterError, match="give each entry its own `name`"):
        model_specs([{"file": str(a)}, {"file": str(a)}], "models")
    with pytest.raises(ParameterError, match="needs a `file`"):
        model_specs([{"name": "x"}], "models")
    params = RankingParams.from_dict({"task": "open_ended", "models": [{"file": str(a)}, {"file": str(b)}],
                                      "judges": [{"name": "j", "model": "j", "base_url": "http://127.0.0.1:9/v1",
                                                  "api_key_env": None}]})
    assert [s.name for s in params.model_specs] == ["m · demo", "m · demo-5shot"]
