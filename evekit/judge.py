"""LLM judges for EVE's open-ended tasks, multi-judge voting and inter-judge agreement.

Three kinds of judge, each a prompt template in `evekit/prompts/judge_<kind>.txt`:

- `fact_check` (open_ended): EVE's strict binary fact check against the reference answer
  (fail on any contradiction, fail on a missing essential fact, extra correct information is
  fine, substance over style). 1 = PASS, 0 = FAIL.
- `context` (open_ended_w_context): the same rules, with the context documents also shown.
- `refusal`: PASS when the model declines / says the context lacks the information.

Judges are asked for a structured verdict through `ask_json`, which walks a fallback chain
(JSON schema -> JSON mode with a schema -> plain text) because servers differ in what they
accept. A judge that gives no usable verdict for a sample *abstains*: the reason is recorded
and counted, and the abstention is never turned into a FAIL or a PASS (see `vote`).
"""
from __future__ import annotations

import json
import math
import re
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from itertools import combinations
from typing import Any, Callable, Literal, Mapping, NamedTuple, Sequence

import jsonschema
import numpy as np
import pandas as pd

from evekit.types import GenerationRequest, GenerationResult, JudgeSpec, Usage

JudgeKind = Literal["fact_check", "context", "refusal"]
KINDS: tuple[str, ...] = ("fact_check", "context", "refusal")

# ---------------------------------------------------------------------------------------------
# Structured output with a fallback chain (shared with evekit.winrate)
# ---------------------------------------------------------------------------------------------

METHODS: tuple[str, ...] = ("json_schema", "json_object", "text")

DEFAULT_REMINDER = (
    "Your previous reply could not be used ({reason}). Reply again with only a JSON object "
    "with the keys {keys}, as instructed."
)


class JsonAnswer(NamedTuple):
    """One answer of `ask_json`; unpacks as `(parsed, raw, method, error)`.

    `parsed` is the validated dict (None when unusable); `raw` is the model's last reply as the
    server sent it (None when no reply came back); `method` is the structured-output method of
    the last call; `error` says why `parsed` is None (infrastructure failure or unusable reply).
    """

    parsed: dict[str, Any] | None
    raw: str | None
    method: str
    error: str | None


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
    decoder, found, pos = json.JSONDecoder(), None, 0
    while (start := text.find("{", pos)) != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if isinstance(obj, dict):
            found = obj
        pos = end
    return found


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


def _check(obj: dict[str, Any] | None, schema: dict[str, Any],
           normalize: Callable[[dict[str, Any]], dict[str, Any]] | None,
           method: str) -> tuple[dict | None, str | None]:
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
    return obj, None


class _Attempt(NamedTuple):
    answer: JsonAnswer
    infra: bool  # True: the call itself failed (no reply); False: reply came back


def _interpret(res: GenerationResult, method: str, schema: dict[str, Any],
               text_parser: Callable[[str], dict | None],
               normalize: Callable[[dict], dict] | None) -> _Attempt:
    if res.failed:
        return _Attempt(JsonAnswer(None, None, method, f"call failed ({method}): {res.error}"), True)
    raw = res.raw if res.raw is not None else res.text
    text = res.text or ""
    if not text.strip():
        return _Attempt(JsonAnswer(None, raw, method, f"unusable reply ({method}): empty reply"), False)
    obj = extract_json(text) if method != "text" else text_parser(text)
    parsed, err = _check(obj, schema, normalize, method)
    if err:
        return _Attempt(JsonAnswer(None, raw, method, f"unusable reply ({method}): {err}"), False)
    return _Attempt(JsonAnswer(parsed, raw, method, None), False)


@lru_cache(maxsize=1)
def _client_errors() -> tuple[type, type]:
    """(CacheMiss, EndpointError) from evekit.client, or placeholders while it does not exist."""
    try:
        from evekit.client import CacheMiss, EndpointError
    except ImportError:  # pragma: no cover - only before evekit.client exists
        class CacheMiss(RuntimeError): ...  # type: ignore[no-redef]
        class EndpointError(RuntimeError): ...  # type: ignore[no-redef]
    return CacheMiss, EndpointError


