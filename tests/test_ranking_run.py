"""The ranking notebook's runner (evekit.ranking_run): N answer files -> battles -> ratings.

Judges are scripted with known strengths and noise; the pooled ratings are checked against an
independent statsmodels logistic regression of the saved battles.csv; bad input fails first."""
from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.stats import kendalltau

from evekit import batch, ranking as R, structured
from evekit.runs.summary import board as leaderboard
from evekit.errors import ParameterError
from evekit.paths import REPO_ROOT as ROOT
from evekit.runs.ranking import RankingConfig, RankingRun

sys.path.insert(0, str(Path(__file__).parent))
from scripted_client import ScriptedClient  # noqa: E402

BLOCK = re.compile(r"<answer_([ab])>\n(.*?)\n</answer_\1>", re.S)
MODEL = re.compile(r"answer of (\S+?):")
STRENGTH = {"alpha": 1.2, "bravo": 0.5, "charlie": 0.0, "delta": -0.6, "echo": -1.3}


# --------------------------------------------------------------------------- helpers
def write_models(tmp_path: Path, names, n_questions: int, *, failed=None, same=None, lm_eval=False,
                 marker=None) -> list[dict]:
    """One samples.csv per model; each answer says whose it is (and `marker(name)` if given).
    `failed`: {model: [question indices]}; `same`: question indices where every answer is identical."""
    qs = [f"What does band {i} of the sensor measure?" for i in range(n_questions)]
    out = []
    for name in names:
        answers = [f"answer of {name}: band {i} measures radiance{(marker(name) if marker else '')}"
                   + " with detail" * (i % 3) for i in range(n_questions)]
        for i in (same or []):
            answers[i] = "the same answer for everyone"
        bad = set((failed or {}).get(name, []))
        path = tmp_path / f"{name}.csv"
        if lm_eval:
            pd.DataFrame({"doc.Question": qs, "target": "reference",
                          "filtered_resps": [repr([a]) for a in answers]}).to_csv(path, index=False)
        else:
            pd.DataFrame({"doc_id": range(n_questions), "doc.Question": qs, "target": "reference",
                          "filtered_resps": answers, "failed": [i in bad for i in range(n_questions)],
                          "error": ["HTTP 500" if i in bad else "" for i in range(n_questions)]}).to_csv(path, index=False)
        out.append({"name": name, "file": str(path)})
    return out


def shown(request) -> tuple[str, str, str]:
    user = request.messages[1]["content"]  # the case (a reminder after an unusable reply comes later)
    blocks = dict(BLOCK.findall(user))
    return MODEL.search(blocks["a"]).group(1), MODEL.search(blocks["b"]).group(1), user


def noisy_judge(name: str, strength=STRENGTH, tie=0.1):
    """P(A wins) = (1 - tie) * sigmoid(s_A - s_B), a tie with probability `tie`: a Bradley–Terry
    judge with noise, so the optimum is finite. Deterministic per (judge, prompt)."""
    def respond(req):
        a, b, user = shown(req)
        u = int(hashlib.sha256(f"{name}|{user}".encode()).hexdigest()[:8], 16) / 2**32
        p = 1 / (1 + math.exp(-(strength[a] - strength[b])))
        w = "A" if u < (1 - tie) * p else "B" if u >= (1 - tie) * p + tie else "tie"
        return json.dumps({"rationale": f"{name} prefers by strength", "winner": w})
    return respond


def clients(respond_by_judge: dict) -> dict:
    out = {}
    for name, respond in respond_by_judge.items():
        c = ScriptedClient(respond)
        structured._remember(c, "json_schema")  # past the structured-output probe
        out[name] = c
    return out


def judges(*names):
    return [{"name": n, "model": f"scripted-{n}", "base_url": "http://127.0.0.1:9/v1"} for n in names]


def run_all(run: RankingRun) -> RankingRun:
    run.load()
    run.plan()
    run.judge()
    run.rate()
    return run


def ranking(tmp_path, models, respond_by_judge, **params) -> RankingRun:
    params.setdefault("n_boot", 100)
    params.setdefault("output_dir", str(tmp_path / "out"))
    return run_all(RankingRun.from_params(clients=clients(respond_by_judge), task="open_ended", models=models,
                                          judges=judges(*respond_by_judge), **params))


