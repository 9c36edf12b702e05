"""What a notebook kind is: the facts the batch runner, the index, `evekit plan` and the summary need.

Each kind declares one `RunKind` in its own folder (`evekit/runs/<kind>/kind.py`);
`evekit.runs.registry` lists them. Nothing above the library reads a notebook's parameter names
or a kind's name by hand: it asks the kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# A kind's parameters class (`evekit.runs.params.Params`) and a run.json record
# (`evekit.runs.records.RunRecord`): both live above this module, so they are named, not imported.
Params = Any
RunRecord = Any

__all__ = ["RunKind", "IndexRow"]


@dataclass(frozen=True)
class IndexRow:
    """One row of the index's results table (a task result): the cells as text, and the link."""

    cells: tuple[str, ...]
    report: str | None = None
    flags: tuple[Any, ...] = ()  # `cards.Flag`s of the headline number: a mark and a tooltip on its cell


def _nothing(*_: Any) -> Any:
    return None


@dataclass(frozen=True)
class RunKind:
    """One notebook kind.

    - `name`: as run.json records it; `title`: how pages name it ("win rate").
    - `phase`: the batch order (0 judge validation, 1 tasks, 2 comparisons, 3 summary): a file
      waits for earlier phases unless it names what it reads (`reads`).
    - `notebooks`: the notebooks of this kind; `params`: its parameters class; `implied(notebook,
      values)`: values a notebook's name implies (a task notebook's `task`); `variant(notebook)`:
      which of the kind's parameters that notebook's cell has (`Params.parameters(variant)`).
    - `reads(params)`: the files a run reads that other runs of a batch may write; None: it
      reads every result of its run (the summary).
    - `headline(record)`: one line for the index; `index_row(record)`: a row of the index's
      results table instead (task results); `subject(record, params)`: what a report is about,
      for its title (the model, "a vs b", the judges).
    - `card(record)`: the run's verdict in words (`evekit.cards`), the first thing its report and
      the index say; "" when there is none.
    - `plan_note`: why `evekit plan` does not plan this kind (None: it plays the run's steps).
    - `runner`: where the kind's NotebookRun class is (`module:Class`; imported by `load_runner`,
      since the runner imports its kind).
    - `one_per_run`: the run has one folder of this kind (the summary), named by the title alone.
    - `track(record, sample_count)`: what a tracker run logs of one folder (`evekit.tracking.Tracked`:
      the metrics under flat names, the tables, the plots); None: the parameters and the plots only.
    """

    name: str
    title: str
    phase: int
    notebooks: tuple[str, ...]
    params: type
    runner: str
    reads: Callable[[Params], list[str]] | None = field(default=lambda p: [])
    headline: Callable[[RunRecord], str] = lambda record: ""
    card: Callable[[RunRecord], str] = lambda record: ""
    index_row: Callable[[RunRecord, Any], IndexRow | None] | None = None
    subject: Callable[[RunRecord, Mapping[str, Any]], str | None] = _nothing
    implied: Callable[[str, Mapping[str, Any]], dict[str, Any]] = field(default=lambda notebook, values: {})
    variant: Callable[[str], str | None] = field(default=lambda notebook: None)
    plan_note: str | None = "not planned"
    one_per_run: bool = False  # one folder per run (the summary): the index names it by its title alone
    track: Callable[[RunRecord, int], Any] | None = None

    def load_runner(self) -> type:
        """The kind's NotebookRun class."""
        import importlib

        module, _, name = self.runner.partition(":")
        return getattr(importlib.import_module(module), name)

    def label(self, record: RunRecord) -> str:
        """How the index names one run of this kind: 'win rate: a_vs_b'."""
        return self.title if self.one_per_run else f"{self.title}: {record.dir.name}"
