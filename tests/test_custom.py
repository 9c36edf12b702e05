"""Bring your own data and tasks: column mapping, custom task files, offline preparation.

Everything runs against scripted fake clients or a pre-filled cache; nothing needs a server or
the internet (the offline test proves that no socket is even opened).
"""
from __future__ import annotations

import sys

import json
import re
import socket
from pathlib import Path

import datasets
import pandas as pd
import pytest

from evekit import custom, tasks
from evekit.cache import ResponseCache, cache_key
from evekit.custom import TaskFileError, load_task, task_from_dict
from evekit.data import DataError
from evekit.tasks import load_items
from evekit.errors import ParameterError
from evekit.runs.task.params import TaskParams as RunConfig
from evekit.paths import REPO_ROOT as ROOT
from evekit.runs.task.run import TaskRun
from evekit.types import GenerationResult, Usage
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_client import ScriptedClient  # noqa: E402


SENTINEL_TASK = "params/examples/tasks/sentinel_missions.yaml"
MCQ_TASK = "params/examples/tasks/eo_satellite_mcq.eval.yaml"
MODEL = "fake-model"


def last_user(req) -> str:
    return req.messages[-1]["content"] if req.messages else req.prompt.rsplit("\n\n", 1)[-1]


def run_with(monkeypatch, tmp_path, client, task_file, **params) -> TaskRun:
    namespace = {"task_file": task_file, "model_name": MODEL, "base_url": "http://127.0.0.1:9/v1",
                 "split": None, "cache_dir": str(tmp_path / "cache"), "output_dir": str(tmp_path / "out"),
                 "run_name": "t", **params}
    run = TaskRun.from_notebook(namespace)
    monkeypatch.setattr(run, "_client", lambda *a, **k: client)
    return run


# ----------------------------------------------------------------------------- example 1

def test_classification_example_runs_end_to_end(tmp_path, monkeypatch):
    csv = pd.read_csv(ROOT / "data/examples/sentinel_missions.csv")
    gold = dict(zip(csv["observation_text"], csv["mission_code"]))
    names = {"S1": "Sentinel-1", "S2": "Sentinel-2", "S3": "Sentinel-3", "S5P": "Sentinel-5P", "S6": "Sentinel-6"}
    texts = list(csv["observation_text"])

    def respond(req):
        text = re.search(r"Description: (.*)\n", last_user(req)).group(1)
        i = texts.index(text)
        if i == 0:
            return GenerationResult(text=None, error="HTTP 503 after 4 retries")  # infrastructure
        if i == 1:
            return "I am not sure."                                            # unparsed: wrong
        if i == 2:
            return "Sentinel-1 or Sentinel-2"                                  # ambiguous: wrong
        if i == 3:
            return "Sentinel-6"                                                # wrong label
        return f"{names[gold[text]]}."                                         # right (mapped word)

    client = ScriptedClient(respond)
    run = run_with(monkeypatch, tmp_path, client, SENTINEL_TASK)
    loaded = run.load()
    assert len(loaded) == 18 and set(loaded["target"]) == set(names)
    # The prompt uses the label words, and 2 few-shot examples as the task file says.
    first = run.requests[0].messages
    assert first[0]["role"] == "system" and len(first) == 1 + 2 * 2 + 1
    assert "Sentinel-1, Sentinel-2, Sentinel-3, Sentinel-5P or Sentinel-6" in first[-1]["content"]
    assert first[2] == {"role": "assistant", "content": names[loaded["target"][1]]}
    run.generate()
    s = run.samples
    assert list(s["failed"]) == [True] + [False] * 17
    assert s.loc[1, "unparsed"] and s.loc[1, "unparsed_reason"] == "no label from the list found"
    assert s.loc[2, "unparsed"] and "several labels" in s.loc[2, "unparsed_reason"]
    assert s.loc[4, "parsed"] == gold[texts[4]] and s.loc[4, "acc"] == 1.0
    metrics = run.compute_metrics()
    assert metrics["acc"]["n"] == 17
    assert metrics["acc"]["value"] == pytest.approx(14 / 17)
    run.plots()
    assert "label_confusion.png" in run.figures
    out = run.save()
    results = json.loads((out / "results.json").read_text())
    assert out.name == "sentinel_missions" and results["task"] == "sentinel_missions"
    assert (results["n"], results["n_failed"], results["n_unparsed"]) == (18, 1, 2)
    assert results["params"]["task_file"] == SENTINEL_TASK
    assert (out / "samples.csv").exists() and (out / "label_confusion.png").exists()
    eee = json.loads((out / "results.eee.jsonl").read_text())
    assert eee["evaluation_results"][0]["evaluation_name"] == "acc"


