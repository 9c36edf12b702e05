"""Judge-corrected scores (evekit.correction): equal to ppi_py's own functions, sensitive to the
labels, covering by simulation (PPI++, Rogan-Gladen held and broken), and planning that keeps
its promise. The simulators here also make the full table of benchmarks/bench_ppi_coverage.py."""
from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from evekit import correction as C

ppi_py = pytest.importorskip("ppi_py")


def judged(p: float, se: float, sp: float, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(true labels, a judge's verdicts) of `size` items: pass rate p, the judge's sensitivity se
    and specificity sp."""
    y = (rng.random(size) < p).astype(float)
    u = rng.random(size)
    return y, np.where(y == 1, u < se, u >= sp).astype(float)


def ppi_coverage(p: float, se: float, sp: float, n: int, *, big_n: int = 1000, datasets: int = 500,
                 seed: int = 0) -> dict[str, float]:
    """A run of big_n judged items, n of them (uniformly drawn) labelled: coverage of the true p
    by `ppi_mean`'s interval, by ppi_py's own (unadjusted) interval and by the judge-only Wilson
    interval, and the mean width ratio PPI / labels-only."""
    rng = np.random.default_rng(seed)
    hit = {"ppi": 0, "ppi_py": 0, "judge_only": 0, "labels_only": 0}
    ratios, widths = [], []
    for _ in range(datasets):
        y, v = judged(p, se, sp, big_n, rng)
        r = C.ppi_mean(y[:n], v[:n], v[n:])  # the rows are in random order: the first n are a uniform draw
        hit["ppi"] += r["ci_low"] <= p <= r["ci_high"]
        hit["ppi_py"] += r["ppi_py_ci_low"] <= p <= r["ppi_py_ci_high"]
        hit["judge_only"] += r["judge_only"]["ci_low"] <= p <= r["judge_only"]["ci_high"]
        hit["labels_only"] += r["labels_only"]["ci_low"] <= p <= r["labels_only"]["ci_high"]
        ratios.append(r["width_ratio"])
        widths.append(r["ci_high"] - r["ci_low"])
    out = {k: v / datasets for k, v in hit.items()}
    out.update(width_ratio=float(np.nanmean(ratios)), width=float(np.mean(widths)))
    return out


def rg_coverage(p: float, se: float, sp: float, *, task_se: float | None = None, task_sp: float | None = None,
                n_validation: int = 100, big_n: int = 1000, datasets: int = 500, seed: int = 0) -> dict[str, float]:
    """Coverage of `rogan_gladen`'s interval (among the datasets where it is defined; `undefined`:
    the share where the validation showed a judge no better than chance): a validation set of n_validation items (half gold
    PASS, half gold FAIL) judged with (se, sp), a task of big_n items with pass rate p judged with
    (task_se, task_sp): the same when the transport assumption holds."""
    rng = np.random.default_rng(seed)
    task_se, task_sp = se if task_se is None else task_se, sp if task_sp is None else task_sp
    half = n_validation // 2
    hit, widths, undefined = 0, [], 0
    for _ in range(datasets):
        _, v = judged(p, task_se, task_sp, big_n, rng)
        r = C.rogan_gladen(v, sensitivity=(int(rng.binomial(half, se)), half),
                           specificity=(int(rng.binomial(half, sp)), half), n_draws=2000,
                           seed=int(rng.integers(2 ** 31)))
        if math.isnan(r["value"]):  # the validation showed a judge no better than chance: no correction
            undefined += 1
            continue
        hit += r["ci_low"] <= p <= r["ci_high"]
        widths.append(r["ci_high"] - r["ci_low"])
    defined = datasets - undefined
    return {"coverage": hit / defined if defined else math.nan, "undefined": undefined / datasets,
            "width": float(np.mean(widths)) if widths else math.nan}


# --------------------------------------------------------------------------- equality with ppi_py
@pytest.mark.parametrize("seed, n, big_n, se, sp", [(0, 30, 500, 0.9, 0.8), (1, 100, 1000, 0.95, 0.95),
                                                     (2, 300, 700, 0.7, 0.6), (3, 12, 40, 0.9, 0.9)])
def test_ppi_mean_is_ppi_py_on_random_inputs(seed, n, big_n, se, sp):
    rng = np.random.default_rng(seed)
    y, v = judged(rng.uniform(0.2, 0.8), se, sp, n + big_n, rng)
    Y, Yhat, Yu = y[:n], v[:n], v[n:]
    plain = C.ppi_mean(Y, Yhat, Yu, adjust=False)
    assert plain["lambda"] > 0
    # power-tuned point estimate and interval: ppi_py with lam=None (its own lambda)
    assert plain["value"] == pytest.approx(float(ppi_py.ppi_mean_pointestimate(Y, Yhat, Yu)[0]), abs=1e-10)
    lo, hi = ppi_py.ppi_mean_ci(Y, Yhat, Yu, alpha=0.05)
    assert (plain["ci_low"], plain["ci_high"]) == pytest.approx((max(0, lo[0]), min(1, hi[0])), abs=1e-10)
    assert (plain["ppi_py_ci_low"], plain["ppi_py_ci_high"]) == pytest.approx((lo[0], hi[0]), abs=1e-10)
    # the lambda reported is the one ppi_py chose
    lo_l, hi_l = ppi_py.ppi_mean_ci(Y, Yhat, Yu, alpha=0.05, lam=plain["lambda"])
    assert (lo_l[0], hi_l[0]) == pytest.approx((lo[0], hi[0]), abs=1e-10)
    # the adjusted interval: ppi_py's at that lambda with the pseudo-pair (1, 0), (0, 1) added
    adj = C.ppi_mean(Y, Yhat, Yu)
    assert adj["value"] == plain["value"]
    lo_a, hi_a = ppi_py.ppi_mean_ci(np.r_[Y, 1, 0], np.r_[Yhat, 0, 1], Yu, alpha=0.05, lam=plain["lambda"])
    assert (adj["ci_low"], adj["ci_high"]) == pytest.approx((max(0, min(lo_a[0], adj["value"])),
                                                              min(1, max(hi_a[0], adj["value"]))), abs=1e-10)
    # labels only: Wilson (statsmodels); judge only: Wilson over every verdict
    wl = proportion_confint(int(Y.sum()), n, alpha=0.05, method="wilson")
    assert (adj["labels_only"]["ci_low"], adj["labels_only"]["ci_high"]) == pytest.approx(wl, abs=1e-10)
    wj = proportion_confint(int(v.sum()), n + big_n, alpha=0.05, method="wilson")
    assert (adj["judge_only"]["ci_low"], adj["judge_only"]["ci_high"]) == pytest.approx(wj, abs=1e-10)
    assert adj["n"] == n + big_n and adj["n_labels"] == n
    width = adj["ci_high"] - adj["ci_low"]
    assert adj["width_ratio"] == pytest.approx(width / (wl[1] - wl[0]))
    assert adj["effective_labels"] == pytest.approx(n / adj["width_ratio"] ** 2)


def test_win_rate_is_ppi_py_on_scores():
    rng = np.random.default_rng(5)
    letters = np.array(["A", "B", "tie"])
    truth = rng.choice(3, 400, p=[0.5, 0.3, 0.2])
    noisy = np.where(rng.random(400) < 0.75, truth, rng.choice(3, 400))
    y, v = C.pair_scores(letters[truth]), C.pair_scores(letters[noisy])
    r = C.ppi_win_rate(letters[truth[:60]], [s.lower() for s in letters[noisy[:60]]], letters[noisy[60:]],
                       adjust=False)
    assert r["value"] == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y[:60], v[:60], v[60:])[0]))
    lo, hi = ppi_py.ppi_mean_ci(y[:60], v[:60], v[60:], alpha=0.05)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo[0], hi[0]))
    assert r["labels_only"]["method"] == "bca" and r["labels_only"]["value"] == pytest.approx(y[:60].mean())


def test_a_wrong_label_column_changes_the_result():
    rng = np.random.default_rng(7)
    y, v = judged(0.4, 0.9, 0.8, 1100, rng)
    right = C.ppi_mean(y[:100], v[:100], v[100:])
    for wrong in (1 - y[:100], v[:100], rng.permutation(y[:100])):  # flipped, the verdicts, shuffled rows
        other = C.ppi_mean(wrong, v[:100], v[100:])
        assert other["value"] != pytest.approx(right["value"], abs=1e-3)
    # the verdicts taken as labels: PPI returns the judge's own rate
    assert C.ppi_mean(v[:100], v[:100], v[100:])["value"] == pytest.approx(v.mean(), abs=0.02)


def test_corrected_score_splits_by_id_and_names_an_unknown_one():
    rng = np.random.default_rng(3)
    y, v = judged(0.5, 0.9, 0.9, 200, rng)
    ids = [f"q{i}" for i in range(200)]
    labelled = rng.choice(200, 40, replace=False)
    got = C.corrected_score(dict(zip(ids, v)), {ids[i]: y[i] for i in labelled})
    rest = np.setdiff1d(np.arange(200), labelled)
    assert got == C.ppi_mean(y[labelled], v[labelled], v[rest])
    with pytest.raises(ValueError, match="'nope'"):
        C.corrected_score(dict(zip(ids, v)), {"nope": 1.0})


def test_abstentions_degenerate_judges_and_bad_values():
    y = np.array([1, 0, 1, 1, 0, 1.0])
    r = C.ppi_mean(y, [1, np.nan, 1, 1, 0, 1], [1, 0, np.nan, 1])
    assert r["n_labels"] == 5 and r["n_labelled_abstained"] == 1 and r["n"] == 8
    const = C.ppi_mean(y, np.ones(6), np.ones(50))  # a judge that passes everything says nothing
    assert const["lambda"] == 0 and const["value"] == pytest.approx(y.mean())
    assert (const["ci_low"], const["ci_high"]) == (const["labels_only"]["ci_low"], const["labels_only"]["ci_high"])
    every = C.ppi_mean(y, y, [])  # every judged item labelled
    assert every["value"] == pytest.approx(y.mean()) and every["n"] == 6
    assert math.isnan(C.ppi_mean([], [], [1, 0])["value"])
    with pytest.raises(ValueError, match="labels must be one of 0, 1"):
        C.ppi_mean([1, 2], [1, 0], [1])
    with pytest.raises(ValueError, match="A, B or tie"):
        C.ppi_win_rate(["A", "C"], ["A", "B"], ["A"])


# --------------------------------------------------------------------------- coverage (seeded, < 60 s)
@pytest.mark.parametrize("p, se, sp, n", [(0.9, 0.95, 0.95, 30), (0.9, 0.6, 0.6, 30), (0.6, 0.9, 0.7, 30),
                                          (0.3, 0.9, 0.7, 100)])
def test_ppi_interval_covers_where_the_judge_interval_does_not(p, se, sp, n):
    got = ppi_coverage(p, se, sp, n, datasets=1000, seed=11)
    assert got["ppi"] >= 0.93
    if (se, sp) != (0.95, 0.95):
        assert got["judge_only"] < 0.5  # the judge's bias is far outside its own interval
    if (p, se, sp, n) == (0.9, 0.95, 0.95, 30):
        assert got["ppi_py"] < 0.88  # why the pseudo-pair: plain PPI++ under-covers at n = 30
        assert got["width_ratio"] < 0.95  # and a good judge still narrows the interval


def test_pairwise_ppi_covers():
    rng = np.random.default_rng(4)
    letters = np.array(["A", "B", "tie"])
    probs = np.array([0.55, 0.3, 0.15])
    truth = float(probs @ [1.0, 0.0, 0.5])
    hit = 0
    for _ in range(200):
        t = rng.choice(3, 600, p=probs)
        v = np.where(rng.random(600) < 0.7, t, np.where(rng.random(600) < 0.8, 0, t))  # biased towards A
        r = C.ppi_win_rate(letters[t[:40]], letters[v[:40]], letters[v[40:]], seed=1)
        hit += r["ci_low"] <= truth <= r["ci_high"]
    assert hit / 200 >= 0.93


def test_rogan_gladen_covers_when_the_validation_transports_and_not_when_it_does_not():
    held = rg_coverage(0.9, 0.95, 0.95, datasets=300, seed=2)
    broken = rg_coverage(0.9, 0.95, 0.95, task_se=0.85, task_sp=0.85, datasets=300, seed=2)
    assert held["coverage"] >= 0.93
    assert broken["coverage"] < 0.7


def test_rogan_gladen_point_interval_and_refusals():
    v = np.r_[np.ones(700), np.zeros(300)]
    r = C.rogan_gladen(v, sensitivity=(90, 100), specificity=(80, 100))
    assert r["value"] == pytest.approx((0.7 + 0.8 - 1) / (0.9 + 0.8 - 1))
    assert r["ci_low"] < r["value"] < r["ci_high"] and "validation set" in r["assumption"]
    assert r["judge_only"]["value"] == 0.7 and r["n"] == 1000 and r["n_validation"] == 200
    perfect = C.rogan_gladen(v, sensitivity=(50, 50), specificity=(50, 50))  # never zero-width
    assert perfect["value"] == pytest.approx(0.7) and perfect["ci_high"] - perfect["ci_low"] > 0.03
    clipped = C.rogan_gladen(np.ones(100), sensitivity=(40, 50), specificity=(40, 50))
    assert clipped["value"] == 1.0 and clipped["ci_high"] <= 1.0
    chance = C.rogan_gladen(v, sensitivity=(25, 50), specificity=(20, 50))
    assert math.isnan(chance["value"]) and "chance" in chance["note"]
    with pytest.raises(ValueError, match="sensitivity"):
        C.rogan_gladen(v, sensitivity=(60, 50), specificity=(40, 50))


# --------------------------------------------------------------------------- planning
def test_labels_needed_gives_the_promised_half_width():
    rng = np.random.default_rng(9)
    plan = C.labels_needed(0.03, 0.1, n_items=5000)  # a judge with se = sp = 0.9 at p = 0.5
    n = plan["value"]
    assert 0 < n < plan["labels_only"]
    half = []
    for _ in range(200):
        y, v = judged(0.5, 0.9, 0.9, 5000, rng)
        r = C.ppi_mean(y[:n], v[:n], v[n:])
        half.append((r["ci_high"] - r["ci_low"]) / 2)
    assert 0.9 * 0.03 <= np.mean(half) <= 1.03 * 0.03


def test_labels_needed_edges():
    z = 1.959963984540054
    assert C.labels_needed(0.05, 0.5)["value"] == C.labels_needed(0.05, 0.5)["labels_only"] == math.ceil(0.25 / (0.05 / z) ** 2)
    assert C.labels_needed(0.03, 0.0)["value"] == 1  # a perfect judge and endless items
    assert C.labels_needed(0.03, 0.05, n_items=1000)["value"] is None  # 1,000 verdicts alone are too few
    assert C.labels_needed(0.1, 0.2, n_items=1000)["value"] < C.labels_needed(0.1, 0.4, n_items=1000)["value"]
    with pytest.raises(ValueError, match="half_width"):
        C.labels_needed(0.0, 0.1)
    d = C.disagreement_rate([1, 0, 1, 1], [1, 1, 1, np.nan])
    assert d["value"] == pytest.approx(1 / 3) and d["n"] == 3


def test_labels_to_halve():
    rng = np.random.default_rng(1)
    y, v = judged(0.5, 0.9, 0.9, 5000, rng)
    r = C.ppi_mean(y[:100], v[:100], v[100:])
    more = r["labels_to_halve"]
    assert 250 <= more <= 400  # about 3n: the imputed term is small at N = 5,000
    r2 = C.ppi_mean(y[:100 + more], v[:100 + more], v[100 + more:])
    assert (r2["ci_high"] - r2["ci_low"]) == pytest.approx((r["ci_high"] - r["ci_low"]) / 2, rel=0.15)


def test_importing_ppi_py_leaves_the_warning_filters_alone():
    """ppi_py runs warnings.simplefilter("ignore") at import; evekit undoes it (a fresh process:
    this module imported ppi_py already)."""
    import subprocess
    import sys

    catch_all = "any(f[0] == 'ignore' and f[2] is Warning and f[1] is None and f[3] is None for f in warnings.filters)"
    code = ("import warnings; import evekit.correction as C; C.ppi_mean([1, 0, 1], [1, 0, 0], [1, 0]); "
            f"assert not {catch_all}; import ppi_py, importlib; importlib.reload(ppi_py.ppi); assert {catch_all}")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)  # the second assert: the check can fail
