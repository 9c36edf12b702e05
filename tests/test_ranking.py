"""evekit.ranking: Bradley–Terry ratings from judge battles, checked against scripted judges with
known strengths, an independent statsmodels fit, hand-made tables, and interval coverage."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import optimize

from evekit import ranking as R
from evekit.errors import DataError

ELO = 400 / math.log(10)
COLS = ["question_id", "model_a", "model_b", "judge", "winner", "rationale"]


def simulate(strength, n_questions, *, judges=("J1",), both_orders=True, tie=0.1, q_sd=0.0,
             seed=0, length=None, length_bias=0.0, max_pairs=None):
    """Battles from a Bradley–Terry model with log-strengths `strength` (dict model -> beta).
    Ties with probability ~`tie`, drawn so that the expected score of model_a stays
    sigmoid(beta_a - beta_b [+ question noise + length bias]), i.e. the half-win likelihood is
    consistent. `q_sd`: per question and model N(0, q_sd) shifts (battles on a question are
    correlated). `length`: model -> mean answer length; `length_bias`: log-odds per unit of the
    normalised length difference. `max_pairs`: k pairs per question from `ranking.sample_pairs`."""
    rng = np.random.default_rng(seed)
    models = list(strength)
    rows = []
    plan = R.sample_pairs(models, list(range(n_questions)), max_pairs, seed=seed) if max_pairs else None
    for q in range(n_questions):
        shift = {m: rng.normal(0, q_sd) if q_sd else 0.0 for m in models}
        lens = {m: max(1.0, rng.normal(length[m], 0.15 * length[m])) for m in models} if length else None
        pairs = (itertools.combinations(models, 2) if plan is None
                 else plan.loc[plan["question_id"] == q, ["model_a", "model_b"]].itertuples(index=False))
        for a, b in pairs:
            orders = [(a, b), (b, a)] if both_orders else [(a, b) if rng.random() < 0.5 else (b, a)]
            for x, y in orders:
                for j in judges:
                    eta = strength[x] + shift[x] - strength[y] - shift[y]
                    la = lb = np.nan
                    if lens:
                        la, lb = lens[x], lens[y]
                        eta += length_bias * (la - lb) / (la + lb)
                    p = 1 / (1 + math.exp(-eta))
                    t = min(tie, 2 * p, 2 * (1 - p))
                    u = rng.random()
                    if u < t:
                        w = "tie"
                    else:
                        w = x if rng.random() < (p - t / 2) / (1 - t) else y
                    rows.append((f"q{q}", x, y, j, w, "", la, lb))
    df = pd.DataFrame(rows, columns=COLS + ["len_a", "len_b"])
    if not length:
        df = df.drop(columns=["len_a", "len_b"])
    return df


def centred(strength):
    v = np.array(list(strength.values())) * ELO
    return pd.Series(v - v.mean() + 1000, index=list(strength))


STRENGTH = {"m0": 0.0, "m1": 0.4, "m2": 0.8, "m3": 1.3}


# -- recovery -------------------------------------------------------------------------------------

def test_fit_recovers_order_and_ratings_of_scripted_judges():
    b = simulate(STRENGTH, 400, judges=("J1", "J2"), seed=1)
    assert (b["winner"] == "tie").mean() > 0.05
    fit = R.fit_bradley_terry(b)
    truth = centred(STRENGTH)
    assert list(fit.sort_values().index) == ["m0", "m1", "m2", "m3"]
    assert fit.mean() == pytest.approx(1000)
    assert np.abs(fit[truth.index] - truth).max() < 12  # 9,600 battles: se ~ 5 points


def test_small_sample_still_orders_well_separated_models():
    b = simulate({"a": 0.0, "b": 1.0, "c": 2.0}, 30, seed=3)
    assert list(R.fit_bradley_terry(b).sort_values().index) == ["a", "b", "c"]


# -- the likelihood equals an independent logistic regression -------------------------------------

def test_pooled_ratings_equal_statsmodels_glm_with_two_half_weight_rows_per_tie():
    b = simulate(STRENGTH, 40, judges=("J1", "J2"), q_sd=0.3, seed=5)
    b.loc[b.sample(frac=0.05, random_state=0).index, "winner"] = None  # some abstentions
    mine = R.rate(b, n_boot=0)
    pooled = mine[mine["judge"] == "pooled"].set_index("model")["rating"]

    # Independent design: all rows with a verdict; a tie -> two rows (y=1, w=.5) and (y=0, w=.5);
    # dummy coding with the *last* model as reference.
    u = b[b["winner"].notna()]
    models = sorted(STRENGTH)
    X, y, w = [], [], []
    for _, r in u.iterrows():
        x = np.zeros(len(models))
        x[models.index(r.model_a)] = 1
        x[models.index(r.model_b)] = -1
        x = x[:-1]
        if r.winner == "tie":
            X += [x, x]; y += [1, 0]; w += [0.5, 0.5]
        else:
            X.append(x); y.append(1.0 if r.winner == r.model_a else 0.0); w.append(1.0)
    res = sm.GLM(np.array(y), np.array(X), family=sm.families.Binomial(),
                 var_weights=np.array(w)).fit(tol=1e-12)
    beta = np.append(res.params, 0.0) * ELO
    ref = pd.Series(beta - beta.mean() + 1000, index=models)
    assert np.abs(pooled[models] - ref).max() < 0.01

    # and a judge's own fit equals the GLM on that judge's rows only (scipy on the log-likelihood)
    j1 = u[u["judge"] == "J1"]
    ia = j1["model_a"].map(models.index).to_numpy()
    ib = j1["model_b"].map(models.index).to_numpy()
    s = np.where(j1["winner"] == j1["model_a"], 1.0, np.where(j1["winner"] == "tie", 0.5, 0.0))

    def nll(theta):
        full = np.append(0.0, theta)
        d = full[ia] - full[ib]
        return -np.sum(s * d - np.logaddexp(0, d))

    th = optimize.minimize(nll, np.zeros(len(models) - 1), method="BFGS", options={"gtol": 1e-10}).x
    th = np.append(0.0, th) * ELO
    got = mine[mine["judge"] == "J1"].set_index("model")["rating"][models]
    assert np.abs(got.to_numpy() - (th - th.mean() + 1000)).max() < 0.01


# -- counting -----------------------------------------------------------------------------------

def _two_model_table():
    return pd.DataFrame([
        ("q1", "A", "B", "J", "A", ""),
        ("q1", "B", "A", "J", "A", ""),   # the same battle, other order: a second row
        ("q2", "A", "B", "J", "tie", ""),
        ("q3", "A", "B", "J", "B", ""),
        ("q4", "A", "B", "J", None, "timeout"),  # no usable verdict
        ("q5", "B", "A", "J", "  ", ""),
    ], columns=COLS)


def test_both_orders_are_two_rows_ties_half_and_empty_winners_excluded_and_counted():
    t = _two_model_table()
    fit = R.fit_bradley_terry(t)
    # A scores 1 + 1 + 0.5 + 0 = 2.5 of 4 usable rows -> the MLE of a 2-model BT is logit(0.625)
    assert fit["A"] - fit["B"] == pytest.approx(ELO * math.log(0.625 / 0.375), abs=1e-6)
    assert fit.mean() == pytest.approx(1000)
    # one order only: 1.5 of 3 -> equal ratings
    one = R.fit_bradley_terry(t.drop(index=1))
    assert one["A"] - one["B"] == pytest.approx(0, abs=1e-6)
    out = R.rate(t, n_boot=20)
    assert set(out["n_battles"]) == {4}
    assert out.attrs["excluded"] == {"J": 2, "pooled": 2}
    counts = R.battle_counts(t).set_index("judge")
    assert counts.loc["pooled"].to_dict() == {"rows": 6, "usable": 4, "ties": 1, "excluded": 2}


def test_unknown_winner_and_reserved_judge_name_are_data_errors():
    t = _two_model_table()
    t.loc[0, "winner"] = "C"
    with pytest.raises(DataError, match="neither"):
        R.fit_bradley_terry(t)
    t = _two_model_table()
    t["judge"] = "pooled"
    with pytest.raises(DataError, match="pooled"):
        R.rate(t, n_boot=0)


# -- scale and output table -----------------------------------------------------------------------

def test_mean_is_1000_without_baseline_and_baseline_is_1000_with_one():
    b = simulate(STRENGTH, 30, judges=("J1", "J2"), seed=7)
    out = R.rate(b, n_boot=50)
    assert list(out.columns) == R.RATING_COLUMNS + ["rank"]
    assert out.groupby("judge").size().to_dict() == {"J1": 4, "J2": 4, "pooled": 4}
    for _, g in out.groupby("judge"):
        assert g["rating"].mean() == pytest.approx(1000)
        assert (g["ci_low"] <= g["rating"]).all() and (g["rating"] <= g["ci_high"]).all()
    base = R.rate(b, n_boot=50, baseline="m1")
    assert "win_rate_vs_baseline" in base.columns
    m1 = base[base["model"] == "m1"]
    assert (m1["rating"] == 1000).all() and (m1["ci_low"] == 1000).all() and (m1["ci_high"] == 1000).all()
    assert (m1["win_rate_vs_baseline"] == 0.5).all()
    # the baseline only shifts the scale: differences unchanged
    p0 = out[out.judge == "pooled"].set_index("model")["rating"]
    p1 = base[base.judge == "pooled"].set_index("model")["rating"]
    assert np.allclose((p0 - p0["m1"] + 1000)[p1.index], p1)
    m3 = base[(base.model == "m3") & (base.judge == "pooled")].iloc[0]
    assert m3.win_rate_vs_baseline == pytest.approx(1 / (1 + 10 ** ((1000 - m3.rating) / 400)))
    assert m3.win_rate_vs_baseline_ci_low < m3.win_rate_vs_baseline < m3.win_rate_vs_baseline_ci_high
    with pytest.raises(DataError, match="baseline"):
        R.rate(b, n_boot=0, baseline="nobody")


def test_bootstrap_is_seeded():
    b = simulate(STRENGTH, 20, seed=2)
    pd.testing.assert_frame_equal(R.rate(b, n_boot=30, seed=4), R.rate(b, n_boot=30, seed=4))
    assert not R.rate(b, n_boot=30, seed=4)["ci_low"].equals(R.rate(b, n_boot=30, seed=5)["ci_low"])


def test_rank_rule_on_a_hand_made_interval_table():
    #            A         B         C        D         E
    lo = np.array([10, 15, 0, 30, 29.5])
    hi = np.array([20, 25, 9, 40, 31])
    # D, E: nothing entirely above.  A: D (30 > 20), E (29.5 > 20).  B: D, E (> 25).
    # C: A, B, D, E all above 9.
    assert R.assign_ranks(lo, hi).tolist() == [3, 3, 5, 1, 1]


# -- judges ---------------------------------------------------------------------------------------

def _ratings_table():
    rows = [
        ("A", "pooled", 1125, 1100, 1150), ("B", "pooled", 925, 900, 950), ("C", "pooled", 950, 920, 990),
        ("A", "J1", 1100, np.nan, np.nan), ("B", "J1", 900, np.nan, np.nan), ("C", "J1", 1000, np.nan, np.nan),
        ("A", "J2", 950, np.nan, np.nan), ("B", "J2", 1050, np.nan, np.nan), ("C", "J2", 1000, np.nan, np.nan),
    ]
    return pd.DataFrame(rows, columns=["model", "judge", "rating", "ci_low", "ci_high"])


def test_kendall_tau_disagreements_and_win_probabilities():
    r = _ratings_table()
    tau = R.kendall_tau_between_judges(r)
    assert len(tau) == 1 and tau.iloc[0][["judge_a", "judge_b"]].tolist() == ["J1", "J2"]
    # J1: A > C > B ; J2: B > C > A -> fully reversed
    assert tau.iloc[0]["tau"] == pytest.approx(-1.0)
    notes = R.judge_disagreements(r)
    # pooled A vs B and A vs C do not overlap; B vs C overlap. J1 and J2 reverse A vs B and A vs C.
    assert len(notes) == 2
    assert notes[0].startswith("judges J1 and J2 disagree on A vs B")
    assert "A vs C" in notes[1]
    m = R.win_probability_matrix(r)
    assert list(m.index) == ["A", "C", "B"]
    assert m.loc["A", "B"] == pytest.approx(1 / (1 + 10 ** (-200 / 400)))
    assert np.allclose(m.to_numpy() + m.to_numpy().T, 1.0)
    assert np.allclose(np.diag(m), 0.5)


def test_per_judge_fits_use_each_judges_battles_alone():
    good = simulate(STRENGTH, 60, judges=("good",), seed=11)
    rev = simulate({k: -v for k, v in STRENGTH.items()}, 60, judges=("contrarian",), seed=12)
    out = R.rate(pd.concat([good, rev]), n_boot=30)
    g = out[out.judge == "good"].set_index("model")["rating"]
    c = out[out.judge == "contrarian"].set_index("model")["rating"]
    assert g.idxmax() == "m3" and c.idxmax() == "m0"
    assert R.kendall_tau_between_judges(out).iloc[0]["tau"] == pytest.approx(-1.0)
    assert (out.loc[out.judge == "pooled", "n_battles"] == 2 * out.loc[out.judge == "good", "n_battles"].iloc[0]).all()


# -- planning -------------------------------------------------------------------------------------

def test_judge_call_count_and_sample_pairs():
    c = R.judge_call_count(100, 5, 3, both_orders=True)
    assert c["all_pairs"] == 10 and c["judge_calls"] == 100 * 10 * 3 * 2 and c["ci_width_factor"] == 1
    k = R.judge_call_count(100, 5, 3, both_orders=False, max_pairs_per_question=4)
    assert k["judge_calls"] == 100 * 4 * 3 and k["ci_width_factor"] == pytest.approx(math.sqrt(10 / 4))
    models = list("abcde")
    s = R.sample_pairs(models, list(range(50)), 4, seed=1)
    assert len(s) == 200 and s.equals(R.sample_pairs(models, list(range(50)), 4, seed=1))
    key = s.apply(lambda r: tuple(sorted((r.model_a, r.model_b))), axis=1)
    assert key.groupby(s["question_id"]).nunique().eq(4).all()  # distinct pairs within a question
    per_pair = key.value_counts()
    assert len(per_pair) == 10 and per_pair.max() - per_pair.min() <= 1  # spread evenly
    both = R.sample_pairs(models, [0], None, both_orders=True)
    assert len(both) == 20


# -- style control --------------------------------------------------------------------------------

def test_style_control_moves_ratings_toward_the_truth_for_a_length_loving_judge():
    # the stronger the model, the shorter its answers; the judge likes long answers
    length = {"m0": 600, "m1": 450, "m2": 300, "m3": 200}
    b = simulate(STRENGTH, 250, seed=21, length=length, length_bias=2.0)
    truth = centred(STRENGTH)
    plain = R.fit_bradley_terry(b)[truth.index]
    styled = R.fit_bradley_terry(b, style=True)
    assert styled.attrs["style_coef"] == pytest.approx(2.0, abs=0.35)
    styled = styled[truth.index]
    err_plain, err_style = np.abs(plain - truth), np.abs(styled - truth)
    assert err_plain.max() > 60  # the length bias compresses/reorders the plain ratings
    assert err_style.max() < 25
    assert (err_style < err_plain).sum() >= 3
    out = R.rate(b, n_boot=30, per_judge=False).set_index("model")
    assert np.allclose(out.loc[truth.index, "style_rating"], styled)
    assert (out["style_ci_low"] <= out["style_rating"]).all() and (out["style_rating"] <= out["style_ci_high"]).all()


# -- coverage -------------------------------------------------------------------------------------

def pseudo_truth(strength, q_sd):
    """The ratings the fit converges to with infinitely many questions: a BT fit to the expected
    scores E[sigmoid(d + e)], e ~ N(0, 2 q_sd^2) (Gauss-Hermite), written independently here."""
    models = list(strength)
    x, wq = np.polynomial.hermite_e.hermegauss(60)
    wq = wq / wq.sum()
    pairs = list(itertools.permutations(range(len(models)), 2))
    beta = np.array([strength[m] for m in models])
    sd = math.sqrt(2) * q_sd
    target = np.array([np.sum(wq / (1 + np.exp(-(beta[i] - beta[j] + sd * x)))) for i, j in pairs])

    def nll(th):
        full = np.append(0.0, th)
        d = np.array([full[i] - full[j] for i, j in pairs])
        return -np.sum(target * d - np.logaddexp(0, d))

    th = np.append(0.0, optimize.minimize(nll, np.zeros(len(models) - 1), method="BFGS",
                                          options={"gtol": 1e-12}).x) * ELO
    return pd.Series(th - th.mean() + 1000, index=models)


def coverage(n_datasets, n_questions, n_boot, *, strength=STRENGTH, q_sd=0.4, seed=0, both_orders=False,
             judges=("J",), max_pairs=None):
    truth = pseudo_truth(strength, q_sd)
    hit_r, hit_d, width = [], [], []
    models = list(strength)
    for k in range(n_datasets):
        b = simulate(strength, n_questions, judges=judges, both_orders=both_orders, q_sd=q_sd, seed=seed + k,
                     max_pairs=max_pairs)
        rated = R.rate(b, n_boot=n_boot, seed=k, per_judge=False, style=False, keep_draws=True)
        out = rated.set_index("model").loc[models]
        hit_r += list((out["ci_low"] <= truth) & (truth <= out["ci_high"]))
        width += list(out["ci_high"] - out["ci_low"])
        # all pairwise differences, percentile intervals from the same bootstrap draws
        draws = rated.attrs["draws"]["pooled"]
        for m1, m2 in itertools.combinations(models, 2):
            lo, hi = np.nanpercentile(draws[m1] - draws[m2], [2.5, 97.5])
            hit_d.append(lo <= truth[m1] - truth[m2] <= hi)
    return float(np.mean(hit_r)), float(np.mean(hit_d)), float(np.mean(width))


def test_rating_intervals_cover_the_truth_on_simulated_strengths():
    cov_r, cov_d, width = coverage(n_datasets=60, n_questions=60, n_boot=200)
    assert cov_r >= 0.9, cov_r
    assert cov_d >= 0.9, cov_d
    assert 20 < width < 200
    print(f"coverage: ratings {cov_r:.3f}, differences {cov_d:.3f}, mean width {width:.1f}")


def test_the_batched_connectivity_check_agrees_with_one_graph_at_a_time():
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from evekit.ranking import _Battles

    rng = np.random.default_rng(7)
    models = [f"m{i}" for i in range(6)]
    pairs = [(a, b) for a in models for b in models if a < b]
    rows = [{"question_id": f"q{i}", "model_a": a, "model_b": b, "s": 1.0} for i, (a, b) in enumerate(pairs)]
    bt = _Battles(pd.DataFrame(rows), style=False)
    # 300 resamples at once: each column a random subset of the pairs that met
    n_pair = (rng.random((bt.n_pairs, 300)) < rng.uniform(0.05, 0.6, 300)).astype(float)
    got = bt.connected(n_pair)
    for col in range(300):
        keep = n_pair[:, col] > 0
        graph = coo_matrix((np.ones(keep.sum()), (bt.pi[keep], bt.pj[keep])), shape=(bt.m, bt.m))
        assert got[col] == (connected_components(graph, directed=False)[0] == 1)
    assert set(got) == {True, False}  # both cases were exercised


# -- clustered questions (cluster_by, issue 32) ------------------------------------------------------


def _clustered_battles(rng, n_clusters, per, beta, sd):
    """Two models, one judge, one order: b beats a with probability sigmoid(beta + u_c), u_c ~ N(0, sd)
    shared by the `per` questions of cluster c (questions from one source document)."""
    u = rng.normal(0, sd, n_clusters)
    p = 1 / (1 + np.exp(-(beta + np.repeat(u, per))))
    b_won = rng.random(n_clusters * per) < p
    qid = [f"q{i}" for i in range(n_clusters * per)]
    df = pd.DataFrame({"question_id": qid, "model_a": "a", "model_b": "b", "judge": "J",
                       "winner": np.where(b_won, "b", "a"), "rationale": ""})
    return df, dict(zip(qid, np.repeat([f"c{c}" for c in range(n_clusters)], per)))


def test_singleton_clusters_give_the_question_bootstrap_exactly():
    b = simulate(STRENGTH, 40, seed=3)
    plain = R.rate(b, n_boot=200, seed=5)
    alone = R.rate(b, n_boot=200, seed=5, clusters={q: q for q in b["question_id"].unique()})
    pd.testing.assert_frame_equal(plain, alone)
    assert alone.attrs["n_clusters"] == 40
    with pytest.raises(DataError, match="no cluster"):
        R.rate(b, n_boot=10, clusters={"q0": "x"})


def test_the_cluster_bootstrap_covers_clustered_questions_where_the_question_bootstrap_does_not():
    # 20 documents of 10 questions; the truth is b's rating over a's at the population's share of
    # b's wins (two models: the Bradley-Terry difference is 400 log10 of the odds of that share).
    beta, sd = 0.4, 1.5
    x, w = np.polynomial.hermite_e.hermegauss(80)
    share = float(np.sum(w / w.sum() / (1 + np.exp(-(beta + sd * x)))))
    truth = ELO * math.log(share / (1 - share))
    rng = np.random.default_rng(0)
    hit = {"questions": [], "clusters": []}
    width = {"questions": [], "clusters": []}
    for k in range(60):
        battles, clusters = _clustered_battles(rng, 20, 10, beta, sd)
        for name, extra in (("questions", {}), ("clusters", {"clusters": clusters})):
            rated = R.rate(battles, n_boot=300, seed=k, per_judge=False, style=False, keep_draws=True, **extra)
            draws = rated.attrs["draws"]["pooled"]
            lo, hi = np.nanpercentile(draws["b"] - draws["a"], [2.5, 97.5])
            hit[name].append(lo <= truth <= hi)
            width[name].append(hi - lo)
    coverage = {k: float(np.mean(v)) for k, v in hit.items()}
    assert coverage["clusters"] >= 0.85 and coverage["questions"] <= 0.85, coverage
    assert np.mean(width["clusters"]) > 1.4 * np.mean(width["questions"])