# ----------------------------------------------------------------------------- example 2

def test_inspect_eval_yaml_multiple_choice_example_runs_end_to_end(tmp_path, monkeypatch):
    task = load_task(MCQ_TASK)
    assert task.kind == "multiple_choice" and task.name == "eo_satellite_mcq"
    # top-level choices_column (four columns) wins over field_spec.choices
    assert task.column_mapping["choices_column"] == ["option_a", "option_b", "option_c", "option_d"]
    assert (task.default_num_fewshot, task.default_max_tokens) == (2, 8)
    csv = pd.read_csv(ROOT / "data/examples/eo_satellite_mcq.csv")
    answer = dict(zip(csv["question"], csv["correct"]))

    def respond(req):
        question = re.search(r"Question: (.*)\n", last_user(req)).group(1)
        return "B" if question.startswith("What does a sun") else f"The answer is {answer[question]}."

    run = run_with(monkeypatch, tmp_path, ScriptedClient(respond), MCQ_TASK, api="completions")
    run.load()
    prompt = run.requests[0].prompt
    assert prompt.startswith("The following are multiple-choice questions (with answers).")
    assert prompt.endswith("D. 35,786 km\nAnswer:") and prompt.count("Answer: ") == 2
    run.generate()
    metrics = run.compute_metrics()
    assert metrics["acc"]["value"] == pytest.approx(15 / 16) and metrics["acc"]["n"] == 16
    assert int(run.samples["unparsed"].sum()) == 0
    run.plots()
    out = run.save()
    assert (out / "letter_bias.png").exists()
    assert json.loads((out / "results.json").read_text())["params"]["split"] is None


# ----------------------------------------------------------------------------- wrong mappings

def test_column_that_does_not_exist_is_named_with_the_columns_that_do(tmp_path, monkeypatch):
    run = run_with(monkeypatch, tmp_path, ScriptedClient(lambda r: ""), SENTINEL_TASK, target_column="mission")
    with pytest.raises(DataError) as info:
        run.load()
    msg = str(info.value)
    assert "sentinel_missions.csv" in msg and "target_column='mission'" in msg and "'mission' not found" in msg
    assert "the file has columns: 'record_id', 'observation_text', 'mission_code'" in msg


def test_label_not_in_the_label_list_names_row_column_labels_and_columns(tmp_path):
    rows = pd.read_csv(ROOT / "data/examples/sentinel_missions.csv")
    rows.loc[2, "mission_code"] = "S9"
    bad = tmp_path / "missions.csv"
    rows.to_csv(bad, index=False)
    task = load_task(SENTINEL_TASK)
    with pytest.raises(DataError) as info:
        load_items(task, str(bad))
    msg = str(info.value)
    assert str(bad) in msg and "1 of 18 rows" in msg
    assert "row 2 (0-based), column 'mission_code' (used as 'target'): label 'S9' is not in the label list: " \
           "'S1', 'S2', 'S3', 'S5P', 'S6'" in msg
    assert "the file has columns: 'record_id', 'observation_text', 'mission_code'" in msg


def test_mapping_for_a_builtin_task_with_separate_choice_columns(tmp_path):
    rows = [{"q": "Which band does Sentinel-1 use?", "o1": "L", "o2": "C", "o3": "X", "ans": "B"},
            {"q": "How many MSI bands?", "o1": "13", "o2": "21", "o3": None, "ans": "A"}]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_items("mcqa_single_answer", str(path), input_column="Q", target_column="ans",
                       choices_column=["o1", "o2", "o3"])
    assert items[0].fields["choices"] == ["L", "C", "X"] and items[0].target == "B"
    assert items[1].fields["labels"] == ["A", "B"]  # a trailing empty choice column: two choices
    rows[1]["o1"] = None
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"row 1 \(0-based\), column 'o1': empty choice before a filled one"):
        load_items("mcqa_single_answer", str(path), input_column="q", target_column="ans",
                   choices_column=["o1", "o2", "o3"])


