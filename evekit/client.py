"""One client for every OpenAI-compatible endpoint: concurrent, cached, resumable, fault-tolerant.

`ModelClient` sends `GenerationRequest`s to the chat or completions endpoint of any
OpenAI-compatible server (llama.cpp's server, vLLM, Ollama, hosted APIs) and returns one
`GenerationResult` per request, in request order.

How it behaves, and why:

* One HTTP library, aiohttp, for every call, over one connection pool per event loop with at
  most `concurrency` requests in flight. evekit writes the few headers an OpenAI-compatible
  server reads (`request_headers`: the key as a bearer token, OpenAI's organisation and project
  from `OPENAI_ORG_ID` / `OPENAI_PROJECT_ID` as the `openai` package sends them), posts the JSON
  body (`request_body`) and parses the reply with `json.loads`. Not the `openai` client: its
  request and response machinery costs five to ten times the CPU per call of the whole hot path
  here, more than a fast local server spends answering (benchmarks/bench_client.py).
* Memory stays bounded however many requests come in: `concurrency` workers take the calls from
  a short queue, claimed in the cache a batch at a time just before they are sent, and each answer
  goes to the cache (a writer thread that commits every 10 ms, one transaction for what came)
  and to `on_result` as it lands.
* Retries (tenacity, exponential backoff with jitter) happen on 429, 408/409, 5xx, timeouts and
  connection errors; a `Retry-After` header is honoured (up to 120 s; a longer one fails the
  request). Other 4xx are not retried. After the last retry the sample is a failed
  `GenerationResult` whose `error` says what happened, where, and after how many retries;
  the run goes on. Failures are never cached, so the next run retries them.
* Configuration errors that would make every call fail raise `EndpointError` at once, with a
  one-line message naming the model, the base URL and what to check (never the key):
    - HTTP 401 or 403 (key missing or wrong), HTTP 404 (unknown model or wrong path):
      raised on the first such answer, without retries;
    - connection failures (refused, DNS, reset) that outlast all retries while the endpoint
      has never answered this client: nothing is listening at `base_url`;
    - `concurrency` requests in a row failing that way after retries: the server went away.
  A `base_url` that carries a credential (`user:KEY@host`, `?key=...`) is refused before anything
  is sent (`endpoints.url_credentials_problem`): a URL is printed and written everywhere.
* Reasoning models: the text may come in `reasoning_content` / `reasoning` or inside
  `<think>...</think>`; that goes to `GenerationResult.reasoning` and `text` keeps the final
  answer (empty if the model never got past its reasoning: a model failure, not ours). This is
  the only place `<think>` is removed (parsing.strip_think): tasks and parsers take `text` as is.
  A 200 response without choices or with invalid JSON is an infrastructure failure.
* A reply made only of tool calls keeps them (`GenerationResult.tool_calls`, `note` says so): the
  model answered, but not in text. A reply longer than `MAX_REPLY_CHARS` is cut there
  (`clipped` = its length), so one runaway reply cannot swell every file a run writes.
* Every answer is written to the cache (evekit.cache) as soon as it arrives, so an
  interrupted run resumes with only the missing calls; `offline=True` replays from the cache
  and raises `CacheMiss` instead of touching the network.
* `usage` counts, per client: `requests` sent to the network (each request once),
  `retries` (extra HTTP attempts), `cache_hits`, `failures`, tokens reported by the server
  for the network answers, and wall `seconds` spent in generate calls.
"""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import os
import random
import socket
import sqlite3
import ssl
import time
import urllib.request
import warnings
from contextlib import asynccontextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity import wait_exponential, wait_random

from . import __version__
from .errors import CacheError, CacheMiss, EndpointError, ParameterError
from .cache import CacheWriter, ResponseCache, request_key
from .endpoints import shared_slots, url_credentials_problem
from .parsing import strip_think
from .types import MAX_REPLY_CHARS, GenerationRequest, GenerationResult, Usage

__all__ = ["ModelClient", "EndpointError", "CacheMiss", "request_body", "request_headers", "endpoint_path",
           "MAX_REPLY_CHARS"]

