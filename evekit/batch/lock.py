"""One `evekit run` at a time per run folder: an `flock` on `<run folder>/.evekit-run.lock`.

Two runs writing one folder would overwrite each other's run.json and index, and file one run's
report under `failed/`. The lock is taken before anything runs; a second `evekit run` on the same
folder is refused at once with the folder and the holder's pid. The kernel of a run dies with it,
and so does the lock (an `flock` ends with its process, even after kill -9): no stale lock ever
blocks the next run, and the file left behind (holding the last pid) means nothing by itself.

Inside one process the lock is counted, so `run_batch` can hold it while `run_one` asks again.
"""
from __future__ import annotations

import fcntl
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from evekit.errors import RunLockedError

__all__ = ["LOCK_FILE", "RunFolderLock", "locked_run_folders"]

LOCK_FILE = ".evekit-run.lock"

_held: dict[Path, tuple[int, int]] = {}  # folder -> (file descriptor, count) held by this process
_guard = threading.Lock()


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


class RunFolderLock:
    """The lock of one run folder (created if needed). `acquire()` raises RunLockedError when
    another process holds it; `release()` gives it back (the last release in this process
    closes the file, which ends the flock)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).resolve()

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def acquire(self) -> None:
        with _guard:
            if self.folder in _held:
                fd, count = _held[self.folder]
                _held[self.folder] = (fd, count + 1)
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _holder(fd)
                os.close(fd)
                raise RunLockedError(
                    f"{self.folder}: another evekit run ({who}) is writing this run folder; wait for it to "
                    "finish, or give this run another run_name or output_dir") from None
            except BaseException:
                os.close(fd)
                raise
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            except OSError:
                pass  # a full disk: the lock holds all the same, only the pid is not recorded
            _held[self.folder] = (fd, 1)

    def release(self) -> None:
        with _guard:
            fd, count = _held.get(self.folder, (-1, 0))
            if count > 1:
                _held[self.folder] = (fd, count - 1)
            elif count == 1:
                del _held[self.folder]
                os.close(fd)

    def __enter__(self) -> "RunFolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextmanager
def locked_run_folders(folders: Iterable[str | os.PathLike[str]]) -> Iterator[list[RunFolderLock]]:
    """Hold the locks of every folder (in sorted order, so two batches never wait on each other in
    a circle); RunLockedError, with none of them held, when another process has one."""
    locks = [RunFolderLock(f) for f in sorted({Path(f).resolve() for f in folders})]
    taken: list[RunFolderLock] = []
    try:
        for lock in locks:
            lock.acquire()
            taken.append(lock)
        yield locks
    finally:
        for lock in reversed(taken):
            lock.release()
