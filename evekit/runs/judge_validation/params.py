"""The judge-validation notebook's parameters, checked at once so a typo fails before any judge call."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evekit.errors import ParameterError
from evekit.paths import resolve_path
from evekit.runs.params import check_files, BothOrders, Client, Judging, Output, SeedLimit, param

__all__ = ["ValidationParams", "ValidationConfig", "DEFAULT_LABELS", "POINTWISE_LABELS", "COLUMNS"]

DEFAULT_LABELS = {"pairwise": "data/judge_validation/pairwise.jsonl"}
POINTWISE_LABELS = "data/judge_validation/pointwise.jsonl"
# The label file's columns a user may rename (`<name>_column`).
COLUMNS = ("question", "reference", "answer", "answer_a", "answer_b", "label", "case", "context")


@dataclass(kw_only=True)
class ValidationParams(SeedLimit, Judging, BothOrders, Client, Output):
    """The parameters of the judge-validation notebook: judges of one kind against expert labels."""

    labels: str | None = param(None, help="CSV, JSONL or Parquet of expert labels (None: the bundled set of the "
                               "kind)", group="what", path=True)
    judge_kind: Literal["fact_check", "context", "refusal", "pairwise"] = param(
        "fact_check", help='"fact_check", "context", "refusal" or "pairwise"', group="what")
    question_column: str | None = param(None, help="your file's column names (None: question, reference, answer, "
                                        "...)", group="mapping")
    reference_column: str | None = param(None, help="None: reference", group="mapping")
    answer_column: str | None = param(None, help="None: answer (pointwise)", group="mapping")
    answer_a_column: str | None = param(None, help="None: answer_a (pairwise, shown first)", group="mapping")
    answer_b_column: str | None = param(None, help="None: answer_b (pairwise)", group="mapping")
    label_column: str | None = param(None, help="None: label (1/0 or PASS/FAIL; pairwise A/B/tie)", group="mapping")
    case_column: str | None = param(None, help="None: case (optional)", group="mapping")
    context_column: str | None = param(None, help="None: context (documents; context and refusal kinds)",
                                       group="mapping")

    RENAMED = {"temperature": "judge_temperature", "max_tokens": "judge_max_tokens"}

    def check(self) -> None:
        super().check()
        self.require_judges()
        self.labels = self.labels or DEFAULT_LABELS.get(self.judge_kind, POINTWISE_LABELS)
        if check_files() and not resolve_path(self.labels).is_file():
            raise ParameterError(f"labels: file not found: {self.labels} (tried {Path(self.labels).resolve()} and "
                                 f"{resolve_path(self.labels)})")

    @property
    def pairwise(self) -> bool:
        return self.judge_kind == "pairwise"

    @property
    def columns(self) -> dict[str, str | None]:
        """The label file's column mapping: `<name>_column` -> the user's column (None: the name)."""
        return {f"{c}_column": getattr(self, f"{c}_column") for c in COLUMNS}

    @property
    def labels_path(self) -> Path:
        return resolve_path(self.labels or "")


ValidationConfig = ValidationParams  # its former name
