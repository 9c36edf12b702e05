"""One client for every OpenAI-compatible endpoint: concurrent, cached, resumable, fault-tolerant.

`ModelClient` sends `GenerationRequest`s to the chat or completions endpoint of any
OpenAI-compatible server (llama.cpp's server, vLLM, Ollama, hosted APIs) through the official
`openai` package and returns one `GenerationResult` per request, in request order.

How it behaves, and why:

* Concurrency is bounded by `concurrency` for the whole client, over one shared connection
  pool (aiohttp transport when available: it costs much less CPU per request than the default).
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
* Reasoning models: the text may come in `reasoning_content` / `reasoning` or inside
  `<think>...</think>`; that goes to `GenerationResult.reasoning` and `text` keeps the final
  answer (empty if the model never got past its reasoning: a model failure, not ours). This is
  the only place `<think>` is removed (parsing.strip_think): tasks and parsers take `text` as is.
  A 200 response without choices or with invalid JSON is an infrastructure failure.
* Every answer is written to the cache (evekit.cache) as soon as it arrives, so an
  interrupted run resumes with only the missing calls; `offline=True` replays from the cache
  and raises `CacheMiss` instead of touching the network.
* `usage` counts, per client: `requests` sent to the network (each request once),
  `retries` (extra HTTP attempts), `cache_hits`, `failures`, tokens reported by the server
  for the network answers, and wall `seconds` spent in generate calls.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import random
import socket
import time
import warnings
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity import wait_exponential, wait_random
from tqdm.auto import tqdm

from .errors import CacheMiss, EndpointError
from .cache import CacheWriter, ResponseCache, key_fields, key_of_fields
from .parsing import strip_think
from .types import GenerationRequest, GenerationResult, Usage

# The HTTP library the installed openai is built on: httpx2 in openai>=3, httpx before.
if hasattr(openai, "DefaultAsyncHttpx2Client"):
    import httpx2 as _http
else:  # pragma: no cover - older openai
    import httpx as _http  # type: ignore[no-redef]

try:
    import aiohttp as _aiohttp
except ImportError:  # pragma: no cover - aiohttp is optional; httpx is used instead
    _aiohttp = None  # type: ignore[assignment]

__all__ = ["ModelClient", "EndpointError", "CacheMiss", "request_body", "endpoint_path"]

CLAIM_POLL_SECONDS = 0.2  # how often a process waiting for another's answer looks for it
MAX_RETRY_AFTER = 120.0  # seconds; a server asking for longer is treated as a failure
PLACEHOLDER_KEY = "EMPTY"  # what local servers get when no key is configured


class _BadResponse(Exception):
    """The server answered 200 but the body is unusable (not JSON, no choices). `retryable`: the
    body was garbled in transit (not JSON), so the same request may well succeed."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


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


def _connection_failure(exc: BaseException) -> str | None:
    """Why a connection failed (refused, unresolvable, reset), or None for a slow server.

    The aiohttp transport reports a refused connection as a connect *timeout*, so the
    exception chain is searched for the underlying error.
    """
    connect_types: tuple[type[BaseException], ...] = (ConnectionError, socket.gaierror, _http.ConnectError)
    if _aiohttp is not None:
        connect_types += (_aiohttp.ClientConnectorError, _aiohttp.ServerDisconnectedError)
    for e in _exc_chain(exc):
        if isinstance(e, connect_types):
            return _short(str(e) or type(e).__name__, 200)
    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        return _short(str(exc.__cause__ or exc), 200)
    return None


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds from `Retry-After-Ms` / `Retry-After` (number form) of an HTTP error, if any."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = exc.response.headers.get(header)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                pass
    return None


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        ra = _retry_after(exc)
        if ra is not None and ra > MAX_RETRY_AFTER:
            return False
        if exc.status_code >= 500 and _rejects_request(exc):
            return False
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    if isinstance(exc, _BadResponse):
        return exc.retryable
    return isinstance(exc, openai.APIConnectionError)  # includes APITimeoutError


