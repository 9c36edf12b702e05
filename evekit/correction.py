"""Judge-corrected scores: a judged pass rate (or win rate) made unbiased by a few expert labels.

A judge's pass rate is biased by its errors (a judge that passes 20% of wrong answers inflates
it) and its interval covers only the sampling of items. Two corrections:

* `ppi_mean` / `ppi_win_rate`: prediction-powered inference (PPI++, Angelopoulos et al. 2023/24)
  from N judged items plus a uniformly random subset of n of them that an expert also labelled.
  The point estimate is `ppi_py.ppi_mean_pointestimate` (power-tuned: lambda chosen from the
  data, 0 = labels only, 1 = plain PPI); the interval is `ppi_py.ppi_mean_ci` at that lambda on
  the labelled items plus one pseudo-pair of disagreements (a label-1/verdict-0 item and a
  label-0/verdict-1 item). That pair is the Bonett-Price (2012) adjustment of the paired
  difference when lambda = 1 and "add one success and one failure" when lambda = 0; without it
  the interval under-covers at small n (n=30, p=0.9, a 0.95/0.95 judge: 0.81 instead of 0.95,
  because the 30 labels often show no disagreement at all). `adjust=False` gives ppi_py's own
  interval. When the tuned lambda is 0 (the verdicts carry no information on the labels), the
  estimate is the labels' mean and its interval theirs (Wilson, or BCa). Beside it: the labels-only estimate (Wilson, or BCa for win rates), the judge-only
  one, the width ratio PPI / labels-only and the effective number of labels it amounts to, and
  how many more labels would halve the interval. benchmarks/bench_ppi_coverage.py has the table.
* `rogan_gladen`: no task labels, only a judge validation's sensitivity and specificity. The
  corrected rate (q + sp - 1) / (se + sp - 1), clipped to [0, 1], with an interval from
  simulated draws of all three rates (each from its Jeffreys posterior, Beta(k + 1/2, n - k + 1/2),
  a smoothed parametric bootstrap over the validation labels and the task items that does not
  collapse when the validation showed no error). Valid only if the judge errs on this task as
  it did on the validation set: the result says so (`assumption`).

Planning: `labels_needed` (labels for a target half-width given the judge's disagreement rate).

Every function returns evekit's metric shape {value, ci_low, ci_high, n, method, ...}.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

import numpy as np

from evekit.stats import graded_interval, proportion_interval
from evekit.stats import tidy as _tidy

__all__ = ["PAIR_SCORES", "TRANSPORT_ASSUMPTION", "ppi_mean", "ppi_win_rate", "pair_scores", "corrected_score",
           "rogan_gladen", "labels_needed", "disagreement_rate"]

# A pairwise label or verdict as model A's score: A wins 1, B wins 0, a tie is half a win.
PAIR_SCORES = {"a": 1.0, "b": 0.0, "tie": 0.5}
TRANSPORT_ASSUMPTION = ("assumes the judge errs on this task's items as it did on the validation set "
                        "(same sensitivity and specificity); if not, the interval does not cover")
# The pseudo-pair of the small-sample adjustment: (label, verdict) = (1, 0) and (0, 1).
_PSEUDO_LABELS = np.array([1.0, 0.0])
_PSEUDO_VERDICTS = np.array([0.0, 1.0])


def _ppi_py():
    """ppi_py, imported on first use (it pulls numba and scikit-learn) and without the
    `warnings.simplefilter("ignore")` it runs at import, which would silence every warning of
    the process."""
    with warnings.catch_warnings():
        import ppi_py
    return ppi_py


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


def _values(x: Any, allowed: tuple[float, ...], what: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float).reshape(-1)
    bad = ~np.isnan(arr) & ~np.isin(arr, allowed)
    if bad.any():
        raise ValueError(f"{what} must be one of {', '.join(f'{v:g}' for v in allowed)} (or NaN = no verdict); "
                         f"got {arr[bad][0]!r} at position {int(np.flatnonzero(bad)[0])}")
    return arr


def _lambda(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> float:
    """PPI++'s power-tuning parameter for a mean, as `ppi_py.ppi_mean_ci` chooses it (a test
    checks the two agree): cov(Y, Yhat) / ((1 + n/N) var(Yhat over all items)), clipped to
    [0, 1]; 0 when the verdicts do not vary (the judge then carries no information)."""
    n, big_n = len(y), len(yhat_u)
    var = float(np.var(np.concatenate([yhat, yhat_u]), ddof=1))
    if big_n == 0 or not var > 0:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def _ppi_variance(m: np.ndarray, big_n: np.ndarray, var_y: float, cov: float, var_f: float) -> np.ndarray:
    """Asymptotic variance of the power-tuned PPI mean with m labels and big_n judged items
    without a label (arrays), for the moments var(Y), cov(Y, Yhat), var(Yhat)."""
    m, big_n = np.asarray(m, dtype=float), np.asarray(big_n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where((big_n > 0) & (var_f > 0), np.clip(cov / ((1 + m / big_n) * var_f), 0, 1), 0.0)
        imputed = np.where(big_n > 0, lam ** 2 * var_f / big_n, 0.0)
    return np.maximum(var_y - 2 * lam * cov + lam ** 2 * var_f, 0.0) / m + imputed


def _labels_to_halve(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> int | None:
    """More labels (drawn from the unlabelled items) that would halve the PPI interval's width,
    by its asymptotic variance at the moments seen; None if labelling every item would not."""
    n, total = len(y), len(y) + len(yhat_u)
    var_y = float(np.var(y))
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var_f = float(np.var(np.concatenate([yhat, yhat_u])))
    m = np.arange(n, total + 1)
    var = _ppi_variance(m, total - m, var_y, cov, var_f)
    if not var[0] > 0:
        return None
    ok = np.flatnonzero(var <= var[0] / 4 + 1e-15)
    return int(m[ok[0]] - n) if len(ok) else None


def _mean_core(y: Any, yhat: Any, yhat_u: Any, *, allowed: tuple[float, ...], level: float, adjust: bool,
               labels_only: Any, judge_only: Any, name: str) -> dict[str, Any]:
    y = _values(y, allowed, "labels")
    yhat = _values(yhat, allowed, "verdicts on the labelled items")
    yhat_u = _values(yhat_u, allowed, "verdicts on the other items")
    if len(y) != len(yhat):
        raise ValueError(f"{len(y)} labels but {len(yhat)} verdicts on the labelled items")
    if np.isnan(y).any():
        raise ValueError("a label is missing (NaN): every labelled item needs its label")
    abstained = np.isnan(yhat)
    y, yhat, yhat_u = y[~abstained], yhat[~abstained], yhat_u[~np.isnan(yhat_u)]
    n, big_n = len(y), len(yhat_u)
    extra: dict[str, Any] = {"n_labels": n, "n_judged": n + big_n, "n_labelled_abstained": int(abstained.sum()),
                             "level": level}
    extra["labels_only"] = labels_only(y)
    extra["judge_only"] = judge_only(np.concatenate([yhat, yhat_u]))
    if n == 0:
        return _tidy({"value": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": n + big_n,
                      "method": f"{name}: no labelled item with a verdict", **extra})
    ppi = _ppi_py()
    lam = _lambda(y, yhat, yhat_u)
    if big_n == 0:  # every judged item is labelled: the labels alone are the estimate
        lam = 0.0
    alpha = 1 - level
    unl = yhat_u if big_n else yhat[:1]  # ppi_py needs one unlabelled value; lambda 0 ignores it
    value = float(np.asarray(ppi.ppi_mean_pointestimate(y, yhat, unl, lam=lam)).reshape(-1)[0])
    raw_lo, raw_hi = (float(np.asarray(v).reshape(-1)[0]) for v in ppi.ppi_mean_ci(y, yhat, unl, alpha=alpha, lam=lam))
    if lam == 0:  # the estimate is the labels' mean: its interval is theirs (Wilson, or BCa)
        lo, hi = extra["labels_only"]["ci_low"], extra["labels_only"]["ci_high"]
        method = f"{name} (ppi_py, power-tuned; lambda 0: the labels alone)"
    elif adjust:
        lo, hi = (float(np.asarray(v).reshape(-1)[0]) for v in
                  ppi.ppi_mean_ci(np.concatenate([y, _PSEUDO_LABELS]), np.concatenate([yhat, _PSEUDO_VERDICTS]),
                                  unl, alpha=alpha, lam=lam))
        method = f"{name} (ppi_py, power-tuned, one pseudo-pair of disagreements)"
    else:
        lo, hi = raw_lo, raw_hi
        method = f"{name} (ppi_py, power-tuned)"
    # The estimand is a rate: clip to [0, 1]; the interval always holds the point estimate.
    lo, hi = max(0.0, min(lo, value)), min(1.0, max(hi, value))
    width, lo_width = hi - lo, extra["labels_only"]["ci_high"] - extra["labels_only"]["ci_low"]
    ratio = width / lo_width if lo_width > 0 else math.nan
    extra.update({"lambda": lam, "ppi_py_ci_low": raw_lo, "ppi_py_ci_high": raw_hi, "width_ratio": ratio,
                  "effective_labels": n / ratio ** 2 if ratio > 0 else math.nan,
                  "labels_to_halve": _labels_to_halve(*((np.concatenate([y, _PSEUDO_LABELS]),
                                                         np.concatenate([yhat, _PSEUDO_VERDICTS]))
                                                        if adjust else (y, yhat)), yhat_u)})
    for key in ("labels_only", "judge_only"):
        extra[key] = _tidy(extra[key])
    return _tidy({"value": value, "ci_low": lo, "ci_high": hi, "n": n + big_n, "method": method, **extra})


def ppi_mean(labels: Any, verdicts_labelled: Any, verdicts_unlabelled: Any, *, level: float = 0.95,
             adjust: bool = True) -> dict[str, Any]:
    """The pass rate corrected by expert labels (PPI++), with its interval; see the module docstring.

    `labels`: 1/0 per labelled item; `verdicts_labelled`: the judge's 1/0 verdict on those items
    (the panel's vote or one judge's; NaN = no verdict: the item is left out, counted in
    `n_labelled_abstained`); `verdicts_unlabelled`: its verdicts on the run's other items (NaN
    dropped). The labelled items must be a uniformly random subset of the judged ones
    (`evekit.labels.sample_sheet`). `n` = judged items behind the estimate, `n_labels` the
    labels among them; `labels_only` (Wilson) and `judge_only` (Wilson over every verdict) are
    metric dicts; `width_ratio` = PPI width / labels-only width, `effective_labels` = n_labels /
    width_ratio**2 (the labels alone would need that many for the same width), `labels_to_halve`
    (None: not reachable by labelling the rest), `lambda` (0: the judge adds nothing).
    """
    return _mean_core(labels, verdicts_labelled, verdicts_unlabelled, allowed=(0.0, 1.0), level=level,
                      adjust=adjust, labels_only=lambda y: proportion_interval(y, level=level),
                      judge_only=lambda v: proportion_interval(v, level=level), name="ppi++ mean")


def pair_scores(values: Any) -> np.ndarray:
    """Pairwise labels or verdicts as model A's score: "A"/"a" 1, "B"/"b" 0, "tie" 0.5 (numbers
    1/0/0.5 pass through; None/NaN/"" = no verdict -> NaN)."""
    out = []
    for v in np.asarray(values, dtype=object).reshape(-1):
        if v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip()):
            out.append(math.nan)
        elif isinstance(v, str):
            key = v.strip().lower()
            if key not in PAIR_SCORES:
                raise ValueError(f"a pairwise label is A, B or tie, got {v!r}")
            out.append(PAIR_SCORES[key])
        else:
            out.append(float(v))
    return np.asarray(out, dtype=float)


def ppi_win_rate(labels: Any, verdicts_labelled: Any, verdicts_unlabelled: Any, *, level: float = 0.95,
                 adjust: bool = True, seed: int = 0) -> dict[str, Any]:
    """Model A's win rate over B (a tie half a win) corrected by expert labels (PPI++).

    As `ppi_mean`, for pairwise labels and verdicts: "A"/"B"/"tie" (or "a"/"b"/"tie", or
    1/0/0.5); the labels-only and judge-only intervals are BCa (`evekit.stats.graded_interval`).
    """
    boot = lambda v: graded_interval(v, level=level, seed=seed)  # noqa: E731
    return _mean_core(pair_scores(labels), pair_scores(verdicts_labelled), pair_scores(verdicts_unlabelled),
                      allowed=(0.0, 0.5, 1.0), level=level, adjust=adjust, labels_only=boot, judge_only=boot,
                      name="ppi++ win rate")


def corrected_score(verdicts: Mapping[Any, Any], labels: Mapping[Any, Any], *, pairwise: bool = False,
                    level: float = 0.95, adjust: bool = True) -> dict[str, Any]:
    """`ppi_mean` (or `ppi_win_rate`) from the run's verdicts and a sheet's labels, both keyed by
    item id (dicts or pandas Series): the labelled items are those of `labels`, the others the
    rest of `verdicts`. A labelled id the run has no verdict for is a ValueError naming it."""
    verdicts, labels = dict(verdicts), dict(labels)
    unknown = [k for k in labels if k not in verdicts]
    if unknown:
        raise ValueError(f"{len(unknown)} labelled item(s) not among the judged items, e.g. id {unknown[0]!r}")
    ids = list(labels)
    rest = [v for k, v in verdicts.items() if k not in labels]
    fn = ppi_win_rate if pairwise else ppi_mean
    return fn([labels[k] for k in ids], [verdicts[k] for k in ids], rest, level=level, adjust=adjust)


# ---------------------------------------------------------------------------------------------
# Without task labels: Rogan-Gladen from a judge validation
# ---------------------------------------------------------------------------------------------

def _rg(q: Any, se: Any, sp: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        den = np.asarray(se) + np.asarray(sp) - 1
        return np.where(den > 0, np.clip((np.asarray(q) + np.asarray(sp) - 1) / np.where(den > 0, den, 1), 0, 1),
                        np.nan)


def rogan_gladen(verdicts: Any, *, sensitivity: tuple[int, int], specificity: tuple[int, int],
                 level: float = 0.95, n_draws: int = 4000, seed: int = 0) -> dict[str, Any]:
    """The judge's pass rate corrected for its validated error rates (Rogan-Gladen), with an
    interval carrying the uncertainty of all three rates; clipped to [0, 1].

    `verdicts`: the judge's 1/0 verdict per task item (NaN dropped); `sensitivity`: (gold-PASS
    validation items it passed, gold-PASS items with a verdict); `specificity`: (gold-FAIL items
    it failed, gold-FAIL items with a verdict). Interval: percentiles of the corrected rate over
    `n_draws` draws of each rate from its Jeffreys posterior (see the module docstring); draws
    where sensitivity + specificity <= 1 (a judge no better than chance) have no correction
    and are left out (`n_defined` counts the rest). NaN when the validated rates themselves
    are no better than chance. Valid only under `assumption` (TRANSPORT_ASSUMPTION).
    """
    v = _values(verdicts, (0.0, 1.0), "verdicts")
    v = v[~np.isnan(v)]
    (k_se, n_se), (k_sp, n_sp) = sensitivity, specificity
    for what, (k, m) in (("sensitivity", sensitivity), ("specificity", specificity)):
        if not (0 <= k <= m and m > 0):
            raise ValueError(f"{what} must be (count, total) with 0 <= count <= total and total > 0, got {(k, m)}")
    n, k_q = len(v), int(v.sum())
    se, sp = k_se / n_se, k_sp / n_sp
    base = {"n": n, "method": "rogan_gladen (Jeffreys draws of the pass rate, sensitivity and specificity)",
            "assumption": TRANSPORT_ASSUMPTION, "judge_only": proportion_interval(v, level=level), "sensitivity": se,
            "specificity": sp, "n_validation": n_se + n_sp, "level": level}
    if n == 0 or not se + sp > 1:
        why = "no judged item" if n == 0 else "the validated judge is no better than chance (sensitivity + specificity <= 1)"
        return _tidy({"value": math.nan, "ci_low": math.nan, "ci_high": math.nan, **base, "n_defined": 0,
                      "note": why})
    rng = np.random.default_rng(seed)
    draws = _rg(rng.beta(k_q + 0.5, n - k_q + 0.5, n_draws), rng.beta(k_se + 0.5, n_se - k_se + 0.5, n_draws),
                rng.beta(k_sp + 0.5, n_sp - k_sp + 0.5, n_draws))
    defined = draws[~np.isnan(draws)]
    a = (1 - level) / 2
    lo, hi = np.quantile(defined, [a, 1 - a])
    value = float(_rg(k_q / n, se, sp))
    return _tidy({"value": value, "ci_low": float(min(lo, value)), "ci_high": float(max(hi, value)), **base,
                  "n_defined": int(len(defined))})


# ---------------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------------

def disagreement_rate(labels: Any, verdicts: Any, *, level: float = 0.95) -> dict[str, Any]:
    """Share of labelled items where the judge's verdict differs from the label (Wilson), the
    input of `labels_needed`: from a pilot sheet, or 1 - accuracy of a judge validation."""
    y, v = np.asarray(labels, dtype=float), np.asarray(verdicts, dtype=float)
    keep = ~(np.isnan(y) | np.isnan(v))
    return proportion_interval((y[keep] != v[keep]).astype(float), level=level)


def labels_needed(half_width: float, disagreement: float, *, n_items: int | None = None,
                  pass_rate: float = 0.5, level: float = 0.95) -> dict[str, Any]:
    """Expert labels for a PPI++ interval of half-width `half_width`, given the judge's rate of
    disagreement with the labels.

    Asymptotic: with binary labels and verdicts, the disagreement rate d and the pass rate p
    (taken to be the judge's too) fix the moments (P(label 1, verdict 1) = p - d/2), hence the
    variance of the power-tuned estimate with m labels and n_items - m items judged only; the
    smallest m whose z * sqrt(variance) <= half_width is `value` (None if even labelling every
    item would not do). `pass_rate` 0.5 (the default) is the worst case. `labels_only`: what the
    labels alone would need. The small-sample adjustment of `ppi_mean` adds a little width at
    small n, and d is itself estimated: pass its Wilson upper bound (`disagreement_rate`) to be
    safe.
    """
    if not 0 < half_width < 1:
        raise ValueError(f"half_width must lie in (0, 1), got {half_width!r}")
    if not 0 <= pass_rate <= 1 or not 0 <= disagreement <= 2 * min(pass_rate, 1 - pass_rate):
        raise ValueError(f"pass_rate must lie in [0, 1] and disagreement in [0, {2 * min(pass_rate, 1 - pass_rate):g}] "
                         f"(a judge with the same pass rate cannot disagree more), got {pass_rate!r}, {disagreement!r}")
    target = (half_width / _z(level)) ** 2
    var = pass_rate * (1 - pass_rate)
    cov = pass_rate - disagreement / 2 - pass_rate ** 2
    classical = max(1, math.ceil(var / target))  # the labels alone: p(1-p)/m <= target
    top = classical if n_items is None else min(classical, int(n_items))
    m = np.arange(1, top + 1, dtype=float)
    rest = np.full_like(m, math.inf) if n_items is None else int(n_items) - m
    ok = np.flatnonzero(_ppi_variance(m, rest, var, cov, var) <= target * (1 + 1e-12))
    value = int(m[ok[0]]) if len(ok) else None
    return _tidy({"value": value, "ci_low": None, "ci_high": None, "n": None if n_items is None else int(n_items),
                  "method": "ppi++ planning (asymptotic variance at the optimal lambda)",
                  "half_width": half_width, "disagreement": disagreement, "pass_rate": pass_rate, "level": level,
                  "labels_only": classical})
