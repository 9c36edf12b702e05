"""Package namespaces whose names are imported when first asked for (PEP 562).

`evekit.runs.task` and the other notebook kinds export their runner (`TaskRun`, ...) beside their
registry entry (`KIND`): the batch runner reads the entries of every kind, and importing the runners
with them would load matplotlib, seaborn and scipy into a process that only checks parameter files
(about 1.5 s of `evekit run`'s start). Each package names where each of its names lives; a name is
imported on first use and kept.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping, Sequence

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, Sequence[str]]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """(`__getattr__`, `__dir__`, `__all__`) for the package `package`, whose names live in the
    submodules `homes` maps to them ({"run": ("TaskRun",), ...})."""
    where = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__, sorted(where)
