"""The files of one task run: samples.csv, results.json, results.eee.jsonl, model_outputs.jsonl,
the plots and run.json."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from evekit.report import write_text_atomic
from evekit.runs.records import write_run_record
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
        fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
    params = results.get("params", {})
    # A custom task runs in notebooks/custom_task.ipynb; an EVE task in the notebook of its name.
    write_run_record(out_dir, kind=KIND, notebook=CUSTOM_NOTEBOOK if params.get("task_file") else results["task"],
                     run_name=str(params.get("run_name", out_dir.parent.parent.name)),
                     files=["samples.csv", "results.json", "results.eee.jsonl",
                            *([MODEL_OUTPUTS] if outputs is not None else []), *figures],
                     task=results["task"], model=results["model"])
    return out_dir