# --------------------------------------------------------------------------- recovery and the fit
def test_scripted_noisy_judges_recover_the_true_order(tmp_path):
    models = write_models(tmp_path, list(STRENGTH), 60)
    run = ranking(tmp_path, models, {j: noisy_judge(j) for j in ("j1", "j2", "j3")})
    r = run.ratings
    pooled = r[r["judge"] == R.POOLED].sort_values("rating", ascending=False)
    assert pooled["model"].tolist() == list(STRENGTH)           # the true order
    assert pooled["rank"].iloc[0] == 1 and pooled["rank"].iloc[-1] > 1
    assert np.isfinite(pooled["rating"]).all() and pooled["rating"].mean() == pytest.approx(1000)
    for j in ("j1", "j2", "j3"):                                  # each judge alone is close to the truth
        mine = r[r["judge"] == j].set_index("model")["rating"]
        assert kendalltau(mine[list(STRENGTH)], list(STRENGTH.values())).statistic >= 0.8
    assert (r.groupby("model")["judge"].apply(lambda s: (s == R.POOLED).sum()) == 1).all()
    # the pooled ratings are on the scale of the true strengths: 400 / ln 10 points per unit of log-odds
    truth = np.array(list(STRENGTH.values())) * R.ELO_SCALE
    assert np.corrcoef(pooled["rating"], truth)[0, 1] > 0.97


def test_pooled_ratings_equal_statsmodels_logit_of_the_saved_battles_csv(tmp_path):
    models = write_models(tmp_path, ["alpha", "bravo", "charlie", "delta"], 40, same=[3])

    def sometimes_garbage(req):  # a judge that abstains now and then: those rows must not count
        a, b, user = shown(req)
        if int(hashlib.sha256(user.encode()).hexdigest()[:2], 16) < 20:
            return "I cannot decide."
        return noisy_judge("g")(req)
    run = ranking(tmp_path, models, {"j1": noisy_judge("j1"), "g": sometimes_garbage}, max_pairs_per_question=4)
    out = run.save()
    battles = pd.read_csv(out / "battles.csv", keep_default_na=False)
    ratings = pd.read_csv(out / "ratings.csv")
    usable = battles[battles["winner"] != ""]
    assert len(usable) < len(battles)                               # some abstained
    assert (battles.loc[battles["winner"] == "", "error"] != "").all()
    names = sorted(set(usable["model_a"]) | set(usable["model_b"]))
    X = np.zeros((len(usable), len(names)))
    for k, (a, b) in enumerate(zip(usable["model_a"], usable["model_b"])):
        X[k, names.index(a)] += 1
        X[k, names.index(b)] -= 1
    y = np.where(usable["winner"] == usable["model_a"], 1.0, np.where(usable["winner"] == "tie", 0.5, 0.0))
    fit = sm.GLM(y, X[:, 1:], family=sm.families.Binomial()).fit()  # fractional outcome: a tie is half
    elo = R.ELO_SCALE * np.concatenate([[0.0], fit.params])
    expected = pd.Series(elo - elo.mean() + 1000, index=names)
    pooled = ratings[ratings["judge"] == "pooled"].set_index("model")["rating"]
    assert np.abs(pooled[names] - expected[names]).max() < 0.01
    assert (ratings.loc[ratings["judge"] == "pooled", "n_battles"].sum() == 2 * len(usable))


def test_each_row_is_a_decision_and_model_a_is_the_model_shown_first(tmp_path):
    models = write_models(tmp_path, ["alpha", "bravo", "charlie"], 5)
    run = ranking(tmp_path, models, {"first": lambda req: json.dumps({"rationale": "first", "winner": "A"})})
    b = run.battles
    assert len(b) == 5 * 3 * 2 and (b["winner"] == b["model_a"]).all()   # all pairs, both orders
    for (q, a, bb), row in b.set_index(["question_id", "model_a", "model_b"]).iterrows():
        assert ((b["question_id"] == q) & (b["model_a"] == bb) & (b["model_b"] == a)).sum() == 1  # swapped row
    shown_first = [shown(req)[0] for req in run.clients["first"].calls]
    assert shown_first == b["model_a"].tolist()
    # an always-A judge makes every model equal: position bias is not mistaken for strength
    pooled = run.ratings[run.ratings["judge"] == R.POOLED]
    assert np.allclose(pooled["rating"], 1000, atol=1e-6) and (pooled["rank"] == 1).all()