def test_mapping_context_columns_and_a_role_the_task_does_not_have(tmp_path):
    path = tmp_path / "rag.csv"
    pd.DataFrame({"query": ["What does OLCI measure?"], "gold": ["Ocean colour."],
                  "passage_a": ["OLCI on Sentinel-3 measures ocean and land colour."], "passage_b": [None]}
                 ).to_csv(path, index=False)
    items = load_items("open_ended_w_context", str(path), input_column="query", target_column="gold",
                       context_columns=["passage_a", "passage_b"])
    assert items[0].fields["docs"] == ["OLCI on Sentinel-3 measures ocean and land colour."]
    with pytest.raises(DataError, match="task open_ended has no choices column"):
        load_items("open_ended", str(path), input_column="query", target_column="gold", choices_column="x")


def test_mapping_parameters_are_validated_in_the_first_cell():
    base = {"task": "open_ended", "model_name": "m", "base_url": "http://x/v1"}
    with pytest.raises(ParameterError, match="context_columns"):
        RunConfig.from_namespace({**base, "context_columns": "passage"})
    with pytest.raises(ParameterError, match="split=None"):
        RunConfig.from_namespace({**base, "split": None})  # only a custom task may leave split to its file
    RunConfig.from_namespace({**base, "choices_column": ["a", "b"], "input_column": "q"})


# ----------------------------------------------------------------------------- task files

def write(tmp_path, name, text) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_inspect_field_spec_rules(tmp_path):
    write(tmp_path, "train.jsonl", json.dumps({"prompt": "Q?", "options": ["a", "b"], "label": "A"}) + "\n")
    eval_yaml = write(tmp_path, "eval.yaml", """
name: Tiny
tasks:
  - id: tiny_mc
    split: train
    field_spec: {input: prompt, target: "literal:A", choices: options}
""")
    task = load_task(str(eval_yaml))
    assert task.kind == "multiple_choice" and task.name == "tiny_mc"
    assert task.column_mapping["target_column"] == "label"       # literal: ignored -> EuroEval default
    assert task.hub_id.endswith("train.jsonl")                    # the data file next to eval.yaml
    assert load_items(task, task.hub_id)[0].target == "A"
    spec = {"tasks": [{"id": "x", "field_spec": {"input": "q", "target": 2}, "solvers": [{"name": "generate"}]}],
            "dataset": "d.csv", "labels": ["yes", "no"], "target_column": "ans"}
    task = task_from_dict(spec)
    assert task.kind == "classification"                          # labels, no choices
    assert task.column_mapping == {"input_column": "q", "target_column": "ans"}  # integer ignored; top level wins
    with pytest.raises(TaskFileError, match="cannot tell the kind of task"):
        task_from_dict({"tasks": [{"id": "x", "field_spec": {"input": "q", "target": "a"}}], "dataset": "d.csv"})


@pytest.mark.parametrize("change, message", [
    ({"prompt": {"instruction": "Text: {txt}"}}, "prompt.instruction: unknown placeholder(s) {txt}; valid: {text}"),
    ({"lables": ["a"]}, "unknown key(s) 'lables'"),
    ({"label_mapping": {"S7": "x"}}, "label_mapping': 'S7' is not in the label list: 'S1', 'S2'"),
    ({"kind": "ranking"}, "kind 'ranking' is not known; use one of: multiple_choice"),
    ({"metrics": ["rougeL"]}, "'metrics': ['rougeL'] not valid for a classification task; choose from: acc"),
    ({"name": "refusal"}, "'refusal' is a built-in EVE task"),
    ({"num_fewshot": -1}, "'num_fewshot' must be an integer >= 0"),
])
def test_bad_task_file_names_file_and_key(tmp_path, change, message):
    import yaml

    spec = yaml.safe_load((ROOT / SENTINEL_TASK).read_text())
    spec.update(change)
    path = write(tmp_path, "task.yaml", yaml.safe_dump(spec))
    with pytest.raises(TaskFileError) as info:
        load_task(str(path))
    assert str(path) in str(info.value) and message in str(info.value)


