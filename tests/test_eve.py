"""EVE's evals.yaml and win_rate_config.yaml run unchanged (issue 25): parsing, conversion, the
refusal of literal keys, EVE's CSV spellings, EVE's win-rate definitions, and runs end to end
through `evekit run`, `evekit convert-eve`, `evekit eval` and `evekit.evaluate` against the stub."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

import evekit
from evekit import cli, eve
from evekit.errors import ParameterError
from evekit.runs.win_rate.eve_definitions import eve_definitions, eve_summary_table, eve_view
from evekit.runs.win_rate.matching import doc_column, read_answers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "params" / "eve"
MODEL_KEY = "sk-SENTINEL-model-key-4f1c9a77e2"
JUDGE_KEY = "sk-SENTINEL-judge-key-b83d5e01c6"
LITERAL = "sk-LITERAL-pasted-key-0d9e8c7b6a5f"


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("EVE_MODEL_KEY", MODEL_KEY)
    monkeypatch.setenv("EVE_JUDGE_KEY", JUDGE_KEY)
    monkeypatch.setenv("MISTRAL_API_KEY", JUDGE_KEY)
    for name in ("JUDGE_NAME", "JUDGE_BASE_URL", "JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tree_text(root: Path) -> bytes:
    """Every byte under `root` (outputs, parameter files, the SQLite cache)."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


# -- parsing and conversion ------------------------------------------------------------------------
def test_the_example_evals_yaml_converts_to_one_run_per_model_and_task(keys):
    conv = eve.convert(EXAMPLES / "evals.yaml")
    assert conv.format == "evals" and conv.output_dir == "outputs/eve/eval_results"
    mcqa, open_ended = conv.runs
    assert mcqa.filename == "mcqa_single_answer.smollm2-135m-instruct.yaml"
    assert open_ended.filename == "open_ended.smollm2-135m-instruct-open_ended_multi_judge.yaml"
    v = open_ended.values
    assert v["task"] == "open_ended"  # task_name wins over the entry's name
    assert v["base_url"] == "${EVEKIT_SERVER_URL}"  # its /chat/completions removed: no doubled path
    assert v["api_key_env"] == "EVE_MODEL_KEY" and v["api"] == "chat"
    assert (v["concurrency"], v["timeout"], v["num_fewshot"], v["max_tokens"], v["limit"]) == (2, 60.0, 0, 64, 3)
    assert [j["name"] for j in v["judges"]] == ["strict_judge", "second_judge"]  # !ref judges
    assert {j["api_key_env"] for j in v["judges"]} == {"EVE_JUDGE_KEY"}  # !ref judge_key -> ${EVE_JUDGE_KEY}
    assert v["dataset"] == "data/open_ended.jsonl"  # evekit's own task parameter passes through
    assert "judges" not in mcqa.values
    assert open_ended.origins["max_tokens"] == "models[0].tasks[1].max_tokens"
    assert conv.tracking == {"enabled": False, "project": "eve-evalkit", "tags": ["eve", "evekit"]}
    assert "\"api_key\":" not in json.dumps([r.values for r in conv.runs])  # only api_key_env, a NAME


def test_eve_defaults_tags_and_the_temperature_rule(tmp_path, keys):
    f = write(tmp_path / "evals.yaml", """
constants:
  shots: "3"
  inner: !ref shots
models:
  - name: org/model-7b
    base_url: http://localhost:8000/v1/completions/
    api_key: EMPTY
    temperature: 0.4
    tasks:
      - mcqa_single_answer
      - name: mcqa_multiple_answers
        num_fewshot: !int inner
        temperature: 0.9
        model_type: local-completions
""")
    a, b = eve.convert(f).runs
    assert a.values["base_url"] == b.values["base_url"] == "http://localhost:8000/v1"
    assert a.values["api_key_env"] is None  # a local server's "no key"
    assert (a.values["max_tokens"], a.values["num_fewshot"], a.values["concurrency"], a.values["timeout"]) == \
        (512, 0, 3, 300.0)  # EVE's defaults, not evekit's
    assert a.values["temperature"] == 0.4  # the task says 0: the model's
    assert b.values["task"] == "mcqa_multiple_answer" and b.values["num_fewshot"] == 3  # !int through two refs
    assert b.values["temperature"] == 0.9 and b.values["api"] == "completions"
    assert a.filename == "mcqa_single_answer.org-model-7b.yaml"
    assert (a.eve["samples"], b.eve["samples"]) == ("mcqa_single_answer", "mcqa_multiple_answers")  # EVE's names
    # local-completions with EVE's default apply_chat_template: accepted, the difference said once, for that task
    notes = [n for n in eve.convert(f).notes if "apply_chat_template" in n]
    assert len(notes) == 1 and notes[0].startswith("models[0].tasks[1]: model_type local-completions")


@pytest.mark.parametrize("url, expected", [
    ("https://api.example.com/v1/chat/completions", "https://api.example.com/v1"),
    ("https://api.example.com/v1/completions", "https://api.example.com/v1"),
    ("https://api.example.com/v1/", "https://api.example.com/v1"),
    ("https://openrouter.ai/api/v1/", "https://openrouter.ai/api/v1"),
])
def test_base_urls_lose_the_path_the_client_appends(url, expected):
    assert eve.normalize_base_url(url, "x") == expected


