"""ModelClient behaviour against the stub server: answers, reasoning, usage, order, Jupyter."""
from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

from evekit.client import ModelClient  # noqa: E402
from evekit.types import GenerationRequest  # noqa: E402

MODEL = "stub-model"


@pytest.fixture(scope="module")
def stub():
    with StubServer(latency=0.005) as s:
        yield s


@pytest.fixture
def fresh(stub):
    stub.reset()
    return stub


def chat(text: str, **kw) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": text}), **kw)


def client(stub, **kw) -> ModelClient:
    kw.setdefault("progress", False)
    return ModelClient(MODEL, stub.base_url, **kw)


def test_chat_and_completions_answers_in_request_order(fresh):
    reqs = [chat(f"q{i}") if i % 2 else GenerationRequest(prompt=f"q{i}") for i in range(40)]
    res = client(fresh, concurrency=5).generate(reqs)
    assert [r.text for r in res] == [f"echo: q{i}" for i in range(40)]
    assert all(r.raw == r.text and r.reasoning is None and r.finish_reason == "stop" for r in res)
    assert all(not r.failed and not r.cached for r in res)


def test_reasoning_fields_and_think_blocks(fresh):
    reqs = [chat("a [[reasoning]]"), chat("b [[reasoning_null]]"), chat("c [[think]]"),
            GenerationRequest(prompt="d [[think]]")]
    r1, r2, r3, r4 = client(fresh).generate(reqs)
    assert (r1.text, r1.reasoning) == ("echo: a [[reasoning]]", "pondering a [[reasoning]]")
    # content null: the model never answered -> empty text (a model failure), reasoning kept
    assert (r2.text, r2.reasoning, r2.raw, r2.failed) == ("", "pondering b [[reasoning_null]]", None, False)
    assert (r3.text, r3.reasoning) == ("echo: c [[think]]", "pondering c [[think]]")
    assert r3.raw.startswith("<think>pondering c")
    assert (r4.text, r4.reasoning) == ("echo: d [[think]]", "pondering d [[think]]")


def test_usage_accounting_and_cache_hits(fresh, tmp_path):
    c = client(fresh, cache_dir=tmp_path)
    reqs = [chat(f"word {i}") for i in range(10)]
    c.generate(reqs)
    u = c.usage
    assert (u.requests, u.cache_hits, u.failures, u.retries) == (10, 0, 0, 0)
    # stub: prompt tokens = words of the last message, completion = words of "echo: ..."
    assert u.prompt_tokens == 10 * 2 and u.completion_tokens == 10 * 3
    res = c.generate(reqs + [chat("new one")])
    assert all(r.cached for r in res[:10]) and not res[10].cached
    assert (c.usage.requests, c.usage.cache_hits) == (11, 10)
    assert fresh.stats()["total"] == 11
    assert c.usage.seconds > 0 and c.usage.as_dict()["tokens"] == u.prompt_tokens + u.completion_tokens


def test_identical_requests_are_sent_once(fresh, tmp_path):
    reqs = [chat("same")] * 5 + [chat("same", sample_index=1)]
    res = client(fresh, cache_dir=tmp_path).generate(reqs)
    assert [r.text for r in res] == ["echo: same"] * 6
    assert len({id(r) for r in res}) == 6  # separate objects, safe to mutate
    assert fresh.stats()["requests"] == {"same": 2}


def test_generate_works_inside_a_running_event_loop(fresh):
    """Jupyter runs an event loop; generate() must still work there."""
    c = client(fresh)

    async def notebook_cell():
        return c.generate([chat("from jupyter")])

    [res] = asyncio.run(notebook_cell())
    assert res.text == "echo: from jupyter"


def test_agenerate_calls_share_one_concurrency_bound(fresh):
    c = client(fresh, concurrency=3)

    async def both():
        return await asyncio.gather(c.agenerate([chat(f"a{i}") for i in range(6)]),
                                    c.agenerate([chat(f"b{i}") for i in range(6)]))

    a, b = asyncio.run(both())
    assert [r.text for r in a + b] == [f"echo: a{i}" for i in range(6)] + [f"echo: b{i}" for i in range(6)]
    assert not c._sessions  # the shared session was closed when the last call ended


def test_max_completion_tokens_fallback(fresh):
    c = client(fresh)
    [res] = c.generate([chat("reasoner [[no_max_tokens]]")])
    assert res.text == "echo: reasoner [[no_max_tokens]]"
    assert c._max_tokens_field == "max_completion_tokens"
    assert fresh.stats()["requests"]["reasoner [[no_max_tokens]]"] == 2
    assert c.usage.requests + c.usage.retries == 2


def test_progress_bar_shows_cached_and_failed(fresh, tmp_path, capsys):
    c = client(fresh, cache_dir=tmp_path, progress=True, max_retries=0)
    c.generate([chat("p1")])
    c.generate([chat("p1"), chat("p2 [[fail]]")], desc="demo")
    err = capsys.readouterr().err
    assert "demo" in err and "cached=1" in err and "failed=1" in err and "2/2" in err


def test_api_key_env_warnings_and_repr(stub, monkeypatch):
    monkeypatch.delenv("EVEKIT_TEST_UNSET_KEY", raising=False)
    with pytest.warns(UserWarning, match="environment variable EVEKIT_TEST_UNSET_KEY is not set"):
        client(stub, api_key_env="EVEKIT_TEST_UNSET_KEY")
    monkeypatch.setenv("EVEKIT_TEST_KEY", "sk-sentinel-abc123")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = client(stub, api_key_env="EVEKIT_TEST_KEY")
        client(stub)  # local server, no key variable: no warning
    assert "EVEKIT_TEST_KEY" in repr(c) and "sk-sentinel" not in repr(c)


@pytest.mark.parametrize("kw, match", [
    ({"base_url": "127.0.0.1:8080/v1"}, "must start with http"),
    ({"concurrency": 0}, "concurrency >= 1"),
    ({"timeout": 0}, "timeout > 0"),
])
def test_bad_settings_are_clear(kw, match):
    args = {"model": MODEL, "base_url": "http://127.0.0.1:1/v1", **kw}
    with pytest.raises(ValueError, match=match):
        ModelClient(**args)


def test_bad_request_object_is_named():
    with pytest.raises(TypeError, match="request 1 is a dict"):
        ModelClient(MODEL, "http://127.0.0.1:1/v1", progress=False).generate(
            [GenerationRequest(prompt="x"), {"prompt": "y"}])
