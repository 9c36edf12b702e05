"""evekit.ranking's fits on aggregated battles: against an independent fitter (statsmodels' binomial
GLM on the expanded battles, ties as two half-weight rows) on random data, against the
battle-by-battle fits of commit 61dd9ec on a fixture (same seeds, so the same resamples), the
batched bootstrap against one scipy fit per resample, and the edge cases (separation, a
disconnected graph, ties only, a baseline, equal answer lengths)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import optimize

from evekit import ranking as R
from evekit.errors import DataError

ELO = 400 / math.log(10)
FIXTURES = Path(__file__).parent / "fixtures" / "ranking_fit"
NUMERIC = ["rating", "ci_low", "ci_high", "style_rating", "style_ci_low", "style_ci_high"]


def random_battles(seed: int, n_models: int = 7, n_questions: int = 25, n_rows: int = 900) -> pd.DataFrame:
    """Random pairs (unequal counts, some pairs never met, either order), random outcomes with
    ties, answer lengths per question and model, two judges and a few empty verdicts."""
    rng = np.random.default_rng(seed)
    models = [f"m{i}" for i in range(n_models)]
    beta = rng.normal(0, 0.8, n_models)
    lengths = rng.integers(50, 800, (n_questions, n_models))
    # a spanning chain keeps the graph connected; the other rows are random pairs
    a = np.concatenate([np.arange(n_models - 1), rng.integers(0, n_models, n_rows)])
    b = np.concatenate([np.arange(1, n_models), rng.integers(0, n_models, n_rows)])
    keep = a != b
    a, b = a[keep], b[keep]
    q = rng.integers(0, n_questions, len(a))
    la, lb = lengths[q, a], lengths[q, b]
    p = 1 / (1 + np.exp(-(beta[a] - beta[b] + 0.8 * (la - lb) / (la + lb))))
    u = rng.random(len(a))
    names = np.array(models)
    winner = np.where(u < 0.15, "tie", np.where(rng.random(len(a)) < p, names[a], names[b])).astype(object)
    winner[rng.random(len(a)) < 0.03] = None
    return pd.DataFrame({"question_id": [f"q{i}" for i in q], "model_a": names[a], "model_b": names[b],
                         "judge": np.where(rng.random(len(a)) < 0.5, "J1", "J2"), "winner": winner,
                         "rationale": "", "len_a": la, "len_b": lb})


def glm_ratings(battles: pd.DataFrame, style: bool) -> tuple[pd.Series, float]:
    """statsmodels' binomial GLM on the expanded rows: a win y=1, a loss y=0, a tie two rows
    (y=1 and y=0) of weight 1/2; dummy coding with the last model as the reference; mean 1000."""
    u = battles[battles["winner"].notna()]
    models = sorted(set(u["model_a"]) | set(u["model_b"]))
    idx = {m: i for i, m in enumerate(models)}
    X, y, w = [], [], []
    for r in u.itertuples(index=False):
        x = np.zeros(len(models) + 1)
        x[idx[r.model_a]] += 1
        x[idx[r.model_b]] -= 1
        x[-1] = (r.len_a - r.len_b) / (r.len_a + r.len_b)
        x = np.delete(x, len(models) - 1)  # the reference
        if not style:
            x = x[:-1]
        if r.winner == "tie":
            X += [x, x]
            y += [1.0, 0.0]
            w += [0.5, 0.5]
        else:
            X.append(x)
            y.append(1.0 if r.winner == r.model_a else 0.0)
            w.append(1.0)
    res = sm.GLM(np.array(y), np.array(X), family=sm.families.Binomial(), var_weights=np.array(w)).fit(tol=1e-13)
    params = np.asarray(res.params)
    beta = np.append(params[: len(models) - 1], 0.0) * ELO
    return pd.Series(beta - beta.mean() + 1000, index=models), (float(params[-1]) if style else float("nan"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ratings_equal_statsmodels_glm_on_random_battles(seed):
    b = random_battles(seed)
    ref, _ = glm_ratings(b, style=False)
    got = R.fit_bradley_terry(b)
    assert np.abs(got[ref.index] - ref).max() < 1e-4
    ref_s, gamma = glm_ratings(b, style=True)
    got_s = R.fit_bradley_terry(b, style=True)
    assert np.abs(got_s[ref_s.index] - ref_s).max() < 1e-4
    assert got_s.attrs["style_coef"] == pytest.approx(gamma, abs=1e-6)
    # and rate()'s point estimates are the same fits, per judge too
    out = R.rate(b, n_boot=0)
    j2 = b[b["judge"] == "J2"]
    ref_j2, _ = glm_ratings(j2, style=True)
    rated = out[out["judge"] == "J2"].set_index("model")
    assert np.abs(rated.loc[ref_j2.index, "style_rating"] - ref_j2).max() < 1e-4


def test_every_bootstrap_fit_equals_a_scipy_fit_of_the_reweighted_battles():
    """The batched Newton fits of all resamples at once against one scipy fit per resample of the
    row-level likelihood with each row weighted by its question's draw count."""
    b = random_battles(4, n_models=5, n_questions=15, n_rows=400)
    df = R._usable(b)
    bt = R._Battles(df, style=True)
    w = R._resample_weights(bt.nq, 25, seed=9)
    models = bt.models
    ia = df["model_a"].map(models.index).to_numpy()
    ib = df["model_b"].map(models.index).to_numpy()
    s = df["s"].to_numpy()
    d = ((df["len_a"] - df["len_b"]) / (df["len_a"] + df["len_b"])).to_numpy(float)
    q = pd.Index(bt.questions).get_indexer(df["question_id"])
    for style in (False, True):
        start = bt.fit(style=style)[0]
        batched = bt.fit(w, start=start, style=style)
        for col in range(w.shape[1]):
            row_w = w[q, col]

            def nll(theta):
                full = np.append(0.0, theta[: len(models) - 1])
                eta = full[ia] - full[ib] + (theta[-1] * d if style else 0.0)
                return np.sum(row_w * (np.logaddexp(0, eta) - s * eta))

            ref = optimize.minimize(nll, start, method="BFGS", options={"gtol": 1e-10}).x
            assert np.abs(batched[col] - ref).max() * ELO < 1e-3


