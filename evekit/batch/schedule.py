"""The order of a batch: phases, what each file waits for, and the runs side by side (`--jobs`).

Each kind has a phase (`RunKind.phase`: judge validation, tasks, comparisons, summary) so the later
ones find the earlier results; a file that names what it reads (`RunKind.reads`) starts as soon as
the runs that write those files are done, not when its whole phase before is.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from evekit.batch.kernels import stop_kernels
from evekit.batch.paramfiles import RunFile, notebook_name
from evekit.paths import resolve_path
from evekit.runs.registry import OWN_NOTEBOOK_PHASE, notebooks

__all__ = ["phase_of", "run_order", "phases", "endpoint_limits", "inputs_of", "Needs", "waits_for", "start_priority"]


def phase_of(run: RunFile | Path) -> int:
    """The file's phase: its kind's (a notebook of no kind runs with the tasks). A bare path is
    placed by its notebook's name."""
    kind = run.kind if isinstance(run, RunFile) else notebooks().get(notebook_name(run))
    return kind.phase if kind is not None else OWN_NOTEBOOK_PHASE


def run_order(files: list) -> list:
    """By phase; within a phase in the order given."""
    return sorted(files, key=phase_of)


def phases(files: list) -> list[list]:
    """The files of each phase that has any, in `run_order` (the scheduler itself starts files by
    `waits_for`)."""
    groups: dict[int, list] = {}
    for f in run_order(files):
        groups.setdefault(phase_of(f), []).append(f)
    return [groups[k] for k in sorted(groups)]


def endpoint_limits(files: list[RunFile]) -> dict[str, int]:
    """{endpoint: limit} over every run of the batch: the smallest `concurrency` any run sets for an
    endpoint (a judge's own `concurrency`, else its run's: `JudgeSpec.concurrency_in`). Offline runs
    send nothing and count for no endpoint; a base_url that is not an http(s) URL is left to the
    notebook to report."""
    from evekit.endpoints import endpoint_key, merge_limits
    from evekit.types import JudgeSpec

    pairs: list[tuple[str, int]] = []
    for f in files:
        run = f.injected
        concurrency = run.get("concurrency")
        if run.get("offline") or not isinstance(concurrency, int):
            continue
        urls = [(run.get("base_url"), concurrency)]
        for judge in run.get("judges") or []:
            try:
                spec = JudgeSpec.from_dict(judge)
            except (ValueError, TypeError):
                continue  # the notebook reports it
            urls.append((spec.base_url, spec.concurrency_in(concurrency)))
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


def inputs_of(run: RunFile) -> list[Path] | None:
    """The files a run reads that another run of the batch may write (`RunKind.reads`), as the
    notebook resolves them (`paths.resolve_path`); None: it reads every result of its run (the summary)."""
    named = run.reads()
    if named is None:
        return None
    paths = [Path(os.path.expandvars(p)).expanduser() for p in named if isinstance(p, str) and p]
    return [resolve_path(p) for p in paths]


class Needs:
    """What one file of a batch waits for: it may start once every file of an earlier phase
    (`earlier`) has finished, or sooner, once every file it reads (`inputs`) lies in a folder that
    a finished file of `earlier` wrote. A task that reads nothing (no `judge_validation`) waits for
    nothing; the summary (its kind reads everything) waits for everything before it."""

    def __init__(self, earlier: list[Path], inputs: list[Path] | None) -> None:
        self.earlier, self.inputs = earlier, inputs

    def met(self, finished: dict[Path, list[Path]]) -> bool:
        if all(e in finished for e in self.earlier):
            return True
        if not self.inputs:  # reads everything, or names nothing: only the whole earlier phase will do
            return False
        written = [d.resolve() for e in self.earlier for d in finished.get(e, [])]
        return all(any(p.resolve().is_relative_to(d) for d in written) for p in self.inputs)


def waits_for(files: list[RunFile]) -> dict[Path, Needs]:
    """`Needs` of every file of the batch (by path): the earlier phases, narrowed by what each file
    reads. A file that reads nothing another run writes waits for nothing."""
    needs: dict[Path, Needs] = {}
    for f in files:
        inputs = inputs_of(f)
        earlier = [g.path for g in files if phase_of(g) < phase_of(f)] if inputs is None or inputs else []
        needs[f.path] = Needs(earlier, inputs)
    return needs


def start_priority(f: RunFile) -> int:
    """Which of the files that may start goes first: judge validation, then a win rate or ranking
    (the summary waits for them), then the tasks in the given order."""
    phase = phase_of(f)
    return 0 if phase < OWN_NOTEBOOK_PHASE else 1 if phase > OWN_NOTEBOOK_PHASE else 2


def _run_scheduled(files: list[Path], needs: dict[Path, Needs], jobs: int,
                   run: Any, priority: dict[Path, int] | None = None) -> list[tuple[Path, bool, Path | None]]:
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
            for f in sorted((f for f in pending if needs[f].met(written)), key=lambda f: (priority or {}).get(f, 2)):
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

