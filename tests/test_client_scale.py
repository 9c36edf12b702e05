"""ModelClient at scale: bounded tasks, results streamed to the caller and the cache, the one-pass
cache key, what goes over the wire, batched claims."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

from evekit.cache import ResponseCache, cache_key, key_fields, request_key  # noqa: E402
from evekit.client import ModelClient  # noqa: E402
from evekit.types import GenerationRequest  # noqa: E402

MODEL = "stub-model"


def chat(text: str, **kw) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": text}), **kw)


@pytest.mark.parametrize("request_", [
    chat("plain"),
    chat("ünïcode ☃ and \"quotes\"", temperature=0.7, max_tokens=5, stop=("\n", "###"), seed=3),
    GenerationRequest(prompt="Q: 2+2?\nA:", sample_index=2),
    chat("json", response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": {
        "type": "object", "properties": {"verdict": {"enum": [0, 1]}}}}}),
])
def test_the_one_pass_key_is_the_cache_key_and_the_row_is_the_canonical_request(request_):
    key, canonical = request_key(MODEL, request_)
    assert key == cache_key(MODEL, request_)
    assert json.loads(canonical) == key_fields(MODEL, request_)
    assert canonical == json.dumps(key_fields(MODEL, request_), sort_keys=True, ensure_ascii=False,
                                   separators=(",", ":"))


def test_tasks_stay_bounded_and_results_stream_to_the_caller_and_the_cache(tmp_path):
    n, concurrency = 400, 4
    requests = [chat(f"item {i}") for i in range(n)] + [chat("item 7")]  # one duplicate
    seen: list[tuple[int, float, int]] = []  # (index, time, answers on disk then)
    most_tasks = 0

    with StubServer(latency=0.01) as stub:
        client = ModelClient(MODEL, stub.base_url, concurrency=concurrency, cache_dir=tmp_path,
                             progress=False)
        probe = ResponseCache(tmp_path)

        def on_result(i: int, result) -> None:
            rows = len(probe) if len(seen) % 50 == 0 else -1
            seen.append((i, time.perf_counter(), rows))

        async def run():
            nonlocal most_tasks
            done = asyncio.Event()

            async def sample():
                nonlocal most_tasks
                while not done.is_set():
                    most_tasks = max(most_tasks, len(asyncio.all_tasks()))
                    await asyncio.sleep(0.005)

            sampler = asyncio.ensure_future(sample())
            try:
                return await client.agenerate(requests, on_result=on_result)
            finally:
                done.set()
                await sampler

        started = time.perf_counter()
        results = asyncio.run(run())
        ended = time.perf_counter()
        sent = stub.stats()["total"]

    # every result reached the caller once, as the one returned in its place
    assert sorted(i for i, _, _ in seen) == list(range(n + 1))
    assert [r.text for r in results] == [f"echo: {r.messages[-1]['content']}" for r in requests]
    assert sent == n  # the duplicate was sent once
    # streamed: the first answers arrived long before the last, and reached the disk meanwhile
    first, last = seen[0][1], seen[-1][1]
    assert first - started < 0.5 * (ended - started)
    assert any(rows > 0 for _, t, rows in seen if t < last)
    # bounded: a worker per slot, the feeder, connections being opened; never one per request
    assert most_tasks <= 2 * concurrency + 6, most_tasks

    # a replay from the cache streams every result to the caller too
    seen.clear()
    replay = ModelClient(MODEL, "http://127.0.0.1:9/v1", cache_dir=tmp_path, offline=True, progress=False)
    again = replay.generate(requests, on_result=on_result)
    assert sorted(i for i, _, _ in seen) == list(range(n + 1))
    assert [r.text for r in again] == [r.text for r in results] and all(r.cached for r in again)
    probe.close()
    client.close()
    replay.close()


def test_the_headers_and_the_body_are_the_request(tmp_path, monkeypatch):
    """What reaches the server: the key as a bearer token, OpenAI's organisation and project from the
    environment (as the openai package sends them), evekit's user agent, the JSON body."""
    from aiohttp import web

    got: list[tuple[Any, dict]] = []

    async def handler(request: web.Request) -> web.Response:
        got.append((request.headers.copy(), await request.json()))  # case-insensitive
        return web.json_response({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 3, "completion_tokens": 1}})

    async def run() -> list:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        site = web.SockSite(runner, sock)
        await site.start()
        port = sock.getsockname()[1]
        try:
            c = ModelClient(MODEL, f"http://127.0.0.1:{port}/v1", api_key_env="EVEKIT_TEST_KEY",
                            progress=False)
            return await c.agenerate([chat("hi", temperature=0.2, max_tokens=7, stop=("\n",), seed=1)])
        finally:
            await runner.cleanup()

    monkeypatch.setenv("EVEKIT_TEST_KEY", "sk-test-1234")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-test")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-test")
    [result] = asyncio.run(run())
    assert result.text == "ok" and result.prompt_tokens == 3
    headers, body = got[0]
    assert headers["Authorization"] == "Bearer sk-test-1234"
    assert headers["OpenAI-Organization"] == "org-test"
    assert headers["OpenAI-Project"] == "proj-test"
    assert headers["User-Agent"].startswith("evekit/")
    assert not any(k.lower().startswith("x-stainless") for k in headers)
    assert headers["Content-Type"] == "application/json"
    assert body == {"model": MODEL, "temperature": 0.2, "max_tokens": 7, "stop": ["\n"], "seed": 1,
                    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}


def test_claimed_many_sees_live_claims_only(tmp_path):
    cache = ResponseCache(tmp_path)
    host = socket.gethostname()
    assert cache.claim_many(["live"], "other", ttl=60) == {"live"}  # another run of this process, still sending
    cache._db.execute("INSERT INTO claims VALUES (?,?,?,?,?)", ("expired", "other", "elsewhere", 1, time.time() - 1))
    assert cache.claimed_many(["live", "expired", "free"]) == {"live"}
    # a claim on keys nobody holds is one insert; a live claim of another owner is respected
    assert cache.claim_many(["free", "live", "expired"], "me", ttl=60) == {"free", "expired"}
    assert cache.claimed_many(["free", "expired"]) == {"free", "expired"}
    cache.release("me")
    assert cache.claimed_many(["free", "live", "expired"]) == {"live"}
    cache.release("other")
    cache.close()
