"""Reading a bundled JSONL file in the data tests: a bad line fails naming the file and line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


def read_jsonl(path: Path) -> list[dict]:
    """Every line of `path` as a JSON object; a blank, broken or non-object line fails the test."""
    rows = []
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            assert line.strip(), f"{Path(path).name} line {lineno}: blank line"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                pytest.fail(f"{Path(path).name} line {lineno}: invalid JSON ({exc})")
            assert isinstance(row, dict), f"{Path(path).name} line {lineno}: not a JSON object"
            rows.append(row)
    return rows
