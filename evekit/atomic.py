"""Every output file is written whole or not at all: to a temporary name in the same folder, then
renamed over the old one (`os.replace`, atomic on one filesystem).

A crash, a kill or a full disk leaves the old file or the new one, never half of one, and never a
stray temporary file (it is removed when the write fails). A full disk (ENOSPC, or a quota) is one
`OutputError` naming the file, saying the earlier version was kept, and how much space is left.

    write_text_atomic(path, text)           # text files: CSV, JSON, HTML
    write_bytes_atomic(path, data)
    with atomic_path(path) as tmp:          # a library that wants a file name (matplotlib, papermill)
        fig.savefig(tmp, format="png")
    write_csv_atomic(table, path, **to_csv_kwargs)
    save_figure_atomic(fig, path, **savefig_kwargs)
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from evekit.errors import OutputError

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "write_csv_atomic", "save_figure_atomic", "figure_bytes",
           "is_disk_full", "remove_leftovers"]

_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def is_disk_full(exc: BaseException) -> bool:
    """True for the errors a full disk or an exhausted quota raises."""
    return isinstance(exc, OSError) and exc.errno in _FULL


def _free(folder: Path) -> str:
    try:
        return f"{shutil.disk_usage(folder).free:,} bytes free"
    except OSError:
        return "free space unknown"


def _disk_full(path: Path, exc: OSError) -> OutputError:
    kept = "its earlier version was kept" if path.exists() else "no earlier version existed; nothing was written"
    return OutputError(f"{path}: the disk is full ({exc.strerror or 'no space left'}; {_free(path.parent)} in "
                       f"{path.parent}): the file was not written, {kept}. Free some space and run again: "
                       "answers already received are in the call cache, so nothing is paid twice")


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary file name beside `path`; when the block ends without error it replaces `path`.
    On any error the temporary file is removed and `path` is left as it was; a full disk becomes
    `OutputError` naming `path`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        if is_disk_full(exc):
            raise _disk_full(path, exc) from exc
        raise
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp makes the file 0600; an output file gets the usual mode (umask applies).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc):
            raise _disk_full(path, exc) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` whole or not at all (see the module's docstring)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` (UTF-8) to `path` whole or not at all: a crash or a full disk leaves the old
    file or the new one, never half of one."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_csv_atomic(table: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """`table.to_csv(path, **kwargs)` (a pandas DataFrame), whole or not at all."""
    return write_text_atomic(path, table.to_csv(**kwargs))


def save_figure_atomic(fig: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """`fig.savefig(path, **kwargs)` (a matplotlib figure), whole or not at all: never a 0-byte PNG."""
    path = Path(path)
    kwargs.setdefault("format", path.suffix.lstrip(".") or "png")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **kwargs)
    return path


def figure_bytes(fig: Any, **kwargs: Any) -> bytes:
    """What `fig.savefig(file, **kwargs)` would write (a PNG unless `format` says otherwise), in
    memory: for a figure shown and saved from one rendering (`plots.show`)."""
    import io

    kwargs.setdefault("format", "png")
    buffer = io.BytesIO()
    fig.savefig(buffer, **kwargs)
    return buffer.getvalue()


_LEFTOVER = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp")


def remove_leftovers(folder: str | os.PathLike[str]) -> int:
    """Delete the temporary files of writes a kill cut short (`.<name>.XXXXXXXX.tmp`) under `folder`;
    only for a folder nobody else is writing (`evekit run` calls it holding the folder's lock).
    Returns how many were removed."""
    removed = 0
    for path in Path(folder).rglob(".*.tmp"):
        if _LEFTOVER.fullmatch(path.name) and path.is_file():
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
    return removed
