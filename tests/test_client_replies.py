"""Replies the client must not mistake for something else: tool calls without text, runaway replies,
and base URLs that carry a key (refused before anything is sent)."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import pytest
from aiohttp import web

from evekit.cache import ResponseCache, export_cache
from evekit.client import MAX_REPLY_CHARS, ModelClient
from evekit.errors import ParameterError
from evekit.structured import ask_json
from evekit.tasks import get_task, score_samples
from evekit.data import Item
from evekit.types import GenerationRequest, GenerationResult

MODEL = "m"
TOOL_CALL = {"id": "call_1", "type": "function",
             "function": {"name": "get_answer", "arguments": '{"letter": "B"}'}}
HUGE = "word " * 1_000_000  # 5 MB


def _reply(prompt: str) -> dict[str, Any]:
    if "[[tools]]" in prompt:
        message = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
        return {"choices": [{"message": message, "finish_reason": "tool_calls"}]}
    if "[[huge]]" in prompt:
        return {"choices": [{"message": {"role": "assistant", "content": HUGE, "reasoning_content": HUGE},
                             "finish_reason": "stop"}], "usage": {"completion_tokens": 1_000_000}}
    return {"choices": [{"message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"}]}


class Server:
    """An OpenAI-compatible chat endpoint in a thread, answering by markers in the last message."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.headers: list[Any] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def handler(request: web.Request) -> web.Response:
            body = await request.json()
            self.seen.append(body)
            self.headers.append(request.headers.copy())
            return web.json_response(_reply(body["messages"][-1]["content"]))

        async def start() -> None:
            app = web.Application(client_max_size=2**26)
            app.router.add_post("/v1/chat/completions", handler)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
            await web.SockSite(self._runner, sock).start()
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def chat(text: str) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=8)


def test_a_reply_of_tool_calls_only_is_recorded_as_such_cached_and_replayed(server, tmp_path):
    c = ModelClient(MODEL, server.base_url, cache_dir=tmp_path / "c", progress=False)
    [r] = c.generate([chat("Which letter? [[tools]]")])
    assert not r.failed and r.text == "" and r.finish_reason == "tool_calls"
    assert r.tool_calls == [{"name": "get_answer", "arguments": '{"letter": "B"}'}]
    assert r.note == 'the reply is tool calls only, no text: get_answer({"letter": "B"})'
    replay = ModelClient(MODEL, "http://127.0.0.1:9/v1", cache_dir=tmp_path / "c", offline=True, progress=False)
    [again] = replay.generate([chat("Which letter? [[tools]]")])
    assert again.cached and again.tool_calls == r.tool_calls and again.note == r.note
    export_cache(tmp_path / "c", tmp_path / "rec.jsonl")
    [line] = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert line["response"]["tool_calls"] == r.tool_calls and "clipped" not in line["response"]
    # a plain answer's record has neither field: exports made before them stay byte for byte the same
    c.generate([chat("plain")])
    export_cache(tmp_path / "c", tmp_path / "rec2.jsonl")
    plain = [json.loads(x) for x in (tmp_path / "rec2.jsonl").read_text().splitlines()
             if "plain" in x][0]["response"]
    assert set(plain) == {"text", "reasoning", "raw", "prompt_tokens", "completion_tokens", "finish_reason"}


def test_a_tool_call_reply_is_unparsed_with_its_own_reason_not_an_empty_answer(server):
    task = get_task("mcqa_single_answer")
    item = Item(doc_id=0, question="Which band?", target="B",
                fields={"choices": ["L", "C"], "labels": ["A", "B"], "gold": ["B"]})
    c = ModelClient(MODEL, server.base_url, progress=False)
    [r] = c.generate([chat("[[tools]]")])
    df = score_samples(task, [item], [r])
    row = df.iloc[0]
    assert bool(row["unparsed"]) and not bool(row["failed"])
    assert row["unparsed_reason"].startswith("the reply is tool calls only, no text: get_answer(")
    empty = score_samples(task, [item], [GenerationResult(text="")]).iloc[0]
    assert empty["unparsed_reason"] != row["unparsed_reason"]  # an empty answer keeps its own wording


def test_a_judge_that_replies_with_tool_calls_abstains_with_that_reason(server):
    schema = {"type": "object", "properties": {"verdict": {"enum": [0, 1]}}, "required": ["verdict"]}
    c = ModelClient(MODEL, server.base_url, progress=False, max_retries=0)
    [answer] = ask_json(c, [[{"role": "user", "content": "verdict? [[tools]]"}]], schema, max_tokens=8,
                        methods=("json_object",))
    assert answer.parsed is None and "tool calls only" in answer.error and "empty reply" not in answer.error


