"""Persistent response cache: every model answer is stored on disk the moment it arrives.

Why: evaluation runs are long and endpoints are flaky or paid. With the cache an interrupted
run resumes and sends only the calls that are missing, a rerun of a finished notebook costs
nothing, and a committed JSONL export replays a whole run offline (`offline=True`).

Storage is one SQLite file, `<cache_dir>/cache.sqlite`, in WAL mode with a busy timeout and
one short transaction per batch of answers, so several processes (parallel notebooks, a judge and a
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

A full disk (or any other failed write) loses no answer: every write names the file and the space
left (`CacheError`, never SQLite's follow-up "cannot rollback"), and `CacheWriter` puts the answers
it could not store into a spool file in the export format (`unsaved-answers-*.jsonl` beside the
cache, else in the system's temporary folder), which the next open imports and then deletes. Claims
of a process that died (kill -9), or of a run in this process that ended, never block anyone.
"""
from __future__ import annotations

import collections
import errno
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .errors import CacheError
from .types import GenerationRequest, GenerationResult

CACHE_FILE = "cache.sqlite"
KEY_VERSION = 1  # bump when the key recipe changes; old rows then simply stop matching

# The GenerationResult fields a cache row keeps (not `error`: failures are never cached).
RESULT_FIELDS = ("text", "reasoning", "raw", "prompt_tokens", "completion_tokens", "finish_reason", "logprobs",
                 "tool_calls", "clipped")
# Kept as JSON text in their columns.
JSON_FIELDS = ("logprobs", "tool_calls")
# Columns added after the first caches were written (an older cache gains them when opened), and left
# out of an export when empty (older exports stay as they were).
LATER_FIELDS = {"logprobs": "TEXT", "tool_calls": "TEXT", "clipped": "INTEGER"}  # (and in `_stored_values`)
# The request fields that make up the key, in the order they appear in an export.
KEY_FIELDS = ("api", "model", "messages", "prompt", "temperature", "max_tokens", "stop", "seed",
              "response_format", "sample_index")
# Keyed only when set, so every key made before they existed stays the same.
OPTIONAL_KEY_FIELDS = ("top_logprobs",)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    request TEXT NOT NULL,          -- canonical JSON of the keyed fields
    text TEXT, reasoning TEXT, raw TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER, finish_reason TEXT,
    created REAL, logprobs TEXT,    -- JSON, when the request asked for log-probabilities
    tool_calls TEXT,                -- JSON, when the reply had tool calls
    clipped INTEGER                 -- the reply's length, when the client cut it
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


# Answers a failed write kept out of SQLite; imported, then deleted, when the cache is next opened.
SPOOL_PREFIX = "unsaved-answers-"
SQLITE_FULL = getattr(sqlite3, "SQLITE_FULL", 13)

# The owners of claims made by this process that are still sending (`claim_many` adds one, a full
# `release` ends it): a claim of this process under another owner was left by a run that ended.
_LIVE_OWNERS: set[str] = set()


def _claim_is_stale(owner: str, host: str | None, pid: int | None, expires: float, now: float) -> bool:
    """A claim whose time is up, whose process (on this machine) no longer exists, or that a run of
    this very process left behind (its release failed, e.g. on a full disk)."""
    if expires < now:
        return True
    if host == socket.gethostname() and pid == os.getpid():
        return owner not in _LIVE_OWNERS
    if host == socket.gethostname() and pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's live process
            return False
    return False


def _is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def _free_space(folder: Path) -> str:
    try:
        return f"{shutil.disk_usage(folder).free:,} bytes free on its disk"
    except OSError:
        return "its disk's free space unknown"


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
        **({"top_logprobs": int(request.top_logprobs)} if request.top_logprobs is not None else {}),
    }


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def key_of_fields(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical({"v": KEY_VERSION, **fields}).encode("utf-8")).hexdigest()


