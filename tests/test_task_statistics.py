"""Task-side statistics: each metric's interval comes from its kind, one rule for unparsed answers
(scored wrong, not sent to judges), baselines next to acc, and metrics per group (`group_by`)."""
from __future__ import annotations

import sys
from pathlib import Path

import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from evekit import metrics as M
from evekit import tasks as T
from evekit.data import DataError, items_from_rows
from evekit.runs.task.run import RULE_METHOD, RULE_REASON, TaskRun
from evekit.tasks import get_task
from evekit.types import GenerationResult, Usage
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_client import ScriptedClient  # noqa: E402


MODEL = "fake-model"


def _acc_samples(k: int, n: int) -> pd.DataFrame:
    return pd.DataFrame({"acc": [1.0] * k + [0.0] * (n - k), "failed": False})


# --------------------------------------------------------------------------------- intervals

@pytest.mark.parametrize("k, n", [(12, 12), (0, 57), (13, 61), (1, 4)])
def test_acc_interval_is_wilson_as_statsmodels(k, n):
    m = M.get_metric("acc").summarize(_acc_samples(k, n))
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert m["value"] == pytest.approx(k / n) and m["n"] == n and m["method"] == "wilson"
    assert m["ci_low"] == pytest.approx(low, abs=1e-9) and m["ci_high"] == pytest.approx(high, abs=1e-9)


def test_all_right_or_all_wrong_is_not_a_zero_width_interval():
    twelve = M.get_metric("acc").summarize(_acc_samples(12, 12))
    assert twelve["ci_high"] == 1.0 and twelve["ci_low"] == pytest.approx(0.7575, abs=1e-4)  # not [1, 1]
    none = M.get_metric("acc").summarize(_acc_samples(0, 57))
    assert none["ci_low"] == 0.0 and none["ci_high"] == pytest.approx(0.0631, abs=1e-4)  # not [0, 0]


def test_graded_metric_gets_bca_and_a_bound_when_constant():
    from scipy.stats import bootstrap

    iou = np.array([1.0, 0.5, 0.0, 0.5, 1.0, 0.25, 0.75, 0.5, 1.0, 0.0])
    m = M.get_metric("IoU").summarize(pd.DataFrame({"IoU": iou}), seed=3, n_boot=2000)
    ref = bootstrap((iou,), np.mean, n_resamples=2000, method="BCa", rng=np.random.default_rng(3)).confidence_interval
    assert m["method"] == "bca" and m["value"] == pytest.approx(iou.mean())
    assert (m["ci_low"], m["ci_high"]) == pytest.approx((ref.low, ref.high))
    constant = M.get_metric("rougeL").summarize(pd.DataFrame({"rougeL": [0.0] * 20}))
    assert constant["method"] == "constant_bound" and constant["ci_low"] == 0.0 and constant["ci_high"] > 0.1


def test_corpus_metrics_use_the_conditional_wilson_interval():
    # tp=3, fp=1, fn=2, tn=4
    pred = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    gold = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    df = pd.DataFrame({"pred_hallucinated": pred, "gold_hallucinated": gold}, dtype=float)
    p = M.get_metric("precision").summarize(df)
    r = M.get_metric("recall").summarize(df)
    assert p["value"] == pytest.approx(3 / 4) and p["n_informative"] == 4 and p["method"] == "wilson_conditional"
    assert (p["ci_low"], p["ci_high"]) == pytest.approx(proportion_confint(3, 4, method="wilson"))
    assert (r["ci_low"], r["ci_high"]) == pytest.approx(proportion_confint(3, 5, method="wilson"))
    assert p["n"] == r["n"] == 10


