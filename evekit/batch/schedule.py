"""The order of a batch: phases, what each file waits for, and the runs side by side (`--jobs`)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from evekit.batch.kernels import stop_kernels
from evekit.batch.paramfiles import load_params, notebook_defaults, notebook_name
from evekit.paths import REPO_ROOT

# The phase of each notebook that must wait for others (every other notebook is a task notebook,
# phase 1): judge validation first (a task may show its results), then the notebooks that read the
# task runs' samples, then the summary of everything. Notebooks of one phase are independent and
# may run at the same time (`--jobs`); a phase starts when the one before it has finished.
PHASES = {"judge_validation": 0, "win_rate": 2, "ranking": 2, "summary": 3}
TASK_PHASE = 1


def phase_of(params_file: Path) -> int:
    return PHASES.get(notebook_name(params_file), TASK_PHASE)


def run_order(files: list[Path]) -> list[Path]:
    """By phase (`PHASES`); within a phase in the order given."""
    return sorted(files, key=phase_of)


def phases(files: list[Path]) -> list[list[Path]]:
    """The files of each phase that has any, in `run_order` (the grouping `PHASES` makes; the
    scheduler itself starts files by `waits_for`)."""
    groups: dict[int, list[Path]] = {}
    for f in run_order(files):
        groups.setdefault(phase_of(f), []).append(f)
    return [groups[k] for k in sorted(groups)]



def endpoint_limits(files: list[Path], notebooks_dir: Path, server_url: str | None) -> dict[str, int]:
    """{endpoint: limit} over every run of the batch: the smallest `concurrency` any run sets for an
    endpoint (a judge entry's own `concurrency`, else its run's). Offline runs send nothing and
    count for no endpoint; a base_url that is not an http(s) URL is left to the notebook to report."""
    from evekit.endpoints import endpoint_key, merge_limits

    pairs: list[tuple[str, int]] = []
    for f in files:
        run = {**notebook_defaults(notebooks_dir / f"{notebook_name(f)}.ipynb"), **load_params(f, server_url)}
        concurrency = run.get("concurrency")
        if run.get("offline") or not isinstance(concurrency, int):
            continue
        urls = [(run.get("base_url"), concurrency)]
        for judge in run.get("judges") or []:
            if isinstance(judge, dict):
                urls.append((judge.get("base_url"), judge.get("concurrency") or concurrency))
        for url, limit in urls:
            if not isinstance(url, str) or not isinstance(limit, int) or limit < 1:
                continue
            url = os.path.expandvars(url)
            try:
                endpoint_key(url)
            except ValueError:
                continue
            pairs.append((url, limit))
    return merge_limits(pairs)



# Notebooks that read every result under the output folder, not files named in their parameters.
READS_EVERYTHING = {"summary"}


def inputs_of(run: dict[str, Any]) -> list[Path]:
    """The files a run reads that another run of the batch may write: its judge-validation results
    and its models' answer files (win rate, ranking), as the notebook (cwd: the repo) resolves them."""
    named = [run.get("judge_validation")] + [m.get("file") for m in run.get("models") or [] if isinstance(m, dict)]
    paths = [Path(os.path.expandvars(p)).expanduser() for p in named if isinstance(p, str) and p]
    return [p if p.is_absolute() else REPO_ROOT / p for p in paths]


class Needs:
    """What one file of a batch waits for: it may start once every file of an earlier phase
    (`earlier`) has finished, or sooner, once every file it reads (`inputs`) lies in a folder that
    a finished file of `earlier` wrote. A task that reads nothing (no `judge_validation`) waits for
    nothing; the summary (`READS_EVERYTHING`) waits for everything before it."""

    def __init__(self, earlier: list[Path], inputs: list[Path] | None) -> None:
        self.earlier, self.inputs = earlier, inputs

    def met(self, finished: dict[Path, list[Path]]) -> bool:
        if all(e in finished for e in self.earlier):
            return True
        if not self.inputs:  # reads everything, or names nothing: only the whole earlier phase will do
            return False
        written = [d.resolve() for e in self.earlier for d in finished.get(e, [])]
        return all(any(p.resolve().is_relative_to(d) for d in written) for p in self.inputs)


def waits_for(files: list[Path], nb_dir: Path, server_url: str | None) -> dict[Path, Needs]:
    """`Needs` of every file of the batch (`PHASES` order, narrowed by what each file reads)."""
    needs: dict[Path, Needs] = {}
    for f in files:
        name = notebook_name(f)
        earlier = [g for g in files if phase_of(g) < phase_of(f)]
        run = {**notebook_defaults(nb_dir / f"{name}.ipynb"), **load_params(f, server_url)}
        inputs = None if name in READS_EVERYTHING else inputs_of(run)
        if phase_of(f) == TASK_PHASE and not inputs:
            earlier = []  # a task reads nothing the batch writes
        needs[f] = Needs(earlier, inputs)
    return needs


def _start_priority(f: Path) -> int:
    phase = phase_of(f)
    return 0 if phase < TASK_PHASE else 1 if phase > TASK_PHASE else 2


def _run_scheduled(files: list[Path], needs: dict[Path, Needs], jobs: int,
                   run: Any) -> list[tuple[Path, bool, Path | None]]:
    """Run `files` (in `run_order`), `jobs` at a time, each once its `Needs` are met by the files
    finished so far (passed or not); results in the order of `files`. `run(file, prefix)` returns
    (passed, run folder, folders written).

    With more than one job each line a notebook's run prints starts with `[<file stem>] `.
    Threads suffice: each notebook's work happens in its own kernel process. An interrupt
    (Ctrl-C, SIGTERM) kills the running notebooks' kernels, so it does not wait for them.
    """
    if jobs == 1 or len(files) == 1:
        return [(f, *run(f, "")[:2]) for f in files]
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    width = max(len(f.stem) for f in files)
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(files)), thread_name_prefix="evekit-run")
    pending: list[Path] = list(files)
    running: dict[Any, Path] = {}
    done: dict[Path, tuple[bool, Path | None, list[Path]]] = {}
    try:
        while pending or running:
            written = {f: r[2] for f, r in done.items()}
            # What others wait for first: judge validation, then a win rate or ranking that may
            # start (the summary waits for them), then the tasks in the given order.
            for f in sorted((f for f in pending if needs[f].met(written)), key=_start_priority):
                if len(running) >= jobs:
                    break
                pending.remove(f)
                running[pool.submit(run, f, f"[{f.stem}]".ljust(width + 3))] = f
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done[running.pop(future)] = future.result()
        return [(f, *done[f][:2]) for f in files]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        n = stop_kernels()
        if n:
            print(f"evekit run: interrupted; stopped {n} running notebook kernel(s)", file=sys.stderr, flush=True)
        raise
    finally:
        pool.shutdown(wait=True)