def request_key(model: str, request: GenerationRequest) -> tuple[str, str]:
    """(`cache_key`, the canonical JSON of the keyed fields that a cache row stores), from one
    serialisation: every keyed field sorts before the version's "v", so the key's JSON is the
    row's with `"v"` appended."""
    canonical = _canonical(key_fields(model, request))
    keyed = f'{canonical[:-1]},"v":{KEY_VERSION}}}'
    return hashlib.sha256(keyed.encode("utf-8")).hexdigest(), canonical


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
            if _is_disk_full(exc):
                raise self._full(exc) from exc
            raise CacheError(
                f"cache {self.path} cannot be used ({exc}). Move it aside (mv {self.path} {self.path}.corrupt) "
                f"and run again: calls not in the cache are sent again, and any *.jsonl export in "
                f"{self.dir} is re-imported") from exc
        for jsonl in sorted(self.dir.glob("*.jsonl")):
            if not jsonl.name.startswith(SPOOL_PREFIX):
                self._import_if_changed(jsonl)
        self._import_spools()

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
                    columns = {r[1] for r in self._db.execute("PRAGMA table_info(responses)")}
                    for column, kind in LATER_FIELDS.items():  # a cache written before they were kept
                        if column not in columns:
                            self._db.execute(f"ALTER TABLE responses ADD COLUMN {column} {kind}")
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
                    found[row[0]] = GenerationResult(**_result_values(row[1:]), cached=True)
                q = f"SELECT key, error FROM rejections WHERE key IN ({','.join('?' * len(chunk))})"
                for key, error in self._db.execute(q, chunk):
                    found.setdefault(key, GenerationResult(text=None, error=error, cached=True, rejected=True))
                q = f"SELECT key, error FROM failures WHERE key IN ({','.join('?' * len(chunk))})"
                for key, error in self._db.execute(q, chunk):  # a recorded batch failure: a failed item
                    found.setdefault(key, GenerationResult(text=None, error=error, cached=True))
        return found

    def get(self, key: str) -> GenerationResult | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, fields: Mapping[str, Any] | str, result: GenerationResult) -> None:
        """Store one successful answer now (one atomic transaction). Failures are refused."""
        self.put_many([(key, fields, result)])

    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any] | str, GenerationResult]]) -> None:
        """Store answers in one short transaction. Failures are refused. The request is its keyed
        fields, or their canonical JSON as `request_key` returns it.

        A write that fails (a full disk) loses none of them: they go to a spool file
        (`spool`, imported at the next open) and the CacheError raised says where
        (`error.spooled`: the file and how many answers it holds; None if no spool file took them)."""
        now = time.time()
        items = list(items)
        rows, rejections = [], []
        for key, fields, result in items:
            if result.failed and not result.rejected:
                raise ValueError("failed results are not cached (only a server's refusal of the request)")
            request = fields if isinstance(fields, str) else _canonical(fields)
            if result.failed:
                rejections.append((key, request, result.error, now))
            else:
                rows.append((key, request, *_stored_values(result), now))
        with self._lock:
            try:
                self._insert_many(rows, rejections)
            except (sqlite3.Error, OSError, CacheError) as exc:
                # Chained to the root cause (SQLite's or the OS's error), as a direct failure is.
                raise self._kept(items, exc) from (exc.__cause__ or exc)

    def _kept(self, items: Sequence[tuple[str, Mapping[str, Any] | str, GenerationResult]],
              exc: BaseException) -> CacheError:
        """The error of a failed write `exc`, once its answers are in a spool file (if one took them):
        `spooled` is (file, number of answers) or None, `write_error` the failed write's own error."""
        text = str(exc) if isinstance(exc, CacheError) else f"cache {self.path}: {exc}"
        try:
            path = self.spool(items)
        except CacheError as spool_error:
            error, spooled = CacheError(f"{text}; {spool_error}"), None
        else:
            what = "the answer was" if len(items) == 1 else f"the {len(items)} answers were"
            error = CacheError(f"{text}; {what} kept in {path} and {'is' if len(items) == 1 else 'are'} imported "
                               "the next time the cache is opened")
            spooled = (path, len(items))
        error.spooled, error.write_error = spooled, exc  # type: ignore[attr-defined]
        return error

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT (the caller holds the lock). On an error the transaction is
        rolled back if SQLite has not done so itself (it has, on a full disk: a ROLLBACK then only
        says "no transaction is active" and hides the cause), and a full disk becomes a CacheError
        naming the file and the space left."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            yield
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:  # the first error is the one to report
                    pass
            if _is_disk_full(exc):
                raise self._full(exc) from exc
            raise

    def _full(self, exc: BaseException) -> CacheError:
        return CacheError(f"cache {self.path}: no space left on the device ({exc}; {_free_space(self.dir)})")

    def _insert_many(self, rows: list[tuple], rejections: list[tuple] = ()) -> None:
        """One transaction for many rows (caller holds the lock); all or nothing. The answers end
        their claims in the same transaction, so a waiting process never sees neither."""
        with self._transaction():
            # First answer wins: a replay stays stable even if two processes raced on one key.
            self._db.executemany(f"INSERT OR IGNORE INTO responses (key, request, {', '.join(RESULT_FIELDS)}, "
                                 f"created) VALUES ({','.join('?' * (len(RESULT_FIELDS) + 3))})", rows)
            self._db.executemany("INSERT OR IGNORE INTO rejections VALUES (?,?,?,?)", rejections)
            self._db.executemany("DELETE FROM claims WHERE key = ?", [(r[0],) for r in [*rows, *rejections]])

    def record_failures(self, items: Iterable[tuple[str, Mapping[str, Any], str]]) -> None:
        """Record calls a batch answered with an error, as (key, keyed fields, error message): each
        replays as a failed item (`cached=True`, `error` set, not `rejected`) until an answer for
        that key is stored. A key that already has an answer keeps it."""
        now = time.time()
        rows = [(key, _canonical(fields), str(error), now) for key, fields, error in items]
        with self._lock, self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO failures VALUES (?,?,?,?)", rows)
            self._db.execute("DELETE FROM failures WHERE key IN (SELECT key FROM responses)")

    def clear_failures(self, keys: Iterable[str] | None = None) -> int:
        """Forget recorded batch failures (those of `keys`, or all); returns how many were dropped."""
        with self._lock:
            before = self._db.total_changes
            with self._transaction():
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
        mine = set(keys)
        _LIVE_OWNERS.add(owner)
        with self._lock, self._transaction():
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                # Insert first: on a key nobody holds (the usual case) that is the whole claim.
                self._db.executemany("INSERT OR IGNORE INTO claims VALUES (?,?,?,?,?)",
                                     [(k, owner, host, pid, now + ttl) for k in chunk])
                held = self._db.execute(
                    f"SELECT key, owner, host, pid, expires FROM claims WHERE owner != ? "
                    f"AND key IN ({','.join('?' * len(chunk))})", [owner, *chunk]).fetchall()
                stale = [k for k, *claim in held if _claim_is_stale(*claim, now)]
                self._db.executemany("UPDATE claims SET owner = ?, host = ?, pid = ?, expires = ? WHERE key = ?",
                                     [(owner, host, pid, now + ttl, k) for k in stale])
                mine -= {k for k, *_ in held} - set(stale)
        return mine

    def release(self, owner: str, keys: Iterable[str] | None = None) -> None:
        """End `owner`'s claims (all of them, or those on `keys`): failed calls, or the end of a run.
        All of them: the owner is done, so even if the delete fails (a full disk) its claims no longer
        hold anyone of this process back."""
        if keys is None:
            _LIVE_OWNERS.discard(owner)
        with self._lock, self._transaction():
            if keys is None:
                self._db.execute("DELETE FROM claims WHERE owner = ?", (owner,))
            else:
                self._db.executemany("DELETE FROM claims WHERE owner = ? AND key = ?", [(owner, k) for k in keys])

    def claimed_many(self, keys: Iterable[str]) -> set[str]:
        """Those of `keys` on which someone still holds a live claim."""
        keys = list(dict.fromkeys(keys))
        now, held = time.time(), set()
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT key, owner, host, pid, expires FROM claims WHERE key IN ({','.join('?' * len(chunk))})"
                held |= {k for k, *claim in self._db.execute(q, chunk) if not _claim_is_stale(*claim, now)}
        return held

    def claimed(self, key: str) -> bool:
        """Someone still holds a live claim on `key`."""
        with self._lock:
            row = self._db.execute("SELECT owner, host, pid, expires FROM claims WHERE key = ?", (key,)).fetchone()
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
        records = [_record(key, request, _result_values(result)) for key, request, *result in rows]
        records += [_record(key, request, error=error) for key, request, error in refused]
        records.sort(key=lambda r: r["key"])
        _write_jsonl(Path(path), records)
        return len(records)

    def spool_dirs(self) -> list[Path]:
        """Where `spool` writes: beside the cache, else (that disk full) the system's temporary folder,
        in a folder named after this cache."""
        digest = hashlib.sha256(str(self.dir.resolve()).encode()).hexdigest()[:16]
        return [self.dir, Path(tempfile.gettempdir()) / "evekit-spool" / digest]

    def spool(self, items: Sequence[tuple[str, Mapping[str, Any] | str, GenerationResult]]) -> Path:
        """Write answers that could not be stored to a JSONL in the export format, in the first of
        `spool_dirs` that takes it whole; the next open imports and deletes it. Returns its path."""
        records = []
        for key, fields, result in items:
            request = fields if isinstance(fields, str) else _canonical(fields)
            records.append(_record(key, request, error=result.error) if result.failed
                           else _record(key, request, {f: getattr(result, f) for f in RESULT_FIELDS}))
        name = f"{SPOOL_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.jsonl"
        problems = []
        for folder in self.spool_dirs():
            try:
                folder.mkdir(parents=True, exist_ok=True)
                _write_jsonl(folder / name, records)
                return folder / name
            except OSError as exc:
                problems.append(f"{folder}: {exc.strerror or exc}")
        raise CacheError(f"{len(records)} answer{'' if len(records) == 1 else 's'} could not be kept in a spool file either ({'; '.join(problems)})")

    def _import_spools(self) -> None:
        """Import the spool files of this cache (see `spool`), then delete them."""
        for folder in self.spool_dirs():
            for path in sorted(folder.glob(f"{SPOOL_PREFIX}*.jsonl")) if folder.is_dir() else ():
                try:
                    self.import_jsonl(path)  # a disk still full raises here, and the file stays
                    path.unlink()
                except FileNotFoundError:  # another process opening the cache took it first
                    pass

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
        with self._lock, self._transaction():
            self._db.execute("INSERT OR REPLACE INTO imports VALUES (?,?,?)",
                             (path.name, st.st_size, st.st_mtime_ns))