def test_judge_environment_variables_fill_a_judge_the_file_leaves_out(tmp_path, keys, monkeypatch):
    monkeypatch.setenv("JUDGE_NAME", "mistralai/mistral-large-2411")
    monkeypatch.setenv("JUDGE_BASE_URL", "https://openrouter.ai/api/v1/chat/completions")
    monkeypatch.setenv("JUDGE_API_KEY", JUDGE_KEY)
    f = write(tmp_path / "evals.yaml", """
models:
  - name: m
    base_url: http://localhost:8000/v1
    api_key: ${EVE_MODEL_KEY}
    tasks: [open_ended]
""")
    (run,) = eve.convert(f).runs
    assert run.values["judges"] == [{"name": "mistral-large-2411", "model": "mistralai/mistral-large-2411",
                                     "base_url": "https://openrouter.ai/api/v1", "api_key_env": "JUDGE_API_KEY"}]


@pytest.mark.parametrize("text, expected", [
    ("models:\n  - name: m\n    base_url: http://x/v1\n    tasks: [open_ended]\n    judges: !ref nobody\n",
     ":5: `!ref nobody`: no constant 'nobody'"),
    ("constants:\n  a: !ref b\n  b: !ref a\nmodels:\n  - name: m\n    base_url: http://x/v1\n    tasks: !ref a\n",
     "refers to itself"),
    ("constants:\n  k: many\nmodels:\n  - name: m\n    base_url: http://x/v1\n    tasks:\n      - name: open_ended\n"
     "        num_fewshot: !int k\n", ":8: `!int k`: 'many' does not convert to int"),
    ("models:\n  - name: m\n    base_url: http://x/v1\n    tasks:\n      - name: open_ended\n        num_fewshots: 2\n",
     ":6: models[0].tasks[0]: unknown key 'num_fewshots'"),
    ("models:\n  - name: m\n    base_url: http://x/v1\n    tasks: [summarisation]\n",
     "task 'summarisation' is not one evekit has; its tasks: mcqa_single_answer"),
    ("models:\n  - name: m\n    tasks: [open_ended]\n", "models[0].base_url: missing"),
    ("models:\n  - name: m\n    base_url: http://x/v1\n    tasks:\n      - name: open_ended\n        max_tokens: lots\n",
     ":6: models[0].tasks[0].max_tokens: expected a whole number, got 'lots'"),
])
def test_bad_evals_files_name_the_file_the_line_and_the_field(tmp_path, text, expected):
    f = write(tmp_path / "evals.yaml", text)
    with pytest.raises(ParameterError) as info:
        eve.convert(f)
    assert str(f) in str(info.value) and expected in str(info.value), str(info.value)


def test_an_unknown_key_gets_a_did_you_mean(tmp_path):
    f = write(tmp_path / "evals.yaml", "models:\n  - name: m\n    base_url: http://x/v1\n    tasks:\n"
                                       "      - name: open_ended\n        num_fewshots: 2\n")
    with pytest.raises(ParameterError, match="num_fewshot"):
        eve.convert(f)


@pytest.mark.parametrize("where, text", [
    ("models[0].api_key", "models:\n  - name: m\n    base_url: http://x/v1\n    api_key: {key}\n    tasks: [open_ended]\n"),
    ("constants", "constants:\n  judge_api_key: {key}\nmodels:\n  - name: m\n    base_url: http://x/v1\n"
                  "    tasks:\n      - name: open_ended\n        judge_name: j\n        judge_base_url: http://x/v1\n"
                  "        judge_api_key: !ref judge_api_key\n"),
    ("constants", "constants:\n  unused_api_key: {key}\nmodels:\n  - name: m\n    base_url: http://x/v1\n"
                  "    tasks: [mcqa_single_answer]\n"),
    ("judges[0].api_key", "task: open_ended\nmodel_a: {{name: a, file: a.csv}}\nmodel_b: {{name: b, file: b.csv}}\n"
                          "judges:\n  - name: j\n    model: j\n    api_key: \"{key}\"\n    base_url: http://x/v1\n"
                          "evaluation: {{limit: 2}}\n"),
])
def test_a_literal_key_is_refused_before_anything_is_written_and_never_echoed(tmp_path, capsys, monkeypatch,
                                                                              where, text):
    monkeypatch.chdir(tmp_path)
    f = write(tmp_path / "eve.yaml", text.format(key=LITERAL))
    with pytest.raises(ParameterError) as info:
        eve.convert(f)
    message = str(info.value)
    assert LITERAL not in message and "literal key is refused" in message and "${MY_API_KEY}" in message
    line = 4 if where.startswith("models") else 2 if where == "constants" else 7
    assert f"{f}:{line}:" in message
    assert cli.main(["run", str(f), "--no-html"]) == 2
    assert cli.main(["convert-eve", str(f), "--out", str(tmp_path / "converted")]) == 2
    err = capsys.readouterr().err
    assert LITERAL not in err and "nothing was" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eve.yaml"]  # no outputs, no converted files


@pytest.mark.parametrize("template", ["../../escape_{model_a}.csv", "sub/results.csv", ".hidden_{model_b}.csv",
                                      "results_{model_c}.csv"])
def test_eves_file_name_templates_stay_in_the_output_folder(tmp_path, keys, template):
    text = (EXAMPLES / "win_rate_config.yaml").read_text()
    f = write(tmp_path / "win_rate_config.yaml",
              text.replace('results_filename: "results_{model_a}_vs_{model_b}.csv"', f'results_filename: "{template}"'))
    with pytest.raises(ParameterError, match=r"win_rate_config.yaml:\d+: output.results_filename"):
        eve.convert(f)


