"""The notebook kinds, in one registry: what `evekit run`, `evekit plan`, the index and the summary ask.

A new kind is a folder `evekit/runs/<kind>/` (its parameters, its runner, its `kind.py` entry)
plus one line in `KINDS` below (docs/ARCHITECTURE.md, "Adding a notebook kind").
"""
from __future__ import annotations

from evekit.errors import ParameterError
from evekit.runs.judge_validation.kind import KIND as JUDGE_VALIDATION
from evekit.runs.kind import RunKind
from evekit.runs.ranking.kind import KIND as RANKING
from evekit.runs.summary.kind import KIND as SUMMARY
from evekit.runs.task.kind import KIND as TASK
from evekit.runs.win_rate.kind import KIND as WIN_RATE

__all__ = ["KINDS", "OWN_NOTEBOOK_PHASE", "get_kind", "kind_of_notebook", "notebooks"]

# In batch order (phase), one line per kind.
KINDS: dict[str, RunKind] = {k.name: k for k in (JUDGE_VALIDATION, TASK, WIN_RATE, RANKING, SUMMARY)}


# A notebook of no kind (your own, in `evekit run --notebooks-dir`) runs with the tasks.
OWN_NOTEBOOK_PHASE = TASK.phase


def get_kind(name: str) -> RunKind:
    """The kind of that name (as run.json records it)."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown notebook kind {name!r}; kinds: {', '.join(KINDS)}") from None


def notebooks() -> dict[str, RunKind]:
    """Every notebook evekit ships, with its kind."""
    return {nb: k for k in KINDS.values() for nb in k.notebooks}


def kind_of_notebook(notebook: str) -> RunKind:
    """The kind of a notebook (by its file stem); ParameterError naming the notebooks there are."""
    known = notebooks()
    if notebook not in known:
        raise ParameterError(f"no notebook {notebook!r} (a parameter file is named <notebook>[.<variant>].yaml; "
                             f"notebooks: {', '.join(sorted(known))})")
    return known[notebook]
