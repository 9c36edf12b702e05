"""One call, no parameter files: `evekit.evaluate(...)` and `evekit eval ...`.

    import evekit
    results = evekit.evaluate(model="qwen3-8b", base_url="http://localhost:8000/v1",
                              tasks=["mcqa_single_answer", "open_ended"], limit=50,
                              judges=[{"name": "j", "model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1",
                                       "api_key_env": "OPENAI_API_KEY"}])
    results.metrics          # model, task, metric, value, ci_low, ci_high, n
    results.paths            # the run folders (samples.csv, results.json, results.eee.jsonl, report.html)

    evekit eval --model qwen3-8b --base-url http://localhost:8000/v1 --task mcqa_single_answer --limit 50
    evekit eval ... --track mlflow     # each run logged to MLflow (or W&B), as `evekit run --track`

The same runs as `evekit run` (like EuroEval's `Benchmarker().benchmark(model=..., task=...)`):
with `notebook=True` (the default) the parameters are written as ordinary parameter files under
`<output_dir>/<run_name>/evekit_params/` and run by the batch runner (papermill, reports, index,
endpoint limits); with `notebook=False` the task notebook's steps (`TaskRun`) run in this process
and write the same files, without report.html.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from evekit.atomic import write_text_atomic
from evekit.errors import EvekitError, ParameterError
from evekit.paths import output_path, safe_name

# The task catalogue, the parameters and the runners are imported on first use: `evekit --help`
# builds this command's flags and stays quick.

__all__ = ["Results", "evaluate", "task_values", "add_eval_arguments", "main_eval"]

METRIC_COLUMNS = ["model", "task", "metric", "value", "ci_low", "ci_high", "n"]


@dataclass
class Results:
    """What `evaluate` returns: the metrics of every run as one table, the run folders, the
    parameter files it ran (notebook mode) and whether every run passed."""

    metrics: Any  # pandas.DataFrame with METRIC_COLUMNS
    paths: list[Path] = field(default_factory=list)
    params_files: list[Path] = field(default_factory=list)
    ok: bool = True

    def __repr__(self) -> str:
        return (f"Results({len(self.paths)} run(s), {len(self.metrics)} metric rows, ok={self.ok}; "
                f"folders: {', '.join(map(str, self.paths))})")


def task_values(model: str, base_url: str, task: str, *, api_key_env: str | None = None,
                judges: Sequence[Mapping[str, Any]] | None = None, run_name: str | None = None,
                output_dir: str = "outputs", **params: Any) -> dict[str, Any]:
    """One task run's parameter values (checked as `evekit run` checks a file); judges go to judged
    tasks only."""
    from evekit.runs.params import files_checked
    from evekit.runs.task.params import TaskParams
    from evekit.tasks import TASKS

    if task not in TASKS:
        raise ParameterError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    values: dict[str, Any] = {"task": task, "model_name": model, "base_url": base_url, "api_key_env": api_key_env}
    if judges and TASKS[task].judge_kind:
        values["judges"] = [dict(j) for j in judges]
    values.update(run_name=run_name or safe_name(model), output_dir=output_dir, **params)
    with files_checked(False):
        TaskParams.from_dict(values)
    return values


def _metrics_table(folders: Sequence[Path]) -> Any:
    import pandas as pd

    rows = []
    for d in folders:
        path = Path(d) / "results.json"
        if not path.is_file():
            continue
        res = json.loads(path.read_text(encoding="utf-8"))
        for name, m in (res.get("metrics") or {}).items():
            if isinstance(m, dict):
                rows.append({"model": res.get("model"), "task": res.get("task"), "metric": name,
                             "value": m.get("value"), "ci_low": m.get("ci_low"), "ci_high": m.get("ci_high"),
                             "n": m.get("n")})
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


def _run_in_process(values: dict[str, Any]) -> Path:
    """The task notebook's steps that compute and write, in order, in this process (no kernel, no
    report.html): the same samples, metrics, files and plots as the notebook."""
    import matplotlib.pyplot as plt

    from evekit.runs.task.run import TaskRun

    run = TaskRun.from_params(**values)
    run.load()
    run.generate()
    if run.task.judge_kind:
        run.judge()
    run.compute_metrics()
    figures = run.plots()
    try:
        return run.save()
    finally:
        for fig in {id(f): f for f in [*figures.values(), *run.figures.values()]}.values():
            plt.close(fig)  # saved, not shown; the caller's own figures are left alone


def evaluate(model: str, base_url: str, task: str | None = None, tasks: Sequence[str] | None = None, *,
             api_key_env: str | None = None, judges: Sequence[Mapping[str, Any]] | None = None,
             notebook: bool = True, html: bool = True, jobs: int = 1, serve: bool = False,
             run_name: str | None = None, output_dir: str = "outputs", **params: Any) -> Results:
    """Evaluate `model` at `base_url` on `task` (or each of `tasks`) and return the metrics.

    `**params` are any task-notebook parameters (`limit`, `num_fewshot`, `dataset`, `max_tokens`,
    `concurrency`, `cache_dir`, ...), checked before anything runs; an unknown name is an error.
    `api_key_env` is the NAME of the variable holding the key. `notebook=False` runs the steps
    in-process instead of the notebooks.
    """
    from evekit.runs.params import files_checked
    from evekit.runs.task.params import TaskParams
    from evekit.tasks import TASKS

    chosen = ([task] if task else []) + list(tasks or [])
    if not chosen:
        raise ParameterError(f"name a task (task=... or tasks=[...]); tasks: {', '.join(TASKS)}")
    dupes = sorted({t for t in chosen if chosen.count(t) > 1})
    if dupes:
        raise ParameterError(f"task(s) given twice: {', '.join(dupes)}")
    runs = [task_values(model, base_url, t, api_key_env=api_key_env, judges=judges, run_name=run_name,
                        output_dir=output_dir, **params) for t in chosen]
    folders: list[Path] = []
    files: list[Path] = []
    ok = True
    if not notebook:
        for values in runs:
            folders.append(_run_in_process(values))
        return Results(_metrics_table(folders), folders, [], ok)
    from evekit.batch.execute import run_batch

    run_dir = output_path(output_dir) / safe_name(runs[0]["run_name"])
    folder = run_dir / "evekit_params"
    folder.mkdir(parents=True, exist_ok=True)
    for values in runs:
        path = folder / f"{values['task']}.yaml"
        write_text_atomic(path, "# written by evekit.evaluate / evekit eval\n"
                          + yaml.safe_dump(values, sort_keys=False, allow_unicode=True))
        files.append(path)
    ok = run_batch([str(f) for f in files], serve=serve, html=html, jobs=jobs) == 0
    with files_checked(False):
        folders = [p.out_dir for p in (TaskParams.from_dict(v) for v in runs) if (p.out_dir / "results.json").is_file()]
    return Results(_metrics_table(folders), folders, files, ok)


# -- `evekit eval` -------------------------------------------------------------------------------
def _value(text: str) -> Any:
    """A --set value as YAML reads it (numbers, true/false, null, lists), else the text."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="the model's name at the endpoint")
    parser.add_argument("--base-url", "--api-base", dest="base_url", required=True,
                        help="the OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (--api-base: EuroEval's name)")
    parser.add_argument("--api-key-env", default=None, help="the NAME of the environment variable holding the key")
    parser.add_argument("--task", action="append", required=True, metavar="TASK",
                        help="a task of the catalogue, e.g. mcqa_single_answer (repeatable)")
    parser.add_argument("--dataset", default=None, help="a local file or hub id (default: the task's EVE dataset)")
    parser.add_argument("--num-fewshot", type=int, default=None, help="few-shot examples (default: the task's)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items")
    parser.add_argument("--judge", action="append", default=[], metavar="NAME=MODEL@URL",
                        help="a judge for the judged tasks (repeatable)")
    parser.add_argument("--judge-key-env", default=None,
                        help="the NAME of the judges' key variable (default: --api-key-env)")
    parser.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                        help="any other task parameter, e.g. --set max_tokens=256 (repeatable)")
    parser.add_argument("--run-name", default=None, help="outputs go to <output-dir>/<run-name>/ (default: the model)")
    parser.add_argument("--output-dir", default="outputs", help="root folder of the outputs (default: outputs)")
    parser.add_argument("--no-notebook", action="store_true",
                        help="run the steps in this process instead of the notebooks (no report.html)")
    parser.add_argument("--no-html", action="store_true", help="skip the HTML reports")
    parser.add_argument("--serve", action="store_true", help="start the embedded model first (${EVEKIT_SERVER_URL})")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="notebooks at the same time (default 1)")
    parser.add_argument("--track", choices=("mlflow", "wandb"), default=None,
                        help="log every run to MLflow or W&B (offline), as `evekit run --track` (needs "
                             "pip install 'evekit[tracking]'); --set tracking=... for the other fields")


