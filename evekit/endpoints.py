"""Endpoints and the per-endpoint limit shared by every process of one `evekit run`.

An endpoint is a `base_url` reduced to scheme, host, port and path (`endpoint_key`). `evekit run`
computes one limit per endpoint (the smallest `concurrency` any of its runs sets for it) and
hands it to the notebooks' kernels through two environment variables: `EVEKIT_ENDPOINT_LIMITS`
(JSON {endpoint: limit}) and `EVEKIT_ENDPOINT_SLOTS` (a folder). The model client then holds one
of the endpoint's `limit` slots around every HTTP call. A slot is an advisory lock (`flock`) on
one of `limit` files in that folder, so the limit holds across the notebooks' kernel processes,
across the clients and threads inside one kernel, and a process that dies frees its slots.

Why locks on files rather than a scheduler that overlaps only notebooks on different endpoints:
the demo and most grids put many notebooks (and their judges) on one endpoint, and with a
shared limit those notebooks still overlap their CPU work (kernel start, scoring, plots,
rendering) and their cached replays, while the endpoint sees no more calls than it allows.
Without the variables (a notebook run by hand, or papermill directly) nothing changes: the
client's own `concurrency` is the only bound.

A base URL is shown and written everywhere (samples, results, reports, the executed notebook), so a
credential must never be part of one: `url_credentials_problem` says why a URL is refused (a user
name or password before the host, a query parameter named like a key or token, a path segment or
value that looks like a key), without repeating the secret; `redact_url` masks those parts for
anything that prints a URL it did not check.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .types import KEY_PREFIXES

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process limit, each client keeps its own
    fcntl = None  # type: ignore[assignment]

LIMITS_ENV = "EVEKIT_ENDPOINT_LIMITS"
SLOTS_ENV = "EVEKIT_ENDPOINT_SLOTS"
POLL_SECONDS = 0.005  # how often a call waiting for a slot of a full endpoint looks again

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Query parameter names (lower case, "-" and "_" left out) that carry a credential; besides these,
# any name ending in one of CREDENTIAL_SUFFIXES (apikey, x-goog-api-key, subscription-key,
# access_token, client_secret, ...).
CREDENTIAL_PARAMS = frozenset({"key", "auth", "authorization", "sig", "signature", "pwd", "passwd", "password",
                               "secret", "token", "credential", "credentials", "bearer", "jwt", "session"})
CREDENTIAL_SUFFIXES = ("key", "token", "secret", "password", "signature", "credential", "credentials")
MASK = "***"


def endpoint_key(base_url: str) -> str:
    """'HTTP://Host:80/v1/' -> 'http://host:80/v1': scheme, host, port and path, the port explicit."""
    parts = urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {base_url!r}")
    port = parts.port or _DEFAULT_PORTS[scheme]
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}"


def merge_limits(pairs: list[tuple[str, int]]) -> dict[str, int]:
    """{endpoint: the smallest concurrency any (base_url, concurrency) pair sets for it}."""
    out: dict[str, int] = {}
    for url, limit in pairs:
        key = endpoint_key(url)
        out[key] = min(int(limit), out.get(key, int(limit)))
    return out


def limit_environment(limits: Mapping[str, int], slots_dir: Path) -> dict[str, str]:
    """The environment variables that make every client of a process tree honour `limits`."""
    return {LIMITS_ENV: json.dumps(dict(limits), sort_keys=True), SLOTS_ENV: str(slots_dir)}


class EndpointSlots:
    """`limit` slots of one endpoint, shared by every process that uses the same `folder`."""

    def __init__(self, endpoint: str, limit: int, folder: Path) -> None:
        if limit < 1:
            raise ValueError(f"{LIMITS_ENV}: limit for {endpoint} must be >= 1, got {limit}")
        self.endpoint, self.limit = endpoint, int(limit)
        folder = Path(folder) / hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        folder.mkdir(parents=True, exist_ok=True)
        # One open file per slot for the life of the process: acquiring costs one flock call.
        self._fds = [os.open(folder / f"slot-{i}", os.O_RDWR | os.O_CREAT, 0o600) for i in range(self.limit)]
        # flock is per open file: two threads or tasks of this process must not take the same slot.
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def try_acquire(self) -> int | None:
        """A free slot's number (now held), or None when all `limit` are taken."""
        with self._lock:
            for i, fd in enumerate(self._fds):
                if i in self._held:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                self._held.add(i)
                return i
        return None

    def release(self, slot: int) -> None:
        with self._lock:
            fcntl.flock(self._fds[slot], fcntl.LOCK_UN)
            self._held.discard(slot)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one slot while the body runs (waits, polling, while the endpoint is full)."""
        got = self.try_acquire()
        while got is None:
            await asyncio.sleep(POLL_SECONDS)
            got = self.try_acquire()
        try:
            yield got
        finally:
            self.release(got)


_SLOTS: dict[str, EndpointSlots | None] = {}
_SLOTS_LOCK = threading.Lock()


def shared_slots(base_url: str) -> EndpointSlots | None:
    """The cross-process slots of `base_url`'s endpoint, or None when this process has no limit
    for it (no `EVEKIT_ENDPOINT_LIMITS`, or the endpoint is not in it)."""
    raw, folder = os.environ.get(LIMITS_ENV), os.environ.get(SLOTS_ENV)
    if not raw or not folder or fcntl is None:
        return None
    try:
        key = endpoint_key(base_url)
    except ValueError:
        return None
    cache_key = f"{folder}|{raw}|{key}"
    with _SLOTS_LOCK:
        if cache_key not in _SLOTS:
            try:
                limits = json.loads(raw)
            except ValueError:
                raise ValueError(f"{LIMITS_ENV} is not JSON: {raw[:200]!r}") from None
            limit = limits.get(key)
            _SLOTS[cache_key] = EndpointSlots(key, int(limit), Path(folder)) if limit is not None else None
        return _SLOTS[cache_key]


def _is_credential_name(name: str) -> bool:
    norm = name.lower().replace("-", "").replace("_", "").replace(".", "")
    return norm in CREDENTIAL_PARAMS or norm.endswith(CREDENTIAL_SUFFIXES)


def _looks_like_key(text: str) -> bool:
    return text.startswith(KEY_PREFIXES)


def _credential_parts(url: str) -> list[str]:
    """What in `url` carries a credential, each named without its value."""
    parts = urlsplit(url.strip())
    found = []
    if "@" in parts.netloc:
        found.append("a user name or password before the host, as in user:KEY@host")
    for where, text in (("query", parts.query), ("fragment", parts.fragment)):
        for name, value in parse_qsl(text, keep_blank_values=True):
            if _is_credential_name(name):
                found.append(f"the {where} parameter {name!r}")
            elif _looks_like_key(value):
                found.append(f"the value of the {where} parameter {name!r}, which looks like a key")
    if any(_looks_like_key(segment) for segment in parts.path.split("/")):
        found.append("a path segment that looks like a key")
    return found


def url_credentials_problem(url: str, where: str = "base_url") -> str | None:
    """Why `url` must not be used (it carries a credential), with the fix; None when it carries none.

    A credential is a user name or password before the host, a query (or fragment) parameter named
    like a key or token (`key`, `api_key`, `apikey`, `token`, `access_token`, `auth`, `signature`,
    `sig`, `password`, `secret`, ...: `CREDENTIAL_PARAMS`, `CREDENTIAL_SUFFIXES`), or a path segment
    or parameter value that starts like a key (`sk-`, `hf_`, ...). The message never contains the
    secret: it names the part and shows the URL with it masked (`redact_url`).
    """
    if not isinstance(url, str):
        return None
    try:
        found = _credential_parts(url)
    except ValueError:  # not parseable as a URL: other checks say so; nothing to point at here
        return None
    if not found:
        return None
    return (f"{where} {redact_url(url)} carries a credential ({'; '.join(found)}). A URL is shown and written "
            "everywhere (samples.csv, results.json, reports, the executed notebook), so a key never belongs "
            "in one: put the key in an environment variable (export MY_API_KEY=...) and name that variable "
            "in api_key_env (api_key_env: MY_API_KEY); it is sent as the Authorization: Bearer header.")


def redact_url(url: str) -> str:
    """`url` with every credential part masked (`***`): user name and password, the values of query
    and fragment parameters named like keys or tokens, path segments and values that look like keys.
    A URL without them comes back unchanged; one that cannot be parsed comes back as `***`."""
    try:
        parts = urlsplit(url)
        if not _credential_parts(url):
            return url
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    path = "/".join(MASK if _looks_like_key(seg) else seg for seg in parts.path.split("/"))

    def masked(text: str) -> str:
        """Each `name=value` piece as it is, but for a credential's value."""
        out = []
        for piece in text.split("&"):
            pair = parse_qsl(piece, keep_blank_values=True)
            name, value = pair[0] if pair else ("", "")
            out.append(f"{piece.split('=', 1)[0]}={MASK}" if pair and (_is_credential_name(name) or _looks_like_key(value))
                       else piece)
        return "&".join(out)

    return urlunsplit((parts.scheme, netloc, path, masked(parts.query), masked(parts.fragment)))
