"""The files of one task run: samples.csv, results.json, results.eee.jsonl, model_outputs.jsonl,
the plots and run.json."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from evekit import plots
from evekit.report import write_text_atomic
from evekit.runs.records import calls_outcome, write_run_record
from evekit.runs.task.kind import CUSTOM_NOTEBOOK, KIND
from evekit.runs.task.results import MODEL_OUTPUTS, to_eee, write_model_outputs

__all__ = ["write_run"]


def write_run(out_dir: Path, samples: pd.DataFrame, results: dict[str, Any], *, dataset: str,
              figures: dict[str, Any] | None = None, outputs: list[dict[str, Any]] | None = None) -> Path:
    """Write samples.csv, results.json, results.eee.jsonl, model_outputs.jsonl (when `outputs` is
    given: one record per item, `write_model_outputs`), the figures and run.json into `out_dir`.
    Each file is written whole or not at all; run.json comes last, so a folder without it is a run
    that did not finish."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "samples.csv", samples.to_csv(index=False))
    if outputs is not None:
        write_model_outputs(out_dir / MODEL_OUTPUTS, outputs)
    write_text_atomic(out_dir / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_text_atomic(out_dir / "results.eee.jsonl",
                      json.dumps(to_eee(results, dataset=dataset, samples=samples), ensure_ascii=False) + "\n")
    figures = figures or {}
    for name, fig in figures.items():
        plots.save_figure(fig, out_dir / name)
    params = results.get("params", {})
    # A custom task runs in notebooks/custom_task.ipynb; an EVE task in the notebook of its name.
    write_run_record(out_dir, kind=KIND, notebook=CUSTOM_NOTEBOOK if params.get("task_file") else results["task"],
                     run_name=str(params.get("run_name", out_dir.parent.parent.name)),
                     files=["samples.csv", "results.json", "results.eee.jsonl",
                            *([MODEL_OUTPUTS] if outputs is not None else []), *figures],
                     task=results["task"], model=results["model"], calls=_calls(samples, results))
    return out_dir


def _calls(samples: pd.DataFrame, results: dict[str, Any]) -> list[dict[str, Any]]:
    """run.json's `calls`: the model's calls, and the judges' on the items they were sent."""
    failed = samples["failed"].fillna(False).astype(bool) if "failed" in samples else pd.Series(False, samples.index)
    errors = samples["error"][failed] if "error" in samples else ()
    groups = [calls_outcome("model calls", len(samples), int(failed.sum()), errors)]
    judges = [j for j in results.get("judges") or [] if f"judge_{j}_error" in samples]
    if judges:
        sent = int((~failed).sum()) - int(results.get("n_judge_rule") or 0)
        judge_errors = [e for j in judges for e in samples.loc[~failed, f"judge_{j}_error"]]
        groups.append(calls_outcome("judge calls", sent * len(judges), errors=judge_errors))
    return groups
