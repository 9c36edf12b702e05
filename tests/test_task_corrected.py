"""Judge-corrected scores in a judged task run (issue 31): `evekit label sample` draws the sheet, an
expert fills it, `expert_labels` corrects every judged score (PPI++), `judge_validation` alone gives
the Rogan–Gladen correction; the headline, results.json, the plot and the summary follow."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evekit import correction
from evekit.cli import main as cli
from evekit.errors import DataError, ParameterError
from evekit.runs.task.run import TaskRun

sys.path.insert(0, str(Path(__file__).parent))
from stub_server import StubServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
JUDGES = ("strict", "warm")


@pytest.fixture(scope="module")
def stubs():
    with StubServer(latency=0.0) as model, StubServer(latency=0.0, verdicts=True) as judges:
        yield model, judges


def _run(tmp_path: Path, stubs, judges=JUDGES, **extra) -> TaskRun:
    model, judge = stubs
    run = TaskRun.from_notebook({
        "task": "open_ended", "model_name": "stub", "base_url": model.base_url, "api_key_env": None,
        "dataset": str(ROOT / "data" / "open_ended.jsonl"), "limit": 30, "num_fewshot": 0, "max_tokens": 32,
        "judges": [{"name": n, "model": "stub", "base_url": judge.base_url, "api_key_env": None,
                    "temperature": 0.1 * k} for k, n in enumerate(judges)],
        "cache_dir": str(tmp_path / "cache"), "output_dir": str(tmp_path / "out"), "run_name": "t", **extra})
    run.load()
    run.generate()
    run.judge()
    return run


def _labelled_sheet(tmp_path, stubs, n=12, judges=JUDGES, flip=True) -> tuple[Path, Path, pd.DataFrame]:
    """A first run, its sheet drawn through the command line, filled by an 'expert' who disagrees
    with the vote on every third item."""
    run = _run(tmp_path, stubs, judges)
    out = run.save()
    sheet = tmp_path / "labels.csv"
    assert cli(["label", "sample", str(out), "--n", str(n), "--seed", "5", "--out", str(sheet)]) == 0
    filled = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    assert not any(c.startswith("judge") for c in filled.columns)         # no anchoring on the verdicts
    vote = run.samples.set_index(run.samples["doc_id"].astype(str))
    column = "judge_voting" if len(judges) > 1 else f"judge_{judges[0]}"
    truth = [int(vote.loc[i, column] == 1) for i in filled["id"]]
    filled["label"] = [str(1 - t if (flip and k % 3 == 0) else t) for k, t in enumerate(truth)]
    filled.to_csv(sheet, index=False)
    return sheet, out, filled


def test_expert_labels_correct_every_judged_score_and_become_the_headline(tmp_path, stubs):
    sheet, out, filled = _labelled_sheet(tmp_path, stubs)
    run = _run(tmp_path, stubs, expert_labels=str(sheet))               # the same answers, from the cache
    metrics = run.compute_metrics()
    assert {"judge_voting_ppi", "llm_as_judge_strict_ppi", "llm_as_judge_warm_ppi"} <= set(metrics)
    # The wiring: exactly evekit.correction's estimate from the run's verdicts and the sheet's labels.
    s = run.samples[~run.samples["failed"]]
    verdicts = dict(zip(s["doc_id"].astype(str), s["judge_voting"]))
    labels = dict(zip(filled["id"], filled["label"].astype(float)))
    expected = correction.corrected_score(verdicts, labels)
    got = metrics["judge_voting_ppi"]
    assert (got["value"], got["ci_low"], got["ci_high"]) == (expected["value"], expected["ci_low"], expected["ci_high"])
    assert got["n_labels"] == 12 and got["raw"] == "judge_voting"
    assert run.headline == "judge_voting_ppi"
    # the metrics table shows the corrected value and interval; its details are corrected_scores()'s
    shown = run.metrics_table()
    assert shown.loc["judge_voting_ppi", "ci_high"] == pytest.approx(got["ci_high"], abs=1e-4)
    assert not shown.map(lambda v: isinstance(v, dict)).any().any()
    assert not {"labels_only", "judge_only", "lambda", "width_ratio"} & set(shown.columns)
    table = run.corrected_scores()
    assert list(table.index[:2]) == ["strict", "warm"] and len(table) == 3 and "kappa" in table.columns
    # the labels disagree with the vote on every third item: accuracy 8/12 against the labels
    assert table.loc[table.index[-1], "accuracy"] == pytest.approx(8 / 12, abs=1e-4)
    assert "corrected.png" in run.plots()
    saved = run.save()
    results = json.loads((saved / "results.json").read_text())
    assert results["metrics"]["judge_voting_ppi"]["value"] == got["value"]
    assert results["expert_labels"]["n_labels"] == 12 and len(results["expert_labels"]["agreement"]) == 3
    assert (saved / "corrected.png").stat().st_size > 0


def test_with_a_judge_validation_its_figures_stand_beside_the_agreement_on_this_tasks_labels(tmp_path, stubs):
    sheet, _, _ = _labelled_sheet(tmp_path, stubs)
    validated = {"strict": (0.9, 0.85, 0.95, 0.7, 0.55, 0.82, 60), "vote": (0.8, 0.7, 0.87, 0.5, 0.3, 0.68, 60)}
    table = [{"judge": j, "n": n, "accuracy": a, "accuracy_ci_low": alo, "accuracy_ci_high": ahi, "kappa": k,
              "kappa_ci_low": klo, "kappa_ci_high": khi} for j, (a, alo, ahi, k, klo, khi, n) in validated.items()]
    path = tmp_path / "validation.json"                              # "warm" was not validated
    path.write_text(json.dumps({"kind": "judge_validation", "judge_kind": "fact_check", "table": table}))
    plain = _run(tmp_path, stubs, expert_labels=str(sheet)).label_agreement()
    run = _run(tmp_path, stubs, expert_labels=str(sheet), judge_validation=str(path))
    got = run.label_agreement()
    # this task's own agreement is unchanged; the validated figures are the validation's own numbers
    pd.testing.assert_frame_equal(got[plain.columns], plain)
    for judge, (a, alo, ahi, k, klo, khi, n) in validated.items():
        assert tuple(got.loc[judge, ["validated_accuracy", "validated_accuracy_ci_low", "validated_accuracy_ci_high",
                                     "validated_kappa", "validated_kappa_ci_low", "validated_kappa_ci_high"]]) == (
            a, alo, ahi, k, klo, khi)
        assert got.loc[judge, "validated_n"] == n
    assert got.loc["warm", ["validated_accuracy", "validated_kappa"]].isna().all() and pd.isna(got.loc["warm", "validated_n"])
    cols = list(got.columns)                                     # each validated rate right after this task's
    assert cols[cols.index("accuracy_ci_high") + 1] == "validated_accuracy"
    assert cols[cols.index("kappa_ci_high") + 1] == "validated_kappa"
    shown = run.corrected_scores()
    assert shown.loc["strict", "validated_kappa"] == 0.7 and shown.loc["warm", "validated_kappa"] == "–"
    assert "validated_accuracy" not in plain.columns


def test_other_labels_give_another_corrected_score(tmp_path, stubs):
    sheet, _, filled = _labelled_sheet(tmp_path, stubs, flip=False)
    agreeing = _run(tmp_path, stubs, expert_labels=str(sheet)).compute_metrics()["judge_voting_ppi"]
    filled["label"] = ["1"] * len(filled)                                  # an expert who passes everything
    filled.to_csv(sheet, index=False)
    lenient = _run(tmp_path, stubs, expert_labels=str(sheet)).compute_metrics()["judge_voting_ppi"]
    assert lenient["value"] > agreeing["value"]
    # Labels equal to the vote: the estimate blends the vote on the labelled and on the other items.
    run = _run(tmp_path, stubs)
    vote = run.samples.set_index(run.samples["doc_id"].astype(str))["judge_voting"]
    on_labelled, elsewhere = vote.loc[filled["id"]].mean(), vote.drop(filled["id"]).mean()
    assert min(on_labelled, elsewhere) - 1e-9 <= agreeing["value"] <= max(on_labelled, elsewhere) + 1e-9


def test_a_sheet_that_is_not_this_runs_draw_is_refused_naming_its_line(tmp_path, stubs):
    sheet, _, filled = _labelled_sheet(tmp_path, stubs)
    filled.loc[3, "id"] = "999"
    filled.to_csv(sheet, index=False)
    with pytest.raises(DataError, match=r"line 5 \(id '999'\)"):
        _run(tmp_path, stubs, expert_labels=str(sheet)).compute_metrics()
    with pytest.raises(ParameterError, match="expert_labels"):
        TaskRun.from_notebook({"task": "open_ended", "model_name": "m", "base_url": "http://127.0.0.1:9/v1",
                               "expert_labels": str(tmp_path / "nope.csv"), "judges": [
                                   {"name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1"}]})


def test_a_judge_validation_alone_gives_the_rogan_gladen_correction_with_its_assumption(tmp_path, stubs):
    folder = tmp_path / "validation"
    folder.mkdir()
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 80)
    strict = np.where(rng.random(80) < 0.85, gold, 1 - gold)
    pd.DataFrame({"label": gold, "judge_strict": strict, "judge_voting": strict}).to_csv(folder / "verdicts.csv",
                                                                                        index=False)
    (folder / "results.json").write_text(json.dumps({"kind": "judge_validation", "judges": {}}))
    run = _run(tmp_path, stubs, judges=("strict",), judge_validation=str(folder / "results.json"))
    m = run.compute_metrics()["llm_as_judge_rg"]
    s = run.samples[~run.samples["failed"]]
    se = (int(((strict == 1) & (gold == 1)).sum()), int((gold == 1).sum()))
    sp = (int(((strict == 0) & (gold == 0)).sum()), int((gold == 0).sum()))
    expected = correction.rogan_gladen(s["judge_strict"], sensitivity=se, specificity=sp, seed=run.config.seed)
    assert m["value"] == expected["value"] and m["ci_low"] == expected["ci_low"]
    assert "assumes the judge errs" in m["assumption"]
    assert run.headline == "llm_as_judge"                    # a correction resting on an assumption is not the headline
    table = run.corrected_scores()
    assert "llm_as_judge_rg" in table.index and "llm_as_judge (raw)" in table.index


def test_label_sample_on_a_folder_that_is_not_a_judged_run_says_so(tmp_path, capsys):
    assert cli(["label", "sample", str(tmp_path), "--n", "3"]) == 1
    assert "not a judged run folder" in capsys.readouterr().err


def test_a_label_given_to_another_answer_is_left_out_with_a_note(tmp_path, stubs):
    sheet, _, filled = _labelled_sheet(tmp_path, stubs)
    filled.loc[0, "answer"] = "an answer this run never gave"
    filled.to_csv(sheet, index=False)
    run = _run(tmp_path, stubs, expert_labels=str(sheet))
    m = run.compute_metrics()["judge_voting_ppi"]
    assert m["n_labels"] == 11
    assert any("1 labelled row(s) left out (line(s) 2)" in note for note in run.notes)


# -- the win rate -------------------------------------------------------------------------------


def test_expert_labels_correct_the_win_rate_of_a_comparison(tmp_path):
    from test_winrate import Scripted, by_quality, judges, write_csv

    from evekit.runs import win_rate as wr

    qs = [f"q{i}: what is the revisit time of mission {i}?" for i in range(30)]
    fa = write_csv(tmp_path / "a.csv", qs, [f"{'GOOD ' if i % 3 else ''}a {i}" for i in range(30)])
    fb = write_csv(tmp_path / "b.csv", qs, [f"{'GOOD ' if i % 5 == 0 else ''}b {i}" for i in range(30)])
    params = dict(task="open_ended", model_a=[{"name": "a", "file": str(fa)}], model_b=[{"name": "b", "file": str(fb)}],
                  judges=judges("j1", "j2"), output_dir=str(tmp_path / "out"), run_name="w", both_orders=False)
    first = wr.WinRateRun(wr.validate_params(**params), clients=Scripted(by_quality).clients(["j1", "j2"]))
    first.load()
    first.judge()
    folder = first.save()[0]
    sheet = tmp_path / "pairs.csv"
    assert cli(["label", "sample", str(folder), "--n", "10", "--seed", "1", "--out", str(sheet)]) == 0
    filled = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    filled["label"] = ["B"] * len(filled)                   # an expert who prefers b on every question drawn
    filled.to_csv(sheet, index=False)
    run = wr.WinRateRun(wr.validate_params(**params, expert_labels=str(sheet)),
                        clients=Scripted(by_quality).clients(["j1", "j2"]))
    run.load()
    run.judge()
    table = run.corrected_table()
    raw = table.loc[("a_vs_b", "alpaca_win_rate_a (raw vote)"), "value"]
    fixed = table.loc[("a_vs_b", "alpaca_win_rate_a_ppi")]
    assert fixed["value"] < raw and fixed["n_labels"] == 10
    assert table.loc[("a_vs_b", "alpaca_win_rate_a (labels only)"), "value"] == 0.0
    # Each judge and the vote against the labels: accuracy (Wilson) and kappa over A / B / tie, with
    # intervals, equal to statsmodels' and scikit-learn's on the same verdicts.
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.proportion import proportion_confint

    agreement = run.label_agreement()
    assert list(agreement.index) == [("a_vs_b", "j1"), ("a_vs_b", "j2"), ("a_vs_b", "vote")]
    comp = run.comparisons[0]
    letters = {"a": "A", "b": "B", "tie": "tie"}
    outcomes = comp.outcomes.set_axis(comp.outcomes.index.astype(str))
    gold = list(filled["label"])
    for judge in ("j1", "j2"):
        said = [letters[v] for v in outcomes.loc[list(filled["id"]), judge]]
        row = agreement.loc[("a_vs_b", judge)]
        k = sum(s == g for s, g in zip(said, gold))
        assert row["n"] == 10 and row["accuracy"] == pytest.approx(k / 10)
        assert (row["accuracy_ci_low"], row["accuracy_ci_high"]) == pytest.approx(proportion_confint(k, 10, method="wilson"))
        if len(set(said) | set(gold)) > 1 and len(set(said)) > 1:
            assert row["kappa"] == pytest.approx(cohen_kappa_score(said, gold))
    vote = agreement.loc[("a_vs_b", "vote")]
    assert vote["accuracy"] == pytest.approx(fixed["agreement_with_labels"])
    # kappa on labels of every kind (the sheet above is all B, where kappa says little)
    from evekit.runs.win_rate import corrected

    ids = [str(i) for i in range(30)]
    mixed = pd.Series([(1.0, 0.0, 0.5)[i % 3] for i in range(30)], index=ids)
    table = corrected.judges_against_labels(comp, mixed).set_index("judge")
    gold = [("A", "B", "tie")[i % 3] for i in range(30)]
    for judge in ("j1", "j2"):
        said = [letters[v] for v in outcomes.loc[ids, judge]]
        assert table.loc[judge, "kappa"] == pytest.approx(cohen_kappa_score(said, gold))
        assert table.loc[judge, "kappa_ci_low"] <= table.loc[judge, "kappa"] <= table.loc[judge, "kappa_ci_high"]
    shown = run.corrected_scores()                                      # the notebook's cell: the same table
    assert list(shown.index) == list(agreement.index) and "kappa_ci_high" in shown.columns
    saved = json.loads((run.save()[0] / "metrics.json").read_text())
    assert saved["corrected"]["metric"]["value"] == pytest.approx(fixed["value"], abs=1e-4)
    with pytest.raises(ParameterError, match="several comparisons"):
        two = dict(params, model_b=[{"name": "b", "file": str(fb)}, {"name": "c", "file": str(fb)}])
        run2 = wr.WinRateRun(wr.validate_params(**two, expert_labels=str(sheet)),
                             clients=Scripted(by_quality).clients(["j1", "j2"]))
        run2.load()
        run2.judge()
        run2.corrected_table()


def test_evekit_plan_says_how_many_labels_a_target_half_width_needs(tmp_path, capsys):
    import yaml

    from evekit.batch import plan

    folder = tmp_path / "validation"
    folder.mkdir()
    gold = np.array([1] * 40 + [0] * 40)
    judged = gold.copy()
    judged[:8] = 0                                                        # 8 of 80 verdicts wrong
    pd.DataFrame({"label": gold, "judge_strict": judged}).to_csv(folder / "verdicts.csv", index=False)
    (folder / "results.json").write_text("{}")
    params = {"task": "open_ended", "model_name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None,
              "dataset": str(ROOT / "data" / "open_ended.jsonl"), "limit": None, "num_fewshot": 0,
              "judges": [{"name": "strict", "model": "m", "base_url": "http://127.0.0.1:9/v1"}],
              "judge_validation": str(folder / "results.json"), "expert_labels_target": 0.15,
              "cache_dir": str(tmp_path / "c"), "output_dir": str(tmp_path / "o"), "run_name": "p"}
    path = tmp_path / "open_ended.yaml"
    path.write_text(yaml.safe_dump(params))
    (planned,) = plan.plan_files([path])
    upper = correction.disagreement_rate(gold, judged)["ci_high"]
    expected = correction.labels_needed(0.15, upper, n_items=56)
    assert expected["value"] is not None and expected["value"] < expected["labels_only"]
    assert f"needs {expected['value']} expert labels" in planned.labels
    assert f"{upper:.2f}" in planned.labels and "judge validation" in planned.labels
    with pytest.raises(ParameterError, match="expert_labels_target"):
        TaskRun.from_notebook({**params, "expert_labels_target": 0.7})


# -- the demo's sheet -----------------------------------------------------------------------------


def test_the_demo_sheet_corrects_the_recorded_demo_run_far_below_its_judges(tmp_path):
    """data/expert_labels/open_ended_demo.csv against the demo's open_ended run (params/demo/open_ended.yaml),
    replayed from the recorded cache: the sheet is that run's recorded draw, and its 8 FAIL labels put the
    corrected score far below the tiny judges' 1.0 (data/README.md: 0.0 [0, 0.32] against 1.0 [0.76, 1.0])."""
    import shutil

    from evekit.batch.paramfiles import load_params
    from evekit.labels import draw_ids, read_sheet, run_items

    cache = tmp_path / "cache"
    cache.mkdir()
    for f in (ROOT / "tests/fixtures/recorded_cache").glob("*.jsonl"):
        shutil.copy(f, cache / f.name)
    params = load_params(ROOT / "params/demo/open_ended.yaml", server_url="http://127.0.0.1:9/v1")
    assert params["expert_labels"] == "data/expert_labels/open_ended_demo.csv"
    params.pop("judge_validation")  # the demo batch's own judge validation, written by `make demo`: not here
    run = TaskRun.from_notebook({**params, "task": "open_ended", "offline": True, "cache_dir": str(cache),
                                 "output_dir": str(tmp_path / "out"), "run_name": "recorded"})
    run.load()
    run.generate()
    run.judge()
    assert run.usage.requests == 0                                    # every answer and verdict replayed
    metrics = run.compute_metrics()
    saved = run.save()
    # The sheet is the recorded draw of this very run: its ids are what n = 8, seed 0 draws from this
    # run's 12 items, and every labelled answer is this run's answer (none left out with a note).
    # (The record's source_sha256 is of samples.csv as written on 2026-12-02; columns were added to
    # samples.csv since, so the bytes differ: the proof is the re-draw and the answers, not the hash.)
    sheet = ROOT / params["expert_labels"]
    draw = json.loads(sheet.with_name(sheet.name + ".draw.json").read_text())
    items, kind, group_by, _ = run_items(saved)
    assert kind == "pointwise" and group_by is None and len(items) == draw["items"] == 12
    assert draw_ids(items, draw["n"], draw["seed"])[0] == draw["ids"]
    rows = read_sheet(sheet, saved)
    assert list(rows["id"]) == draw["ids"] and len(rows) == draw["n"] == 8 and not rows.attrs["notes"]
    assert set(rows["id"]) <= set(run.samples["doc_id"].astype(str))
    assert (rows["score"] == 0).all()                                  # every labelled answer FAILs
    raw, fixed = metrics["judge_voting"], metrics["judge_voting_ppi"]
    assert run.headline == "judge_voting_ppi" and fixed["n_labels"] == 8 and fixed["raw"] == "judge_voting"
    assert (raw["value"], round(raw["ci_low"], 2), raw["ci_high"]) == (1.0, 0.76, 1.0)
    assert (fixed["value"], fixed["ci_low"], round(fixed["ci_high"], 2)) == (0.0, 0.0, 0.32)
    assert fixed["ci_high"] < raw["ci_low"]                            # far below: the intervals do not meet
    # the labels alone say the same: 0 of 8 (Wilson)
    assert fixed["labels_only"]["value"] == 0.0 and fixed["labels_only"]["n"] == 8
    agreement = run.label_agreement()
    assert (agreement["accuracy"] == 0.0).all() and list(agreement["n"]) == [8, 8, 8]
    results = json.loads((saved / "results.json").read_text())
    assert results["metrics"]["judge_voting_ppi"]["value"] == 0.0
