"""Persistent response cache: every model answer is stored on disk the moment it arrives.

Why: evaluation runs are long and endpoints are flaky or paid. With the cache an interrupted
run resumes and sends only the calls that are missing, a rerun of a finished notebook costs
nothing, and a committed JSONL export replays a whole run offline (`offline=True`).

Storage is one SQLite file, `<cache_dir>/cache.sqlite`, in WAL mode with a busy timeout and
one short transaction per answer, so several processes (parallel notebooks, a judge and a
model) can share a cache. Rows are keyed by `cache_key`, a SHA-256 over everything that
changes the answer: endpoint kind, model, messages or prompt, temperature, max_tokens, stop,
seed, response_format and sample_index. The base URL is deliberately NOT part of the key:
the embedded server's port changes between runs and a recording must still replay.
Only successful answers are stored; infrastructure failures are retried on the next run. The
exception is a failure a batch file reported (`record_failures`, used by `evekit batch import`): it
replays as that failed item until a later import answers the call.

`export_cache` writes a sorted, deterministic JSONL (one answer per line, the keyed request
fields in plain view) that can be reviewed in a diff and committed; any `*.jsonl` file in
`cache_dir` is imported (idempotently) whenever the cache is opened.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import socket
import sqlite3
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import CacheError
from .types import GenerationRequest, GenerationResult

CACHE_FILE = "cache.sqlite"
KEY_VERSION = 1  # bump when the key recipe changes; old rows then simply stop matching

# The GenerationResult fields a cache row keeps (not `error`: failures are never cached).
RESULT_FIELDS = ("text", "reasoning", "raw", "prompt_tokens", "completion_tokens", "finish_reason")
# The request fields that make up the key, in the order they appear in an export.
KEY_FIELDS = ("api", "model", "messages", "prompt", "temperature", "max_tokens", "stop", "seed",
              "response_format", "sample_index")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    request TEXT NOT NULL,          -- canonical JSON of the keyed fields
    text TEXT, reasoning TEXT, raw TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER, finish_reason TEXT,
    created REAL
);
CREATE TABLE IF NOT EXISTS imports (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER);
-- Requests the server refused as such (a format it cannot follow): replayed as that failure, so a
-- replay needs no network for the structured-output probes either.
CREATE TABLE IF NOT EXISTS rejections (key TEXT PRIMARY KEY, request TEXT NOT NULL, error TEXT NOT NULL,
                                       created REAL);
-- Calls a batch file (evekit batch import) answered with an error: replayed as that failed item, online
-- and offline, until a later import answers them; `evekit batch export` lists them again.
CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, request TEXT NOT NULL, error TEXT NOT NULL,
                                     created REAL);
-- Calls in flight: a process claims a key before sending it, so another process sharing the cache
-- waits for that answer instead of paying for it again. A claim ends with the answer, a failure,
-- its process's death or its expiry.
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT, pid INTEGER,
                                   expires REAL);
"""


def _claim_is_stale(host: str | None, pid: int | None, expires: float, now: float) -> bool:
    """A claim whose time is up, or whose process (on this machine) no longer exists."""
    if expires < now:
        return True
    if host == socket.gethostname() and pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's live process
            return False
    return False


def key_fields(model: str, request: GenerationRequest) -> dict[str, Any]:
    """The request fields that change the answer, normalised (so 0 and 0.0 give one key)."""
    return {
        "api": request.api,
        "model": model,
        "messages": [dict(m) for m in request.messages] if request.messages is not None else None,
        "prompt": request.prompt,
        "temperature": float(request.temperature),
        "max_tokens": int(request.max_tokens),
        "stop": list(request.stop) if request.stop is not None else None,
        "seed": request.seed,
        "response_format": request.response_format,
        "sample_index": int(request.sample_index),
    }


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def key_of_fields(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical({"v": KEY_VERSION, **fields}).encode("utf-8")).hexdigest()


