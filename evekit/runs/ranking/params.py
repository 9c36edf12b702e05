"""The ranking notebook's parameters, checked at once so a typo fails before any judge call."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evekit.errors import ParameterError, unknown_names
from evekit.runs.params import BothOrders, Client, Clustered, Judging, OnTask, Output, SeedLimit, ShowsValidation, param
from evekit.runs.win_rate.matching import ModelSpec, model_specs
from evekit.tasks import head_to_head_tasks

__all__ = ["TASKS", "RankingParams", "RankingConfig"]

TASKS = head_to_head_tasks()  # free-text answers a pairwise judge can compare


@dataclass(kw_only=True)
class RankingParams(OnTask, SeedLimit, ShowsValidation, Judging, BothOrders, Clustered, Client, Output):
    """The parameters of the ranking notebook: N models' answer files, one pairwise panel."""

    models: list = param(help="[{name, file}], name optional: evekit samples.csv or EVE / lm-eval CSVs",
                         group="what")
    baseline: str | None = param(None, help="a model's name: it is 1000 and every model's win rate vs it is shown",
                                 group="what")
    n_boot: int = param(1000, help="bootstrap resamples of the questions for the intervals", group="data", minimum=0)
    max_pairs_per_question: int | None = param(None, help="None: every pair of models; k: k pairs per question",
                                               group="judges", minimum=1)

    RENAMED = {"temperature": "judge_temperature", "max_tokens": "judge_max_tokens"}

    @property
    def model_specs(self) -> list[ModelSpec]:
        return model_specs(self.models, "models")

    def check(self) -> None:
        super().check()
        if self.task not in TASKS:
            raise ParameterError(f"task {self.task!r} is not a task a pairwise judge can rank; use one of: "
                                 f"{', '.join(TASKS)}")
        self.models = list(self.models) if isinstance(self.models, (list, tuple)) else self.models
        specs = self.model_specs
        if len(specs) < 2:
            raise ParameterError(f"models: a ranking needs at least two models, got {len(specs)}")
        names = [s.name for s in specs]
        if "pooled" in names or "tie" in names:
            raise ParameterError("models: 'pooled' and 'tie' are reserved (a judge column value and a verdict)")
        if self.baseline is not None and self.baseline not in names:
            problem = unknown_names([self.baseline], names, what="baseline")
            raise ParameterError(f"{problem} (the baseline must be one of the models' names)")
        self.require_judges()
        self.check_key_variables(self.offline)

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out["models"] = [vars(m) for m in self.model_specs]
        return out


RankingConfig = RankingParams  # its former name
