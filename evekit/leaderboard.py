"""Moved: the summary's tables are `evekit.runs.summary.board` (this name keeps working)."""
from evekit.runs.summary.board import *  # noqa: F401,F403