def _to_prompt(messages: Sequence[dict[str, str]]) -> str:
    return "\n\n".join(m["content"] for m in messages) + "\n"


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
    dropped and the result validated against `schema` with jsonschema.

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
    parser = text_parser or extract_json
    keys = ", ".join(f'"{k}"' for k in schema.get("properties", {}))
    cache_miss, _ = _client_errors()

    def call(idxs: list[int], method: str, extra: dict[int, tuple[dict, ...]] | None = None) -> dict[int, _Attempt]:
        fmt = response_format(method, schema, name)
        reqs = []
        for i in idxs:
            conv = msgs[i] + (extra or {}).get(i, ())
            if api == "chat":
                reqs.append(GenerationRequest(messages=conv, temperature=temperature,
                                              max_tokens=max_tokens, response_format=fmt))
            else:
                reqs.append(GenerationRequest(prompt=_to_prompt(conv), temperature=temperature,
                                              max_tokens=max_tokens))
        results = client.generate(reqs, desc=desc or f"{name} ({method})")
        return {i: _interpret(r, method, schema, parser, normalize) for i, r in zip(idxs, results)}

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
    while known is None and todo and probes < max_probe:
        i = todo.pop(0)
        probes += 1
        errors, misses, last = [], [], None
        for k, method in enumerate(chain):
            try:
                attempt = call([i], method)
            except cache_miss as e:  # offline replay: this method was not the one recorded
                misses.append(e)
                continue
            if k == len(chain) - 1:
                attempt = remind(attempt, method)
            last = attempt[i]
            if last.answer.parsed is not None:
                known = method
                _remember(client, method)
                break
            errors.append(last.answer.error)
        if last is None:
            raise misses[-1]
        if known is None and len(errors) > 1:
            last = _Attempt(last.answer._replace(error="; ".join(errors)), last.infra)
        out[i] = last.answer
    if todo:
        method = known or chain[-1]
        done = remind(call(todo, method), method)
        for i, a in done.items():
            out[i] = a.answer
    return [a for a in out if a is not None]


# ---------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "verdict": {"type": "integer", "enum": [0, 1]},
    },
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}

JUDGE_REMINDER = (
    "Your previous reply could not be used ({reason}). Reply again with only this JSON object: "
    '{{"reasoning": "<one or two sentences>", "verdict": 1}} for PASS or the same with '
    '"verdict": 0 for FAIL. The verdict must be the number 0 or 1.'
)