CLAIM_POLL_SECONDS = 0.2  # how often a process waiting for another's answer looks for it
MAX_RETRY_AFTER = 120.0  # seconds; a server asking for longer is treated as a failure
PLACEHOLDER_KEY = "EMPTY"  # what local servers get when no key is configured
LOOKUP_CHUNK = 500  # cache look-ups per query (SQLite's bound on parameters is 999 in old builds)
USER_AGENT = f"evekit/{__version__} (aiohttp {aiohttp.__version__})"
# The environment variables the `openai` package reads for these headers; evekit sends them alike.
ENV_HEADERS = (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID"))


class _BadResponse(Exception):
    """The server answered 200 but the body is unusable (not JSON, no choices). `retryable`: the
    body was garbled in transit (not JSON), so the same request may well succeed."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class _StatusError(Exception):
    """An HTTP answer with status >= 400: its status, headers (case-insensitive) and body."""

    def __init__(self, status: int, headers: Mapping[str, str], content: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.headers, self.content = status, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class _NoAnswer(Exception):
    """No HTTP answer: the connection failed (`__cause__` says how) or the attempt timed out."""

    def __init__(self, timeout: bool) -> None:
        super().__init__("timed out" if timeout else "connection failed")
        self.timeout = timeout


def _as_text(value: Any) -> str | None:
    """Message content may be a string, null, or a list of content parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in value)
    return json.dumps(value, ensure_ascii=False)


def _exc_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 12:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


_CONNECT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, socket.gaierror, aiohttp.ClientConnectorError,
                                                    aiohttp.ServerDisconnectedError)


def _connection_failure(exc: BaseException) -> str | None:
    """Why a connection failed (refused, unresolvable, reset), or None for a slow server. A timeout
    is searched too: the failure to connect may lie under it."""
    for e in _exc_chain(exc):
        if isinstance(e, _CONNECT_ERRORS):
            return _short(str(e) or type(e).__name__, 200)
    if isinstance(exc, _NoAnswer) and not exc.timeout:
        return _short(str(exc.__cause__ or exc), 200)
    return None


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds from `Retry-After-Ms` / `Retry-After` (number form) of an HTTP error, if any."""
    if not isinstance(exc, _StatusError):
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = exc.headers.get(header)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                pass
    return None


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, _StatusError):
        ra = _retry_after(exc)
        if ra is not None and ra > MAX_RETRY_AFTER:
            return False
        if exc.status >= 500 and _rejects_request(exc):
            return False
        return exc.status in (408, 409, 429) or exc.status >= 500
    if isinstance(exc, _BadResponse):
        return exc.retryable
    return isinstance(exc, _NoAnswer)


def _rejects_request(exc: _StatusError) -> bool:
    """A 5xx that is really a validation error of the request (llama.cpp's server answers an
    unsupported `response_format` with HTTP 500): the same request fails again, so no retry."""
    text = exc.text
    return "response_format" in text and ("literal_error" in text or "validation" in text.lower())


def _server_message(exc: _StatusError) -> str:
    """The error message of an OpenAI-style error body ({"error": {"message": ...}}), else the body."""
    text = exc.text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return str(msg)
    return text or "(empty body)"


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# asyncio reads every answer with recv(256 KiB) and shrinks the buffer: above glibc's initial mmap
# threshold (128 KiB), so each read costs an mmap, an mremap and a munmap, ~35 µs of kernel time per
# call (strace; bench_client.py's CPU column). glibc raises the threshold to the size of the first
# mmapped block that is freed: one 1 MiB block, allocated (calloc: no page touched) and freed here,
# makes those reads plain heap allocations. A process that imported `openai` had this done by chance.
bytes(1 << 20)

_SSL_CONTEXT: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """One TLS context for all sessions (the system's CA store; `SSL_CERT_FILE` / `SSL_CERT_DIR`
    are honoured): building it reads the CA bundle (~70 ms)."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context()
    return _SSL_CONTEXT


def _env_proxy(url: str) -> tuple[str | None, dict[str, str] | None]:
    """The proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY: the
    standard library's reading), as openai's HTTP client honoured them, with its credentials as a
    Proxy-Authorization header; looked up once per session, not on every request as aiohttp's
    `trust_env` would."""
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None, None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None, None
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    p = urlsplit(proxy)
    if p.username is None:
        return proxy, None
    login = f"{unquote(p.username)}:{unquote(p.password or '')}".encode("latin-1", "replace")
    return p._replace(netloc=p.netloc.rsplit("@", 1)[1]).geturl(), \
        {"Proxy-Authorization": "Basic " + base64.b64encode(login).decode("ascii")}


def request_headers(api_key: str | None) -> dict[str, str]:
    """The headers of every call: the key as a bearer token (a placeholder when there is none, as
    local servers expect one), JSON, evekit's user agent, and OpenAI's organisation and project
    from the environment when set (as the `openai` package sends them)."""
    headers = {"Authorization": f"Bearer {api_key or PLACEHOLDER_KEY}", "Content-Type": "application/json",
               "Accept": "application/json", "User-Agent": USER_AGENT}
    for header, env in ENV_HEADERS:
        if value := os.environ.get(env):
            headers[header] = value
    return headers


