"""Moved: the task runner is `evekit.runs.task` (this name keeps working)."""
from evekit.runs.task.run import *  # noqa: F401,F403
from evekit.runs.task.run import TaskRun  # noqa: F401
