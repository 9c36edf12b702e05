"""Every error evekit raises on purpose, under one base class.

A notebook or script can catch `EvekitError` to tell "evekit refused this input, and says why"
from a bug. Each message names what is wrong (file, row, column, parameter, endpoint) and what to
do about it. The subclasses keep the built-in base they always had (`ValueError` for bad input,
`RuntimeError` for the environment), so existing `except ValueError` code still works.

docs/ARCHITECTURE.md lists them with the rest of the layout.
"""
from __future__ import annotations

import difflib
from typing import Iterable

__all__ = [
    "EvekitError",
    "DataError",
    "RowError",
    "TaskFileError",
    "ParameterError",
    "EndpointError",
    "CacheMiss",
    "CacheError",
    "ServerError",
    "BatchFileError",
    "OutputError",
    "RunLockedError",
    "unknown_names",
]


class EvekitError(Exception):
    """Base of every error evekit raises deliberately; the message says what to do."""


class DataError(EvekitError, ValueError):
    """A dataset that cannot be used as given; the message names file, row and column."""


class RowError(EvekitError, ValueError):
    """One unusable value in one row (raised by a task's `prepare`, collected by the loader,
    which turns it into a `DataError` naming the file and row)."""

    def __init__(self, column: str, message: str):
        super().__init__(message)
        self.column = column
        self.message = message


class TaskFileError(EvekitError, ValueError):
    """A custom task file that cannot be used; the message names the file and the key."""


class ParameterError(EvekitError, ValueError):
    """A notebook parameter has the wrong name, type or value; the message names it."""


class EndpointError(EvekitError, RuntimeError):
    """A configuration error that would make every call fail (wrong key, unknown model or
    path, nothing listening). The message is one line and never contains the key."""


class CacheMiss(EvekitError, RuntimeError):
    """`offline=True` and some requests are not in the cache: run online once, or import
    the recorded calls."""


class CacheError(EvekitError, RuntimeError):
    """The cache file cannot be used (corrupt, not a database, unreadable); the message names
    it and says how to start afresh."""


class ServerError(EvekitError, RuntimeError):
    """The embedded server could not be started; the message says why and what to do."""


class BatchFileError(EvekitError, ValueError):
    """A Batch output file that cannot be imported; the message names the file, the line and the field."""


class OutputError(EvekitError, OSError):
    """An output file could not be written (a full disk, above all); the message names the file and
    says what was kept."""


class RunLockedError(EvekitError, RuntimeError):
    """Another `evekit run` is writing the same run folder; the message names the folder and its pid."""


def unknown_names(given: Iterable[str], known: Iterable[str], what: str = "parameter") -> str | None:
    """A message naming every name of `given` that is not `known`, each with a did-you-mean, or
    None when all are known. One wording for parameters, judge keys and task-file keys."""
    known = sorted(set(known))
    parts = []
    for name in given:
        if name in known:
            continue
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if not parts:
        return None
    return (f"unknown {what}{'s' if len(parts) > 1 else ''} {', '.join(parts)}; "
            f"valid: {', '.join(known)}")
