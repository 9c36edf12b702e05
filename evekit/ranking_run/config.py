"""The ranking notebook's parameters, checked at once so a typo fails before any judge call.

The fields of `RankingConfig` are the parameter contract of `notebooks/ranking.ipynb`:
scripts/build_notebooks.py writes its parameters cell from them (name, default or demo value,
and `help` as the comment), so a new parameter is added here once.
"""
from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from evekit.errors import ParameterError, unknown_names
from evekit.judges.panel import validate_judges
from evekit.params import check_injected, check_type
from evekit.paths import resolve_path, safe_name
from evekit.tasks import head_to_head_tasks
from evekit.types import JudgeSpec
from evekit.winrate.matching import ModelSpec

__all__ = ["TASKS", "RankingConfig"]

TASKS = head_to_head_tasks()  # free-text answers a pairwise judge can compare


def _param(default: Any = MISSING, *, help: str) -> Any:
    # `help` becomes the comment of the notebook's parameters cell
    return field(default=default, metadata={"help": help})


@dataclass(kw_only=True)  # the order of the fields is the order of the parameters cell
class RankingConfig:
    """Validated parameters of the ranking notebook (build with `from_dict` / `from_notebook`)."""

    task: str = _param("open_ended", help=" or ".join(f'"{t}"' for t in TASKS))
    models: list = _param(help="[{name, file}]: evekit samples.csv or EVE / lm-eval CSVs")
    baseline: str | None = _param(None, help="a model's name: it is 1000 and every model's win rate vs it is shown")
    judges: list = _param(help="[{name, model, base_url, api_key_env}]: a pairwise panel")
    both_orders: bool = _param(True, help="True: judge each pair both ways round (2x calls)")
    limit: int | None = _param(None, help="None: every question; N: the first N")
    seed: int = _param(1234, help="fixes the pairs sampled, who is shown first, and the bootstrap")
    n_boot: int = _param(1000, help="bootstrap resamples of the questions for the intervals")
    max_pairs_per_question: int | None = _param(None, help="None: every pair of models; k: k pairs per question")
    judge_validation: str | None = _param(None, help="a judge-validation results.json to show beside the ratings")
    concurrency: int = _param(8, help="judge calls in flight per endpoint")
    timeout: float = _param(120.0, help="seconds per call")
    max_retries: int = _param(4, help="retries of a failed call")
    cache_dir: str | None = _param(None, help="the call cache (SQLite); None: no cache")
    offline: bool = _param(False, help="True: replay from the cache only, a miss is an error")
    temperature: float = _param(0.0, help="judges' default; a judge may set its own \"temperature\"")
    max_tokens: int = _param(512, help="of a judge's reply")
    run_name: str = _param("demo", help="outputs/<run_name>/ranking/<task>/")
    output_dir: str = _param("outputs", help="")

    @property
    def model_specs(self) -> list[ModelSpec]:
        return [ModelSpec.from_dict(m, "models") for m in self.models]

    @property
    def judge_specs(self) -> list[JudgeSpec]:
        return validate_judges(self.judges)

    @property
    def cache_path(self) -> Path | None:
        """`cache_dir` resolved like every user path (working directory, else repository root)."""
        return None if self.cache_dir is None else resolve_path(self.cache_dir)

    @property
    def out_dir(self) -> Path:
        """<output_dir>/<run_name>/ranking/<task>."""
        return resolve_path(self.output_dir) / safe_name(self.run_name) / "ranking" / safe_name(self.task)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RankingConfig":
        """Validate a mapping of parameter names to values; an unknown name is an error."""
        problem = unknown_names(values, cls.names())
        if problem:
            raise ParameterError(problem)
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in values]
        if missing:
            raise ParameterError(f"missing parameter(s): {', '.join(missing)}")
        config = cls(**values)
        config.validate()
        return config

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> "RankingConfig":
        """Pick the parameter names out of a notebook's globals() and validate them; a name
        papermill injected that is not a parameter is an error (with a did-you-mean)."""
        check_injected(namespace, cls.names())
        return cls.from_dict({k: namespace[k] for k in cls.names() if k in namespace})

    def validate(self) -> None:
        if self.task not in TASKS:
            raise ParameterError(f"task {self.task!r} is not a task a pairwise judge can rank; use one of: "
                                 f"{', '.join(TASKS)}")
        types: dict[str, tuple[tuple[type, ...], bool]] = {  # name -> (types, None allowed)
            "models": ((list, tuple), False), "baseline": ((str,), True), "judges": ((list, tuple), False),
            "both_orders": ((bool,), False), "limit": ((int,), True), "seed": ((int,), False),
            "n_boot": ((int,), False), "max_pairs_per_question": ((int,), True),
            "judge_validation": ((str, Path), True), "concurrency": ((int,), False),
            "timeout": ((int, float), False), "max_retries": ((int,), False), "cache_dir": ((str, Path), True),
            "offline": ((bool,), False), "temperature": ((int, float), False), "max_tokens": ((int,), False),
            "run_name": ((str,), False), "output_dir": ((str, Path), False),
        }
        for name, (want, optional) in types.items():
            check_type(name, getattr(self, name), want, optional)
        for name in ("limit", "concurrency", "max_tokens", "max_pairs_per_question"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ParameterError(f"parameter {name}={value!r} must be at least 1")
        for name in ("seed", "max_retries", "n_boot"):
            if getattr(self, name) < 0:
                raise ParameterError(f"parameter {name}={getattr(self, name)!r} must be 0 or more")
        self.models = list(self.models)
        if len(self.models) < 2:
            raise ParameterError(f"models: a ranking needs at least two models, got {len(self.models)}")
        specs = self.model_specs
        names = [s.name for s in specs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ParameterError(f"models: model names must be unique; repeated: {', '.join(dupes)}")
        if "pooled" in names or "tie" in names:
            raise ParameterError("models: 'pooled' and 'tie' are reserved (a judge column value and a verdict)")
        for s in specs:
            if not resolve_path(s.file).is_file():
                raise ParameterError(f"models {s.name!r}: file not found: {s.file} "
                                     f"(tried {Path(s.file).resolve()} and {resolve_path(s.file)})")
        if self.baseline is not None and self.baseline not in names:
            problem = unknown_names([self.baseline], names, what="baseline")
            raise ParameterError(f"{problem} (the baseline must be one of the models' names)")
        if not self.judges:
            raise ParameterError("judges must be a non-empty list of {name, model, base_url, api_key_env}")
        specs_j = self.judge_specs  # unique names usable as column names; refuses pasted keys
        if "pooled" in [j.name for j in specs_j]:
            raise ParameterError("a judge may not be called 'pooled': that name is the pooled fit's")
        for j in specs_j:
            if j.api_key_env and not self.offline and j.api_key_env not in os.environ:
                raise ParameterError(f"judge {j.name!r}: environment variable {j.api_key_env} "
                                     "(its api_key_env) is not set")
        if self.judge_validation is not None and not resolve_path(self.judge_validation).is_file():
            raise ParameterError(f"judge_validation: file not found: {self.judge_validation} "
                                 f"(tried {resolve_path(self.judge_validation)})")
        self.timeout, self.temperature = float(self.timeout), float(self.temperature)
        self.output_dir = str(self.output_dir)
        self.cache_dir = None if self.cache_dir is None else str(self.cache_dir)

    def as_dict(self) -> dict[str, Any]:
        """Parameters for the record: judges carry only the NAME of their key variable."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["models"] = [vars(m) for m in self.model_specs]
        out["judges"] = [{"name": j.name, "model": j.model, "base_url": j.base_url, "api_key_env": j.api_key_env,
                          "temperature": j.temperature} for j in self.judge_specs]
        return out
