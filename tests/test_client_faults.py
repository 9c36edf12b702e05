"""Fault tolerance against the stub: injected 429/500/hangs, Retry-After, kill and resume."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from stub_server import StubServer  # noqa: E402

from evekit.cache import ResponseCache, cache_key  # noqa: E402
from evekit.client import ModelClient  # noqa: E402
from evekit.types import GenerationRequest  # noqa: E402

MODEL = "stub-model"
FAST = dict(timeout=0.4, max_retries=3, backoff=0.01, max_backoff=0.05, progress=False)


def reqs(n: int, prefix: str = "item") -> list[GenerationRequest]:
    return [GenerationRequest(messages=({"role": "user", "content": f"{prefix} {i}"},), max_tokens=8)
            for i in range(n)]


def test_injected_faults_every_sample_answered_or_failed_none_lost(tmp_path):
    """20% of attempts answer 429 (Retry-After), 500 or hang past the timeout."""
    requests = reqs(100) + [GenerationRequest(prompt="always broken [[fail]]")]
    with StubServer(latency=0.005, fault_rate=0.2, hang=2.0, retry_after=0.02, seed=3) as stub:
        c = ModelClient(MODEL, stub.base_url, concurrency=16, cache_dir=tmp_path, **FAST)
        res = c.generate(requests)
        stats = stub.stats()
    assert len(res) == len(requests)
    faults = stats["faults"]
    assert faults.get("429", 0) > 0 and faults.get("500", 0) > 0 and faults.get("hang", 0) > 0
    for i, r in enumerate(res[:100]):  # each answer belongs to its own request, or failed with a reason
        assert (r.text == f"echo: item {i}") != r.failed
    bad = res[100]
    assert bad.failed and bad.text is None
    assert bad.error.startswith(f"HTTP 500 from {stub.base_url} (model {MODEL}) after 3 retries:")
    u = c.usage
    # every HTTP attempt the stub saw is either a first attempt or a counted retry
    assert u.requests == len(requests) and u.requests + u.retries == stats["total"]
    assert u.failures == sum(r.failed for r in res) >= 1
    assert u.retries >= sum(faults.values()) - 3  # the broken prompt's 4th failure is not retried
    with ResponseCache(tmp_path) as cache:  # answers cached, failures not
        assert len(cache) == sum(not r.failed for r in res)


def test_retry_after_is_honoured():
    with StubServer(fault_rate=1.0, faults=("429",), retry_after=0.25) as stub:
        c = ModelClient(MODEL, stub.base_url, max_retries=2, backoff=0.001, max_backoff=0.001,
                        progress=False)
        t = time.perf_counter()
        [r] = c.generate(reqs(1))
        elapsed = time.perf_counter() - t
        assert stub.stats()["total"] == 3
    assert 0.5 <= elapsed < 2.0  # two waits of Retry-After, not the 1 ms backoff
    assert r.failed and "HTTP 429" in r.error and "after 2 retries" in r.error
    assert c.usage.retries == 2 and c.usage.failures == 1


def test_timeout_is_a_recorded_failure_and_the_run_goes_on(tmp_path):
    with StubServer(latency=0.005, hang=3.0) as stub:
        c = ModelClient(MODEL, stub.base_url, timeout=0.3, max_retries=1, backoff=0.01,
                        cache_dir=tmp_path, progress=False)
        t = time.perf_counter()
        slow, ok = c.generate([GenerationRequest(prompt="slow [[hang]]"), GenerationRequest(prompt="fine")])
        assert time.perf_counter() - t < 2.0
        assert ok.text == "echo: fine"
        assert slow.failed and slow.error == (
            f"no answer from {stub.base_url} (model {MODEL}) within 0.3 s after 1 retry")
        # a failure is not cached: the next run tries again, and only that one
        stub.reset()
        c.generate([GenerationRequest(prompt="slow [[hang]]"), GenerationRequest(prompt="fine")])
        assert stub.stats()["requests"] == {"slow [[hang]]": 2}


def test_client_error_is_not_retried(tmp_path):
    with StubServer() as stub:
        c = ModelClient(MODEL, stub.base_url, progress=False, max_retries=4, backoff=0.01)
        too_long, fine = c.generate([GenerationRequest(prompt="huge [[bad_request]]"),
                                     GenerationRequest(prompt="fine")])
        assert stub.stats()["requests"]["huge [[bad_request]]"] == 1
    assert too_long.failed and "HTTP 400" in too_long.error and "maximum context length" in too_long.error
    assert "retr" not in too_long.error and fine.text == "echo: fine"


def test_a_500_that_rejects_the_response_format_is_not_retried():
    with StubServer() as stub:
        c = ModelClient(MODEL, stub.base_url, progress=False, max_retries=4, backoff=0.01)
        [r] = c.generate([GenerationRequest(prompt="[[bad_format]]",
                                            response_format={"type": "json_schema", "json_schema": {}})])
        assert stub.stats()["requests"] == {"[[bad_format]]": 1}
    assert r.failed and r.error.startswith(f"HTTP 500 from {stub.base_url} (model {MODEL}): ")
    assert "literal_error" in r.error and c.usage.retries == 0


CHILD = textwrap.dedent("""
    import sys
    from evekit.client import ModelClient
    from evekit.types import GenerationRequest
    base_url, cache_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reqs = [GenerationRequest(messages=({"role": "user", "content": f"item {i}"},), max_tokens=8)
            for i in range(n)]
    ModelClient("stub-model", base_url, concurrency=4, cache_dir=cache_dir, progress=False).generate(reqs)
