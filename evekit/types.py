"""Small shared records passed between the task engine, the client, the judges and the notebooks.

They live in one module so that every part of evekit speaks the same language:
a task builds `GenerationRequest`s, the client answers them with `GenerationResult`s,
and the judges are configured with `JudgeSpec`s.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

Api = Literal["chat", "completions"]

# The longest reply the client keeps, in characters (text, raw and reasoning each): ~25,000 tokens,
# far beyond any answer a task asks for, while a runaway 5 MB reply would be copied into samples.csv,
# model_outputs.jsonl, the report and the notebook. A longer one is cut here and marked
# (`GenerationResult.clipped`, `note`).
MAX_REPLY_CHARS = 100_000


@dataclass(frozen=True)
class GenerationRequest:
    """One call to a model. Either `messages` (chat endpoint) or `prompt` (completions)."""

    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    temperature: float = 0.0
    max_tokens: int = 256
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    # Distinguishes repeated samples of the same prompt at temperature > 0 in the cache.
    sample_index: int = 0
    # Ask for the log-probabilities of the generated tokens with this many top alternatives each
    # (None: not asked). Chat sends logprobs=true + top_logprobs=k, completions logprobs=k.
    top_logprobs: int | None = None

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("GenerationRequest needs exactly one of `messages` or `prompt`")
        if self.messages is not None and not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))
        if self.stop is not None and not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def api(self) -> Api:
        return "chat" if self.messages is not None else "completions"


@dataclass
class GenerationResult:
    """What came back for one request.

    `text` is the final answer (reasoning and `<think>` blocks removed); `reasoning` keeps
    what was removed; `raw` is the content exactly as the server sent it. `error` is set
    only for infrastructure failures (HTTP error after retries, timeout, bad response):
    then `text` is None and the sample is excluded from metrics and counted as failed.
    """

    text: str | None
    reasoning: str | None = None
    raw: str | None = None
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    # The server refused this exact request's format (llama.cpp answers a `json_schema` it cannot
    # follow with HTTP 500): the same request gets the same refusal, so it is cached like an answer.
    rejected: bool = False
    # Per generated token {"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]} when the
    # request asked for them and the server sent them (None otherwise).
    logprobs: list[dict[str, Any]] | None = None
    # The reply's tool calls, [{"name", "arguments"}] (chat), when the server sent any. evekit offers no
    # tools, so a reply of tool calls and no text is the model's answer in a form no task reads
    # (`note` says so), not an empty answer; a server parsing the model's text as tool calls (vLLM
    # with --enable-auto-tool-choice) does this too.
    tool_calls: list[dict[str, Any]] | None = None
    # The reply was longer than the client keeps (MAX_REPLY_CHARS): its length in characters;
    # `text`, `raw` and `reasoning` were cut there.
    clipped: int | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def note(self) -> str | None:
        """What a reader of this answer must know that its text does not say: a reply of tool calls
        only, a reply cut at the client's limit (None when neither)."""
        notes = []
        if self.tool_calls and not (self.text or "").strip():
            calls = ", ".join(f"{c.get('name')}({str(c.get('arguments') or '')[:60]})" for c in self.tool_calls[:3])
            more = f" and {len(self.tool_calls) - 3} more" if len(self.tool_calls) > 3 else ""
            notes.append(f"the reply is tool calls only, no text: {calls}{more}")
        if self.clipped is not None:
            notes.append(f"the reply had {self.clipped:,} characters: cut at the first {MAX_REPLY_CHARS:,}")
        return "; ".join(notes) or None


@dataclass
class Usage:
    """Usage accounting for one run; goes into results.json `usage`."""

    requests: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        d = asdict(self)
        d["tokens"] = self.prompt_tokens + self.completion_tokens
        d["seconds"] = round(self.seconds, 3)
        return d

    def add(self, other: "Usage") -> "Usage":
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in asdict(self)})


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How common API keys begin (OpenAI, Hugging Face, Groq, Google, xAI, Anthropic is "sk-ant-"):
# a value that starts so is a pasted key (`check_api_key_env`, `endpoints.url_credentials_problem`).
KEY_PREFIXES = ("sk-", "sk_", "hf_", "gsk_", "AIza", "xai-")


