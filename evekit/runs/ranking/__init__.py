"""Ranking many models on one task: a pairwise judge panel compares their answers question by
question, and Bradley–Terry ratings (`evekit.ranking`) turn the battles into a ranking with
intervals, per judge and pooled.

The notebook drives a `RankingRun` (see `evekit.runs.ranking.run`). One module per concern:

- `params`: parameters (`RankingParams`; the notebook's parameters cell is written from it); `kind`: its registry entry.
- `battles`: matching N answer files, choosing pairs per question, the judges' decisions as battles.
- `views`: tables, notes, plots and the saved files.

Names are imported on first use (`evekit.lazy`): the batch runner reads `KIND` without the runner.
"""
from evekit.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "battles": ("BATTLE_COLUMNS", "Matched", "call_plan", "judge_battles", "match_models", "plan_pairs"),
    "kind": ("KIND",), "params": ("TASKS", "RankingConfig", "RankingParams"), "run": ("RankingRun",)})
