"""The task notebooks: one model on one task (`TaskRun`), its parameters (`TaskParams`) and files.

Names are imported on first use (`evekit.lazy`): the batch runner reads `KIND` without the runner."""
from evekit.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {"kind": ("KIND",), "params": ("TaskParams",),
                                                      "run": ("TaskRun",)})