def test_a_key_in_a_base_url_is_refused_and_not_echoed(tmp_path):
    f = write(tmp_path / "evals.yaml", f"models:\n  - name: m\n    base_url: https://user:{LITERAL}@host/v1/chat/completions"
                                       "\n    tasks: [open_ended]\n")
    with pytest.raises(ParameterError) as info:
        eve.convert(f)
    assert f"{f}:3: models[0].base_url" in str(info.value) and LITERAL not in str(info.value)


def test_the_example_win_rate_config_converts_with_its_seed_stated(keys, tmp_path):
    path = EXAMPLES / "win_rate_config.yaml"
    conv = eve.convert(path)
    (run,) = conv.runs
    v = run.values
    assert (v["limit"], v["concurrency"], v["seed"], v["both_orders"]) == (3, 2, eve.drawn_seed(path), False)
    assert v["judges"][0] == {"name": "judge-one", "model": "smollm2-135m-instruct",
                              "base_url": "${EVEKIT_SERVER_URL}", "api_key_env": "MISTRAL_API_KEY"}
    assert [m["name"] for m in v["model_b"]] == ["reference-writer", "long-writer"]
    assert any(f"seed {eve.drawn_seed(path)}" in n for n in conv.notes)
    assert v["min_interval"] == 0.05                         # evaluation.rate_limit_delay, applied per client
    assert run.eve["templates"]["results_filename"] == "results_{model_a}_vs_{model_b}.csv"
    # null = random: another file draws another seed, the same file the same one (its cache replays).
    other = tmp_path / "win_rate_config.yaml"
    other.write_text(path.read_text() + "\n# another configuration\n")
    assert eve.drawn_seed(other) != eve.drawn_seed(path) == eve.drawn_seed(path)


def test_an_enabled_wandb_block_goes_to_tracking_or_is_said_to_be_kept_aside(tmp_path, keys):
    from evekit.runs.win_rate.params import WinRateParams

    text = (EXAMPLES / "win_rate_config.yaml").read_text().replace(
        "wandb:\n  enabled: false", "wandb:\n  enabled: true\n  notes: \"smollm2 against two writers\"")
    conv = eve.convert(write(tmp_path / "win_rate_config.yaml", text))
    (run,) = conv.runs
    if "tracking" in WinRateParams.names():  # evekit's tracking (evekit.tracking) is there
        assert run.values["tracking"]["backend"] == "wandb"
        assert run.values["tracking"]["project"] == "eve-win-rate-evaluation"
        assert run.values["tracking"]["notes"] == "smollm2 against two writers"  # the run's notes
        assert not [n for n in conv.notes if "not converted" in n]
        assert any(n.startswith("wandb.log.accuracy_rates: accepted, nothing to log") for n in conv.notes)
        run.params()  # valid as evekit's tracking parameter
    else:
        assert "tracking" not in run.values and any("wandb: kept aside" in n for n in conv.notes)
    assert conv.tracking["project"] == "eve-win-rate-evaluation"


@pytest.mark.parametrize("override", [False, True])
def test_a_win_rate_on_the_same_command_line_reads_the_evals_runs_answers(tmp_path, monkeypatch, keys, override):
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "elsewhere") if override else None
    files, convs = eve.expand_params([str(EXAMPLES / "evals.yaml"), str(EXAMPLES / "win_rate_config.yaml")],
                                     output_dir=out, quiet=True)
    assert len(files) == 3 and all(Path(f).is_file() for f in files)
    (wr,) = convs[1].runs
    root = Path(out) if override else tmp_path / "outputs" / "eve" / "eval_results"
    # EVE's samples_<task>.csv does not exist yet: the win rate reads the evals run's samples.csv (and waits for it)
    assert wr.values["model_a"][0]["file"] == str(root / "evals" / "smollm2-135m-instruct" / "open_ended" / "samples.csv")
    assert "of this batch" in wr.origins["model_a"]


def test_files_are_recognised_by_content_not_by_name(tmp_path):
    assert eve.eve_format(EXAMPLES / "evals.yaml") == "evals"
    assert eve.eve_format(EXAMPLES / "win_rate_config.yaml") == "win_rate_config"
    for own in ("win_rate.yaml", "ranking.yaml", "open_ended.yaml", "summary.yaml"):
        assert eve.eve_format(ROOT / "params" / "demo" / own) is None
    assert eve.eve_format(write(tmp_path / "x.yaml", "models_a: [{name: a, file: a.csv}]\nmodels_b: []\n")) == "win_rate_config"


