"""Win-rate analysis: LLM judges compare two models' answers to the same questions, pair by pair.

This reproduces EVE's win-rate evaluation (`win_rate`, `alpaca_win_rate`, their differences,
`judge_agreement`, `position_bias`; per judge and averaged across judges) and adds what a reader
needs to trust a head-to-head claim: a majority-vote aggregate, 95% Wilson intervals, an exact
sign test, a length-bias check and, optionally, judging every pair in both orders (MT-Bench
practice: an order-dependent verdict counts as a tie).

Flow (the notebook calls these in order):
    cfg = validate_params(...)                      # parameters -> WinRateConfig
    comparisons = load_comparisons(cfg)             # read CSVs, match questions, one per model pair
    usage = run_judges(comparisons, cfg)            # judge calls -> comp.results / comp.summary
    save_outputs(comparisons, cfg, usage)           # results.csv, summary.csv, plots, metrics.json

Vocabulary: "a" and "b" are the two models of a comparison (model_a and model_b); "A" and "B"
are the two *positions* in the judge's prompt. Each question's position is random but fixed by
(seed, question), so reruns hit the cache and give the same numbers.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from evekit.judges import neutralise, read_prompt_file
from evekit.structured import extract_json
from evekit.params import ParameterError, resolve_path
from evekit.report import json_safe
from evekit.stats import wilson_ci
from evekit.types import JudgeSpec

__all__ = [
    "TASKS", "REQUIRED_COLUMNS", "PAIRWISE_SCHEMA", "ModelSpec", "WinRateConfig", "Comparison",
    "ClientAsker", "resolve_path", "validate_params", "normalize_ws", "unwrap_response",
    "read_answers", "match_files", "load_comparisons", "a_shown_first", "build_messages",
    "load_prompt", "parse_pairwise_text", "parse_verdict", "judge_comparison", "run_judges",
    "judge_outcomes", "majority_vote",
    "win_rates", "sign_test", "judge_agreement", "agreement_matrix", "summarize",
    "eve_metrics", "verdict_text", "setup_table", "matching_table", "unmatched_table", "summary_table",
    "summary_view",
    "sample_rationales", "plot_comparison", "plot_position_bias", "plot_agreement", "save_outputs",
]

TASKS = ("open_ended", "open_ended_w_context")
REQUIRED_COLUMNS = ("doc.Question", "target", "filtered_resps")
ALPHA = 0.05
PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    # rationale first: with grammar-constrained decoding the judge reasons before it decides.
    "properties": {
        "rationale": {"type": "string"},
        "winner": {"type": "string", "enum": ["A", "B", "tie"]},
    },
    "required": ["rationale", "winner"],
    "additionalProperties": False,
}
# (parsed JSON | None, raw text | None, method, error | None) per request, as evekit.judge.ask_json returns.
AskResult = tuple[dict[str, Any] | None, str | None, str, str | None]
Asker = Callable[[JudgeSpec, list[list[dict[str, str]]]], Sequence[AskResult]]

_AGGREGATE_LABELS = {"majority": "majority vote", "average": "average of judges (EVE)"}
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f", ""}


# --------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class ModelSpec:
    """One side of a comparison: a display name and the CSV with that model's answers."""

    name: str
    file: str

    @classmethod
    def from_dict(cls, d: "dict[str, Any] | ModelSpec", side: str) -> "ModelSpec":
        if isinstance(d, ModelSpec):
            return d
        if not isinstance(d, dict) or not d.get("name") or not d.get("file"):
            raise ParameterError(f"{side}: each entry needs `name` and `file`, got {d!r}")
        return cls(name=str(d["name"]), file=str(d["file"]))


@dataclass
class WinRateConfig:
    """Validated parameters of the win-rate notebook (see `validate_params`)."""

    task: str
    model_a: list[ModelSpec]
    model_b: list[ModelSpec]
    judges: list[JudgeSpec]
    limit: int | None = None
    seed: int = 42
    both_orders: bool = False
    output_dir: str = "outputs"
    run_name: str = "demo"
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 4
    cache_dir: str | None = None
    offline: bool = False
    temperature: float = 0.0
    max_tokens: int = 512
    alpha: float = ALPHA

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> "WinRateConfig":
        """Pick the parameter names out of a notebook's globals() and validate them."""
        names = inspect.signature(validate_params).parameters
        return validate_params(**{k: namespace[k] for k in names if k in namespace})

    def out_dir(self, comp: "Comparison") -> Path:
        return resolve_path(self.output_dir) / _safe(self.run_name) / "win_rate" / comp.label

    def as_dict(self) -> dict[str, Any]:
        """Parameters for the record: judges carry only the NAME of their key variable."""
        return {
            "task": self.task,
            "model_a": [vars(m) for m in self.model_a],
            "model_b": [vars(m) for m in self.model_b],
            "judges": [{"name": j.name, "model": j.model, "base_url": j.base_url,
                        "api_key_env": j.api_key_env, "temperature": j.temperature} for j in self.judges],
            **{k: getattr(self, k) for k in (
                "limit", "seed", "both_orders", "output_dir", "run_name", "concurrency", "timeout",
                "max_retries", "cache_dir", "offline", "temperature", "max_tokens", "alpha")},
        }


def _as_list(value: Any, side: str) -> list[Any]:
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(f"{side} must be a non-empty list of {{name, file}}, got {value!r}")
    return list(value)