def test_squad_normalisation_token_f1_and_exact_match():
    assert custom.squad_normalize("The  Sentinel-2 satellite!") == "sentinel2 satellite"
    assert custom.exact_match("the Sentinel-2 satellite.", "Sentinel-2 satellite") == 1.0
    assert custom.token_f1("Sentinel-2 MSI", "the MSI instrument") == pytest.approx(0.5)  # p=1/2, r=1/2
    assert custom.token_f1("", "MSI") == 0.0 and custom.token_f1("a the", "an") == 1.0   # both empty


def test_extractive_qa_and_text_to_text_kinds(tmp_path):
    passage = "Sentinel-2 carries the MultiSpectral Instrument, which has 13 spectral bands."
    rows = [{"q": "How many bands does the MSI have?", "ctx": passage,
             "ans": {"text": ["13 spectral bands", "13"], "answer_start": [59, 59]}},
            {"q": "Which instrument does Sentinel-2 carry?", "ctx": passage, "ans": ["MultiSpectral Instrument"]}]
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = task_from_dict({"kind": "extractive_qa", "dataset": str(data), "input_column": "q",
                           "target_column": "ans", "context_columns": ["ctx"], "num_fewshot": 1})
    items = load_items(task, str(data))
    requests = tasks.build_requests(task, items)
    assert requests[0].messages[-1]["content"].startswith(f"Text: {passage}\n\nAnswer the following")
    assert requests[0].messages[1]["content"] == "MultiSpectral Instrument"  # the other item as the shot
    results = [GenerationResult(text="13"), GenerationResult(text="the Multispectral instrument on board")]
    df = tasks.score_samples(task, items, results)
    assert list(df["exact_match"]) == [1.0, 0.0]
    assert df.loc[1, "token_f1"] == pytest.approx(2 * (2 / 4) * 1.0 / (2 / 4 + 1.0))
    assert set(tasks.task_metrics(task, df)) == {"token_f1", "exact_match"}
    rows[0]["ans"] = {"text": ["14 bands"], "answer_start": [59]}
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"row 0 \(0-based\), column 'ans' \(used as 'target'\): answer '14 bands' "
                                        "is not at answer_start 59"):
        load_items(task, str(data))

    t2t = task_from_dict({"kind": "text_to_text", "dataset": str(data), "input_column": "q",
                          "target_column": "q", "num_fewshot": 0})
    df = tasks.score_samples(t2t, load_items(t2t, str(data)), [GenerationResult(text=r["q"]) for r in rows])
    assert list(df["rougeL"]) == [1.0, 1.0] and t2t.judge_kind is None


def test_open_qa_is_judged_like_open_ended(tmp_path):
    data = write(tmp_path, "qa.csv", "question,answer,doc\nWhat is SAR?,A radar imaging technique.,SAR is radar.\n")
    task = task_from_dict({"kind": "open_qa", "dataset": str(data), "input_column": "question",
                           "target_column": "answer", "context_columns": ["doc"]})
    assert task.judge_kind == "context"
    item = load_items(task, str(data))[0]
    fields = tasks.judge_case_fields(task, item, "Radar.")
    assert fields == {"question": "What is SAR?", "answer": "Radar.", "reference": "A radar imaging technique.",
                      "context": ["SAR is radar."]}


# ----------------------------------------------------------------------------- offline preparation

def _fake_hub(hub_id: str) -> datasets.DatasetDict:
    """Stands in for the Hub: the bundled sample file of the EVE task with that hub id."""
    task = next(t for t in tasks.TASKS.values() if t.hub_id == hub_id)
    ds = datasets.load_dataset("json", data_files={"train": str(ROOT / "data" / f"{task.name}.jsonl")})
    return ds


