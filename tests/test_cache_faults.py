"""The cache under faults: a full disk mid-run (SQLite refusing writes, and a real tmpfs that fills)
shows the real error, loses no answer received, and the next run finds them; a process killed
mid-write leaves a cache the next run opens, with no claim left blocking it."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from stub_server import StubServer  # noqa: E402

from evekit.cache import SPOOL_PREFIX, CacheWriter, ResponseCache, cache_key, key_fields  # noqa: E402
from evekit.client import ModelClient  # noqa: E402
from evekit.errors import CacheError  # noqa: E402
from evekit.types import GenerationRequest, GenerationResult  # noqa: E402

MODEL = "stub-model"


class FullDisk:
    """A stand-in for the cache's SQLite connection that, once `full` is set, fails every write as
    SQLite does when the disk is full: the transaction is rolled back by SQLite itself, then
    `database or disk is full` is raised (a ROLLBACK after that finds no transaction)."""

    WRITES = ("INSERT", "UPDATE", "DELETE")

    def __init__(self, db: sqlite3.Connection, full_after: int = 0) -> None:
        self._db, self.full_after, self.writes = db, full_after, 0

    def _check(self, sql: str) -> None:
        if sql.lstrip().upper().startswith(self.WRITES):
            self.writes += 1
            if self.writes > self.full_after:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")

    def execute(self, sql: str, *args):
        self._check(sql)
        return self._db.execute(sql, *args)

    def executemany(self, sql: str, *args):
        self._check(sql)
        return self._db.executemany(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._db, name)


def reqs(n: int, size: int = 0) -> list[GenerationRequest]:
    pad = " " + "x" * size if size else ""
    return [GenerationRequest(messages=({"role": "user", "content": f"item {i}{pad}"},), max_tokens=8)
            for i in range(n)]


def test_a_full_disk_names_the_file_not_a_failed_rollback(tmp_path):
    cache = ResponseCache(tmp_path)
    cache._db = FullDisk(cache._db)
    r = GenerationRequest(prompt="x")
    with pytest.raises(CacheError) as e:
        cache.put(cache_key(MODEL, r), key_fields(MODEL, r), GenerationResult(text="a"))
    msg = str(e.value)
    assert f"cache {tmp_path / 'cache.sqlite'}: no space left on the device (database or disk is full;" in msg
    assert "bytes free" in msg and "rollback" not in msg
    assert isinstance(e.value.__cause__, sqlite3.OperationalError)


def test_a_write_the_disk_refuses_keeps_its_answers_for_the_next_open(tmp_path):
    # ResponseCache.put_many itself spools (not only CacheWriter): a Batch JSONL import or any other
    # direct caller loses no answer either.
    cache = ResponseCache(tmp_path)
    rs = reqs(80)
    cache.put(cache_key(MODEL, rs[0]), key_fields(MODEL, rs[0]), GenerationResult(text="first", raw="first"))
    cache._db = FullDisk(cache._db)
    items = [(cache_key(MODEL, r), key_fields(MODEL, r), GenerationResult(text=f"a{i}", raw=f"a{i}"))
             for i, r in enumerate(rs) if i]
    with pytest.raises(CacheError) as e:
        cache.put_many(items)
    path, n = e.value.spooled
    assert n == 79 and path.parent == tmp_path and path.name.startswith(SPOOL_PREFIX)
    assert f"the 79 answers were kept in {path} and are imported the next time the cache is opened" in str(e.value)
    cache._db = cache._db._db
    cache.close()
    with ResponseCache(tmp_path) as again:
        got = again.get_many([cache_key(MODEL, r) for r in rs])
    assert len(got) == 80 and got[items[-1][0]].text == "a79" and got[cache_key(MODEL, rs[0])].text == "first"
    assert not list(tmp_path.glob(f"{SPOOL_PREFIX}*"))


def test_when_no_spool_file_takes_them_the_error_says_so(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path)
    cache._db = FullDisk(cache._db)

    def no_room(*_a, **_k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("evekit.cache._write_jsonl", no_room)
    with pytest.raises(CacheError) as e:
        cache.put("k", {"n": 1}, GenerationResult(text="a", raw="a"))
    assert e.value.spooled is None
    assert "1 answer could not be kept in a spool file either" in str(e.value)


def test_the_writer_spools_what_it_could_not_store_and_the_next_open_imports_it(tmp_path):
    cache = ResponseCache(tmp_path)
    cache._db = FullDisk(cache._db, full_after=3)  # three rows go in, then the disk is full
    writer = CacheWriter(cache, interval=0.005)
    rs = reqs(10)
    for i, r in enumerate(rs):
        writer.put(cache_key(MODEL, r), key_fields(MODEL, r), GenerationResult(text=f"a{i}", raw=f"a{i}"))
        time.sleep(0.01)  # answers arrive one by one: some batches before the disk fills, some after
    refused = GenerationRequest(prompt="json please", response_format={"type": "json_schema"})
    writer.put(cache_key(MODEL, refused), key_fields(MODEL, refused),  # a server's refusal is kept too
               GenerationResult(text=None, error="HTTP 500 from x: response_format", rejected=True))
    with pytest.raises(CacheError) as e:
        writer.close()
    msg = str(e.value)
    spools = sorted(tmp_path.glob(f"{SPOOL_PREFIX}*.jsonl"))
    assert spools and "no space left on the device" in msg and str(spools[0]) in msg
    assert "imported the next time the cache is opened" in msg
    cache._db = cache._db._db
    stored = len(cache)
    assert 0 < stored < 10
    cache.close()
    with ResponseCache(tmp_path) as again:  # space again: every answer is there, the spool is gone
        got = again.get_many([cache_key(MODEL, r) for r in rs])
        assert [got[cache_key(MODEL, r)].text for r in rs] == [f"a{i}" for i in range(10)]
        assert again.get(cache_key(MODEL, refused)).rejected
    assert not list(tmp_path.glob(f"{SPOOL_PREFIX}*"))


def test_a_run_whose_cache_fills_stops_and_the_next_run_sends_only_the_rest(tmp_path):
    with StubServer(latency=0.005) as stub:
        c = ModelClient(MODEL, stub.base_url, concurrency=1, cache_dir=tmp_path, progress=False, max_retries=0)
        c.cache._db = FullDisk(c.cache._db, full_after=12)  # claims and answers: a few calls' worth
        with pytest.raises(CacheError) as e:
            c.generate(reqs(40))
        first = dict(stub.stats()["answered"])
        assert 0 < len(first) < 40  # it stopped instead of paying for calls it cannot keep
        msg = str(e.value)
        assert str(tmp_path / "cache.sqlite") in msg and "no space left on the device" in msg
        c.cache._db = c.cache._db._db
        c.close()
        stub.reset()
        again = ModelClient(MODEL, stub.base_url, concurrency=4, cache_dir=tmp_path, progress=False)
        res = again.generate(reqs(40))
        sent = stub.stats()["requests"]
    assert [r.text for r in res] == [f"echo: item {i}" for i in range(40)]
    assert not set(sent) & set(first), "an answer received before the disk filled was paid for twice"
    assert again.usage.cache_hits == len(first) and all(v == 1 for v in sent.values())


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def test_a_real_full_disk_mid_run_keeps_the_answers_and_the_next_run_finds_them(tmp_path, monkeypatch):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "4m"):
        pytest.skip("mounting a small tmpfs needs root (the SQLite-level tests above run everywhere)")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "systmp"))  # where a spool goes when `disk` is full
    spools = tmp_path / "systmp" / "evekit-spool"
    try:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * 3_300_000)  # the disk is mostly full already
        cache_dir = disk / "cache"
        requests = reqs(30, size=20_000)  # each row holds ~40 kB (the prompt, and the echo of it), twice in WAL mode
        with StubServer(latency=0.002) as stub:
            c = ModelClient(MODEL, stub.base_url, concurrency=1, cache_dir=cache_dir, progress=False,
                            max_retries=0)
            with pytest.raises(CacheError) as e:
                c.generate(requests)
            c.close()
            first = dict(stub.stats()["answered"])
            msg = str(e.value)
            assert f"cache {cache_dir / 'cache.sqlite'}: no space left on the device" in msg, msg
            assert "rollback" not in msg and "kept in" in msg and str(spools) in msg
            assert 0 < len(first) < 30
            assert list(spools.glob(f"*/{SPOOL_PREFIX}*.jsonl"))  # beside the cache there was no room
            filler.unlink()  # room again
            stub.reset()
            again = ModelClient(MODEL, stub.base_url, concurrency=4, cache_dir=cache_dir, progress=False)
            res = again.generate(requests)
            sent = stub.stats()["requests"]
        assert [r.text for r in res] == [f"echo: {r.messages[0]['content']}" for r in requests]
        assert not {p.split()[1] for p in sent} & {p.split()[1] for p in first}, \
            "an answer received before the disk filled was paid for twice"
        assert not list(spools.glob(f"*/{SPOOL_PREFIX}*.jsonl"))  # imported, then deleted
        again.close()
    finally:  # lazily: a file still open (a failed assertion above) must not leave the mount behind
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from evekit.cache import CacheWriter, ResponseCache, cache_key, key_fields
    from evekit.types import GenerationRequest, GenerationResult
    cache = ResponseCache(sys.argv[1])
    writer = CacheWriter(cache, interval=0.001)
    i = 0
    while True:  # claims and answers, in big transactions, until killed
        batch = [GenerationRequest(prompt=f"p{i + j} " + "y" * 2000) for j in range(200)]
        keys = [cache_key("m", r) for r in batch]
        cache.claim_many(keys, "child", ttl=3600)
        # a call never answered, so claims are held whenever the kill lands (the answers end the others)
        cache.claim_many([cache_key("m", GenerationRequest(prompt=f"held {i}"))], "child", ttl=3600)
        for k, r in zip(keys, batch):
            writer.put(k, key_fields("m", r), GenerationResult(text="z" * 2000))
        if i == 0:
            print("writing", flush=True)
        i += 200
""")


@pytest.mark.parametrize("after", [0.05, 0.3, 0.9])
def test_a_process_killed_mid_write_leaves_a_cache_that_opens_and_blocks_nobody(tmp_path, after):
    script = tmp_path / "child.py"
    script.write_text(KILLED_WRITER)
    child = subprocess.Popen([sys.executable, str(script), str(tmp_path / "c")], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    assert child.stdout.readline().strip() == "writing"
    time.sleep(after)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    t = time.perf_counter()
    with ResponseCache(tmp_path / "c") as cache:
        assert cache._db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        claimed = [k for (k,) in cache._db.execute("SELECT key FROM claims")]
        assert claimed, "the child held claims when it died"
        assert cache.claimed_many(claimed) == set()  # its process is gone: nobody waits for them
        assert cache.claim_many(claimed, "next", ttl=60) == set(claimed)
        n = len(cache)
        rows = cache.get_many(cache.keys())
        assert len(rows) == n and all(r.text == "z" * 2000 for r in rows.values())  # whole rows only
    assert time.perf_counter() - t < 10