# -- equal to the battle-by-battle fits of commit 61dd9ec ------------------------------------------

def _fixture_battles(name: str = "battles.csv") -> pd.DataFrame:
    return pd.read_csv(FIXTURES / name)


@pytest.mark.parametrize("baseline, expected", [(None, "ratings_61dd9ec.csv"),
                                                ("m2", "ratings_baseline_m2_61dd9ec.csv")])
def test_ratings_and_intervals_equal_those_of_the_row_by_row_fits(baseline, expected):
    """The fixture's ratings.csv rows were written by commit 61dd9ec's `rate(battles, n_boot=200,
    seed=3)` (one scipy trust-exact fit per resample on the battle rows); the same seed draws the
    same resamples, so every rating and interval agrees far inside 0.05 points."""
    old = pd.read_csv(FIXTURES / expected)
    new = R.rate(_fixture_battles(), n_boot=200, seed=3, baseline=baseline)
    assert list(new[["judge", "model"]].itertuples(index=False)) == list(old[["judge", "model"]].itertuples(index=False))
    cols = NUMERIC + (R.BASELINE_COLUMNS if baseline else [])
    assert np.abs(new[cols].to_numpy() - old[cols].to_numpy()).max() < 1e-3
    assert (new["rank"].to_numpy() == old["rank"].to_numpy()).all()
    assert (new["n_battles"].to_numpy() == old["n_battles"].to_numpy()).all()


def test_the_same_resamples_are_undefined_as_before():
    """A chain of models (a-b-c-d-e): a resample that misses one link has no ratings. Commit
    61dd9ec left out the same resamples (by index) as this code does."""
    old = json.loads((FIXTURES / "sparse_undefined_61dd9ec.json").read_text())
    out = R.rate(_fixture_battles("sparse_battles.csv"), n_boot=300, seed=5, keep_draws=True, per_judge=False)
    draws = out.attrs["draws"]["pooled"]
    assert out.attrs["undefined_resamples"]["pooled"] == old["undefined_resamples"] > 10
    assert np.flatnonzero(draws.isna().any(axis=1)).tolist() == old["undefined_rows"]
    assert draws.dropna().notna().all().all()


# -- edge cases -------------------------------------------------------------------------------------

