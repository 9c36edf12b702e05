"""Record a real run of the embedded model and commit the notebooks with its outputs (for nbval).

    python scripts/record_notebooks.py

1. starts the embedded llama.cpp server and runs every notebook (judge_validation, the tasks, the
   five-shot open_ended, win_rate) with its default parameters but
   `offline=False`, so each model and judge call really happens and lands in the cache
   `tests/fixtures/recorded_cache/`;
   (plus the variants the tests replay: open_ended with five shots, the entity-tagging custom task,
   mcqa_single_answer with `scoring: both`);
2. exports that cache as the reviewable `tests/fixtures/recorded_cache/recorded.jsonl` (the folder is
   emptied first: parity.jsonl, the parity variants recorded before this script ran them, goes), copies the two
   open_ended sample files the win-rate notebook compares to `tests/fixtures/win_rate/` and the third one
   the ranking notebook ranks with them (zero-shot at temperature 0.7) to `tests/fixtures/ranking/`;
3. re-executes every notebook with its defaults (offline replay from that recording) and writes it
   back into notebooks/ with its outputs. `pytest --nbval notebooks/` then re-runs them and compares.

Run it on purpose, when a change is meant to alter the numbers. `--replay-only` skips the recording
and only re-executes the notebooks from the committed recording (after a change to a notebook's cells).
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import papermill as pm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: evekit from this checkout

from evekit.cache import export_cache  # noqa: E402
from evekit.paths import REPO_ROOT as ROOT  # noqa: E402
from evekit.server import EmbeddedServer  # noqa: E402
from evekit.tasks import TASKS as CATALOGUE  # noqa: E402

CACHE = ROOT / "tests" / "fixtures" / "recorded_cache"
WIN_RATE_FIXTURES = ROOT / "tests" / "fixtures" / "win_rate"
RANKING_FIXTURES = ROOT / "tests" / "fixtures" / "ranking"
TASKS = list(CATALOGUE)  # every task of the catalogue has a notebook
RECORDED = ROOT / "outputs" / "recorded"


def judges_at(url: str, notebook: Path) -> list[dict] | None:
    params = pm.inspect_notebook(str(notebook))
    if "judges" not in params:
        return None
    judges = eval(params["judges"]["default"])  # our own notebook's literal list
    return [{**j, "base_url": url} for j in judges]


def execute(name: str, out: Path, **parameters) -> None:
    print(f"executing {name} {sorted(parameters)}", flush=True)
    pm.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), parameters=parameters or None,
                        cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False)


def replay_all() -> None:
    """Re-execute every notebook with its defaults (offline replay) and keep the outputs in place."""
    shutil.rmtree(RECORDED, ignore_errors=True)
    # Alphabetical, as nbval runs them: summary reads what the notebooks before it wrote.
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        execute(path.stem, path)
    for leftover in CACHE.glob("cache.sqlite*"):
        leftover.unlink()


def main() -> int:
    if "--replay-only" in sys.argv:
        replay_all()
        return 0
    shutil.rmtree(CACHE, ignore_errors=True)
    shutil.rmtree(RECORDED, ignore_errors=True)
    CACHE.mkdir(parents=True)
    scratch = ROOT / "outputs" / "recording"
    scratch.mkdir(parents=True, exist_ok=True)
    with EmbeddedServer() as server:
        url = server.base_url
        # The demo judges measured against the bundled expert labels (judges nothing the others produce).
        nb = ROOT / "notebooks" / "judge_validation.ipynb"
        execute("judge_validation", scratch / "judge_validation.ipynb", offline=False, judges=judges_at(url, nb))
        for task in TASKS:
            nb = ROOT / "notebooks" / f"{task}.ipynb"
            extra = {"judges": j} if (j := judges_at(url, nb)) else {}
            execute(task, scratch / f"{task}.ipynb", offline=False, base_url=url, **extra)
        # The five-shot open_ended run that the win-rate notebook compares with the zero-shot one.
        nb = ROOT / "notebooks" / "open_ended.ipynb"
        execute("open_ended", scratch / "open_ended.5shot.ipynb", offline=False, base_url=url,
                judges=judges_at(url, nb), num_fewshot=5, run_name="recorded-5shot")
        # Task parity (tests/test_parity.py replays these): the entity-tagging example of the custom
        # task notebook, and mcqa_single_answer scored from first-token log-probabilities beside the text.
        execute("custom_task", scratch / "custom_task.eo_entities.ipynb", offline=False, base_url=url,
                task_file="params/examples/tasks/eo_entities.yaml", cache_dir=str(CACHE.relative_to(ROOT)),
                run_name="recorded-parity")
        execute("mcqa_single_answer", scratch / "mcqa_single_answer.logprobs.ipynb", offline=False, base_url=url,
                scoring="both", run_name="recorded-parity")
        # The third configuration the ranking notebook ranks (params/demo/open_ended.t07.yaml).
        execute("open_ended", scratch / "open_ended.t07.ipynb", offline=False, base_url=url,
                judges=judges_at(url, nb), temperature=0.7, run_name="recorded-t07")
        WIN_RATE_FIXTURES.mkdir(parents=True, exist_ok=True)
        RANKING_FIXTURES.mkdir(parents=True, exist_ok=True)
        for run, target in (("recorded", WIN_RATE_FIXTURES / "open_ended_0shot.csv"),
                            ("recorded-5shot", WIN_RATE_FIXTURES / "open_ended_5shot.csv"),
                            ("recorded-t07", RANKING_FIXTURES / "open_ended_t07.csv")):
            shutil.copy(ROOT / "outputs" / run / "smollm2-135m-instruct" / "open_ended" / "samples.csv", target)
        for name in ("win_rate", "ranking"):
            nb = ROOT / "notebooks" / f"{name}.ipynb"
            execute(name, scratch / f"{name}.ipynb", offline=False, judges=judges_at(url, nb))
    export_cache(CACHE, CACHE / "recorded.jsonl")
    for leftover in CACHE.glob("cache.sqlite*"):
        leftover.unlink()
    replay_all()
    print(f"recorded {sum(1 for _ in open(CACHE / 'recorded.jsonl'))} calls in {CACHE / 'recorded.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
