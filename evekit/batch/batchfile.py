"""OpenAI Batch files: `evekit batch export` and `evekit batch import`.

The calls a set of runs would send and does not have in its caches (`evekit.plan`) become the lines
of an OpenAI Batch input file, one per call: `custom_id` (the call's cache key), `method` POST, `url`
(`/v1/chat/completions` or `/v1/completions`) and `body` (exactly what the client would POST). Any
engine that executes such files answers them: a hosted Batch API, or vLLM's `run_batch` on a GPU
cluster. The output file (`custom_id`, `response.status_code`, `response.body`, `error`; lines in
any order) goes back into the caches of the runs, and the notebooks then replay it like any cached
call, `offline: true` included.

Rounds: a judged task's judge calls are built from the answers, so they can only be exported once
the answers are imported: export (answers), import, export again (judge calls), import. The commands
say, per run, which round is next. Judge calls are exported in the first structured-output format
of the chain (json_schema), the one a run tries first; a reply that cannot be used leads to one
reminder call, which a further export lists.

A line that came back with an error (or a status other than 200, or a body without an answer) is
recorded in the cache as a failure (`ResponseCache.record_failures`): the run shows that item as
failed with the batch's message (not as a cache miss), and the next export lists the call again; a
later import that answers it replaces the failure.
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from evekit.cache import ResponseCache
from evekit.errors import BatchFileError, EvekitError
from evekit.paths import display_path
from evekit.batch.plan import PlannedCall, RunPlan, plan_files
from evekit.types import GenerationResult

__all__ = ["export_batch", "import_batch", "batch_line", "read_results", "ExportSummary", "ImportSummary"]


def batch_line(call: PlannedCall) -> dict[str, Any]:
    """One OpenAI Batch input line for `call`."""
    return {"custom_id": call.key, "method": "POST", "url": call.url, "body": call.body}


@dataclass
class ExportSummary:
    path: Path
    lines: int
    by_model: dict[str, int]
    plans: list[RunPlan]
    skipped_models: dict[str, int] = field(default_factory=dict)  # pending calls left out by `model`


def export_batch(param_files: Sequence[str | Path], out: str | Path, *, model: str | None = None,
                 notebooks_dir: str | Path | None = None) -> ExportSummary:
    """Write one Batch input line per call the runs of `param_files` would send that their caches do
    not answer (failed batch lines included), each call once however many runs share it; `model`
    keeps only the calls to that model (a hosted Batch API takes one model per file)."""
    plans = plan_files(param_files, notebooks_dir=notebooks_dir)
    lines: dict[str, PlannedCall] = {}
    skipped: Counter[str] = Counter()
    for plan in plans:
        for call in plan.pending():
            if model is not None and call.model != model:
                skipped[call.model] += call.key not in lines
                continue
            lines.setdefault(call.key, call)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for call in lines.values():
            f.write(json.dumps(batch_line(call), ensure_ascii=False) + "\n")
    os.replace(tmp, path)  # a half-written file is never mistaken for the export
    by_model = Counter(c.model for c in lines.values())
    return ExportSummary(path, len(lines), dict(by_model), plans, dict(skipped))


# -- import --------------------------------------------------------------------------------------
@dataclass
class ResultLine:
    lineno: int
    custom_id: str
    result: GenerationResult  # an answer, or a failure whose error is the batch's message


@dataclass
class ImportSummary:
    answered: int
    failed: int
    already_cached: int
    plans: list[RunPlan]


def _answer(api: str, body: Any, where: str) -> GenerationResult:
    """The body of a 200 line read as the client reads a live response (reasoning, <think> blocks,
    tokens); a body without an answer is a failure with the reason."""
    from evekit.client import ModelClient

    if not isinstance(body, dict):
        return GenerationResult(text=None, error=f"batch answer unusable ({where}): response.body is not an object")
    try:
        # The one parser of responses (ModelClient._parse reads nothing of the client itself).
        return ModelClient._parse(None, SimpleNamespace(api=api),  # type: ignore[arg-type]
                                  200, json.dumps(body).encode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - e.g. no choices: recorded as the item's failure
        return GenerationResult(text=None, error=f"batch answer unusable ({where}): {exc}")


def _error_message(error: Any, response: Any) -> str:
    """The batch's own words for a failed line."""
    parts = []
    if isinstance(response, dict) and response.get("status_code") not in (None, 200):
        parts.append(f"HTTP {response['status_code']}")
    detail = error
    if not detail and isinstance(response, dict):
        body = response.get("body")
        detail = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):
        code, message = detail.get("code"), detail.get("message")
        detail = ": ".join(str(p) for p in (code, message) if p) or json.dumps(detail, ensure_ascii=False)
    if detail:
        parts.append(str(detail))
    return "batch line failed: " + (": ".join(parts) or "no response and no error given")


