"""The task notebooks: one model on one task (`TaskRun`), its parameters (`TaskParams`) and files."""
from evekit.runs.task.kind import KIND
from evekit.runs.task.params import TaskParams
from evekit.runs.task.run import TaskRun

__all__ = ["KIND", "TaskRun", "TaskParams"]
