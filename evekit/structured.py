"""Structured output from any OpenAI-compatible server: one JSON object per conversation.

Servers differ in what they accept: hosted APIs take `response_format={"type": "json_schema"}`,
llama.cpp's server answers that with HTTP 500 but constrains `{"type": "json_object", "schema"}`,
and some servers take neither. `ask_json` walks that fallback chain (json_schema -> json_object
-> text), remembers per client which method worked, retries an unusable reply once with a
reminder, and validates every answer against the schema. It sits right above the model client
(evekit.client) and knows nothing about judges: the judges (evekit.judges) bring the schema, the
text parser and the reminder.
"""
from __future__ import annotations

import json
import re
import threading
import weakref
from typing import Any, Callable, NamedTuple, Sequence

import jsonschema

from evekit.errors import CacheMiss
from evekit.types import GenerationRequest, GenerationResult

__all__ = ["METHODS", "DEFAULT_REMINDER", "JsonAnswer", "UnusableReply", "ask_json", "first_requests", "as_results",
           "response_format", "extract_json", "remembered_method", "forget_method"]

METHODS: tuple[str, ...] = ("json_schema", "json_object", "text")

DEFAULT_REMINDER = (
    "Your previous reply could not be used ({reason}). Reply again with only a JSON object "
    "with the keys {keys}, as instructed."
)


class UnusableReply(ValueError):
    """Raised by a text parser or a screen: the reply came back but is no usable answer (the
    message is the reason). `ask_json` treats it like a reply that fails the schema."""


class JsonAnswer(NamedTuple):
    """One answer of `ask_json`; unpacks as `(parsed, raw, method, error, flag)`.

    `parsed` is the validated dict (None when unusable); `raw` is the model's last reply as the
    server sent it (None when no reply came back); `method` is the structured-output method of
    the last call; `error` says why `parsed` is None (infrastructure failure or unusable reply);
    `flag` is a note on a usable answer that its caller wants seen (a judge whose rationale
    states the other verdict), None otherwise: it never makes the answer unusable.
    """

    parsed: dict[str, Any] | None
    raw: str | None
    method: str
    error: str | None
    flag: str | None = None


# Which method worked, per client object (so each judge pays for the probing only once).
_METHOD_MEMORY: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
_MEMORY_LOCK = threading.Lock()


def remembered_method(client: Any) -> str | None:
    """The structured-output method that last worked for `client`, or None if not probed yet."""
    with _MEMORY_LOCK:
        return _METHOD_MEMORY.get(client)


def forget_method(client: Any) -> None:
    """Forget what worked for `client` (the next `ask_json` probes the chain again)."""
    with _MEMORY_LOCK:
        _METHOD_MEMORY.pop(client, None)


def _remember(client: Any, method: str) -> None:
    with _MEMORY_LOCK:
        _METHOD_MEMORY[client] = method


def response_format(method: str, schema: dict[str, Any], name: str = "verdict") -> dict[str, Any] | None:
    """The OpenAI `response_format` for one method of the chain (None for plain text)."""
    if method == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if method == "json_object":
        # llama.cpp's server rejects json_schema (HTTP 500) but constrains json_object to `schema`.
        return {"type": "json_object", "schema": schema}
    if method == "text":
        return None
    raise ValueError(f"unknown structured-output method {method!r}; expected one of {METHODS}")


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_json(text: str | None) -> dict[str, Any] | None:
    """The JSON object in a reply: the whole text, a ```json fence, or else the last {...} in it."""
    if not text or not text.strip():
        return None
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)]
    for c in candidates:
        try:
            obj = json.loads(c)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    spans = json_spans(text)
    return spans[-1][2] if spans else None


def json_spans(text: str) -> list[tuple[int, int, dict]]:
    """Every top-level JSON object in `text`: (start, end, object), in order."""
    decoder, spans, pos = json.JSONDecoder(), [], 0
    while (start := text.find("{", pos)) != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if isinstance(obj, dict):
            spans.append((start, end, obj))
        pos = end
    return spans


