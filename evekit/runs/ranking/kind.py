"""The ranking kind: N models' answers, pairwise battles, Bradley–Terry ratings."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from evekit.cards import Flag, degenerate_judge_flag, flags_text, position_bias_flag, ranks_text
from evekit.runs.kind import RunKind
from evekit.runs.ranking.params import RankingParams
from evekit.runs.records import RunRecord
from evekit.tracking import Tracked, numbers, read_json, read_table

__all__ = ["KIND"]


def headline(record: RunRecord) -> str:
    """The pooled ranking: '(1. m1 1178 [1154, 1205]; 2= m2 ...; 2= m3 ...)'."""
    try:
        df = pd.read_csv(record.dir / "ratings.csv")
        pooled = df[df["judge"] == "pooled"].sort_values(["rank", "rating"], ascending=[True, False])
        shared = pooled["rank"].duplicated(keep=False)  # a shared rank prints as Arena prints it: "1="
        parts = [f"{int(r['rank'])}{'=' if tie else '.'} {r['model']} {r['rating']:.0f}"
                 + (f" [{r['ci_low']:.0f}, {r['ci_high']:.0f}]" if pd.notna(r["ci_low"]) else "")
                 for (_, r), tie in zip(pooled.iterrows(), shared)]
        return f"(pooled Bradley–Terry ratings: {'; '.join(parts)})" if parts else ""
    except Exception:  # a half-written or foreign table must not break the index
        return ""


def position_flag(battles: pd.DataFrame) -> Flag | None:
    """The judges' preference for the answer shown first across the battles (share of decisive
    verdicts, 'A' of 'A'/'B', averaged over judges; a 95% interval resampling questions, as the win
    rate's), as a flag when the interval excludes one half."""
    from evekit.runs.win_rate.analysis import question_interval

    said = battles.get("judge_said")
    if said is None or not len(battles):
        return None
    decisive = battles[said.isin(["A", "B"]) & (battles.get("method", pd.Series("", index=battles.index))
                                                .astype(str) != "identical")]
    if decisive.empty:
        return None
    first = (decisive["judge_said"] == "A").astype(float)
    num = first.groupby([decisive["question_id"], decisive["judge"]]).sum().unstack(fill_value=0.0)
    den = first.groupby([decisive["question_id"], decisive["judge"]]).count().unstack(fill_value=0.0)
    res = question_interval(num.to_numpy(float), den.to_numpy(float))
    return position_bias_flag(res.get("value"), res.get("ci_low"), res.get("ci_high"), len(decisive),
                              carried="the ratings")


def card(record: RunRecord) -> str:
    """The pooled ranks as Arena prints them (ties shown as ties), a mark on a judge that tells
    the models apart not at all, and a warning when the judges prefer the answer shown first (or
    second) beyond what the interval allows."""
    try:
        df = pd.read_csv(record.dir / "ratings.csv")
        pooled = df[df["judge"] == "pooled"].sort_values(["rank", "rating"], ascending=[True, False])
        if pooled.empty:
            return ""
        text = f"Ranks (pooled judges; a rank is 1 + the models clearly better, so models not told apart share one): {ranks_text(pooled.to_dict('records'))}."
        flags = [f for judge, g in df[df["judge"] != "pooled"].groupby("judge")
                 if (f := degenerate_judge_flag(str(judge), g["rating"])) is not None]
        if (record.dir / "battles.csv").is_file():
            bias = position_flag(pd.read_csv(record.dir / "battles.csv", keep_default_na=False, na_values=[""]))
            flags += [bias] if bias is not None else []
        return text + (f" {flags_text(flags)}" if flags else "")
    except Exception:  # a half-written or foreign table must not break the index or the report
        return ""


def track(record: RunRecord, sample_count: int) -> Tracked:
    """A ranking for a tracker: each model's rating with its interval (`<task>/rating/<model>` pooled,
    `<task>/rating/<judge>/<model>` per judge, `_ci_low`, `_ci_high`, `_n` battles) and rank, the counts
    and usage; tables: the ratings, the battles and `sample_count` rationales."""
    data = read_json(record.dir / "results.json")
    task = str(data.get("task") or record.details.get("task"))
    ratings = read_table(record.dir / "ratings.csv")
    metrics: dict[str, dict[str, float]] = {"metrics": {}}
    tables: dict[str, tuple[str, pd.DataFrame]] = {}
    if ratings is not None:
        tables["ratings"] = ("tables", ratings)
        for _, r in ratings.iterrows():
            base = f"{task}/rating/{r['model']}" if r["judge"] == "pooled" else f"{task}/rating/{r['judge']}/{r['model']}"
            for suffix, key in (("", "rating"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high"), ("_n", "n_battles"),
                                ("_rank", "rank")):
                if key in r and pd.notna(r[key]):
                    metrics["metrics"][base + suffix] = float(r[key])
    metrics["counts"] = numbers(task, {k: data[k] for k in ("n_questions", "n_battles", "n_failed") if k in data})
    metrics["usage"] = numbers(f"{task}/usage", data.get("usage") if isinstance(data.get("usage"), dict) else {})
    battles = read_table(record.dir / "battles.csv")
    if battles is not None:
        tables["battles"] = ("samples", battles)
        decided = battles[battles["method"].astype(str) != "identical"] if "method" in battles else battles
        keep = [c for c in ("question_id", "judge", "model_a", "model_b", "winner", "rationale", "error")
                if c in decided.columns]
        tables["sample_rationales"] = ("sample_rationales", decided[keep].head(sample_count).reset_index(drop=True))
    return Tracked(folder=record.dir, params=dict(data.get("params") or {}), metrics=metrics, tables=tables,
                   tags={"evekit.task": task})


def _reads(p: Any) -> list[str]:
    files = [m.get("file") for m in p.models if isinstance(m, dict)]
    return [f for f in [p.judge_validation, *files] if isinstance(f, str) and f]


def _subject(record: RunRecord, params: Mapping[str, Any]) -> str | None:
    models = record.details.get("models") or [m.get("name") for m in params.get("models") or []
                                              if isinstance(m, dict)]
    return ", ".join(str(m) for m in models if m) or None


KIND = RunKind(name="ranking", title="ranking", phase=2, notebooks=("ranking",), params=RankingParams,
               runner="evekit.runs.ranking.run:RankingRun", reads=_reads, headline=headline, card=card, subject=_subject,
               plan_note="not planned: its judge calls depend on the answer files of other runs", track=track)
