"""Where things are: the repository root, how a relative path given by a user is resolved, and
the per-user cache folder.

Two rules, one for what is read and one for what is written:
- a file or folder that is read (a dataset, a task file, labels, an answer file) is taken from the
  working directory when it exists there, else from the evekit checkout (`resolve_path`), so the
  bundled `data/...` works from anywhere;
- what a run writes (output_dir, cache_dir) goes to the working directory (`output_path`), never
  into the installed package or the checkout, unless the working directory is inside the checkout
  (JupyterLab in `notebooks/`, `make demo`): then it is taken from the checkout's root, so a
  notebook and `evekit run` agree on where `outputs/` is;
- a call cache is where a run writes it, except a recording the checkout ships outside `outputs/`
  (the demo's), which is used in place from any working directory (`cache_path`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["REPO_ROOT", "resolve_path", "output_path", "cache_path", "display_path", "safe_name", "user_cache_dir"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def user_cache_dir() -> Path:
    """evekit's per-user cache folder: `${XDG_CACHE_HOME:-~/.cache}/evekit` (the embeddings cache,
    the embedded model's BF16 rewrite; scripts/build_llama_server.py keeps its binary there too)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evekit"


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """A path that is read: as given when absolute or present from the working directory, else from
    REPO_ROOT when it is there (bundled data), else where a run would write it (`output_path`): a
    file another run of the batch has yet to write."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    if (REPO_ROOT / p).exists():
        return REPO_ROOT / p
    return output_path(p)


def output_path(path: str | os.PathLike[str]) -> Path:
    """Where a run writes `path` (or finds what it wrote): as given when absolute; inside the evekit
    checkout, from its root; elsewhere, from the working directory."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    cwd = Path.cwd().resolve()
    return REPO_ROOT / p if cwd == REPO_ROOT or REPO_ROOT in cwd.parents else cwd / p


def cache_path(path: str | os.PathLike[str]) -> Path:
    """Where a call cache is (read and written): where a run writes (`output_path`), except a
    recording that ships in the checkout outside its `outputs/` folder (the demo's committed cache),
    which is used in place from any working directory: copying it would re-record nothing, and
    not finding it would call the model again."""
    p = Path(path).expanduser()
    written = output_path(p)
    bundled = REPO_ROOT / p
    if not p.is_absolute() and not written.exists() and bundled.exists() and p.parts[:1] != ("outputs",):
        return bundled
    return written


def display_path(path: Path) -> str:
    """`path` as a reader should see it: relative to the evekit checkout when inside it, else
    relative to the working directory when inside that (shorter and machine-independent)."""
    resolved = Path(path).resolve()
    for root in (REPO_ROOT, Path.cwd().resolve()):
        try:
            return str(resolved.relative_to(root))
        except ValueError:
            continue
    return str(path)


_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]*")


def safe_name(name: str) -> str:
    """`name` as one folder name that cannot leave its parent: a name that is already safe stays
    exactly as it is; `/` and `\\` become `__` (so `Org/Model-7B` reads `Org__Model-7B`), a run of
    other characters one `_` (a display name `model · run` reads `model_run`), and a leading dot
    (`..`, hidden files) gets a `_` in front."""
    name = str(name)
    if _SAFE.fullmatch(name) and name not in (".", ".."):
        return name
    safe = re.sub(r"[/\\]+", "__", re.sub(r"[^A-Za-z0-9._+=@/\\-]+", "_", name.strip()))
    if not safe or safe[0] in "._-":
        safe = "_" + safe
    return safe