def _coerce(obj: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Forgive harmless type slips ("1" or 1.0 for 1, "a" for enum "A"); drop unknown keys."""
    props: dict[str, Any] = schema.get("properties", {})
    out = {k: v for k, v in obj.items() if not props or k in props}
    for key, sub in props.items():
        if key not in out:
            continue
        v = out[key]
        if sub.get("type") == "integer" and not isinstance(v, bool):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            elif isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
                v = int(v)
        elif sub.get("type") == "string" and "enum" in sub and isinstance(v, str):
            for option in sub["enum"]:
                if isinstance(option, str) and option.lower() == v.strip().lower():
                    v = option
        out[key] = v
    return out


Screen = Callable[..., "str | None"]


def _with_quoted(fn: Callable[..., Any], quoted: Sequence[str] | None) -> Callable[[Any], Any]:
    """`fn` with the item's `quoted` texts as its last argument, or `fn` itself without them."""
    if quoted is None:
        return fn
    return lambda *args: fn(*args, quoted)


def _check(obj: dict[str, Any] | None, schema: dict[str, Any],
           normalize: Callable[[dict[str, Any]], dict[str, Any]] | None,
           method: str, screen: Callable[..., "str | None"] | None = None,
           text: str = "") -> tuple[dict | None, str | None]:
    if obj is None:
        return None, "no JSON object in the reply" if method != "text" else "nothing usable in the reply"
    if normalize is not None:
        obj = normalize(dict(obj))
    obj = _coerce(obj, schema)
    try:
        jsonschema.validate(obj, schema)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        return None, f"reply does not match the schema: {e.message}" + (f" (at {where})" if where else "")
    if screen is not None:  # valid JSON, but is it a verdict? (e.g. a copied template)
        reason = screen(obj, text)
        if reason:
            return None, reason
    return obj, None


class _Attempt(NamedTuple):
    answer: JsonAnswer
    infra: bool  # True: the call itself failed (no reply); False: reply came back
    # A failure replayed from the cache that is not the server's refusal of the format (a batch
    # line that came back with an error): it says nothing about whether the method works.
    recorded: bool = False


def _interpret(res: GenerationResult, method: str, schema: dict[str, Any],
               text_parser: Callable[[str], dict | None],
               normalize: Callable[[dict], dict] | None,
               extract: Callable[[str], dict | None] = extract_json,
               screen: Callable[[dict, str], "str | None"] | None = None) -> _Attempt:
    if res.failed:
        return _Attempt(JsonAnswer(None, None, method, f"call failed ({method}): {res.error}"), True,
                        recorded=res.cached and not res.rejected)
    raw = res.raw if res.raw is not None else res.text
    text = res.text or ""
    if not text.strip():
        return _Attempt(JsonAnswer(None, raw, method, f"unusable reply ({method}): {res.note or 'empty reply'}"),
                        False)
    try:
        obj = extract(text) if method != "text" else text_parser(text)
    except UnusableReply as e:
        return _Attempt(JsonAnswer(None, raw, method, f"unusable reply ({method}): {e}"), False)
    parsed, err = _check(obj, schema, normalize, method, screen, text)
    if err:
        return _Attempt(JsonAnswer(None, raw, method, f"unusable reply ({method}): {err}"), False)
    return _Attempt(JsonAnswer(parsed, raw, method, None), False)


def _failures(client: Any) -> int:
    return int(getattr(getattr(client, "usage", None), "failures", 0) or 0)


def _uncount_probe_rejections(client: Any, n: int) -> None:
    """A method the server rejects while the chain is probed (llama.cpp answers json_schema with
    HTTP 500) is how the chain learns what works, not a failure: the client counted the call in
    `usage.failures`; take it back out, so usage counts only calls whose item got no answer. The
    request itself stays counted in `usage.requests`. When the last method of the chain fails too,
    that failure stays counted."""
    if n > 0:
        client.usage.failures -= n


def _to_prompt(messages: Sequence[dict[str, str]]) -> str:
    return "\n\n".join(m["content"] for m in messages) + "\n"


def _request(conv: Sequence[dict[str, str]], fmt: dict[str, Any] | None, *, api: str, temperature: float,
             max_tokens: int, seed: int | None = None) -> GenerationRequest:
    """One call of `ask_json`: the chat with the method's `response_format`, or (completions) the
    chat joined into one prompt."""
    if api == "chat":
        return GenerationRequest(messages=tuple(dict(m) for m in conv), temperature=temperature,
                                 max_tokens=max_tokens, response_format=fmt, seed=seed)
    return GenerationRequest(prompt=_to_prompt(conv), temperature=temperature, max_tokens=max_tokens, seed=seed)


def first_requests(messages: Sequence[Sequence[dict[str, str]]], schema: dict[str, Any], *, max_tokens: int,
                   temperature: float = 0.0, name: str = "verdict", methods: Sequence[str] = METHODS,
                   api: str = "chat", request_schema: dict[str, Any] | None = None,
                   seeds: Sequence[int | None] | None = None, **_ask_json_only: Any) -> list[GenerationRequest]:
    """The requests `ask_json` with these arguments sends first, one per conversation, from a client
    that has not probed the chain yet: its first method (json_schema on chat; text on completions).
    Only these are known before any reply: a format the server refuses moves the chain on, and an
    unusable reply gets one reminder. Takes `ask_json`'s keywords (parsers, desc: ignored here), so
    a caller can pass the one set of arguments to both."""
    chain = tuple(methods) if api == "chat" else ("text",)
    fmt = response_format(chain[0], request_schema or schema, name)
    seeds = list(seeds) if seeds is not None else [None] * len(messages)
    return [_request(conv, fmt, api=api, temperature=temperature, max_tokens=max_tokens, seed=seed)
            for conv, seed in zip(messages, seeds)]


def ask_json(
    client: Any,
    messages: Sequence[Sequence[dict[str, str]]],
    schema: dict[str, Any],
    *,
    max_tokens: int,
    temperature: float = 0.0,
    name: str = "verdict",
    text_parser: Callable[[str], dict[str, Any] | None] | None = None,
    normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    reminder: str = DEFAULT_REMINDER,
    methods: Sequence[str] = METHODS,
    api: str = "chat",
    desc: str = "",
    max_probe: int = 3,
    extract: Callable[..., dict[str, Any] | None] | None = None,
    screen: Screen | None = None,
    request_schema: dict[str, Any] | None = None,
    quoted: Sequence[Sequence[str]] | None = None,
    seeds: Sequence[int | None] | None = None,
) -> list[JsonAnswer]:
    """Ask a model for one JSON object per conversation, whatever structured output it supports.

    `messages[i]` is the chat (list of {"role","content"}) for item i; the result list has one
    `JsonAnswer(parsed, raw, method, error)` per item, in order (a plain tuple unpacking works).

    Why a chain: hosted APIs take `response_format={"type":"json_schema",...}`, llama.cpp's
    server answers that with HTTP 500 but takes `{"type":"json_object","schema":...}`, and some
    servers take neither. So:

    1. Probe: while nothing is known for this `client`, items are sent one at a time through
       `methods` (default json_schema -> json_object -> text); the first method that returns a
       reply matching `schema` is remembered for this client object (`remembered_method`), so
       later items and later calls pay one call each. At most `max_probe` items are probed; if
       none succeeds, the rest go out with the last method of the chain.
    2. The remaining items go out in one batch (`client.generate`, concurrent) with that method.
    3. A reply that came back but is unusable (empty, no JSON, fails `schema`: e.g. a verdict of
       2 or "maybe") is retried once with `reminder` appended (`{reason}` and `{keys}` are
       filled in). An infrastructure failure (result with `.error`, after the client's own
       retries) is not retried again here.
    Whatever is still unusable comes back with `parsed=None` and the reason in `error`; nothing
    is raised for a bad item, so a run always finishes. Config errors (`EndpointError`) and
    offline cache misses (`CacheMiss`, except for methods skipped while probing) do propagate.

    Parsing: for the JSON methods the reply must contain a JSON object (whole text, ```json
    fence or the last {...}); for "text", `text_parser(reply)` (default: the same JSON
    extraction) turns prose into a dict. `normalize(dict)` may then fix up the dict (e.g. map
    "PASS" to 1) before harmless type slips are coerced ("1" -> 1, "a" -> enum "A"), unknown keys
    dropped and the result validated against `schema` with jsonschema. `extract(reply)` replaces
    the JSON extraction of the JSON methods (a judge kind reads the first object it states itself);
    `screen(parsed, reply)` may then name why a valid reply is still unusable (a copied template):
    that reply is treated like one failing the schema. A text parser may raise `UnusableReply`.

    `request_schema` is the schema the JSON methods send (default: `schema`), for a bound the
    server's grammar should enforce but a reply need not meet (a justification's `maxLength`).

    `quoted[i]` (optional) are texts item i's reply may quote or repeat but must not state as its
    own (a judge's answers under judgement): `text_parser`, `extract` and `screen` then get them
    as their last argument (`text_parser(reply, quoted)`, `screen(parsed, reply, quoted)`).

    `seeds[i]` (optional) is the `seed` sent with item i's calls (None: no seed), so repeated samples
    of one conversation are distinct calls.

    `api="completions"` sends the messages joined into one prompt and uses only "text".
    """
    msgs = [tuple(dict(m) for m in conv) for conv in messages]
    if not msgs:
        return []
    for m in methods:
        response_format(m, schema)  # validates the method names
    chain = tuple(methods) if api == "chat" else ("text",)
    if not chain:
        raise ValueError("ask_json needs at least one method")
    if seeds is not None and len(seeds) != len(msgs):
        raise ValueError(f"ask_json: {len(seeds)} seeds for {len(msgs)} conversations")
    if quoted is not None and len(quoted) != len(msgs):
        raise ValueError(f"ask_json: {len(quoted)} quoted entries for {len(msgs)} conversations")
    parser = text_parser or (lambda text, *_: extract_json(text))
    extractor = extract or (lambda text, *_: extract_json(text))
    keys = ", ".join(f'"{k}"' for k in schema.get("properties", {}))

    def call(idxs: list[int], method: str, extra: dict[int, tuple[dict, ...]] | None = None) -> dict[int, _Attempt]:
        fmt = response_format(method, request_schema or schema, name)
        reqs = [_request(msgs[i] + (extra or {}).get(i, ()), fmt, api=api, temperature=temperature,
                         max_tokens=max_tokens, seed=None if seeds is None else seeds[i]) for i in idxs]
        results = client.generate(reqs, desc=desc or f"{name} ({method})")
        out = {}
        for i, r in zip(idxs, results):
            q = None if quoted is None else list(quoted[i])
            out[i] = _interpret(r, method, schema, _with_quoted(parser, q), normalize, _with_quoted(extractor, q),
                                None if screen is None else _with_quoted(screen, q))
        return out

    def remind(attempts: dict[int, _Attempt], method: str) -> dict[int, _Attempt]:
        bad = [i for i, a in attempts.items() if a.answer.parsed is None and not a.infra]
        if not bad:
            return attempts
        extra = {}
        for i in bad:
            reason = (attempts[i].answer.error or "").split(": ", 1)[-1]
            extra[i] = ({"role": "assistant", "content": attempts[i].answer.raw or ""},
                        {"role": "user", "content": reminder.format(reason=reason, keys=keys)})
        retried = call(bad, method, extra)
        for i, a in retried.items():
            if a.answer.parsed is None:  # keep both reasons: first reply and retry
                first, again = attempts[i].answer.error, a.answer.error
                error = f"{again} (also after a reminder)" if again == first else \
                    f"{again}, after a reminder (first reply: {first})"
                a = _Attempt(a.answer._replace(error=error), a.infra)
            attempts[i] = a
        return attempts

    out: list[JsonAnswer | None] = [None] * len(msgs)
    todo = list(range(len(msgs)))
    known = remembered_method(client)
    known = known if known in chain else None
    probes = 0
    disproved: set[str] = set()  # methods that got a refusal or an unusable reply while probing
    while known is None and todo and probes < max_probe:
        i = todo.pop(0)
        probes += 1
        errors, misses, last = [], [], None
        for k, method in enumerate(chain):
            failures_before = _failures(client)
            try:
                attempt = call([i], method)
            except CacheMiss as e:  # offline replay: this method was not the one recorded
                misses.append(e)
                continue
            if k == len(chain) - 1:
                attempt = remind(attempt, method)
            last = attempt[i]
            if last.answer.parsed is not None:
                known = method
                _remember(client, method)
                break
            if last.recorded:  # this item failed in a batch: no verdict on the method, no fallback call
                break
            disproved.add(method)
            if last.infra and k < len(chain) - 1:
                _uncount_probe_rejections(client, _failures(client) - failures_before)
            errors.append(last.answer.error)
        if last is None:
            raise misses[-1]
        if known is None and len(errors) > 1:
            last = _Attempt(last.answer._replace(error="; ".join(errors)), last.infra)
        out[i] = last.answer
    if todo:
        # Nothing known: when every probe was a recorded (batch) failure, nothing was disproved and
        # the rest go out with the first method, as the batch sent them; else with the last one.
        method = known or (chain[0] if probes and not disproved else chain[-1])
        done = remind(call(todo, method), method)
        for i, a in done.items():
            out[i] = a.answer
    return [a for a in out if a is not None]


def as_results(answers: Sequence[JsonAnswer]) -> list[GenerationResult]:
    """`ask_json` answers as generation results, for a task's parser: a validated reply as its JSON
    text, an unusable one as the text that came back (the parser then says why: unparsed), no
    reply at all as a failed result (`error`: the infrastructure's failure)."""
    out = []
    for a in answers:
        if a.parsed is None and a.raw is None:
            out.append(GenerationResult(text=None, error=a.error))
        else:
            text = json.dumps(a.parsed, ensure_ascii=False) if a.parsed is not None else a.raw
            out.append(GenerationResult(text=text, raw=a.raw))
    return out