def test_prepare_writes_parquet_and_manifest(tmp_path):
    from evekit import prepare

    def loader(hub_id):
        if hub_id == "eve-esa/refusal":
            raise ConnectionError("hub unreachable")
        return _fake_hub(hub_id) if hub_id.startswith("eve-esa/") else prepare._load_all_splits(hub_id)

    manifest = prepare.prepare(["data/examples/sentinel_missions.csv"], dest=tmp_path, loader=loader,
                               fetch_eval_yaml=lambda d, f: None, log=lambda m: None)
    entries = manifest["datasets"]
    assert set(entries) == {*prepare.EVE_DATASETS, "data/examples/sentinel_missions.csv"}
    assert entries["eve-esa/refusal"]["error"] == "ConnectionError: hub unreachable"
    n_bundled = sum(1 for line in open(ROOT / "data/open_ended.jsonl") if line.strip())
    assert entries["eve-esa/open-ended"]["splits"]["train"]["rows"] == n_bundled
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    path = prepare.resolve_prepared("eve-esa/open-ended", "train", dest=tmp_path)
    assert path == tmp_path / "eve-esa__open-ended" / "train.parquet"
    assert len(pd.read_parquet(path)) == n_bundled
    assert prepare.resolve_prepared("eve-esa/open-ended", "test", dest=tmp_path) is None
    assert prepare.resolve_prepared("eve-esa/refusal", "train", dest=tmp_path) is None


def test_cli_prepare_a_local_dataset(tmp_path, capsys):
    from evekit.cli import main

    assert main(["prepare", "--dest", str(tmp_path), "--no-eve", "--dataset",
                 "data/examples/eo_satellite_mcq.csv"]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["datasets"]["data/examples/eo_satellite_mcq.csv"]["splits"]["train"]["rows"] == 16
    assert "prepared data/examples/eo_satellite_mcq.csv: train (16 rows)" in capsys.readouterr().out


def test_offline_run_opens_no_socket(tmp_path, monkeypatch):
    """offline=True with a hub id: the prepared copy is read and answers replay from the cache."""
    from evekit import prepare

    prepare.prepare(["eve-esa/mcqa-single-answer"], dest=tmp_path / "prepared", include_eve=False, loader=_fake_hub,
                    fetch_eval_yaml=lambda d, f: None, log=lambda m: None)
    monkeypatch.setenv("EVEKIT_PREPARED_DIR", str(tmp_path / "prepared"))
    namespace = {"task": "mcqa_single_answer", "model_name": MODEL, "base_url": "http://127.0.0.1:9/v1",
                 "dataset": "eve-esa/mcqa-single-answer", "num_fewshot": 0, "max_tokens": 32, "limit": 5,
                 "cache_dir": str(tmp_path / "cache"), "offline": True, "output_dir": str(tmp_path / "out")}
    # Record the answers as an earlier online run would have.
    warm = TaskRun.from_notebook(namespace)
    warm.load()
    with ResponseCache(tmp_path / "cache") as cache:
        cache.put_many([(cache_key(MODEL, r), {}, GenerationResult(text=f"answer {i}"))
                        for i, r in enumerate(warm.requests)])

    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    run = TaskRun.from_notebook(namespace)
    items = run.load()
    run.generate()
    assert attempts == []
    assert len(items) == 5 and run.usage.cache_hits == 5 and run.usage.requests == 0
    assert list(run.samples["filtered_resps"]) == [f"answer {i}" for i in range(5)]
    assert run.items[0].source.endswith("eve-esa__mcqa-single-answer/train.parquet")


def test_custom_notebook_defaults_replay_the_committed_recording(tmp_path):
    """The notebook's default parameters run the first example from the recording in tests/fixtures/custom_cache."""
    import shutil

    nb = json.loads((ROOT / "notebooks/custom_task.ipynb").read_text())
    namespace: dict = {}
    exec("".join(nb["cells"][1]["source"]), namespace)
    shutil.copy(ROOT / namespace["cache_dir"] / "custom_examples.jsonl", tmp_path / "custom_examples.jsonl")
    namespace.update(cache_dir=str(tmp_path), output_dir=str(tmp_path / "out"))
    for task_file, n in ((namespace["task_file"], 18), (MCQ_TASK, 16)):
        run = TaskRun.from_notebook({**namespace, "task_file": task_file})
        run.load()
        run.generate()
        assert not run.config.offline and run.usage.cache_hits == n and run.usage.requests == 0
        assert run.compute_metrics()["acc"]["n"] == n
