"""Judge validation with scripted judges of known behaviour on the bundled expert-labelled set:
exact accuracy, kappa (checked against scikit-learn), sensitivity, specificity and abstentions."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from evekit import structured as S
from evekit.errors import DataError, ParameterError
from evekit.runs.judge_validation import ValidationParams, ValidationRun


def validate_params(**params):
    return ValidationParams.from_dict(params)
from evekit.judges import render_pairwise, render_pointwise
from evekit.judges import validation as V
from evekit.paths import REPO_ROOT as ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_client import ScriptedClient  # noqa: E402

POINTWISE = ROOT / "data" / "judge_validation" / "pointwise.jsonl"
PAIRWISE = ROOT / "data" / "judge_validation" / "pairwise.jsonl"
ITEMS, _ = V.load_labels(POINTWISE, "fact_check")
PAIRS, _ = V.load_labels(PAIRWISE, "pairwise")
GOLD = np.array([it.label for it in ITEMS])


def by_prompt(kind: str = "fact_check"):
    """user message -> item, to let a scripted judge know which item it is shown."""
    cases = V.judge_cases(ITEMS, kind)
    return {render_pointwise(kind, c)[1]["content"]: it for c, it in zip(cases, ITEMS)}


def scripted(decide, method: str = "json_object", kind: str = "fact_check") -> ScriptedClient:
    """A judge whose reply is decide(item) (a verdict 0/1, or a str sent as it is)."""
    lookup = by_prompt(kind)

    def respond(req):
        item = lookup[req.messages[1]["content"]]
        out = decide(item)
        return out if isinstance(out, str) else json.dumps({"reasoning": f"checked {item.case}", "verdict": out})

    client = ScriptedClient(respond)
    S._remember(client, method)
    return client


def run_with(clients: dict, **params) -> ValidationRun:
    judges = [{"name": n, "model": f"model-{n}", "base_url": "http://x/v1"} for n in clients]
    run = ValidationRun(validate_params(judges=judges, output_dir=params.pop("output_dir", "outputs"), **params),
                        clients=clients)
    run.load()
    run.judge()
    return run


def row(run: ValidationRun, judge: str) -> pd.Series:
    return run.results.set_index("judge").loc[judge]


def test_always_pass_judge():
    run = run_with({"yes": scripted(lambda it: 1)})
    r = row(run, "yes")
    assert (r["n"], r["abstained"]) == (72, 0)
    assert r["accuracy"] == pytest.approx(27 / 72)
    assert (r["sensitivity"], r["specificity"]) == (1.0, 0.0)
    assert r["kappa"] == pytest.approx(cohen_kappa_score(GOLD, np.ones(72))) == 0.0
    assert r["accuracy_ci_low"] < 27 / 72 < r["accuracy_ci_high"]  # Wilson, not zero-width
    from statsmodels.stats.proportion import proportion_confint

    assert (r["accuracy_ci_low"], r["accuracy_ci_high"]) == pytest.approx(proportion_confint(27, 72, method="wilson"))


def test_judge_right_except_on_injections():
    fooled = lambda it: 1 if it.case == "injection_attempt" else it.label  # noqa: E731
    run = run_with({"fooled": scripted(fooled)})
    r = row(run, "fooled")
    verdicts = np.array([fooled(it) for it in ITEMS])
    assert r["accuracy"] == pytest.approx(63 / 72)
    assert r["sensitivity"] == 1.0 and r["specificity"] == pytest.approx(36 / 45)
    assert r["kappa"] == pytest.approx(cohen_kappa_score(GOLD, verdicts), abs=1e-12)
    assert r["kappa_ci_low"] < r["kappa"] < r["kappa_ci_high"]
    cases = run.cases[run.cases["judge"] == "fooled"].set_index("case")
    assert cases.loc["injection_attempt", "accuracy"] == 0.0 and cases.loc["injection_attempt", "n"] == 9
    assert (cases.drop("injection_attempt")["accuracy"] == 1.0).all()
    wide = run.per_case()
    assert wide.loc["injection_attempt", "fooled"] == "0% (0/9)"


def test_prose_judge_abstains_where_it_gives_no_verdict_and_rates_stay_empty():
    """Prose only: a labelled verdict on gold PASS items, prose without a verdict on FAIL items."""
    prose = lambda it: ("The facts match the reference. Verdict: PASS" if it.label == 1  # noqa: E731
                        else "The answer talks about the mission in general terms.")
    run = run_with({"prose": scripted(prose, method="text")})
    r = row(run, "prose")
    assert (r["n"], r["abstained"]) == (27, 45)
    bars = run.plots()["accuracy.png"].axes[0]  # the n behind each bar is on it: 27 of 72 decided
    assert {t.get_text() for t in bars.texts} >= {"100% (n=27)"}
    assert r["accuracy"] == 1.0 and r["sensitivity"] == 1.0
    assert math.isnan(r["specificity"]) and math.isnan(r["specificity_ci_low"])  # no verdict on gold FAIL: empty
    assert math.isnan(r["kappa"])  # one verdict, one label on the items used: undefined, not 0
    assert run.abstentions().loc["prose", "no verdict in the reply"] == 45


def test_judge_without_any_verdict_has_empty_rates_not_zero(tmp_path):
    run = run_with({"mute": scripted(lambda it: '{"reasoning": "<one or two sentences>", "verdict": 1}')},
                   output_dir=str(tmp_path))
    r = row(run, "mute")
    assert r["n"] == 0 and r["abstained"] == 72
    assert all(math.isnan(r[c]) for c in ("accuracy", "sensitivity", "specificity", "kappa", "accuracy_ci_low"))
    assert run.abstentions().loc["mute", "copied the template"] == 72
    out = run.save()
    csv = pd.read_csv(out / "judge_validation.csv")
    assert csv.loc[csv["judge"] == "mute", "accuracy"].isna().all()  # empty in the file, never 0
    results = json.loads((out / "results.json").read_text())
    assert results["table"][0]["accuracy"] is None and results["abstentions"]["mute"] == {"copied the template": 72}


def test_panel_vote_row_and_files(tmp_path):
    fooled = lambda it: 1 if it.case == "injection_attempt" else it.label  # noqa: E731
    run = run_with({"yes": scripted(lambda it: 1), "fooled": scripted(fooled)}, output_dir=str(tmp_path),
                   run_name="t")
    vote = row(run, V.VOTE)  # two judges: a tie fails, so the vote is the stricter judge here
    assert vote["accuracy"] == pytest.approx(63 / 72) and vote["n"] == 72
    out = run.save()
    assert out == tmp_path / "t" / "judge_validation" / "fact_check"
    csv = pd.read_csv(out / "judge_validation.csv")
    assert list(csv.columns) == V.POINTWISE_COLUMNS and list(csv["judge"]) == ["yes", "fooled", V.VOTE]
    assert {"per_case.csv", "verdicts.csv", "accuracy_by_case.png", "accuracy.png", "results.json",
            "run.json"} <= {p.name for p in out.iterdir()}
    record = json.loads((out / "run.json").read_text())
    assert record["kind"] == "judge_validation" and record["notebook"] == "judge_validation"
    per_case = pd.read_csv(out / "per_case.csv")
    assert len(per_case) == 8 * 3 and set(per_case.columns) == set(V.CASE_COLUMNS)


def test_kappa_matches_sklearn_on_random_judges():
    rng = np.random.default_rng(3)
    for _ in range(5):
        verdicts = rng.integers(0, 2, size=72).astype(float)
        verdicts[rng.random(72) < 0.2] = np.nan  # abstentions are left out
        judged = pd.DataFrame({"judge_r": verdicts, "judge_voting": verdicts})
        r = V.pointwise_table(ITEMS, judged, ["r"], n_boot=200).iloc[0]
        used = ~np.isnan(verdicts)
        assert r["kappa"] == pytest.approx(cohen_kappa_score(GOLD[used], verdicts[used]), abs=1e-12)
        assert r["n"] == used.sum() and r["abstained"] == (~used).sum()


# ----------------------------------------------------------------------------- pairwise
def pair_judge(decide) -> ScriptedClient:
    """decide(item, shown_first_is_a) -> the winner as shown."""
    lookup = {}
    for it in PAIRS:
        for order, case in enumerate(V.judge_cases([it], "pairwise", both_orders=True)):
            lookup[render_pairwise(case)[1]["content"]] = (it, order == 0)
    client = ScriptedClient(lambda req: json.dumps(
        {"rationale": "compared", "winner": decide(*lookup[req.messages[1]["content"]])}))
    S._remember(client, "json_object")
    return client


def test_pairwise_always_first_judge_has_full_position_bias_and_is_inconsistent():
    run = run_with({"first": pair_judge(lambda it, a_first: "A")}, judge_kind="pairwise", both_orders=True)
    r = row(run, "first")
    assert r["n"] == 72 and r["abstained"] == 0
    assert r["position_bias"] == 1.0 and r["tie_rate"] == 0.0
    assert r["position_consistency"] == 0.0 and r["consistent_pairs"] == 0
    assert r["accuracy"] == pytest.approx(28 / 72)  # each decisive pair right in one of its two orders
    assert pd.isna(r["sensitivity"])  # does not apply to the pairwise kind
    labels = [it.label for it in PAIRS]
    assert r["kappa"] == pytest.approx(cohen_kappa_score(labels, ["A"] * len(PAIRS)), abs=1e-12)


def test_pairwise_perfect_judge_in_both_orders():
    def perfect(it, a_first):
        return it.label if a_first else {"A": "B", "B": "A", "tie": "tie"}[it.label]

    run = run_with({"oracle": pair_judge(perfect)}, judge_kind="pairwise", both_orders=True)
    r = row(run, "oracle")
    assert r["accuracy"] == 1.0 and r["kappa"] == pytest.approx(1.0)
    assert r["position_consistency"] == 1.0 and r["position_bias"] == pytest.approx(0.5)
    assert r["tie_rate"] == pytest.approx(16 / 72)
    assert run.per_case().loc["both_wrong", "oracle"] == "100% (8/8)"


# ----------------------------------------------------------------------------- parameters, files, trust
@pytest.mark.parametrize("params, message", [
    ({"judge_kind": "facts"}, "judge_kind='facts' is not valid"),
    ({"limit": 0}, "limit=0 must be at least 1"),
    ({"labels": "nowhere.csv"}, "labels: file not found: nowhere.csv"),
    ({"both_orders": "yes"}, "both_orders='yes' has type str; expected bool"),
    ({"judges": []}, "judges must be a non-empty list"),
])
def test_bad_parameters_are_errors(params, message):
    judges = params.pop("judges", [{"name": "j", "model": "m", "base_url": "http://x/v1"}])
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_params(judges=judges, **params)


def test_an_unknown_parameter_is_an_error():
    from evekit.runs.judge_validation import ValidationConfig

    ns = {"In": ["# Parameters\njudge_knd = 'fact_check'\n"], "judges": [{"name": "j", "model": "m", "base_url": "u"}]}
    with pytest.raises(ParameterError, match="judge_knd"):
        ValidationConfig.from_notebook(ns)


def test_bad_label_row_names_file_line_and_column(tmp_path):
    f = tmp_path / "labels.csv"
    pd.DataFrame({"question": ["q1", "q2"], "reference": ["r", "r"], "answer": ["a", "b"],
                  "label": [1, "maybe"]}).to_csv(f, index=False)
    with pytest.raises(DataError, match=r"labels.csv: line 2 \(row 1\), column 'label': label must be 1"):
        V.load_labels(f, "fact_check")


def test_column_mapping_and_csv_labels(tmp_path):
    f = tmp_path / "mine.csv"
    pd.DataFrame({"Q": ["q1", "q2"], "Ref": ["r1", "r2"], "Ans": ["a1", "a2"], "Gold": ["PASS", 0],
                  "type": ["x", "y"]}).to_csv(f, index=False)
    items, _ = V.load_labels(f, "fact_check", question_column="Q", reference_column="Ref", answer_column="Ans",
                             label_column="Gold", case_column="type")
    assert [(it.question, it.label, it.case) for it in items] == [("q1", 1, "x"), ("q2", 0, "y")]
    with pytest.raises(DataError, match=r"no column\(s\) \['answer'\]"):
        V.load_labels(f, "fact_check", question_column="Q", reference_column="Ref", label_column="Gold")


def test_context_kind_uses_the_items_with_documents_and_says_so():
    items, notes = V.load_labels(POINTWISE, "context")
    assert len(items) == 16 and all(it.context for it in items)
    assert "56 of 72 rows have no 'context' documents" in notes[0]


def test_judge_trust_shows_validated_accuracy_and_warns_below_04(tmp_path):
    fooled = lambda it: 1 if it.case == "injection_attempt" else it.label  # noqa: E731
    run = run_with({"yes": scripted(lambda it: 1), "fooled": scripted(fooled)}, output_dir=str(tmp_path))
    path = run.save() / "results.json"
    trust = V.judge_trust(path, ["fooled", "yes", "other"], kind="fact_check")
    t = trust.set_index("judge")
    assert t.loc["fooled", "validated_accuracy"] == pytest.approx(63 / 72)
    assert t.loc["fooled", "validated_kappa"] == pytest.approx(row(run, "fooled")["kappa"])
    assert t.loc["fooled", "warning"] == ""  # kappa well above 0.4
    assert "kappa against the expert labels is 0.00 (< 0.4)" in t.loc["yes", "warning"]
    assert "not in the validation" in t.loc["other", "warning"] and math.isnan(t.loc["other", "validated_accuracy"])
    assert len(V.trust_warnings(trust)) == 2
    other_kind = V.judge_trust(path, ["fooled"], kind="refusal")
    assert "validation is of the fact_check judge" in other_kind.loc[0, "warning"]


# ----------------------------------------------------------------------------- where scores are shown
def test_task_judge_table_shows_trust_abstention_reasons_and_the_demo_judge(tmp_path, monkeypatch, capsys):
    from evekit.runs.task.run import TaskRun

    fooled = lambda it: 1 if it.case == "injection_attempt" else it.label  # noqa: E731
    validation = run_with({"careful": scripted(fooled), "smollm2-judge": scripted(lambda it: 1)},
                          output_dir=str(tmp_path / "v")).save() / "results.json"
    data = tmp_path / "open.jsonl"
    data.write_text("".join(json.dumps({"Question": f"q{i}?", "Answer": f"ref {i}"}) + "\n" for i in range(4)))
    judges = [{"name": "careful", "model": "big-judge", "base_url": "http://127.0.0.1:9/v1"},
              {"name": "smollm2-judge", "model": "smollm2-135m-instruct", "base_url": "http://127.0.0.1:9/v1"}]
    run = TaskRun.from_notebook({"task": "open_ended", "model_name": "m", "base_url": "http://127.0.0.1:9/v1",
                                 "dataset": str(data), "cache_dir": str(tmp_path / "cache"), "num_fewshot": 0,
                                 "output_dir": str(tmp_path / "out"), "run_name": "t", "judges": judges,
                                 "judge_validation": str(validation)})
    model = ScriptedClient(lambda req: "an answer")
    monkeypatch.setattr(run, "_client", lambda *a, **k: model)

    def verdict(req):  # the template copied on q0, a verdict elsewhere
        if "q0?" in req.messages[1]["content"]:
            return '{"reasoning": "<one or two sentences>", "verdict": 1}'
        return json.dumps({"reasoning": "matches the reference", "verdict": 1})

    monkeypatch.setattr(run, "client_factory", lambda *a, **k: ScriptedClient(verdict))
    run.load()
    run.generate()
    run.judge()
    capsys.readouterr()
    table = run.judge_summary()
    out = capsys.readouterr().out
    assert table.loc["careful", "pass rate"] == "100.0%" and table.loc["careful", "abstained"] == 1
    assert table.loc["careful", "abstention reasons"] == "copied the template: 1"
    assert table.loc["careful", "validated accuracy [95% CI]"].startswith("88% [")
    assert table.loc["smollm2-judge", "validated kappa"] == "0.00"
    assert "kappa against the expert labels is 0.00 (< 0.4)" in out and "smollm2-judge" in out
    assert "embedded demo model" in out
    results = json.loads((run.save() / "results.json").read_text())
    trust = {r["judge"]: r for r in results["judge_trust"]["judges"]}
    assert trust["careful"]["validated_accuracy"] == pytest.approx(63 / 72)
    assert results["judge_counts"]["abstention_reasons"]["careful"] == {"copied the template": 1}
    assert results["demo_judges"] == ["smollm2-judge"]
    assert any("embedded demo model" in n for n in results["notes"])


def test_a_missing_judge_validation_file_is_a_parameter_error(tmp_path):
    from evekit.runs.task.run import TaskRun

    with pytest.raises(ParameterError, match="judge_validation: file not found"):
        TaskRun.from_notebook({"task": "open_ended", "model_name": "m", "base_url": "http://x/v1",
                               "judge_validation": str(tmp_path / "none.json")})


def test_win_rate_judge_table_shows_abstention_reasons_and_pairwise_trust(tmp_path, capsys):
    import test_winrate as W
    from evekit.runs import win_rate as wr

    validation = run_with({"j1": pair_judge(lambda it, a_first: "A"), "j2": pair_judge(
        lambda it, a_first: it.label if a_first else {"A": "B", "B": "A", "tie": "tie"}[it.label])},
        judge_kind="pairwise", both_orders=True, output_dir=str(tmp_path / "v")).save() / "results.json"
    qs = [f"q{i}: what is the revisit of mission {i}?" for i in range(4)]
    fa = W.write_csv(tmp_path / "a.csv", qs, [f"GOOD a {i}" for i in range(4)])
    fb = W.write_csv(tmp_path / "b.csv", qs, [f"b {i}" for i in range(4)])
    cfg = wr.validate_params(task="open_ended", model_a=[{"name": "a", "file": str(fa)}], model_b=[{"name": "b", "file": str(fb)}],
                             judges=W.judges("j1", "j2"), output_dir=str(tmp_path / "out"),
                             judge_validation=str(validation), both_orders=False)

    def decide(name, seen):  # j1 copies the template: not a verdict
        if name == "j1":
            return json.dumps({"rationale": "<one or two sentences>", "winner": "B"})
        return W.by_quality(name, seen)

    run = wr.WinRateRun(cfg, clients=W.Scripted(decide).clients(["j1", "j2"]))
    run.load()
    capsys.readouterr()
    table = run.judge()
    out = capsys.readouterr().out
    assert table.loc["j1", "abstained"] == 4 and table.loc["j2", "abstained"] == 0
    assert table.loc["j1", "abstention reasons"] == "copied the template: 4"
    assert table.loc["j2", "validated accuracy [95% CI]"].startswith("100% [") and table.loc["j2", "validated kappa"] == "1.00"
    assert "judge 'j1': kappa against the expert labels is" in out
    metrics = json.loads((run.save()[0] / "metrics.json").read_text())
    assert metrics["abstention_reasons"]["j1"] == {"copied the template": 4}
    with pytest.raises(ParameterError, match="judge_validation: file not found"):
        wr.validate_params(task="open_ended", model_a=[{"name": "a", "file": str(fa)}], model_b=[{"name": "b", "file": str(fb)}],
                           judges=W.judges("j1"), judge_validation=str(tmp_path / "nope.json"))
