"""Offline preparation: copy hub datasets to a local folder while online, use them air-gapped.

    evekit prepare [--dest DIR] [--dataset HUB_ID ...] [--no-eve]

saves every split of the six EVE datasets (and of each `--dataset`) as
`<dest>/<owner>__<name>/<split>.parquet`, plus the dataset's `eval.yaml` when its repository
has one, and records them in `<dest>/manifest.json`. A run with `offline=True` whose
`dataset` is a hub id then reads the prepared Parquet file instead (see `resolve_prepared`)
and opens no network connection. `dest` defaults to `$EVEKIT_PREPARED_DIR`, else
`data/prepared/` in the repository.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import threading
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from evekit.atomic import write_text_atomic
from evekit.data import LOCAL_FORMATS, REPO_ROOT, _quiet_datasets, resolve_local

__all__ = ["prepared_dir", "prepare", "read_manifest", "resolve_prepared", "prepared_eval_yaml", "EVE_DATASETS"]

MANIFEST = "manifest.json"
ENV_VAR = "EVEKIT_PREPARED_DIR"


def _eve_datasets() -> list[str]:
    from evekit.tasks import TASKS

    return [t.hub_id for t in TASKS.values()]


EVE_DATASETS = _eve_datasets()


def prepared_dir(dest: str | os.PathLike[str] | None = None) -> Path:
    """The prepared-data folder: `dest`, else $EVEKIT_PREPARED_DIR, else <repo>/data/prepared."""
    if dest is not None:
        return Path(dest).expanduser()
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else REPO_ROOT / "data" / "prepared"


def _folder(dataset: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", dataset.replace("/", "__")).strip("_")


def read_manifest(dest: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The manifest of the prepared folder ({"datasets": {}} when nothing was prepared)."""
    path = prepared_dir(dest) / MANIFEST
    if not path.is_file():
        return {"datasets": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def _load_all_splits(dataset: str) -> Any:
    """Every split of a hub dataset or local file, as a `datasets.DatasetDict` (online)."""
    import datasets

    local = resolve_local(dataset)
    if local is not None:
        return datasets.load_dataset(LOCAL_FORMATS[local.suffix.lower()], data_files={"train": str(local)})
    return datasets.load_dataset(dataset)


def _fetch_eval_yaml(dataset: str, folder: Path) -> Path | None:
    """The repository's eval.yaml (Inspect AI task file) copied into `folder`, or None."""
    if resolve_local(dataset) is not None:
        return None
    try:
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(dataset, "eval.yaml", repo_type="dataset"))
    except Exception:  # noqa: BLE001 - most datasets have none
        return None
    target = folder / "eval.yaml"
    shutil.copyfile(path, target)
    return target


HUB_URL = "https://huggingface.co"


def hub_endpoint() -> str:
    """The Hub the datasets come from: $HF_ENDPOINT, else huggingface.co."""
    return os.environ.get("HF_ENDPOINT") or HUB_URL


