"""Ranking many models on one task: a pairwise judge panel compares their answers question by
question, and Bradley–Terry ratings (`evekit.ranking`) turn the battles into a ranking with
intervals, per judge and pooled.

The notebook drives a `RankingRun` (see `evekit.runs.ranking.run`). One module per concern:

- `params`: parameters (`RankingParams`; the notebook's parameters cell is written from it); `kind`: its registry entry.
- `battles`: matching N answer files, choosing pairs per question, the judges' decisions as battles.
- `views`: tables, notes, plots and the saved files.
"""
from evekit.runs.ranking.battles import BATTLE_COLUMNS, Matched, call_plan, judge_battles, match_models, plan_pairs
from evekit.runs.ranking.kind import KIND
from evekit.runs.ranking.params import TASKS, RankingConfig, RankingParams
from evekit.runs.ranking.run import RankingRun

__all__ = ["KIND", "RankingRun", "RankingParams", "RankingConfig", "TASKS", "BATTLE_COLUMNS", "Matched", "match_models", "plan_pairs",
           "call_plan", "judge_battles"]
