"""Copy params/demo/*.yaml to a folder with `${EVEKIT_SERVER_URL}` replaced by a given URL.

Used by the cached re-run benchmark: the demo's parameter files pointed at a server that is
already running (a stub or `evekit serve`), so `evekit run DEST/*.yaml` needs no `--serve` and
the time measured excludes the server start.

    python benchmarks/demo_params.py http://127.0.0.1:PORT/v1 /tmp/demo-params
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_demo_params(url: str, dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for f in sorted((ROOT / "params" / "demo").glob("*.yaml")):
        target = dest / f.name
        target.write_text(f.read_text().replace("${EVEKIT_SERVER_URL}", url))
        out.append(target)
    return out


if __name__ == "__main__":
    for p in write_demo_params(sys.argv[1], Path(sys.argv[2])):
        print(p)