def cache_key(model: str, request: GenerationRequest) -> str:
    """SHA-256 hex of the keyed fields of `request` sent to `model` (base URL not included)."""
    return key_of_fields(key_fields(model, request))


class ResponseCache:
    """The SQLite cache of one `cache_dir`. Thread-safe; safe for several processes."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.dir = Path(cache_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / CACHE_FILE
        # isolation_level=None: autocommit, so every single INSERT is its own short transaction.
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None,
                                   check_same_thread=False)
        self._lock = threading.Lock()
        try:
            self._set_up()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise CacheError(
                f"cache {self.path} cannot be used ({exc}). Move it aside (mv {self.path} {self.path}.corrupt) "
                f"and run again: calls not in the cache are sent again, and any *.jsonl export in "
                f"{self.dir} is re-imported") from exc
        for jsonl in sorted(self.dir.glob("*.jsonl")):
            self._import_if_changed(jsonl)

    def _set_up(self) -> None:
        """WAL mode and the tables. Two processes opening a new cache at once may find it locked
        while the other switches it to WAL (SQLite then does not wait): try again briefly."""
        for attempt in range(50):
            try:
                with self._lock:
                    self._db.execute("PRAGMA busy_timeout=60000")
                    self._db.execute("PRAGMA journal_mode=WAL")
                    # NORMAL in WAL mode: a committed answer survives a killed process (not a power cut).
                    self._db.execute("PRAGMA synchronous=NORMAL")
                    self._db.executescript(_SCHEMA)
                    self._db.execute("SELECT count(*) FROM responses").fetchone()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 49:
                    raise
                time.sleep(0.05 + 0.05 * attempt)

    # -- reading and writing ------------------------------------------------------------
    def get_many(self, keys: Iterable[str]) -> dict[str, GenerationResult]:
        """Cached results for those of `keys` that are present (marked `cached=True`)."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, GenerationResult] = {}
        cols = ", ".join(RESULT_FIELDS)
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT key, {cols} FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
                for row in self._db.execute(q, chunk):
                    found[row[0]] = GenerationResult(**dict(zip(RESULT_FIELDS, row[1:])), cached=True)
                q = f"SELECT key, error FROM rejections WHERE key IN ({','.join('?' * len(chunk))})"
                for key, error in self._db.execute(q, chunk):
                    found.setdefault(key, GenerationResult(text=None, error=error, cached=True, rejected=True))
                q = f"SELECT key, error FROM failures WHERE key IN ({','.join('?' * len(chunk))})"
                for key, error in self._db.execute(q, chunk):  # a recorded batch failure: a failed item
                    found.setdefault(key, GenerationResult(text=None, error=error, cached=True))
        return found

    def get(self, key: str) -> GenerationResult | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, fields: Mapping[str, Any], result: GenerationResult) -> None:
        """Store one successful answer now (one atomic transaction). Failures are refused."""
        self.put_many([(key, fields, result)])

    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any], GenerationResult]]) -> None:
        """Store answers in one short transaction. Failures are refused."""
        now = time.time()
        rows, rejections = [], []
        for key, fields, result in items:
            if result.failed and not result.rejected:
                raise ValueError("failed results are not cached (only a server's refusal of the request)")
            if result.failed:
                rejections.append((key, _canonical(fields), result.error, now))
            else:
                rows.append((key, _canonical(fields), *(getattr(result, f) for f in RESULT_FIELDS), now))
        with self._lock:
            self._insert_many(rows, rejections)

    def _insert_many(self, rows: list[tuple], rejections: list[tuple] = ()) -> None:
        """One transaction for many rows (caller holds the lock); all or nothing. The answers end
        their claims in the same transaction, so a waiting process never sees neither."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # First answer wins: a replay stays stable even if two processes raced on one key.
            self._db.executemany("INSERT OR IGNORE INTO responses VALUES (?,?,?,?,?,?,?,?,?)", rows)
            self._db.executemany("INSERT OR IGNORE INTO rejections VALUES (?,?,?,?)", rejections)
            self._db.executemany("DELETE FROM claims WHERE key = ?", [(r[0],) for r in [*rows, *rejections]])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def record_failures(self, items: Iterable[tuple[str, Mapping[str, Any], str]]) -> None:
        """Record calls a batch answered with an error, as (key, keyed fields, error message): each
        replays as a failed item (`cached=True`, `error` set, not `rejected`) until an answer for
        that key is stored. A key that already has an answer keeps it."""
        now = time.time()
        rows = [(key, _canonical(fields), str(error), now) for key, fields, error in items]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO failures VALUES (?,?,?,?)", rows)
                self._db.execute("DELETE FROM failures WHERE key IN (SELECT key FROM responses)")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def clear_failures(self, keys: Iterable[str] | None = None) -> int:
        """Forget recorded batch failures (those of `keys`, or all); returns how many were dropped."""
        with self._lock:
            before = self._db.total_changes
            if keys is None:
                self._db.execute("DELETE FROM failures")
            else:
                self._db.executemany("DELETE FROM failures WHERE key = ?", [(k,) for k in keys])
            return self._db.total_changes - before

    # -- calls in flight, across processes ----------------------------------------------
    def claim_many(self, keys: Iterable[str], owner: str, ttl: float) -> set[str]:
        """Claim the `keys` nobody else is answering; returns those that are now `owner`'s.
        Stale claims (expired, or of a process that died on this machine) are taken over."""
        keys = list(dict.fromkeys(keys))
        now, host, pid = time.time(), socket.gethostname(), os.getpid()
        mine: set[str] = set()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i:i + 500]
                    marks = ",".join("?" * len(chunk))
                    held = self._db.execute(f"SELECT key, owner, host, pid, expires FROM claims WHERE key IN ({marks})",
                                            chunk).fetchall()
                    stale = [(k,) for k, o, h, p, e in held if o != owner and _claim_is_stale(h, p, e, now)]
                    self._db.executemany("DELETE FROM claims WHERE key = ?", stale)
                    self._db.executemany("INSERT OR IGNORE INTO claims VALUES (?,?,?,?,?)",
                                         [(k, owner, host, pid, now + ttl) for k in chunk])
                    mine |= {r[0] for r in self._db.execute(
                        f"SELECT key FROM claims WHERE owner = ? AND key IN ({marks})", [owner, *chunk])}
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return mine

    def release(self, owner: str, keys: Iterable[str] | None = None) -> None:
        """End `owner`'s claims (all of them, or those on `keys`): failed calls, or the end of a run."""
        with self._lock:
            if keys is None:
                self._db.execute("DELETE FROM claims WHERE owner = ?", (owner,))
            else:
                self._db.executemany("DELETE FROM claims WHERE owner = ? AND key = ?", [(owner, k) for k in keys])

    def claimed(self, key: str) -> bool:
        """Someone still holds a live claim on `key`."""
        with self._lock:
            row = self._db.execute("SELECT host, pid, expires FROM claims WHERE key = ?", (key,)).fetchone()
        return row is not None and not _claim_is_stale(*row, time.time())

    def keys(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT key FROM responses")}

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- export and import --------------------------------------------------------------
    def export(self, path: str | Path) -> int:
        """Write every answer as sorted, deterministic JSONL; returns the number of records."""
        cols = ", ".join(RESULT_FIELDS)
        with self._lock:
            rows = self._db.execute(f"SELECT key, request, {cols} FROM responses").fetchall()
            refused = self._db.execute("SELECT key, request, error FROM rejections").fetchall()
        records = [{"key": key, **json.loads(request), "response": dict(zip(RESULT_FIELDS, result))}
                   for key, request, *result in rows]
        # A refusal has `rejected` (the server's error) instead of `response`.
        records += [{"key": key, **json.loads(request), "rejected": error} for key, request, error in refused]
        records.sort(key=lambda r: r["key"])
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for record in records:
                f.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
        os.replace(tmp, path)  # a reader never sees half a file
        return len(records)

    def import_jsonl(self, path: str | Path) -> int:
        """Add the answers of an exported JSONL; returns how many were new. Idempotent."""
        path = Path(path)
        rows, rejections = [], []
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if line.strip():
                    row = _row_from_record(line, path, lineno)
                    (rejections if len(row) == 4 else rows).append(row)
        with self._lock:
            before = self._db.total_changes
            self._insert_many(rows, rejections)
            return self._db.total_changes - before

    def _import_if_changed(self, path: Path) -> None:
        st = path.stat()
        with self._lock:
            seen = self._db.execute("SELECT size, mtime_ns FROM imports WHERE path=?",
                                    (path.name,)).fetchone()
        if seen == (st.st_size, st.st_mtime_ns):
            return
        self.import_jsonl(path)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO imports VALUES (?,?,?)",
                             (path.name, st.st_size, st.st_mtime_ns))


