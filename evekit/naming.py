"""One display name per configuration (a model run under a run name), chosen here and shown the same
on every page: the index, the summary, a task report's card, the win rate and the ranking.

A configuration is `<model> · <run>`: the model alone when the run adds nothing (no run name, or a
run name that is already part of the model's name). A win rate or ranking entry without a `name`
gets the name of the configuration that wrote its answers file (`entry_name`).
"""
from __future__ import annotations

import json
from pathlib import Path

from evekit.paths import safe_name

__all__ = ["SEPARATOR", "configuration_name", "entry_name"]

SEPARATOR = " \u00b7 "  # " · ", as the reports' titles join their parts
SAMPLES = "samples.csv"  # a task run's answers file: <output_dir>/<run>/<model>/<task>/samples.csv


def configuration_name(model: str, run_name: str | None) -> str:
    """'smollm2-135m-instruct · demo-5shot'; the model alone when `run_name` is empty or names the
    model: the whole name or its last part after - _ / . or : ('my-model-v2' run 'v2'), as written or made safe (`Org/Model` run `Org__Model`,
    the run name `evekit init` gives)."""
    model = str(model)
    run = "" if run_name is None else str(run_name).strip()
    if not run or run == "None" or _names_the_model(run, model):
        return model
    return f"{model}{SEPARATOR}{run}"


def _names_the_model(run: str, model: str) -> bool:
    # Whole parts only: run "t" must not vanish into "stub-model" (two runs would share one name).
    for name in (model, safe_name(model)):
        if run == name or any(name.endswith(sep + run) for sep in "-_/.:"):
            return True
    return False


def entry_name(path: str | Path) -> str:
    """The configuration name of the run that wrote the answers file `path`: its results.json's
    model and run name when the file lies beside one; else read off evekit's layout
    `<output_dir>/<run>/<model>/<task>/samples.csv` (the folders' names, made safe); else EVE's
    `<output_dir>/<model>/samples_<task>.csv` (the model's folder); else the file's stem."""
    path = Path(path)
    try:
        results = json.loads((path.parent / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        results = None
    if isinstance(results, dict) and results.get("model"):
        params = results.get("params") if isinstance(results.get("params"), dict) else {}
        run = params.get("run_name") or (path.parent.parent.parent.name if len(path.parents) > 3 else None)
        return configuration_name(str(results["model"]), run)
    if path.name == SAMPLES and len(path.parents) > 3:
        return configuration_name(path.parent.parent.name, path.parent.parent.parent.name)
    if path.stem.startswith("samples_") and path.parent.name:
        return path.parent.name
    return path.stem