# Delimiter tags of the judge prompts; occurrences inside user-provided text are neutralised.
_TAGS = ("question", "reference", "answer", "documents", "document", "context")
_TAG_RE = re.compile(r"<(\s*/?\s*)(" + "|".join(_TAGS) + r")", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass
class JudgeCase:
    """What a judge sees for one sample: the model's answer plus reference and/or context."""

    question: str
    answer: str
    reference: str | None = None
    context: list[str] | None = None


def load_prompt(kind: str) -> tuple[str, str]:
    """(system, user) template of `evekit/prompts/judge_<kind>.txt` (sections `[system]`, `[user]`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown judge kind {kind!r}; expected one of {KINDS}")
    return read_prompt_file(f"judge_{kind}.txt")


@lru_cache(maxsize=None)
def read_prompt_file(fname: str) -> tuple[str, str]:
    """(system, user) sections of a template file in `evekit/prompts/` (`[system]` then `[user]`)."""
    text = resources.files("evekit").joinpath("prompts", fname).read_text(encoding="utf-8")
    m = re.fullmatch(r"\s*\[system\]\n(.*?)\n\[user\]\n(.*)", text, re.DOTALL)
    if not m:
        raise ValueError(f"evekit/prompts/{fname}: expected a [system] section then a [user] section")
    return m.group(1).strip(), m.group(2).strip()


def neutralise(text: str) -> str:
    """Make delimiter tags inside user-provided text inert ("</answer>" -> "&lt;/answer>").

    So that an answer cannot close its own block and pose as instructions to the judge.
    """
    return _TAG_RE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def _fill(template: str, values: Mapping[str, str], where: str) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise ValueError(f"{where}: unknown placeholder {{{{{m.group(1)}}}}}")
        return values[m.group(1)]
    return _PLACEHOLDER.sub(sub, template)  # one pass: inserted text is never re-expanded


def render_messages(kind: str, case: JudgeCase, index: int = 0) -> list[dict[str, str]]:
    """The judge's chat for one case; `index` only serves error messages."""
    system, user = load_prompt(kind)
    where = f"judge case {index} ({kind})"
    if not isinstance(case.answer, str):
        raise ValueError(f"{where}: field 'answer' must be a string, got {type(case.answer).__name__}")
    if not (case.question or "").strip():
        raise ValueError(f"{where}: field 'question' is empty")
    if kind in ("fact_check", "context") and not (case.reference or "").strip():
        raise ValueError(f"{where}: field 'reference' is empty; the {kind} judge needs the reference answer")
    docs = [d for d in (case.context or []) if d and str(d).strip()]
    if kind in ("context", "refusal") and not docs:
        raise ValueError(f"{where}: field 'context' is empty; the {kind} judge needs the context documents")
    documents = "\n".join(f'<document index="{k}">\n{neutralise(str(d).strip())}\n</document>'
                          for k, d in enumerate(docs, 1))
    values = {
        "question": neutralise(case.question.strip()),
        "answer": neutralise(case.answer.strip()),
        "reference": neutralise((case.reference or "").strip()),
        "documents": documents,
    }
    return [{"role": "system", "content": system},
            {"role": "user", "content": _fill(user, values, f"evekit/prompts/judge_{kind}.txt")}]


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------

_LABELLED = re.compile(r"verdict[\"'*\s]*(?:[:=]|is|of)?[\"'*\s]*([A-Za-z0-9.]+)", re.IGNORECASE)
_WORD = re.compile(r"\b(PASS|FAIL)(?:ED|ES)?\b")
_TRAILING_DIGIT = re.compile(r"(?:^|[\s:>(\[\"'*])([01])[\s.)\]\"'*]*$")
_VALID = {"pass": 1, "passed": 1, "fail": 0, "failed": 0, "1": 1, "0": 0}


def _verdict_value(token: Any) -> Any:
    """Map "PASS"/"FAIL"/"1"/true to 1/0; anything else is returned unchanged (validation names it)."""
    if isinstance(token, bool):
        return int(token)
    if isinstance(token, str):
        return _VALID.get(token.strip().strip(".").lower(), token)
    return token


def parse_verdict_text(text: str) -> dict[str, Any] | None:
    """Read a verdict out of a prose reply (the last step of the fallback chain).

    In order: a JSON object with "verdict"; a labelled verdict ("verdict: 1", "Verdict: PASS");
    the last upper-case PASS or FAIL; a lone 0 or 1 at the very end. A label with an unusable
    value ("verdict: maybe", "verdict: 2") and nothing else is returned as is, so that the
    schema check names it. None when there is no verdict at all.
    """
    obj = extract_json(text)
    if obj is not None and "verdict" in obj:
        return obj
    reasoning = text.strip()
    labelled = [_verdict_value(t) for t in _LABELLED.findall(text)]
    valid = [v for v in labelled if v in (0, 1)]
    if valid:
        return {"reasoning": reasoning, "verdict": valid[-1]}
    words = _WORD.findall(text)
    if words:
        return {"reasoning": reasoning, "verdict": 1 if words[-1] == "PASS" else 0}
    m = _TRAILING_DIGIT.search(reasoning)
    if m:
        return {"reasoning": reasoning, "verdict": int(m.group(1))}
    if labelled:
        return {"reasoning": reasoning, "verdict": labelled[-1]}
    return None


def _normalize_verdict(obj: dict[str, Any]) -> dict[str, Any]:
    obj.setdefault("reasoning", "")
    if obj["reasoning"] is None:
        obj["reasoning"] = ""
    if "verdict" in obj:
        obj["verdict"] = _verdict_value(obj["verdict"])
    return obj


def vote(verdicts: Sequence[int | float | None]) -> int | None:
    """EVE's majority vote over binary verdicts, with abstentions.

    Abstentions (None or NaN: a judge that gave no usable verdict) are left out; they are never
    counted as FAIL or PASS. With k votes cast, the result is 1 (PASS) iff at least
    floor(k/2) + 1 of them are 1, else 0: a tie fails, as in EVE (2 judges 1/1 -> 0; 3 judges
    2/1 -> 1, 1/2 -> 0; 5 judges 3/2 -> 1, 2/3 -> 0). So 3 judges with one abstaining and the
    other two split 1/1 -> 0, and with the other two both 1 -> 1. If nobody voted the result is
    None: the sample is excluded from judge_voting and counted in `n_judge_failed`.
    """
    votes = []
    for v in verdicts:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if v not in (0, 1):
            raise ValueError(f"a verdict must be 0, 1 or None (abstention), got {v!r}")
        votes.append(int(v))
    if not votes:
        return None
    return 1 if sum(votes) >= len(votes) // 2 + 1 else 0


def _sample_agreement(votes: Sequence[int]) -> float:
    return float("nan") if len(votes) < 2 else float(len(set(votes)) == 1)


# ---------------------------------------------------------------------------------------------
# The panel
# ---------------------------------------------------------------------------------------------

class JudgePanel:
    """One or more LLM judges of one kind, each with its own model, endpoint and key variable.

    Judges run concurrently (one thread per judge; each client is concurrent itself). `clients`
    maps judge name -> an object with `.generate(requests, desc)` and `.usage` (default: one
    `evekit.client.ModelClient` per judge built from the settings below).
    """

    def __init__(self, judges: Sequence[JudgeSpec | dict], kind: JudgeKind, *,
                 concurrency: int = 8, timeout: float = 120.0, max_retries: int = 4,
                 cache_dir: Any = None, offline: bool = False, temperature: float = 0.0,
                 max_tokens: int = 512, progress: bool = True,
                 clients: Mapping[str, Any] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown judge kind {kind!r}; expected one of {KINDS}")
        self.specs = [JudgeSpec.from_dict(j) for j in judges]
        if not self.specs:
            raise ValueError("a judge panel needs at least one judge")
        names = [s.name for s in self.specs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"judge names must be unique; repeated: {', '.join(dupes)}")
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", n)]
        if bad:
            raise ValueError(f"judge names may only use letters, digits, '_', '-', '.': {bad}")
        self.kind = kind
        self.temperature = temperature
        self.max_tokens = max_tokens
        if clients is None:
            from evekit.client import ModelClient
            clients = {s.name: ModelClient(s.model, s.base_url, s.api_key_env, concurrency=concurrency,
                                           timeout=timeout, max_retries=max_retries, cache_dir=cache_dir,
                                           offline=offline, name=f"judge {s.name}", progress=progress)
                       for s in self.specs}
        missing = [n for n in names if n not in clients]
        if missing:
            raise ValueError(f"no client for judge(s) {missing}")
        self.clients = dict(clients)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for c in self.clients.values():
            total = total.add(c.usage)
        return total

    def _ask(self, spec: JudgeSpec, messages: list[list[dict[str, str]]]) -> list[JsonAnswer]:
        _, endpoint_error = _client_errors()
        try:
            return ask_json(self.clients[spec.name], messages, VERDICT_SCHEMA, max_tokens=self.max_tokens,
                            temperature=self.temperature if spec.temperature is None else spec.temperature,
                            text_parser=parse_verdict_text,
                            normalize=_normalize_verdict, reminder=JUDGE_REMINDER, api=spec.api,
                            desc=f"judge {spec.name}")
        except endpoint_error as e:  # every sample abstains, with the reason; the run goes on
            warnings.warn(f"judge {spec.name!r} is unusable, all its verdicts are abstentions: {e}",
                          stacklevel=3)
            return [JsonAnswer(None, None, "", f"judge endpoint unusable: {e}")] * len(messages)

    def judge(self, cases: Sequence[JudgeCase]) -> pd.DataFrame:
        """One row per case, in order.

        Columns per judge N: judge_N (1.0 / 0.0 / NaN = abstained), judge_N_reasoning,
        judge_N_raw (the judge's reply as sent), judge_N_error (why it abstained), judge_N_method
        (json_schema | json_object | text). Then judge_voting (`vote`; NaN when nobody voted),
        llm_as_judge_avg (mean of the votes cast), judge_agreement (1.0 when all votes agree,
        NaN with fewer than 2 votes), judge_n_votes and judge_failed (no usable vote).
        """
        messages = [render_messages(self.kind, c, i) for i, c in enumerate(cases)]
        if not messages:
            return pd.DataFrame(columns=judge_columns(self.names))
        with ThreadPoolExecutor(max_workers=len(self.specs)) as pool:
            answers = dict(zip(self.names, pool.map(lambda s: self._ask(s, messages), self.specs)))
        df = pd.DataFrame(index=range(len(cases)))
        for name, ans in answers.items():
            df[f"judge_{name}"] = [float(a.parsed["verdict"]) if a.parsed else np.nan for a in ans]
            df[f"judge_{name}_reasoning"] = [a.parsed.get("reasoning", "") if a.parsed else None for a in ans]
            df[f"judge_{name}_raw"] = [a.raw for a in ans]
            df[f"judge_{name}_error"] = [a.error for a in ans]
            df[f"judge_{name}_method"] = [a.method for a in ans]
        return add_vote_columns(df, self.names)


def judge_columns(names: Sequence[str]) -> list[str]:
    cols = []
    for n in names:
        cols += [f"judge_{n}", f"judge_{n}_reasoning", f"judge_{n}_raw", f"judge_{n}_error", f"judge_{n}_method"]
    return cols + ["judge_voting", "llm_as_judge_avg", "judge_agreement", "judge_n_votes", "judge_failed"]


def add_vote_columns(df: pd.DataFrame, judge_names: Sequence[str]) -> pd.DataFrame:
    """(Re)compute judge_voting, llm_as_judge_avg, judge_agreement, judge_n_votes, judge_failed
    from the judge_<name> columns (1/0/NaN). Returns a copy."""
    df = df.copy()
    cast = [[int(v) for v in row if not pd.isna(v)] for row in df[[f"judge_{n}" for n in judge_names]].to_numpy()]
    df["judge_voting"] = [np.nan if (v := vote(c)) is None else float(v) for c in cast]
    df["llm_as_judge_avg"] = [float(np.mean(c)) if c else np.nan for c in cast]
    df["judge_agreement"] = [_sample_agreement(c) for c in cast]
    df["judge_n_votes"] = [len(c) for c in cast]
    df["judge_failed"] = [not c for c in cast]
    return df


def judge_names_in(df: pd.DataFrame) -> list[str]:
    """The judge names present in a judged samples table (from its judge_<name>_method columns)."""
    return [c[len("judge_"):-len("_method")] for c in df.columns
            if c.startswith("judge_") and c.endswith("_method") and c[len("judge_"):-len("_method")]]


# ---------------------------------------------------------------------------------------------
# Metrics and agreement
# ---------------------------------------------------------------------------------------------

def _votes_matrix(df: pd.DataFrame, judge_names: Sequence[str]) -> np.ndarray:
    cols = [f"judge_{n}" for n in judge_names]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"judged samples table has no column(s) {missing}")
    return df[cols].to_numpy(dtype=float)


def fleiss_kappa(ratings: np.ndarray) -> float:
    """Fleiss' kappa of binary ratings (rows = samples, columns = judges, no NaN).

    NaN when undefined (fewer than 2 samples or raters, or every rating identical).
    """
    from statsmodels.stats.inter_rater import fleiss_kappa as _fk
    ratings = np.asarray(ratings, dtype=float)
    if ratings.ndim != 2 or ratings.shape[0] < 2 or ratings.shape[1] < 2:
        return float("nan")
    passes = ratings.sum(axis=1)
    table = np.column_stack([ratings.shape[1] - passes, passes])
    p = table.sum(axis=0) / table.sum()
    if np.isclose((p ** 2).sum(), 1.0):  # everyone said the same thing: chance agreement is 1
        return float("nan")
    return float(_fk(table, method="fleiss"))


def cohen_kappa(a: Sequence[float], b: Sequence[float]) -> float:
    """Cohen's kappa of two binary raters on the samples both rated (NaN where undefined)."""
    from statsmodels.stats.inter_rater import cohens_kappa
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both].astype(int), b[both].astype(int)
    if len(a) == 0:
        return float("nan")
    table = np.zeros((2, 2))
    np.add.at(table, (a, b), 1)
    pe = (table.sum(0) * table.sum(1)).sum() / len(a) ** 2
    if np.isclose(pe, 1.0):
        return float("nan")
    return float(cohens_kappa(table, return_results=False))


