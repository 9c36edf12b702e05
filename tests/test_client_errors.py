"""Bad configuration and bad responses: one clear line naming model and endpoint, never the key."""
from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

from evekit.cache import export_cache  # noqa: E402
from evekit.client import EndpointError, ModelClient  # noqa: E402
from evekit.types import GenerationRequest  # noqa: E402

MODEL = "stub-model"
SECRET = "sk-SENTINEL-7f3a9c"  # if this string shows up anywhere, the key leaked
FAST = dict(max_retries=1, backoff=0.01, max_backoff=0.02, timeout=2.0, progress=False)


@pytest.fixture(scope="module")
def guarded():
    """A stub that wants the sentinel key and serves only MODEL."""
    with StubServer(api_key=SECRET, models=(MODEL,)) as s:
        yield s


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("EVEKIT_TEST_KEY", SECRET)
    return "EVEKIT_TEST_KEY"


def one_line_naming(msg: str, base_url: str, model: str = MODEL) -> None:
    assert "\n" not in msg and base_url in msg and model in msg and SECRET not in msg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_raises_endpoint_error():
    url = f"http://127.0.0.1:{free_port()}/v1"
    c = ModelClient(MODEL, url, concurrency=4, **FAST)
    with pytest.raises(EndpointError) as e:
        c.generate([GenerationRequest(prompt=f"p{i}") for i in range(8)])
    msg = str(e.value)
    one_line_naming(msg, url)
    assert msg.startswith(f"nothing answered at {url} (model {MODEL}) after 1 retry")
    assert "check that the server is running" in msg
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no traceback wall


def test_wrong_key_401_names_the_variable_not_the_key(guarded, monkeypatch):
    monkeypatch.setenv("EVEKIT_WRONG_KEY", "sk-wrong-" + SECRET[::-1])
    c = ModelClient(MODEL, guarded.base_url, "EVEKIT_WRONG_KEY", **FAST)
    with pytest.raises(EndpointError) as e:
        c.generate([GenerationRequest(prompt="x")])
    msg = str(e.value)
    one_line_naming(msg, guarded.base_url)
    assert "HTTP 401" in msg and "EVEKIT_WRONG_KEY" in msg and SECRET[::-1] not in msg


def test_missing_key_401_says_how_to_pass_one(guarded):
    with pytest.raises(EndpointError, match="no key was sent: pass api_key_env="):
        ModelClient(MODEL, guarded.base_url, **FAST).generate([GenerationRequest(prompt="x")])


def test_401_is_raised_at_once_without_retries(guarded, monkeypatch):
    monkeypatch.delenv("EVEKIT_UNSET", raising=False)
    guarded.reset()
    with pytest.warns(UserWarning, match="EVEKIT_UNSET is not set"):
        c = ModelClient(MODEL, guarded.base_url, "EVEKIT_UNSET", concurrency=1,
                        max_retries=4, progress=False)
    with pytest.raises(EndpointError, match="environment variable EVEKIT_UNSET is not set"):
        c.generate([GenerationRequest(prompt=f"p{i}") for i in range(5)])
    assert c.usage.retries == 0 and c.usage.requests == 1 == guarded.stats()["total"]


def test_unknown_model_404(guarded, key):
    c = ModelClient("no-such-model", guarded.base_url, key, **FAST)
    with pytest.raises(EndpointError) as e:
        c.generate([GenerationRequest(messages=({"role": "user", "content": "hi"},))])
    msg = str(e.value)
    one_line_naming(msg, guarded.base_url, "no-such-model")
    assert "HTTP 404" in msg and f"{guarded.base_url}/models" in msg and "/v1" in msg


def test_wrong_path_404(guarded, key):
    url = guarded.url + "/api"  # e.g. forgot /v1
    with pytest.raises(EndpointError, match=r"HTTP 404 .*unknown model or wrong path"):
        ModelClient(MODEL, url, key, **FAST).generate([GenerationRequest(prompt="x")])


def test_no_choices_and_invalid_json_are_recorded_failures(guarded, key, tmp_path):
    c = ModelClient(MODEL, guarded.base_url, key, cache_dir=tmp_path, **FAST)
    empty, garbage, ok = c.generate([GenerationRequest(prompt="[[no_choices]]"),
                                     GenerationRequest(prompt="[[invalid_json]]"),
                                     GenerationRequest(prompt="fine")])
    assert ok.text == "echo: fine"
    assert empty.failed and empty.error == (
        f"unusable response from {guarded.base_url} (model {MODEL}): the response has no choices")
    assert garbage.failed and garbage.error.startswith(
        f"unusable response from {guarded.base_url} (model {MODEL}) after 1 retry: "
        "not JSON (HTTP 200, body starts '<html>")
    assert c.usage.failures == 2
    # A body that is not JSON is retried like a 5xx; a response without choices is not.
    stats = guarded.stats()["requests"]
    assert stats["[[invalid_json]]"] == FAST["max_retries"] + 1 and stats["[[no_choices]]"] == 1


def test_a_body_that_is_not_json_once_is_retried_and_answered(guarded, key, tmp_path):
    c = ModelClient(MODEL, guarded.base_url, key, cache_dir=tmp_path, **FAST)
    (res,) = c.generate([GenerationRequest(prompt="[[invalid_json_once]] hi")])
    assert not res.failed and res.text == "echo: [[invalid_json_once]] hi"
    assert guarded.stats()["requests"]["[[invalid_json_once]] hi"] == 2 and c.usage.retries == 1


def test_the_key_never_appears_in_results_usage_or_exported_cache(guarded, key, tmp_path):
    c = ModelClient(MODEL, guarded.base_url, key, cache_dir=tmp_path / "c", **FAST)
    res = c.generate([GenerationRequest(prompt=f"q{i}") for i in range(5)]
                     + [GenerationRequest(prompt="[[fail]]"), GenerationRequest(prompt="[[bad_request]]")])
    assert sum(r.failed for r in res) == 2
    export_cache(tmp_path / "c", tmp_path / "rec.jsonl")
    blobs = [repr(res), repr(c), repr(c.usage), str(c.__dict__),
             (tmp_path / "rec.jsonl").read_text(), (tmp_path / "c" / "cache.sqlite").read_bytes().decode("latin-1")]
    assert all(SECRET not in b for b in blobs)


def test_server_going_away_mid_run_raises_after_a_streak():
    with StubServer() as stub:
        url = stub.base_url
        c = ModelClient(MODEL, url, concurrency=2, **FAST)
        assert c.generate([GenerationRequest(prompt="first")])[0].text == "echo: first"
    with pytest.raises(EndpointError) as e:  # the stub is gone now
        c.generate([GenerationRequest(prompt=f"p{i}") for i in range(10)])
    one_line_naming(str(e.value), url)
    assert "stopped answering: 2 requests in a row failed to connect" in str(e.value)
