"""ModelClient against the real embedded llama.cpp server (SmolLM2-135M-Instruct)."""
from __future__ import annotations

import pytest

from evekit.client import ModelClient
from evekit.types import GenerationRequest

MODEL = "smollm2-135m-instruct"


@pytest.mark.integration
def test_chat_and_completions_then_cache_hit(embedded_server, tmp_path):
    reqs = [
        GenerationRequest(messages=({"role": "user", "content": "Name one Earth-observation satellite."},),
                          max_tokens=24, seed=0),
        GenerationRequest(prompt="Sentinel-2 is a satellite mission that", max_tokens=24, seed=0),
    ]
    client = ModelClient(MODEL, embedded_server, cache_dir=tmp_path, concurrency=2, timeout=120,
                         progress=False)
    first = client.generate(reqs)
    for r in first:
        assert not r.failed, r.error
        assert isinstance(r.text, str) and r.text.strip()
        assert r.completion_tokens > 0 and r.finish_reason in ("stop", "length")
    assert (client.usage.requests, client.usage.cache_hits) == (2, 0)

    again = ModelClient(MODEL, embedded_server, cache_dir=tmp_path, progress=False).generate(reqs)
    assert all(r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in first]
    replay = ModelClient(MODEL, "http://127.0.0.1:1/v1", cache_dir=tmp_path, offline=True, progress=False)
    assert [r.text for r in replay.generate(reqs)] == [r.text for r in first]