def test_undefined_precision_is_null_with_a_note_not_zero(tmp_path):
    task = get_task("hallucination_detection")
    rows = [{"Question": f"q{i}", "Answer": f"a{i}", "is_hallucinated": i % 2 == 0} for i in range(6)]
    items = items_from_rows(task, rows, source="h.jsonl")
    df = T.score_samples(task, items, [GenerationResult(text="B")] * 6)  # never predicts "hallucinated"
    m = T.task_metrics(task, df)
    assert math.isnan(m["precision"]["value"]) and "no item was predicted positive" in m["precision"]["note"]
    assert m["recall"]["value"] == 0.0  # defined: 0 of 3 hallucinated items flagged
    from evekit import report
    from evekit.runs.task import results as task_results

    res = task_results.build_results(task=task.name, model="m", samples=df, metrics=m, usage={}, params={})
    assert res["metrics"]["precision"]["value"] is None and res["metrics"]["precision"]["note"]
    json.dumps(res, allow_nan=False)
    # Every answer is "B": MCC is undefined too (null with its reason), macro-F1 is defined.
    assert res["metrics"]["mcc"]["value"] is None and "all one label" in res["metrics"]["mcc"]["note"]
    assert res["metrics"]["macro_f1"]["value"] == pytest.approx((0 + 2 * 3 / (3 + 6)) / 2)
    assert [r["evaluation_name"] for r in task_results.to_eee(res, dataset="h.jsonl")["evaluation_results"]] == [
        "acc", "recall", "f1", "macro_f1"]  # the undefined metrics are left out of EEE, not reported as 0


def test_a_custom_corpus_statistic_falls_back_to_the_bootstrap():
    metric = M.Metric("share_pred", "corpus", "share predicted positive", columns=("pred", "gold"),
                      statistic=lambda d, axis=1: np.asarray(d).mean(axis=axis)[..., 0])
    out = metric.summarize(pd.DataFrame({"pred": [1, 0, 1, 1.0], "gold": [1, 1, 0, 0.0]}), n_boot=500)
    assert out["method"] == "percentile" and out["n_defined"] == 500 and out["value"] == pytest.approx(0.75)


# --------------------------------------------------------------------------- unparsed answers

def test_unparsed_multiple_answer_scores_iou_zero():
    task = get_task("mcqa_multiple_answer")
    rows = [{"Question": "q?", "Answers": ["A", "B"], "Choices": ["x", "y", "z", "w"]}]
    items = items_from_rows(task, rows, source="m.jsonl")
    df = T.score_samples(task, items, [GenerationResult(text="A, B, F")])  # F is not a choice
    assert bool(df["unparsed"][0]) and df["parsed"][0] == "A, B, F"
    assert df["IoU"][0] == 0.0 and df["acc"][0] == 0.0  # was IoU 0.667
    ok = T.score_samples(task, items, [GenerationResult(text="A, C")])
    assert ok["IoU"][0] == pytest.approx(1 / 3) and not ok["unparsed"][0]


def _open_run(monkeypatch, tmp_path, answers: dict[str, str], judge_names=("j1", "j2"), **params):
    data = tmp_path / "open.jsonl"
    data.write_text("".join(json.dumps({"Question": q, "Answer": f"ref {i}", "topic": "ab"[i % 2]}) + "\n"
                            for i, q in enumerate(answers)))
    judges = [{"name": n, "model": f"judge-model-{n}", "base_url": "http://127.0.0.1:9/v1"} for n in judge_names]
    run = TaskRun.from_notebook({"task": "open_ended", "model_name": MODEL, "base_url": "http://127.0.0.1:9/v1",
                                 "dataset": str(data), "cache_dir": str(tmp_path / "cache"), "num_fewshot": 0,
                                 "output_dir": str(tmp_path / "out"), "run_name": "t", "judges": judges,
                                 **params})
    model = ScriptedClient(lambda req: answers[req.messages[-1]["content"].removeprefix("Question: ")])
    monkeypatch.setattr(run, "_client", lambda *a, **k: model)
    judge_clients = []

    def judge_client(*args, **kwargs):
        client = ScriptedClient(lambda req: json.dumps({"reasoning": "fine", "verdict": 1}))
        judge_clients.append(client)
        return client

    monkeypatch.setattr(run, "client_factory", judge_client)
    return run, judge_clients


