"""`evekit plan` predicts the calls a task run sends, for every task kind and level of the demo's
parameter files and for the designs beside them (repeats, option orders, the choices-only baseline,
the span levels, log-probability scoring, JSON answers).

Each case is a parameter file the plan reads and the run reads (the demo's file pointed at a stub
server, `limit` 6); the stub counts the requests per model. Three rounds, as a batch goes:

1. nothing cached: the plan's model calls are the model requests the stub gets (the answers alone,
   judges left out); its judge calls, an upper bound on answers not there yet, are the judge
   requests the stub gets in the full run (every stub answer parses) or more (repeats whose answers
   are equal share one judge call);
2. the answers cached: the plan's judge calls are exactly what the full run sends, and no model call;
3. everything cached: nothing left to send (the plan's calls are the run's cache keys).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from evekit.batch import plan
from evekit.batch.paramfiles import SERVER_URL_PLACEHOLDER, read_run_file
from evekit.cache import cache_key
from evekit.paths import REPO_ROOT
from evekit.runs.task.run import TaskRun
from stub_server import StubServer

MODEL = "stub-model"
LIMIT = 6
DEMO = REPO_ROOT / "params" / "demo"
EXAMPLES = REPO_ROOT / "params" / "examples"
# Parameters that name files which change no call (and may not exist before the demo ran).
NO_CALLS = ("judge_validation", "expert_labels")


def _planned(path: Path) -> bool:
    """A parameter file of a kind `evekit plan` plans (the task notebooks)."""
    kind = read_run_file(path, REPO_ROOT / "notebooks", SERVER_URL_PLACEHOLDER, check_files=False).kind
    return kind is not None and kind.plan_note is None


# (case name = the parameter file's name without .yaml, the file it starts from, what it changes)
CASES: list[tuple[str, Path, dict[str, Any]]] = [
    (p.stem, p, {}) for p in sorted(DEMO.glob("*.yaml")) if _planned(p)]
CASES += [
    ("hallucination_detection.hard_spans", DEMO / "hallucination_detection.yaml", {"level": "hard_spans"}),
    ("hallucination_detection.soft_spans", DEMO / "hallucination_detection.yaml", {"level": "soft_spans"}),
    ("open_ended.repeats", DEMO / "open_ended.yaml", {"repeats": 2, "repeat_over": "sampling", "temperature": 0.7}),
    ("refusal.repeats", DEMO / "refusal.yaml", {"repeats": 3, "repeat_over": "both", "num_fewshot": 1, "temperature": 0.7}),
    ("mcqa_single_answer.fewshot_repeats", DEMO / "mcqa_single_answer.yaml", {"repeats": 2, "repeat_over": "fewshot"}),
    ("mcqa_single_answer.logprobs", EXAMPLES / "mcqa_single_answer.logprobs.yaml", {}),
    ("mcqa_single_answer.logprobs_only", EXAMPLES / "mcqa_single_answer.logprobs.yaml", {"scoring": "logprobs"}),
    ("custom_task.eo_entities", EXAMPLES / "custom_task.eo_entities.yaml", {}),
    ("custom_task.eo_entities_repeats", EXAMPLES / "custom_task.eo_entities.yaml",
     {"repeats": 2, "repeat_over": "sampling", "temperature": 0.7}),
]


@pytest.fixture(scope="module")
def stub():
    # verdicts: every judge reply usable; json_replies: every span and JSON-answer reply usable.
    with StubServer(verdicts=True, json_replies=True) as server:
        yield server


@pytest.fixture(autouse=True)
def cheap_cosine(monkeypatch):
    """The cosine metric without an embedding model (scores change no call)."""
    import numpy as np

    from evekit import metrics

    monkeypatch.setattr(metrics, "cosine_similarities",
                        lambda hyps, refs: np.array([0.5] * len(hyps)))


def write_case(folder: Path, name: str, source: Path, change: dict[str, Any], base_url: str) -> Path:
    """The case's parameter file: `source` pointed at `base_url`, with its own cache and outputs."""
    params = yaml.safe_load(source.read_text(encoding="utf-8"))
    for key in NO_CALLS:
        params.pop(key, None)
    params.update(change)
    params.update({"model_name": MODEL, "base_url": base_url, "api_key_env": None, "limit": LIMIT,
                   "max_retries": 0, "timeout": 30, "cache_dir": str(folder / "cache"),
                   "output_dir": str(folder / "outputs")})
    params["judges"] = [{**j, "model": f"judge-{j['name']}", "base_url": base_url}
                        for j in params.get("judges") or []]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def task_run(path: Path, *, judges: bool = True) -> TaskRun:
    """The run a notebook builds from the file (the parameters `evekit run` hands it)."""
    url = os.environ.get("EVEKIT_SERVER_URL") or SERVER_URL_PLACEHOLDER
    namespace = dict(read_run_file(path, REPO_ROOT / "notebooks", url, check_files=False).injected)
    if not judges:  # the answers alone (round 1 of a batch)
        namespace["judges"] = []
    run = TaskRun.from_notebook(namespace)
    run.load()
    return run


def planned(path: Path) -> dict[str, dict[str, int]]:
    """{role: {"to_send", "upper_bound"}} of the plan of `path`."""
    table = plan.plan_table(plan.plan_files([path]))
    return {row.role: {"to_send": int(row.to_send), "upper_bound": int(row.upper_bound)}
            for row in table.itertuples()}


