"""The response cache: key recipe, offline replay, export/import, concurrent writers."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from evekit.cache import (CacheWriter, ResponseCache, cache_key, export_cache, import_cache,
                          key_fields)
from evekit.client import CacheMiss, ModelClient
from evekit.types import GenerationRequest, GenerationResult

MODEL = "smollm2-135m-instruct"
BASE = GenerationRequest(messages=({"role": "user", "content": "What does SAR measure?"},),
                         temperature=0.0, max_tokens=64)


def answer(text: str, **kw) -> GenerationResult:
    return GenerationResult(text=text, raw=text, prompt_tokens=3, completion_tokens=2,
                            finish_reason="stop", **kw)


# -- the key ---------------------------------------------------------------------------------
VARIANTS = {
    "endpoint kind": GenerationRequest(prompt="What does SAR measure?", max_tokens=64),
    "messages": replace(BASE, messages=({"role": "user", "content": "What does SAR measure? "},)),
    "message role": replace(BASE, messages=({"role": "system", "content": "What does SAR measure?"},)),
    "temperature": replace(BASE, temperature=0.7),
    "max_tokens": replace(BASE, max_tokens=65),
    "stop": replace(BASE, stop=("\n",)),
    "seed": replace(BASE, seed=1),
    "response_format": replace(BASE, response_format={"type": "json_object"}),
    "sample_index": replace(BASE, sample_index=1),
}


@pytest.mark.parametrize("field", sorted(VARIANTS))
def test_changing_any_keyed_field_changes_the_key(field):
    assert cache_key(MODEL, VARIANTS[field]) != cache_key(MODEL, BASE)


def test_all_variants_have_distinct_keys_and_model_is_keyed():
    keys = {cache_key(MODEL, r) for r in [BASE, *VARIANTS.values()]}
    assert len(keys) == len(VARIANTS) + 1
    assert cache_key("another-model", BASE) != cache_key(MODEL, BASE)
    prompt_a = GenerationRequest(prompt="a")
    assert cache_key(MODEL, prompt_a) != cache_key(MODEL, GenerationRequest(prompt="b"))


def test_key_is_normalised_and_stable():
    # 0 and 0.0, list and tuple describe the same request.
    assert cache_key(MODEL, replace(BASE, temperature=0)) == cache_key(MODEL, BASE)
    assert cache_key(MODEL, replace(BASE, stop=["x"])) == cache_key(MODEL, replace(BASE, stop=("x",)))
    assert cache_key(MODEL, BASE) == cache_key(MODEL, GenerationRequest(
        messages=[{"content": "What does SAR measure?", "role": "user"}], max_tokens=64))
    assert len(cache_key(MODEL, BASE)) == 64


def test_base_url_is_not_part_of_the_key(tmp_path):
    """A recording made against one port replays against another (embedded server)."""
    with ResponseCache(tmp_path) as cache:
        cache.put(cache_key(MODEL, BASE), key_fields(MODEL, BASE), answer("backscatter"))
    for url in ("http://127.0.0.1:8080/v1", "http://127.0.0.1:9999/v1", "https://api.example.com/v1"):
        client = ModelClient(MODEL, url, cache_dir=tmp_path, offline=True, progress=False)
        [res] = client.generate([BASE])
        assert res.text == "backscatter" and res.cached
        client.close()


# -- offline replay --------------------------------------------------------------------------
def test_offline_replays_hits_and_raises_cachemiss_on_a_miss(tmp_path):
    reqs = [replace(BASE, sample_index=i) for i in range(3)]
    with ResponseCache(tmp_path) as cache:
        for i, r in enumerate(reqs[:2]):
            cache.put(cache_key(MODEL, r), key_fields(MODEL, r), answer(f"a{i}", reasoning=f"r{i}"))
    client = ModelClient(MODEL, "http://127.0.0.1:1/v1", cache_dir=tmp_path, offline=True, progress=False)
    res = client.generate(reqs[:2])
    assert [r.text for r in res] == ["a0", "a1"] and [r.reasoning for r in res] == ["r0", "r1"]
    assert all(r.cached and r.prompt_tokens == 3 and r.finish_reason == "stop" for r in res)
    assert client.usage.cache_hits == 2 and client.usage.requests == 0
    with pytest.raises(CacheMiss) as e:
        client.generate(reqs)
    msg = str(e.value)
    assert "1 of 3 requests" in msg and "offline=True" in msg and str(tmp_path) in msg
    client.close()


def test_offline_needs_a_cache_dir():
    with pytest.raises(ValueError, match="offline=True needs a cache_dir"):
        ModelClient(MODEL, "http://127.0.0.1:1/v1", offline=True)


def test_failed_results_are_refused(tmp_path):
    with ResponseCache(tmp_path) as cache, pytest.raises(ValueError, match="not cached"):
        cache.put("k", key_fields(MODEL, BASE), GenerationResult(text=None, error="HTTP 500"))


# -- export / import -------------------------------------------------------------------------
def _fill(cache_dir: Path, n: int = 5) -> list[GenerationRequest]:
    reqs = [replace(BASE, sample_index=i) for i in range(n)] + [GenerationRequest(prompt="Ünïcode ✓")]
    with ResponseCache(cache_dir) as cache:
        for i, r in enumerate(reqs):
            cache.put(cache_key(MODEL, r), key_fields(MODEL, r),
                      answer(f"answer {i} — é", reasoning="thought" if i % 2 else None))
    return reqs


def test_export_is_sorted_deterministic_and_reviewable(tmp_path):
    reqs = _fill(tmp_path / "c")
    n = export_cache(tmp_path / "c", tmp_path / "a.jsonl")
    export_cache(tmp_path / "c", tmp_path / "b.jsonl")
    assert n == len(reqs)
    data = (tmp_path / "a.jsonl").read_bytes()
    assert data == (tmp_path / "b.jsonl").read_bytes()
    lines = data.decode("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["key"] for r in records] == sorted(r["key"] for r in records)
    assert "Ünïcode ✓" in data.decode("utf-8")  # readable, not \\u-escaped
    rec = next(r for r in records if r["prompt"] is None)
    assert rec["model"] == MODEL and rec["api"] == "chat" and rec["messages"][0]["role"] == "user"
    assert set(rec["response"]) == {"text", "reasoning", "raw", "prompt_tokens", "completion_tokens",
                                    "finish_reason"}


def test_export_import_round_trip_is_idempotent(tmp_path):
    reqs = _fill(tmp_path / "c")
    export_cache(tmp_path / "c", tmp_path / "rec.jsonl")
    assert import_cache(tmp_path / "d", tmp_path / "rec.jsonl") == len(reqs)
    assert import_cache(tmp_path / "d", tmp_path / "rec.jsonl") == 0
    with ResponseCache(tmp_path / "c") as a, ResponseCache(tmp_path / "d") as b:
        keys = [cache_key(MODEL, r) for r in reqs]
        assert a.get_many(keys) == b.get_many(keys)
        assert len(b) == len(reqs)
    export_cache(tmp_path / "d", tmp_path / "rec2.jsonl")
    assert (tmp_path / "rec.jsonl").read_bytes() == (tmp_path / "rec2.jsonl").read_bytes()


def test_jsonl_in_cache_dir_is_imported_on_open_and_replays_offline(tmp_path):
    reqs = _fill(tmp_path / "c")
    (tmp_path / "committed").mkdir()
    export_cache(tmp_path / "c", tmp_path / "committed" / "recording.jsonl")
    client = ModelClient(MODEL, "http://127.0.0.1:1/v1", cache_dir=tmp_path / "committed",
                         offline=True, progress=False)
    res = client.generate(reqs)
    assert [r.text for r in res] == [f"answer {i} — é" for i in range(len(reqs))]
    client.close()
    with ResponseCache(tmp_path / "committed") as again:  # second open: no duplicates
        assert len(again) == len(reqs)


def test_import_names_file_line_and_field(tmp_path):
    _fill(tmp_path / "c", n=2)
    export_cache(tmp_path / "c", tmp_path / "rec.jsonl")
    lines = (tmp_path / "rec.jsonl").read_text(encoding="utf-8").splitlines()

    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: not valid JSON"):
        import_cache(tmp_path / "d", bad)

    edited = json.loads(lines[1])
    edited["temperature"] = 1.0
    bad.write_text(lines[0] + "\n" + json.dumps(edited) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: field 'key' does not match"):
        import_cache(tmp_path / "d", bad)

    missing = json.loads(lines[0])
    del missing["max_tokens"]
    bad.write_text(json.dumps(missing) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: missing field\(s\) max_tokens"):
        import_cache(tmp_path / "d", bad)
    with ResponseCache(tmp_path / "d") as d:
        assert len(d) == 0  # a bad file imports nothing


def test_cache_writer_commits_before_close_returns(tmp_path):
    reqs = [replace(BASE, sample_index=i) for i in range(50)]
    cache = ResponseCache(tmp_path)
    writer = CacheWriter(cache)
    for r in reqs:
        writer.put(cache_key(MODEL, r), key_fields(MODEL, r), answer("x"))
    writer.close()
    with ResponseCache(tmp_path) as other:  # a second connection sees every row
        assert len(other) == 50
    writer = CacheWriter(cache)
    writer.put("k", key_fields(MODEL, BASE), GenerationResult(text=None, error="boom"))
    with pytest.raises(ValueError, match="not cached"):
        writer.close()
    cache.close()


# -- several processes -----------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys
    from evekit.cache import ResponseCache, cache_key, key_fields
    from evekit.types import GenerationRequest, GenerationResult
    cache_dir, who = sys.argv[1], sys.argv[2]
    cache = ResponseCache(cache_dir)
    ids = [f"{who}-{i}" for i in range(150)] + [f"shared-{i}" for i in range(50)]
    for i in ids:
        r = GenerationRequest(prompt=i)
        cache.put(cache_key("m", r), key_fields("m", r), GenerationResult(text=f"{who}:{i}"))
    print(len(cache))
""")