def _pairwise(df: pd.DataFrame, judge_names: Sequence[str], fn: Callable) -> pd.DataFrame:
    m = _votes_matrix(df, judge_names)
    out = pd.DataFrame(np.eye(len(judge_names)), index=list(judge_names), columns=list(judge_names))
    for i, j in combinations(range(len(judge_names)), 2):
        out.iloc[i, j] = out.iloc[j, i] = fn(m[:, i], m[:, j])
    out.index.name, out.columns.name = "judge", "judge"
    return out


def _raw_agreement(a: np.ndarray, b: np.ndarray) -> float:
    both = ~np.isnan(a) & ~np.isnan(b)
    return float((a[both] == b[both]).mean()) if both.any() else float("nan")


def agreement_matrix(df: pd.DataFrame, judge_names: Sequence[str]) -> pd.DataFrame:
    """Share of samples on which two judges gave the same verdict (both voted); 1 on the diagonal."""
    return _pairwise(df, judge_names, _raw_agreement)


def cohen_kappa_matrix(df: pd.DataFrame, judge_names: Sequence[str]) -> pd.DataFrame:
    """Pairwise Cohen's kappa (samples both judges voted on); 1 on the diagonal, NaN if undefined."""
    return _pairwise(df, judge_names, cohen_kappa)


