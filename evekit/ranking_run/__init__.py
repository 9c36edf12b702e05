"""Moved: the ranking runner is `evekit.runs.ranking` (this name keeps working)."""
from evekit.runs.ranking import *  # noqa: F401,F403
from evekit.runs.ranking import RankingRun  # noqa: F401
