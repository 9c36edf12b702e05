"""Where things are: the repository root, how a relative path given by a user is resolved, and
the per-user cache folder.

One rule everywhere (parameters, datasets, task files, batch runs): a relative path is taken
from the working directory when it exists there, else from the repository root. So
`papermill notebooks/x.ipynb ... -p dataset data/x.jsonl` works from the repository root, from
`notebooks/` and from anywhere else.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["REPO_ROOT", "resolve_path", "display_path", "safe_name", "user_cache_dir"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def user_cache_dir() -> Path:
    """evekit's per-user cache folder: `${XDG_CACHE_HOME:-~/.cache}/evekit` (the embeddings cache,
    the embedded model's BF16 rewrite; scripts/build_llama_server.py keeps its binary there too)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evekit"


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """`path` as given when absolute or present from the working directory, else from REPO_ROOT."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    return REPO_ROOT / p


def display_path(path: Path) -> str:
    """`path` relative to the repository root when inside it (shorter and machine-independent)."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]*")


def safe_name(name: str) -> str:
    """`name` as one folder name that cannot leave its parent: a name that is already safe stays
    exactly as it is; `/` and `\\` become `__` (so `Org/Model-7B` reads `Org__Model-7B`), other
    characters `_`, and a leading dot (`..`, hidden files) gets a `_` in front."""
    name = str(name)
    if _SAFE.fullmatch(name) and name not in (".", ".."):
        return name
    safe = re.sub(r"[^A-Za-z0-9._+=@-]", "_", re.sub(r"[/\\]+", "__", name.strip()))
    if not safe or safe[0] in "._-":
        safe = "_" + safe
    return safe