def pairwise_agreement(df: pd.DataFrame, judge_names: Sequence[str] | None = None) -> pd.DataFrame:
    """The judges' agreement table for one run: one row per pair of judges.

    Columns judge_a, judge_b, n (samples both voted on), agreement (raw share), cohen_kappa,
    pass_rate_a, pass_rate_b (on those same samples, to see which judge is the stricter).
    `judge_names` defaults to the judges found in `df` (see `judge_names_in`).
    """
    names = list(judge_names) if judge_names is not None else judge_names_in(df)
    m = _votes_matrix(df, names)
    rows = []
    for i, j in combinations(range(len(names)), 2):
        both = ~np.isnan(m[:, i]) & ~np.isnan(m[:, j])
        rows.append({
            "judge_a": names[i], "judge_b": names[j], "n": int(both.sum()),
            "agreement": _raw_agreement(m[:, i], m[:, j]),
            "cohen_kappa": cohen_kappa(m[:, i], m[:, j]),
            "pass_rate_a": float(m[both, i].mean()) if both.any() else float("nan"),
            "pass_rate_b": float(m[both, j].mean()) if both.any() else float("nan"),
        })
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "n", "agreement", "cohen_kappa",
                                       "pass_rate_a", "pass_rate_b"])


def judge_metrics(df: pd.DataFrame, judge_names: Sequence[str], *, seed: int = 0,
                  n_boot: int = 1000) -> dict[str, dict]:
    """Run-level judge metrics, each {"value", "ci_low", "ci_high", "n"} (95% bootstrap CI).

    One judge: `llm_as_judge` only. Several: `llm_as_judge_<name>` per judge, `judge_voting`,
    `llm_as_judge_avg`, `judge_agreement` and `fleiss_kappa`. Abstentions are left out: `n` is
    the number of samples used (a judge's votes; samples with at least one vote for voting and
    average; at least two votes for agreement; every judge voted for Fleiss' kappa, which needs
    the same raters on every sample). Counts of abstentions are in `judge_counts`.
    """
    from evekit.stats import summarize

    names = list(judge_names)
    if not names:
        raise ValueError("judge_metrics needs at least one judge name")
    m = _votes_matrix(df, names)

    def summ(values: Any) -> dict:
        v = np.asarray(values, dtype=float)
        return summarize(v[~np.isnan(v)], seed=seed, n_boot=n_boot)

    if len(names) == 1:
        return {"llm_as_judge": summ(m[:, 0])}
    per = add_vote_columns(df[[f"judge_{n}" for n in names]], names)
    out = {f"llm_as_judge_{n}": summ(m[:, k]) for k, n in enumerate(names)}
    out["judge_voting"] = summ(per["judge_voting"])
    out["llm_as_judge_avg"] = summ(per["llm_as_judge_avg"])
    out["judge_agreement"] = summ(per["judge_agreement"])
    # summarize drops rows with a NaN: Fleiss' kappa needs every judge on every sample it uses.
    out["fleiss_kappa"] = summarize(m, seed=seed, n_boot=n_boot, stat=fleiss_kappa)
    return out


def judge_counts(df: pd.DataFrame, judge_names: Sequence[str]) -> dict[str, Any]:
    """How many verdicts are missing: {"n", "n_judge_failed" (samples without any vote),
    "abstentions": {name: count}, "methods": {name: {method: count}}, "errors": {name: [..]}}."""
    m = _votes_matrix(df, judge_names)
    out: dict[str, Any] = {
        "n": int(len(df)),
        "n_judge_failed": int(np.isnan(m).all(axis=1).sum()) if len(df) else 0,
        "abstentions": {n: int(np.isnan(m[:, k]).sum()) for k, n in enumerate(judge_names)},
        "methods": {}, "errors": {},
    }
    for n in judge_names:
        if f"judge_{n}_method" in df:
            out["methods"][n] = {str(k): int(v) for k, v in df[f"judge_{n}_method"].value_counts().items()}
        if f"judge_{n}_error" in df:
            out["errors"][n] = sorted({str(e) for e in df[f"judge_{n}_error"].dropna()})
    return out