class CacheWriter:
    """Writes answers to a `ResponseCache` on a background thread.

    Each answer is committed as soon as the thread takes it (answers that queued up
    meanwhile share one transaction), so the event loop never waits for SQLite and a killed
    process loses at most the answers of the last few milliseconds. `close()` waits until
    everything queued is committed and re-raises a write error.
    """

    def __init__(self, cache: ResponseCache) -> None:
        self.cache = cache
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="evekit-cache-writer", daemon=True)
        self._thread.start()

    def put(self, key: str, fields: Mapping[str, Any], result: GenerationResult) -> None:
        self._queue.put((key, fields, result))

    def _run(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if batch[-1] is None:
                done = True
                batch.pop()
            if batch and self._error is None:
                try:
                    self.cache.put_many(batch)
                except BaseException as e:  # noqa: BLE001 - reported by close()
                    self._error = e

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


def _row_from_record(line: str, path: Path, lineno: int) -> tuple[Any, ...]:
    where = f"{path}, line {lineno}"
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object")
    answer = "rejected" if "rejected" in rec and "response" not in rec else "response"
    missing = [k for k in ("key", *KEY_FIELDS, answer) if k not in rec]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    fields = {k: rec[k] for k in KEY_FIELDS}
    if key_of_fields(fields) != rec["key"]:
        raise ValueError(f"{where}: field 'key' does not match the request fields "
                         "(were they edited, or written by another evekit version?)")
    if answer == "rejected":  # the server's refusal of this request: (key, request, error, created)
        if not isinstance(rec["rejected"], str) or not rec["rejected"]:
            raise ValueError(f"{where}: field 'rejected' must be the server's error message")
        return (rec["key"], _canonical(fields), rec["rejected"], None)
    resp = rec["response"]
    if not isinstance(resp, dict) or "text" not in resp:
        raise ValueError(f"{where}: field 'response' must be an object with a 'text'")
    values = [resp.get(f) for f in RESULT_FIELDS]
    for i, f in enumerate(RESULT_FIELDS):
        if f.endswith("_tokens"):
            if not isinstance(values[i] or 0, int):
                raise ValueError(f"{where}: field 'response.{f}' must be an integer")
            values[i] = values[i] or 0
    return (rec["key"], _canonical(fields), *values, None)


def export_cache(cache_dir: str | Path, path: str | Path) -> int:
    """Export the cache in `cache_dir` to a reviewable JSONL at `path`; returns the record count."""
    with ResponseCache(cache_dir) as cache:
        return cache.export(path)


def import_cache(cache_dir: str | Path, path: str | Path) -> int:
    """Import an exported JSONL into the cache in `cache_dir`; returns how many answers were new."""
    with ResponseCache(cache_dir) as cache:
        return cache.import_jsonl(path)


def result_to_dict(result: GenerationResult) -> dict[str, Any]:
    """The cached fields of a result (for tests and reports)."""
    d = asdict(result)
    return {k: d[k] for k in RESULT_FIELDS}
