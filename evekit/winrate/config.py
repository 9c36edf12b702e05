"""The win-rate notebook's parameters, checked at once so a typo fails before any judge call."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evekit.errors import ParameterError
from evekit.judges.panel import validate_judges
from evekit.params import check_injected, check_type
from evekit.paths import resolve_path, safe_name
from evekit.tasks import head_to_head_tasks
from evekit.types import JudgeSpec
from evekit.winrate.matching import Comparison, ModelSpec

__all__ = ["TASKS", "ALPHA", "WinRateConfig", "validate_params"]

TASKS = head_to_head_tasks()  # the catalogue's tasks with free-text answers a pairwise judge compares
ALPHA = 0.05


@dataclass
class WinRateConfig:
    """Validated parameters of the win-rate notebook (see `validate_params`)."""

    task: str
    model_a: list[ModelSpec]
    model_b: list[ModelSpec]
    judges: list[JudgeSpec]
    limit: int | None = None
    seed: int = 42
    both_orders: bool = False
    output_dir: str = "outputs"
    run_name: str = "demo"
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 4
    cache_dir: str | None = None
    offline: bool = False
    temperature: float = 0.0
    max_tokens: int = 512
    alpha: float = ALPHA
    judge_validation: str | None = None

    @property
    def cache_path(self) -> Path | None:
        """`cache_dir` resolved like every user path (working directory, else repository root)."""
        return None if self.cache_dir is None else resolve_path(self.cache_dir)

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> "WinRateConfig":
        """Pick the parameter names out of a notebook's globals() and validate them; a name
        papermill injected that is not a parameter is an error."""
        names = inspect.signature(validate_params).parameters
        check_injected(namespace, list(names))
        return validate_params(**{k: namespace[k] for k in names if k in namespace})

    def out_dir(self, comp: Comparison) -> Path:
        """The folder of one comparison's outputs: <output_dir>/<run_name>/win_rate/<a>_vs_<b>."""
        return resolve_path(self.output_dir) / safe_name(self.run_name) / "win_rate" / comp.label

    def as_dict(self) -> dict[str, Any]:
        """Parameters for the record: judges carry only the NAME of their key variable."""
        return {
            "task": self.task,
            "model_a": [vars(m) for m in self.model_a],
            "model_b": [vars(m) for m in self.model_b],
            "judges": [{"name": j.name, "model": j.model, "base_url": j.base_url,
                        "api_key_env": j.api_key_env, "temperature": j.temperature} for j in self.judges],
            **{k: getattr(self, k) for k in (
                "limit", "seed", "both_orders", "output_dir", "run_name", "concurrency", "timeout",
                "max_retries", "cache_dir", "offline", "temperature", "max_tokens", "alpha", "judge_validation")},
        }


def _as_list(value: Any, side: str) -> list[Any]:
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(f"{side} must be a non-empty list of {{name, file}}, got {value!r}")
    return list(value)


def validate_params(*, task: str = "open_ended", model_a: Any, model_b: Any, judges: Any,
                    limit: int | None = None, seed: int = 42, both_orders: bool = False,
                    output_dir: str = "outputs", run_name: str = "demo", concurrency: int = 8,
                    timeout: float = 120.0, max_retries: int = 4, cache_dir: str | None = None,
                    offline: bool = False, temperature: float = 0.0, max_tokens: int = 512,
                    alpha: float = ALPHA, judge_validation: str | None = None) -> WinRateConfig:
    """Check the notebook's parameters at once, so a typo fails before any judge call.

    Files must exist (relative paths resolve from the working directory, else the repository
    root); judges carry the NAME of their key variable, never a key.
    """
    if task not in TASKS:
        raise ParameterError(f"task {task!r} is not a win-rate task; use one of: {', '.join(TASKS)}")
    for name, value, types, optional in (
        ("limit", limit, (int,), True), ("seed", seed, (int,), False),
        ("both_orders", both_orders, (bool,), False), ("output_dir", output_dir, (str, Path), False),
        ("run_name", run_name, (str,), False), ("concurrency", concurrency, (int,), False),
        ("timeout", timeout, (int, float), False), ("max_retries", max_retries, (int,), False),
        ("cache_dir", cache_dir, (str, Path), True), ("offline", offline, (bool,), False),
        ("temperature", temperature, (int, float), False), ("max_tokens", max_tokens, (int,), False),
        ("alpha", alpha, (float,), False), ("judge_validation", judge_validation, (str, Path), True),
    ):
        check_type(name, value, types, optional)
    for name, value in (("limit", limit), ("concurrency", concurrency), ("max_tokens", max_tokens)):
        if value is not None and value < 1:
            raise ParameterError(f"parameter {name}={value!r} must be at least 1")
    if seed < 0 or max_retries < 0:
        raise ParameterError(f"seed ({seed}) and max_retries ({max_retries}) must be 0 or more")
    if judge_validation is not None and not resolve_path(judge_validation).is_file():
        raise ParameterError(f"parameter judge_validation: file not found: {judge_validation} (a results.json "
                             "written by notebooks/judge_validation.ipynb with judge_kind 'pairwise')")
    sides = {}
    for side, value in (("model_a", model_a), ("model_b", model_b)):
        specs = [ModelSpec.from_dict(d, side) for d in _as_list(value, side)]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ParameterError(f"{side}: model names must be unique, got {names}")
        for s in specs:
            if not resolve_path(s.file).is_file():
                raise ParameterError(f"{side} {s.name!r}: file not found: {s.file} "
                                     f"(tried {Path(s.file).resolve()} and {resolve_path(s.file)})")
        sides[side] = specs
    both = {s.name for s in sides["model_a"]} & {s.name for s in sides["model_b"]}
    if both:
        raise ParameterError(f"model(s) {sorted(both)} appear in both model_a and model_b")
    if not isinstance(judges, (list, tuple)) or not judges:
        raise ParameterError(f"judges must be a non-empty list of {{name, model, base_url, api_key_env}}, "
                             f"got {judges!r}")
    specs_j = validate_judges(judges)  # the panel's rules: unique names usable as column names
    for j in specs_j:  # JudgeSpec.from_dict has refused keys pasted into api_key_env
        if j.api_key_env and not offline and j.api_key_env not in os.environ:
            raise ParameterError(f"judge {j.name!r}: environment variable {j.api_key_env} "
                                 "(its api_key_env) is not set")
    return WinRateConfig(
        task=task, model_a=sides["model_a"], model_b=sides["model_b"], judges=specs_j, limit=limit,
        seed=seed, both_orders=both_orders, output_dir=str(output_dir), run_name=run_name,
        concurrency=concurrency, timeout=float(timeout), max_retries=max_retries,
        cache_dir=None if cache_dir is None else str(cache_dir), offline=offline,
        temperature=float(temperature), max_tokens=max_tokens, alpha=alpha,
        judge_validation=None if judge_validation is None else str(judge_validation),
    )
