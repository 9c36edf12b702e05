"""The win-rate numbers exactly as EVE's evalkit defines them, from a saved results.csv.

evekit's own summary combines the two orders of a question (an order-dependent verdict is a tie,
as MT-Bench does) and averages over judges; EVE's win-rate script counts every judge decision on
its own. Where the two differ, both are reported, under their own names: these are EVE's.

EVE's definitions (eve-esa/evalkit, metrics/win_rate), per judge over its decisions (one
decision = one row of results.csv, so with `both_orders` each order counts once):

- `total` counts every decision, failed ones included (EVE's ERROR / INVALID are decisions);
  `win_rate` = wins / total, `tie_rate` = ties / total;
- `alpaca_win_rate` = (wins + ties / 2) / (wins_a + wins_b + ties): failed decisions left out;
- `aggregate/<m>_win_rate` pools the judges: sum of wins / sum of totals;
  `aggregate/<m>_alpaca_win_rate` = (sum of wins + sum of ties / 2) / sum of totals;
- `aggregate/avg_<m>_win_rate` and `avg_<m>_alpaca_win_rate`: the mean over judges;
- `aggregate/win_rate_difference` = avg win rate of model_b - avg win rate of model_a (EVE's sign);
- `judge_agreement/unanimous_rate`: decisions rows (question, order) where every judge decided and
  all decided alike, over all rows (rows with a failed decision count in the denominator);
- `position_bias/<judge>/<a>_win_rate_at_A` / `_at_B`: model_a's wins when shown first / second,
  over that judge's decisions there; `difference` = |at_A - at_B|.

Model names in the keys are EVE's sanitised names (`eve_name`). Identical answers are a tie
without a judge call in evekit (EVE asks the judge); they count as that judge's tie here.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

__all__ = ["eve_name", "per_judge", "eve_definitions", "eve_view", "eve_summary_table", "eve_metrics_table"]


def eve_name(name: str) -> str:
    """A model name as EVE puts it in metric keys and file names."""
    return str(name).lower().replace(" ", "_").replace(".", "").replace("-", "_").replace("/", "_")


def _failed(results: pd.DataFrame) -> pd.Series:
    return results["failed"].astype(str).str.strip().str.lower().isin(["true", "1"]) | results["winner_model"].isna()


def per_judge(results: pd.DataFrame, judges: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per judge: model_a_wins, model_b_wins, ties, errors, total and EVE's rates (fractions)."""
    out: dict[str, dict[str, float]] = {}
    failed = _failed(results)
    for judge in judges:
        mine = results["judge"] == judge
        won = results.loc[mine & ~failed, "winner_model"]
        a, b, t = int((won == "model_a").sum()), int((won == "model_b").sum()), int((won == "tie").sum())
        total = int(mine.sum())
        if total == 0:
            continue
        decided = a + b + t
        out[judge] = {"model_a_wins": a, "model_b_wins": b, "ties": t, "errors": int((mine & failed).sum()),
                      "total": total, "model_a_win_rate": a / total, "model_b_win_rate": b / total,
                      "tie_rate": t / total,
                      "model_a_alpaca_win_rate": (a + t / 2) / decided if decided else np.nan,
                      "model_b_alpaca_win_rate": (b + t / 2) / decided if decided else np.nan}
    return out


def _shown_first(results: pd.DataFrame) -> pd.Series:
    return results["a_shown_first"].astype(str).str.strip().str.lower().isin(["true", "1"])