def _check_type(name: str, value: Any, types: tuple[type, ...], optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        want = " or ".join(t.__name__ for t in types) + (" or None" if optional else "")
        raise ParameterError(f"parameter {name}={value!r} has type {type(value).__name__}; expected {want}")


def validate_params(*, task: str = "open_ended", model_a: Any, model_b: Any, judges: Any,
                    limit: int | None = None, seed: int = 42, both_orders: bool = False,
                    output_dir: str = "outputs", run_name: str = "demo", concurrency: int = 8,
                    timeout: float = 120.0, max_retries: int = 4, cache_dir: str | None = None,
                    offline: bool = False, temperature: float = 0.0, max_tokens: int = 512,
                    alpha: float = ALPHA) -> WinRateConfig:
    """Check the notebook's parameters at once, so a typo fails before any judge call.

    Files must exist (relative paths resolve from the working directory, else the repository
    root); judges carry the NAME of their key variable, never a key.
    """
    if task not in TASKS:
        raise ParameterError(f"task {task!r} is not a win-rate task; use one of: {', '.join(TASKS)}")
    for name, value, types, optional in (
        ("limit", limit, (int,), True), ("seed", seed, (int,), False),
        ("both_orders", both_orders, (bool,), False), ("output_dir", output_dir, (str, Path), False),
        ("run_name", run_name, (str,), False), ("concurrency", concurrency, (int,), False),
        ("timeout", timeout, (int, float), False), ("max_retries", max_retries, (int,), False),
        ("cache_dir", cache_dir, (str, Path), True), ("offline", offline, (bool,), False),
        ("temperature", temperature, (int, float), False), ("max_tokens", max_tokens, (int,), False),
        ("alpha", alpha, (float,), False),
    ):
        _check_type(name, value, types, optional)
    for name, value in (("limit", limit), ("concurrency", concurrency), ("max_tokens", max_tokens)):
        if value is not None and value < 1:
            raise ParameterError(f"parameter {name}={value!r} must be at least 1")
    if seed < 0 or max_retries < 0:
        raise ParameterError(f"seed ({seed}) and max_retries ({max_retries}) must be 0 or more")
    sides = {}
    for side, value in (("model_a", model_a), ("model_b", model_b)):
        specs = [ModelSpec.from_dict(d, side) for d in _as_list(value, side)]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ParameterError(f"{side}: model names must be unique, got {names}")
        for s in specs:
            if not resolve_path(s.file).is_file():
                raise ParameterError(f"{side} {s.name!r}: file not found: {s.file} "
                                     f"(tried {Path(s.file).resolve()} and {resolve_path(s.file)})")
        sides[side] = specs
    both = {s.name for s in sides["model_a"]} & {s.name for s in sides["model_b"]}
    if both:
        raise ParameterError(f"model(s) {sorted(both)} appear in both model_a and model_b")
    if not isinstance(judges, (list, tuple)) or not judges:
        raise ParameterError(f"judges must be a non-empty list of {{name, model, base_url, api_key_env}}, "
                             f"got {judges!r}")
    try:
        specs_j = [JudgeSpec.from_dict(j) for j in judges]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ParameterError(str(exc)) from None
    names = [j.name for j in specs_j]
    if len(set(names)) != len(names):
        raise ParameterError(f"judge names must be unique, got {names}")
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", n)]
    if bad:
        raise ParameterError(f"judge names may only use letters, digits, '_', '-', '.': {bad}")
    for j in specs_j:
        if j.api_key_env is not None and (j.api_key_env.startswith("sk-") or len(j.api_key_env) > 64):
            raise ParameterError(f"judge {j.name!r}: api_key_env must be the NAME of an environment "
                                 "variable, not a key")
        if j.api_key_env and not offline and j.api_key_env not in os.environ:
            raise ParameterError(f"judge {j.name!r}: environment variable {j.api_key_env} "
                                 "(its api_key_env) is not set")
    return WinRateConfig(
        task=task, model_a=sides["model_a"], model_b=sides["model_b"], judges=specs_j, limit=limit,
        seed=seed, both_orders=both_orders, output_dir=str(output_dir), run_name=run_name,
        concurrency=concurrency, timeout=float(timeout), max_retries=max_retries,
        cache_dir=None if cache_dir is None else str(cache_dir), offline=offline,
        temperature=float(temperature), max_tokens=max_tokens, alpha=alpha,
    )


# --------------------------------------------------------------------------- reading and matching
def normalize_ws(text: Any) -> str:
    """Collapse runs of whitespace and trim: the form in which questions and answers are compared."""
    return " ".join(str(text).split())


def unwrap_response(value: Any) -> str:
    """The answer text of a `filtered_resps` cell.

    lm-evaluation-harness (and EVE's evalkit) write it as a stringified list, "['answer']";
    evekit writes the plain text. Only a cell that parses as a Python list is unwrapped.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    text = str(value)
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
        if isinstance(parsed, list):
            while len(parsed) == 1 and isinstance(parsed[0], list):  # [['x']] from some harness versions
                parsed = parsed[0]
            return "" if not parsed else str(parsed[0]) if len(parsed) == 1 else "\n".join(map(str, parsed))
    return text


def _parse_failed(value: str, path: Path, row: int) -> bool:
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE or v == "nan":
        return False
    raise ValueError(f"{path}: row {row}, column 'failed': expected True/False, got {value!r}")


def read_answers(path: str | Path) -> pd.DataFrame:
    """One model's answers from a samples CSV (evekit, EVE evalkit or lm-evaluation-harness).

    Returns columns row (1-based data row), doc_id, question, key (normalised question), target,
    answer, failed, error. A missing column is an error naming the file and listing its columns.
    """
    path = resolve_path(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"answers file not found: {path}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty (expected columns {', '.join(REQUIRED_COLUMNS)})") from None
    lower = {c.lower(): c for c in raw.columns}
    cols = {need: need if need in raw.columns else lower.get(need.lower()) for need in REQUIRED_COLUMNS}
    missing = [need for need, have in cols.items() if have is None]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(map(repr, missing))}; "
                         f"the file has columns: {', '.join(map(repr, raw.columns))}")
    failed_col = lower.get("failed")
    error_col = lower.get("error")
    df = pd.DataFrame({
        "row": np.arange(1, len(raw) + 1),
        "doc_id": raw[lower["doc_id"]] if "doc_id" in lower else pd.Series(range(len(raw)), dtype=str),
        "question": raw[cols["doc.Question"]],
        "target": raw[cols["target"]].map(unwrap_response),
        "answer": raw[cols["filtered_resps"]].map(unwrap_response),
        "failed": [_parse_failed(v, path, i + 1) for i, v in enumerate(raw[failed_col])]
        if failed_col else False,
        "error": raw[error_col] if error_col else "",
    })
    df["key"] = df["question"].map(normalize_ws)
    df["context"] = _context(raw)
    return df


_CONTEXT_COLUMN = re.compile(r"doc\.(doc \d+|context)", re.IGNORECASE)


def _context(raw: pd.DataFrame) -> list[tuple[str, ...]]:
    """Per row, the context documents (`doc.Doc 1..n` or `doc.Context`, as evekit and lm-eval write
    them); empty for tasks without context."""
    cols = sorted((c for c in raw.columns if _CONTEXT_COLUMN.fullmatch(c.strip())), key=lambda c: c.lower())
    return [tuple(str(v).strip() for v in row if str(v).strip()) for row in raw[cols].itertuples(index=False)] \
        if cols else [()] * len(raw)


@dataclass
class Comparison:
    """One model pair: the matched questions, what could not be matched, and (after judging) results."""

    name_a: str
    name_b: str
    file_a: str
    file_b: str
    pairs: pd.DataFrame            # qid, question, target, answer_a, answer_b, doc_id_a/b, row_a/b, len_a/b, identical
    unmatched: pd.DataFrame        # model, file, row, doc_id, question
    failed_generation: pd.DataFrame  # question, row_a, row_b, failed_in, error
    n_rows_a: int = 0
    n_rows_b: int = 0
    n_matched: int = 0
    n_over_limit: int = 0
    target_mismatch: int = 0
    judges: list[str] = field(default_factory=list)
    results: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    outcomes: pd.DataFrame | None = None
    both_orders: bool = False

    @property
    def label(self) -> str:
        return f"{_safe(self.name_a)}_vs_{_safe(self.name_b)}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def match_files(spec_a: ModelSpec, spec_b: ModelSpec, *, limit: int | None = None) -> Comparison:
    """Pair the two models' rows by question (whitespace-normalised).

    A question asked twice in one file is paired by occurrence (1st with 1st, ...). Rows without a
    partner are reported in `unmatched`; pairs where either generation failed are excluded and
    listed in `failed_generation`; `limit` keeps the first N usable pairs in model A's order.
    """
    a, b = read_answers(spec_a.file), read_answers(spec_b.file)
    for df in (a, b):
        df["occ"] = df.groupby("key").cumcount()
    m = a.merge(b, on=["key", "occ"], how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"].sort_values("row_a")
    if both.empty:
        raise ValueError(
            f"{spec_a.file} ({spec_a.name}) and {spec_b.file} ({spec_b.name}) have no question in common "
            f"(compared after whitespace normalisation; {len(a)} and {len(b)} rows). First questions: "
            f"{a['key'].head(2).tolist()} vs {b['key'].head(2).tolist()}"
        )
    def left_over(side: str, spec: ModelSpec) -> pd.DataFrame:
        rows = m[m["_merge"] == ("left_only" if side == "a" else "right_only")]
        return pd.DataFrame({"model": spec.name, "file": spec.file, "row": rows[f"row_{side}"].astype(int),
                             "doc_id": rows[f"doc_id_{side}"], "question": rows[f"question_{side}"]})

    unmatched = pd.concat([left_over("a", spec_a), left_over("b", spec_b)], ignore_index=True)
    fa, fb = both["failed_a"].astype(bool), both["failed_b"].astype(bool)
    failed_in = np.where(fa & fb, "both", np.where(fa, spec_a.name, spec_b.name))
    bad = both[fa | fb]
    failed_generation = pd.DataFrame({
        "question": bad["question_a"], "row_a": bad["row_a"].astype(int), "row_b": bad["row_b"].astype(int),
        "failed_in": failed_in[(fa | fb).to_numpy()],
        "error": [ea or eb for ea, eb in zip(bad["error_a"], bad["error_b"])],
    }).reset_index(drop=True)
    good = both[~(fa | fb)]
    n_usable = len(good)
    if limit is not None:
        good = good.head(limit)
    answer_a, answer_b = good["answer_a"].map(normalize_ws), good["answer_b"].map(normalize_ws)
    pairs = pd.DataFrame({
        "qid": np.arange(len(good)),
        "question": good["question_a"].to_numpy(),
        "target": good["target_a"].to_numpy(),
        "answer_a": good["answer_a"].to_numpy(),
        "answer_b": good["answer_b"].to_numpy(),
        "context": [ca or cb for ca, cb in zip(good["context_a"], good["context_b"])],
        "doc_id_a": good["doc_id_a"].to_numpy(),
        "doc_id_b": good["doc_id_b"].to_numpy(),
        "row_a": good["row_a"].astype(int).to_numpy(),
        "row_b": good["row_b"].astype(int).to_numpy(),
        "len_a": answer_a.str.len().to_numpy(),
        "len_b": answer_b.str.len().to_numpy(),
        "identical": (answer_a == answer_b).to_numpy(),
    })
    return Comparison(
        name_a=spec_a.name, name_b=spec_b.name, file_a=spec_a.file, file_b=spec_b.file, pairs=pairs,
        unmatched=unmatched, failed_generation=failed_generation, n_rows_a=len(a), n_rows_b=len(b),
        n_matched=len(both), n_over_limit=n_usable - len(good),
        target_mismatch=int((both["target_a"].map(normalize_ws) != both["target_b"].map(normalize_ws)).sum()),
    )


def load_comparisons(cfg: WinRateConfig) -> list[Comparison]:
    """Every model_a x model_b pair, matched and ready to judge."""
    return [match_files(a, b, limit=cfg.limit) for a in cfg.model_a for b in cfg.model_b]


# --------------------------------------------------------------------------- the pairwise judge
def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def a_shown_first(question: str, seed: int) -> bool:
    """Whether model A's answer is shown in position A for this question.

    Random, but a pure function of (seed, normalised question): the same for every judge and every
    rerun (so cached verdicts replay), independent of row order and of other questions.
    """
    rng = np.random.default_rng([seed, _stable_hash(normalize_ws(question))])
    return bool(rng.random() < 0.5)


_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_WINNER = re.compile(r"(?:winner|verdict|better)[\"'*\s]*(?:[:=]|is)[\"'*\s]*(?:answer\s*)?([A-Za-z]+)\b",
                     re.IGNORECASE)
_BRACKETED = re.compile(r"\[\[\s*(A|B|tie)\s*\]\]", re.IGNORECASE)
PAIRWISE_REMINDER = (
    "Your previous reply could not be used ({reason}). Reply again with only this JSON object: "
    '{{"rationale": "<one or two sentences>", "winner": "A"}}, where "winner" is "A", "B" or "tie".'
)


@lru_cache(maxsize=1)
def load_prompt(name: str = "pairwise") -> tuple[str, str]:
    """(system, user) template of `evekit/prompts/<name>.txt` (sections `[system]`, `[user]`)."""
    return read_prompt_file(f"{name}.txt")


def build_messages(question: str, reference: str, first: str, second: str,
                   context: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages for one pairwise decision: `first` is shown as answer A, `second` as answer B.

    With `context` (the documents of open_ended_w_context or refusal) the judge sees them too and
    judges grounding in them. Delimiter tags inside the texts are neutralised (as for the
    single-answer judges), so an answer cannot close its own block and pose as instructions.
    """
    system, user = load_prompt("pairwise_context" if context else "pairwise")
    values = {"question": question, "reference": reference, "answer_a": first, "answer_b": second,
              "documents": "\n\n".join(f"Document {i}:\n{d}" for i, d in enumerate(context, 1))}
    values = {k: neutralise(str(v).strip()) for k, v in values.items()}
    return [{"role": "system", "content": system},
            {"role": "user", "content": _PLACEHOLDER.sub(lambda m: values[m.group(1)], user)}]


def parse_pairwise_text(text: str) -> dict[str, Any] | None:
    """A verdict from a prose reply (last step of ask_json's chain): JSON, "winner: A", or "[[A]]"."""
    obj = extract_json(text)
    if obj is not None and "winner" in obj:
        return obj
    found = _WINNER.findall(text) or _BRACKETED.findall(text)
    return {"rationale": text.strip(), "winner": found[-1]} if found else None


def parse_verdict(parsed: Any, error: str | None = None) -> tuple[str | None, str | None, str | None]:
    """(verdict "A"|"B"|"tie" or None, rationale, error). Anything else is a failure, never a tie."""
    if error:
        return None, None, str(error)
    if not isinstance(parsed, dict):
        return None, None, "no JSON object in the judge's output"
    rationale = parsed.get("rationale")
    rationale = None if rationale is None else str(rationale)
    winner = parsed.get("winner")
    verdict = {"a": "A", "b": "B", "tie": "tie"}.get(str(winner).strip().lower()) if winner is not None else None
    if verdict is None:
        return None, rationale, f"invalid verdict {winner!r} (expected 'A', 'B' or 'tie')"
    return verdict, rationale, None


class ClientAsker:
    """The default way to ask a judge: one cached `ModelClient` per judge, through `judge.ask_json`.

    A judge whose endpoint is unusable (`EndpointError`: bad key, unknown model, nothing
    listening) fails every decision with the reason and a warning, as in `JudgePanel`; an
    offline cache miss is raised.
    """

    def __init__(self, *, concurrency: int = 8, timeout: float = 120.0, max_retries: int = 4,
                 cache_dir: str | Path | None = None, offline: bool = False, temperature: float = 0.0,
                 max_tokens: int = 512, progress: bool = True, clients: dict[str, Any] | None = None) -> None:
        self.client_kwargs = dict(concurrency=concurrency, timeout=timeout, max_retries=max_retries,
                                  cache_dir=None if cache_dir is None else resolve_path(cache_dir),
                                  offline=offline, progress=progress)
        self.temperature, self.max_tokens = temperature, max_tokens
        # judge name -> client (anything with .generate(requests, desc) and .usage); built on first use
        self.clients: dict[str, Any] = dict(clients or {})

    @classmethod
    def from_config(cls, cfg: WinRateConfig) -> "ClientAsker":
        return cls(concurrency=cfg.concurrency, timeout=cfg.timeout, max_retries=cfg.max_retries,
                   cache_dir=cfg.cache_dir, offline=cfg.offline, temperature=cfg.temperature,
                   max_tokens=cfg.max_tokens)

    def __call__(self, judge: JudgeSpec, messages_list: list[list[dict[str, str]]]) -> Sequence[AskResult]:
        from evekit.client import EndpointError, ModelClient
        from evekit.structured import ask_json

        client = self.clients.get(judge.name)
        if client is None:
            client = self.clients[judge.name] = ModelClient(
                judge.model, judge.base_url, judge.api_key_env, name=f"judge {judge.name}", **self.client_kwargs)
        try:
            temperature = self.temperature if judge.temperature is None else judge.temperature
            return ask_json(client, messages_list, PAIRWISE_SCHEMA, max_tokens=self.max_tokens,
                            temperature=temperature, name="pairwise_verdict",
                            text_parser=parse_pairwise_text, reminder=PAIRWISE_REMINDER, api=judge.api,
                            desc=f"pairwise judge {judge.name}")
        except EndpointError as e:
            warnings.warn(f"judge {judge.name!r} is unusable, all its decisions fail: {e}", stacklevel=2)
            return [(None, None, "", f"judge endpoint unusable: {e}")] * len(messages_list)

    def usage(self) -> dict[str, dict[str, Any]]:
        return {name: c.usage.as_dict() for name, c in self.clients.items()}

    def close(self) -> None:
        """Close the clients' caches."""
        for c in self.clients.values():
            if hasattr(c, "close"):
                c.close()


RESULT_COLUMNS = [
    "comparison", "judge", "judge_model", "qid", "order", "question", "target", "model_a", "model_b",
    "answer_a", "answer_b", "doc_id_a", "doc_id_b", "position_a", "position_b", "shown_first", "verdict",
    "winner", "winner_side", "rationale", "raw", "method", "error", "failed", "identical",
]


def _decisions(comp: Comparison, seed: int, both_orders: bool) -> list[dict[str, Any]]:
    """What each judge is asked: one entry per (question, order), with positions and messages."""
    out = []
    for p in comp.pairs.itertuples(index=False):
        a_first = a_shown_first(p.question, seed)
        for order in (0, 1) if both_orders else (0,):
            first_side = "a" if a_first != bool(order) else "b"
            first, second = (p.answer_a, p.answer_b) if first_side == "a" else (p.answer_b, p.answer_a)
            out.append({
                "qid": p.qid, "order": order, "question": p.question, "target": p.target,
                "model_a": comp.name_a, "model_b": comp.name_b, "answer_a": p.answer_a, "answer_b": p.answer_b,
                "doc_id_a": p.doc_id_a, "doc_id_b": p.doc_id_b,
                "position_a": "A" if first_side == "a" else "B", "position_b": "B" if first_side == "a" else "A",
                "shown_first": comp.name_a if first_side == "a" else comp.name_b, "identical": bool(p.identical),
                "_first_side": first_side,
                "_messages": None if p.identical else build_messages(p.question, p.target, first, second,
                                                                     p.context),
            })
    return out


def judge_comparison(comp: Comparison, judges: Sequence[JudgeSpec | dict], *, seed: int,
                     both_orders: bool = False, ask: Asker, alpha: float = ALPHA) -> pd.DataFrame:
    """Ask every judge about every pair; fill `comp.results` (one row per decision) and `comp.summary`.

    Every judge sees the same positions (random per question, fixed by the seed). Identical
    answers are a tie without a call. With `both_orders`, each pair is judged in the random order
    (order 0) and swapped (order 1). A reply that is not a verdict A, B or tie is a failed
    decision (recorded with its reason), never a tie. Judges run in parallel threads.
    """
    specs = [JudgeSpec.from_dict(j) for j in judges]
    decisions = _decisions(comp, seed, both_orders)
    asked = [d for d in decisions if d["_messages"] is not None]

    def run(judge: JudgeSpec) -> list[AskResult]:
        answers = list(ask(judge, [d["_messages"] for d in asked])) if asked else []
        if len(answers) != len(asked):
            raise RuntimeError(f"judge {judge.name!r}: {len(answers)} answers for {len(asked)} requests")
        return answers

    with ThreadPoolExecutor(max_workers=max(1, len(specs))) as pool:
        all_answers = dict(zip([j.name for j in specs], pool.map(run, specs)))
    names = {"a": comp.name_a, "b": comp.name_b, "tie": "tie", None: None}
    rows = []
    for judge in specs:
        answers = iter(all_answers[judge.name])
        for d in decisions:
            row = {k: v for k, v in d.items() if not k.startswith("_")}
            row.update(comparison=comp.label, judge=judge.name, judge_model=judge.model)
            if d["identical"]:
                row.update(verdict="tie", winner_side="tie", method="identical", raw=None, error=None,
                           rationale="identical answers (after whitespace normalisation): a tie without a judge call")
            else:
                parsed, raw, method, error = next(answers)
                verdict, rationale, err = parse_verdict(parsed, error)
                first, other = d["_first_side"], "b" if d["_first_side"] == "a" else "a"
                side = {"A": first, "B": other, "tie": "tie", None: None}[verdict]
                row.update(verdict=verdict, winner_side=side, rationale=rationale, raw=raw, method=method, error=err)
            row["winner"] = names[row["winner_side"]]
            row["failed"] = row["verdict"] is None
            rows.append(row)
    comp.results = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    comp.judges = [j.name for j in specs]
    comp.both_orders = both_orders
    comp.outcomes = judge_outcomes(comp.results, comp.judges, index=comp.pairs["qid"])
    comp.summary = summarize(comp, alpha=alpha)
    return comp.results


def run_judges(comparisons: Sequence[Comparison], cfg: WinRateConfig,
               ask: Asker | None = None) -> dict[str, dict[str, Any]]:
    """Judge every comparison with every judge; returns per-judge usage (requests, cache hits, tokens)."""
    asker = ask if ask is not None else ClientAsker.from_config(cfg)
    try:
        for comp in comparisons:
            judge_comparison(comp, cfg.judges, seed=cfg.seed, both_orders=cfg.both_orders, ask=asker,
                             alpha=cfg.alpha)
        return asker.usage() if hasattr(asker, "usage") else {}
    finally:
        if ask is None:
            asker.close()


# --------------------------------------------------------------------------- metrics
def _combine_orders(sides: pd.Series) -> str | None:
    values = list(sides)
    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in values):
        return None  # a failed order leaves the pair undecided for this judge
    return values[0] if len(set(values)) == 1 else "tie"  # order-dependent verdict -> tie (MT-Bench)