def test_identical_answers_are_ties_without_a_call_and_failed_generations_sit_out(tmp_path):
    models = write_models(tmp_path, ["alpha", "bravo", "charlie"], 8, same=[0], failed={"charlie": [5]})
    run = ranking(tmp_path, models, {"j": noisy_judge("j")})
    b = run.battles
    q0 = b[b["question_id"] == "q0000"]
    assert (q0["winner"] == "tie").all() and (q0["method"] == "identical").all()
    q5 = b[b["question_id"] == "q0005"]
    assert not ((q5["model_a"] == "charlie") | (q5["model_b"] == "charlie")).any() and len(q5) == 2
    assert len(run.clients["j"].calls) == len(b) - len(q0)
    left = run.left_out_table()
    assert left[["model", "row"]].values.tolist() == [["charlie", 6]] and "generation failed" in left["reason"][0]


def test_max_pairs_per_question_limits_calls_as_printed(tmp_path, capsys):
    models = write_models(tmp_path, list(STRENGTH), 30)
    run = RankingRun.from_params(clients=clients({"j": noisy_judge("j")}), task="open_ended", models=models, judges=judges("j"),
                                 max_pairs_per_question=2, both_orders=False, n_boot=50,
                                 output_dir=str(tmp_path / "out"))
    run.load()
    plan = run.plan()
    printed = capsys.readouterr().out
    assert plan["judge_calls"] == 30 * 2 == len(run.pairs)
    assert "60 judge calls" in printed and f"{math.sqrt(10 / 2):.2f}x wider" in printed
    run.judge()
    assert len(run.clients["j"].calls) == 60
    per_pair = run.pairs.apply(lambda r: tuple(sorted((r.model_a, r.model_b))), axis=1).value_counts()
    assert len(per_pair) == 10 and per_pair.max() - per_pair.min() <= 1  # spread evenly over the pairs


def test_baseline_is_1000_with_win_rates_against_it(tmp_path):
    models = write_models(tmp_path, ["alpha", "bravo", "charlie"], 30, lm_eval=True)
    run = ranking(tmp_path, models, {"j": noisy_judge("j")}, baseline="charlie")
    pooled = run.ratings[run.ratings["judge"] == R.POOLED].set_index("model")
    assert pooled.at["charlie", "rating"] == pytest.approx(1000)
    assert pooled.at["alpha", "win_rate_vs_baseline"] > 0.5 > pooled.at["charlie", "win_rate_vs_baseline"] - 1e-9
    lo, hi = pooled.at["alpha", "win_rate_vs_baseline_ci_low"], pooled.at["alpha", "win_rate_vs_baseline_ci_high"]
    assert lo <= pooled.at["alpha", "win_rate_vs_baseline"] <= hi
    assert "win rate vs baseline [95% CI]" in RankingRun.rate(run).columns


def test_saved_files_and_run_record(tmp_path):
    models = write_models(tmp_path, ["alpha", "bravo", "charlie"], 12)
    run = ranking(tmp_path, models, {"j1": noisy_judge("j1"), "j2": noisy_judge("j2")}, run_name="r1")
    out = run.save()
    assert out == tmp_path / "out" / "r1" / "ranking" / "open_ended"
    for name in ("battles.csv", "ratings.csv", "results.json", "run.json", "ratings_forest.png",
                 "win_probability.png", "ratings_by_judge.png", "left_out.csv", "kendall_tau.csv"):
        assert (out / name).is_file(), name
    res = json.loads((out / "results.json").read_text())
    assert res["task"] == "open_ended" and res["n_questions"] == 12 and len(res["ratings"]) == 3
    assert res["kendall_tau"][0]["judge_a"] == "j1" and res["plan"]["judge_calls"] == 12 * 3 * 2 * 2
    assert json.loads((out / "run.json").read_text())["kind"] == "ranking"
    ratings = pd.read_csv(out / "ratings.csv")
    assert list(ratings.columns[:9]) == R.RATING_COLUMNS
    # the summary notebook's reader finds it; the task leaderboard does not mistake it for a task result
    ranked = leaderboard.rankings(tmp_path / "out", ["r1"])
    assert ranked["model"].tolist() == ratings[ratings["judge"] == "pooled"].sort_values("rank")["model"].tolist()
    assert leaderboard.collect(tmp_path / "out", ["r1"]) == []


# --------------------------------------------------------------------------- bad input
@pytest.fixture
def two(tmp_path):
    return write_models(tmp_path, ["alpha", "bravo"], 3)


