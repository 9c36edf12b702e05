"""The summary across runs: honest n, paired tests for every pair, Holm, detectable differences."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evekit.runs.summary import board as lb
from evekit.runs.registry import KINDS


def write(out: Path, model: str, task: str, metrics: dict, samples: pd.DataFrame, n: int | None = None,
          **extra) -> None:
    d = out / "run" / model / task
    d.mkdir(parents=True)
    res = {"task": task, "model": model, "n": len(samples) if n is None else n, "n_unparsed": 0, "n_failed": 0,
           "metrics": metrics, **extra}
    (d / "results.json").write_text(json.dumps(res))
    samples.to_csv(d / "samples.csv", index=False)


def acc_run(out, model, acc, n_total=None, task="mcqa_single_answer"):
    acc = np.asarray(acc, dtype=float)
    samples = pd.DataFrame({"doc_id": range(len(acc)), "acc": acc})
    k = int(np.nansum(acc))
    m = int((~np.isnan(acc)).sum())
    write(out, model, task, {"acc": {"value": k / m, "ci_low": 0.1, "ci_high": 0.9, "n": m}}, samples, n=n_total)


def test_leaderboard_and_index_show_the_n_behind_the_headline(tmp_path):
    from evekit.batch.index import write_index
    from evekit.runs.records import write_run_record

    acc = np.array([1.0] * 30 + [0.0] * 22 + [np.nan] * 9)  # 61 items, 9 failed: acc has n = 52
    acc_run(tmp_path, "m", acc)
    board = lb.leaderboard(lb.collect(tmp_path, ["run"]))
    assert board.loc[0, "n"] == 52 and board.loc[0, "items"] == 61
    d = tmp_path / "run" / "m" / "mcqa_single_answer"
    write_run_record(d, kind=KINDS["task"], notebook="mcqa_single_answer", run_name="run")
    page = write_index(tmp_path / "run").read_text()
    assert "<td>52 of 61</td>" in page and "<td>61</td>" not in page


def test_single_judge_runs_get_a_paired_test_with_an_exact_mcnemar(tmp_path):
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(0)
    va, vb = rng.integers(0, 2, 40).astype(float), rng.integers(0, 2, 40).astype(float)
    for model, v in (("a", va), ("b", vb)):
        samples = pd.DataFrame({"doc_id": range(40), "judge_solo": v, "judge_solo_method": "json_object"})
        write(tmp_path, model, "open_ended", {"llm_as_judge": {"value": v.mean(), "n": 40}}, samples,
              judges=["solo"])
    tests = lb.paired_tests(lb.collect(tmp_path, ["run"]))
    assert len(tests) == 1
    t = tests.iloc[0]
    assert t.metric == "llm_as_judge" and t.test == "mcnemar_exact" and t.n_shared == 40
    table = [[int(((va == 1) & (vb == 1)).sum()), int(((va == 1) & (vb == 0)).sum())],
             [int(((va == 0) & (vb == 1)).sum()), int(((va == 0) & (vb == 0)).sum())]]
    assert t.p_value == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert t.ci_low <= t.difference <= t.ci_high and t.ci_method == "bonett_price"
    assert t.difference == pytest.approx(va.mean() - vb.mean())
    # judge names found from the samples columns when results.json does not list them
    (tmp_path / "run" / "a" / "open_ended" / "results.json").write_text(json.dumps(
        {"task": "open_ended", "model": "a", "n": 40, "metrics": {"llm_as_judge": {"value": va.mean(), "n": 40}}}))
    assert lb.paired_tests(lb.collect(tmp_path, ["run"])).iloc[0].p_value == t.p_value


def test_every_pair_has_an_interval_and_holm_adjusted_p_values(tmp_path):
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(1)
    base = rng.integers(0, 2, 60).astype(float)
    for k in range(3):
        flip = rng.random(60) < 0.2 + 0.15 * k
        acc_run(tmp_path, f"m{k}", np.where(flip, 1 - base, base))
    for k in range(3):  # a graded task (unknown task: its first metric is the headline)
        v = np.clip(rng.normal(0.5 + 0.1 * k, 0.2, 25), 0, 1)
        write(tmp_path, f"m{k}", "graded_task", {"rouge": {"value": v.mean(), "n": 25}},
              pd.DataFrame({"doc_id": range(25), "rouge": v}))
    tests = lb.paired_tests(lb.collect(tmp_path, ["run"]), seed=0)
    assert len(tests) == 6 and tests["ci_low"].notna().all() and tests["ci_high"].notna().all()
    assert set(tests.loc[tests.task == "graded_task", "test"]) == {"sign_flip_monte_carlo"}
    assert set(tests.loc[tests.task == "mcqa_single_answer", "test"]) == {"mcnemar_exact"}
    ref = multipletests(tests["p_value"], method="holm")[1]
    np.testing.assert_allclose(tests["p_holm"], ref)
    assert (tests["p_holm"] >= tests["p_value"]).all()


def test_detectable_difference_matches_the_power_calculations(tmp_path):
    from scipy.stats import norm
    from statsmodels.stats.power import TTestPower

    rng = np.random.default_rng(2)
    base = rng.integers(0, 2, 80).astype(float)
    acc_run(tmp_path, "m0", base)
    acc_run(tmp_path, "m1", np.where(rng.random(80) < 0.25, 1 - base, base))
    v = rng.uniform(0, 1, 12)
    write(tmp_path, "m0", "graded_task", {"rouge": {"value": v.mean(), "n": 12}},
          pd.DataFrame({"doc_id": range(12), "rouge": v}))
    mdd = lb.detectable_differences(lb.collect(tmp_path, ["run"])).set_index("task")
    assert list(mdd.reset_index().columns[:4]) == ["task", "metric", "n", "mdd"]
    # paired 0/1, observed discordance: Connor's power at the mdd is 80%
    row = mdd.loc["mcqa_single_answer"]
    a = pd.read_csv(tmp_path / "run/m0/mcqa_single_answer/samples.csv")["acc"].to_numpy()
    b = pd.read_csv(tmp_path / "run/m1/mcqa_single_answer/samples.csv")["acc"].to_numpy()
    psi, d, n = float((a != b).mean()), row.mdd, 80
    power = norm.cdf((np.sqrt(n) * d - norm.ppf(0.975) * np.sqrt(psi)) / np.sqrt(psi - d ** 2))
    assert row.n == 80 and power == pytest.approx(0.8, abs=1e-6) and "observed" in row.basis
    # one model, graded: assumed SD of differences sqrt(2) x SD; statsmodels' paired-t power at the mdd is 80%
    g = mdd.loc["graded_task"]
    sd = np.sqrt(2) * v.std(ddof=1)
    assert TTestPower().power(effect_size=g.mdd / sd, nobs=12, alpha=0.05) == pytest.approx(0.8, abs=1e-6)
    assert g.note == f"graded_task: with n = 12, differences in rouge below {g.mdd:.2f} cannot be detected " \
                     "(80% power, alpha 0.05)"
    assert g.mdd > 0.3  # twelve items cannot separate two models by less than a third of the scale


def test_a_set_too_small_to_separate_two_models_says_so(tmp_path):
    acc_run(tmp_path, "m", [1.0] * 10 + [0.0] * 2)   # the recorded demo: 12 items, 10 right
    row = lb.detectable_differences(lb.collect(tmp_path, ["run"])).iloc[0]
    assert row.n == 12 and np.isnan(row.mdd)
    assert row.note.startswith("mcqa_single_answer: with n = 12, no difference in acc can be detected")
    big = tmp_path / "big"
    acc_run(big, "m", [1.0] * 500 + [0.0] * 100)
    row = lb.detectable_differences(lb.collect(big, ["run"])).iloc[0]
    assert 0 < row.mdd < 0.1 and f"below {row.mdd:.2f}" in row.note


def test_summary_carries_the_demo_model_caveat_only_when_the_demo_model_is_on_the_board(tmp_path):
    from evekit.demo import DEMO_MODEL_NOTE, is_demo_model

    def entry(model):
        return lb.Entry("demo", model, "refusal", {"model": model}, tmp_path)

    assert is_demo_model("smollm2-135m-instruct") and is_demo_model("SmolLM2-360M") and not is_demo_model("qwen3")
    note = lb.demo_model_note([entry("qwen3-8b"), entry("smollm2-135m-instruct")])
    assert note and DEMO_MODEL_NOTE in note and "smollm2-135m-instruct" in note
    assert lb.demo_model_note([entry("qwen3-8b")]) is None


def test_summary_notebook_prints_the_caveat():
    import importlib.util

    from evekit.paths import REPO_ROOT

    spec = importlib.util.spec_from_file_location("build_notebooks", REPO_ROOT / "scripts" / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = "\n".join(c.source for c in module.build_summary().cells)
    assert "run.found()" in source  # SummaryRun.found prints lb.demo_model_note(entries)


def test_the_leaderboard_chart_has_one_panel_per_task_on_its_metric_and_marks_flagged_scores():
    import matplotlib.pyplot as plt

    from evekit import plots

    board = pd.DataFrame([
        {"model": "a", "task": "mcqa_single_answer", "metric": "acc", "value": 0.4, "ci_low": 0.3, "ci_high": 0.5,
         "trust": ""},
        {"model": "b", "task": "mcqa_single_answer", "metric": "acc", "value": 0.5, "ci_low": 0.4, "ci_high": 0.6,
         "trust": ""},
        {"model": "a", "task": "open_ended", "metric": "judge_voting", "value": 1.0, "ci_low": 0.76, "ci_high": 1.0,
         "trust": "failed_validation"}])
    fig = plots.leaderboard_chart(board)
    assert len(fig.axes) == 2
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("mcqa_single_answer: acc") and titles[1].startswith("open_ended: judge_voting")
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels == ["a  \u26a0 failed_validation"]
    assert all("\u26a0" not in t.get_text() for t in fig.axes[0].get_yticklabels())
    plt.close(fig)


def test_a_blank_cell_of_the_judges_kappa_heatmap_says_why():
    import matplotlib.pyplot as plt
    from types import SimpleNamespace

    from evekit import plots
    from evekit.judges import cohen_kappa_matrix
    from evekit.runs.task.run import TaskRun

    answered = pd.DataFrame({"judge_x": [1.0] * 6, "judge_y": [1.0] * 6, "judge_z": [1, 0, 1, 0, 1, 1.0],
                             "judge_w": [np.nan] * 6})
    names = ["x", "y", "z", "w"]
    why = TaskRun._why_no_kappa.__get__(SimpleNamespace(answered=answered))
    ax = plots.heatmap(cohen_kappa_matrix(answered, names), empty=why)
    texts = [t.get_text() for t in ax.texts]
    assert "undefined:\nboth said\nPASS throughout" in texts
    assert "no item\nboth voted on" in texts
    plt.close(ax.figure)


def _judged_run(out, model, verdicts, labels_value, *, raw_ci=(0.3, 0.7)):
    """A single-judge open_ended result whose headline is corrected by expert labels (llm_as_judge_ppi)."""
    samples = pd.DataFrame({"doc_id": range(len(verdicts)), "judge_solo": verdicts, "judge_solo_method": "json_object"})
    metrics = {"llm_as_judge": {"value": float(np.mean(verdicts)), "ci_low": raw_ci[0], "ci_high": raw_ci[1],
                                "n": len(verdicts)},
               "llm_as_judge_ppi": {"value": labels_value, "ci_low": labels_value - 0.1, "ci_high": labels_value + 0.1,
                                    "n": len(verdicts), "n_labels": 8, "raw": "llm_as_judge"}}
    write(out, model, "open_ended", metrics, samples, judges=["solo"])


def test_a_corrected_headline_has_the_raw_judge_score_beside_it(tmp_path):
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(3)
    va, vb = rng.integers(0, 2, 40).astype(float), rng.integers(0, 2, 40).astype(float)
    _judged_run(tmp_path, "a", va, 0.3)
    _judged_run(tmp_path, "b", vb, 0.2, raw_ci=(0.35, 0.75))
    acc_run(tmp_path, "a", [1.0, 0.0, 1.0])                       # a task without judges: no raw score
    entries = lb.collect(tmp_path, ["run"])
    board = lb.leaderboard(entries).set_index(["model", "task"])
    row = board.loc[("a · run", "open_ended")]
    assert row["metric"] == "llm_as_judge_ppi" and row["value"] == 0.3
    assert (row["raw_metric"], row["raw_value"], row["raw_ci_low"], row["raw_ci_high"]) == (
        "llm_as_judge", pytest.approx(va.mean()), 0.3, 0.7)
    assert pd.isna(board.loc[("a · run", "mcqa_single_answer"), "raw_value"])
    cols = list(lb.leaderboard(entries).columns)
    assert cols[cols.index("ci_high") + 1: cols.index("ci_high") + 5] == lb.RAW_COLUMNS
    wide = lb.leaderboard_wide(lb.leaderboard(entries))
    assert wide.loc["a · run", "open_ended"].startswith(
        f"0.300 [0.20, 0.40] (raw llm_as_judge {va.mean():.3f} [0.30, 0.70])")
    assert "raw" not in wide.loc["a · run", "mcqa_single_answer"]
    # The paired test compares the raw verdicts, names them, and says why under the table.
    t = lb.paired_tests(entries).set_index("task").loc["open_ended"]
    assert t["metric"] == "llm_as_judge" and "not the corrected headline llm_as_judge_ppi" in t["note"]
    table = [[int(((va == 1) & (vb == 1)).sum()), int(((va == 1) & (vb == 0)).sum())],
             [int(((va == 0) & (vb == 1)).sum()), int(((va == 0) & (vb == 0)).sum())]]
    assert t["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue)
    note = lb.paired_note(entries)
    assert "raw verdicts" in note and "llm_as_judge for llm_as_judge_ppi" in note and "same items" in note
    mdd = lb.detectable_differences(entries).set_index("task").loc["open_ended"]
    assert mdd["metric"] == "llm_as_judge" and mdd["n"] == 40
    from evekit import plots

    fig = plots.leaderboard_chart(lb.leaderboard(entries))
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert labels == ["raw llm_as_judge (before the expert-label correction)"]


def test_a_board_without_corrected_headlines_has_no_raw_columns(tmp_path):
    acc_run(tmp_path, "a", [1.0, 0.0, 1.0])
    acc_run(tmp_path, "b", [1.0, 1.0, 1.0])
    entries = lb.collect(tmp_path, ["run"])
    assert not set(lb.RAW_COLUMNS) & set(lb.leaderboard(entries).columns)
    assert lb.paired_note(entries) is None
    assert lb.leaderboard_wide(lb.leaderboard(entries)).loc["a · run", "mcqa_single_answer"] == "0.667 [0.10, 0.90]"


# -- clustered items (issue 32): the paired test resamples what the runs resampled -----------------


def clustered_run(out, model, acc, clusters, column="source", task="mcqa_single_answer"):
    acc = np.asarray(acc, dtype=float)
    samples = pd.DataFrame({"doc_id": range(len(acc)), "acc": acc})
    design = None
    if clusters is not None:
        samples["cluster"] = clusters
        design = {"repeats": 1, "repeat_over": None, "reducer": "mean", "cluster_by": column, "permutations": 0}
    write(out, model, task, {"acc": {"value": acc.mean(), "ci_low": 0.1, "ci_high": 0.9, "n": len(acc)}}, samples,
          **({"design": design} if design else {}))


# Ten documents of eight questions, each decided as a whole: model a gets six documents right and b
# the other four. 48 of 80 discordant items favour a (McNemar p = 0.09), but only 10 documents decide.
SOURCE = [f"doc{i // 8}" for i in range(80)]
A_RIGHT = np.array([1.0 if i // 8 < 6 else 0.0 for i in range(80)])


def test_clustered_runs_flip_whole_clusters_in_the_paired_test(tmp_path):
    import itertools

    from statsmodels.stats.contingency_tables import mcnemar

    clustered_run(tmp_path / "c", "a", A_RIGHT, SOURCE)
    clustered_run(tmp_path / "c", "b", 1 - A_RIGHT, SOURCE)
    clustered_run(tmp_path / "i", "a", A_RIGHT, None)
    clustered_run(tmp_path / "i", "b", 1 - A_RIGHT, None)
    by_cluster = lb.paired_tests(lb.collect(tmp_path / "c", ["run"])).iloc[0]
    by_item = lb.paired_tests(lb.collect(tmp_path / "i", ["run"])).iloc[0]
    assert by_item.resampled == "items" and by_item.test == "mcnemar_exact" and pd.isna(by_item.n_clusters)
    assert by_item.p_value == pytest.approx(mcnemar([[0, 48], [32, 0]], exact=True).pvalue)
    assert by_cluster.resampled == "clusters by source: 10 clusters" and by_cluster.n_clusters == 10
    assert by_cluster.test == "sign_flip_exact over clusters" and by_cluster.n_shared == 80
    # the exact sign-flip p-value of the ten documents' summed differences (+8 six times, -8 four times)
    sums = np.array([8.0] * 6 + [-8.0] * 4)
    flips = np.array(list(itertools.product((1, -1), repeat=10)))
    assert by_cluster.p_value == pytest.approx(np.mean(np.abs(flips @ sums) >= abs(sums.sum()) - 1e-9))
    assert by_cluster.p_value > 0.7 > by_item.p_value
    assert by_cluster.difference == by_item.difference == pytest.approx(0.2)
    assert by_cluster.ci_high - by_cluster.ci_low > 2 * (by_item.ci_high - by_item.ci_low)


def test_singleton_clusters_give_the_item_level_test(tmp_path):
    rng = np.random.default_rng(3)
    va, vb = rng.integers(0, 2, 60).astype(float), rng.integers(0, 2, 60).astype(float)
    for model, v in (("a", va), ("b", vb)):
        clustered_run(tmp_path / "c", model, v, [f"q{i}" for i in range(60)])
        clustered_run(tmp_path / "i", model, v, None)
    by_cluster = lb.paired_tests(lb.collect(tmp_path / "c", ["run"])).iloc[0]
    by_item = lb.paired_tests(lb.collect(tmp_path / "i", ["run"])).iloc[0]
    for column in ("difference", "p_value", "ci_low", "ci_high", "test", "ci_method", "n_shared"):
        assert by_cluster[column] == by_item[column], column
    assert by_cluster.resampled == "clusters by source: 60 clusters"


def test_one_clustered_run_or_two_groupings_bind_the_pair(tmp_path):
    clustered_run(tmp_path / "one", "a", A_RIGHT, SOURCE)
    clustered_run(tmp_path / "one", "b", 1 - A_RIGHT, None)      # the other run did not set cluster_by
    one = lb.paired_tests(lb.collect(tmp_path / "one", ["run"])).iloc[0]
    assert one.resampled == "clusters by source: 10 clusters" and one.n_clusters == 10
    # a's documents, b's exams of two documents each: units are never finer than either grouping
    clustered_run(tmp_path / "two", "a", A_RIGHT, SOURCE)
    clustered_run(tmp_path / "two", "b", 1 - A_RIGHT, [f"exam{i // 16}" for i in range(80)], column="exam")
    two = lb.paired_tests(lb.collect(tmp_path / "two", ["run"])).iloc[0]
    assert two.n_clusters == 5 and two.resampled == "clusters by source and exam (both runs' clusters joined): 5 clusters"
    # the detectable-difference table still reads the clustered samples
    assert lb.detectable_differences(lb.collect(tmp_path / "two", ["run"])).loc[0, "n"] == 80