def judge_outcomes(results: pd.DataFrame, judges: Sequence[str], index: Any = None) -> pd.DataFrame:
    """One row per question (qid), one column per judge: 'a', 'b', 'tie' or None (no usable verdict)."""
    if results.empty:
        return pd.DataFrame(index=pd.Index(index if index is not None else [], name="qid"),
                            columns=list(judges), dtype=object)
    out = results.groupby(["qid", "judge"], sort=True)["winner_side"].agg(_combine_orders).unstack("judge")
    out = out.reindex(columns=list(judges))
    if index is not None:
        out = out.reindex(pd.Index(index, name="qid"))
    return out.astype(object).where(out.notna(), None)


def majority_vote(votes: Sequence[str | None]) -> str | None:
    """The most common usable verdict; a draw between the most common verdicts is a tie.

    Judges without a usable verdict abstain; None only when every judge abstained.
    """
    usable = [v for v in votes if v is not None and not (isinstance(v, float) and np.isnan(v))]
    if not usable:
        return None
    counts = Counter(usable).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


def win_rates(wins_a: int, wins_b: int, ties: int) -> dict[str, float]:
    """EVE's formulas: win_rate = wins / total, alpaca_win_rate = (wins + 0.5 ties) / total."""
    n = wins_a + wins_b + ties
    if n == 0:
        keys = ("win_rate_a", "win_rate_b", "tie_rate", "alpaca_win_rate_a", "alpaca_win_rate_b",
                "win_rate_difference", "alpaca_win_rate_difference")
        return dict.fromkeys(keys, float("nan"))
    out = {"win_rate_a": wins_a / n, "win_rate_b": wins_b / n, "tie_rate": ties / n,
           "alpaca_win_rate_a": (wins_a + 0.5 * ties) / n, "alpaca_win_rate_b": (wins_b + 0.5 * ties) / n}
    out["win_rate_difference"] = out["win_rate_a"] - out["win_rate_b"]
    out["alpaca_win_rate_difference"] = out["alpaca_win_rate_a"] - out["alpaca_win_rate_b"]
    return out


