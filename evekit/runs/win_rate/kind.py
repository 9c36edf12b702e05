"""The win-rate kind: LLM judges compare two models' answers question by question."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from evekit.cards import position_bias_flag, win_rate_card
from evekit.report import format_metric, json_safe
from evekit.runs.kind import RunKind
from evekit.runs.records import RunRecord
from evekit.runs.win_rate.params import WinRateParams
from evekit.tracking import Tracked, numbers, read_json, read_table

__all__ = ["KIND"]


def headline(record: RunRecord) -> str:
    """The judges' average (evekit's, per question): each model's win rate and the alpaca win rate
    of the first, each with its interval over questions."""
    try:
        df = pd.read_csv(record.dir / "summary.csv")
        row = df.iloc[-1]

        def rate(name: str) -> str:
            return format_metric(json_safe({"value": row[name], "ci_low": row.get(f"{name}_ci_low"),
                                            "ci_high": row.get(f"{name}_ci_high")}))
        return (f"({row['model_a']} {rate('win_rate_a')}, {row['model_b']} {rate('win_rate_b')}, "
                f"ties {rate('tie_rate')}; alpaca win rate of {row['model_a']} {rate('alpaca_win_rate_a')}; "
                f"n = {int(df['n'].max())} questions)")  # the average row has no n of its own
    except Exception:  # a half-written or foreign summary must not break the index
        return ""


def card(record: RunRecord) -> str:
    """The majority vote's conclusion in words, with a warning when the judges prefer a position."""
    try:
        df = pd.read_csv(record.dir / "summary.csv").set_index("judge")
        m = df.loc["majority"]
        bias = position_bias_flag(m.get("position_bias"), m.get("position_bias_ci_low"),
                                  m.get("position_bias_ci_high"), m.get("position_votes"))
        return win_rate_card(str(m["model_a"]), str(m["model_b"]), m.to_dict(), bias=bias)
    except Exception:  # a half-written or foreign summary must not break the index or the report
        return ""


RATIONALE_COLUMNS = ["comparison", "judge", "question", "shown_first", "judge_said", "winner", "rationale", "error"]


def _category(name: str) -> str:
    """Which of EVE's `wandb.log` switches a win-rate number belongs to."""
    if "position" in name:
        return "position_bias"
    if "judge_agreement" in name:
        return "judge_agreement"
    if "win_rate" in name or "tie_rate" in name or "sign_test" in name or name.endswith(("_wins", "/ties")):
        return "win_rates"
    return "metrics"


def track(record: RunRecord, sample_count: int) -> Tracked:
    """A win rate for a tracker: EVE's numbers by EVE's definitions under EVE's logged names
    (`win_rate/<judge>/<model>`, `alpaca_win_rate/...`, `aggregate/...`, `judge_agreement/...`,
    `position_bias/<judge>/...`), evekit's own figures under `evekit/...` (per question, orders
    combined, `evekit/majority/...`), each rate of summary.csv with its interval
    (`summary/<judge>/<rate>`, `_ci_low`, `_ci_high`, `_n`), the counts and usage; tables: the rates
    (summary.csv), the raw decisions (results.csv) and `sample_count` rationales."""
    data = read_json(record.dir / "metrics.json")
    block = data.get("metrics") or {}
    if isinstance(data.get("eve_definitions"), dict) and not any(str(k).startswith("evekit/") for k in block):
        # a metrics.json of an earlier evekit held its own figures under EVE's names: log EVE's alone
        block = data["eve_definitions"]
    metrics: dict[str, dict[str, float]] = {}
    for name, value in block.items():
        if value is not None:
            metrics.setdefault(_category(name), {})[name] = float(value)
    summary = read_table(record.dir / "summary.csv")
    tables: dict[str, tuple[str, pd.DataFrame]] = {}
    if summary is not None:
        tables["win_rates"] = ("win_rates", summary)
        for _, row in summary.iterrows():
            judge = str(row["judge"])
            for col in summary.columns:
                if not col.endswith("_ci_low"):
                    continue
                rate = col[: -len("_ci_low")]
                group = metrics.setdefault(_category(rate), {})
                for suffix, key in (("", rate), ("_ci_low", f"{rate}_ci_low"), ("_ci_high", f"{rate}_ci_high"),
                                    ("_n", "n")):
                    if key in row and pd.notna(row[key]) and not isinstance(row[key], str):
                        group[f"summary/{judge}/{rate}{suffix}"] = float(row[key])
    counts = {k: data[k] for k in ("n", "n_failed", "n_failed_decisions", "n_unmatched", "n_failed_generation") if k in data}
    metrics["counts"] = numbers("", counts)
    metrics["usage"] = numbers("usage", data.get("usage"))
    results = read_table(record.dir / "results.csv")
    if results is not None:
        tables["raw_results"] = ("samples", results)
        decided = results[~results["identical"].astype(str).str.lower().eq("true")] if "identical" in results else results
        keep = [c for c in RATIONALE_COLUMNS if c in decided.columns]
        tables["sample_rationales"] = ("sample_rationales", decided[keep].head(sample_count).reset_index(drop=True))
    return Tracked(folder=record.dir, params=dict(data.get("params") or {}), metrics=metrics, tables=tables,
                   tags={"evekit.task": str(data.get("task")), "evekit.model_a": str(data.get("model_a")),
                         "evekit.model_b": str(data.get("model_b"))})


def _reads(p: Any) -> list[str]:
    """The answer files of both sides, and the judges' validation."""
    files = [m.get("file") for m in [*p.model_a, *p.model_b] if isinstance(m, dict)]
    return [f for f in [p.judge_validation, *files] if isinstance(f, str) and f]


def _subject(record: RunRecord, params: Mapping[str, Any]) -> str | None:
    if record.details.get("model_a"):
        return f"{record.details['model_a']} vs {record.details.get('model_b')}"
    names = [m.get("name") for side in ("model_a", "model_b") for m in params.get(side) or [] if isinstance(m, dict)]
    return " vs ".join(str(n) for n in names if n) or None


KIND = RunKind(name="win_rate", title="win rate", phase=2, notebooks=("win_rate",), params=WinRateParams,
               runner="evekit.runs.win_rate.run:WinRateRun", reads=_reads, headline=headline, card=card, subject=_subject,
               plan_note="not planned: its judge calls depend on the answer files of other runs", track=track)
