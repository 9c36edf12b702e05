"""The model calls of one task run, as one list: `TaskRun.model_calls()`.

`TaskRun.generate` sends exactly these steps, in this order, and `evekit plan` counts what they
send (it plays `generate` with a client that sends nothing), so the plan and the run cannot
disagree on which calls a design makes: repeats, option orders, the choices-only baseline, the
hallucination span levels, log-probability scoring and JSON answers are each a step or part of one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from evekit.types import GenerationRequest, GenerationResult

__all__ = ["CallStep", "ANSWERS", "SPANS", "LOGPROBS", "CHOICES_ONLY"]

# The steps' names (the answers the task is scored on come first, whatever their step).
ANSWERS, SPANS, LOGPROBS, CHOICES_ONLY = "answers", "spans", "logprobs", "choices_only"

# send(client, desc, on_result) -> one result per request, in order; on_result(i, result) as each lands
Send = Callable[[Any, str, "Callable[[int, GenerationResult], None] | None"], list[GenerationResult]]


@dataclass(frozen=True)
class CallStep:
    """One group of model calls of `TaskRun.generate`.

    `requests` are the calls as first sent, one per entry of `items`. A `structured` step goes
    through `structured.ask_json`: its requests are the chain's first format, and what follows a
    refused format or an unusable reply (the next format, one reminder) is known only from the
    replies. `judged`: the judges see these answers (one judge call per answer that parses, per
    judge). `label` is the progress bar's suffix."""

    name: str
    requests: tuple[GenerationRequest, ...]
    items: tuple[Any, ...]
    send: Send
    structured: bool = False
    judged: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if len(self.requests) != len(self.items):
            raise ValueError(f"call step {self.name}: {len(self.requests)} requests for {len(self.items)} items")


def plain(requests: Sequence[GenerationRequest]) -> Send:
    """The send of a step whose requests go out as they are (`client.generate`)."""
    requests = list(requests)

    def send(client: Any, desc: str, on_result: Any = None) -> list[GenerationResult]:
        if on_result is None:
            return client.generate(requests, desc=desc)
        return client.generate(requests, desc=desc, on_result=on_result)

    return send
