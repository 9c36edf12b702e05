"""Judge validation: judges measured against expert-labelled answers (`ValidationRun`; the statistics are
`evekit.judges.validation`).

Names are imported on first use (`evekit.lazy`): the batch runner reads `KIND` without the runner."""
from evekit.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "kind": ("KIND",), "params": ("DEFAULT_LABELS", "ValidationConfig", "ValidationParams"),
    "run": ("ValidationRun",)})
