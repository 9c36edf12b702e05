"""Notebook parameters: the parameter contract (README, docs/ARCHITECTURE.md), checked in the first cell.

A wrong type or an unknown value fails at once with a message that names the parameter and lists
the valid values, instead of failing twenty minutes later inside a model call.
"""
from __future__ import annotations

import ast

from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Sequence

from evekit.errors import ParameterError, unknown_names
from evekit.paths import REPO_ROOT, resolve_path, safe_name  # noqa: F401  (REPO_ROOT re-exported)
from evekit.tasks import SCORING, TASKS, supports_logprobs
from evekit.types import JudgeSpec, check_api_key_env

CHOICES = {"api": ("chat", "completions"), "fewshot_sampler": ("first_n", "random")}


def _param(default: Any = MISSING, *, help: str, factory: Any = MISSING, only: str | None = None) -> Any:
    """A RunConfig field with its one-line help (the comment of the notebooks' parameters cell).

    `only`: the one notebook kind whose parameters cell carries the field ("task" or "custom").
    """
    metadata = {"help": help, **({"only": only} if only else {})}
    return field(default=default, default_factory=factory, metadata=metadata)


def injected_parameters(namespace: dict[str, Any]) -> list[str]:
    """The names papermill injected into this kernel: its cell's first line is exactly
    "# Parameters" (IPython keeps every executed cell's source in `In`)."""
    names: list[str] = []
    for source in namespace.get("In") or []:
        if not isinstance(source, str) or source.split("\n", 1)[0].strip() != "# Parameters":
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        names += [t.id for node in tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name)]
    return names


def check_injected(namespace: dict[str, Any], known: Sequence[str]) -> None:
    """Raise ParameterError naming each injected parameter that `known` lacks, with a did-you-mean."""
    problem = unknown_names(injected_parameters(namespace), known)
    if problem:
        raise ParameterError(f"{problem} (a misspelt parameter would otherwise be ignored and its "
                             "default used)")


def check_type(name: str, value: Any, types: tuple[type, ...], optional: bool = False) -> None:
    """ParameterError unless `value` is one of `types` (or None when `optional`). bool is an int in
    Python: a bool passes only where bool is one of the types."""
    if value is None and optional:
        return
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        want = " or ".join(t.__name__ for t in types) + (" or None" if optional else "")
        raise ParameterError(f"parameter {name}={value!r} has type {type(value).__name__}; expected {want}")