def test_a_runaway_reply_is_cut_and_marked_everywhere(server, tmp_path):
    c = ModelClient(MODEL, server.base_url, cache_dir=tmp_path / "c", progress=False)
    [r] = c.generate([chat("go on [[huge]]")])
    assert not r.failed and r.clipped == len(HUGE)
    assert len(r.text) == len(r.raw) == len(r.reasoning) == MAX_REPLY_CHARS == 100_000
    assert r.text == HUGE[:MAX_REPLY_CHARS]
    assert r.note == f"the reply had {len(HUGE):,} characters: cut at the first 100,000"
    with ResponseCache(tmp_path / "c") as cache:  # the cache holds the cut reply, and replays the mark
        [stored] = cache.get_many(list(cache.keys())).values()
    assert stored.clipped == len(HUGE) and len(stored.raw) == MAX_REPLY_CHARS
    assert (tmp_path / "c" / "cache.sqlite").stat().st_size < 2_000_000
    task = get_task("open_ended")
    item = Item(doc_id=0, question="Q", target="A", fields={"reference": "A"})
    row = score_samples(task, [item], [r], embeddings=False).iloc[0]
    assert bool(row["truncated"]) and len(row["response"]) == MAX_REPLY_CHARS


def test_a_short_reply_is_not_marked(server):
    [r] = ModelClient(MODEL, server.base_url, progress=False).generate([chat("plain")])
    assert r.text == "B" and r.clipped is None and r.tool_calls is None and r.note is None


SECRET = "sk-SENTINEL-url-1234"


@pytest.mark.parametrize("url", [
    f"http://user:{SECRET}@127.0.0.1:8080/v1",
    f"http://{SECRET}@127.0.0.1:8080/v1",
    f"http://127.0.0.1:8080/v1?key={SECRET}",
    f"http://127.0.0.1:8080/v1?api-version=1&api_key={SECRET}",
    f"http://127.0.0.1:8080/v1?access_token={SECRET}",
    f"https://example.com/{SECRET}/v1",
    "http://127.0.0.1:8080/v1?sig=abc",
])
@pytest.mark.parametrize("offline", [False, True])
def test_a_base_url_with_a_key_is_refused_before_anything_is_sent(url, offline, tmp_path):
    with pytest.raises(ParameterError) as e:
        ModelClient(MODEL, url, cache_dir=tmp_path, offline=offline, progress=False)
    msg = str(e.value)
    assert SECRET not in msg and "sig=abc" not in msg
    assert "environment variable" in msg and "api_key_env" in msg and "***" in msg


def test_a_key_that_the_environment_puts_into_the_url_is_refused_too(monkeypatch):
    monkeypatch.setenv("EVEKIT_TEST_URL", f"http://u:{SECRET}@127.0.0.1:1/v1")
    with pytest.raises(ParameterError, match="carries a credential") as e:
        ModelClient(MODEL, "${EVEKIT_TEST_URL}", progress=False)
    assert SECRET not in str(e.value)


def test_an_ordinary_url_is_accepted():
    ModelClient(MODEL, "https://api.example.com/v1?api-version=2024-06-01", progress=False)


def test_the_environments_proxy_is_used_as_before(server, monkeypatch):
    """HTTP(S)_PROXY / NO_PROXY from the environment, as openai's HTTP client honoured them: a base URL
    that does not resolve is reached through the proxy (the test server answers as one)."""
    proxy = server.base_url.rsplit("/v1", 1)[0]
    monkeypatch.setenv("HTTP_PROXY", proxy.replace("http://", "http://someone:pw@"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    [r] = ModelClient(MODEL, "http://model-host.invalid/v1", progress=False, max_retries=0).generate([chat("via")])
    assert r.text == "B", r.error
    seen = server.headers[-1]
    assert seen.getall("Proxy-Authorization") == ["Basic c29tZW9uZTpwdw=="], seen  # someone:pw, never the key
    assert seen["Authorization"] == "Bearer EMPTY" and seen["User-Agent"].startswith("evekit/")
    monkeypatch.setenv("NO_PROXY", "model-host.invalid")
    with pytest.raises(Exception, match="nothing answered at http://model-host.invalid/v1"):
        ModelClient(MODEL, "http://model-host.invalid/v1", progress=False, max_retries=0).generate([chat("direct")])