class CacheWriter:
    """Writes answers to a `ResponseCache` on a background thread.

    `put` only appends to a deque: the event loop never waits for SQLite and never wakes a
    thread (on a busy machine each wake-up costs the loop a trip through the scheduler, more
    than a fast server's answer). The thread commits what has arrived every `interval` seconds
    in one transaction, so a killed process loses at most the answers of that last interval.
    When a write fails (a full disk), that batch and every later one go to a spool file
    (`ResponseCache.spool`) and `error` is set, so the caller stops sending; `close()` commits the
    rest, waits, and raises the error, saying where the answers were kept.
    """

    def __init__(self, cache: ResponseCache, interval: float = 0.01) -> None:
        self.cache = cache
        self.interval = interval
        self._pending: collections.deque[tuple[str, Mapping[str, Any] | str, GenerationResult]] = \
            collections.deque()
        self._closing = threading.Event()
        self._bug: BaseException | None = None  # a result that must not be cached: a caller's error
        self._write_error: BaseException | None = None  # the first failed write (full disk, I/O error)
        self.failed = False  # a write has failed (`error` says how): a plain attribute, read after every call
        self._spooled: list[tuple[Path, int]] = []  # the spool files written since, and their answers
        self._unsaved: list[tuple[str, Mapping[str, Any] | str, GenerationResult]] = []
        self._spool_error: CacheError | None = None
        self._thread = threading.Thread(target=self._run, name="evekit-cache-writer", daemon=True)
        self._thread.start()

    def put(self, key: str, fields: Mapping[str, Any] | str, result: GenerationResult) -> None:
        self._pending.append((key, fields, result))  # deque.append is atomic: no lock, no wake-up

    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any] | str, GenerationResult]]) -> None:
        self._pending.extend(items)

    def _commit(self) -> None:
        batch = []
        while True:
            try:
                batch.append(self._pending.popleft())
            except IndexError:
                break
        if (not batch and not self._unsaved) or self._bug is not None:
            return
        if self._write_error is None:
            try:
                self.cache.put_many(batch)
                return
            except CacheError as e:  # the disk is full, or the file unusable (put_many wraps every write error)
                self._write_error, self.failed = getattr(e, "write_error", e), True
                if getattr(e, "spooled", None):  # put_many kept the batch in a spool file
                    self._spooled.append(e.spooled)
                    return
            except BaseException as e:  # noqa: BLE001 - reported by close()
                self._bug = e
                return
        # After a failed write the answers go to a spool file: the run is stopping, and the next open
        # imports them (SQLite is not tried again: on a full disk each attempt fails again).
        try:
            self._spooled.append((self.cache.spool(self._unsaved + batch), len(self._unsaved) + len(batch)))
            self._unsaved = []
        except CacheError as e:
            self._unsaved += batch  # kept in memory, retried at the next commit
            self._spool_error = e

    def _run(self) -> None:
        while not self._closing.wait(self.interval):
            self._commit()
        self._commit()

    @property
    def error(self) -> CacheError | None:
        """Set once a write has failed: the answers since go to a spool file, and the caller should
        stop sending calls whose answers cannot be stored."""
        return self._failure()

    def _failure(self) -> CacheError | None:
        if self._write_error is None:
            return None
        first = self._write_error
        text = str(first) if isinstance(first, CacheError) else f"cache {self.cache.path}: {first}"
        kept = sum(n for _, n in self._spooled)
        where = ", ".join(sorted({str(p) for p, _ in self._spooled}))
        if kept:
            text += (f". {kept} answers received in this run could not be written to it and were kept in {where}; "
                     f"they are imported the next time the cache is opened: free space on {self.cache.dir}'s disk "
                     "and run again (only the calls without an answer are sent)")
        if self._unsaved:
            text += f". {len(self._unsaved)} answers could not be kept anywhere: {self._spool_error}"
        return CacheError(text)

    def close(self) -> None:
        """Commit what is left and stop; raises the first write error (with where the answers went)."""
        self._closing.set()
        self._thread.join()
        if self._bug is not None:
            raise self._bug
        if (failure := self._failure()) is not None:
            raise failure from self._write_error


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
    fields.update({k: rec[k] for k in OPTIONAL_KEY_FIELDS if k in rec})
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
    for f in JSON_FIELDS:
        values[RESULT_FIELDS.index(f)] = _json_text(resp.get(f))
    for i, f in enumerate(RESULT_FIELDS):
        if f.endswith("_tokens") or f == "clipped":
            if not isinstance(values[i] or 0, int) or isinstance(values[i], bool):
                raise ValueError(f"{where}: field 'response.{f}' must be an integer")
            values[i] = values[i] or (None if f == "clipped" else 0)
    return (rec["key"], _canonical(fields), *values, None)