def check_api_key_env(value: Any, where: str = "api_key_env") -> None:
    """`value` must be the NAME of an environment variable (None: no key). A value that looks like
    a key itself is refused without repeating it, so it reaches no log or notebook."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ValueError(f"{where} must be the name of an environment variable, got a {type(value).__name__}")
    # Names are UPPER_SNAKE by convention; a long token mixing cases and digits, or with a key
    # prefix, is a pasted key.
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
    looks_like_key = (value.startswith(KEY_PREFIXES) or len(value) > 64
                      or (len(value) >= 20 and mixed) or not _ENV_NAME.fullmatch(value))
    if looks_like_key:
        raise ValueError(f"{where} must be the NAME of an environment variable (letters, digits and _, "
                         "e.g. OPENAI_API_KEY), never the key itself; the value given looks like a key "
                         "and is not shown. Put the key in the environment: export OPENAI_API_KEY=...")


# A judge's longest reply in tokens unless its entry sets `max_tokens`.
JUDGE_MAX_TOKENS = 512


@dataclass(frozen=True)
class JudgeSpec:
    """One LLM judge: its display name, model id, endpoint and the NAME of its key variable."""

    name: str
    model: str
    base_url: str
    api_key_env: str | None = None
    api: Api = "chat"
    # Optional sampling temperature for this judge (None: the panel's default, usually 0).
    temperature: float | None = None
    # At most this many calls in flight to this judge (None: the run's `concurrency`).
    concurrency: int | None = None
    # Longest verdict reply, in tokens (None: JUDGE_MAX_TOKENS). A small model that rambles
    # without a verdict costs this much per call; a reply cut short gets the kind's reminder.
    max_tokens: int | None = None
    # Longest justification, in characters, that the judge may write before its verdict (None: no
    # bound). It is put into the JSON schema the request sends (`maxLength`), so a server whose
    # structured output is a grammar (llama.cpp, vLLM) closes the text there and writes the
    # verdict, instead of rambling into `max_tokens` with none. Replies are still validated
    # without it; a server that rejects the keyword gets the next structured-output method.
    reasoning_max_chars: int | None = None

    # The keys a judge entry may have (the parameter contract).
    KEYS = ("name", "model", "base_url", "api_key_env", "temperature", "api", "concurrency", "max_tokens",
            "reasoning_max_chars")

    def concurrency_in(self, run_concurrency: int) -> int:
        """Calls in flight to this judge: its entry's own `concurrency`, else the run's (the one rule,
        for the panel's clients and the batch's endpoint limits)."""
        return self.concurrency or run_concurrency

    @classmethod
    def from_dict(cls, d: "dict[str, Any] | JudgeSpec") -> "JudgeSpec":
        from evekit.errors import unknown_names

        if isinstance(d, JudgeSpec):
            return d
        if not isinstance(d, dict):
            raise ValueError(f"a judge must be a mapping {{name, model, base_url, api_key_env}}, got {d!r}")
        if "api_key" in d:
            raise ValueError(
                f"judge {d.get('name')!r}: pass the NAME of an environment variable as "
                "`api_key_env`, never the key itself"
            )
        problem = unknown_names(d, cls.KEYS, "judge key")
        if problem:
            raise ValueError(f"judge {d.get('name')!r}: {problem}")
        check_api_key_env(d.get("api_key_env"), f"judge {d.get('name')!r}: api_key_env")
        missing = [k for k in ("name", "model", "base_url") if not d.get(k)]
        if missing:
            raise ValueError(f"judge {d!r} is missing {', '.join(missing)}")
        for key in ("concurrency", "max_tokens", "reasoning_max_chars"):
            value = d.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"judge {d.get('name')!r}: {key} must be a positive integer, got {value!r}")
        return cls(
            name=str(d["name"]),
            model=str(d["model"]),
            base_url=str(d["base_url"]),
            api_key_env=d.get("api_key_env"),
            api=d.get("api", "chat"),
            temperature=d.get("temperature"),
            concurrency=d.get("concurrency"),
            max_tokens=d.get("max_tokens"),
            reasoning_max_chars=d.get("reasoning_max_chars"),
        )
