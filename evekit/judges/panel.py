"""One panel of LLM judges for every judge kind: clients, structured verdicts, abstentions, votes.

The panel owns what is the same for every kind: one cached `ModelClient` per judge (a judge may
set its own `temperature` and `api`), the judges running concurrently, the structured-output
fallback chain (`evekit.structured.ask_json`) with the kind's schema, parser and reminder, and
abstention: a judge whose endpoint is unusable (`EndpointError`) abstains on every case with the
reason and a warning, and an unusable reply is an abstention with its reason, never a verdict.
Each judge is told which texts of its chat are the answers under judgement (`JudgeKind.shown`), so
the verdict rules can tell what it repeats from what it states; a usable verdict whose rationale
states the other side keeps its verdict and is flagged (judge_<name>_flag).
"""
from __future__ import annotations

import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from evekit.endpoints import endpoint_key
from evekit.errors import EndpointError, ParameterError
from evekit.judges.kinds import JudgeKind, KindName, get_kind
from evekit.judges.voting import add_vote_columns
from evekit.structured import JsonAnswer, ask_json, first_requests
from evekit.types import JUDGE_MAX_TOKENS, GenerationRequest, JudgeSpec, Usage

__all__ = ["JudgePanel", "validate_judges", "judge_columns", "flag_columns"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _endpoint(base_url: str) -> str:
    try:
        return endpoint_key(base_url)
    except ValueError:  # not an http(s) URL: the client names that; compare it as written
        return base_url.strip().rstrip("/")


def _reply_settings(spec: JudgeSpec, temperature: float | None, max_tokens: int | None) -> tuple:
    """What decides a judge's reply, as the cache keys a call: model, api, temperature, max_tokens
    and the bound on its justification (None where the run's default applies and is not known)."""
    t = spec.temperature if spec.temperature is not None else temperature
    m = spec.max_tokens if spec.max_tokens is not None else max_tokens
    return (spec.model, spec.api, None if t is None else float(t), m, spec.reasoning_max_chars)


def _duplicates(specs: Sequence[JudgeSpec], temperature: float | None, max_tokens: int | None) -> None:
    """Refuse two judges that would be one: same model, endpoint and reply settings."""
    seen: dict[tuple, JudgeSpec] = {}
    for s in specs:
        key = _reply_settings(s, temperature, max_tokens)
        first = seen.setdefault(key, s)
        if first is s:
            continue
        same_place = _endpoint(first.base_url) == _endpoint(s.base_url)
        model, api, t, m, r = key
        settings = (f"model {model!r}, api {api!r}, temperature {'the run default' if t is None else t}, "
                    f"max_tokens {'the default' if m is None else m}, reasoning_max_chars {r}")
        if same_place:
            raise ParameterError(
                f"judges {first.name!r} and {s.name!r} are the same judge: {settings} at the same endpoint "
                f"{first.base_url!r}. Identical calls are answered once (the cache merges them), so one reply "
                "would count as two votes and the two would agree 100% of the time. Keep one of them, or make "
                "them differ in what they send (another temperature, model or max_tokens)")
        warnings.warn(
            f"judges {first.name!r} ({first.base_url}) and {s.name!r} ({s.base_url}) send identical calls "
            f"({settings}); the cache keys a call by what is sent, not where, so with a shared cache_dir "
            "the second replays the first one's replies (two votes from one reply). Give one of them another "
            "temperature or max_tokens, or keep one", UserWarning, stacklevel=3)


def validate_judges(judges: Sequence[JudgeSpec | dict], *, temperature: float | None = None,
                    max_tokens: int | None = None) -> list[JudgeSpec]:
    """The judges as JudgeSpecs; at least one, unique names of letters, digits, '_', '-', '.'; no
    two the same judge under two names.

    Names become column names (judge_<name>) and file names, hence the restriction. Two entries
    with the same model, endpoint and reply settings (api, temperature, max_tokens,
    reasoning_max_chars; `temperature` / `max_tokens` are the run's defaults for entries that do
    not set their own, None when unknown) are a `ParameterError` naming both: the cache would
    answer both from one reply. The same on two endpoints is a warning (a shared cache replays one
    judge's replies for the other).
    """
    try:
        specs = [JudgeSpec.from_dict(j) for j in judges]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ParameterError(str(exc)) from None
    if not specs:
        raise ParameterError("a judge panel needs at least one judge")
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ParameterError(f"judge names must be unique; repeated: {', '.join(dupes)}")
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad:
        raise ParameterError(f"judge names may only use letters, digits, '_', '-', '.': {bad}")
    _duplicates(specs, temperature, max_tokens)
    return specs


class JudgePanel:
    """One or more LLM judges of one kind, each with its own model, endpoint and key variable.

    Judges run concurrently (one thread per judge; each client is concurrent itself). `clients`
    maps judge name -> an object with `.generate(requests, desc)` and `.usage` (default: one
    `evekit.client.ModelClient` per judge built from the settings below).
    """

    def __init__(self, judges: Sequence[JudgeSpec | dict], kind: KindName | JudgeKind, *,
                 concurrency: int = 8, timeout: float = 120.0, max_retries: int = 4,
                 cache_dir: Any = None, offline: bool = False, temperature: float = 0.0,
                 max_tokens: int = JUDGE_MAX_TOKENS, progress: bool = True,
                 clients: Mapping[str, Any] | None = None) -> None:
        self.kind = get_kind(kind)
        self.specs = validate_judges(judges, temperature=temperature, max_tokens=max_tokens)
        self.temperature = temperature
        self.max_tokens = max_tokens
        if clients is None:
            from evekit.client import ModelClient
            # A judge entry's own `concurrency` caps its endpoint; otherwise the run's.
            clients = {s.name: ModelClient(s.model, s.base_url, s.api_key_env,
                                           concurrency=s.concurrency or concurrency,
                                           timeout=timeout, max_retries=max_retries, cache_dir=cache_dir,
                                           offline=offline, name=f"judge {s.name}", progress=progress)
                       for s in self.specs}
        missing = [n for n in self.names if n not in clients]
        if missing:
            raise ValueError(f"no client for judge(s) {missing}")
        self.clients = dict(clients)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def usage(self) -> Usage:
        """Requests, cache hits and tokens of all judges together."""
        total = Usage()
        for c in self.clients.values():
            total = total.add(c.usage)
        return total

    def usage_by_judge(self) -> dict[str, dict[str, Any]]:
        """Per judge name: its usage as a dict (requests, cache hits, tokens, ...)."""
        return {s.name: self.clients[s.name].usage.as_dict() for s in self.specs}

    def close(self) -> None:
        """Close the clients' caches."""
        for c in self.clients.values():
            if hasattr(c, "close"):
                c.close()

    def ask_judge(self, spec: JudgeSpec, messages: Sequence[list[dict[str, str]]],
                  max_probe: int = 3) -> list[JsonAnswer]:
        """One judge's answers to `messages` (`ask_json`; `max_probe` items at most probe the
        structured-output chain while this judge's method is unknown). Raises EndpointError."""
        k = self.kind
        quoted = [k.shown(m) for m in messages]
        answers = ask_json(self.clients[spec.name], messages, **self._ask_args(spec), max_probe=max_probe,
                           quoted=quoted)
        if k.flag is None:
            return answers
        return [a._replace(flag=k.flag(a.parsed, a.raw or "", q)) if a.parsed else a
                for a, q in zip(answers, quoted)]

    def _ask_args(self, spec: JudgeSpec) -> dict[str, Any]:
        """`ask_json`'s arguments for one judge: the kind's schema and parsers, the judge's reply settings."""
        k = self.kind
        return {"schema": k.schema, "max_tokens": spec.max_tokens or self.max_tokens,
                "temperature": self.temperature if spec.temperature is None else spec.temperature,
                "name": k.schema_name, "text_parser": k.text_parser, "normalize": k.normalize,
                "reminder": k.reminder, "api": spec.api, "desc": f"{k.desc} {spec.name}",
                "extract": k.extract, "screen": k.screen,
                "request_schema": k.request_schema(spec.reasoning_max_chars)}

    def first_requests(self, spec: JudgeSpec, cases: Sequence[Any]) -> list[GenerationRequest]:
        """The calls judge `spec` sends first on `cases` (as `judge` renders them): one per case in
        the chain's first format (`structured.first_requests`); a refused format or an unusable reply
        adds calls that only the replies tell."""
        return first_requests([self.kind.render(c, i) for i, c in enumerate(cases)], **self._ask_args(spec))

    @staticmethod
    def unusable(spec: JudgeSpec, error: EndpointError, n: int) -> list[JsonAnswer]:
        """`n` abstentions of a judge whose endpoint is unusable, with the reason (and a warning)."""
        warnings.warn(f"judge {spec.name!r} is unusable, all its verdicts are abstentions: {error}", stacklevel=3)
        return [JsonAnswer(None, None, "", f"judge endpoint unusable: {error}")] * n

    def _ask(self, spec: JudgeSpec, messages: list[list[dict[str, str]]]) -> list[JsonAnswer]:
        try:
            return self.ask_judge(spec, messages)
        except EndpointError as e:  # every case abstains, with the reason; the run goes on
            return self.unusable(spec, e, len(messages))

    def ask(self, messages: Sequence[list[dict[str, str]]]) -> dict[str, list[JsonAnswer]]:
        """Every judge's answer to every rendered chat: judge name -> one JsonAnswer per chat."""
        messages = list(messages)
        if not messages:
            return {n: [] for n in self.names}
        with ThreadPoolExecutor(max_workers=len(self.specs)) as pool:
            return dict(zip(self.names, pool.map(lambda s: self._ask(s, messages), self.specs)))

    def judge(self, cases: Sequence[Any]) -> pd.DataFrame:
        """One row per case, in order (cases as the kind renders them: JudgeCase or PairCase).

        Columns per judge N: judge_N (the verdict: 1.0 / 0.0 for pointwise kinds, "A" / "B" /
        "tie" for pairwise; NaN / None = abstained), judge_N_reasoning, judge_N_raw (the judge's
        reply as sent), judge_N_error (why it abstained), judge_N_method (json_schema |
        json_object | text). Then the kind's vote judge_voting (NaN / None when nobody voted),
        llm_as_judge_avg (binary kinds: mean of the votes cast), judge_agreement (see
        `voting.judge_agreement`), judge_n_votes and judge_failed (no usable vote). Last, per
        judge, judge_N_flag (`flag_columns`): why a verdict that stands looks doubtful (its rationale
        states the other side), None otherwise.
        """
        k = self.kind
        messages = [k.render(c, i) for i, c in enumerate(cases)]
        return self.frame(self.ask(messages) if messages else {n: [] for n in self.names})

    def frame(self, answers: Mapping[str, Sequence[JsonAnswer]]) -> pd.DataFrame:
        """The table of `judge` from every judge's answers (judge name -> one JsonAnswer per case)."""
        k = self.kind
        n = len(next(iter(answers.values()), []))
        if not n:
            return pd.DataFrame(columns=judge_columns(self.names, k) + flag_columns(self.names))
        missing = np.nan if k.binary else None
        df = pd.DataFrame(index=range(n))
        for name in self.names:
            ans = answers[name]
            df[f"judge_{name}"] = pd.Series([k.value(a.parsed) if a.parsed else missing for a in ans],
                                            dtype=float if k.binary else object)
            df[f"judge_{name}_reasoning"] = [a.parsed.get(k.reasoning_key, "") if a.parsed else None for a in ans]
            df[f"judge_{name}_raw"] = [a.raw for a in ans]
            df[f"judge_{name}_error"] = [a.error for a in ans]
            df[f"judge_{name}_method"] = [a.method for a in ans]
        df = add_vote_columns(df, self.names, reduce=k.reduce, binary=k.binary)
        for name in self.names:
            df[f"judge_{name}_flag"] = [getattr(a, "flag", None) for a in answers[name]]
        return df


def judge_columns(names: Sequence[str], kind: KindName | JudgeKind = "fact_check") -> list[str]:
    """The columns of `JudgePanel.judge` for these judges, in order."""
    cols = []
    for n in names:
        cols += [f"judge_{n}", f"judge_{n}_reasoning", f"judge_{n}_raw", f"judge_{n}_error", f"judge_{n}_method"]
    average = ["llm_as_judge_avg"] if get_kind(kind).binary else []
    return cols + ["judge_voting", *average, "judge_agreement", "judge_n_votes", "judge_failed"]


def flag_columns(names: Sequence[str]) -> list[str]:
    """The flag column per judge that `JudgePanel.judge` adds after `judge_columns`: judge_<name>_flag,
    a note on a verdict that stands but whose rationale states the other side (None: no note)."""
    return [f"judge_{n}_flag" for n in names]