def export_cache(cache_dir: str | Path, path: str | Path) -> int:
    """Export the cache in `cache_dir` to a reviewable JSONL at `path`; returns the record count."""
    with ResponseCache(cache_dir) as cache:
        return cache.export(path)


def import_cache(cache_dir: str | Path, path: str | Path) -> int:
    """Import an exported JSONL into the cache in `cache_dir`; returns how many answers were new."""
    with ResponseCache(cache_dir) as cache:
        return cache.import_jsonl(path)


def _record(key: str, request: str, values: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    """One export line: the key, the keyed request fields, and the answer (`response`) or the
    server's refusal (`rejected`)."""
    if values is None:
        return {"key": key, **json.loads(request), "rejected": error}
    return {"key": key, **json.loads(request), "response": _exported(values)}


def _write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Write `records` whole or not at all: a temporary name, flushed to disk, then renamed (a reader
    never sees half a file; a full disk leaves no partial one)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for record in records:
                f.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _stored_values(result: GenerationResult) -> tuple[Any, ...]:
    """A result's RESULT_FIELDS as SQLite stores them (log-probabilities and tool calls as JSON text).
    Spelled out: it runs once per answer on the writer thread."""
    r = result
    return (r.text, r.reasoning, r.raw, r.prompt_tokens, r.completion_tokens, r.finish_reason,
            None if r.logprobs is None else _json_text(r.logprobs),
            None if r.tool_calls is None else _json_text(r.tool_calls), r.clipped)


def _result_values(row: Sequence[Any]) -> dict[str, Any]:
    values = dict(zip(RESULT_FIELDS, row))
    for f in JSON_FIELDS:
        if values.get(f) is not None:
            values[f] = json.loads(values[f])
    return values


def _exported(values: dict[str, Any]) -> dict[str, Any]:
    """An export record's response: without the later fields when they are empty (older files stay as
    they were)."""
    return {k: v for k, v in values.items() if k not in LATER_FIELDS or v is not None}
