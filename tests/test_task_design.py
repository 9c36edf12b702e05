"""Repeats, clusters, shuffled options and the choices-only baseline in a task run (issue 32):
the answers asked for, the rows of samples.csv, the metrics' intervals and the report's tables."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evekit import repeats
from evekit.errors import ParameterError
from evekit.runs.task.run import TaskRun

sys.path.insert(0, str(Path(__file__).parent))
from scripted_client import ScriptedClient  # noqa: E402
from stub_server import StubServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MCQ = ROOT / "data" / "mcqa_single_answer.jsonl"
MULTI = ROOT / "data" / "mcqa_multiple_answer.jsonl"


def _run(tmp_path: Path, client, **params) -> TaskRun:
    namespace = {"task": "mcqa_single_answer", "model_name": "m", "base_url": "http://127.0.0.1:9/v1",
                 "dataset": str(MCQ), "limit": 12, "cache_dir": str(tmp_path / "cache"),
                 "output_dir": str(tmp_path / "out"), "run_name": "t", **params}
    run = TaskRun.from_notebook(namespace)
    run._client = lambda *a, **k: client  # type: ignore[method-assign]
    run.load()
    return run


def _last_user(request) -> str:
    return [m for m in request.messages if m["role"] == "user"][-1]["content"]


def _shown_options(request) -> dict[str, str]:
    return dict(re.findall(r"^([A-Z])\. (.*)$", _last_user(request), flags=re.M))


def _gold_texts(path: Path) -> dict[str, set[str]]:
    """question -> the texts of its gold options, from the dataset itself."""
    out = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        letters = row["Answers"] if "Answers" in row else [row["Answer"]]
        choices = row["Choices"]["text"] if isinstance(row["Choices"], dict) else row["Choices"]
        out[row["Question"]] = {choices[ord(a) - 65] for a in letters}
    return out


def _perfect(path: Path):
    """A model that knows every gold option by its text, wherever it is shown."""
    gold = _gold_texts(path)

    def respond(request):
        question = re.search(r"Question: (.*)", _last_user(request)).group(1)
        letters = [k for k, v in _shown_options(request).items() if v in gold[question]]
        return ", ".join(sorted(letters))
    return respond


# -- shuffled options ----------------------------------------------------------------------------


@pytest.mark.parametrize("path,task", [(MCQ, "mcqa_single_answer"), (MULTI, "mcqa_multiple_answer")])
def test_permutations_move_the_gold_letters_with_their_options(tmp_path, path, task):
    client = ScriptedClient(lambda r: "A")
    run = _run(tmp_path, client, task=task, dataset=str(path), permutations=3)
    gold = _gold_texts(path)
    assert len(run.items) == 3 * len(run.base_items) == len(run.requests)
    for item, request in zip(run.items, run.requests):
        shown = _shown_options(request)
        assert [shown[k] for k in sorted(shown)] == item.fields["choices"]
        assert {shown[a.strip()] for a in item.target.split(",")} == gold[item.question]
    first = [it for it in run.items if it.fields["permutation"] == 0]
    assert [it.target for it in first] == [it.target for it in run.base_items]  # order 0 is the original


@pytest.mark.parametrize("path,task", [(MCQ, "mcqa_single_answer"), (MULTI, "mcqa_multiple_answer")])
def test_always_a_is_never_robust_nor_consistent_and_a_perfect_model_is_both(tmp_path, path, task):
    run = _run(tmp_path / "a", ScriptedClient(lambda r: "A"), task=task, dataset=str(path), permutations=3)
    run.generate()
    m = run.compute_metrics()
    assert m["robust_acc"]["value"] == 0.0 and m["consistency"]["value"] == 0.0
    assert m["robust_acc"]["n"] == len(run.base_items)
    perfect = _run(tmp_path / "p", ScriptedClient(_perfect(path)), task=task, dataset=str(path), permutations=3)
    perfect.generate()
    p = perfect.compute_metrics()
    assert p["robust_acc"]["value"] == 1.0 and p["consistency"]["value"] == 1.0
    assert [p[f"acc_permutation_{j}"]["value"] for j in range(3)] == [1.0, 1.0, 1.0]
    # The task's own metrics are the original order's: the run without permutations gives the same.
    plain = _run(tmp_path / "plain", ScriptedClient(lambda r: "A"), task=task, dataset=str(path))
    plain.generate()
    assert plain.compute_metrics()["acc"] == m["acc"]


def test_position_preference_and_choices_only_are_reported_and_saved(tmp_path):
    client = ScriptedClient(lambda r: "A")
    run = _run(tmp_path, client, permutations=3, choices_only=True)
    run.generate()
    assert len(client.calls) == 3 * 12 + 12                  # three orders, and the baseline's calls
    withheld = client.calls[-1]
    assert "withheld" in _last_user(withheld) and run.base_items[-1].question not in _last_user(withheld)
    shots = [m["content"] for m in withheld.messages[1:-1] if m["role"] == "user"]
    assert len(shots) == 2 and all("withheld" in shot for shot in shots)  # the examples shown the same way
    pref = run.position_preference()
    assert pref.loc[0, "answer_share"] == 1.0 and pref["gold_share"].sum() == pytest.approx(1.0)
    table = run.metrics_table()
    assert "acc (choices only)" in table.index and "robust_acc" in table.index
    figures = run.plots()
    assert "position_preference.png" in figures
    out = run.save()
    results = json.loads((out / "results.json").read_text())
    assert results["choices_only"]["n"] == 12 and results["design"]["permutations"] == 3
    samples = pd.read_csv(out / "samples.csv")
    assert len(samples) == 36 and sorted(samples["permutation"].unique()) == [0, 1, 2]
    outputs = [json.loads(line) for line in (out / "model_outputs.jsonl").read_text().splitlines()]
    assert [o["permutation"] for o in outputs[:3]] == [0, 1, 2]


@pytest.mark.parametrize("params,needle", [
    ({"task": "open_ended", "permutations": 3}, "multiple-choice"),
    ({"permutations": 1}, "permutations=1"),
    ({"repeats": 3}, "temperature"),
    ({"repeats": 3, "temperature": 0.5, "permutations": 2}, "together"),
    ({"reducer": "pass_at_k"}, "repeats > 1"),
    ({"reducer": "best", "repeats": 2, "temperature": 0.5}, "reducer"),
    ({"repeats": 2, "repeat_over": "fewshot", "num_fewshot": 0}, "num_fewshot"),
])
def test_a_design_that_cannot_work_is_refused_with_its_parameter(tmp_path, params, needle):
    with pytest.raises(ParameterError, match=needle):
        _run(tmp_path, ScriptedClient(lambda r: "A"), **params)


# -- repeats ----------------------------------------------------------------------------------------


def test_repeats_send_their_own_seeds_and_the_interval_resamples_items(tmp_path):
    client = ScriptedClient(lambda r: "A" if r.seed % 3 else "B")
    run = _run(tmp_path, client, repeats=3, temperature=0.7, seed=1234)
    run.generate()
    seeds = [r.seed for r in client.calls]
    assert seeds[:12] == [1234] * 12                                 # repeat 0: the run without repeats
    assert len(set(seeds)) == 3 and [repeats.repeat_seed(1234, r) for r in range(3)] == sorted(
        set(seeds), key=seeds.index)
    s = run.samples
    assert len(s) == 36 and list(s["repeat"].value_counts().sort_index()) == [12, 12, 12]
    acc = run.compute_metrics()["acc"]
    expected = repeats.repeat_interval(s["acc"], s["doc_id"])
    assert acc["n"] == 12 and acc["n_answers"] == 36
    assert (acc["value"], acc["ci_low"], acc["ci_high"]) == (expected["value"], expected["ci_low"], expected["ci_high"])
    per_item = s.groupby("doc_id")["acc"].mean()
    assert acc["value"] == pytest.approx(per_item.mean())
    table = run.design_table()
    assert {"share_within", "share_between", "± with 2× repeats", "± with 2× items"} <= set(table.columns)
    # the variances themselves (method of moments, three repeats per item), computed from the samples
    by_item = s.groupby("doc_id")["acc"]
    within = by_item.var(ddof=1).mean()
    between = max(0.0, by_item.mean().var(ddof=1) - within / 3)
    assert within > 0
    assert table.loc["acc", "var_within"] == pytest.approx(within, abs=5e-5)
    assert table.loc["acc", "var_between"] == pytest.approx(between, abs=5e-5)
    assert table.loc["acc", "share_within"] == pytest.approx(within / 3 / by_item.mean().var(ddof=1), abs=5e-5)
    assert table.loc["acc", "± with 2× items"] < table.loc["acc", "± now"]
    assert run.counts().loc["items", "count"] == 12


def test_one_repeat_is_the_run_without_repeats(tmp_path):
    plain = _run(tmp_path / "a", ScriptedClient(lambda r: "A"))
    plain.generate()
    once = _run(tmp_path / "b", ScriptedClient(lambda r: "A"), repeats=1, reducer="mean")
    once.generate()
    assert [r for r in plain.requests] == [r for r in once.requests]
    same = json.dumps(plain.compute_metrics(), sort_keys=True) == json.dumps(once.compute_metrics(), sort_keys=True)
    assert same and "repeat" not in once.samples


def test_fewshot_repeats_draw_fresh_examples_never_the_item_itself(tmp_path):
    client = ScriptedClient(lambda r: "A")
    run = _run(tmp_path, client, repeats=3, repeat_over="fewshot", num_fewshot=2)
    by_repeat = {}
    for item, request in zip(run.items, run.requests):
        shots = tuple(m["content"] for m in request.messages[1:-1] if m["role"] == "user")
        assert all(item.question not in shot for shot in shots)
        by_repeat.setdefault(item.doc_id, []).append(shots)
    assert all(len(set(v)) > 1 for v in list(by_repeat.values())[:5])  # other examples per repeat
    assert {r.seed for r in run.requests} == {run.config.seed}        # the sampling is not varied


def test_reducer_pass_at_k_counts_an_item_right_once_any_repeat_is(tmp_path):
    client = ScriptedClient(lambda r: "A" if r.seed % 3 else "B")
    run = _run(tmp_path, client, repeats=3, temperature=0.7, reducer="pass_at_k")
    run.generate()
    s = run.samples
    expected = s.groupby("doc_id")["acc"].max().mean()
    assert run.compute_metrics()["acc"]["value"] == pytest.approx(expected)


def test_clustered_items_widen_the_interval_and_a_corpus_statistic_says_why_it_has_none(tmp_path):
    rows = [json.loads(line) for line in MCQ.read_text().splitlines()][:40]
    for i, row in enumerate(rows):
        row["source"] = f"doc{i // 8}"                             # five documents of eight questions
    path = tmp_path / "clustered.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # Whole documents right or wrong: the items of one cluster are alike.
    client = ScriptedClient(lambda r: "A")

    def run_with(**extra):
        run = _run(tmp_path / str(len(extra)), client, dataset=str(path), limit=None, **extra)
        run.generate()
        return run.compute_metrics()
    items, clustered = run_with(), run_with(cluster_by="source")
    assert clustered["acc"]["value"] == items["acc"]["value"]
    assert clustered["acc"]["n_clusters"] == 5 and "5 clusters" in clustered["acc"]["method"]
    assert np.isnan(clustered["mcc"]["ci_low"]) and "no interval" in clustered["mcc"]["note"]
    with pytest.raises(Exception, match="cluster_by='nope'"):
        _run(tmp_path / "x", client, dataset=str(path), cluster_by="nope")


def test_judged_repeats_count_each_item_once_through_the_real_client(tmp_path):
    with StubServer(latency=0.0) as model, StubServer(latency=0.0, verdicts=True) as judges:
        run = TaskRun.from_notebook({
            "task": "open_ended", "model_name": "stub", "base_url": model.base_url, "api_key_env": None,
            "dataset": str(ROOT / "data" / "open_ended.jsonl"), "limit": 6, "num_fewshot": 0, "max_tokens": 32,
            "judges": [{"name": "j", "model": "stub", "base_url": judges.base_url, "api_key_env": None}],
            "repeats": 2, "temperature": 0.5, "cache_dir": str(tmp_path / "cache"),
            "output_dir": str(tmp_path / "out"), "run_name": "t"})
        run.load()
        run.generate()
        run.judge()
        m = run.compute_metrics()
    s = run.samples
    assert len(s) == 12 and m["llm_as_judge"]["n"] == 6
    votes = s.dropna(subset=["judge_j"])
    expected = repeats.repeat_interval(votes["judge_j"], votes["doc_id"])
    assert m["llm_as_judge"]["value"] == pytest.approx(expected["value"])
    assert m["llm_as_judge"]["n_answers"] == len(votes)


def test_the_leaderboard_says_what_the_interval_accounts_for_and_pairs_items_once(tmp_path):
    from evekit.runs.summary import board

    out = tmp_path / "out"
    plain = _run(tmp_path, ScriptedClient(lambda r: "A"), model_name="always-a", run_name="r")
    plain.generate()
    plain.save()
    repeated = _run(tmp_path, ScriptedClient(lambda r: "A" if r.seed % 3 else "B"), model_name="mixed",
                    run_name="r", repeats=3, temperature=0.7)
    repeated.generate()
    repeated.save()
    entries = board.collect(out, ["r"])
    table = board.leaderboard(entries).set_index("model")
    assert table.loc["mixed · r", "design"] == "3 repeats over sampling" and table.loc["always-a · r", "design"] == ""
    assert "(3 repeats over sampling)" in board.leaderboard_wide(board.leaderboard(entries)).loc["mixed · r"].iloc[0]
    tests = board.paired_tests(entries)
    assert tests.loc[0, "n_shared"] == 12                              # each item once, not 12 x 3
    per_item = repeated.samples.groupby("doc_id")["acc"].mean()
    assert tests.loc[0, ["mean_a", "mean_b"]].astype(float).round(9).tolist() in (
        [round(per_item.mean(), 9), round(plain.samples["acc"].mean(), 9)],
        [round(plain.samples["acc"].mean(), 9), round(per_item.mean(), 9)])


def test_fewshot_split_takes_the_shots_from_another_file_and_never_the_item_itself(tmp_path):
    rows = [json.loads(line) for line in MCQ.read_text().splitlines()]
    shots = tmp_path / "train.jsonl"
    shots.write_text("".join(json.dumps(r) + "\n" for r in rows[40:]))
    run = _run(tmp_path, ScriptedClient(lambda r: "A"), fewshot_split=str(shots), limit=45, num_fewshot=2)
    train = {r["Question"] for r in rows[40:]}
    for item, request in zip(run.items, run.requests):
        used = [re.search(r"Question: (.*)", m["content"]).group(1) for m in request.messages[1:-1] if m["role"] == "user"]
        assert len(used) == 2 and set(used) <= train and item.question not in used
    assert run.settings().loc["fewshot_split", "value"] == str(shots)


def test_evekit_plan_counts_the_extra_calls_as_a_run_sends_them(tmp_path):
    import yaml

    from evekit.batch import plan

    client = ScriptedClient(lambda r: "A")
    params = {"task": "mcqa_single_answer", "model_name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None,
              "dataset": str(MCQ), "limit": 7, "cache_dir": str(tmp_path / "cache"), "output_dir": str(tmp_path / "o"),
              "run_name": "t", "permutations": 3, "choices_only": True}
    path = tmp_path / "mcqa_single_answer.yaml"
    path.write_text(yaml.safe_dump(params))
    table = plan.plan_table(plan.plan_files([path]))
    run = _run(tmp_path, client, **{k: v for k, v in params.items() if k != "api_key_env"})
    run.generate()
    assert int(table["to_send"].sum()) == len(client.calls) == 7 * 3 + 7


def test_the_card_and_the_index_count_items_not_answers_out_of_the_set_limit_cut(tmp_path):
    from evekit.runs.records import read_run_record
    from evekit.runs.task.kind import card, index_row

    run = _run(tmp_path, ScriptedClient(lambda r: "A"), permutations=3)  # 3 answers per item
    run.generate()
    out = run.save()
    results = json.loads((out / "results.json").read_text())
    n_set = len(MCQ.read_text().splitlines())
    assert (results["n"], results["n_items"], results["n_available"]) == (36, 12, n_set)
    assert (out / "run.json").is_file()  # save() writes the run record the index reads
    record = read_run_record(out / "run.json")
    assert results["metrics"]["acc"]["n"] == 12
    assert f"12 of {n_set}" in index_row(record, results).cells
    assert f"n = 12 of {n_set} (higher is better)" in card(record)


# -- a custom multiple-choice task (a task file) with shuffled options and the choices-only baseline ---


CUSTOM_MCQ = "params/examples/tasks/eo_satellite_mcq.eval.yaml"


def test_a_custom_multiple_choice_task_runs_with_permutations_and_choices_only(tmp_path):
    rows = pd.read_csv(ROOT / "data" / "examples" / "eo_satellite_mcq.csv")
    options = ["option_a", "option_b", "option_c", "option_d"]
    gold = {r["question"]: {r[options[ord(r["correct"]) - 65]]} for r in rows.to_dict("records")}

    def perfect(request):
        text = _last_user(request)
        if "withheld" in text:
            return "A"
        question = re.search(r"Question: (.*)", text).group(1)
        return [k for k, v in _shown_options(request).items() if v in gold[question]][0]

    def custom(client, folder):
        return _run(tmp_path / folder, client, task="mcqa_single_answer", task_file=CUSTOM_MCQ, dataset=None,
                    split=None, limit=None, permutations=3, choices_only=True)

    always_a = ScriptedClient(lambda r: "A")
    run = custom(always_a, "a")
    assert run.task.name == "eo_satellite_mcq" and len(run.base_items) == len(rows) == 16
    assert len(run.items) == 3 * 16 == len(run.requests)
    for item, request in zip(run.items, run.requests):  # each order shows the gold texts at the gold letters
        shown = _shown_options(request)
        assert [shown[k] for k in sorted(shown)] == item.fields["choices"]
        assert {shown[item.target]} == gold[item.question]
    assert any(it.target != base.target for it, base in zip(run.items[1::3], run.base_items))  # the gold moves
    run.generate()
    assert len(always_a.calls) == 3 * 16 + 16                   # three orders and the baseline
    baseline = always_a.calls[-1]
    assert "withheld" in _last_user(baseline) and run.base_items[-1].question not in _last_user(baseline)
    m = run.compute_metrics()
    assert m["robust_acc"]["value"] == 0.0 and m["consistency"]["value"] == 0.0 and m["robust_acc"]["n"] == 16
    first_letters = [it.target for it in run.base_items]
    assert m["acc"]["value"] == pytest.approx(first_letters.count("A") / 16)   # order 0 is the task file's
    assert run.choices_only_samples is not None and len(run.choices_only_samples) == 16

    right = custom(ScriptedClient(perfect), "p")
    right.generate()
    p = right.compute_metrics()
    assert p["robust_acc"]["value"] == 1.0 and p["consistency"]["value"] == 1.0
    assert [p[f"acc_permutation_{j}"]["value"] for j in range(3)] == [1.0, 1.0, 1.0]
    table = right.metrics_table()
    assert "acc (choices only)" in table.index and "robust_acc" in table.index
    out = right.save()
    results = json.loads((out / "results.json").read_text())
    assert results["design"]["permutations"] == 3 and results["choices_only"]["n"] == 16
    assert results["choices_only"]["value"] == pytest.approx(first_letters.count("A") / 16)
    samples = pd.read_csv(out / "samples.csv")
    assert len(samples) == 48 and sorted(samples["permutation"].unique()) == [0, 1, 2]
