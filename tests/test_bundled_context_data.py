"""Checks on the bundled open_ended, open_ended_w_context and refusal sample files.

These files are hand-edited JSON Lines in EVE's Hugging Face schemas; the checks catch the
mistakes a hand edit makes (a renamed column, a Doc 3 without a Doc 2, a duplicated question,
a README that no longer matches the files) before a notebook run trips over them.
Standard library only, so the checks run without the engine or `datasets`.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from evekit.paths import REPO_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonl_rows import read_jsonl  # noqa: E402

DATA = REPO_ROOT / "data"

DOC_COLUMNS = [f"Doc {i}" for i in (1, 2, 3)]
SOURCE_COLUMNS = [f"Source {i}" for i in (1, 2, 3)]
PATH_COLUMNS = [f"file_path_{i}" for i in (1, 2, 3)]
SCHEMAS = {
    "open_ended.jsonl": ["Question", "Answer"],
    "open_ended_w_context.jsonl": ["Question", "Answer", *DOC_COLUMNS, *SOURCE_COLUMNS, *PATH_COLUMNS],
    "refusal.jsonl": ["Question", "Context"],
}
# Only the slots of an absent document may be null; everything else must be a string.
NULLABLE = {"open_ended_w_context.jsonl": set(DOC_COLUMNS + SOURCE_COLUMNS + PATH_COLUMNS)}
MIN_ROWS = 40


def read_rows(name: str) -> list[dict]:
    return read_jsonl(DATA / name)


def present(value: object) -> bool:
    return isinstance(value, str) and value.strip() != ""


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_exact_columns_and_string_types(name: str) -> None:
    columns = SCHEMAS[name]
    nullable = NULLABLE.get(name, set())
    for lineno, row in enumerate(read_rows(name), start=1):
        assert list(row) == columns, f"{name} line {lineno}: columns {list(row)} != {columns}"
        for col in columns:
            value = row[col]
            if value is None:
                assert col in nullable, f"{name} line {lineno}, column {col!r}: null not allowed"
            else:
                assert isinstance(value, str), f"{name} line {lineno}, column {col!r}: {type(value).__name__}"
        assert present(row["Question"]), f"{name} line {lineno}: empty Question"
        if "Answer" in row:
            assert present(row["Answer"]), f"{name} line {lineno}: empty Answer"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_enough_rows_and_no_duplicate_questions(name: str) -> None:
    rows = read_rows(name)
    assert len(rows) >= MIN_ROWS, f"{name}: {len(rows)} rows, want at least {MIN_ROWS}"
    seen: dict[str, int] = {}
    for lineno, row in enumerate(rows, start=1):
        key = " ".join(row["Question"].lower().split())
        assert key not in seen, f"{name} line {lineno}: duplicates the question on line {seen[key]}"
        seen[key] = lineno


def test_context_docs_filled_in_order_with_sources() -> None:
    name = "open_ended_w_context.jsonl"
    counts = {1: 0, 2: 0, 3: 0}
    nulls = empties = 0
    for lineno, row in enumerate(read_rows(name), start=1):
        filled = [present(row[c]) for c in DOC_COLUMNS]
        n = sum(filled)
        assert n >= 1, f"{name} line {lineno}: no document"
        assert filled == [True] * n + [False] * (3 - n), f"{name} line {lineno}: docs not filled in order {filled}"
        counts[n] += 1
        for i in range(3):
            doc, src, path = DOC_COLUMNS[i], SOURCE_COLUMNS[i], PATH_COLUMNS[i]
            if filled[i]:
                assert present(row[src]) and present(row[path]), f"{name} line {lineno}: {doc} lacks {src}/{path}"
                words = len(row[doc].split())
                assert 60 <= words <= 150, f"{name} line {lineno}, column {doc!r}: {words} words, want 60-150"
            else:
                # an absent doc is absent in all three columns, and consistently "" or null
                slots = {row[doc], row[src], row[path]}
                assert slots in ({""}, {None}), f"{name} line {lineno}: absent {doc} has slots {slots}"
                nulls += row[doc] is None
                empties += row[doc] == ""
    assert all(counts.values()), f"{name}: need rows with 1, 2 and 3 docs, got {counts}"
    assert nulls and empties, f"{name}: absent docs should appear both as null ({nulls}) and as '' ({empties})"


def test_refusal_contexts_are_real_paragraphs() -> None:
    name = "refusal.jsonl"
    for lineno, row in enumerate(read_rows(name), start=1):
        context, question = row["Context"], row["Question"]
        assert present(context), f"{name} line {lineno}: empty Context"
        assert context.strip().lower() != question.strip().lower(), f"{name} line {lineno}: Context equals Question"
        assert question.strip() not in context, f"{name} line {lineno}: Context contains the Question"
        words = len(context.split())
        assert 60 <= words <= 150, f"{name} line {lineno}: Context has {words} words, want 60-150"


def test_readme_row_counts_match_files() -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    listed = {m[0]: int(m[1]) for m in re.findall(r"\|\s*`([\w.]+\.jsonl)`\s*\|[^|\n]*\|\s*(\d+)\s*\|", readme)}
    for name in SCHEMAS:
        assert name in listed, f"data/README.md does not list {name} with a row count"
    for name, count in listed.items():
        path = DATA / name
        assert path.exists(), f"data/README.md lists {name}, which does not exist"
        actual = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        assert actual == count, f"data/README.md says {name} has {count} rows, file has {actual}"