@dataclass
class RunConfig:
    """Everything one task notebook needs; built from the notebook's parameter cell.

    The fields are the parameter contract: scripts/build_notebooks.py writes the parameters cell of
    every task notebook from them (name, default or a demo override, and `help` as the comment).
    """

    task: str = _param(help="one of the six EVE tasks", only="task")
    model_name: str = _param(help="the model's name at the endpoint (and in outputs/)")
    base_url: str = _param(help="any OpenAI-compatible endpoint")
    api_key_env: str | None = _param(None, help="NAME of the environment variable holding the key")
    api: Literal["chat", "completions"] = _param("chat", help='"chat" or "completions"')
    temperature: float = _param(0.0, help="0.0: greedy")
    max_tokens: int | None = _param(None, help="None: the EVE default of the task")
    num_fewshot: int | None = _param(None, help="None: the EVE default of the task")
    fewshot_sampler: Literal["first_n", "random"] = _param("first_n", help='"first_n" (EVE) or "random"')
    seed: int = _param(1234, help="fixes the few-shot sample and the bootstrap intervals")
    limit: int | None = _param(None, help="None: every item")
    dataset: str | None = _param(None, help="a local file or a hub id")
    split: str = _param("train", help="split of a hub dataset")
    judges: list[dict[str, Any]] = _param(help="list of {name, model, base_url, api_key_env}", factory=list)
    concurrency: int = _param(8, help="requests in flight at once")
    timeout: float = _param(120.0, help="seconds per request")
    max_retries: int = _param(4, help="retries of a failed request, with backoff")
    cache_dir: str = _param("outputs/cache", help="every call is cached here; a rerun resumes")
    offline: bool = _param(False, help="True: replay from the cache only, a miss is an error")
    run_name: str = _param("demo", help="outputs go to <output_dir>/<run_name>/<model_name>/<task>/")
    output_dir: str = _param("outputs", help="root folder of every run")
    # Bring your own data: the file's column names for the task's schema (None: the schema's own).
    input_column: str | None = _param(None, help="your file's column names for the task's schema (None: the schema's)")
    target_column: str | None = _param(None, help="None: the schema's")
    choices_column: str | list[str] | None = _param(
        None, help="one list column, or a list of columns holding one choice each")
    context_columns: list[str] | None = _param(None, help="list of columns holding context documents")
    # Breakdowns: every metric per value of one column of the dataset (e.g. "topic").
    group_by: str | None = _param(None, help="a dataset column: every metric per value of it (None: no breakdown)")
    # Multiple choice and classification: score the parsed text, the first answer token's
    # log-probabilities (accuracy, Brier score, calibration error, reliability diagram), or both.
    scoring: str | None = _param(None, help='"text", "logprobs" or "both" (None: the task\'s own, "text" for EVE tasks)')
    # Judge trust: a judge-validation results.json (notebooks/judge_validation.ipynb), shown beside the judges.
    judge_validation: str | None = _param(
        None, help="a judge-validation results.json: validated accuracy and kappa beside each judge")
    # A custom task (notebooks/custom_task.ipynb): its YAML file; `task` is then its name.
    task_file: str | None = _param(None, help="evekit task YAML or an Inspect AI eval.yaml", only="custom")

    @classmethod
    def from_namespace(cls, namespace: dict[str, Any]) -> "RunConfig":
        """Pick the contract's names out of a notebook's globals() and validate them; a name
        papermill injected that is not a parameter is an error, never silently ignored."""
        check_injected(namespace, [f.name for f in fields(cls)])
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
                    "choices_column": (str, list), "context_columns": (list,), "group_by": (str,),
                    "scoring": (str,), "judge_validation": (str,)}
        if self.task_file is not None:
            optional["split"] = (str,)  # None: the task file's split
        for name, types in {**checks, **optional}.items():
            check_type(name, getattr(self, name), types, optional=name in optional)
        for name in ("concurrency", "max_tokens", "limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ParameterError(f"parameter {name}={value!r} must be at least 1")
        for name in ("num_fewshot", "max_retries"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ParameterError(f"parameter {name}={value!r} must be 0 or more")
        try:
            check_api_key_env(self.api_key_env)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        for name in ("choices_column", "context_columns"):
            value = getattr(self, name)
            if isinstance(value, list) and not (value and all(isinstance(v, str) and v for v in value)):
                raise ParameterError(f"parameter {name}={value!r} must be a non-empty list of column names")
        if self.scoring is not None:
            if self.scoring not in SCORING:
                raise ParameterError(f"scoring={self.scoring!r} is not valid; use one of: {', '.join(SCORING)}")
            if self.scoring != "text" and self.task in TASKS and not supports_logprobs(self.task):
                raise ParameterError(f"scoring={self.scoring!r} needs a multiple-choice (one answer) or "
                                     f"classification task; {self.task} is not one")
        if self.judge_validation is not None and not resolve_path(self.judge_validation).is_file():
            raise ParameterError(f"parameter judge_validation: file not found: {self.judge_validation} (a "
                                 "results.json written by notebooks/judge_validation.ipynb)")
        if self.group_by is not None and not self.group_by.strip():
            raise ParameterError("parameter group_by='' must name a column of the dataset, or be None")
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
        # The readable model id stays in the files; folder names are made safe (no `/`, no `..`).
        return resolve_path(self.output_dir) / safe_name(self.run_name) / safe_name(self.model_name) / safe_name(self.task)

    @property
    def cache_path(self) -> Path:
        return resolve_path(self.cache_dir)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def parameter_fields(notebook: str = "task") -> list[Field]:
    """RunConfig's fields in the parameters cell of a `notebook` kind: "task" (the six EVE task
    notebooks) or "custom" (custom_task.ipynb, which names a task file instead of a task)."""
    if notebook not in ("task", "custom"):
        raise ValueError(f"notebook={notebook!r}; use 'task' or 'custom'")
    chosen = [f for f in fields(RunConfig) if f.metadata.get("only", notebook) == notebook]
    # The field that names what the notebook evaluates (task or task_file) comes first.
    return sorted(chosen, key=lambda f: "only" not in f.metadata)