def sign_test(wins_a: int, wins_b: int) -> float:
    """Two-sided exact binomial test of wins vs losses (ties dropped): p for "A and B are equally good"."""
    n = wins_a + wins_b
    return float("nan") if n == 0 else float(binomtest(wins_a, n, 0.5, alternative="two-sided").pvalue)


def judge_agreement(outcomes: pd.DataFrame) -> float:
    """Share of questions on which all judges gave the same verdict (questions every judge decided).

    NaN with fewer than two judges: agreement of one judge with itself says nothing.
    """
    if outcomes.shape[1] < 2:
        return float("nan")
    complete = outcomes.dropna()
    if complete.empty:
        return float("nan")
    return float((complete.nunique(axis=1) == 1).mean())


def agreement_matrix(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Share of questions on which each pair of judges gave the same verdict (both decided)."""
    names = list(outcomes.columns)
    mat = pd.DataFrame(np.nan, index=names, columns=names, dtype=float)
    for i in names:
        for j in names:
            both = outcomes[[i, j]].dropna() if i != j else outcomes[[i]].dropna()
            if both.empty:
                continue
            mat.loc[i, j] = 1.0 if i == j else float((both[i] == both[j]).mean())
    return mat


def _stats(sides: pd.Series, pairs: pd.DataFrame, name_a: str, name_b: str, alpha: float,
           first_votes: tuple[int, int] | None) -> dict[str, Any]:
    """Counts, rates, CIs, sign test and length bias of one judge (or aggregate) over its questions."""
    valid = sides.dropna()
    wa, wb = int((valid == "a").sum()), int((valid == "b").sum())
    ties, n = int((valid == "tie").sum()), int(len(valid))
    row: dict[str, Any] = {"n": n, "wins_a": wa, "losses_a": wb, "wins_b": wb, "losses_b": wa, "ties": ties}
    row.update(win_rates(wa, wb, ties))
    row["win_rate_a_ci_low"], row["win_rate_a_ci_high"] = wilson_ci(wa, n)
    row["win_rate_b_ci_low"], row["win_rate_b_ci_high"] = wilson_ci(wb, n)
    p = sign_test(wa, wb)
    row["sign_test_p"] = p
    row["better"] = (name_a if wa > wb else name_b) if p < alpha else "neither"
    lens = pairs.set_index("qid").loc[valid.index, ["len_a", "len_b"]]
    decisive = (valid != "tie") & (lens["len_a"] != lens["len_b"])
    longer = np.where(lens["len_a"] > lens["len_b"], "a", "b")
    row["length_decisive"] = int(decisive.sum())
    longer_won = valid[decisive] == longer[decisive.to_numpy()]
    row["longer_wins"] = float(longer_won.mean()) if decisive.any() else float("nan")
    if first_votes is not None:
        k, m = first_votes
        row["position_votes"] = m
        row["position_bias"] = k / m if m else float("nan")
        row["position_bias_ci_low"], row["position_bias_ci_high"] = wilson_ci(k, m)
    return row


SUMMARY_COLUMNS = [
    "comparison", "judge", "kind", "model_a", "model_b", "n", "win_rate_a", "win_rate_b", "tie_rate",
    "alpaca_win_rate_a", "alpaca_win_rate_b", "win_rate_difference", "alpaca_win_rate_difference",
    "win_rate_a_ci_low", "win_rate_a_ci_high", "win_rate_b_ci_low", "win_rate_b_ci_high",
    "wins_a", "losses_a", "wins_b", "losses_b", "ties", "sign_test_p", "better", "judge_agreement",
    "position_bias", "position_bias_ci_low", "position_bias_ci_high", "position_votes",
    "position_consistency", "consistent_pairs", "longer_wins", "length_decisive", "failed",
    "failed_decisions", "identical",
]


def summarize(comp: Comparison, alpha: float = ALPHA) -> pd.DataFrame:
    """Per-judge rows, then a majority-vote row, then EVE's average-across-judges row (last).

    position_bias: share of decisive verdicts (ties excluded) for the answer shown first; 0.5 = none.
    position_consistency (both_orders only): share of judged pairs whose verdict did not depend on
    the order. longer_wins: share of decisive outcomes, among pairs of different length (characters),
    won by the longer answer. failed: questions without a usable verdict (excluded from n; in the
    average row, summed over judges); failed_decisions: judge calls without one. Wilson intervals
    and the sign test are given where there are counts (judge and majority rows), not for averages.
    """
    res, out, pairs = comp.results, comp.outcomes, comp.pairs
    base = {"comparison": comp.label, "model_a": comp.name_a, "model_b": comp.name_b,
            "identical": int(pairs["identical"].sum())}
    agreement = judge_agreement(out)
    rows = []
    for judge in comp.judges:
        r = res[res["judge"] == judge]
        votes = r[~r["failed"] & ~r["identical"] & r["verdict"].isin(["A", "B"])]["verdict"]
        row = {**base, "judge": judge, "kind": "judge",
               **_stats(out[judge], pairs, comp.name_a, comp.name_b, alpha, (int((votes == "A").sum()), len(votes))),
               "failed": int(out[judge].isna().sum()), "failed_decisions": int(r["failed"].sum())}
        if comp.both_orders:
            ok = r[~r["failed"] & ~r["identical"]].groupby("qid")["winner_side"]
            judged = ok.count() == 2
            consistent = (ok.nunique() == 1) & judged
            row["consistent_pairs"] = int(consistent.sum())
            row["position_consistency"] = consistent.sum() / judged.sum() if judged.any() else float("nan")
        rows.append(row)
    majority = out.apply(lambda v: majority_vote(list(v)), axis=1) if len(out) else pd.Series(dtype=object)
    first_votes = None
    if not comp.both_orders:  # one order: the shown-first model is the same for every judge
        first = res.drop_duplicates("qid").set_index("qid")["position_a"].reindex(majority.index)
        shown_first_side = np.where(first == "A", "a", "b")
        decisive = majority.isin(["a", "b"]) & ~pairs.set_index("qid")["identical"].reindex(majority.index)
        k = int((majority[decisive] == shown_first_side[decisive.to_numpy()]).sum())
        first_votes = (k, int(decisive.sum()))
    rows.append({**base, "judge": "majority", "kind": "majority",
                 **_stats(majority, pairs, comp.name_a, comp.name_b, alpha, first_votes),
                 "judge_agreement": agreement, "failed": int(majority.isna().sum()),
                 "failed_decisions": int(res["failed"].sum())})
    judge_rows = pd.DataFrame(rows[:-1])
    mean_cols = ["win_rate_a", "win_rate_b", "tie_rate", "alpaca_win_rate_a", "alpaca_win_rate_b",
                 "win_rate_difference", "alpaca_win_rate_difference", "position_bias",
                 "position_consistency", "longer_wins"]
    avg = {c: judge_rows[c].mean() if c in judge_rows else float("nan") for c in mean_cols}
    rows.append({**base, "judge": "average", "kind": "average", **avg, "better": "",
                 "judge_agreement": agreement, "failed": int(judge_rows["failed"].sum()),
                 "failed_decisions": int(res["failed"].sum())})
    table = pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)
    counts = ["n", "wins_a", "losses_a", "wins_b", "losses_b", "ties", "position_votes", "consistent_pairs",
              "length_decisive", "failed", "failed_decisions", "identical"]
    table[counts] = table[counts].astype("Int64")
    return table


def eve_metrics(comp: Comparison) -> dict[str, float]:
    """The summary under EVE's logged names (win_rate/{judge}/{model}, aggregate/..., majority/...)."""
    s = comp.summary.set_index("judge")
    a, b = comp.name_a, comp.name_b
    m: dict[str, float] = {}
    for judge in comp.judges:
        for side, name in (("a", a), ("b", b)):
            m[f"win_rate/{judge}/{name}"] = s.at[judge, f"win_rate_{side}"]
            m[f"alpaca_win_rate/{judge}/{name}"] = s.at[judge, f"alpaca_win_rate_{side}"]
        m[f"position_bias/{judge}"] = s.at[judge, "position_bias"]
    for side, name in (("a", a), ("b", b)):
        for prefix in ("", "avg_"):
            m[f"aggregate/{prefix}{name}_win_rate"] = s.at["average", f"win_rate_{side}"]
            m[f"aggregate/{prefix}{name}_alpaca_win_rate"] = s.at["average", f"alpaca_win_rate_{side}"]
        m[f"majority/{name}_win_rate"] = s.at["majority", f"win_rate_{side}"]
        m[f"majority/{name}_alpaca_win_rate"] = s.at["majority", f"alpaca_win_rate_{side}"]
    for key in ("win_rate_difference", "alpaca_win_rate_difference", "judge_agreement", "position_bias"):
        m[f"aggregate/{key}"] = s.at["average", key]
    m["majority/win_rate_difference"] = s.at["majority", "win_rate_difference"]
    m["majority/sign_test_p"] = s.at["majority", "sign_test_p"]
    return {k: (None if pd.isna(v) else float(v)) for k, v in m.items()}


# --------------------------------------------------------------------------- tables for the notebook
def matching_table(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """How many rows each comparison read, matched, excluded and will judge."""
    return pd.DataFrame([{
        "comparison": c.label, "rows_a": c.n_rows_a, "rows_b": c.n_rows_b, "matched": c.n_matched,
        "unmatched_a": int((c.unmatched["model"] == c.name_a).sum()),
        "unmatched_b": int((c.unmatched["model"] == c.name_b).sum()),
        "failed_generation_excluded": len(c.failed_generation), "beyond_limit": c.n_over_limit,
        "judged": len(c.pairs), "identical_answers": int(c.pairs["identical"].sum()),
        "target_mismatch": c.target_mismatch,
    } for c in comparisons])


def unmatched_table(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    """Every row left out of the judging, with the reason: no partner question, or a failed generation."""
    parts = []
    for c in comparisons:
        if len(c.unmatched):
            parts.append(c.unmatched.assign(comparison=c.label, reason="no matching question in the other file"))
        if len(c.failed_generation):
            f = c.failed_generation
            parts.append(pd.DataFrame({"comparison": c.label, "model": f["failed_in"], "file": "",
                                       "row": f["row_a"], "doc_id": "", "question": f["question"],
                                       "reason": "generation failed: " + f["error"].astype(str)}))
    cols = ["comparison", "reason", "model", "file", "row", "doc_id", "question"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def setup_table(cfg: WinRateConfig) -> pd.DataFrame:
    """Who is compared and who judges: one row per model and per judge (no secrets)."""
    rows = [{"role": side, "name": m.name, "source": m.file, "endpoint": "", "temperature": ""}
            for side, models in (("model_a", cfg.model_a), ("model_b", cfg.model_b)) for m in models]
    rows += [{"role": "judge", "name": j.name, "source": j.model, "endpoint": j.base_url,
              "temperature": cfg.temperature if j.temperature is None else j.temperature} for j in cfg.judges]
    return pd.DataFrame(rows)


def summary_table(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    return pd.concat([c.summary for c in comparisons], ignore_index=True)


def _pct_ci(v: float, lo: float, hi: float) -> str:
    if pd.isna(v):
        return ""
    return f"{v:.1%}" + (f" [{lo:.1%}, {hi:.1%}]" if not pd.isna(lo) else "")


def summary_view(comp: Comparison) -> pd.DataFrame:
    """The summary for reading: model names in the headers, rates as percentages with 95% CIs."""
    s = comp.summary
    a, b = comp.name_a, comp.name_b
    fmt = lambda col: s[col].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")  # noqa: E731
    return pd.DataFrame({
        "judge": s["judge"].replace(_AGGREGATE_LABELS), "n": s["n"].map(lambda v: "" if pd.isna(v) else str(v)),
        **{f"{name} win rate [95% CI]": [_pct_ci(*r) for r in s[[f"win_rate_{x}", f"win_rate_{x}_ci_low",
                                                                    f"win_rate_{x}_ci_high"]].to_numpy()]
           for x, name in (("a", a), ("b", b))},
        "ties": s["tie_rate"].map(lambda v: "" if pd.isna(v) else f"{v:.1%}"),
        f"{a} alpaca": fmt("alpaca_win_rate_a"), f"{b} alpaca": fmt("alpaca_win_rate_b"),
        "win rate difference": fmt("win_rate_difference"),
        "sign test p": s["sign_test_p"].map(lambda v: "" if pd.isna(v) else f"{v:.3g}"),
        "better (sign test)": s["better"].fillna(""),
        "position bias": fmt("position_bias"), "longer answer wins": fmt("longer_wins"),
        "judge agreement": fmt("judge_agreement"),
        **({"position consistency": fmt("position_consistency")} if comp.both_orders else {}),
        "failed": s["failed"].map(str),
    }).set_index("judge")


def verdict_text(comp: Comparison, alpha: float = ALPHA) -> str:
    """One paragraph a reader can quote: majority-vote counts, sign test, and EVE's average."""
    s = comp.summary.set_index("judge")
    m, avg = s.loc["majority"], s.loc["average"]
    if not m["n"]:
        return f"{comp.name_a} vs {comp.name_b}: no question received a usable verdict."
    p = m["sign_test_p"]
    if p < alpha:
        concl = f"{m['better']} is better (p = {p:.3g} < {alpha})"
    else:
        concl = (f"no significant difference at alpha = {alpha} (p = {p:.3g})" if not np.isnan(p)
                 else "no decisive verdicts")
    return (
        f"{comp.name_a} vs {comp.name_b}, {int(m['n'])} questions, majority of {len(comp.judges)} judge(s): "
        f"{comp.name_a} wins {int(m['wins_a'])} ({m['win_rate_a']:.0%}, 95% CI {m['win_rate_a_ci_low']:.0%}-"
        f"{m['win_rate_a_ci_high']:.0%}), {comp.name_b} wins {int(m['wins_b'])} ({m['win_rate_b']:.0%}), "
        f"{int(m['ties'])} ties. Sign test: {concl}. Average across judges (EVE): win rate "
        f"{avg['win_rate_a']:.3f} vs {avg['win_rate_b']:.3f}, alpaca win rate {avg['alpaca_win_rate_a']:.3f} vs "
        f"{avg['alpaca_win_rate_b']:.3f}."
    )


def sample_rationales(comparisons: Sequence[Comparison], n: int = 5, seed: int = 0) -> pd.DataFrame:
    """A few judged decisions with their rationale, for reading what the judges actually said."""
    parts = []
    for c in comparisons:
        r = c.results[~c.results["identical"]]
        parts.append(r.sample(min(n, len(r)), random_state=seed) if len(r) else r)
    cols = ["comparison", "judge", "question", "shown_first", "verdict", "winner", "rationale", "error"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


# --------------------------------------------------------------------------- plots and files
def plot_comparison(comp: Comparison):
    """Stacked horizontal bars: share of questions won by A, tied, won by B, per judge and aggregate."""
    from evekit import plots

    s = comp.summary.set_index("judge").rename(index=_AGGREGATE_LABELS)
    shares = pd.DataFrame({f"{comp.name_a} wins": s["win_rate_a"], "tie": s["tie_rate"],
                           f"{comp.name_b} wins": s["win_rate_b"]})
    ax = plots.stacked_hbar(shares, xlabel="share of questions", ylabel="judge",
                            title=f"{comp.name_a} vs {comp.name_b} (n = {len(comp.pairs)} questions)",
                            colors=["#4C72B0", "#BBBBBB", "#DD8452"])
    return ax.figure


def plot_position_bias(comp: Comparison):
    """Share of decisive verdicts for the answer shown first, with 95% Wilson intervals; 0.5 = no bias."""
    from evekit import plots

    s = comp.summary[comp.summary["kind"] != "average"].dropna(subset=["position_bias"])
    ax = plots.proportion_hbar(s["position_bias"], s["position_bias_ci_low"], s["position_bias_ci_high"],
                               labels=s["judge"].replace(_AGGREGATE_LABELS), reference=0.5,
                               reference_label="0.5 = no position bias", ylabel="judge",
                               xlabel="share of decisive verdicts for the answer shown first",
                               title=f"Position bias: {comp.name_a} vs {comp.name_b}")
    return ax.figure


def plot_agreement(comp: Comparison):
    """Annotated matrix: share of questions on which two judges gave the same verdict."""
    from evekit import plots

    ax = plots.heatmap(agreement_matrix(comp.outcomes), vmin=0.0, vmax=1.0, xlabel="judge", ylabel="judge",
                       cbar_label="agreement",
                       title="Judge agreement (share of questions with the same verdict)\n"
                             f"{comp.name_a} vs {comp.name_b}")
    return ax.figure


def save_outputs(comparisons: Sequence[Comparison], cfg: WinRateConfig,
                 usage: dict[str, Any] | None = None) -> list[Path]:
    """Write each comparison's folder and print "Saved outputs to <dir>" (the batch runner reads it).

    metrics.json holds the metrics under EVE's names, the counts, the parameters (no secrets) and
    `usage`, the judge usage of the whole run (all comparisons share the judges' clients).
    """
    import matplotlib.pyplot as plt

    from evekit import plots
    from evekit.report import display_path

    dirs = []
    for comp in comparisons:
        d = cfg.out_dir(comp)
        d.mkdir(parents=True, exist_ok=True)
        comp.results.to_csv(d / "results.csv", index=False)
        comp.summary.to_csv(d / "summary.csv", index=False)
        unmatched_table([comp]).to_csv(d / "unmatched.csv", index=False)
        agreement_matrix(comp.outcomes).to_csv(d / "agreement.csv")
        for name, make in (("comparison.png", plot_comparison), ("position_bias.png", plot_position_bias),
                           ("agreement_heatmap.png", plot_agreement)):
            fig = make(comp)
            plots.save_figure(fig, d / name)
            plt.close(fig)
        record = {
            "task": cfg.task, "model_a": comp.name_a, "model_b": comp.name_b, "n": len(comp.pairs),
            "n_failed": int(comp.summary.set_index("judge").at["majority", "failed"]),
            "n_failed_decisions": int(comp.results["failed"].sum()),
            "n_unmatched": len(comp.unmatched), "n_failed_generation": len(comp.failed_generation),
            "metrics": eve_metrics(comp), "verdict": verdict_text(comp, cfg.alpha),
            "usage": usage or {}, "params": cfg.as_dict(),
        }
        (d / "metrics.json").write_text(json.dumps(json_safe(record), indent=2, ensure_ascii=False) + "\n")
        print(f"Saved outputs to {display_path(d)}")
        dirs.append(d)
    return dirs