def test_unparsed_answers_are_not_sent_to_judges_and_fail_by_rule(tmp_path, monkeypatch):
    answers = {"q0?": "An answer.", "q1?": "", "q2?": "   ", "q3?": "Another answer."}
    run, judge_clients = _open_run(monkeypatch, tmp_path, answers)
    run.load()
    run.generate()
    verdicts = run.judge()
    assert [len(c.calls) for c in judge_clients] == [2, 2]  # only the two parsed answers were sent
    s = run.samples
    rule = s["unparsed"].to_numpy()
    assert rule.tolist() == [False, True, True, False]
    for name in ("j1", "j2"):
        assert s[f"judge_{name}"].tolist() == [1.0, 0.0, 0.0, 1.0]
        assert s.loc[rule, f"judge_{name}_method"].eq(RULE_METHOD).all()
        assert s.loc[rule, f"judge_{name}_reasoning"].eq(RULE_REASON).all()
        assert s.loc[rule, f"judge_{name}_error"].isna().all()  # not an abstention
    assert verdicts["judge_voting"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert np.isnan(s.loc[rule, "judge_agreement"]).all()  # no opinion to agree on
    m = run.compute_metrics()
    assert m["judge_voting"]["value"] == 0.5 and m["judge_voting"]["n"] == 4  # counted as FAIL
    assert m["judge_agreement"]["n"] == 2
    summary = run.judge_summary()
    assert summary["FAIL by rule (unparsed)"].tolist() == [2, 2] and summary["FAIL"].tolist() == [2, 2]
    assert "rule: 2" in summary["verdicts via"]["j1"]
    out = run.save()
    results = json.loads((out / "results.json").read_text())
    assert results["n_judge_rule"] == 2 and results["judge_counts"]["methods"]["j1"]["rule"] == 2
    assert results["n_judge_failed"] == 0


def test_judge_rule_when_every_answer_is_unparsed(tmp_path, monkeypatch):
    run, judge_clients = _open_run(monkeypatch, tmp_path, {"q0?": "", "q1?": ""}, judge_names=("only",))
    run.load()
    run.generate()
    run.judge()
    assert [len(c.calls) for c in judge_clients] == [0]
    assert run.samples["judge_only"].tolist() == [0.0, 0.0]
    assert run.compute_metrics()["llm_as_judge"]["value"] == 0.0


# ---------------------------------------------------------------------------------- baselines

def _mcqa_items(golds: str, n_choices: int = 4):
    task = get_task("mcqa_single_answer")
    rows = [{"Question": f"q{i}?", "Choices": [f"c{j}" for j in range(n_choices)], "Answer": g}
            for i, g in enumerate(golds)]
    return task, items_from_rows(task, rows, source="s.jsonl")


def test_baselines_chance_and_most_frequent_answer():
    task, items = _mcqa_items("CCCABCDC")  # C is gold 5 of 8 times
    df = T.score_samples(task, items, [GenerationResult(text="A")] * 8)
    base = T.baselines(task, items, df)
    assert base["chance"]["value"] == pytest.approx(0.25) and base["chance"]["n"] == 8
    mf = base["most_frequent"]
    assert mf["answer"] == "C" and mf["value"] == pytest.approx(5 / 8) and mf["n"] == 8
    assert (mf["ci_low"], mf["ci_high"]) == pytest.approx(proportion_confint(5, 8, method="wilson"))
    note = T.baseline_note(T.task_metrics(task, df), base)
    assert note.startswith("acc 0.125") and 'always answering "C" (0.625)' in note


def test_baselines_skip_failed_items_and_break_ties_in_label_order():
    task, items = _mcqa_items("BABA")
    results = [GenerationResult(text="A"), GenerationResult(text=None, error="HTTP 500"),
               GenerationResult(text="B"), GenerationResult(text="A")]
    df = T.score_samples(task, items, results)
    base = T.baselines(task, items, df)
    assert base["most_frequent"]["answer"] == "B" and base["most_frequent"]["n"] == 3  # B twice, A once
    assert T.baselines("open_ended", [], df) is None


def test_baselines_of_hallucination_and_classification_tasks():
    task = get_task("hallucination_detection")
    rows = [{"Question": f"q{i}", "Answer": f"a{i}", "is_hallucinated": i < 3} for i in range(4)]
    items = items_from_rows(task, rows, source="h.jsonl")
    df = T.score_samples(task, items, [GenerationResult(text="A")] * 4)
    base = T.baselines(task, items, df)
    assert base["chance"]["value"] == 0.5 and base["most_frequent"]["answer"] == "A"
    assert base["most_frequent"]["value"] == 0.75
    from evekit.custom import task_from_dict

    cls = task_from_dict({"kind": "classification", "labels": ["flood", "fire", "none"], "dataset": "x.csv"})
    c_items = items_from_rows(cls, [{"input": f"t{i}", "target": lab} for i, lab in enumerate(["fire", "none", "fire"])],
                              source="x.csv")
    c_df = T.score_samples(cls, c_items, [GenerationResult(text="fire")] * 3)
    c_base = T.baselines(cls, c_items, c_df)
    assert c_base["chance"]["value"] == pytest.approx(1 / 3) and c_base["most_frequent"]["answer"] == "fire"


def test_baselines_in_the_metrics_table_and_results(tmp_path, monkeypatch, capsys):
    data = tmp_path / "s.jsonl"
    data.write_text("".join(json.dumps({"Question": f"q{i}?", "Choices": ["a", "b", "c", "d"], "Answer": g}) + "\n"
                            for i, g in enumerate("CCCCABCD")))
    run = TaskRun.from_notebook({"task": "mcqa_single_answer", "model_name": MODEL, "dataset": str(data),
                                 "base_url": "http://127.0.0.1:9/v1", "cache_dir": str(tmp_path / "cache"),
                                 "output_dir": str(tmp_path / "out"), "run_name": "t", "num_fewshot": 0})
    monkeypatch.setattr(run, "_client", lambda *a, **k: ScriptedClient(lambda req: "C"))
    run.load()
    run.generate()
    table = run.metrics_table()
    assert list(table.index) == ["acc", "mcc", "macro_f1", "acc (chance)", 'acc (always "C")']
    assert table.loc["acc", "value"] == table.loc['acc (always "C")', "value"] == 0.625
    assert table.loc["mcc", "value"] == "–"  # one answer for every item: undefined, not 0
    assert "does not beat always answering" in capsys.readouterr().out
    results = json.loads((run.save() / "results.json").read_text())
    assert set(results["metrics"]) == {"acc", "mcc", "macro_f1"}  # the baselines are not metrics of the model
    assert results["metrics"]["mcc"]["value"] is None and "all one label" in results["metrics"]["mcc"]["note"]
    assert results["baselines"]["most_frequent"]["answer"] == "C"
    assert results["baselines"]["chance"]["value"] == 0.25
    assert any("does not beat" in n for n in results["notes"])
    assert "by_group" not in results


# ------------------------------------------------------------------------------------ groups

def test_group_by_table_per_group_with_intervals(tmp_path, monkeypatch):
    data = tmp_path / "s.csv"
    pd.DataFrame({"Question": [f"q{i}?" for i in range(7)], "Choices": ['["a", "b", "c"]'] * 7,
                  "Answer": list("AAAABBB"), "topic": ["sar"] * 4 + ["optical"] * 3}).to_csv(data, index=False)
    run = TaskRun.from_notebook({"task": "mcqa_single_answer", "model_name": MODEL, "dataset": str(data),
                                 "base_url": "http://127.0.0.1:9/v1", "cache_dir": str(tmp_path / "cache"),
                                 "output_dir": str(tmp_path / "out"), "run_name": "t", "num_fewshot": 0,
                                 "group_by": "topic"})
    monkeypatch.setattr(run, "_client", lambda *a, **k: ScriptedClient(lambda req: "A"))
    run.load()
    run.generate()
    assert run.samples["group"].tolist() == ["sar"] * 4 + ["optical"] * 3
    table = run.by_group()
    assert list(table.columns) == ["group", "metric", "value", "ci_low", "ci_high", "n", "method"]
    assert set(table["group"]) == {"optical", "sar"} and set(table["metric"]) == {"acc", "mcc", "macro_f1"}
    table = table[table["metric"] == "acc"]
    assert table["group"].tolist() == ["optical", "sar"]
    sar = table.set_index("group").loc["sar"]
    assert (sar["value"], sar["n"]) == (1.0, 4)
    assert (sar["ci_low"], sar["ci_high"]) == pytest.approx(proportion_confint(4, 4, method="wilson"), abs=1e-4)
    assert table.set_index("group").loc["optical", "value"] == 0.0
    out = run.save()
    assert (out / "by_group.png").is_file()
    results = json.loads((out / "results.json").read_text())
    assert results["by_group"]["column"] == "topic"
    assert results["by_group"]["groups"]["sar"]["acc"]["n"] == 4
    assert results["by_group"]["groups"]["optical"]["acc"]["ci_high"] > 0


def test_group_by_without_the_column_names_the_file_and_its_columns(tmp_path):
    data = tmp_path / "s.jsonl"
    data.write_text(json.dumps({"Question": "q?", "Choices": ["a", "b"], "Answer": "A"}) + "\n")
    with pytest.raises(DataError) as info:
        T.load_items("mcqa_single_answer", str(data), group_by="topic")
    text = str(info.value)
    assert text.startswith("group_by='topic'") and str(data) in text
    assert "'Question', 'Choices', 'Answer'" in text


def test_group_values_missing_in_some_rows_form_their_own_group(tmp_path):
    data = tmp_path / "s.jsonl"
    data.write_text("".join(json.dumps({"Question": f"q{i}?", "Choices": ["a", "b"], "Answer": "A", "topic": t}) + "\n"
                            for i, t in enumerate(["sar", None, "sar"])))
    items = T.load_items("mcqa_single_answer", str(data), group_by="topic")
    assert [it.fields["group"] for it in items] == ["sar", "(missing)", "sar"]


def test_by_group_without_group_by_says_so(tmp_path, capsys):
    run = TaskRun.from_notebook({"task": "mcqa_single_answer", "model_name": MODEL,
                                 "base_url": "http://127.0.0.1:9/v1"})
    assert run.by_group() is None
    assert capsys.readouterr().out == "no group_by set: no breakdown by group\n"


def test_group_breakdown_plot_has_one_row_per_group():
    from evekit import plots

    table = pd.DataFrame({"group": ["a", "b", "c"], "metric": ["acc"] * 3, "value": [0.2, 0.5, float("nan")],
                          "ci_low": [0.1, 0.3, float("nan")], "ci_high": [0.4, 0.7, float("nan")], "n": [10, 12, 0]})
    fig = plots.group_breakdown(table, "acc", group_by="topic", overall=0.4)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert ax.get_xlabel() == "acc (95% interval)" and "by topic" in ax.get_title()
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_cosine_may_be_negative_and_gets_an_interval_within_its_range():
    """Cosine similarity lies in [-1, 1] (a refusal against an unrelated reference can score below 0)."""
    from evekit import metrics as M

    df = pd.DataFrame({"cosine": [0.31, -0.12, 0.05, 0.44, -0.02, 0.18, 0.09, 0.27]})
    out = M.get_metric("cosine").summarize(df, seed=0, n_boot=500)
    assert out["n"] == 8 and -1.0 <= out["ci_low"] < out["value"] < out["ci_high"] <= 1.0
    with pytest.raises(ValueError, match="must lie in"):
        M.get_metric("rougeL").summarize(pd.DataFrame({"rougeL": [0.2, -0.1]}))
