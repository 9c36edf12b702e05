"""Moved: the win rate is `evekit.runs.win_rate` (this name keeps working)."""
from evekit.runs.win_rate import *  # noqa: F401,F403
from evekit.runs.win_rate import WinRateRun  # noqa: F401