def _round_robin(n_questions: int = 20, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    models = ["a", "b", "c", "d"]
    rows = []
    for q in range(n_questions):
        for i, x in enumerate(models):
            for y in models[i + 1:]:
                for first, second in ((x, y), (y, x)):
                    rows.append((f"q{q}", first, second, "J", [first, second, "tie"][rng.integers(0, 3)], ""))
    return pd.DataFrame(rows, columns=["question_id", "model_a", "model_b", "judge", "winner", "rationale"])


def test_a_model_that_wins_every_battle_gets_a_huge_finite_rating_and_leaves_the_others_as_without_it():
    b = _round_robin()
    has_d = (b["model_a"] == "d") | (b["model_b"] == "d")
    b.loc[has_d, "winner"] = "d"
    fit = R.fit_bradley_terry(b)
    assert np.isfinite(fit).all()
    assert fit["d"] > fit.drop("d").max() + 2000  # no finite MLE: the fit stops far out
    # the other models' differences are the limit: the fit of their battles alone
    rest = R.fit_bradley_terry(b[~has_d])
    assert np.abs((fit[rest.index] - fit[rest.index].mean()) - (rest - rest.mean())).max() < 0.01
    out = R.rate(b, n_boot=50, per_judge=False).set_index("model")
    assert out.loc["d", "rank"] == 1 and np.isfinite(out[["ci_low", "ci_high"]]).all().all()
    # and a model that loses every battle, likewise at the bottom
    b.loc[has_d, "winner"] = np.where(b.loc[has_d, "model_a"] == "d", b.loc[has_d, "model_b"], b.loc[has_d, "model_a"])
    assert R.fit_bradley_terry(b)["d"] < R.fit_bradley_terry(b).drop("d").min() - 2000


def test_a_disconnected_comparison_graph_is_a_data_error():
    b = _round_robin()
    split = b["model_a"].isin(["a", "b"]) == b["model_b"].isin(["a", "b"])  # {a, b} and {c, d} never meet
    with pytest.raises(DataError, match="not connected"):
        R.fit_bradley_terry(b[split])
    with pytest.raises(DataError, match="not connected"):
        R.rate(b[split], n_boot=10)


def test_ties_only_give_1000_for_everyone_with_degenerate_intervals():
    b = _round_robin().assign(winner="tie")
    out = R.rate(b, n_boot=40)
    assert np.allclose(out[["rating", "ci_low", "ci_high"]].to_numpy(), 1000.0)
    assert (out["rank"] == 1).all()


def test_baseline_is_1000_and_only_shifts_every_bootstrap_draw():
    b = _round_robin(30, seed=4)
    free = R.rate(b, n_boot=60, seed=2, keep_draws=True, per_judge=False)
    base = R.rate(b, n_boot=60, seed=2, keep_draws=True, per_judge=False, baseline="b")
    f, g = free.attrs["draws"]["pooled"], base.attrs["draws"]["pooled"]
    assert np.allclose(g["b"], 1000.0)
    assert np.allclose(g.to_numpy(), (f.sub(f["b"], axis=0) + 1000).to_numpy())
    row = base.set_index("model").loc["b"]
    assert row["rating"] == row["ci_low"] == row["ci_high"] == 1000.0


def test_equal_answer_lengths_leave_the_style_fit_equal_to_the_plain_one():
    """d = 0 everywhere: the length coefficient is not identified (a flat direction); the fit
    keeps it at 0 and the model ratings are the plain ones."""
    b = _round_robin(15, seed=6).assign(len_a=100, len_b=100)
    plain = R.fit_bradley_terry(b)
    styled = R.fit_bradley_terry(b, style=True)
    assert styled.attrs["style_coef"] == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(styled, plain, atol=1e-6)
    out = R.rate(b, n_boot=20, per_judge=False)
    assert np.allclose(out["style_ci_low"], out["ci_low"], atol=1e-6)


def test_rows_judged_by_several_judges_and_in_both_orders_pool_into_one_style_cell():
    b = _round_robin(5, seed=8)
    b = pd.concat([b, b.assign(judge="K")], ignore_index=True)
    la = {"a": 100, "b": 200, "c": 300, "d": 400}
    b["len_a"] = b["model_a"].map(la)
    b["len_b"] = b["model_b"].map(la)
    bt = R._Battles(R._usable(b), style=True)
    # 5 questions x 6 pairs, each from 2 orders x 2 judges
    assert len(bt.cell_n) == 30 and (bt.cell_n == 4).all()
