"""Writing what a run leaves behind: samples.csv, results.json, results.eee.jsonl and the run index.

The layout is the output contract (README, "What the main job produces"):
`outputs/<run_name>/<model_name>/<task>/{samples.csv, results.json, results.eee.jsonl, report.html, *.png}`.
"""
from __future__ import annotations

import html
import json
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

import evekit
from evekit.paths import display_path, resolve_path

EEE_SCHEMA_VERSION = "0.2.1"
# Parameter names that could carry a secret if a user put one there by mistake.
SECRET_HINTS = ("api_key", "token", "secret", "password")


def json_safe(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become None, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def public_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as recorded in results: only names of key variables, never values."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if any(h in key.lower() for h in SECRET_HINTS) and not key.endswith("_env"):
            continue
        if key == "judges" and isinstance(value, list):
            value = [{k: v for k, v in dict(j).items() if k != "api_key"} for j in value]
        out[key] = value
    return json_safe(out)


def build_results(*, task: str, model: str, samples: pd.DataFrame, metrics: dict[str, dict],
                  usage: dict[str, Any], params: dict[str, Any], extra: dict[str, Any] | None = None,
                  notes: list[str] | None = None) -> dict[str, Any]:
    n_unparsed = int(samples["unparsed"].fillna(False).astype(bool).sum()) if "unparsed" in samples else 0
    n_failed = int(samples["failed"].fillna(False).astype(bool).sum()) if "failed" in samples else 0
    n_truncated = int(samples["truncated"].fillna(False).astype(bool).sum()) if "truncated" in samples else 0
    results = {
        "task": task,
        "model": model,
        "n": int(len(samples)),
        "n_unparsed": n_unparsed,
        "n_failed": n_failed,
        "n_truncated": n_truncated,  # answers cut off at max_tokens (finish_reason "length")
        "metrics": metrics,
        "usage": usage,
        "params": public_params(params),
        "evekit_version": evekit.__version__,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if notes:
        results["notes"] = list(notes)
    if extra:
        results.update(extra)
    return json_safe(results)


def _is_local_dataset(dataset: str) -> bool:
    """A file (it has a suffix, as `TaskRun.load` decides) or an absolute path; else a hub id."""
    return bool(Path(dataset).suffix) or Path(dataset).expanduser().is_absolute()


def _local_dataset_path(dataset: str) -> str:
    """Where a local dataset is, without machine-specific parts: relative to the repository root
    when inside it, else only the file name (never an absolute path)."""
    shown = display_path(resolve_path(dataset))
    return Path(shown).name if Path(shown).is_absolute() else shown


def _eee_source_data(dataset: str, params: dict[str, Any]) -> dict[str, Any]:
    """`source_data` of EEE 0.2.1: a hub dataset is its `hf_dataset` variant (`hf_repo`, `hf_split`);
    a local file is its `other` variant, the path in `additional_details` (the schema has no local-file
    variant, and its `additional_details` values must be strings)."""
    if not _is_local_dataset(dataset):
        source: dict[str, Any] = {"dataset_name": dataset, "source_type": "hf_dataset", "hf_repo": dataset}
        if isinstance(params.get("split"), str):
            source["hf_split"] = params["split"]
        return source
    path = _local_dataset_path(dataset)
    details = {"path": path}
    if Path(path).suffix:
        details["format"] = Path(path).suffix.lstrip(".").lower()
    return {"dataset_name": Path(path).name, "source_type": "other", "additional_details": details}


def _eee_uncertainty(m: dict[str, Any], n: int) -> dict[str, Any]:
    """`uncertainty` of EEE 0.2.1: the interval only when both bounds are numbers (the schema requires
    `lower` and `upper` as numbers), `num_samples` as an integer."""
    out: dict[str, Any] = {}
    low, high = json_safe(m.get("ci_low")), json_safe(m.get("ci_high"))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        out["confidence_interval"] = {"lower": low, "upper": high, "confidence_level": 0.95,
                                     "method": str(m.get("method") or "bootstrap")}  # the metric's own interval
    num = m.get("n")
    out["num_samples"] = int(num) if isinstance(json_safe(num), (int, float)) else int(n)
    return out


def _eee_range(name: str) -> tuple[float, float, bool]:
    """(min_score, max_score, lower_is_better) of a metric: the registry's facts (mcc and kappa go
    down to -1, the Brier score up to 2, ECE and Brier are better low); 0-1, higher better otherwise."""
    from evekit.metrics import get_metric

    try:
        metric = get_metric(name)
    except KeyError:
        return 0, 1, False
    low, high = metric.bounds
    if name == "fleiss_kappa":
        low = -1
    return (int(low) if float(low).is_integer() else low), (int(high) if float(high).is_integer() else high), \
        not metric.higher_is_better


def to_eee(results: dict[str, Any], *, dataset: str) -> dict[str, Any]:
    """One result in the Every Eval Ever schema 0.2.1 (its `eval.schema.json`; the fields EuroEval
    documents). Metrics without a numeric value are left out (the schema's `score` is a number)."""
    now = int(time.time())
    source_data = _eee_source_data(str(dataset), results.get("params") or {})
    failures = results.get("n_failed", 0) + results.get("n_unparsed", 0)
    evaluation_results = []
    for name, m in results["metrics"].items():
        value = json_safe(m.get("value"))
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        lowest, highest, lower_is_better = _eee_range(name)
        evaluation_results.append({
            "evaluation_name": name,
            "source_data": dict(source_data),
            "metric_config": {
                "lower_is_better": lower_is_better,
                "score_type": "continuous",
                "min_score": lowest,
                "max_score": highest,
            },
            "score_details": {
                "score": value,
                "details": {
                    "num_failed_instances": f"{float(results.get('n_failed', 0))}",
                    "num_unparsed_instances": f"{float(results.get('n_unparsed', 0))}",
                },
                "uncertainty": _eee_uncertainty(m, results["n"]),
            },
        })
    return json_safe({
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": f"{results['task']}/{results['model']}/{now}",
        "evaluation_timestamp": results.get("timestamp") or datetime.now(timezone.utc).isoformat(),
        "retrieved_timestamp": str(now),
        "source_metadata": {
            "source_name": "evekit",
            "source_type": "evaluation_run",
            "source_organization_name": "evekit",
            "source_organization_url": "https://github.com/eve-esa/evalkit",
            "evaluator_relationship": "third_party",
        },
        "model_info": {
            "id": results["model"],
            "name": results["model"],
            "additional_details": {"generative": "true", "api": str(results["params"].get("api", ""))},
        },
        "eval_library": {
            "name": "evekit",
            "version": evekit.__version__,
            "additional_details": {
                "task": results["task"],
                "few_shot": str(bool(results["params"].get("num_fewshot"))).lower(),
                "num_fewshot": str(results["params"].get("num_fewshot")),
                "num_failed_or_unparsed": str(failures),
            },
        },
        "evaluation_results": evaluation_results,
    })


RUN_RECORD = "run.json"
RUN_RECORD_SCHEMA = "evekit.run/1"
RUN_KINDS = ("task", "win_rate", "ranking", "summary", "judge_validation")
# Set by the batch runner around one papermill execution; the kernel inherits it, so each record
# says which execution wrote it and the runner finds exactly that execution's outputs.
EXECUTION_ENV = "EVEKIT_EXECUTION"


@dataclass(frozen=True)
class RunRecord:
    """One `run.json`: what a notebook's save step wrote, and where (`dir` is the folder it sits in)."""

    dir: Path
    kind: str
    notebook: str
    run_name: str
    files: tuple[str, ...]
    created: str
    execution: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def write_run_record(out_dir: Path, *, kind: str, notebook: str, run_name: str,
                     files: list[str] | None = None, **details: Any) -> Path:
    """Write `<out_dir>/run.json`, the machine-readable hand-off of a notebook's save step.

    `files` are the names written into `out_dir` (None: every file there now, except run.json and
    report.html, which the batch runner adds later). `details` are extra fields (task, model, ...).
    """
    if kind not in RUN_KINDS:
        raise ValueError(f"kind={kind!r}; use one of: {', '.join(RUN_KINDS)}")
    out_dir = Path(out_dir)
    if files is None:
        files = sorted(p.name for p in out_dir.iterdir() if p.is_file() and p.name not in (RUN_RECORD, "report.html"))
    record = {
        "schema": RUN_RECORD_SCHEMA,
        "kind": kind,
        "notebook": notebook,
        "run_name": run_name,
        "output_dir": display_path(out_dir),
        "files": list(files),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "execution": os.environ.get(EXECUTION_ENV),
        "evekit_version": evekit.__version__,
        **json_safe(details),
    }
    path = out_dir / RUN_RECORD
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return path


def read_run_record(path: Path) -> RunRecord:
    """Parse one run.json; ValueError names the file when it is not a record."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        core = {k: data.pop(k) for k in ("kind", "notebook", "run_name", "files", "created")}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not an evekit run record ({exc})") from None
    data.pop("schema", None)
    data.pop("output_dir", None)  # informational: the folder is where the file is (runs can be moved)
    return RunRecord(dir=path.parent, files=tuple(core.pop("files")), execution=data.pop("execution", None),
                     details=data, **core)


def find_run_records(root: Path, *, execution: str | None = None) -> tuple[list[RunRecord], list[Path]]:
    """Every run.json under `root` (only those of `execution` when given), sorted by folder.

    Returns (records, unreadable files) so a caller can list a broken record instead of failing.
    """
    records, unreadable = [], []
    for path in sorted(Path(root).rglob(RUN_RECORD)):
        try:
            record = read_run_record(path)
        except ValueError:
            unreadable.append(path)
            continue
        if execution is None or record.execution == execution:
            records.append(record)
    return records, unreadable


MODEL_OUTPUTS = "model_outputs.jsonl"


def write_model_outputs(path: Path, outputs: list[dict[str, Any]]) -> Path:
    """One JSON object per line and item (`doc_id` first): what was sent and what came back."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        for record in outputs:
            f.write(json.dumps(json_safe(record), ensure_ascii=False, default=str) + "\n")
    return path


def write_run(out_dir: Path, samples: pd.DataFrame, results: dict[str, Any], *, dataset: str,
              figures: dict[str, Any] | None = None, outputs: list[dict[str, Any]] | None = None) -> Path:
    """Write samples.csv, results.json, results.eee.jsonl, model_outputs.jsonl (when `outputs` is
    given: one record per item, `write_model_outputs`), the figures and run.json into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    samples.to_csv(out_dir / "samples.csv", index=False)
    if outputs is not None:
        write_model_outputs(out_dir / MODEL_OUTPUTS, outputs)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    with open(out_dir / "results.eee.jsonl", "w") as f:
        f.write(json.dumps(to_eee(results, dataset=dataset), ensure_ascii=False) + "\n")
    figures = figures or {}
    for name, fig in figures.items():
        fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
    params = results.get("params", {})
    # A custom task runs in notebooks/custom_task.ipynb; an EVE task in the notebook of its name.
    write_run_record(out_dir, kind="task", notebook="custom_task" if params.get("task_file") else results["task"],
                     run_name=str(params.get("run_name", out_dir.parent.parent.name)),
                     files=["samples.csv", "results.json", "results.eee.jsonl",
                            *([MODEL_OUTPUTS] if outputs is not None else []), *figures],
                     task=results["task"], model=results["model"])
    return out_dir


def format_metric(m: dict[str, Any] | None) -> str:
    """'0.550 [0.40, 0.70]': value with its 95% interval, '–' when there is none."""
    if not m or m.get("value") is None:
        return "–"
    lo, hi = m.get("ci_low"), m.get("ci_high")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{m['value']:.3f}{ci}"


def headline(results: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """(name, metric) of the number a result is summarised by: the task's headline
    (`evekit.tasks.headline_metric`) among the metrics that have a value."""
    from evekit.tasks import headline_metric

    metrics = results.get("metrics", {})
    valued = [name for name, m in metrics.items() if m.get("value") is not None]
    name = headline_metric(results.get("task"), valued)
    return (name, metrics[name]) if name is not None else ("–", None)


def write_index(run_dir: Path, batch_runs: "list[Path] | tuple[Path, ...]" = ()) -> Path:
    """`<run_dir>/index.html`: every report of the run with its headline number and failures.

    What is listed comes from the run.json records the notebooks' save steps wrote, not from
    guessing folder layouts; `failed/` holds the batch runner's reports of notebooks that failed.
    `batch_runs`: the run folders of the same `evekit run` (this one may be among them); the
    index links the indexes of the others.
    """
    run_dir = Path(run_dir)
    others = _other_runs_list(run_dir, batch_runs)
    from evekit.server import DEMO_MODEL_NOTE, demo_judge_note, demo_judges, is_demo_model

    models: set[str] = set()
    judges: set[str] = set()  # judges that are the demo model, behind any judged score of the run
    records, unreadable = find_run_records(run_dir)
    rows = [f"<tr><td colspan='8'>unreadable: {html.escape(str(p.relative_to(run_dir)))}</td></tr>"
            for p in unreadable]
    for record in (r for r in records if r.kind == "task"):
        res_file = record.dir / "results.json"
        try:
            res = json.loads(res_file.read_text())
            res["task"], res["model"], res["n"]
        except (OSError, ValueError, KeyError):  # half-written or foreign file: list it, do not fail the index
            rows.append(f"<tr><td colspan='8'>unreadable: {html.escape(str(res_file.relative_to(run_dir)))}</td></tr>")
            continue
        name, m = headline(res)
        models.add(str(res["model"]))
        judges.update(demo_judges((res.get("params") or {}).get("judges") or []))
        report = record.dir / "report.html"
        link = (f'<a href="{html.escape(str(report.relative_to(run_dir)))}">report</a>'
                if report.exists() else "no report")
        rows.append(
            f"<tr><td>{html.escape(res['task'])}</td><td>{html.escape(res['model'])}</td>"
            f"<td>{html.escape(name)}</td><td>{format_metric(m)}</td><td>{_metric_n(res, m)}</td>"
            f"<td>{res.get('n_unparsed', 0)}</td><td>{_failed_cell(res)}</td>"
            f"<td>{html.escape(_baseline_cell(res))}</td><td>{link}</td></tr>"
        )
    extra = []
    # Judge validations, win-rate comparisons and rankings, then the summary (the order the batch runner runs them in).
    order = {"judge_validation": 0, "win_rate": 1, "ranking": 1, "summary": 2}
    for record in sorted((r for r in records if r.kind != "task"), key=lambda r: (order.get(r.kind, 1), str(r.dir))):
        label = {"summary": "summary leaderboard", "judge_validation": f"judge validation: {record.dir.name}",
                 "ranking": f"ranking: {record.dir.name}"}.get(record.kind, f"win rate: {record.dir.name}")
        note = (_win_rate_headline(record.dir / "summary.csv") if record.kind == "win_rate"
                else _validation_headline(record.dir / "results.json") if record.kind == "judge_validation"
                else _ranking_headline(record.dir / "ratings.csv") if record.kind == "ranking" else "")
        if record.kind in ("win_rate", "judge_validation", "ranking"):
            judges.update(_record_demo_judges(record))
        report = record.dir / "report.html"
        target = (f'<a href="{html.escape(str(report.relative_to(run_dir)))}">{html.escape(label)}</a>'
                  if report.exists() else f"{html.escape(label)} (no report)")
        extra.append(f"<li>{target} {html.escape(note)}</li>")
    for report in sorted(run_dir.glob("failed/*/report.html")):
        rel = report.relative_to(run_dir)
        extra.append(f'<li><a href="{html.escape(str(rel))}">FAILED: {html.escape(rel.parts[1])}</a></li>')
    demo_note = f" {html.escape(DEMO_MODEL_NOTE)}" if any(is_demo_model(m) for m in models) else ""
    if judges:
        demo_note += f" {html.escape(demo_judge_note(sorted(judges)))}"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>evekit run {html.escape(run_dir.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:90em}}table{{border-collapse:collapse}}
td:nth-child(4){{white-space:nowrap}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}th{{background:#eee}}</style></head>
<body><h1>evekit run <code>{html.escape(run_dir.name)}</code></h1>
<p>Headline metric per task with its 95% confidence interval; <em>n</em>: the items behind that metric
(of the run's items, when some were left out). <em>baseline</em>: the accuracy of always giving the most
frequent gold answer, where items have one gold letter or label. <em>unparsed</em>: answers the
model gave in an unusable form (scored wrong); <em>failed</em>: infrastructure failures (excluded from the
metric).{demo_note}</p>
<table><tr><th>task</th><th>model</th><th>metric</th><th>value [95% CI]</th><th>n</th><th>unparsed</th>
<th>failed</th><th>baseline: always the most frequent answer</th><th></th></tr>
{''.join(rows)}
</table>
<ul>{''.join(extra)}</ul>
{others}
<p><small>evekit {evekit.__version__}, written {datetime.now(timezone.utc).isoformat(timespec='seconds')}</small></p>
</body></html>
"""
    index = run_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def _other_runs_list(run_dir: Path, batch_runs: "list[Path] | tuple[Path, ...]") -> str:
    """'Other runs of this batch' with a link to each one's index.html (relative, so a copied
    output folder keeps working)."""
    others = sorted({Path(r).resolve() for r in batch_runs} - {run_dir.resolve()})
    if not others:
        return ""
    items = "".join(
        f'<li><a href="{html.escape(Path(os.path.relpath(o / "index.html", run_dir.resolve())).as_posix())}">'
        f"{html.escape(o.name)}</a></li>" for o in others)
    return f"<h2>Other runs of this batch</h2>\n<ul>{items}</ul>"


def _metric_n(res: dict[str, Any], m: dict[str, Any] | None) -> str:
    """The n behind the headline metric (failed items and abstentions left out), and the item count
    when it differs."""
    n = res["n"] if m is None else m.get("n", res["n"])
    return f"{n}" if n == res["n"] else f"{n} of {res['n']}"


def _failed_cell(res: dict[str, Any]) -> str:
    judge_failed = res.get("n_judge_failed", 0)
    return f"{res.get('n_failed', 0)}" + (f" + {judge_failed} without verdict" if judge_failed else "")


def _baseline_cell(res: dict[str, Any]) -> str:
    """'always "C": 0.262 [0.17, 0.38]' (and 'not beaten' when acc's interval reaches down to it)."""
    constant = (res.get("baselines") or {}).get("most_frequent")
    if not constant:
        return "–"
    acc = res.get("metrics", {}).get("acc", {})
    beaten = acc.get("ci_low") is not None and constant.get("value") is not None and acc["ci_low"] > constant["value"]
    return f'always "{constant["answer"]}": {format_metric(constant)}' + ("" if beaten else " (not beaten)")


def _win_rate_headline(summary_csv: Path) -> str:
    """EVE's average across judges: each model's win rate and the alpaca win rate of the first,
    each with its interval over questions."""
    try:
        df = pd.read_csv(summary_csv)
        row = df.iloc[-1]

        def rate(name: str) -> str:
            return format_metric(json_safe({"value": row[name], "ci_low": row.get(f"{name}_ci_low"),
                                            "ci_high": row.get(f"{name}_ci_high")}))
        return (f"({row['model_a']} {rate('win_rate_a')}, {row['model_b']} {rate('win_rate_b')}, "
                f"ties {rate('tie_rate')}; alpaca win rate of {row['model_a']} {rate('alpaca_win_rate_a')}; "
                f"n = {int(df['n'].max())} questions)")  # the average row has no n of its own
    except Exception:  # a half-written or foreign summary must not break the index
        return ""


def _record_demo_judges(record: RunRecord) -> list[str]:
    """Demo-model judges of a win-rate or judge-validation folder (from its metrics/results json)."""
    from evekit.server import demo_judges

    for name in ("metrics.json", "results.json"):
        try:
            data = json.loads((record.dir / name).read_text())
        except (OSError, ValueError):
            continue
        return demo_judges((data.get("params") or {}).get("judges") or [])
    return []


def _validation_headline(results_json: Path) -> str:
    """The vote's accuracy and kappa against the expert labels, with intervals."""
    try:
        data = json.loads(results_json.read_text())
        vote = next(r for r in data["table"] if r["judge"] == "vote")
        acc = format_metric({"value": vote["accuracy"], "ci_low": vote["accuracy_ci_low"],
                             "ci_high": vote["accuracy_ci_high"]})
        kappa = format_metric({"value": vote["kappa"], "ci_low": vote["kappa_ci_low"], "ci_high": vote["kappa_ci_high"]})
        return f"(panel vote: accuracy {acc}, kappa {kappa}, n = {vote['n']} of {data['n_decisions']} decisions)"
    except Exception:  # a half-written or foreign file must not break the index
        return ""


def _ranking_headline(ratings_csv: Path) -> str:
    """The pooled ranking: '(1. m1 1178 [1154, 1205]; 2. m2 ...)'."""
    try:
        df = pd.read_csv(ratings_csv)
        pooled = df[df["judge"] == "pooled"].sort_values(["rank", "rating"], ascending=[True, False])
        parts = [f"{int(r['rank'])}. {r['model']} {r['rating']:.0f}"
                 + (f" [{r['ci_low']:.0f}, {r['ci_high']:.0f}]" if pd.notna(r["ci_low"]) else "")
                 for _, r in pooled.iterrows()]
        return f"(pooled Bradley–Terry ratings: {'; '.join(parts)})" if parts else ""
    except Exception:  # a half-written or foreign table must not break the index
        return ""