def _cfg(models, **kw):
    return RankingConfig.from_dict({"task": "open_ended", "models": models, "judges": judges("j"), **kw})


def test_unknown_model_file_is_an_error_naming_the_model(two):
    bad = two + [{"name": "ghost", "file": "nowhere/samples.csv"}]
    with pytest.raises(ParameterError, match=r"models 'ghost': file not found: nowhere/samples.csv"):
        _cfg(bad)


def test_duplicate_model_names_are_an_error(two):
    with pytest.raises(ParameterError, match="model names must be unique; repeated: alpha"):
        _cfg(two + [{"name": "alpha", "file": two[1]["file"]}])


def test_baseline_not_among_the_models_is_an_error_with_did_you_mean(two):
    with pytest.raises(ParameterError, match=r"unknown baseline 'alpah' \(did you mean 'alpha'\?\)"):
        _cfg(two, baseline="alpah")


def test_unknown_parameter_is_an_error_with_did_you_mean(two):
    with pytest.raises(ParameterError, match=r"unknown parameter 'max_pair_per_question' \(did you mean "
                                             r"'max_pairs_per_question'\?\)"):
        _cfg(two, max_pair_per_question=2)
    namespace = {"In": ["# Parameters\nn_bot = 5\n"], "models": two, "judges": judges("j"), "n_bot": 5}
    with pytest.raises(ParameterError, match=r"'n_bot' \(did you mean 'n_boot'\?\)"):
        RankingConfig.from_notebook(namespace)


