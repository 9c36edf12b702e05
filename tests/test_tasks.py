"""Task definitions, prompts, few-shot sampling, scoring and task metrics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evekit import tasks as T
from evekit.data import Item, items_from_rows
from evekit.parsing import strip_think
from evekit.tasks import REFUSAL_ANSWER, SAMPLE_COLUMNS, TASKS, get_task
from evekit.types import GenerationResult


def rows_for(task: str, n: int = 6) -> list[dict]:
    if task == "mcqa_single_answer":
        return [{"Question": f"Single question {i}?", "Choices": ["10 m", "20 m", "60 m", "300 m"],
                 "Answer": "ABCD"[i % 4]} for i in range(n)]
    if task == "mcqa_multiple_answer":
        return [{"Question": f"Multiple question {i}?", "Answers": ["A", "C"] if i % 2 else ["B"],
                 "Choices": {"label": list("ABCDE"), "text": ["B2", "B5", "B4", "B9", "B10"]}} for i in range(n)]
    if task == "open_ended":
        return [{"Question": f"Open question {i}?", "Answer": f"Reference answer number {i}."} for i in range(n)]
    if task == "open_ended_w_context":
        return [{"Question": f"Context question {i}?", "Answer": f"Answer {i}.", "Doc 1": f"First doc {i}.",
                 "Doc 2": f"Second doc {i}." if i % 2 else "", "Doc 3": None} for i in range(n)]
    if task == "refusal":
        return [{"Question": f"Refusal question {i}?", "Context": f"Unrelated context {i}."} for i in range(n)]
    if task == "hallucination_detection":
        return [{"Question": f"Hallucination question {i}?", "Answer": f"Checked answer {i}.",
                 "Hard labels": [[0, 7]] if i % 2 == 0 else [], "is_hallucinated": i % 2 == 0} for i in range(n)]
    raise AssertionError(task)


def items_for(task: str, n: int = 6) -> list[Item]:
    return items_from_rows(get_task(task), rows_for(task, n), source=f"{task}.jsonl")


# ---------------------------------------------------------------------------------------------
# Definitions


@pytest.mark.parametrize(
    "name, fewshot, max_tokens, judge, metrics",
    [
        # EVE's metrics first; then MCC and macro-F1 (EuroEval's, issue 17) for the one-label tasks.
        ("mcqa_single_answer", 2, 10000, None, ("acc", "mcc", "macro_f1")),
        ("mcqa_multiple_answer", 2, 10000, None, ("IoU", "acc")),
        ("open_ended", 5, 40000, "fact_check", ("bleu", "rougeL", "cosine")),
        ("open_ended_w_context", 5, 40000, "context", ("bleu", "rougeL", "cosine")),
        ("refusal", 5, 40000, "refusal", ("bleu", "rougeL", "cosine")),
        ("hallucination_detection", 0, 100, None, ("acc", "precision", "recall", "f1", "mcc", "macro_f1")),
    ],
)
def test_task_defaults_follow_eve(name, fewshot, max_tokens, judge, metrics):
    task = get_task(name)
    assert (task.default_num_fewshot, task.default_max_tokens, task.judge_kind, task.metrics) == \
        (fewshot, max_tokens, judge, metrics)
    assert task.hub_id.startswith("eve-esa/")


def test_task_descriptions():
    assert "separated by a comma" in get_task("mcqa_multiple_answer").description
    assert "letter of the correct option only" in get_task("mcqa_single_answer").description
    hallu = get_task("hallucination_detection").description
    assert "Answer A if" in hallu and "B if" in hallu and "hallucinated (false or unsupported)" in hallu


def test_get_task_unknown_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_task("mcqa")
    for name in TASKS:
        assert name in str(err.value)
    assert get_task("mcqa_multiple_answers").name == "mcqa_multiple_answer"  # EVE's spelling


def test_task_is_frozen():
    with pytest.raises(Exception):
        get_task("open_ended").name = "x"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Prompts


EXPECTED_SHOT_ANSWER = {
    "mcqa_single_answer": "B",
    "mcqa_multiple_answer": "A, C",
    "open_ended": "Reference answer number 1.",
    "open_ended_w_context": "Answer 1.",
    "refusal": REFUSAL_ANSWER,
    "hallucination_detection": "B",
}


@pytest.mark.parametrize("name", list(TASKS))
def test_chat_prompt(name):
    task = get_task(name)
    items = items_for(name)
    [req] = T.build_requests(task, items[:1], api="chat", num_fewshot=2, fewshot_sampler="first_n", seed=0,
                             temperature=0.0, max_tokens=64, pool=items)
    msgs = req.messages
    assert req.api == "chat" and req.max_tokens == 64
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[0]["content"] == task.description
    # few-shot examples are items 1 and 2 (item 0 is being evaluated), answered with their targets
    assert items[1].question in msgs[1]["content"] and msgs[2]["content"] == EXPECTED_SHOT_ANSWER[name]
    assert items[2].question in msgs[3]["content"]
    assert items[0].question in msgs[-1]["content"]
    assert all(items[0].question not in m["content"] for m in msgs[:-1])


@pytest.mark.parametrize("name", list(TASKS))
def test_completions_prompt(name):
    task = get_task(name)
    items = items_for(name)
    [req] = T.build_requests(task, items[:1], api="completions", num_fewshot=2, fewshot_sampler="first_n", seed=0,
                             temperature=0.0, max_tokens=64, pool=items)
    prompt = req.prompt
    assert req.api == "completions" and req.stop
    assert prompt.startswith(task.description)
    assert prompt.endswith("\nAnswer:")
    assert f"Answer: {EXPECTED_SHOT_ANSWER[name]}\n\n" in prompt
    pos = [prompt.index(items[i].question) for i in (1, 2, 0)]
    assert pos == sorted(pos)  # shots first, item last
    assert prompt.count(items[0].question) == 1


def test_rendering_details():
    mcqa = items_for("mcqa_single_answer")[0]
    text = get_task("mcqa_single_answer").render(mcqa)
    assert "\nA. 10 m\nB. 20 m\nC. 60 m\nD. 300 m" in text
    ctx = items_for("open_ended_w_context")[1]
    text = get_task("open_ended_w_context").render(ctx)
    assert text.startswith("Document 1:\nFirst doc 1.\n\nDocument 2:\nSecond doc 1.\n\nQuestion: ")
    assert "Document 3" not in text
    ref = get_task("refusal").render(items_for("refusal")[0])
    assert ref.startswith("Document 1:\nUnrelated context 0.")
    hallu = get_task("hallucination_detection").render(items_for("hallucination_detection")[0])
    assert "Checked answer 0." in hallu and "\nA. " in hallu and "\nB. " in hallu


def test_defaults_from_task_when_not_given():
    items = items_for("open_ended")
    reqs = T.build_requests("open_ended", items, api="chat")
    assert T.get_task("open_ended").default_max_tokens == 40000   # EVE's, kept as the task's fact
    assert reqs[0].max_tokens == T.MAX_TOKENS_CAP == 2048          # what a request asks for by default
    assert T.build_requests("hallucination_detection", items_for("hallucination_detection"))[0].max_tokens == 100
    assert len(reqs[0].messages) == 1 + 2 * 5 + 1  # five shots (EVE default)


# ---------------------------------------------------------------------------------------------
# Few-shot sampling


def test_first_n_excludes_the_item():
    items = items_for("open_ended", 6)
    assert [s.doc_id for s in T.select_fewshot(items[0], items, 3, "first_n")] == [1, 2, 3]
    assert [s.doc_id for s in T.select_fewshot(items[2], items, 3, "first_n")] == [0, 1, 3]


def test_random_excludes_item_and_is_deterministic():
    items = items_for("open_ended", 20)
    for item in items:
        shots = T.select_fewshot(item, items, 5, "random", seed=3)
        assert len(shots) == 5 and item.doc_id not in {s.doc_id for s in shots}
        assert len({s.doc_id for s in shots}) == 5
        assert [s.doc_id for s in shots] == [s.doc_id for s in T.select_fewshot(item, items, 5, "random", seed=3)]
    a = [tuple(s.doc_id for s in T.select_fewshot(it, items, 5, "random", seed=3)) for it in items]
    b = [tuple(s.doc_id for s in T.select_fewshot(it, items, 5, "random", seed=4)) for it in items]
    assert a != b  # the seed matters
    # per-item rng: the same item gets the same shots whatever else is being run
    alone = T.select_fewshot(items[7], items, 5, "random", seed=3)
    assert [s.doc_id for s in alone] == list(a[7])


def test_duplicate_question_is_not_a_shot():
    items = items_for("open_ended", 4)
    twin = Item(doc_id=99, question=items[0].question, target="leak", source="other")
    shots = T.select_fewshot(items[0], [twin, *items], 3, "first_n")
    assert all(s.question != items[0].question for s in shots)


def test_small_pool_warns_and_bad_sampler_raises():
    items = items_for("open_ended", 3)
    with pytest.warns(UserWarning, match="fewer than 5 few-shot"):
        reqs = T.build_requests("open_ended", items, api="chat", num_fewshot=5)
    assert len(reqs[0].messages) == 1 + 2 * 2 + 1
    with pytest.raises(ValueError, match="fewshot_sampler"):
        T.build_requests("open_ended", items, api="chat", num_fewshot=1, fewshot_sampler="best")


# ---------------------------------------------------------------------------------------------
# Scoring


def results(*texts: str | None) -> list[GenerationResult]:
    """Results shaped as the client returns them: <think> removed into `reasoning`, `raw` as sent."""
    return [GenerationResult(text=None, error=t[6:]) if t and t.startswith("ERROR:") else
            GenerationResult(*strip_think(t), raw=t) if t else GenerationResult(text=t)
            for t in texts]


def test_score_single_answer():
    task = get_task("mcqa_single_answer")
    items = items_for("mcqa_single_answer", 5)  # gold A B C D A
    df = T.score_samples(task, items, results("A", "<think>hmm, C?</think>B", "F", "ERROR:HTTP 500", "A, C"))
    # The options after the answer; the label codes mcc and macro_f1 read after acc.
    assert list(df.columns) == SAMPLE_COLUMNS + ["doc.Choices", "acc", "gold_code", "pred_code"]
    assert df["gold_code"].tolist()[:3] + df["gold_code"].tolist()[4:] == [0.0, 1.0, 2.0, 0.0]
    # Unparsed ("F" is no choice, "A, C" two letters): -1, a miss of the gold letter; failed: NaN.
    assert df["pred_code"].tolist()[:3] + df["pred_code"].tolist()[4:] == [0.0, 1.0, -1.0, -1.0]
    assert math.isnan(df["pred_code"][3]) and math.isnan(df["gold_code"][3])
    assert df["acc"].tolist()[:3] == [1.0, 1.0, 0.0] and math.isnan(df["acc"][3]) and df["acc"][4] == 0.0
    assert df["reasoning"][1] == "hmm, C?" and df["filtered_resps"][1] == "B"
    assert df["response"][1] == "<think>hmm, C?</think>B"
    assert df["unparsed"].tolist() == [False, False, True, False, True]
    assert df["unparsed_reason"][2] == "letter F not among choices A-D"
    assert df["unparsed_reason"][4] == "several letters: A, C"
    assert df["failed"].tolist() == [False, False, False, True, False]
    assert df["error"][3] == "HTTP 500" and df["filtered_resps"][3] == ""
    assert (len(df), int(df["unparsed"].sum()), int(df["failed"].sum())) == (5, 2, 1)
    m = T.task_metrics(task, df, seed=0)
    assert m["acc"]["n"] == 4 and m["acc"]["value"] == pytest.approx(2 / 4)
    assert m["acc"]["ci_low"] <= 0.5 <= m["acc"]["ci_high"]
    assert list(m) == ["acc", "mcc", "macro_f1"] and m["mcc"]["n"] == m["macro_f1"]["n"] == 4


def test_score_multiple_answer():
    task = get_task("mcqa_multiple_answer")
    items = items_for("mcqa_multiple_answer", 4)  # gold B; A, C; B; A, C
    df = T.score_samples(task, items, results("B", "A", "B, F", "nothing"))
    # "B, F" names a letter outside the choices: unparsed, so scored wrong (IoU 0, not 0.5)
    assert df["IoU"].tolist() == pytest.approx([1.0, 0.5, 0.0, 0.0])
    assert df["acc"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert df["parsed"].tolist()[:3] == ["B", "A", "B, F"]
    assert df["unparsed"].tolist() == [False, False, True, True]
    m = T.task_metrics(task, df)
    assert m["IoU"]["value"] == pytest.approx(0.375) and m["acc"]["value"] == pytest.approx(0.25)
    assert set(m) == {"IoU", "acc"}


def test_score_hallucination_and_corpus_prf():
    task = get_task("hallucination_detection")
    items = items_for("hallucination_detection", 6)  # gold: hallucinated, not, hallucinated, not, ...
    # preds: A(tp) B(tn) B(fn) Yes(fp) ??(unparsed, gold=hallucinated -> predicted not: fn) ERROR
    df = T.score_samples(task, items, results("A", "B", "B", "Yes", "??", "ERROR:timeout"))
    assert df["acc"].tolist()[:5] == [1.0, 1.0, 0.0, 0.0, 0.0] and math.isnan(df["acc"][5])
    assert df["pred_hallucinated"].tolist()[:5] == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert df["gold_hallucinated"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    m = T.task_metrics(task, df, seed=0)
    # tp=1, fp=1, fn=2 over the 5 answered items
    assert m["precision"]["value"] == pytest.approx(1 / 2)
    assert m["recall"]["value"] == pytest.approx(1 / 3)
    assert m["f1"]["value"] == pytest.approx(2 * 1 / (2 * 1 + 1 + 2))
    assert m["acc"]["value"] == pytest.approx(2 / 5)
    assert all(m[k]["n"] == 5 for k in m)
    assert m["f1"]["ci_low"] <= m["f1"]["value"] <= m["f1"]["ci_high"]
    # mcc and macro_f1 code A = 0, B = 1; the unparsed "??" is -1 there (a miss of its gold label),
    # while precision/recall/F1 read it as the opposite of gold (EVE's binary rule).
    assert df["gold_code"].tolist()[:5] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert df["pred_code"].tolist()[:5] == [0.0, 1.0, 1.0, 0.0, -1.0]
    assert list(m) == ["acc", "precision", "recall", "f1", "mcc", "macro_f1"]


def test_score_open_ended_reference_metrics():
    task = get_task("open_ended")
    items = items_for("open_ended", 3)
    df = T.score_samples(task, items, results("Reference answer number 0.", "", "ERROR:HTTP 503"), embeddings=False)
    assert df["bleu"][0] == pytest.approx(1.0) and df["rougeL"][0] == pytest.approx(1.0)
    assert df["unparsed"][1] and df["unparsed_reason"][1] == "empty answer" and df["bleu"][1] == 0.0
    assert math.isnan(df["rougeL"][2])
    assert "cosine" not in df.columns and any("cosine" in n for n in df.attrs["notes"])
    m = T.task_metrics(task, df)
    assert set(m) == {"bleu", "rougeL"} and m["bleu"]["n"] == 2


def test_refusal_scores_against_refusal_sentence():
    task = get_task("refusal")
    items = items_for("refusal", 2)
    df = T.score_samples(task, items, results(REFUSAL_ANSWER, "Sentinel-2B weighed 1.1 t."), embeddings=False)
    assert df["target"][0] == REFUSAL_ANSWER
    assert df["rougeL"][0] == pytest.approx(1.0) and df["rougeL"][1] < 0.3


@pytest.mark.embeddings
def test_cosine_column_with_embeddings_extra():
    from evekit.metrics import embeddings_unavailable

    note = embeddings_unavailable()
    if note:
        pytest.skip(f"embeddings extra not installed: {note}")
    items = items_for("open_ended", 3)
    df = T.score_samples("open_ended", items, results("Reference answer number 0.", "", "ERROR:x"))
    assert df["cosine"][0] == pytest.approx(1.0, abs=1e-4) and df["cosine"][1] == 0.0
    assert math.isnan(df["cosine"][2])
    assert T.task_metrics("open_ended", df)["cosine"]["n"] == 2


def test_score_samples_length_mismatch():
    with pytest.raises(ValueError, match="2 items but 1 results"):
        T.score_samples("open_ended", items_for("open_ended", 2), results("x"))


def test_judge_case_fields():
    ctx = items_for("open_ended_w_context", 2)[1]
    fields = T.judge_case_fields("open_ended_w_context", ctx, "my answer")
    assert fields == {"question": ctx.question, "answer": "my answer", "reference": "Answer 1.",
                      "context": ["First doc 1.", "Second doc 1."]}
    ref = T.judge_case_fields("refusal", items_for("refusal", 1)[0], "no")
    assert ref["reference"] == REFUSAL_ANSWER and ref["context"] == ["Unrelated context 0."]
    assert T.judge_case_fields("open_ended", items_for("open_ended", 1)[0], "a")["context"] is None
    with pytest.raises(ValueError):
        T.judge_case_fields("mcqa_single_answer", items_for("mcqa_single_answer", 1)[0], "A")


def test_metrics_are_seeded():
    task = get_task("mcqa_single_answer")
    items = items_for("mcqa_single_answer", 8)
    df = T.score_samples(task, items, results(*"ABCDBBCA"))
    assert T.task_metrics(task, df, seed=1) == T.task_metrics(task, df, seed=1)
    assert np.isfinite(T.task_metrics(task, df, n_boot=2000)["acc"]["ci_high"])


def test_reasoning_without_answer_is_unparsed_with_hint():
    items = items_for("mcqa_single_answer", 2)
    df = T.score_samples("mcqa_single_answer", items, [*results("<think>B or C... and then"),
                                                       GenerationResult(text="", reasoning="thought a lot")])
    assert df["unparsed"].all() and (df["acc"] == 0.0).all()
    assert df["reasoning"].tolist() == ["B or C... and then", "thought a lot"]
    assert all("run out of max_tokens" in r for r in df["unparsed_reason"])


# ---------------------------------------------------------------------------- odd choices (issue 24)
@pytest.mark.parametrize("name, row, message", [
    ("mcqa_single_answer", {"question": "Band?", "choices": ["B4"], "answer": "A"}, "only one choice"),
    ("mcqa_single_answer", {"Question": "Band?", "Choices": ["B4", "B8", "b4"], "Answer": "A"},
     "choices A and C have the same text"),
    ("mcqa_multiple_answer", {"Question": "Bands?", "Answers": ["A"],
                              "Choices": {"label": ["A", "B"], "text": ["B4", "B4"]}}, "choices A and B"),
])
def test_prepare_refuses_one_choice_and_repeated_choice_texts(name, row, message):
    from evekit.errors import DataError

    with pytest.raises(DataError) as err:
        items_from_rows(get_task(name), [row], "odd.jsonl")
    assert f"odd.jsonl: 1 of 1 rows cannot be used for task {name}" in str(err.value)
    assert "row 0 (0-based), column 'Choices'" in str(err.value)
    assert message in str(err.value)


def test_two_distinct_choices_are_enough():
    (item,) = items_from_rows(get_task("mcqa_single_answer"), [{"Question": "Q?", "Choices": ["x", "y"],
                                                                 "Answer": "B"}], "ok.jsonl")
    assert item.fields["labels"] == ["A", "B"] and item.target == "B"
