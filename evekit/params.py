"""Moved: the task notebooks' parameters are `evekit.runs.task.params.TaskParams` (`RunConfig` keeps working)."""
from evekit.paths import resolve_path  # noqa: F401
from evekit.runs.task.params import TaskParams as RunConfig  # noqa: F401
from evekit.errors import ParameterError  # noqa: F401
