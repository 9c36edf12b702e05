"""A stand-in for ModelClient in tests (the model or one judge): answers from a function, counts calls."""
from __future__ import annotations

from typing import Callable

from evekit.types import GenerationRequest, GenerationResult, Usage


class ScriptedClient:
    """`respond(request)` -> str | GenerationResult; every request is kept in `calls`."""

    def __init__(self, respond: Callable[[GenerationRequest], "str | GenerationResult"]) -> None:
        self.respond = respond
        self.calls: list[GenerationRequest] = []
        self.usage = Usage()

    def generate(self, requests, desc=""):
        out = []
        for req in requests:
            self.calls.append(req)
            self.usage.requests += 1
            r = self.respond(req)
            out.append(r if isinstance(r, GenerationResult) else GenerationResult(text=r, raw=r))
        return out