def request_body(model: str, request: GenerationRequest, max_tokens_field: str = "max_tokens") -> dict[str, Any]:
    """The JSON body the client POSTs for `request` to `model` (chat or completions endpoint).

    One recipe for the client and for `evekit batch export` (whose lines carry this body), so a
    batch line is exactly the call a run would send; its cache key is `cache.cache_key`.
    """
    body: dict[str, Any] = {"model": model, "temperature": request.temperature,
                            max_tokens_field: request.max_tokens}
    if request.messages is not None:
        body["messages"] = [dict(m) for m in request.messages]
    else:
        body["prompt"] = request.prompt
    if request.stop:
        body["stop"] = list(request.stop)
    if request.seed is not None:
        body["seed"] = request.seed
    if request.response_format is not None:
        body["response_format"] = request.response_format
    if request.top_logprobs is not None:  # the two endpoints spell the request differently
        if request.messages is not None:
            body["logprobs"], body["top_logprobs"] = True, request.top_logprobs
        else:
            body["logprobs"] = request.top_logprobs
    return body


def endpoint_path(api: str) -> str:
    """The path under base_url that a request of `api` ("chat" or "completions") goes to."""
    return "/chat/completions" if api == "chat" else "/completions"


class _Session:
    """What must live on one event loop: the connection pool (with the headers and timeouts of
    every call), the environment's proxy for the endpoint, the semaphore."""

    def __init__(self, client: "ModelClient") -> None:
        self.proxy, self.proxy_headers = _env_proxy(client.base_url)
        headers = request_headers(client._api_key())
        # aiohttp merges a session's headers into the proxy's too, and would send the key to the proxy
        # as its Proxy-Authorization: with a proxy, the headers go with each request instead.
        self.headers = headers if self.proxy is not None else None
        if self.proxy_headers and client.base_url.startswith("http://"):
            # A plain-HTTP request goes to the proxy itself (no CONNECT): its credentials go with it.
            self.headers, self.proxy_headers = {**headers, **self.proxy_headers}, None
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=client.concurrency, ssl=_ssl_context()),
            # Per attempt: to connect, and between bytes of the answer.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=client.timeout, sock_read=client.timeout),
            headers=None if self.proxy is not None else headers, skip_auto_headers=("User-Agent",))
        self.semaphore = asyncio.Semaphore(client.concurrency)
        self.gap = asyncio.Lock()  # `min_interval`: the next attempt's earliest start
        self.next_start = 0.0
        self.users = 0

    async def close(self) -> None:
        await self.http.close()