def read_results(path: str | Path, known: dict[str, PlannedCall]) -> list[ResultLine]:
    """Every line of a Batch output file, checked: a JSON object with a `custom_id` among `known`
    (the calls of the runs), seen once, with a `response` or an `error`. Raises `BatchFileError`
    naming the file and line of the first bad one."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BatchFileError(f"{path}: cannot read the batch output file ({exc.strerror or exc})") from None
    out: list[ResultLine] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}, line {lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BatchFileError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise BatchFileError(f"{where}: expected a JSON object with custom_id, response and error")
        cid = rec.get("custom_id")
        if not isinstance(cid, str) or not cid:
            raise BatchFileError(f"{where}: field 'custom_id' is missing or not a string")
        if cid not in known:
            raise BatchFileError(
                f"{where}: custom_id {cid!r} is not a call of these runs (a line of another export, or "
                "parameter files other than the ones exported? Judge calls are known only after the "
                "answers they judge are imported)")
        if cid in seen:
            raise BatchFileError(f"{where}: custom_id {cid!r} appears again (first on line {seen[cid]})")
        seen[cid] = lineno
        response, error = rec.get("response"), rec.get("error")
        if "response" not in rec and "error" not in rec:
            raise BatchFileError(f"{where}: neither 'response' nor 'error' is present")
        if response is not None and not isinstance(response, dict):
            raise BatchFileError(f"{where}: field 'response' must be an object or null")
        status = response.get("status_code") if isinstance(response, dict) else None
        if response is not None and not (isinstance(status, int) and not isinstance(status, bool)):
            raise BatchFileError(f"{where}: field 'response.status_code' must be an integer")
        if error is None and status == 200:
            result = _answer(known[cid].api, response.get("body"), f"{path.name}, line {lineno}")
        else:
            result = GenerationResult(text=None, error=_error_message(error, response))
        out.append(ResultLine(lineno, cid, result))
    return out


def import_batch(results: str | Path, param_files: Sequence[str | Path], *,
                 notebooks_dir: str | Path | None = None) -> ImportSummary:
    """Load a Batch output file into the caches of the runs of `param_files`: answers are cached,
    failed lines recorded as failures. The file is checked completely before anything is written."""
    caches: dict[Path, ResponseCache] = {}
    try:
        plans = plan_files(param_files, notebooks_dir=notebooks_dir, caches=caches)
        known: dict[str, list[PlannedCall]] = {}
        for plan in plans:
            for call in plan.calls:
                known.setdefault(call.key, []).append(call)
        lines = read_results(results, {k: v[0] for k, v in known.items()})
        answered = failed = already = 0
        for line in lines:
            targets = {c.cache_dir: c for c in known[line.custom_id]}
            for cache_dir, call in targets.items():
                if cache_dir not in caches:
                    caches[cache_dir] = ResponseCache(cache_dir)
                cache = caches[cache_dir]
                if call.status == "cached":
                    already += 1
                elif line.result.failed:
                    cache.record_failures([(call.key, call.fields, line.result.error)])
                    failed += 1
                else:
                    cache.put(call.key, call.fields, line.result)
                    cache.clear_failures([call.key])
                    answered += 1
        after = plan_files(param_files, notebooks_dir=notebooks_dir, caches=caches)
    finally:
        for cache in caches.values():
            cache.close()
    return ImportSummary(answered, failed, already, after)


# -- command line --------------------------------------------------------------------------------
def _print_rounds(plans: Sequence[RunPlan]) -> None:
    for plan in plans:
        print(f"  {plan.label}: {plan.next_round()}")


def main_export(param_files: Sequence[str], out: str, *, model: str | None = None,
                notebooks_dir: str | None = None) -> int:
    try:
        summary = export_batch(param_files, out, model=model, notebooks_dir=notebooks_dir)
    except EvekitError as exc:
        print(f"evekit batch export: {exc}", file=sys.stderr)
        return 2
    models = ", ".join(f"{m}: {n}" for m, n in summary.by_model.items()) or "none"
    print(f"wrote {summary.lines} batch line(s) to {display_path(summary.path)} ({models})")
    if summary.skipped_models:
        left = ", ".join(f"{m}: {n}" for m, n in summary.skipped_models.items())
        print(f"left out (--model {model}): {left}; export them with --model NAME")
    elif len(summary.by_model) > 1:
        print("note: several models in one file; a hosted Batch API takes one model per file (use --model)")
    print("next, per run:")
    _print_rounds(summary.plans)
    if summary.lines:
        print(f"then: execute the file, and `evekit batch import OUTPUT.jsonl {' '.join(param_files)}`")
    return 0


def main_import(results: str, param_files: Sequence[str], *, notebooks_dir: str | None = None) -> int:
    try:
        summary = import_batch(results, param_files, notebooks_dir=notebooks_dir)
    except EvekitError as exc:
        print(f"evekit batch import: {exc}", file=sys.stderr)
        return 2
    print(f"imported {summary.answered} answer(s) and {summary.failed} failed line(s) "
          f"({summary.already_cached} already in the cache)")
    if summary.failed:
        print("failed lines show as failed items in the runs; the next `evekit batch export` lists them again")
    print("next, per run:")
    _print_rounds(summary.plans)
    return 0