def eve_definitions(results: pd.DataFrame, name_a: str, name_b: str, judges: Sequence[str]) -> dict[str, float | None]:
    """EVE's win-rate metrics under the names EVE logs them (see the module's text)."""
    a, b = eve_name(name_a), eve_name(name_b)
    stats = per_judge(results, judges)
    m: dict[str, Any] = {}
    for judge, s in stats.items():
        m[f"win_rate/{judge}/{a}"] = s["model_a_win_rate"]
        m[f"win_rate/{judge}/{b}"] = s["model_b_win_rate"]
        m[f"win_rate/{judge}/tie"] = s["tie_rate"]
        m[f"win_rate/{judge}/{a}_wins"] = s["model_a_wins"]
        m[f"win_rate/{judge}/{b}_wins"] = s["model_b_wins"]
        m[f"win_rate/{judge}/ties"] = s["ties"]
        m[f"alpaca_win_rate/{judge}/{a}"] = s["model_a_alpaca_win_rate"]
        m[f"alpaca_win_rate/{judge}/{b}"] = s["model_b_alpaca_win_rate"]
    if stats:
        wins_a = sum(s["model_a_wins"] for s in stats.values())
        wins_b = sum(s["model_b_wins"] for s in stats.values())
        ties = sum(s["ties"] for s in stats.values())
        total = sum(s["total"] for s in stats.values())
        avg_a = float(np.mean([s["model_a_win_rate"] for s in stats.values()]))
        avg_b = float(np.mean([s["model_b_win_rate"] for s in stats.values()]))
        alp_a = [s["model_a_alpaca_win_rate"] for s in stats.values() if not np.isnan(s["model_a_alpaca_win_rate"])]
        alp_b = [s["model_b_alpaca_win_rate"] for s in stats.values() if not np.isnan(s["model_b_alpaca_win_rate"])]
        m.update({
            f"aggregate/{a}_wins": wins_a, f"aggregate/{b}_wins": wins_b, "aggregate/ties": ties,
            f"aggregate/{a}_win_rate": wins_a / total, f"aggregate/{b}_win_rate": wins_b / total,
            f"aggregate/avg_{a}_win_rate": avg_a, f"aggregate/avg_{b}_win_rate": avg_b,
            "aggregate/win_rate_difference": avg_b - avg_a,
            f"aggregate/{a}_alpaca_win_rate": (wins_a + ties / 2) / total,
            f"aggregate/{b}_alpaca_win_rate": (wins_b + ties / 2) / total,
            f"aggregate/avg_{a}_alpaca_win_rate": float(np.mean(alp_a)) if alp_a else None,
            f"aggregate/avg_{b}_alpaca_win_rate": float(np.mean(alp_b)) if alp_b else None,
            "aggregate/alpaca_win_rate_difference": (float(np.mean(alp_b)) - float(np.mean(alp_a)))
            if alp_a and alp_b else None,
        })
    # Judge agreement: one row per (question, order), as EVE has one row per question.
    failed = _failed(results)
    decided = results.assign(_d=results["winner_model"].where(~failed))
    rows = decided.pivot_table(index=["qid", "order"], columns="judge", values="_d", aggfunc="first")
    rows = rows.reindex(columns=list(judges))
    n_rows = int(results.groupby(["qid", "order"]).ngroups)
    full = rows.loc[rows.notna().all(axis=1).to_numpy()] if len(rows) else rows
    unanimous = int((full.nunique(axis=1) == 1).sum()) if len(full) else 0
    votes_a = (full == "model_a").sum(axis=1) if len(full) else pd.Series(dtype=int)
    votes_b = (full == "model_b").sum(axis=1) if len(full) else pd.Series(dtype=int)
    m["judge_agreement/unanimous_decisions"] = unanimous
    m["judge_agreement/unanimous_rate"] = unanimous / n_rows if n_rows else None
    m[f"judge_agreement/majority_{a}"] = int((votes_a > votes_b).sum())
    m[f"judge_agreement/majority_{b}"] = int((votes_b > votes_a).sum())
    m["judge_agreement/split_decisions"] = int((votes_a == votes_b).sum())
    # Position bias per judge: model_a's win rate when shown first vs second.
    first = _shown_first(results)
    diffs = []
    for judge in stats:
        mine = results["judge"] == judge
        at_a, at_b = results[mine & first], results[mine & ~first]
        if len(at_a) and len(at_b):
            wa = float((at_a["winner_model"] == "model_a").sum()) / len(at_a)
            wb = float((at_b["winner_model"] == "model_a").sum()) / len(at_b)
            m[f"position_bias/{judge}/{a}_win_rate_at_A"] = wa
            m[f"position_bias/{judge}/{a}_win_rate_at_B"] = wb
            m[f"position_bias/{judge}/difference"] = abs(wa - wb)
            diffs.append(abs(wa - wb))
    m["aggregate/avg_position_bias_difference"] = float(np.mean(diffs)) if diffs else None
    return {k: (None if v is None or (isinstance(v, float) and np.isnan(v)) else
                int(v) if isinstance(v, (int, np.integer)) else float(v)) for k, v in m.items()}


