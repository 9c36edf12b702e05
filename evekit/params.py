"""Notebook parameters: the names of DESIGN.md's parameter contract, checked in the first cell.

A wrong type or an unknown value fails at once with a message that names the parameter and lists
the valid values, instead of failing twenty minutes later inside a model call.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from evekit.errors import ParameterError
from evekit.paths import REPO_ROOT, resolve_path  # noqa: F401  (re-exported)
from evekit.tasks import TASKS
from evekit.types import JudgeSpec

CHOICES = {"api": ("chat", "completions"), "fewshot_sampler": ("first_n", "random")}


@dataclass
class RunConfig:
    """Everything one task notebook needs; built from the notebook's parameter cell."""

    task: str
    model_name: str
    base_url: str
    api_key_env: str | None = None
    api: Literal["chat", "completions"] = "chat"
    temperature: float = 0.0
    max_tokens: int | None = None
    num_fewshot: int | None = None
    fewshot_sampler: Literal["first_n", "random"] = "first_n"
    seed: int = 1234
    limit: int | None = None
    dataset: str | None = None
    split: str = "train"
    judges: list[dict[str, Any]] = field(default_factory=list)
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 4
    cache_dir: str = "outputs/cache"
    offline: bool = False
    run_name: str = "demo"
    output_dir: str = "outputs"
    # Bring your own data: the file's column names for the task's schema (None: the schema's own).
    input_column: str | None = None
    target_column: str | None = None
    choices_column: str | list[str] | None = None
    context_columns: list[str] | None = None
    # A custom task (notebooks/custom_task.ipynb): its YAML file; `task` is then its name.
    task_file: str | None = None

    @classmethod
    def from_namespace(cls, namespace: dict[str, Any]) -> "RunConfig":
        """Pick the contract's names out of a notebook's globals() and validate them."""
        values = {f.name: namespace[f.name] for f in fields(cls) if f.name in namespace}
        missing = [f.name for f in fields(cls) if f.name not in values and f.name in ("task", "model_name", "base_url")]
        if missing:
            raise ParameterError(f"missing parameters: {', '.join(missing)}")
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.task not in TASKS and self.task_file is None:
            raise ParameterError(f"unknown task {self.task!r}; valid tasks: {', '.join(TASKS)}")
        for name, valid in CHOICES.items():
            if getattr(self, name) not in valid:
                raise ParameterError(f"{name}={getattr(self, name)!r} is not valid; use one of: {', '.join(valid)}")
        checks: dict[str, tuple[type, ...]] = {
            "model_name": (str,), "base_url": (str,), "split": (str,), "run_name": (str,),
            "output_dir": (str,), "cache_dir": (str,), "temperature": (int, float), "seed": (int,),
            "concurrency": (int,), "timeout": (int, float), "max_retries": (int,), "offline": (bool,),
        }
        optional = {"api_key_env": (str,), "max_tokens": (int,), "num_fewshot": (int,), "limit": (int,),
                    "dataset": (str,), "input_column": (str,), "target_column": (str,), "task_file": (str,),
                    "choices_column": (str, list), "context_columns": (list,)}
        if self.task_file is not None:
            optional["split"] = (str,)  # None: the task file's split
        for name, types in {**checks, **optional}.items():
            value = getattr(self, name)
            if value is None and name in optional:
                continue
            # bool is an int in Python: only `offline` may be a bool.
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                want = " or ".join(t.__name__ for t in types) + (" or None" if name in optional else "")
                raise ParameterError(f"parameter {name}={value!r} has type {type(value).__name__}; expected {want}")
        for name in ("concurrency", "max_tokens", "limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ParameterError(f"parameter {name}={value!r} must be at least 1")
        for name in ("num_fewshot", "max_retries"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ParameterError(f"parameter {name}={value!r} must be 0 or more")
        if self.api_key_env is not None and (self.api_key_env.startswith("sk-") or len(self.api_key_env) > 64):
            raise ParameterError("api_key_env must be the NAME of an environment variable, not a key")
        for name in ("choices_column", "context_columns"):
            value = getattr(self, name)
            if isinstance(value, list) and not (value and all(isinstance(v, str) and v for v in value)):
                raise ParameterError(f"parameter {name}={value!r} must be a non-empty list of column names")
        if not isinstance(self.judges, list):
            raise ParameterError(f"judges must be a list of {{name, model, base_url, api_key_env}}, got {self.judges!r}")
        try:
            self.judge_specs()
        except ValueError as exc:
            raise ParameterError(str(exc)) from None

    def judge_specs(self) -> list[JudgeSpec]:
        specs = [JudgeSpec.from_dict(j) for j in self.judges]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"judge names must be unique, got {names}")
        return specs

    @property
    def out_dir(self) -> Path:
        return resolve_path(self.output_dir) / self.run_name / self.model_name / self.task

    @property
    def cache_path(self) -> Path:
        return resolve_path(self.cache_dir)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