def test_two_processes_write_the_same_cache(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "c"), who],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for who in ("a", "b")]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    with ResponseCache(tmp_path / "c") as cache:
        assert len(cache) == 150 + 150 + 50
        shared = cache.get(cache_key("m", GenerationRequest(prompt="shared-7")))
        assert shared is not None and shared.text in ("a:shared-7", "b:shared-7")
        assert cache.get(cache_key("m", GenerationRequest(prompt="b-149"))).text == "b:b-149"


def test_corrupt_cache_file_names_its_path_and_what_to_do(tmp_path):
    from evekit.errors import CacheError, EvekitError

    (tmp_path / "cache.sqlite").write_bytes(b"this is not an SQLite database, it was truncated" * 40)
    with pytest.raises(CacheError, match=r"cache .*cache\.sqlite cannot be used \(file is not a database\)"
                                         r".*mv .*cache\.sqlite .*cache\.sqlite\.corrupt") as err:
        ResponseCache(tmp_path)
    assert isinstance(err.value, EvekitError)


def test_a_refused_format_is_cached_replayed_and_exported(tmp_path):
    """llama.cpp refuses json_schema with HTTP 500: that refusal is recorded, so a replay of the
    structured-output probe needs no network, and the export carries it as a `rejected` line."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stub_server import StubServer

    from evekit.client import ModelClient
    from evekit.structured import ask_json

    schema = {"type": "object", "properties": {"verdict": {"type": "integer", "enum": [0, 1]}},
              "required": ["verdict"]}
    msgs = [[{"role": "user", "content": 'reply {"verdict": 1}'}]]
    with StubServer(reject_json_schema=True) as stub:
        live = ModelClient("m", stub.base_url, cache_dir=tmp_path / "c", max_retries=0, progress=False)
        ask_json(live, msgs, schema, max_tokens=8)
        assert stub.stats()["total"] == 2  # json_schema refused, then json_object answered
    export = tmp_path / "rec.jsonl"
    assert export_cache(tmp_path / "c", export) == 2
    lines = [json.loads(x) for x in export.read_text().splitlines()]
    refused = [x for x in lines if "rejected" in x]
    assert len(refused) == 1 and "HTTP 500" in refused[0]["rejected"] and "response" not in refused[0]
    import_cache(tmp_path / "fresh", export)
    replay = ModelClient("m", "http://127.0.0.1:9/v1", cache_dir=tmp_path / "fresh", offline=True, progress=False)
    (answer,) = ask_json(replay, msgs, schema, max_tokens=8)  # offline: a miss would raise CacheMiss
    assert answer.method == "json_object" and replay.usage.requests == 0


def test_a_cache_written_before_the_later_columns_opens_and_keeps_its_answers(tmp_path):
    """A cache.sqlite from before log-probabilities, tool calls and clipping were kept: its answers
    replay, and it gains the columns."""
    import sqlite3

    key, fields = cache_key(MODEL, BASE), key_fields(MODEL, BASE)
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, request TEXT NOT NULL, text TEXT, reasoning TEXT, "
               "raw TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, finish_reason TEXT, created REAL)")
    db.execute("INSERT INTO responses VALUES (?,?,?,?,?,?,?,?,?)",
               (key, json.dumps(fields, sort_keys=True), "old", None, "old", 3, 2, "stop", 0.0))
    db.commit()
    db.close()
    with ResponseCache(tmp_path) as cache:
        old = cache.get(key)
        assert (old.text, old.logprobs, old.tool_calls, old.clipped) == ("old", None, None, None)
        other = replace(BASE, sample_index=9)
        calls = [{"name": "f", "arguments": "{}"}]
        cache.put(cache_key(MODEL, other), key_fields(MODEL, other), answer("", tool_calls=calls, clipped=123456))
        new = cache.get(cache_key(MODEL, other))
        assert new.tool_calls == calls and new.clipped == 123456
        columns = {r[1] for r in cache._db.execute("PRAGMA table_info(responses)")}
    assert {"logprobs", "tool_calls", "clipped"} <= columns
