"""`min_interval` (EVE's `rate_limit_delay`): the least time between the starts of two calls of one
client, measured where the calls arrive (the stub server's arrival times)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from evekit.client import ModelClient
from evekit.types import GenerationRequest

sys.path.insert(0, str(Path(__file__).parent))
from stub_server import StubServer  # noqa: E402


def _requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=({"role": "user", "content": f"question {i}"},), max_tokens=4)
            for i in range(n)]


@pytest.mark.parametrize("interval", [0.0, 0.15])
def test_calls_start_at_least_min_interval_apart_at_any_concurrency(interval):
    with StubServer(latency=0.2) as stub:
        client = ModelClient("stub", stub.base_url, concurrency=4, min_interval=interval, progress=False)
        results = client.generate(_requests(8))
        arrivals = np.diff(sorted(stub.stats()["arrivals"]))
    assert not any(r.failed for r in results) and len(arrivals) == 7
    if interval:  # spaced, though four could be in flight (the first connection's set-up may shorten one gap)
        assert arrivals.sum() >= 7 * interval - 0.05 and np.median(arrivals) >= interval - 0.01
    else:
        assert arrivals.min() < 0.05                                # without it four start together


def test_a_negative_interval_is_refused():
    with pytest.raises(ValueError, match="min_interval"):
        ModelClient("stub", "http://127.0.0.1:9/v1", min_interval=-1)