@pytest.mark.parametrize("kw, message", [
    ({"max_pairs_per_question": 0}, "max_pairs_per_question=0 must be at least 1"),
    ({"n_boot": -1}, "n_boot=-1 must be 0 or more"),
    ({"both_orders": 1}, "both_orders=1 has type int"),
    ({"task": "mcqa_single_answer"}, "not a task a pairwise judge can rank"),
    ({"judges": [{"name": "pooled", "model": "m", "base_url": "http://127.0.0.1:9/v1"}]}, "may not be called 'pooled'"),
    ({"judge_validation": "no/such/results.json"}, "judge_validation: file not found"),
])
def test_bad_values_are_refused(two, kw, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        RankingConfig.from_dict({"task": "open_ended", "models": two, "judges": judges("j"), **kw})


def test_one_model_is_not_a_ranking(two):
    with pytest.raises(ParameterError, match="at least two models"):
        _cfg(two[:1])


# --------------------------------------------------------------------------- notebook, batch, index
def _build_notebooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parameters_cell_is_generated_from_ranking_config_and_committed():
    import ast

    import nbformat

    def assignments(source):
        return {t.targets[0].id: ast.literal_eval(t.value) for t in ast.parse(source).body}

    generated = _build_notebooks().build_ranking()
    cell = next(c for c in generated.cells if "parameters" in c.metadata.get("tags", []))
    values = assignments(cell.source)
    assert list(values) == RankingConfig.names()
    committed = nbformat.read(ROOT / "notebooks" / "ranking.ipynb", as_version=4)
    committed_cell = next(c for c in committed.cells if "parameters" in c.metadata.get("tags", []))
    assert assignments(committed_cell.source) == values
    assert values["limit"] is None                              # the default is every question


def test_batch_runs_ranking_with_win_rate_after_the_tasks_and_before_summary():
    files = [Path(p) for p in ("summary.yaml", "ranking.yaml", "win_rate.yaml", "open_ended.t07.yaml")]
    assert [[f.name for f in phase] for phase in batch.phases(files)] == [
        ["open_ended.t07.yaml"], ["ranking.yaml", "win_rate.yaml"], ["summary.yaml"]]


def test_demo_parameter_files_name_the_three_open_ended_runs():
    import yaml

    demo = yaml.safe_load((ROOT / "params" / "demo" / "ranking.yaml").read_text())
    assert set(demo) <= set(RankingConfig.names())
    runs = {yaml.safe_load(p.read_text())["run_name"] for p in (ROOT / "params" / "demo").glob("open_ended*.yaml")}
    named = {Path(m["file"]).parts[1] for m in demo["models"]}
    assert named == runs == {"demo", "demo-5shot", "demo-t07"}


def test_notebook_runs_against_stub_judges_and_evekit_run_renders_the_report(tmp_path):
    """The notebook end to end under `evekit run`: judges on the stub server, which prefers the
    answer with the higher [[strength_N]] marker (with noise)."""
    from stub_server import StubServer

    import yaml

    strength = {"strong": 6, "middle": 3, "weak": 0}
    models = write_models(tmp_path, list(strength), 20, marker=lambda n: f" [[strength_{strength[n]}]]")
    params = tmp_path / "ranking.yaml"
    with StubServer(latency=0.0) as stub:
        params.write_text(yaml.safe_dump({
            "task": "open_ended", "models": models, "judges": [{"name": f"s{i}", "model": f"stub-{i}", "base_url": stub.base_url,
                                          "api_key_env": None} for i in (1, 2)],
            "n_boot": 100, "cache_dir": str(tmp_path / "cache"), "output_dir": str(tmp_path / "out"),
            "run_name": "nb", "seed": 7}))
        assert batch.run_batch([str(params)]) == 0
        calls = stub.stats()["total"]
    out = tmp_path / "out" / "nb" / "ranking" / "open_ended"
    ratings = pd.read_csv(out / "ratings.csv")
    pooled = ratings[ratings["judge"] == "pooled"].sort_values("rating", ascending=False)
    assert pooled["model"].tolist() == ["strong", "middle", "weak"]
    assert set(ratings["judge"]) == {"pooled", "s1", "s2"} and len(pooled) == 3
    assert calls >= 20 * 3 * 2 * 2                             # every decision was asked (plus format probes)
    html = (out / "report.html").read_text()
    assert "judge calls" in html and "Kendall" in html
    index = (tmp_path / "out" / "nb" / "index.html").read_text()
    assert "ranking: open_ended" in index and "1. strong" in index


@pytest.mark.integration
def test_ranking_with_the_embedded_model_as_judge_records_and_replays(embedded_server, tmp_path):
    """Three answer files judged by the real embedded server: every battle is a verdict or an
    abstention with its reason; the pooled fit has one row per model; an offline rerun replays."""
    fixtures = ROOT / "tests" / "fixtures" / "win_rate"
    models = [{"name": "0shot", "file": str(fixtures / "open_ended_0shot.csv")},
              {"name": "5shot", "file": str(fixtures / "open_ended_5shot.csv")},
              {"name": "0shot-copy", "file": str(fixtures / "open_ended_0shot.csv")}]
    params = dict(task="open_ended", models=models, judges=[{"name": "smollm2", "model": "smollm2-135m-instruct",
                                          "base_url": embedded_server}],
                  limit=3, n_boot=50, judge_max_tokens=128, max_retries=1, cache_dir=str(tmp_path / "cache"),
                  output_dir=str(tmp_path / "out"))
    run = run_all(RankingRun.from_params(**params))
    b = run.battles
    copy = b[((b["model_a"] == "0shot") & (b["model_b"] == "0shot-copy")) |
             ((b["model_a"] == "0shot-copy") & (b["model_b"] == "0shot"))]
    assert len(b) == 3 * 3 * 2 and (copy["method"] == "identical").all() and (copy["winner"] == "tie").all()
    for r in b.itertuples():
        error = None if pd.isna(r.error) else r.error  # pandas holds a missing error as NaN
        winner = None if pd.isna(r.winner) else r.winner
        assert (winner in ("0shot", "5shot", "0shot-copy", "tie") and not error) or (winner is None and error)
    assert sorted(run.ratings.loc[run.ratings["judge"] == "pooled", "model"]) == sorted(m["name"] for m in models)
    replay = run_all(RankingRun.from_params(**{**params, "offline": True}))
    pd.testing.assert_frame_equal(replay.battles, b)


def test_judge_validation_shows_validated_accuracy_and_warns_on_low_kappa(tmp_path, capsys):
    """A pairwise validation results.json beside the judges: accuracy and kappa per judge, a warning
    for the judge below kappa 0.4 and for the judge the validation does not know."""
    validation = tmp_path / "results.json"
    row = {"n": 36, "accuracy_ci_low": 0.5, "accuracy_ci_high": 0.9, "kappa_ci_low": 0.1, "kappa_ci_high": 0.9}
    validation.write_text(json.dumps({"judge_kind": "pairwise", "table": [
        {**row, "judge": "j1", "accuracy": 0.75, "kappa": 0.62},
        {**row, "judge": "j2", "accuracy": 0.50, "kappa": 0.21}]}))
    models = write_models(tmp_path, list(STRENGTH)[:3], 10)
    run = ranking(tmp_path, models, {j: noisy_judge(j) for j in ("j1", "j2", "j3")},
                  judge_validation=str(validation))
    table = run.judge_validation_table()
    out = capsys.readouterr().out
    assert table.loc["j1", "validated accuracy [95% CI]"] == "75% [50%, 90%]" and table.loc["j1", "validated kappa"] == "0.62"
    assert table.loc["j3", "validated kappa"] == "–"
    assert (table["battles"] == 3 * 2 * 10).all()
    warnings = [line for line in out.splitlines() if line.startswith("Warning")]
    assert len(warnings) == 2 and "'j2'" in warnings[0] and "0.4" in warnings[0] and "'j3'" in warnings[1]
    assert [r["judge"] for r in run.results()["judge_trust"]] == ["j1", "j2", "j3"]


def test_cluster_by_makes_the_bootstrap_draw_clusters_of_questions(tmp_path):
    names = ["alpha", "bravo", "charlie"]
    models = write_models(tmp_path, names, 30)
    docs = [f"doc{i // 6}" for i in range(30)]                   # five documents of six questions
    first = pd.read_csv(models[0]["file"])
    first["doc.source"] = docs                                    # one file carries the column: enough
    first.to_csv(models[0]["file"], index=False)
    respond = {"j1": noisy_judge("j1")}
    plain = ranking(tmp_path / "p", models, respond, n_boot=300)
    clustered = ranking(tmp_path / "c", models, respond, n_boot=300, cluster_by="source")
    assert clustered.matched.questions["cluster"].tolist() == docs
    assert plain.clusters() is None and set(clustered.clusters().values()) == set(docs[::6])
    p = plain.ratings[plain.ratings["judge"] == R.POOLED].set_index("model")
    c = clustered.ratings[clustered.ratings["judge"] == R.POOLED].set_index("model")
    assert np.allclose(p["rating"], c["rating"])                 # the fit is the same: only the resampling differs
    battles = clustered.battles
    qid_cluster = clustered.clusters()
    expected = R.rate(battles, n_boot=300, seed=clustered.config.seed, per_judge=False, clusters=qid_cluster)
    assert np.allclose(c.loc[names, "ci_low"], expected.set_index("model").loc[names, "ci_low"])
    results = clustered.results()
    assert results["n_clusters"] == 5 and "5 clusters of questions (cluster_by source)" in results["method"]["interval"]
    assert results["params"]["cluster_by"] == "source"
    with pytest.raises(Exception, match="cluster_by='exam'"):
        ranking(tmp_path / "x", models, respond, cluster_by="exam")


def test_plots_of_models_with_long_names_keep_their_axes_and_warn_nothing(recwarn):
    """A run prefix and a model name of 60+ characters once squeezed the win-probability heatmap to
    nothing (matplotlib's "constrained_layout not applied" warning, with the venv's path, in the
    report); tick labels are shortened in the middle, keeping both ends."""
    import matplotlib.pyplot as plt

    from evekit import plots
    from evekit.runs.ranking import views

    names = ["eve-rag-ablation-2026-11 · checkpoint-0012000-lora-r64-alpha128-merged-a",
             "eve-rag-ablation-2026-11 · checkpoint-0012000-lora-r64-alpha128-merged-b"]
    rows = [dict(judge=j, model=m, rating=v, ci_low=v - 20, ci_high=v + 20, rank=k, style_rating=np.nan,
                 style_ci_low=np.nan, style_ci_high=np.nan)
            for j in (R.POOLED, "j1", "j2") for m, v, k in zip(names, (1095, 905), (1, 2))]
    ratings = pd.DataFrame(rows)
    for name, make in views.PLOTS.items():
        fig = make(ratings)
        fig.canvas.draw()
        labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels() + ax.get_xticklabels()]
        assert all(len(t.split("  (rank")[0].split("\n")[0]) <= plots.TICK_LABEL_LIMIT for t in labels), (name, labels)
        assert any(t.startswith("eve-rag") and t.split("  (rank")[0].endswith("merged-a") for t in labels) \
            or name == "ratings_by_judge.png", (name, labels)
        plt.close(fig)
    assert not [w for w in recwarn if "layout" in str(w.message)], [str(w.message) for w in recwarn]
    assert plots.tick_label("x" * 10) == "x" * 10
    assert plots.tick_label("a" * 20 + "b" * 20, limit=9) == "aaaa…bbbb"