def sent(stub: StubServer) -> dict[str, int]:
    """Requests the stub got since its last reset, per role as the plan names them."""
    counts = stub.stats()["by_model"]
    return {("model" if m == MODEL else f"judge {m.removeprefix('judge-')}"): n for m, n in counts.items()}


def judge_roles(path: Path) -> list[str]:
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [f"judge {j['name']}" for j in params.get("judges") or []]


@pytest.mark.parametrize("name,source,change", CASES, ids=[c[0] for c in CASES])
def test_plan_predicts_the_requests_the_run_sends(stub, tmp_path, name, source, change):
    path = write_case(tmp_path, name, source, change, stub.base_url)
    judges = judge_roles(path)
    stub.reset()
    first = planned(path)
    assert stub.stats()["total"] == 0, "planning sends nothing"
    wrong: list[str] = []  # every disagreement of the case, said at the end (with the figures printed)

    # Round 1: the model's answers.
    task_run(path, judges=False).generate()
    round1 = sent(stub)
    if round1 != {"model": first["model"]["to_send"]}:
        wrong.append(f"round 1: planned {first['model']['to_send']} model calls, the stub got {round1}")

    # Round 2: the answers are cached; the judge calls are exact now.
    middle = planned(path)
    if middle["model"]["to_send"]:
        wrong.append(f"round 2: {middle['model']['to_send']} model calls still to send after the run sent them")
    stub.reset()
    run = task_run(path)
    run.generate()
    if judges:
        run.judge()
    round2 = sent(stub)
    if round2.get("model"):
        wrong.append(f"round 2: the run sent {round2['model']} model calls again")
    line = f"PLANCALLS {name}: model planned {first['model']['to_send']} sent {round1.get('model', 0)}"
    for role in judges:
        upper, exact, got = first[role]["to_send"], middle[role]["to_send"], round2.get(role, 0)
        line += f"; {role} planned {upper} (bound {first[role]['upper_bound']}) then {exact}, sent {got}"
        if middle[role]["upper_bound"] or exact != got:
            wrong.append(f"round 2: {role}: planned {exact} calls on the cached answers, the stub got {got}")
        # Every stub answer parses: the bound is reached, unless repeats gave equal answers (one call).
        if (upper != got) if run.config.repeats == 1 else (upper < got):
            wrong.append(f"round 1: {role}: planned up to {upper} judge calls, the run sent {got}")

    # Round 3: everything cached, nothing left to send.
    last = planned(path)
    line += f"; left after the run {sum(r['to_send'] for r in last.values())}"
    print(line)
    if any(r["to_send"] for r in last.values()):
        wrong.append(f"round 3: calls still to send after the run: {last}")
    assert not wrong, "; ".join(wrong)


@pytest.mark.parametrize("name,source,change", CASES, ids=[c[0] for c in CASES])
def test_model_calls_are_what_generate_sends_first(tmp_path, name, source, change):
    """`TaskRun.model_calls()` lists, step by step, the requests `generate` sends (the plan records
    them as sent): the same cache keys, as many times."""
    path = write_case(tmp_path, name, source, change, "http://127.0.0.1:9/v1")
    (run_plan,) = plan.plan_files([path])
    recorded = sorted(c.key for c in run_plan.calls if c.role == "model")
    run = task_run(path)
    declared = sorted(cache_key(MODEL, r) for step in run.model_calls() for r in step.requests)
    assert recorded == declared
    judged = [s for s in run.model_calls() if s.judged]
    assert len(judged) == (1 if run.task.judge_kind is not None and run.config.judge_specs() else 0)


def test_json_answers_send_a_repeats_own_seed_and_keep_the_runs_keys(tmp_path):
    """The JSON answers of a custom task: repeat r > 0 sends its own seed (else every repeat is one
    call, one answer); repeat 0, like a run without repeats, sends none, so the calls a recorded run
    cached are still its calls."""
    source = EXAMPLES / "custom_task.eo_entities.yaml"
    once = task_run(write_case(tmp_path / "once", "custom_task.eo_entities", source, {}, "http://127.0.0.1:9/v1"))
    twice = task_run(write_case(tmp_path / "twice", "custom_task.eo_entities", source,
                                {"repeats": 2, "repeat_over": "sampling", "temperature": 0.7}, "http://127.0.0.1:9/v1"))
    (step,) = once.model_calls()
    assert step.structured and all(r.seed is None and r.response_format for r in step.requests)
    (repeated,) = twice.model_calls()
    by_repeat = {r: [q for it, q in zip(repeated.items, repeated.requests) if it.fields["repeat"] == r] for r in (0, 1)}
    assert [q.seed for q in by_repeat[0]] == [None] * LIMIT
    assert len({q.seed for q in by_repeat[1]}) == 1 and by_repeat[1][0].seed is not None
    keys = {r: [cache_key(MODEL, q) for q in qs] for r, qs in by_repeat.items()}
    assert not set(keys[0]) & set(keys[1])
    # Repeat 0 at temperature 0.7 differs from the run without repeats only by its temperature.
    assert [q.messages for q in by_repeat[0]] == [q.messages for q in step.requests]
