"""Notebook parameters: types, valid values, key names only, and the server-URL placeholder."""
from __future__ import annotations

import pytest

from evekit.client import ModelClient
from evekit.errors import ParameterError
from evekit.paths import resolve_path
from evekit.runs.task.params import TaskParams as RunConfig

BASE = {"task": "mcqa_single_answer", "model_name": "m", "base_url": "http://127.0.0.1:1/v1"}


def test_valid_parameters_pass_and_keep_their_values():
    config = RunConfig.from_namespace({**BASE, "limit": 5, "temperature": 0, "offline": True, "unrelated": 1})
    assert (config.limit, config.offline, config.api) == (5, True, "chat")


@pytest.mark.parametrize("override, message", [
    ({"task": "open-ended"}, "valid tasks: mcqa_single_answer, mcqa_multiple_answer, open_ended"),
    ({"api": "responses"}, "use one of: chat, completions"),
    ({"fewshot_sampler": "last"}, "use one of: first_n, random"),
    ({"limit": 2.5}, "limit=2.5 has type float; expected int or None"),
    ({"offline": "yes"}, "offline='yes' has type str; expected bool"),
    ({"concurrency": True}, "concurrency=True has type bool; expected int"),
    ({"concurrency": 0}, "concurrency=0 must be at least 1"),
    ({"api_key_env": "sk-" + "x" * 10}, "never the key itself"),
    ({"judges": [{"name": "j", "model": "x", "base_url": "u", "api_key": "secret"}]}, "never the key itself"),
    ({"judges": [{"name": "j", "model": "x"}]}, "missing base_url"),
    ({"judges": [{"name": "j", "model": "x", "base_url": "u"}, {"name": "j", "model": "y", "base_url": "u"}]},
     "judge names must be unique"),
])
def test_bad_parameters_fail_with_the_valid_values(override, message):
    with pytest.raises(ParameterError) as info:
        RunConfig.from_namespace({**BASE, **override})
    assert message in str(info.value)
    assert "secret" not in str(info.value)


def test_relative_paths_resolve_from_the_repository_when_not_found_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_path("data/open_ended.jsonl").is_file()
    (tmp_path / "mine.jsonl").write_text("{}")
    assert resolve_path("mine.jsonl") == (tmp_path / "mine.jsonl").relative_to(tmp_path)


def test_server_url_placeholder_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("EVEKIT_SERVER_URL", "http://127.0.0.1:4321/v1")
    assert ModelClient("m", "${EVEKIT_SERVER_URL}").base_url == "http://127.0.0.1:4321/v1"
    monkeypatch.delenv("EVEKIT_SERVER_URL")
    with pytest.raises(ValueError, match="export EVEKIT_SERVER_URL"):
        ModelClient("m", "${EVEKIT_SERVER_URL}")


def _build_notebooks():
    """scripts/build_notebooks.py as a module (it is a script, not part of the package)."""
    import importlib.util

    from evekit.paths import REPO_ROOT

    spec = importlib.util.spec_from_file_location("build_notebooks", REPO_ROOT / "scripts" / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _assignments(source: str) -> list[tuple[str, object]]:
    import ast

    return [(node.targets[0].id, ast.literal_eval(node.value)) for node in ast.parse(source).body]


def _parameters_cell(nb) -> str:
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return cell.source


def test_every_runconfig_field_has_a_help_line():
    from dataclasses import fields

    assert all(f.metadata.get("help") for f in fields(RunConfig))


# The parameters cells of every notebook: tests/test_run_kinds.py.


def test_unknown_judge_key_is_refused_with_a_did_you_mean():
    judge = {"name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1", "temprature": 0.5}
    with pytest.raises(ParameterError, match=r"judge 'j': unknown judge key 'temprature' \(did you mean 'temperature'\?\)"):
        RunConfig(task="open_ended", model_name="m", base_url="http://127.0.0.1:9/v1", judges=[judge]).validate()


def test_injected_parameter_that_is_not_a_parameter_is_refused():
    namespace = {"In": ["", "# Parameters (papermill overrides these)\nmodel_name = 'm'\n",
                        "# Parameters\nmodle_name = \"Org/Model-7B\"\nseed = 1\n"],
                 "task": "open_ended", "model_name": "m", "base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ParameterError, match=r"unknown parameter 'modle_name' \(did you mean 'model_name'\?\)"):
        RunConfig.from_namespace(namespace)
    namespace["In"][2] = "# Parameters\nseed = 1\n"
    assert RunConfig.from_namespace(namespace).model_name == "m"


@pytest.mark.parametrize("pasted", ["aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY",   # 32 mixed-case characters
                                    "sk-" + "proj-" + "abcdefghij" * 3, "hf_AbCdEfGhIjKlMnOpQrStUvWx",
                                    "my key", "A" * 80])
def test_a_key_pasted_into_api_key_env_is_refused_without_being_echoed(pasted):
    with pytest.raises(ParameterError, match="never the key itself") as err:
        RunConfig(task="open_ended", model_name="m", base_url="http://127.0.0.1:9/v1", api_key_env=pasted).validate()
    assert pasted not in str(err.value)
    judge = {"name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": pasted}
    with pytest.raises(ParameterError, match="never the key itself") as err:
        RunConfig(task="open_ended", model_name="m", base_url="http://127.0.0.1:9/v1", judges=[judge]).validate()
    assert pasted not in str(err.value)


@pytest.mark.parametrize("name", ["OPENROUTER_API_KEY", "OPENAI_API_KEY", "my_key", "HF_TOKEN", "KEY2"])
def test_ordinary_variable_names_are_accepted(name):
    RunConfig(task="open_ended", model_name="m", base_url="http://127.0.0.1:9/v1", api_key_env=name).validate()


@pytest.mark.parametrize("name, folder", [("smollm2-135m-instruct", "smollm2-135m-instruct"),
                                          ("Qwen2.5-7B", "Qwen2.5-7B"), ("Org/Model-7B", "Org__Model-7B"),
                                          ("../../etc", "_..__..__etc"), ("..", "_.."), ("a b", "a_b"),
                                          ("smollm2 · 5-shot", "smollm2_5-shot")])
def test_names_that_become_folders_are_made_safe_and_safe_names_stay(tmp_path, name, folder):
    from evekit.paths import safe_name

    assert safe_name(name) == folder
    config = RunConfig(task="open_ended", model_name=name, base_url="http://127.0.0.1:9/v1", run_name=name,
                       output_dir=str(tmp_path))
    assert config.out_dir == tmp_path / folder / folder / "open_ended"
    assert config.out_dir.resolve().is_relative_to(tmp_path.resolve())
