"""The shape every notebook kind's runner shares: `NotebookRun`.

A notebook's first cell is `run = <Kind>Run.from_notebook(globals())`; each later cell calls one
method (a sentence of the story: load, generate or judge, score, tables, plots, save). What every
kind needs is here, once: building from the notebook's parameters, the model clients (one client
factory, so `evekit plan` can put in one that sends nothing), the judge panel with the run's
client settings, the demo-model caveat, notes, and the run's wall time.
"""
from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any, ClassVar, Mapping

from evekit.client import ModelClient
from evekit.demo import DEMO_MODEL_NOTE, demo_judge_note, demo_judges, is_demo_model
from evekit.judges import JudgePanel
from evekit.paths import output_path
from evekit.report import use_table_html
from evekit.runs.kind import RunKind
from evekit.runs.params import Params
from evekit.runs.records import EXECUTION_ENV

__all__ = ["NotebookRun"]


class NotebookRun:
    """One notebook run of one kind. `clients` (judge name -> an object with `.generate(requests,
    desc)` and `.usage`) replaces the judges' clients, for tests."""

    Params: ClassVar[type[Params]]
    Kind: ClassVar[RunKind]

    def __init_subclass__(cls, **kw: Any) -> None:
        """Every kind's `save` ends by logging its folders to the run's tracker (`track_saved`)."""
        super().__init_subclass__(**kw)
        save = cls.__dict__.get("save")
        if save is not None and not getattr(save, "_tracks", False):
            @functools.wraps(save)
            def save_and_track(self: "NotebookRun", *args: Any, **kwargs: Any) -> Any:
                saved = save(self, *args, **kwargs)
                self.track_saved(saved)
                return saved
            save_and_track._tracks = True  # type: ignore[attr-defined]
            cls.save = save_and_track  # type: ignore[attr-defined]

    def __init__(self, config: Params, clients: Mapping[str, Any] | None = None) -> None:
        self.config: Any = config
        self.clients = dict(clients) if clients is not None else None
        self.notes: list[str] = []
        # Builds every model and judge client of the run; `evekit plan` puts in one that sends nothing.
        self.client_factory: Any = ModelClient
        self._started = time.monotonic()
        # In a notebook, every table a step returns (or a cell shows) is drawn by report.table_html.
        use_table_html()

    @classmethod
    def from_notebook(cls, namespace: Mapping[str, Any]) -> "NotebookRun":
        """Pick the parameter names out of a notebook's globals() and validate them."""
        return cls(cls.Params.from_notebook(namespace))

    @classmethod
    def from_params(cls, clients: Mapping[str, Any] | None = None, **params: Any) -> "NotebookRun":
        """From keyword parameters (scripts and tests)."""
        return cls(cls.Params.from_dict(params), clients)

    @property
    def seconds(self) -> float:
        """Wall time since the run was built."""
        return round(time.monotonic() - self._started, 3)

    # -- experiment tracking ------------------------------------------------------------------
    def track_saved(self, saved: Any) -> list[dict[str, Any]]:
        """Log the folder(s) `save` wrote to the `tracking` parameter's tracker, unless the run is not
        tracked or runs under `evekit run` (which logs after writing report.html). The statuses, as
        written into each folder's run.json."""
        cfg = getattr(self.config, "tracking_config", None)
        if cfg is None or os.environ.get(EXECUTION_ENV):
            return []
        from evekit.runs.tracked import batch_group, track_folder
        from evekit.tracking import describe

        folders = saved if isinstance(saved, (list, tuple)) else [saved]
        out_root = output_path(self.config.output_dir)
        statuses = [track_folder(Path(d), self.Kind, cfg, out_root=out_root, group=batch_group()) for d in folders]
        for status in statuses:
            print(describe(status))
        return statuses

    # -- clients and judges -------------------------------------------------------------------
    def client(self, model: str, base_url: str, api_key_env: str | None, name: str,
               concurrency: int | None = None, **kw: Any) -> Any:
        """A client with the run's settings (timeout, retries, cache, offline); `concurrency`
        defaults to the run's."""
        settings = {**self.config.client_settings(), "concurrency": concurrency or self.config.concurrency}
        return self.client_factory(model, base_url, api_key_env, name=name, **settings, **kw)

    def judge_panel(self, kind: str, *, progress: bool = True) -> JudgePanel:
        """The run's judges as one panel of `kind`, with the run's client settings and the judges'
        defaults (`judge_temperature`, `judge_max_tokens`)."""
        c = self.config
        specs = c.judge_specs()
        clients = self.clients
        if clients is None:
            extra = {} if self.client_factory is not ModelClient else {"progress": progress}
            clients = {s.name: self.client(s.model, s.base_url, s.api_key_env, f"judge {s.name}",
                                           s.concurrency_in(c.concurrency), **extra) for s in specs}
        return JudgePanel(specs, kind, temperature=c.judge_temperature, max_tokens=c.judge_max_tokens,
                          clients=clients)

    def close_panel(self, panel: JudgePanel) -> None:
        """Close the panel's caches, unless its clients were handed in (they belong to the caller)."""
        if self.clients is None:
            panel.close()

    # -- the demo model's caveat --------------------------------------------------------------
    @property
    def demo_judges(self) -> list[str]:
        """The judges that are the embedded demo model: every report they judged says so."""
        return demo_judges(self.config.judge_specs()) if hasattr(self.config, "judge_specs") else []

    def demo_notes(self, models: list[str] = ()) -> list[str]:  # type: ignore[assignment]
        """The caveats that apply: the demo model among `models`, the demo model judging."""
        notes = [DEMO_MODEL_NOTE] if any(is_demo_model(m) for m in models) else []
        if self.demo_judges:
            notes.append(demo_judge_note(self.demo_judges))
        return notes