def test_plan_and_batch_export_take_eves_files(tmp_path, monkeypatch, keys, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVEKIT_SERVER_URL", "http://127.0.0.1:9/v1")  # never called: nothing is sent
    assert cli.main(["plan", str(EXAMPLES / "evals.yaml")]) == 0
    plan = pd.read_csv(tmp_path / "outputs" / "eve" / "eval_results" / "plan.csv")
    assert plan["run"].astype(str).str.contains("open_ended").any() and plan["to_send"].fillna(0).sum() > 0
    out = tmp_path / "batch.jsonl"
    assert cli.main(["batch", "export", str(EXAMPLES / "evals.yaml"), "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 4 + 3  # the answers of both runs (judge calls come in the next round)
    assert {line["body"]["model"] for line in lines} == {"smollm2-135m-instruct"}
    assert MODEL_KEY.encode() not in tree_text(tmp_path)


def test_a_file_with_a_bad_tag_is_still_read_as_eves_and_explained(tmp_path, capsys):
    f = write(tmp_path / "evals.yaml", "models:\n  - name: m\n    base_url: http://x/v1\n    tasks: !ref [a, b]\n")
    assert eve.eve_format(f) == "evals"
    assert cli.main(["run", str(f)]) == 2
    assert "!ref takes a name" in capsys.readouterr().err


# -- EVE's CSVs ------------------------------------------------------------------------------------
EVE_HEADER = ["doc_id", "doc\\\\.Question", "target", "filtered_resps", "acc", "arguments", "doc", "doc\\\\.Answer",
              "doc\\\\.Choices", "doc_hash", "filter", "metrics", "prompt_hash", "resps", "target_hash"]


def _eve_csv(path: Path, header: list[str], rows: list[list[str]], before: str = "") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(before)
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_eves_exact_header_row_is_read(tmp_path):
    assert EVE_HEADER[1] == "doc" + "\\" * 2 + ".Question"  # two backslash characters, as EVE writes it
    row = ["0", "What does SAR stand for?", "D", "['A']", "0.0", "[]", "{}", "D", "[]", "h", "extract_label",
           "['acc']", "h", "[[' A']]", "h"]
    df = read_answers(_eve_csv(tmp_path / "eve.csv", EVE_HEADER, [row]))
    assert df.loc[0, "question"] == "What does SAR stand for?" and df.loc[0, "answer"] == "A"


@pytest.mark.parametrize("column", ["doc\\\\.Question", "doc\\.Question", "doc.Question", "Question", "question",
                                    "DOC.QUESTION"])
def test_every_spelling_of_the_question_column_is_accepted(tmp_path, column):
    path = _eve_csv(tmp_path / "a.csv", [column, "target", "filtered_resps"], [["Q1", "ref", "['ans']"]])
    assert read_answers(path).loc[0, "question"] == "Q1"
    assert doc_column([column, "x"], "doc.Question") == column


def test_a_missing_question_column_lists_the_accepted_spellings(tmp_path):
    path = _eve_csv(tmp_path / "a.csv", ["prompt", "target", "filtered_resps"], [["Q1", "ref", "ans"]])
    with pytest.raises(ValueError) as info:
        read_answers(path)
    for spelling in ("'doc.Question'", "'doc\\\\\\\\.Question'", "'Question'"):
        assert spelling in str(info.value), str(info.value)


def test_the_ranking_reads_eves_spellings_side_by_side_with_evekits(tmp_path):
    from evekit.runs.ranking.battles import match_models
    from evekit.runs.win_rate.matching import ModelSpec

    qs = ["What is NDVI?", "What is SAR?"]
    files = {"eve": ("doc\\\\.Question", "['x']"), "lmeval": ("doc.Question", "x"), "plain": ("Question", "['y']")}
    specs = [ModelSpec(name, str(_eve_csv(tmp_path / f"{name}.csv", [col, "target", "filtered_resps"],
                                          [[q, "ref", answer] for q in qs])))
             for name, (col, answer) in files.items()]
    matched = match_models(specs)
    assert len(matched.questions) == 2 and matched.answers.notna().all().all()
    assert matched.answers.loc[matched.answers.index[0], "eve"] == "x"  # ['x'] unwrapped


def test_a_stray_line_before_the_header_names_line_1(tmp_path):
    path = _eve_csv(tmp_path / "a.csv", EVE_HEADER, [["0"] * len(EVE_HEADER)],
                    before="In the /Users/someone/notebooks/system_gen_d")
    with pytest.raises(ValueError, match=r"a\.csv: line 1 is not the header row"):
        read_answers(path)


# -- EVE's win-rate definitions ----------------------------------------------------------------------
def _decisions() -> pd.DataFrame:
    rows = []
    # judge j1 on 5 questions: a, a, b, tie, failed; j2: a, b, b, b, tie. a shown first on even qids.
    for judge, winners in (("j1", ["model_a", "model_a", "model_b", "tie", None]),
                           ("j2", ["model_a", "model_b", "model_b", "model_b", "tie"])):
        for qid, w in enumerate(winners):
            rows.append({"judge": judge, "qid": qid, "order": 0, "winner_model": w, "failed": w is None,
                         "a_shown_first": qid % 2 == 0})
    return pd.DataFrame(rows)


def test_eve_definitions_count_every_decision_as_eve_does():
    m = eve_definitions(_decisions(), "Model-A 1.0", "model b", ["j1", "j2"])
    a, b = "model_a_10", "model_b"  # EVE's sanitised names
    assert m[f"win_rate/j1/{a}"] == 2 / 5 and m[f"win_rate/j1/{b}"] == 1 / 5  # the failed decision counts in total
    assert m[f"alpaca_win_rate/j1/{a}"] == (2 + 0.5) / 4  # ... but not in the alpaca denominator
    assert m[f"aggregate/{a}_win_rate"] == 3 / 10 and m[f"aggregate/{b}_win_rate"] == 4 / 10  # pooled
    assert m[f"aggregate/avg_{a}_win_rate"] == pytest.approx((2 / 5 + 1 / 5) / 2)
    assert m["aggregate/win_rate_difference"] == pytest.approx((1 / 5 + 3 / 5) / 2 - (2 / 5 + 1 / 5) / 2)  # b - a
    assert m[f"aggregate/{a}_alpaca_win_rate"] == pytest.approx((3 + 1) / 10)
    # unanimous: q0 (a, a) and q2 (b, b) of 5 rows; q4 has a failed decision and still counts below
    assert m["judge_agreement/unanimous_decisions"] == 2 and m["judge_agreement/unanimous_rate"] == 2 / 5
    # EVE's majority counts votes for a model (a tie vote is neither): q2 (b, b) and q3 (tie, b) go to b
    assert m[f"judge_agreement/majority_{b}"] == 2 and m["judge_agreement/split_decisions"] == 1
    # j1: a shown first on q0, q2, q4 -> won q0 of 3; second on q1, q3 -> won q1 of 2
    assert m[f"position_bias/j1/{a}_win_rate_at_A"] == 1 / 3 and m[f"position_bias/j1/{a}_win_rate_at_B"] == 1 / 2
    view = eve_view(_decisions(), "A", "B", ["j1", "j2"])
    assert view.loc["all judges pooled (aggregate/)", "decisions"] == 10
    assert view.loc["average over judges (aggregate/avg_)", "win_rate_difference (b - a)"] == pytest.approx(0.1)
    summary = eve_summary_table(_decisions(), ["j1", "j2"])
    assert summary.loc["j1", "errors"] == 1 and summary.loc["j1", "model_a_win_rate"] == 40.0  # EVE's percent


# -- end to end against the stub ------------------------------------------------------------------
@pytest.fixture(scope="module")
def stub():
    with StubServer(latency=0.005, verdicts=True) as server:
        yield server


def test_the_example_files_run_unchanged_and_their_conversion_makes_the_same_calls(tmp_path, monkeypatch, keys,
                                                                                  stub, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVEKIT_SERVER_URL", stub.base_url)
    stub.reset()
    evals, win_rate = str(EXAMPLES / "evals.yaml"), str(EXAMPLES / "win_rate_config.yaml")
    assert cli.main(["run", evals, win_rate, "--no-html", "--progress-every", "0"]) == 0
    sent = stub.stats()["total"]
    assert sent >= 4 + 3 + 3 * 2  # mcqa answers, open_ended answers, their two judges (+ the win rate's)
    out = tmp_path / "outputs" / "eve"
    task_dir = out / "eval_results" / "evals" / "smollm2-135m-instruct"
    for task in ("mcqa_single_answer", "open_ended"):  # evekit's layout
        assert (task_dir / task / "results.json").is_file() and (task_dir / task / "results.eee.jsonl").is_file()
    eve_csv = out / "eval_results" / "smollm2-135m-instruct" / "samples_open_ended.csv"  # EVE's
    header = eve_csv.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header[:5] == ["doc_id", "doc\\\\.Question", "doc\\\\.Answer", "target", "filtered_resps"]
    assert read_answers(eve_csv)["question"].tolist() == read_answers(task_dir / "open_ended" / "samples.csv")[
        "question"].tolist()
    wr = out / "win_rate_results"
    for b in ("reference_writer", "long_writer"):  # every model_a x model_b pair, EVE's file names
        for name in ("results", "summary", "metrics"):
            assert (wr / f"{name}_smollm2_135m_instruct_vs_{b}.csv").is_file()
        assert (wr / f"comparison_smollm2_135m_instruct_vs_{b}.png").is_file()
    record = json.loads((wr / "win_rate_config" / "win_rate" / "smollm2-135m-instruct_vs_long-writer" /
                         "metrics.json").read_text())
    assert record["params"]["seed"] == eve.drawn_seed(EXAMPLES / "win_rate_config.yaml") and "eve_definitions" in record
    assert MODEL_KEY.encode() not in tree_text(tmp_path) and JUDGE_KEY.encode() not in tree_text(tmp_path)
    before = {t: json.loads((task_dir / t / "results.json").read_text())["metrics"]
              for t in ("mcqa_single_answer", "open_ended")}

    # convert-eve, then the converted files: no new call (the same cache keys), the same numbers
    converted = tmp_path / "converted"
    assert cli.main(["convert-eve", evals, "--out", str(converted)]) == 0
    files = sorted(converted.glob("*.yaml"))
    assert [f.name for f in files] == ["mcqa_single_answer.smollm2-135m-instruct.yaml",
                                       "open_ended.smollm2-135m-instruct-open_ended_multi_judge.yaml"]
    assert "# from models[0].tasks[1].max_tokens" in files[1].read_text()
    assert cli.main(["run", *map(str, files), "--no-html", "--progress-every", "0"]) == 0
    assert stub.stats()["total"] == sent
    after = {t: json.loads((task_dir / t / "results.json").read_text())["metrics"] for t in before}
    assert after == before
    # the same for the win rate: its converted file replays every judge call, with the same numbers
    metrics_json = wr / "win_rate_config" / "win_rate" / "smollm2-135m-instruct_vs_reference-writer" / "metrics.json"
    wr_before = json.loads(metrics_json.read_text())
    assert cli.main(["convert-eve", win_rate, "--out", str(converted / "wr")]) == 0
    (wr_file,) = (converted / "wr").glob("*.yaml")
    assert cli.main(["run", str(wr_file), "--no-html", "--progress-every", "0"]) == 0
    assert stub.stats()["total"] == sent
    wr_after = json.loads(metrics_json.read_text())
    assert (wr_after["metrics"], wr_after["eve_definitions"]) == (wr_before["metrics"], wr_before["eve_definitions"])
    eee = json.loads((task_dir / "open_ended" / "results.eee.jsonl").read_text())
    raw = json.loads(eee["eval_library"]["additional_details"]["raw_results"])
    assert isinstance(raw, list) and "failed_instances" in raw[0]
    assert all({"sample_index", "error"} <= set(f) for f in raw[0]["failed_instances"])


DOCS_FILES = ("docs_evals.yaml", "docs_evals_multi_judge.yaml", "docs_win_rate_config.yaml")


def test_eves_documented_example_files_run_as_documented(tmp_path, monkeypatch, keys, stub):
    """EVE's documentation's evals.yaml (two of them: "Running Tasks" and the multi-judge one) and
    win_rate_config.yaml (its wandb block enabled, the multi-model lists), committed with only their
    keys and endpoints changed, run by `evekit run`: the stub sees every model and judge, the
    outputs exist in evekit's layout and in EVE's, the wandb block is tracked, no key is written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVEKIT_SERVER_URL", stub.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", JUDGE_KEY)
    for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_API_KEY"):  # offline, W&B's files in the output folder
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
    stub.reset()
    files = [str(EXAMPLES / f) for f in DOCS_FILES]
    assert cli.main(["run", *files, "--no-html", "--progress-every", "0"]) == 0
    by_model = stub.stats()["by_model"]
    # the model (56 + 57 + 51 bundled items: no limit in EVE's files), the three documented judges on
    # open_ended's 56 answers, and the win rate's three judges on 4 pairs x 4 questions (qwen3 is both)
    assert by_model["your-model-name"] == 56 + 57 + 51
    assert by_model["mistralai/mistral-large-2411"] == by_model["anthropic/claude-3.5-sonnet"] == 56
    assert by_model["mistral-large-2512"] == by_model["openai/gpt-4.1-mini"] == 4 * 4
    assert by_model["qwen/qwen3-235b-a22b-2507"] == 56 + 4 * 4
    # evekit's layout
    evals = tmp_path / "evals_outputs"
    for run, task in (("docs_evals", "mcqa_multiple_answer"), ("docs_evals", "hallucination_detection"),
                      ("docs_evals_multi_judge", "open_ended")):
        assert (evals / run / "your-model-name" / task / "results.json").is_file(), (run, task)
    judged = json.loads((evals / "docs_evals_multi_judge" / "your-model-name" / "open_ended" / "results.json")
                        .read_text())["metrics"]
    assert {"llm_as_judge_qwen3", "llm_as_judge_mistral_large", "llm_as_judge_claude_sonnet", "judge_voting",
            "llm_as_judge_avg", "judge_agreement"} <= set(judged)  # EVE's multi-judge metric names
    shots = json.loads((evals / "docs_evals" / "your-model-name" / "mcqa_multiple_answer" / "results.json")
                       .read_text())["params"]
    assert shots["num_fewshot"] == 2 and shots["temperature"] == 0.1  # the file's values
    # EVE's layout: samples_<task>.csv named by EVE's task names, and the win rate's file names
    for name in ("mcqa_multiple_answers", "hallucination_detection", "open_ended"):
        assert (evals / "your-model-name" / f"samples_{name}.csv").is_file(), name
    wr = tmp_path / "win_rate_results"
    for a in ("eve_v04", "eve_v05"):
        for b in ("mistral_small", "llama_4_scout"):
            for name in ("results", "summary", "metrics"):
                assert (wr / f"{name}_{a}_vs_{b}.csv").is_file()
            assert (wr / f"comparison_{a}_vs_{b}.png").is_file()
    # the wandb block (enabled: true): one offline W&B run per pair, named by EVE's run_name template
    try:
        import wandb  # noqa: F401
    except ImportError:  # without evekit[tracking] the block is kept aside and the runs go untracked
        wandb = None
    if wandb is not None:
        logged = json.loads((wr / "wandb" / "evekit-logged.json").read_text())
        assert len(logged) == 4
        records = [json.loads((d / "run.json").read_text()) for d in (wr / "docs_win_rate_config" / "win_rate").iterdir()
                   if d.is_dir() and (d / "run.json").is_file()]
        names = sorted(r["tracking"]["name"] for r in records)
        assert names == ["eve_v04_vs_llama-4-scout", "eve_v04_vs_mistral-small", "eve_v05_vs_llama-4-scout",
                         "eve_v05_vs_mistral-small"]
        assert {r["tracking"]["status"] for r in records} == {"logged"}
    tree = tree_text(tmp_path)
    assert MODEL_KEY.encode() not in tree and JUDGE_KEY.encode() not in tree


def _strength_csv(path: Path, questions: list[str], strength: int) -> Path:
    rows = [[str(i), q, "reference", repr([f"answer [[strength_{strength}]] to {i}"])] for i, q in enumerate(questions)]
    return _eve_csv(path, ["doc_id", "doc\\\\.Question", "target", "filtered_resps"], rows)


def _eve_by_hand(results: pd.DataFrame, judges: list[str]) -> dict[str, float]:
    """EVE's win-rate numbers recomputed from results.csv with plain pandas, one decision per row
    (both orders count; a failed decision counts in a judge's total, not in its alpaca denominator)."""
    out: dict[str, float] = {}
    failed = results["failed"].astype(bool)
    for j in judges:
        mine = results[results.judge == j]
        ok = mine[~failed[mine.index]]
        wa, wb, t = ((ok.winner_model == w).sum() for w in ("model_a", "model_b", "tie"))
        out[f"{j}/a"], out[f"{j}/b"] = wa / len(mine), wb / len(mine)
        out[f"{j}/alpaca_a"], out[f"{j}/alpaca_b"] = (wa + t / 2) / (wa + wb + t), (wb + t / 2) / (wa + wb + t)
        first = mine[mine.a_shown_first.astype(bool)]
        second = mine[~mine.a_shown_first.astype(bool)]
        out[f"{j}/at_A"] = (first.winner_model == "model_a").sum() / len(first) if len(first) else float("nan")
        out[f"{j}/at_B"] = (second.winner_model == "model_a").sum() / len(second) if len(second) else float("nan")
    ok = results[~failed]
    pooled = {w: (ok.winner_model == w).sum() for w in ("model_a", "model_b", "tie")}
    out["pooled_alpaca_a"] = (pooled["model_a"] + pooled["tie"] / 2) / len(results)
    # unanimous: (question, order) rows on which every judge decided and all decided alike, over all rows
    by_row = results.assign(w=results.winner_model.where(~failed)).groupby(["qid", "order"])["w"]
    out["unanimous"] = float(by_row.apply(lambda w: w.notna().all() and len(w) == len(judges) and w.nunique() == 1)
                             .mean())
    return out


def test_a_win_rate_config_with_model_lists_runs_every_pair_and_reports_eves_numbers(tmp_path, monkeypatch,
                                                                                   keys, stub):
    monkeypatch.chdir(tmp_path)
    questions = [f"Question number {i} about Sentinel-{i % 3 + 1}?" for i in range(8)]
    _strength_csv(tmp_path / "strong.csv", questions, 6)
    _strength_csv(tmp_path / "weak.csv", questions, 1)
    _strength_csv(tmp_path / "mid.csv", questions, 3)
    # both_orders (evekit's own key): EVE's numbers count each order's decision, evekit's combine them
    f = write(tmp_path / "win_rate_config.yaml", f"""
task: "open_ended"
model_a:
  - {{name: "Strong-1.0", file: "strong.csv"}}
model_b:
  - {{name: "weak", file: "weak.csv"}}
  - {{name: "mid", file: "mid.csv"}}
judges:
  - {{name: "j1", model: "judge-model-1", api_key: "${{EVE_JUDGE_KEY}}", base_url: "{stub.base_url}/chat/completions"}}
  - {{name: "j2", model: "judge-model-2", api_key: "${{EVE_JUDGE_KEY}}", base_url: "{stub.base_url}"}}
evaluation: {{limit: null, max_workers: 3, rate_limit_delay: 0.0, random_seed: 7}}
output: {{output_dir: "wr", save_results: true, save_visualizations: false}}
wandb: {{enabled: false}}
both_orders: true
""")
    assert cli.main(["run", str(f), "--no-html", "--progress-every", "0"]) == 0
    differs = False
    for b in ("weak", "mid"):
        folder = tmp_path / "wr" / "win_rate_config" / "win_rate" / f"Strong-1.0_vs_{b}"
        results = pd.read_csv(folder / "results.csv")
        assert len(results) == 8 * 2 * 2 and results["failed"].sum() == 0  # a decision per question, order, judge
        record = json.loads((folder / "metrics.json").read_text())
        m = record["metrics"]  # EVE's names hold EVE's definitions ...
        assert {k: v for k, v in m.items() if not k.startswith("evekit/")} == record["eve_definitions"]
        # ... recomputed by hand from results.csv, by EVE's definitions
        hand = _eve_by_hand(results, ["j1", "j2"])
        wins = {j: (results[(results.judge == j)].winner_model == "model_a").sum() for j in ("j1", "j2")}
        assert m["win_rate/j1/strong_10"] == pytest.approx(hand["j1/a"]) == wins["j1"] / 16
        assert m["aggregate/strong_10_win_rate"] == (wins["j1"] + wins["j2"]) / 32
        assert m["aggregate/win_rate_difference"] == pytest.approx(
            (hand["j1/b"] + hand["j2/b"]) / 2 - (hand["j1/a"] + hand["j2/a"]) / 2)  # EVE's sign: b - a
        for j in ("j1", "j2"):
            assert m[f"alpaca_win_rate/{j}/strong_10"] == pytest.approx(hand[f"{j}/alpaca_a"])
            assert m[f"alpaca_win_rate/{j}/{b}"] == pytest.approx(hand[f"{j}/alpaca_b"])
            assert m[f"position_bias/{j}/strong_10_win_rate_at_A"] == pytest.approx(hand[f"{j}/at_A"])
            assert m[f"position_bias/{j}/strong_10_win_rate_at_B"] == pytest.approx(hand[f"{j}/at_B"])
            assert m[f"position_bias/{j}/difference"] == pytest.approx(abs(hand[f"{j}/at_A"] - hand[f"{j}/at_B"]))
        assert m["aggregate/strong_10_alpaca_win_rate"] == pytest.approx(hand["pooled_alpaca_a"])
        assert m["aggregate/avg_strong_10_alpaca_win_rate"] == pytest.approx((hand["j1/alpaca_a"] +
                                                                              hand["j2/alpaca_a"]) / 2)
        assert m["judge_agreement/unanimous_rate"] == pytest.approx(hand["unanimous"])
        # evekit's order-combined figures under their own names: per question, an order-dependent pair a tie
        summary_csv = pd.read_csv(folder / "summary.csv").set_index("judge")
        assert m["evekit/win_rate/j1/Strong-1.0"] == pytest.approx(summary_csv.at["j1", "win_rate_a"])
        assert m["evekit/average/judge_agreement"] == pytest.approx(summary_csv.at["average", "judge_agreement"])
        assert m["evekit/average/win_rate_difference_a_minus_b"] == pytest.approx(
            summary_csv.at["average", "win_rate_difference"])
        differs |= m["evekit/win_rate/j1/Strong-1.0"] != pytest.approx(m["win_rate/j1/strong_10"])
        summary = pd.read_csv(tmp_path / "wr" / f"summary_strong_10_vs_{b}.csv", index_col=0)
        assert summary.loc["j1", "model_a_wins"] == wins["j1"] and summary.loc["j2", "total"] == 16
        assert not (tmp_path / "wr" / f"comparison_strong_10_vs_{b}.png").exists()  # save_visualizations: false
    assert differs  # the stub's noisy judges disagree with themselves across orders: the two definitions part
    assert m["aggregate/strong_10_win_rate"] > 0.5  # strength 6 against 3 wins most decisions
    assert JUDGE_KEY.encode() not in tree_text(tmp_path)


# -- one call: evekit.evaluate and evekit eval ---------------------------------------------------------
def test_evaluate_in_process_returns_the_metrics_table(tmp_path, monkeypatch, stub):
    monkeypatch.chdir(tmp_path)
    res = evekit.evaluate(model="stub-model", base_url=stub.base_url, task="mcqa_single_answer", notebook=False,
                          dataset=str(ROOT / "data" / "mcqa_single_answer.jsonl"), limit=5, max_tokens=8,
                          cache_dir=str(tmp_path / "cache"))
    assert list(res.metrics.columns) == ["model", "task", "metric", "value", "ci_low", "ci_high", "n"]
    acc = res.metrics.set_index("metric").loc["acc"]
    assert acc["task"] == "mcqa_single_answer" and acc["n"] == 5
    (folder,) = res.paths
    assert folder == tmp_path / "outputs" / "stub-model" / "stub-model" / "mcqa_single_answer"
    assert (folder / "samples.csv").is_file() and res.ok
    assert list(folder.glob("*.png"))  # the notebook's plots too
    judged = evekit.evaluate(model="stub-model", base_url=stub.base_url, tasks=["open_ended"], notebook=False,
                             judges=[{"name": "j", "model": "judge", "base_url": stub.base_url, "api_key_env": None}],
                             dataset=str(ROOT / "data" / "open_ended.jsonl"), limit=2, max_tokens=8,
                             cache_dir=str(tmp_path / "cache"))
    assert "llm_as_judge" in set(judged.metrics["metric"])  # the one judge
    with pytest.raises(ParameterError, match="unknown parameter 'limt'"):
        evekit.evaluate(model="m", base_url=stub.base_url, task="open_ended", limt=3)
    with pytest.raises(ParameterError, match="name a task"):
        evekit.evaluate(model="m", base_url=stub.base_url)


def test_evekit_eval_runs_the_notebooks_from_flags(tmp_path, monkeypatch, stub, capsys):
    monkeypatch.chdir(tmp_path)
    stub.reset()
    code = cli.main(["eval", "--model", "stub-model", "--api-base", stub.base_url, "--task", "mcqa_single_answer",
                     "--dataset", str(ROOT / "data" / "mcqa_single_answer.jsonl"), "--limit", "3",
                     "--set", "max_tokens=8", "--set", f"cache_dir={tmp_path / 'cache'}", "--run-name", "cli",
                     "--no-html"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert stub.stats()["total"] == 3
    assert "acc" in out and "mcqa_single_answer" in out
    folder = tmp_path / "outputs" / "cli" / "stub-model" / "mcqa_single_answer"
    assert (folder / "results.json").is_file() and (folder / "run.json").is_file()
    assert (tmp_path / "outputs" / "cli" / "evekit_params" / "mcqa_single_answer.yaml").is_file()
    code = cli.main(["eval", "--model", "stub-model", "--base-url", stub.base_url, "--task", "open_ended",
                     "--judge", f"strict=judge-model@{stub.base_url}", "--no-notebook", "--limit", "2",
                     "--dataset", str(ROOT / "data" / "open_ended.jsonl"), "--set", "max_tokens=8",
                     "--set", f"cache_dir={tmp_path / 'cache'}", "--run-name", "cli"])
    out = capsys.readouterr().out
    assert code == 0 and "llm_as_judge" in out
    assert json.loads((tmp_path / "outputs" / "cli" / "stub-model" / "open_ended" / "results.json").read_text())[
        "params"]["judges"][0]["name"] == "strict"
    assert cli.main(["eval", "--model", "m", "--base-url", stub.base_url, "--task", "nope"]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err


def test_the_readmes_one_call_examples_use_real_flags_and_parameters():
    """The README's `evekit eval` line and `evekit.evaluate(...)` call ("Your own endpoint") parse
    with evekit eval's own flags and pass evaluate's parameter check (nothing is run)."""
    import argparse
    import ast
    import shlex

    from evekit.api import add_eval_arguments, task_values
    from evekit.scaffold import parse_judge

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- one-call:")[1].split("<!-- /one-call -->")[0]
    bash = block.split("```bash\n")[1].split("```")[0].replace("\\\n", " ")
    python = block.split("```python\n")[1].split("```")[0]
    words = shlex.split(bash)
    assert words[:2] == ["evekit", "eval"]
    parser = argparse.ArgumentParser(prog="evekit eval", exit_on_error=False)
    add_eval_arguments(parser)
    args = parser.parse_args(words[2:])
    assert args.task == ["mcqa_single_answer", "open_ended"] and args.limit == 50
    judges = [parse_judge(j, args.judge_key_env) for j in args.judge]
    for task in args.task:
        task_values(args.model, args.base_url, task, judges=judges, limit=args.limit)
    (call,) = [n for n in ast.walk(ast.parse(python)) if isinstance(n, ast.Call)
               and ast.unparse(n.func) == "evekit.evaluate"]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    model, base_url, task = kwargs.pop("model"), kwargs.pop("base_url"), kwargs.pop("task")
    values = task_values(model, base_url, task, **kwargs)  # every name a parameter, every value valid
    assert values["num_fewshot"] == 2 and values["limit"] == 50
