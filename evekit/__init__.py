"""evekit: evaluate language models on Earth-Observation knowledge (the EVE suite), notebook-first."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "evaluate", "Results"]


def __getattr__(name: str) -> Any:
    # `evekit.evaluate` / `evekit.Results` (evekit.api) on first use: `import evekit` (which every
    # layer does for __version__) stays light and imports nothing above it.
    if name in ("evaluate", "Results"):
        import importlib

        return getattr(importlib.import_module("evekit.api"), name)
    raise AttributeError(f"module 'evekit' has no attribute {name!r}")
