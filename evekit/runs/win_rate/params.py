"""The win-rate notebook's parameters, checked at once so a typo fails before any judge call."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evekit.errors import ParameterError
from evekit.runs.params import (BothOrders, Client, Clustered, ExpertLabelled, Judging, OnTask, Output, SeedLimit,
                               ShowsValidation, param)
from evekit.runs.win_rate.matching import ModelSpec, model_specs
from evekit.tasks import head_to_head_tasks

__all__ = ["TASKS", "ALPHA", "WinRateParams", "WinRateConfig", "validate_params"]

TASKS = head_to_head_tasks()  # the catalogue's tasks with free-text answers a pairwise judge compares
ALPHA = 0.05


@dataclass(kw_only=True)
class WinRateParams(OnTask, SeedLimit, ShowsValidation, ExpertLabelled, Judging, BothOrders, Clustered, Client,
                    Output):
    """The parameters of the win-rate notebook: every model_a against every model_b."""

    model_a: list = param(help="[{name, file}], name optional: evekit samples.csv or CSVs of EVE's evalkit / lm-eval",
                          group="what")
    model_b: list = param(help="[{name, file}], compared with each of model_a", group="what")
    alpha: float = param(ALPHA, help="significance level of the verdict's sign test", group="judges", minimum=0)

    RENAMED = {"temperature": "judge_temperature", "max_tokens": "judge_max_tokens"}

    def check(self) -> None:
        super().check()
        if self.task not in TASKS:
            raise ParameterError(f"task {self.task!r} is not a win-rate task; use one of: {', '.join(TASKS)}")
        if not 0 < self.alpha < 1:
            raise ParameterError(f"parameter alpha={self.alpha!r} must lie between 0 and 1")
        a, b = model_specs(self.model_a, "model_a"), model_specs(self.model_b, "model_b")
        both = {s.name for s in a} & {s.name for s in b}
        if both:
            raise ParameterError(f"model(s) {sorted(both)} appear in both model_a and model_b")
        self.require_judges()
        self.check_key_variables(self.offline)

    @property
    def model_a_specs(self) -> list[ModelSpec]:
        return model_specs(self.model_a, "model_a")

    @property
    def model_b_specs(self) -> list[ModelSpec]:
        return model_specs(self.model_b, "model_b")

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out["model_a"], out["model_b"] = [vars(m) for m in self.model_a_specs], [vars(m) for m in self.model_b_specs]
        return out


WinRateConfig = WinRateParams  # its former name


def validate_params(**params: Any) -> WinRateParams:
    """`WinRateParams.from_dict(params)` (its former entry point)."""
    return WinRateParams.from_dict(params)  # type: ignore[return-value]

