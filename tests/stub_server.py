"""A small OpenAI-compatible stub server for the client tests and the client benchmark.

It runs in its own process (so it never shares the client's event loop or CPU time slice
accounting) and answers `/v1/chat/completions` and `/v1/completions` after a fixed latency
with a deterministic echo of the prompt, so a test can check that every answer landed on
its own request. It can inject faults (429 with Retry-After, 500, or a hang past the client's
timeout) for a seeded fraction of attempts, and it counts requests per prompt (`/stats`),
which is how the tests prove that a resumed run sends only the missing requests.

Per-prompt behaviour is selected with a marker anywhere in the prompt, e.g. "[[think]]":
  [[reasoning]]      content + `reasoning_content`
  [[reasoning_null]] content null, the text only in `reasoning_content`
  [[think]]          content "<think>...</think>answer"
  [[no_choices]]     200 with `"choices": []`
  [[invalid_json]]   200 with a body that is not JSON
  [[invalid_json_once]] the same on the first attempt only, then a normal answer
  [[bad_request]]    400 (a per-request client error, e.g. prompt too long)
  [[fail]]           500 on every attempt
  [[hang]]           sleep `hang` seconds on every attempt (past the client's timeout)
  [[no_max_tokens]]  400 when the body uses `max_tokens` (like OpenAI's reasoning models)
  [[bad_format]]     500 with a validation error about `response_format` (as llama.cpp's
                     server answers a json_schema it does not support)
  [[lp:A=0.6,' B'=0.3,C=0.1]]  when the request asks for log-probabilities: the first token's top
                     alternatives are these tokens with these probabilities (most probable first; the
                     answer is the first); without the marker the answer token "echo" has logprob 0
  [[no_logprobs]]    never send log-probabilities, even when asked (as servers that ignore the field)
  [[strength_N]]     twice in a prompt (a pairwise judge's answers A and B): a JSON verdict
                     {"rationale", "winner"}; A wins with probability 0.9 * sigmoid((N_A - N_B) / 2),
                     B with 0.9 * (1 - that), else a tie, drawn from a hash of seed, model and prompt

Usage from Python::

    with StubServer(latency=0.01, fault_rate=0.2) as stub:
        stub.base_url   # "http://127.0.0.1:PORT/v1"
        stub.stats()    # {"requests": {prompt: n}, "answered": {prompt: n}, "faults": {...},
                        #  "rejected": {"401": n, "404": n}, "by_model": {model: n},
                        #  "total": every completion POST,
                        #  "peak_in_flight": most completion requests handled at one time}
        stub.reset()

or as a script: ``python tests/stub_server.py --latency 0.2`` (prints ``PORT <n>``).
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import subprocess
import sys
import urllib.request
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

_MARKER = re.compile(r"\[\[(\w+)\]\]")
_LOGPROBS = re.compile(r"\[\[lp:([^\]]*)\]\]")


def _top_logprobs(prompt: str) -> list[tuple[str, float]]:
    """(token, logprob) of the `[[lp:...]]` marker, most probable first; quotes keep spaces."""
    import math

    found = _LOGPROBS.search(prompt)
    if not found:
        return [("echo", 0.0)]
    pairs = []
    for part in found.group(1).split(","):
        token, _, prob = part.rpartition("=")
        pairs.append((token.strip().strip("'"), math.log(float(prob))))
    return sorted(pairs, key=lambda tp: -tp[1])


def _logprobs_block(prompt: str, body: dict[str, Any], chat: bool) -> dict[str, Any] | None:
    """The choice's `logprobs` as OpenAI shapes it for chat and for completions, if asked for."""
    wanted = body.get("logprobs")
    if not wanted:
        return None
    k = int(body.get("top_logprobs") or 0) if chat else int(wanted)
    top = _top_logprobs(prompt)[:max(k, 1)]
    token, logprob = top[0]
    if chat:
        return {"content": [{"token": token, "logprob": logprob, "bytes": list(token.encode()),
                             "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                              for t, lp in top]}]}
    return {"tokens": [token], "token_logprobs": [logprob], "top_logprobs": [dict(top)], "text_offset": [0]}


@dataclass
class StubConfig:
    latency: float = 0.0          # seconds before each answer
    fault_rate: float = 0.0       # fraction of attempts that fault (seeded, per prompt+attempt)
    faults: tuple[str, ...] = ("429", "500", "hang")
    hang: float = 30.0            # how long a "hang" fault sleeps (longer than the client timeout)
    retry_after: float = 0.05     # seconds sent in Retry-After with a 429
    api_key: str | None = None    # when set, any other bearer token gets 401
    models: tuple[str, ...] | None = None  # when set, other model names get 404
    seed: int = 0
    # Refuse every `response_format` of type json_schema as llama.cpp's server does (HTTP 500).
    reject_json_schema: bool = False
    # Answer a request with a `response_format` with a judge verdict {"reasoning", "verdict"} (0 or 1,
    # from a hash of the prompt) instead of the echo, so judges get usable replies; a pairwise judge's
    # prompt (its <answer_a> tag) gets {"rationale", "winner"} (A, B or tie, from the hash).
    verdicts: bool = False
    # With `verdicts`: the judges' reasoning (and pairwise rationale), when set (the injection tests
    # put markup in it).
    reasoning: str | None = None
    # Answer a request whose `response_format` carries a schema that is no judge's (no "verdict" or
    # "winner" key: the span question, a task's JSON answers) with the smallest object that meets it
    # (`schema_instance`), so every structured reply is usable and no reminder or fallback call follows.
    json_replies: bool = False


def _prompt_of(body: dict[str, Any]) -> str:
    if "messages" in body:
        msgs = body.get("messages") or [{}]
        content = msgs[-1].get("content", "")
        return content if isinstance(content, str) else json.dumps(content)
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


def _fault_for(cfg: StubConfig, prompt: str, attempt: int) -> str | None:
    if cfg.fault_rate <= 0:
        return None
    h = hashlib.sha256(f"{cfg.seed}|{prompt}|{attempt}".encode()).digest()
    if int.from_bytes(h[:4], "big") / 2**32 >= cfg.fault_rate:
        return None
    return cfg.faults[h[4] % len(cfg.faults)]


_STRENGTH = re.compile(r"\[\[strength_(-?\d+)\]\]")


def _pairwise_verdict(seed: int, model: str, prompt: str, a: int, b: int) -> str:
    """A pairwise judge with known preferences and noise (so a Bradley–Terry optimum is finite)."""
    u = int.from_bytes(hashlib.sha256(f"{seed}|{model}|{prompt}".encode()).digest()[:4], "big") / 2**32
    p = 1.0 / (1.0 + math.exp(-(a - b) / 2.0))
    winner = "A" if u < 0.9 * p else "B" if u >= 0.9 * p + 0.1 else "tie"
    return json.dumps({"rationale": f"stub: strengths {a} vs {b}", "winner": winner})


def schema_instance(schema: dict[str, Any]) -> Any:
    """The smallest value that meets a JSON schema of the kinds evekit sends: an object with only its
    required keys, empty arrays, the first enum value, the minimum number, the shortest string."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: schema_instance(props.get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        return [schema_instance(schema.get("items", {})) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "x" * int(schema.get("minLength", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def _format_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of a request's `response_format` (json_schema or json_object with a schema), if any."""
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")


def answer_body(body: dict[str, Any], chat: bool, verdicts: bool = False, seed: int = 0,
                judge_reasoning: str | None = None, json_replies: bool = False) -> dict[str, Any]:
    """The stub's successful answer to a request body (the server's, and the tests' batch executor's)."""
    prompt = _prompt_of(body)
    marks = set(_MARKER.findall(prompt))
    answer = f"echo: {prompt}"
    reasoning = None
    strengths = _STRENGTH.findall(prompt)
    schema = _format_schema(body) if json_replies else None
    if schema is not None and not {"verdict", "winner"} & set(schema.get("properties", {})):
        answer = json.dumps(schema_instance(schema))
    elif len(strengths) >= 2:  # a pairwise judge's prompt with answers A and B
        answer = _pairwise_verdict(seed, str(body.get("model")), prompt, int(strengths[0]), int(strengths[1]))
    elif verdicts and body.get("response_format") and "<answer_a>" in prompt:  # a pairwise judge
        winner = ("A", "B", "tie")[hashlib.sha256(prompt.encode()).digest()[0] % 3]
        answer = json.dumps({"rationale": judge_reasoning or f"stub winner on {len(prompt)} characters",
                             "winner": winner})
    elif verdicts and body.get("response_format"):
        verdict = hashlib.sha256(prompt.encode()).digest()[0] % 2
        answer = json.dumps({"reasoning": judge_reasoning or f"stub verdict on {len(prompt)} characters",
                             "verdict": verdict})
    elif "think" in marks:
        answer = f"<think>pondering {prompt}</think>{answer}"
    elif "reasoning" in marks:
        reasoning = f"pondering {prompt}"
    elif "reasoning_null" in marks:
        reasoning, answer = f"pondering {prompt}", None
    logprobs = None if "no_logprobs" in marks else _logprobs_block(prompt, body, chat)
    if logprobs is not None:  # the answer is the most probable token, as a server's would be
        answer = (logprobs["content"][0]["token"] if chat else logprobs["tokens"][0])
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len((answer or "").split())}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if chat:
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop"}
    else:
        choice = {"index": 0, "text": answer, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return {
        "id": "stub", "object": "chat.completion" if chat else "text_completion",
        "created": 0, "model": body.get("model"),
        "choices": [] if "no_choices" in marks else [choice],
        "usage": usage,
    }


def build_app(cfg: StubConfig):  # -> aiohttp.web.Application
    from aiohttp import web

    requests: Counter[str] = Counter()
    answered: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    rejected: Counter[str] = Counter()  # 401/404 answers, before a prompt is counted
    by_model: Counter[str] = Counter()  # completion requests per `model` of the body (after 401/404)
    # Completion requests being handled right now, and the most at any one time (the peak is
    # how a test proves that a shared per-endpoint limit held).
    load = {"in_flight": 0, "peak": 0}
    arrivals: list[float] = []  # time.monotonic() of each completion request's arrival

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"error": {"message": message, "code": status}}, status=status,
                                 headers=headers)

    async def completion(request: web.Request) -> web.StreamResponse:
        load["in_flight"] += 1
        load["peak"] = max(load["peak"], load["in_flight"])
        try:
            return await answer(request)
        finally:
            load["in_flight"] -= 1

    async def answer(request: web.Request) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        if cfg.api_key is not None and request.headers.get("Authorization") != f"Bearer {cfg.api_key}":
            rejected["401"] += 1
            return error(401, "Incorrect API key provided.")
        body = await request.json()
        model = body.get("model")
        if cfg.models is not None and model not in cfg.models:
            rejected["404"] += 1
            return error(404, f"The model `{model}` does not exist.")
        prompt = _prompt_of(body)
        attempt = requests[prompt]
        requests[prompt] += 1
        by_model[str(model)] += 1
        arrivals.append(time.monotonic())
        marks = set(_MARKER.findall(prompt))

        if "no_max_tokens" in marks and "max_tokens" in body:
            return error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                              "Use 'max_completion_tokens' instead.")
        if "bad_format" in marks or (cfg.reject_json_schema
                                     and (body.get("response_format") or {}).get("type") == "json_schema"):
            return error(500, json.dumps([{"type": "literal_error", "loc": ["body", "response_format", "type"],
                                           "msg": "Input should be 'text' or 'json_object'"}]))
        fault = "500" if "fail" in marks else "hang" if "hang" in marks else _fault_for(cfg, prompt, attempt)
        if fault:
            faults[fault] += 1
        if fault == "429":
            return error(429, "Rate limit reached, slow down.", {"Retry-After": str(cfg.retry_after)})
        if fault == "500":
            return error(500, "Internal server error (injected).")
        await asyncio.sleep(cfg.hang if fault == "hang" else cfg.latency)
        if "bad_request" in marks:
            return error(400, "This model's maximum context length is 2048 tokens.")
        answered[prompt] += 1
        if "invalid_json" in marks or ("invalid_json_once" in marks and attempt == 0):
            return web.Response(text="<html>502 Bad Gateway</html>", content_type="application/json")

        return web.json_response(answer_body(body, chat, cfg.verdicts, cfg.seed, cfg.reasoning, cfg.json_replies))

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model"} for m in (cfg.models or ("stub",))]})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"requests": requests, "answered": answered, "faults": faults,
                                  "rejected": rejected, "by_model": by_model,
                                  "total": sum(requests.values()) + sum(rejected.values()),
                                  "peak_in_flight": load["peak"], "arrivals": arrivals})

    async def reset(request: web.Request) -> web.Response:
        for counter in (requests, answered, faults, rejected, by_model):
            counter.clear()
        arrivals.clear()
        load["peak"] = load["in_flight"]
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completion)
    app.router.add_post("/v1/completions", completion)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    return app


async def _serve(cfg: StubConfig, port: int) -> None:
    from aiohttp import web

    runner = web.AppRunner(build_app(cfg), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


class StubServer:
    """Run the stub in a child process; use as a context manager."""

    def __init__(self, **config: Any) -> None:
        self.config = StubConfig(**config)
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> "StubServer":
        cfg = json.dumps(asdict(self.config))
        self.proc = subprocess.Popen([sys.executable, __file__, "--config", cfg],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"stub server did not start (said {line!r})")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as r:
            return json.load(r)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/reset", method="POST"), timeout=10).close()

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="{}", help="StubConfig fields as JSON")
    p.add_argument("--latency", type=float, default=None)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args(argv)
    fields = json.loads(a.config)
    if a.latency is not None:
        fields["latency"] = a.latency
    for k in ("faults", "models"):
        if fields.get(k) is not None:
            fields[k] = tuple(fields[k])
    try:
        asyncio.run(_serve(StubConfig(**fields), a.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
