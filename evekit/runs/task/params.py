"""The task notebooks' parameters (the six EVE task notebooks and custom_task.ipynb)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

from evekit.errors import ParameterError
from evekit.paths import safe_name
from evekit.repeats import check_reducer
from evekit.runs.params import (Client, Clustered, ExpertLabelled, Judging, OnTask, Output, Params, SeedLimit,
                               ShowsValidation, param)
from evekit.tasks import SCORING, TASKS, supports_logprobs
from evekit.types import check_api_key_env

__all__ = ["TaskParams", "Repeated"]


@dataclass(kw_only=True)
class Repeated(Params):
    """A task run's repeats (evekit.repeats): intervals that include run-to-run variance. Declared
    before `Clustered` among TaskParams' bases so the parameters cell lists them first."""

    repeats: int = param(1, help="answers per item; the interval resamples items with all their repeats",
                         group="repeats", minimum=1)
    repeat_over: Literal["sampling", "fewshot", "both"] = param(
        "sampling", help='what varies between repeats: "sampling" (a seed per repeat; needs temperature > 0), '
        '"fewshot" (a fresh few-shot draw per repeat) or "both"', group="repeats")
    reducer: str = param("mean", help='one value per item from its repeats: "mean", "mode", "pass_at_k", '
                         '"pass_all_k" (or pass_at_<j>, pass_all_<j>)', group="repeats")


@dataclass(kw_only=True)
class TaskParams(OnTask, SeedLimit, ShowsValidation, ExpertLabelled, Judging, Clustered, Repeated, Client, Output):
    """Everything one task notebook needs; the parameter contract of the task notebooks."""

    task_file: str | None = param(None, help="evekit task YAML or an Inspect AI eval.yaml", group="what",
                                  only="custom", path=True)
    model_name: str = param(help="the model's name at the endpoint (and in outputs/)", group="model")
    base_url: str = param(help="any OpenAI-compatible endpoint", group="model")
    api_key_env: str | None = param(None, help="NAME of the environment variable holding the key", group="model")
    api: Literal["chat", "completions"] = param("chat", help='"chat" or "completions"', group="model")
    temperature: float = param(0.0, help="0.0: greedy", group="model", minimum=0)
    max_tokens: int | None = param(None, help="None: the task's EVE default, at most 2048", group="model",
                                   minimum=1)
    num_fewshot: int | None = param(None, help="None: the EVE default of the task", group="model", minimum=0)
    fewshot_sampler: Literal["first_n", "random"] = param("first_n", help='"first_n" (EVE) or "random"',
                                                          group="model")
    level: Literal["binary", "hard_spans", "soft_spans", "all"] = param(
        "binary", help='hallucination detection: "binary" (EVE level 1), "hard_spans", "soft_spans" (the '
        'hallucinated phrases, scored as Mu-SHROOM scores them) or "all"', group="what",
        only="hallucination_detection")
    dataset: str | None = param(None, help="a local file or a hub id", group="data")
    split: str | None = param("train", help="split of a hub dataset", group="data")
    scoring: str | None = param(None, help='"text", "logprobs" or "both" (None: the task\'s own, "text" for EVE '
                                "tasks)", group="data")
    # Shuffled options (evekit.robustness), after the repeats and cluster_by of the bases: multiple-choice
    # scores that survive a shuffle.
    permutations: int = param(0, help="multiple choice: also ask each item with its options shuffled, k seeded "
                              "orders (0: off); adds robust accuracy and consistency", group="repeats", minimum=0)
    choices_only: bool = param(False, help="multiple choice: add the choices-only baseline (question withheld)",
                               group="repeats")
    fewshot_split: str | None = param(None, help="few-shot examples from this split of the dataset (None: the "
                                      "evaluated split; an item is never a shot in its own prompt)",
                                      group="repeats")
    # Bring your own data: the file's column names for the task's schema (None: the schema's own).
    input_column: str | None = param(None, help="your file's column names for the task's schema (None: the "
                                     "schema's)", group="mapping")
    target_column: str | None = param(None, help="None: the schema's", group="mapping")
    choices_column: str | list[str] | None = param(None, help="one list column, or a list of columns holding one "
                                                   "choice each", group="mapping")
    context_columns: list[str] | None = param(None, help="list of columns holding context documents", group="mapping")
    # Breakdowns: every metric per value of one column of the dataset (e.g. "topic").
    group_by: str | None = param(None, help="a dataset column: every metric per value of it (None: no breakdown)",
                                 group="mapping")

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]) -> "TaskParams":
        """`from_notebook` under its former name."""
        return cls.from_notebook(namespace)  # type: ignore[return-value]

    def check(self) -> None:
        super().check()
        if self.task not in TASKS and self.task_file is None:
            raise ParameterError(f"unknown task {self.task!r}; valid tasks: {', '.join(TASKS)}")
        if self.split is None and self.task_file is None:
            raise ParameterError("parameter split=None: only a custom task may leave its split to its task file")
        try:
            check_api_key_env(self.api_key_env)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        for name in ("choices_column", "context_columns"):
            value = getattr(self, name)
            if isinstance(value, (list, tuple)) and not (value and all(isinstance(v, str) and v for v in value)):
                raise ParameterError(f"parameter {name}={value!r} must be a non-empty list of column names")
        if self.scoring is not None:
            if self.scoring not in SCORING:
                raise ParameterError(f"scoring={self.scoring!r} is not valid; use one of: {', '.join(SCORING)}")
            if self.scoring != "text" and self.task in TASKS and not supports_logprobs(self.task):
                raise ParameterError(f"scoring={self.scoring!r} needs a multiple-choice (one answer) or "
                                     f"classification task; {self.task} is not one")
        try:
            check_reducer(self.reducer)
        except ParameterError as exc:
            raise ParameterError(f"parameter reducer: {exc}") from None
        if self.repeats > 1 and self.repeat_over in ("sampling", "both") and self.temperature == 0:
            raise ParameterError(f"repeats={self.repeats} with repeat_over={self.repeat_over!r} at temperature=0 "
                                 "gives the same answer every time: set temperature > 0, or repeat_over='fewshot'")
        if self.reducer != "mean" and self.repeats == 1:
            raise ParameterError(f"reducer={self.reducer!r} needs repeats > 1")
        kind = TASKS[self.task].kind if self.task in TASKS else None
        for name in ("permutations", "choices_only"):
            if getattr(self, name) and kind is not None and kind not in ("multiple_choice", "multiple_answer"):
                raise ParameterError(f"parameter {name} applies to multiple-choice tasks; {self.task} is {kind}")
        if self.permutations and self.repeats > 1:
            raise ParameterError("permutations and repeats together are not supported: run them as two runs")
        if self.level != "binary" and self.task != "hallucination_detection":
            raise ParameterError(f"parameter level={self.level!r} applies to hallucination_detection, not {self.task}")
        if self.expert_labels is not None:
            if not self.judges:
                raise ParameterError("parameter expert_labels corrects judged scores: set judges too")
            if not isinstance(self.expert_labels, str):
                raise ParameterError("parameter expert_labels: a task run takes one sheet (a file name)")
        if self.group_by is not None and not self.group_by.strip():
            raise ParameterError("parameter group_by='' must name a column of the dataset, or be None")

    @property
    def out_dir(self) -> Path:
        # The readable model id stays in the files; folder names are made safe (no `/`, no `..`).
        return self.run_dir / safe_name(self.model_name) / safe_name(self.task)
