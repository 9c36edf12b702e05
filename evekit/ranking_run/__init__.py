"""Ranking many models on one task: a pairwise judge panel compares their answers question by
question, and Bradley–Terry ratings (`evekit.ranking`) turn the battles into a ranking with
intervals, per judge and pooled.

The notebook drives a `RankingRun` (see `evekit.ranking_run.run`). One module per concern:

- `config`: parameters (`RankingConfig`; the ranking notebook's parameters cell is written from it).
- `battles`: matching N answer files, choosing pairs per question, the judges' decisions as battles.
- `views`: tables, notes, plots and the saved files.
"""
from evekit.ranking_run.battles import BATTLE_COLUMNS, Matched, call_plan, judge_battles, match_models, plan_pairs
from evekit.ranking_run.config import TASKS, RankingConfig
from evekit.ranking_run.run import RankingRun

__all__ = ["RankingRun", "RankingConfig", "TASKS", "BATTLE_COLUMNS", "Matched", "match_models", "plan_pairs",
           "call_plan", "judge_battles"]