class ModelClient:
    """Concurrent, cached, resumable, fault-tolerant calls to one OpenAI-compatible model.

    Parameters: `model` as the server names it; `base_url` such as "http://127.0.0.1:8080/v1";
    `api_key_env` the NAME of the environment variable holding the key (None for local
    servers, which get a placeholder key); `concurrency` requests in flight at most;
    `timeout` seconds per HTTP attempt; `max_retries` extra attempts per request;
    `cache_dir` enables the on-disk cache; `offline` replays from it only; `name` labels
    progress bars; `progress` shows them. `backoff`/`max_backoff` shape the exponential
    waits between retries (seconds); `min_interval` the least time between the starts of two HTTP
    attempts of this client (EVE's `rate_limit_delay`; 0: none). See the module docstring for the
    error rules.
    """

    def __init__(self, model: str, base_url: str, api_key_env: str | None = None, *,
                 concurrency: int = 8, timeout: float = 120.0, max_retries: int = 4,
                 cache_dir: str | Path | None = None, offline: bool = False,
                 name: str | None = None, progress: bool = True,
                 backoff: float = 0.5, max_backoff: float = 30.0, min_interval: float = 0.0) -> None:
        if not model:
            raise ValueError("ModelClient: `model` is empty")
        # A key in the URL would be written wherever the URL is (the message masks it). Checked on the
        # URL as given and as the environment completes it.
        for url in (base_url, os.path.expandvars(base_url or "")):
            if (problem := url_credentials_problem(url)) is not None:
                raise ParameterError(f"ModelClient({model!r}): {problem}")
        # "${EVEKIT_SERVER_URL}" in parameter files: the URL `evekit serve` printed, from the environment.
        base_url = os.path.expandvars(base_url or "")
        if "${" in base_url and not offline:
            raise ValueError(f"ModelClient({model!r}): base_url {base_url!r} names an environment variable "
                             "that is not set; start `evekit serve` and export the URL it prints "
                             "(export EVEKIT_SERVER_URL=...), or run the parameter file with `evekit run --serve`")
        if "${" in base_url:  # offline replay never contacts the endpoint
            base_url = "http://offline.invalid/v1"
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"ModelClient({model!r}): base_url must start with http:// or https://, "
                             f"got {base_url!r}")
        if concurrency < 1 or timeout <= 0 or max_retries < 0:
            raise ValueError(f"ModelClient({model!r}): need concurrency >= 1, timeout > 0 and "
                             f"max_retries >= 0 (got {concurrency}, {timeout}, {max_retries})")
        if offline and cache_dir is None:
            raise ValueError(f"ModelClient({model!r}): offline=True needs a cache_dir to replay from")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        if min_interval < 0:
            raise ValueError(f"ModelClient({model!r}): min_interval must be >= 0, got {min_interval}")
        self.min_interval = float(min_interval)
        self.offline = offline
        self.name = name or model
        self.progress = progress
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.cache = ResponseCache(self.cache_dir) if self.cache_dir is not None else None
        self.usage = Usage()
        self._sessions: dict[asyncio.AbstractEventLoop, _Session] = {}
        self._answered = False  # has the endpoint ever sent an HTTP response to this client?
        self._connection_streak = 0  # requests in a row that ended in a connection failure
        self._max_tokens_field = "max_tokens"
        self._retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_is_retryable),
            reraise=True,
        )
        # backoff * 2**(attempt-1), at most max_backoff, plus up to `backoff` of random jitter.
        self._backoff = wait_exponential(multiplier=backoff, max=max_backoff) + wait_random(0, backoff)
        if api_key_env and not os.environ.get(api_key_env) and not offline:
            warnings.warn(f"{self.name}: environment variable {api_key_env} is not set; calling "
                          f"{self.base_url} without an API key", stacklevel=2)

    def __repr__(self) -> str:
        return (f"ModelClient(model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency}, "
                f"cache_dir={str(self.cache_dir) if self.cache_dir else None!r}, offline={self.offline})")

    def _api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _redact(self, text: str) -> str:
        key = self._api_key()
        return text.replace(key, "***") if key and len(key) >= 4 else text

    def close(self) -> None:
        """Close the cache database (the client is not usable afterwards)."""
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API -----------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest], desc: str = "", *,
                 on_result: Callable[[int, GenerationResult], None] | None = None) -> list[GenerationResult]:
        """Answer `requests` (results in the same order). Synchronous; works in Jupyter,
        where an event loop already runs, by running the work in a worker thread.

        `on_result(i, result)` is called for each request as its result lands (cached ones
        first), from the thread that runs the calls, so a caller can act on answers while the
        rest are still being generated."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests, desc, on_result=on_result))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="evekit-client") as pool:
            return pool.submit(asyncio.run, self.agenerate(requests, desc, on_result=on_result)).result()

    async def agenerate(self, requests: Sequence[GenerationRequest], desc: str = "", *,
                        on_result: Callable[[int, GenerationResult], None] | None = None
                        ) -> list[GenerationResult]:
        """Async version of `generate`."""
        started = time.perf_counter()
        requests = requests if isinstance(requests, (list, tuple)) else list(requests)
        n = len(requests)
        results: list[GenerationResult | None] = [None] * n
        # key -> [canonical request, positions...]: identical requests are sent once. Only the
        # calls still to send are held; the cached ones go straight into `results`.
        todo: dict[str, list[Any]] = {}
        for lo in range(0, n, LOOKUP_CHUNK):
            chunk: dict[str, list[Any]] = {}
            for i in range(lo, min(lo + LOOKUP_CHUNK, n)):
                r = requests[i]
                if not isinstance(r, GenerationRequest):
                    raise TypeError(f"request {i} is a {type(r).__name__}, not a GenerationRequest")
                key, canonical = request_key(self.model, r)
                if key in todo:
                    todo[key].append(i)
                elif key in chunk:
                    chunk[key].append(i)
                else:
                    chunk[key] = [canonical, i]
            hits = self.cache.get_many(chunk) if self.cache is not None else {}
            for key, entry in chunk.items():
                hit = hits.get(key)
                if hit is None:
                    todo[key] = entry
                    continue
                for j, i in enumerate(entry[1:]):
                    results[i] = hit if j == 0 else replace(hit)
        n_todo = sum(len(v) - 1 for v in todo.values())
        n_cached = n - n_todo
        self.usage.cache_hits += n_cached
        if todo and self.offline:
            raise CacheMiss(f"{self.name}: {n_todo} of {n} requests are not in the cache "
                            f"at {self.cache_dir} and offline=True forbids network calls; run once "
                            "online (offline=False) or import the recording with evekit.cache.import_cache")
        if on_result is not None:
            for i, r in enumerate(results):
                if r is not None:
                    on_result(i, r)

        # tqdm.auto picks its widget form when imported inside a kernel: imported here, never at
        # module import, so the warm kernel server (evekit.batch.kernels) may preload this module.
        from tqdm.auto import tqdm

        bar = tqdm(total=n, initial=n_cached, desc=desc or self.name, unit="req",
                   disable=not self.progress, dynamic_ncols=True)
        counts = {"cached": n_cached, "failed": 0}
        bar.set_postfix(counts, refresh=False)
        try:
            if todo:
                await self._send(requests, todo, results, bar, counts, on_result)
        finally:
            bar.close()
            self.usage.seconds += time.perf_counter() - started
        return results  # type: ignore[return-value]

    async def _send(self, requests: Sequence[GenerationRequest], todo: dict[str, list[Any]],
                    results: list[GenerationResult | None], bar: Any, counts: dict[str, int],
                    on_result: Callable[[int, GenerationResult], None] | None) -> None:
        """Send the calls of `todo` with `concurrency` workers fed from a short queue."""
        cache = self.cache
        writer = CacheWriter(cache) if cache is not None else None
        # Another process on the same cache may be sending some of these right now: each key is
        # claimed just before it is sent, and a key another process holds is waited for, not paid
        # for twice.
        owner = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}:{time.monotonic_ns()}"
        claim_ttl = self.timeout * (self.max_retries + 1) + 60.0
        # Claimed and queued `concurrency` at a time, once the queue has run dry: one SQLite
        # transaction per batch, and the claims stay just ahead of the sending (at most one batch
        # besides those in flight), so another process sharing the cache still finds work.
        batch = self.concurrency
        slots = shared_slots(self.base_url)
        queue: asyncio.Queue[tuple[str, list[Any]] | None] = asyncio.Queue(maxsize=batch)
        drained = asyncio.Event()  # set by a worker that took the last queued call

        def land(where: list[Any], result: GenerationResult) -> None:
            for j, i in enumerate(where):
                r = result if j == 0 else replace(result)
                results[i] = r
                if on_result is not None:
                    on_result(i, r)
            if result.failed:
                counts["failed"] += len(where)
                bar.set_postfix(counts, refresh=False)
            bar.update(len(where))

        def take(entry: list[Any], hit: GenerationResult) -> None:
            """An answer another process got (it counts as a cache hit)."""
            where = entry[1:]
            self.usage.cache_hits += len(where)
            counts["cached"] += len(where)
            land(where, hit)

        async def enqueue(items: list[tuple[str, list[Any]]], waiting: dict[str, list[Any]]) -> None:
            """Claim `items` and queue those now ours; the others wait for their owner's answer."""
            if cache is not None:
                mine = cache.claim_many([k for k, _ in items], owner, claim_ttl)
                # Answered by another process since this run looked them up?
                done = cache.get_many([k for k, _ in items if k in mine])
                if done:
                    cache.release(owner, list(done))
                for key, entry in items:
                    if key in done:
                        take(entry, done[key])
                    elif key not in mine:
                        waiting[key] = entry
                items = [(k, e) for k, e in items if k in mine and k not in done]
            for item in items:
                await queue.put(item)

        async def poll(waiting: dict[str, list[Any]]) -> list[tuple[str, list[Any]]]:
            """Answers of the other process; the keys whose claim ended without one come back."""
            assert cache is not None
            found = cache.get_many(waiting)
            for key, hit in found.items():
                take(waiting.pop(key), hit)
            held = cache.claimed_many(waiting)
            free = [k for k in waiting if k not in held]
            late = cache.get_many(free)  # the answer may have landed in between
            for key in free:
                if key in late:
                    take(waiting.pop(key), late[key])
            return [(k, waiting.pop(k)) for k in free if k in waiting]

        stopping: list[BaseException] = []  # why no more calls are sent (the cache cannot store their answers)

        async def feed() -> None:
            try:
                await feed_calls()
            except (CacheError, sqlite3.Error) as e:  # claims cannot be written (a full disk): send nothing more,
                stopping.append(e)                    # but let the calls in flight land (their answers are paid for)
            for _ in range(self.concurrency):
                await queue.put(None)

        async def feed_calls() -> None:
            waiting: dict[str, list[Any]] = {}
            items = iter(todo.items())
            last_poll = time.monotonic()
            while not stopping:
                while not queue.empty():
                    drained.clear()
                    try:
                        await asyncio.wait_for(drained.wait(), CLAIM_POLL_SECONDS if waiting else None)
                    except asyncio.TimeoutError:
                        break  # time to look at the calls another process is answering
                chunk = [item for _, item in zip(range(batch), items)] if queue.empty() else []
                if chunk:
                    await enqueue(chunk, waiting)
                elif not waiting and queue.empty():
                    break
                elif queue.empty():
                    await asyncio.sleep(CLAIM_POLL_SECONDS)
                if waiting and time.monotonic() - last_poll >= CLAIM_POLL_SECONDS:
                    last_poll = time.monotonic()
                    if again := await poll(waiting):
                        await enqueue(again, waiting)

        async def work(session: _Session) -> None:
            while (item := await queue.get()) is not None:
                if queue.empty():
                    drained.set()
                if stopping:
                    continue  # not sent: its claim ends with this run's (cache.release(owner) below)
                key, entry = item
                async with session.semaphore:
                    # Under `evekit run` the endpoint's limit is shared with every other client and notebook.
                    async with slots.slot() if slots is not None else nullcontext():
                        result = await self._call(session, requests[entry[1]])
                if writer is not None and (not result.failed or result.rejected):
                    writer.put(key, entry[0], result)  # the write also ends the claim
                elif writer is not None:
                    cache.release(owner, [key])  # a failure: let another process try
                land(entry[1:], result)
                if writer is not None and writer.failed and not stopping:
                    # The cache cannot store answers (a full disk): send no more, but let the calls in flight
                    # land (their answers are paid for, and spooled).
                    stopping.append(writer.error)

        try:
            async with self._session() as session:
                tasks = [asyncio.ensure_future(feed())]
                tasks += [asyncio.ensure_future(work(session)) for _ in range(self.concurrency)]
                try:
                    await asyncio.gather(*tasks)
                except BaseException:  # an EndpointError or an interruption: send nothing more
                    for t in tasks:
                        t.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
                if stopping:
                    raise stopping[0]
        finally:
            if writer is not None:
                try:
                    writer.close()  # everything answered is on disk (or spooled) before we return or raise
                finally:
                    try:
                        cache.release(owner)  # claims left by an interruption or an abort
                    except (CacheError, sqlite3.Error):
                        pass  # a full disk: the claims are stale anyway once this owner is done

    # -- one request ------------------------------------------------------------------------
    @asynccontextmanager
    async def _session(self) -> AsyncIterator[_Session]:
        """One shared session per event loop (generate() runs a fresh loop per call)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None:
            session = self._sessions[loop] = _Session(self)
        session.users += 1
        try:
            yield session
        finally:
            session.users -= 1
            if session.users == 0:
                del self._sessions[loop]
                await session.close()

    def _wait(self, state: RetryCallState) -> float:
        """Honour Retry-After when the server sent one, else exponential backoff with jitter."""
        ra = _retry_after(state.outcome.exception() if state.outcome else None)
        if ra is not None:
            return ra * (1 + 0.1 * random.random())
        return self._backoff(state)

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        return request_body(self.model, request, self._max_tokens_field)

    async def _post(self, session: _Session, request: GenerationRequest) -> tuple[int, bytes]:
        """POST the request once: (status, body) of a 2xx answer; an HTTP error raises `_StatusError`,
        a connection failure or a timeout `_NoAnswer`."""
        url = self.base_url + endpoint_path(request.api)
        status, content, headers = await self._send_once(session, url, request)
        if status == 400 and self._max_tokens_field == "max_tokens" \
                and b"max_completion_tokens" in content:
            # Newer hosted reasoning models reject max_tokens; switch once and resend.
            self._answered = True
            self._max_tokens_field = "max_completion_tokens"
            self.usage.retries += 1
            status, content, headers = await self._send_once(session, url, request)
        self._answered = True
        if status >= 400:
            raise _StatusError(status, headers, content)
        return status, content

    async def _send_once(self, session: _Session, url: str,
                         request: GenerationRequest) -> tuple[int, bytes, Any]:
        data = json.dumps(self._body(request), ensure_ascii=False).encode("utf-8")
        try:
            async with session.http.post(url, data=data, headers=session.headers, proxy=session.proxy,
                                         proxy_headers=session.proxy_headers) as response:
                return response.status, await response.read(), response.headers
        except (asyncio.TimeoutError, TimeoutError) as e:  # before OSError: TimeoutError is one
            raise _NoAnswer(timeout=True) from e
        except (aiohttp.ClientError, OSError) as e:
            raise _NoAnswer(timeout=False) from e

    async def _attempt(self, session: _Session, request: GenerationRequest) -> GenerationResult:
        if self.min_interval > 0:  # EVE's rate_limit_delay: at least this long between two starts
            async with session.gap:
                wait = session.next_start - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                session.next_start = time.monotonic() + self.min_interval
        status, content = await self._post(session, request)
        # A 200 whose body is not JSON (a proxy's error page, a truncated body) is retried like a 5xx.
        return self._parse(request, status, content)

    async def _call(self, session: _Session, request: GenerationRequest) -> GenerationResult:
        self.usage.requests += 1
        # The first attempt runs outside tenacity (whose per-call bookkeeping costs more than a
        # fast server's answer); a retryable failure hands over to it with that outcome.
        try:
            result = await self._attempt(session, request)
        except Exception as exc:  # noqa: BLE001 - classified below; EndpointError propagates
            if self.max_retries == 0 or not _is_retryable(exc):
                return self._failure(exc, 0)
            return await self._retry(session, request, exc)
        return self._success(result)

    async def _retry(self, session: _Session, request: GenerationRequest, first: Exception) -> GenerationResult:
        """Attempts 2.. with tenacity's backoff; its attempt 1 replays the failure already seen."""
        pending = [first]
        retrying = self._retrying.copy()
        try:
            async for attempt in retrying:
                with attempt:
                    if pending:
                        raise pending.pop()
                    result = await self._attempt(session, request)
        except Exception as exc:  # noqa: BLE001
            retries = max(0, retrying.statistics.get("attempt_number", 1) - 1)
            self.usage.retries += retries
            return self._failure(exc, retries)
        self.usage.retries += max(0, retrying.statistics.get("attempt_number", 1) - 1)
        return self._success(result)

    def _success(self, result: GenerationResult) -> GenerationResult:
        self.usage.prompt_tokens += result.prompt_tokens
        self.usage.completion_tokens += result.completion_tokens
        self._connection_streak = 0
        return result

    def _where(self) -> str:
        return f"{self.base_url} (model {self.model})"

    def _failure(self, exc: Exception, retries: int) -> GenerationResult:
        """Turn an exception into a failed result, or raise EndpointError for config errors."""
        after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
        if isinstance(exc, _StatusError):
            status, detail = exc.status, _short(_server_message(exc))
            if status in (401, 403):
                if not self.api_key_env:
                    hint = "no key was sent: pass api_key_env='NAME_OF_THE_VARIABLE_HOLDING_THE_KEY'"
                elif not self._api_key():
                    hint = f"environment variable {self.api_key_env} is not set"
                else:
                    hint = f"check the key in environment variable {self.api_key_env}"
                raise EndpointError(self._redact(
                    f"HTTP {status} from {self._where()}: the server refused the API key; {hint}. "
                    f"Server said: {detail}")) from None
            if status == 404:
                raise EndpointError(self._redact(
                    f"HTTP 404 from {self._where()}: unknown model or wrong path; check the model "
                    f"name (GET {self.base_url}/models lists what the server serves) and that "
                    f"base_url ends with /v1. Server said: {detail}")) from None
            ra = _retry_after(exc)
            if ra is not None and ra > MAX_RETRY_AFTER:
                detail += f" (server asked to retry after {ra:.0f} s)"
            message = f"HTTP {status} from {self._where()}{after}: {detail}"
            if status >= 500 and _rejects_request(exc):
                self.usage.failures += 1
                return GenerationResult(text=None, error=self._redact(message), rejected=True)
        elif isinstance(exc, _NoAnswer):
            cause = _connection_failure(exc)
            if cause is not None:
                self._connection_streak += 1
                if not self._answered:
                    raise EndpointError(self._redact(
                        f"nothing answered at {self._where()}{after} ({cause}); check that the "
                        "server is running and that base_url (host, port, /v1) is right")) from None
                if self._connection_streak >= self.concurrency:
                    raise EndpointError(self._redact(
                        f"{self._where()} stopped answering: {self._connection_streak} requests in a "
                        f"row failed to connect{after} ({cause}); check the server")) from None
                message = f"connection to {self._where()} failed{after}: {cause}"
            else:
                message = f"no answer from {self._where()} within {self.timeout:g} s{after}"
        elif isinstance(exc, _BadResponse):
            message = f"unusable response from {self._where()}{after}: {exc}"
        else:
            message = f"{type(exc).__name__} calling {self._where()}{after}: {_short(str(exc))}"
        self.usage.failures += 1
        return GenerationResult(text=None, error=self._redact(message))

    def _parse(self, request: GenerationRequest, status: int, content_bytes: bytes) -> GenerationResult:
        try:
            data = json.loads(content_bytes)
        except ValueError:
            snippet = _short(content_bytes[:120].decode("utf-8", "replace"), 120)
            raise _BadResponse(f"not JSON (HTTP {status}, body starts {snippet!r})",
                               retryable=True) from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            err = data.get("error") if isinstance(data, dict) else None
            extra = f"; server said: {_short(json.dumps(err, ensure_ascii=False), 200)}" if err else ""
            raise _BadResponse(f"the response has no choices{extra}")
        choice = choices[0]
        reasoning: str | None = None
        tool_calls = None
        if request.api == "chat":
            message = choice.get("message") or {}
            raw = _as_text(message.get("content"))
            reasoning = _as_text(message.get("reasoning_content") or message.get("reasoning"))
            if message.get("tool_calls") or message.get("function_call"):
                tool_calls = _tool_calls(message)
        else:
            raw = _as_text(choice.get("text"))
        text, think = strip_think(raw)
        reasoning = "\n\n".join(r for r in (reasoning, think) if r) or None
        usage = data.get("usage") or {}
        result = GenerationResult(
            text=text, reasoning=reasoning, raw=raw,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
            # Whenever the choice carries them (asked for with `top_logprobs`; a batch result line too).
            logprobs=_token_logprobs(choice.get("logprobs")),
            tool_calls=tool_calls,
        )
        return _clip(result) if len(content_bytes) > MAX_REPLY_CHARS else result