def hub_unreachable(url: str | None = None, timeout: float = 4.0) -> str | None:
    """Why the Hub cannot be reached (the host does not resolve, or no connection within
    `timeout` seconds), or None when it can. Checked first, so that a machine without network
    fails in seconds with that reason instead of after minutes of the hub client's retries."""
    url = url or hub_endpoint()
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)
    found: dict[str, Any] = {}

    def resolve() -> None:
        try:
            found["addresses"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            found["error"] = exc

    # getaddrinfo has no timeout of its own: a resolver that hangs is waited for `timeout` seconds.
    worker = threading.Thread(target=resolve, daemon=True)
    worker.start()
    worker.join(timeout)
    if "addresses" not in found:
        why = found.get("error") or f"no answer from the name resolver within {timeout:g} s"
        return f"the Hub host {host} does not resolve ({why})"
    errors = []
    for family, kind, proto, _, address in found["addresses"][:4]:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(timeout)
                sock.connect(address)
            return None
        except OSError as exc:
            errors.append(f"{address[0]}: {exc}")
    return f"no connection to the Hub at {host}:{port} ({'; '.join(errors)})"


def _needs_hub(datasets: Iterable[str]) -> bool:
    return any(resolve_local(d) is None for d in datasets)


def prepare(datasets: Iterable[str] = (), *, dest: str | os.PathLike[str] | None = None,
            include_eve: bool = True, loader: Callable[[str], Any] | None = None,
            fetch_eval_yaml: Callable[[str, Path], Path | None] | None = None,
            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Save every split of each dataset as Parquet under `dest` and update the manifest.

    `loader(dataset) -> DatasetDict` and `fetch_eval_yaml(dataset, folder)` default to the
    Hugging Face Hub (tests pass their own). A dataset that fails is reported in the manifest
    with its error and the others are still prepared. Returns the manifest.
    """
    root = prepared_dir(dest)
    root.mkdir(parents=True, exist_ok=True)
    loader = loader or _load_all_splits
    fetch_eval_yaml = fetch_eval_yaml or _fetch_eval_yaml
    wanted = list(dict.fromkeys([*(EVE_DATASETS if include_eve else []), *datasets]))
    manifest = read_manifest(root)
    manifest.setdefault("datasets", {})
    for dataset in wanted:
        folder = root / _folder(dataset)
        try:
            dd = loader(dataset)
            folder.mkdir(parents=True, exist_ok=True)
            splits = {}
            for split, ds in dd.items():
                file = folder / f"{split}.parquet"
                with _quiet_datasets():
                    ds.to_parquet(str(file))
                splits[split] = {"file": str(file.relative_to(root)), "rows": ds.num_rows,
                                 "columns": list(ds.column_names)}
            entry: dict[str, Any] = {"splits": splits}
            eval_yaml = fetch_eval_yaml(dataset, folder)
            if eval_yaml is not None:
                entry["eval_yaml"] = str(Path(eval_yaml).relative_to(root))
            log(f"prepared {dataset}: " + ", ".join(f"{s} ({v['rows']} rows)" for s, v in splits.items()))
        except Exception as exc:  # noqa: BLE001 - report it, prepare the others
            entry = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"FAILED {dataset}: {entry['error']}")
        entry["prepared_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        manifest["datasets"][dataset] = entry
    write_text_atomic(root / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def resolve_prepared(dataset: str, split: str = "train",
                     dest: str | os.PathLike[str] | None = None) -> Path | None:
    """The prepared Parquet file of `dataset`'s `split`, or None when there is none."""
    root = prepared_dir(dest)
    entry = read_manifest(root)["datasets"].get(str(dataset), {})
    info = entry.get("splits", {}).get(split)
    if not info:
        return None
    path = root / info["file"]
    return path if path.is_file() else None


def prepared_eval_yaml(dataset: str, dest: str | os.PathLike[str] | None = None) -> Path | None:
    """The prepared copy of `dataset`'s eval.yaml, or None."""
    root = prepared_dir(dest)
    rel = read_manifest(root)["datasets"].get(str(dataset), {}).get("eval_yaml")
    return (root / rel) if rel and (root / rel).is_file() else None


def main(dest: str | None, datasets: list[str], include_eve: bool) -> int:
    """`evekit prepare`: exit code 1 when any dataset failed, 2 when the Hub cannot be reached."""
    wanted = [*(EVE_DATASETS if include_eve else []), *datasets]
    if _needs_hub(wanted):
        problem = hub_unreachable()
        if problem:
            print(f"evekit prepare: {problem}. Nothing was downloaded. `evekit prepare` needs network "
                  f"access to {hub_endpoint()} (set HF_ENDPOINT for a mirror); run it on a machine that "
                  "is online and copy the prepared folder over.", file=sys.stderr)
            return 2
    manifest = prepare(datasets, dest=dest, include_eve=include_eve)
    failed = [d for d in wanted if "error" in manifest["datasets"].get(d, {})]
    root = prepared_dir(dest)
    print(f"manifest: {root / MANIFEST}")
    if failed:
        print(f"{len(failed)} dataset(s) failed: {', '.join(failed)}")
        return 1
    return 0