def eve_summary_table(results: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """EVE's summary_<a>_vs_<b>.csv: one row per judge, its counts and rates in percent (EVE's scale)."""
    stats = per_judge(results, judges)
    table = pd.DataFrame({j: {"model_a_wins": s["model_a_wins"], "model_b_wins": s["model_b_wins"], "ties": s["ties"],
                              "errors": s["errors"], "total": s["total"],
                              "model_a_win_rate": 100 * s["model_a_win_rate"],
                              "model_b_win_rate": 100 * s["model_b_win_rate"], "tie_rate": 100 * s["tie_rate"]}
                          for j, s in stats.items()}).T
    counts = ["model_a_wins", "model_b_wins", "ties", "errors", "total"]
    if len(table):
        table[counts] = table[counts].astype(int)
    return table


def eve_metrics_table(results: pd.DataFrame, name_a: str, name_b: str, judges: Sequence[str], task: str) -> pd.DataFrame:
    """EVE's metrics_<a>_vs_<b>.csv: model_b's rows against model_a (model_name, task, subtask,
    opponent, metric, value). EVE's accuracy rows need a per-answer correctness evekit's pairwise
    judge does not give, so they are absent."""
    d = eve_definitions(results, name_a, name_b, judges)
    a, b = eve_name(name_a), eve_name(name_b)
    stats = per_judge(results, judges)
    values: list[tuple[str, Any]] = [
        ("avg_win_rate", d.get(f"aggregate/avg_{b}_win_rate")),
        ("total_wins", d.get(f"aggregate/{b}_wins")),
        ("total_ties", d.get("aggregate/ties")),
        ("total_evaluations", sum(s["total"] for s in stats.values())),
        ("win_rate_difference_vs_opponent", d.get("aggregate/win_rate_difference")),
    ]
    wins_a, wins_b, ties = (d.get(f"aggregate/{a}_wins") or 0), (d.get(f"aggregate/{b}_wins") or 0), (d.get("aggregate/ties") or 0)
    values.append(("alpaca_win_rate", (wins_b + ties / 2) / (wins_a + wins_b + ties) if wins_a + wins_b + ties else None))
    values.append(("avg_alpaca_win_rate", d.get(f"aggregate/avg_{b}_alpaca_win_rate")))
    for judge, s in stats.items():
        values.append((f"win_rate_judge_{judge}", s["model_b_win_rate"]))
        if not np.isnan(s["model_b_alpaca_win_rate"]):
            values.append((f"alpaca_win_rate_judge_{judge}", s["model_b_alpaca_win_rate"]))
    n_rows = int(results.groupby(["qid", "order"]).ngroups)
    values.append(("unanimous_decisions_rate", d.get("judge_agreement/unanimous_rate")))
    values.append(("majority_wins_rate", d[f"judge_agreement/majority_{b}"] / n_rows if n_rows else None))
    if d.get("aggregate/avg_position_bias_difference") is not None:
        values.append(("avg_position_bias_difference", d["aggregate/avg_position_bias_difference"]))
    return pd.DataFrame([{"model_name": name_b, "task": task, "subtask": "win_rate", "opponent": name_a,
                          "metric": k, "value": v} for k, v in values])


def eve_view(results: pd.DataFrame, name_a: str, name_b: str, judges: Sequence[str]) -> pd.DataFrame:
    """For reading beside evekit's summary: per judge, pooled and averaged over judges, the numbers
    by EVE's definitions (every decision counted; failed ones in `total`), with EVE's agreement and
    its win_rate_difference (model_b - model_a)."""
    stats = per_judge(results, judges)
    d = eve_definitions(results, name_a, name_b, judges)
    a, b = eve_name(name_a), eve_name(name_b)
    rows = [{"by": judge, f"{name_a} wins": s["model_a_wins"], f"{name_b} wins": s["model_b_wins"], "ties": s["ties"],
             "failed": s["errors"], "decisions": s["total"], f"win_rate {name_a}": s["model_a_win_rate"],
             f"win_rate {name_b}": s["model_b_win_rate"], f"alpaca_win_rate {name_a}": s["model_a_alpaca_win_rate"],
             f"alpaca_win_rate {name_b}": s["model_b_alpaca_win_rate"]} for judge, s in stats.items()]
    if stats:
        rows.append({"by": "all judges pooled (aggregate/)", f"{name_a} wins": d[f"aggregate/{a}_wins"],
                     f"{name_b} wins": d[f"aggregate/{b}_wins"], "ties": d["aggregate/ties"],
                     "failed": sum(s["errors"] for s in stats.values()),
                     "decisions": sum(s["total"] for s in stats.values()),
                     f"win_rate {name_a}": d[f"aggregate/{a}_win_rate"], f"win_rate {name_b}": d[f"aggregate/{b}_win_rate"],
                     f"alpaca_win_rate {name_a}": d[f"aggregate/{a}_alpaca_win_rate"],
                     f"alpaca_win_rate {name_b}": d[f"aggregate/{b}_alpaca_win_rate"]})
        rows.append({"by": "average over judges (aggregate/avg_)",
                     f"win_rate {name_a}": d[f"aggregate/avg_{a}_win_rate"],
                     f"win_rate {name_b}": d[f"aggregate/avg_{b}_win_rate"],
                     f"alpaca_win_rate {name_a}": d[f"aggregate/avg_{a}_alpaca_win_rate"],
                     f"alpaca_win_rate {name_b}": d[f"aggregate/avg_{b}_alpaca_win_rate"],
                     "win_rate_difference (b - a)": d.get("aggregate/win_rate_difference"),
                     "unanimous_rate": d.get("judge_agreement/unanimous_rate")})
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows).set_index("by").round(3)
    counts = [f"{name_a} wins", f"{name_b} wins", "ties", "failed", "decisions"]
    table[counts] = table[counts].astype("Int64")  # counts as counts; the averaged row has none
    return table