def _clip(result: GenerationResult) -> GenerationResult:
    """`result` with text, raw and reasoning cut at MAX_REPLY_CHARS characters, `clipped` = the
    longest one's length (unchanged when none is that long; only a body that long can hold one)."""
    longest = max(len(v) for v in (result.text or "", result.raw or "", result.reasoning or ""))
    if longest <= MAX_REPLY_CHARS:
        return result
    cut = {f: v[:MAX_REPLY_CHARS] for f in ("text", "raw", "reasoning")
           if isinstance(v := getattr(result, f), str) and len(v) > MAX_REPLY_CHARS}
    return replace(result, **cut, clipped=longest)


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat message's tool calls (or a legacy `function_call`) as [{"name", "arguments"}], the
    arguments as the server sent them (a JSON string, usually), cut at MAX_REPLY_CHARS in all."""
    calls = message.get("tool_calls") or [{"function": message.get("function_call")}]
    out, room = [], MAX_REPLY_CHARS
    for call in calls if isinstance(calls, list) else [calls]:
        fn = (call.get("function") if isinstance(call, dict) else None) or {}
        if not isinstance(fn, dict):
            fn = {"name": str(fn)}
        args = fn.get("arguments")
        args = args if isinstance(args, str) or args is None else json.dumps(args, ensure_ascii=False)
        if args is not None:
            args, room = args[:max(room, 0)], room - len(args)
        out.append({"name": str(fn.get("name") or ""), "arguments": args})
    return out


def _token_logprobs(value: Any) -> list[dict[str, Any]] | None:
    """A choice's `logprobs` in one shape, per generated token {"token", "logprob", "top_logprobs":
    [{"token", "logprob"}, ...]}: chat's `content` list as it is, the completions endpoint's parallel
    lists (tokens, token_logprobs, top_logprobs as {token: logprob}) turned into that. None when the
    server sent none."""
    if not isinstance(value, dict):
        return None
    out: list[dict[str, Any]] = []
    if isinstance(value.get("content"), list):
        for t in value["content"]:
            if isinstance(t, dict) and "token" in t:
                top = [{"token": str(a.get("token")), "logprob": float(a.get("logprob"))}
                       for a in t.get("top_logprobs") or [] if isinstance(a, dict) and a.get("logprob") is not None]
                out.append({"token": str(t["token"]), "logprob": _float(t.get("logprob")), "top_logprobs": top})
    elif isinstance(value.get("tokens"), list):
        lps = value.get("token_logprobs") or [None] * len(value["tokens"])
        tops = value.get("top_logprobs") or [None] * len(value["tokens"])
        for token, lp, top in zip(value["tokens"], lps, tops):
            alts = [{"token": str(k), "logprob": float(v)} for k, v in (top or {}).items() if v is not None]
            out.append({"token": str(token), "logprob": _float(lp), "top_logprobs": alts})
    return out or None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
