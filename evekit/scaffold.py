"""`evekit init`: a complete set of parameter files for one's own endpoint, with comments.

    evekit init --model M --base-url URL [--api-key-env NAME] [--judge NAME=MODEL@URL ...]
                [--baseline MODEL@URL] [--tasks T ...] [--sample] DIR

writes into DIR one file per task (`<task>.yaml`), a judge validation of the judges on the bundled
expert labels (when there are judges), with `--baseline` a second open_ended run and the win rate
of the model against it, and the summary; then prints the `evekit plan` and `evekit run` commands.
Every line carries its parameter's help as a comment, from the kind's declaration
(`evekit.runs.<kind>.params`), so the files explain themselves; values are checked by the same
parameter classes `evekit run` uses.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from evekit.atomic import write_text_atomic
from evekit.errors import ParameterError
from evekit.paths import REPO_ROOT, safe_name
from evekit.runs.params import files_checked
from evekit.runs.judge_validation.kind import KIND as VALIDATION
from evekit.runs.kind import RunKind
from evekit.runs.summary.kind import KIND as SUMMARY
from evekit.runs.task.kind import KIND as TASK
from evekit.runs.win_rate.kind import KIND as WIN_RATE
from evekit.tasks import TASKS, head_to_head_tasks

__all__ = ["parse_judge", "parse_model", "init_files", "main"]

_JUDGE = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-]*)=(?P<model>[^@\s]+)@(?P<url>\S+)")
_MODEL = re.compile(r"(?P<model>[^@\s]+)@(?P<url>\S+)")


def parse_judge(text: str, api_key_env: str | None = None) -> dict[str, Any]:
    """`NAME=MODEL@URL` as a judge entry (its key variable: `api_key_env`)."""
    m = _JUDGE.fullmatch(text.strip())
    if not m:
        raise ParameterError(f"--judge {text!r}: expected NAME=MODEL@URL, e.g. "
                             "gpt=gpt-4o-mini@https://api.openai.com/v1")
    return {"name": m["name"], "model": m["model"], "base_url": m["url"], "api_key_env": api_key_env}


def parse_model(text: str) -> tuple[str, str]:
    """`MODEL@URL` as (model, base_url)."""
    m = _MODEL.fullmatch(text.strip())
    if not m:
        raise ParameterError(f"{text!r}: expected MODEL@URL, e.g. qwen3-8b@http://localhost:8000/v1")
    return m["model"], m["url"]


def _yaml_lines(kind: RunKind, values: Mapping[str, Any], *, variant: str | None = None,
                header: str) -> str:
    """The file's text: the header, then each value with its parameter's help as a comment (values
    checked by the kind's parameters first)."""
    notebook = values.get("task") if kind is TASK and values.get("task") in TASKS else kind.notebooks[0]
    # The files named may be written by the runs before this one; the key variables may be set later.
    with files_checked(False, environment=False):
        kind.params.from_dict({**kind.implied(notebook, values), **values})  # refuse a bad file before writing it
    helps = {f.name: f.metadata.get("help", "") for f in kind.params.parameters(variant)}
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for name, value in values.items():
        text = yaml.safe_dump({name: value}, sort_keys=False, allow_unicode=True, width=200).rstrip()
        if "\n" in text:  # a list of entries: the comment goes above it
            lines += [f"# {name}: {helps.get(name, '')}", text]
        else:
            lines.append(f"{text}  # {helps[name]}" if helps.get(name) else text)
    return "\n".join(lines) + "\n"


def init_files(out: Path, *, model: str, base_url: str, api_key_env: str | None = None,
               judges: Sequence[dict[str, Any]] = (), baseline: tuple[str, str] | None = None,
               tasks: Sequence[str] | None = None, sample: bool = False, run_name: str | None = None,
               concurrency: int = 8) -> list[Path]:
    """Write the parameter files into `out` and return them (in the order `evekit run` runs them)."""
    tasks = list(tasks or TASKS)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ParameterError(f"--tasks: unknown task(s) {unknown}; tasks: {', '.join(TASKS)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run_name = run_name or safe_name(model)
    common = {"concurrency": concurrency, "cache_dir": "outputs/cache", "output_dir": "outputs"}
    judges = [dict(j) for j in judges]
    written = []

    def write(name: str, kind: RunKind, values: dict[str, Any], header: str, variant: str | None = None) -> None:
        path = out / name
        write_text_atomic(path, _yaml_lines(kind, values, variant=variant, header=header))
        written.append(path)

    if judges:
        write("judge_validation.yaml", VALIDATION,
              {"judge_kind": "fact_check", "judges": judges, "run_name": run_name, **common},
              "How far the judges agree with expert verdicts on the bundled labelled answers; the task\n"
              "reports show it beside the judges' scores.")
    validation = f"outputs/{run_name}/judge_validation/fact_check/results.json" if judges else None
    for task in tasks:
        spec = TASKS[task]
        values: dict[str, Any] = {"model_name": model, "base_url": base_url, "api_key_env": api_key_env,
                                  "dataset": str((REPO_ROOT / "data" / f"{task}.jsonl")) if sample else spec.hub_id,
                                  "limit": None}
        if spec.judge_kind:
            values["judges"] = judges
            if validation and spec.judge_kind == "fact_check":
                values["judge_validation"] = validation
        values.update(run_name=run_name, **common)
        write(f"{task}.yaml", TASK, values,
              f"{task}: {model} at {base_url}." + ("" if sample else
              f"\nThe rows come from the hub ({spec.hub_id}); offline, run `evekit prepare` first or set dataset to a local file."),
              variant="task")
    pairwise = [t for t in head_to_head_tasks() if t in tasks]
    if baseline and pairwise:
        task = pairwise[0]
        b_model, b_url = baseline
        b_run = safe_name(b_model)
        write(f"{task}.baseline.yaml", TASK,
              {"model_name": b_model, "base_url": b_url, "api_key_env": api_key_env,
               "dataset": str(REPO_ROOT / "data" / f"{task}.jsonl") if sample else TASKS[task].hub_id, "limit": None,
               "judges": judges, "run_name": b_run, **common},
              f"The baseline {b_model} on {task}, whose answers the win rate compares with {model}'s.", variant="task")
        if judges:
            write("win_rate.yaml", WIN_RATE,
                  {"task": task,
                   "model_a": [{"name": model, "file": f"outputs/{run_name}/{safe_name(model)}/{task}/samples.csv"}],
                   "model_b": [{"name": b_model, "file": f"outputs/{b_run}/{safe_name(b_model)}/{task}/samples.csv"}],
                   "judges": judges, "run_name": run_name, **common},
                  f"{model} against the baseline {b_model} on {task}, judged pairwise (both orders).")
    write("summary.yaml", SUMMARY,
          {"run_name": run_name, "compare_runs": [safe_name(baseline[0])] if baseline else [], "output_dir": "outputs"},
          "The leaderboard over every result of the run (and of the baseline's run).")
    return written


def main(args: Any) -> int:
    """`evekit init` (argparse namespace: dir, model, base_url, api_key_env, judge, baseline, tasks, sample)."""
    import sys

    try:
        judges = [parse_judge(j, args.judge_key_env or args.api_key_env) for j in args.judge or []]
        baseline = parse_model(args.baseline) if args.baseline else None
        files = init_files(Path(args.dir), model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                           judges=judges, baseline=baseline, tasks=args.tasks, sample=args.sample)
    except ParameterError as exc:
        print(f"evekit init: {exc}", file=sys.stderr)
        return 2
    folder = Path(args.dir)
    print(f"wrote {len(files)} parameter files to {folder}:")
    for f in files:
        print(f"  {f.name}")
    print("next:")
    print(f"  evekit plan {folder}/*.yaml     # calls, tokens and price per endpoint, nothing sent")
    print(f"  evekit run --jobs 2 {folder}/*.yaml     # the run; outputs go to ./outputs/")
    return 0
