"""Judge validation: judges measured against expert-labelled answers (`ValidationRun`; the statistics are
`evekit.judges.validation`)."""
from evekit.runs.judge_validation.kind import KIND
from evekit.runs.judge_validation.params import DEFAULT_LABELS, ValidationConfig, ValidationParams
from evekit.runs.judge_validation.run import ValidationRun

__all__ = ["KIND", "ValidationRun", "ValidationParams", "ValidationConfig", "DEFAULT_LABELS"]