def _rejects_request(exc: openai.APIStatusError) -> bool:
    """A 5xx that is really a validation error of the request (llama.cpp's server answers an
    unsupported `response_format` with HTTP 500): the same request fails again, so no retry."""
    try:
        text = exc.response.text
    except Exception:  # noqa: BLE001
        return False
    return "response_format" in text and ("literal_error" in text or "validation" in text.lower())


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return str(msg)
    try:
        return exc.response.text.strip() or exc.message
    except Exception:  # noqa: BLE001 - a body we cannot read must not hide the status
        return exc.message


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SSL_CONTEXT: Any = None


def _ssl_context() -> Any:
    """One TLS context for all sessions: building it reads the CA bundle (~70 ms)."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = _http.create_ssl_context()
    return _SSL_CONTEXT


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
    return body


def endpoint_path(api: str) -> str:
    """The path under base_url that a request of `api` ("chat" or "completions") goes to."""
    return "/chat/completions" if api == "chat" else "/completions"


class _Session:
    """What must live on one event loop: the openai client, its connection pool, the semaphore."""

    def __init__(self, client: "ModelClient") -> None:
        limits = _http.Limits(max_connections=client.concurrency,
                              max_keepalive_connections=client.concurrency)
        http_client = None
        if _aiohttp is not None and hasattr(openai, "DefaultAioHttpClient"):
            try:
                http_client = openai.DefaultAioHttpClient(limits=limits, timeout=client.timeout,
                                                          verify=_ssl_context())
            except RuntimeError:  # this openai build lacks its aiohttp transport
                http_client = None
        if http_client is None:
            http_client = _http.AsyncClient(limits=limits, timeout=client.timeout, verify=_ssl_context())
        self.openai = openai.AsyncOpenAI(
            base_url=client.base_url, api_key=client._api_key() or PLACEHOLDER_KEY,
            max_retries=0,  # tenacity retries, so that every retry is seen and counted
            timeout=client.timeout, http_client=http_client)
        self.semaphore = asyncio.Semaphore(client.concurrency)
        self.users = 0


class ModelClient:
    """Concurrent, cached, resumable, fault-tolerant calls to one OpenAI-compatible model.

    Parameters: `model` as the server names it; `base_url` such as "http://127.0.0.1:8080/v1";
    `api_key_env` the NAME of the environment variable holding the key (None for local
    servers, which get a placeholder key); `concurrency` requests in flight at most;
    `timeout` seconds per HTTP attempt; `max_retries` extra attempts per request;
    `cache_dir` enables the on-disk cache; `offline` replays from it only; `name` labels
    progress bars; `progress` shows them. `backoff`/`max_backoff` shape the exponential
    waits between retries (seconds). See the module docstring for the error rules.
    """

    def __init__(self, model: str, base_url: str, api_key_env: str | None = None, *,
                 concurrency: int = 8, timeout: float = 120.0, max_retries: int = 4,
                 cache_dir: str | Path | None = None, offline: bool = False,
                 name: str | None = None, progress: bool = True,
                 backoff: float = 0.5, max_backoff: float = 30.0) -> None:
        if not model:
            raise ValueError("ModelClient: `model` is empty")
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
    def generate(self, requests: Sequence[GenerationRequest], desc: str = "") -> list[GenerationResult]:
        """Answer `requests` (results in the same order). Synchronous; works in Jupyter,
        where an event loop already runs, by running the work in a worker thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests, desc))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="evekit-client") as pool:
            return pool.submit(asyncio.run, self.agenerate(requests, desc)).result()

    async def agenerate(self, requests: Sequence[GenerationRequest], desc: str = "") -> list[GenerationResult]:
        """Async version of `generate`."""
        started = time.perf_counter()
        requests = list(requests)
        for i, r in enumerate(requests):
            if not isinstance(r, GenerationRequest):
                raise TypeError(f"request {i} is a {type(r).__name__}, not a GenerationRequest")
        fields = [key_fields(self.model, r) for r in requests]
        keys = [key_of_fields(f) for f in fields]
        results: list[GenerationResult | None] = [None] * len(requests)
        hits = self.cache.get_many(keys) if self.cache is not None else {}
        todo: dict[str, list[int]] = {}  # key -> positions (identical requests are sent once)
        for i, k in enumerate(keys):
            if k in hits:
                results[i] = replace(hits[k])
            else:
                todo.setdefault(k, []).append(i)
        n_cached = len(requests) - sum(len(v) for v in todo.values())
        self.usage.cache_hits += n_cached
        if todo and self.offline:
            missing = sum(len(v) for v in todo.values())
            raise CacheMiss(f"{self.name}: {missing} of {len(requests)} requests are not in the cache "
                            f"at {self.cache_dir} and offline=True forbids network calls; run once "
                            "online (offline=False) or import the recording with evekit.cache.import_cache")

        bar = tqdm(total=len(requests), initial=n_cached, desc=desc or self.name, unit="req",
                   disable=not self.progress, dynamic_ncols=True)
        counts = {"cached": n_cached, "failed": 0}
        bar.set_postfix(counts, refresh=False)

        writer = CacheWriter(self.cache) if self.cache is not None and todo else None
        # Another process on the same cache may be sending some of these right now: each key is
        # claimed just before it is sent, and a key another process holds is waited for, not paid
        # for twice.
        owner = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}:{time.monotonic_ns()}"
        claim_ttl = self.timeout * (self.max_retries + 1) + 60.0

        aborted: list[BaseException] = []  # set by an EndpointError: send nothing more

        async def answered_elsewhere(key: str) -> GenerationResult | None:
            """The answer of the process holding `key`'s claim, or None when the claim ended
            without one (that call failed, or its process died)."""
            assert self.cache is not None
            while True:
                await asyncio.sleep(CLAIM_POLL_SECONDS)
                if (hit := self.cache.get(key)) is not None:
                    return hit
                if not self.cache.claimed(key):
                    return self.cache.get(key)  # the answer may have landed in between

        def take(key: str, where: list[int], hit: GenerationResult) -> None:
            """An answer another process got for `key` (it counts as a cache hit)."""
            self.usage.cache_hits += len(where)
            for i in where:
                results[i] = replace(hit)
            counts["cached"] += len(where)
            bar.update(len(where))

        async def one(key: str, where: list[int], session: _Session) -> None:
            while True:
                async with session.semaphore:
                    if aborted:
                        return
                    if writer is None or key in self.cache.claim_many([key], owner, claim_ttl):
                        # Answered by another process since this run looked the key up?
                        if writer is not None and (hit := self.cache.get(key)) is not None:
                            self.cache.release(owner, [key])
                            take(key, where, hit)
                            return
                        try:
                            result = await self._call(session, requests[where[0]])
                        except EndpointError as e:
                            aborted.append(e)
                            raise
                        break
                if (elsewhere := await answered_elsewhere(key)) is not None:
                    take(key, where, elsewhere)
                    return
            if writer is not None and (not result.failed or result.rejected):
                writer.put(key, fields[where[0]], result)  # the write also ends the claim
            elif writer is not None:
                self.cache.release(owner, [key])  # a failure: let another process try
            for j, i in enumerate(where):
                results[i] = result if j == 0 else replace(result)
            if result.failed:
                counts["failed"] += len(where)
                bar.set_postfix(counts, refresh=False)
            bar.update(len(where))

        try:
            if todo:
                async with self._session() as session:
                    tasks = [asyncio.ensure_future(one(k, w, session)) for k, w in todo.items()]
                    try:
                        await asyncio.gather(*tasks)
                    except BaseException:
                        for t in tasks:
                            t.cancel()
                        await asyncio.gather(*tasks, return_exceptions=True)
                        raise
        finally:
            bar.close()
            if writer is not None:
                writer.close()  # everything answered is on disk before we return or raise
                self.cache.release(owner)  # claims left by an interruption or an abort
            self.usage.seconds += time.perf_counter() - started
        return results  # type: ignore[return-value]

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
                await session.openai.close()

    def _wait(self, state: RetryCallState) -> float:
        """Honour Retry-After when the server sent one, else exponential backoff with jitter."""
        ra = _retry_after(state.outcome.exception() if state.outcome else None)
        if ra is not None:
            return ra * (1 + 0.1 * random.random())
        return self._backoff(state)

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        return request_body(self.model, request, self._max_tokens_field)

    async def _post(self, session: _Session, request: GenerationRequest) -> Any:
        # An absolute URL: openai then skips re-merging it with base_url (a third of its
        # per-request CPU time in openai 3.x).
        path = f"{self.base_url}/chat/completions" if request.api == "chat" else f"{self.base_url}/completions"
        try:
            response = await session.openai.post(path, cast_to=_http.Response, body=self._body(request))
        except openai.APIStatusError as e:
            self._answered = True
            if e.status_code == 400 and self._max_tokens_field == "max_tokens" \
                    and "max_completion_tokens" in _server_message(e):
                # Newer hosted reasoning models reject max_tokens; switch once and resend.
                self._max_tokens_field = "max_completion_tokens"
                self.usage.retries += 1
                response = await session.openai.post(path, cast_to=_http.Response, body=self._body(request))
            else:
                raise
        self._answered = True
        return response

    async def _call(self, session: _Session, request: GenerationRequest) -> GenerationResult:
        self.usage.requests += 1
        retrying = self._retrying.copy()
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._post(session, request)
                    # Inside the retried block: a 200 whose body is not JSON (a proxy's error page,
                    # a truncated body) is retried like a 5xx.
                    result = self._parse(request, response)
        except Exception as exc:  # noqa: BLE001 - classified below; EndpointError propagates
            retries = max(0, retrying.statistics.get("attempt_number", 1) - 1)
            self.usage.retries += retries
            return self._failure(exc, retries)
        retries = max(0, retrying.statistics.get("attempt_number", 1) - 1)
        self.usage.retries += retries
        self.usage.prompt_tokens += result.prompt_tokens
        self.usage.completion_tokens += result.completion_tokens
        self._connection_streak = 0
        return result

    def _where(self) -> str:
        return f"{self.base_url} (model {self.model})"

    def _failure(self, exc: Exception, retries: int) -> GenerationResult:
        """Turn an exception into a failed result, or raise EndpointError for config errors."""
        after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
        if isinstance(exc, openai.APIStatusError):
            status, detail = exc.status_code, _short(_server_message(exc))
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
        elif isinstance(exc, openai.APIConnectionError):
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

    def _parse(self, request: GenerationRequest, response: Any) -> GenerationResult:
        content_bytes = response.content
        try:
            data = json.loads(content_bytes)
        except ValueError:
            snippet = _short(content_bytes[:120].decode("utf-8", "replace"), 120)
            raise _BadResponse(f"not JSON (HTTP {response.status_code}, body starts {snippet!r})",
                               retryable=True) from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            err = data.get("error") if isinstance(data, dict) else None
            extra = f"; server said: {_short(json.dumps(err, ensure_ascii=False), 200)}" if err else ""
            raise _BadResponse(f"the response has no choices{extra}")
        choice = choices[0]
        reasoning: str | None = None
        if request.api == "chat":
            message = choice.get("message") or {}
            raw = _as_text(message.get("content"))
            reasoning = _as_text(message.get("reasoning_content") or message.get("reasoning"))
        else:
            raw = _as_text(choice.get("text"))
        text, think = strip_think(raw)
        reasoning = "\n\n".join(r for r in (reasoning, think) if r) or None
        usage = data.get("usage") or {}
        return GenerationResult(
            text=text, reasoning=reasoning, raw=raw,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
        )
