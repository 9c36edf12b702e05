"""Compare two output trees cell by cell: every CSV cell and every JSON value (timestamps, wall
seconds and evekit's version aside), so a restructure can show that no recorded number moved.

    python scripts/compare_outputs.py BEFORE_DIR AFTER_DIR

Prints each difference (file, row/key, before, after), files only on one side, and a count; exits
1 when anything differs. Floats are equal within 1e-9 (relative).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

# Keys whose values are expected to differ between two executions.
VOLATILE = {"created", "seconds", "execution", "evekit_version", "timestamp", "retrieved_timestamp", "evaluation_timestamp",
            "output_dir", "written", "evaluation_id"}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _walk(a: Any, b: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k in VOLATILE:
                continue
            if k not in a or k not in b:
                yield f"{where}.{k}", a.get(k, "<absent>"), b.get(k, "<absent>")
            else:
                yield from _walk(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{where}[len]", len(a), len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _walk(x, y, f"{where}[{i}]")
    elif not _same(a, b):
        yield where, a, b


def _json_lines(path: Path) -> list[Any]:
    if path.suffix == ".json":
        return [json.loads(path.read_text())]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compare_file(a: Path, b: Path) -> list[tuple[str, Any, Any]]:
    if a.suffix in (".json", ".jsonl"):
        return list(_walk(_json_lines(a), _json_lines(b), ""))
    if a.suffix == ".csv":
        x, y = pd.read_csv(a), pd.read_csv(b)
        out = []
        for col in sorted(set(x.columns) ^ set(y.columns)):
            out.append((f"column {col}", col in x.columns, col in y.columns))
        if len(x) != len(y):
            out.append(("rows", len(x), len(y)))
        for col in [c for c in x.columns if c in y.columns and c not in VOLATILE]:
            for i, (u, v) in enumerate(zip(x[col], y[col])):
                if not (_same(u, v) or (pd.isna(u) and pd.isna(v))):
                    out.append((f"row {i} {col}", u, v))
        return out
    return []


def main(before: str, after: str) -> int:
    a_root, b_root = Path(before), Path(after)
    kinds = (".csv", ".json", ".jsonl")
    a_files = {p.relative_to(a_root) for p in a_root.rglob("*") if p.suffix in kinds}
    b_files = {p.relative_to(b_root) for p in b_root.rglob("*") if p.suffix in kinds}
    n = 0
    for rel in sorted(a_files ^ b_files):
        print(f"only in {'before' if rel in a_files else 'after'}: {rel}")
        n += 1
    compared = 0
    for rel in sorted(a_files & b_files):
        diffs = compare_file(a_root / rel, b_root / rel)
        compared += 1
        for where, u, v in diffs:
            print(f"{rel}: {where}: {u!r} -> {v!r}")
        n += len(diffs)
    print(f"{compared} files compared, {n} differences")
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
