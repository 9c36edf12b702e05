"""The win-rate kind: LLM judges compare two models' answers question by question."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from evekit.cards import position_bias_flag, win_rate_card
from evekit.report import format_metric, json_safe
from evekit.runs.kind import RunKind
from evekit.runs.records import RunRecord
from evekit.runs.win_rate.params import WinRateParams

__all__ = ["KIND"]


def headline(record: RunRecord) -> str:
    """EVE's average across judges: each model's win rate and the alpaca win rate of the first,
    each with its interval over questions."""
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
               plan_note="not planned: its judge calls depend on the answer files of other runs")