def main_eval(args: argparse.Namespace) -> int:
    """`evekit eval`: print the metrics table and the folders; exit 0 only when every run passed."""
    import sys

    from evekit.scaffold import parse_judge

    try:
        if args.jobs < 1:
            raise ParameterError(f"--jobs {args.jobs}: must be at least 1")
        params: dict[str, Any] = {}
        for item in args.set:
            name, sep, text = item.partition("=")
            if not sep or not name.strip():
                raise ParameterError(f"--set {item!r}: expected PARAM=VALUE, e.g. --set max_tokens=256")
            params[name.strip()] = _value(text)
        for flag, name in (("dataset", "dataset"), ("num_fewshot", "num_fewshot"), ("limit", "limit")):
            if getattr(args, flag) is not None:
                params[name] = getattr(args, flag)
        if getattr(args, "track", None):
            if "tracking" in params:
                raise ParameterError("--track and --set tracking=... both name the tracker; give one")
            params["tracking"] = args.track
        judges = [parse_judge(j, args.judge_key_env or args.api_key_env) for j in args.judge]
        results = evaluate(args.model, args.base_url, tasks=args.task, api_key_env=args.api_key_env, judges=judges,
                           notebook=not args.no_notebook, html=not args.no_html, jobs=args.jobs, serve=args.serve,
                           run_name=args.run_name, output_dir=args.output_dir, **params)
    except EvekitError as exc:
        print(f"evekit eval: {exc}", file=sys.stderr)
        print("evekit eval: nothing was run", file=sys.stderr)
        return 2
    if len(results.metrics):
        print(results.metrics.to_string(index=False))
    for p in results.paths:
        print(f"-> {p}")
    return 0 if results.ok and results.paths else 1
