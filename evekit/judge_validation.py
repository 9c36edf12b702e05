"""Moved: judge validation is `evekit.runs.judge_validation` (this name keeps working)."""
from evekit.runs.judge_validation import *  # noqa: F401,F403
from evekit.runs.judge_validation import ValidationRun  # noqa: F401