""")


def test_killed_run_resumes_with_only_the_missing_requests(tmp_path):
    n, kill_after = 100, 40
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with StubServer(latency=0.02) as stub:
        child = subprocess.Popen([sys.executable, str(script), stub.base_url, str(tmp_path / "c"), str(n)])
        try:
            deadline = time.monotonic() + 30
            while sum(stub.stats()["answered"].values()) < kill_after:
                assert child.poll() is None, "the child finished before it could be killed"
                assert time.monotonic() < deadline, "the child never got going"
                time.sleep(0.01)
            answered_at_kill = sum(stub.stats()["answered"].values())
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL

        requests = reqs(n)
        with ResponseCache(tmp_path / "c") as cache:
            cached = cache.keys()
        done = {f"item {i}" for i, r in enumerate(requests) if cache_key(MODEL, r) in cached}
        # written as they completed: all but the few in flight at the kill are on disk
        assert answered_at_kill - 8 <= len(done) < n

        stub.reset()
        c = ModelClient(MODEL, stub.base_url, concurrency=4, cache_dir=tmp_path / "c", progress=False)
        res = c.generate(requests)
        sent = stub.stats()["requests"]
    assert set(sent) == {f"item {i}" for i in range(n)} - done and all(v == 1 for v in sent.values())
    assert [r.text for r in res] == [f"echo: item {i}" for i in range(n)]
    assert c.usage.cache_hits == len(done) and c.usage.requests == n - len(done)


_SHARED_CACHE_SCRIPT = textwrap.dedent("""
    import sys, time
    from evekit.client import ModelClient
    from evekit.types import GenerationRequest
    url, cache, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    time.sleep(max(0.0, start - time.time()))  # both processes begin together
    c = ModelClient("stub-model", url, concurrency=4, cache_dir=cache, timeout=5, max_retries=1, progress=False)
    res = c.generate([GenerationRequest(messages=({"role": "user", "content": f"shared {i}"},), max_tokens=8)
                      for i in range(20)])
    assert all(r.text == f"echo: shared {i}" for i, r in enumerate(res)), [r.error for r in res]
    print("requests", c.usage.requests, "hits", c.usage.cache_hits)
""")


def test_two_processes_on_one_cache_send_each_call_once(tmp_path):
    """A call in flight in one process is not sent again by another that shares the cache."""
    script = tmp_path / "worker.py"
    script.write_text(_SHARED_CACHE_SCRIPT)
    with StubServer(latency=0.25) as stub:
        start = time.time() + 3.0  # time for both interpreters to import evekit
        procs = [subprocess.Popen([sys.executable, str(script), stub.base_url, str(tmp_path / "cache"), str(start)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        stats = stub.stats()
    assert all(p.returncode == 0 for p in procs), outs
    assert stats["total"] == 20, stats["requests"]  # 40 without the claims
    sent = [int(out.split()[1]) for out, _ in outs]
    assert sum(sent) == 20 and min(sent) > 0  # both did work, neither repeated the other's
    assert ResponseCache(tmp_path / "cache")._db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_a_claim_of_a_dead_process_is_taken_over(tmp_path):
    cache = ResponseCache(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    import socket
    cache._db.execute("INSERT INTO claims VALUES (?,?,?,?,?)", ("k1", "ghost", socket.gethostname(), pid,
                                                                time.time() + 3600))
    assert cache.claim_many(["k2"], "alive", ttl=3600) == {"k2"}  # a run of this process, still sending
    cache._db.execute("INSERT INTO claims VALUES (?,?,?,?,?)", ("k3", "late", "other-host", 1, time.time() - 1))
    assert cache.claim_many(["k1", "k2", "k3", "k4"], "me", ttl=60) == {"k1", "k3", "k4"}
    assert cache.claimed("k2") and cache.claimed("k1")
    cache.release("me")
    assert not cache.claimed("k1") and cache.claimed("k2")
    cache.release("alive")
    assert not cache.claimed("k2")


def test_a_claim_left_by_an_ended_run_of_this_process_blocks_nobody(tmp_path, monkeypatch):
    """A run whose release failed (a full disk) leaves its claims behind, under this process's live
    pid: once that owner is done they are stale, not held for their whole time to live."""
    import sqlite3
    from contextlib import contextmanager

    from evekit.errors import CacheError

    cache = ResponseCache(tmp_path)
    assert cache.claim_many(["k"], "ended-run", ttl=3600) == {"k"}
    assert cache.claimed("k") and cache.claim_many(["k"], "next-run", ttl=60) == set()
    real = cache._transaction

    @contextmanager
    def full_disk():
        with real():
            raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(cache, "_transaction", full_disk)
    try:
        cache.release("ended-run")
    except CacheError as e:
        assert "no space left" in str(e) and str(cache.path) in str(e)
    else:
        raise AssertionError("the release was expected to fail")
    monkeypatch.setattr(cache, "_transaction", real)
    assert cache._db.execute("SELECT owner FROM claims").fetchall() == [("ended-run",)]  # the row stayed
    assert not cache.claimed("k")
    assert cache.claim_many(["k"], "next-run", ttl=60) == {"k"}
    cache.release("next-run")
    cache.close()
