"""The direct reader of local files (`evekit.data._read_local`) gives exactly the rows of
`datasets.load_dataset`: values, Python types, key and column order, for every bundled data file
and the edge cases of type inference; files it does not read itself go to datasets (errors too);
and a task notebook reading a local file never imports `datasets`."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import pyarrow.json as paj
import pyarrow.parquet as pq
import pytest

from evekit import data as D
from evekit.data import DataError
from evekit.paths import REPO_ROOT as ROOT

# Every data file in the repository a run may read as rows (the 2 MB call recording is a cache, not a dataset).
SAMPLE_FILES = sorted(p for pattern in ("data/**/*.jsonl", "data/**/*.csv") for p in ROOT.glob(pattern))
OTHER_FILES = sorted(p for pattern in ("params/**/*.csv", "tests/fixtures/**/*.csv", "tests/fixtures/**/*.jsonl")
                     for p in ROOT.glob(pattern) if p.name != "recorded.jsonl")


def typed(value: Any) -> Any:
    """`value` with every type and key order made part of what `==` compares (1 != 1.0 != True)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))  # NaN equals NaN
    return (type(value).__name__, value)


def with_datasets(path: Path, tmp_path: Path) -> tuple[list[dict], list[str]]:
    ds = datasets.load_dataset(D.LOCAL_FORMATS[path.suffix.lower()], data_files={"train": str(path)},
                               split="train", cache_dir=str(tmp_path / "hf-cache"))
    return ds.to_list(), list(ds.column_names)


def assert_same_rows(path: Path, tmp_path: Path, *, direct: bool | None = True) -> None:
    """load_rows gives datasets' rows and columns; `direct`: whether the reader must (True) or must
    not (False) have read the file itself."""
    expected_rows, expected_columns = with_datasets(path, tmp_path)
    rows, columns, source = D.load_rows(str(path))
    assert source == str(path.resolve())
    assert columns == expected_columns
    assert typed(rows) == typed(expected_rows)
    if direct is not None:
        assert (D._read_local(path, D.LOCAL_FORMATS[path.suffix.lower()]) is not None) is direct


def test_the_repository_has_sample_files():
    assert len(SAMPLE_FILES) >= 10 and any(p.suffix == ".csv" for p in SAMPLE_FILES)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bundled_sample_reads_as_datasets_reads_it(path, tmp_path):
    assert_same_rows(path, tmp_path, direct=True)


@pytest.mark.parametrize("path", OTHER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_other_data_file_reads_as_datasets_reads_it(path, tmp_path):
    assert_same_rows(path, tmp_path, direct=None)


@pytest.mark.parametrize("path", [p for p in SAMPLE_FILES if p.suffix == ".jsonl"], ids=lambda p: p.name)
def test_parquet_copies_of_the_samples_read_as_datasets_reads_them(path, tmp_path):
    arrow = tmp_path / f"{path.stem}.arrow.parquet"
    pq.write_table(paj.read_json(path), arrow)
    frame = tmp_path / f"{path.stem}.pandas.parquet"  # with pandas' metadata
    pd.read_json(path, lines=True).to_parquet(frame)
    for copy in (arrow, frame):
        assert_same_rows(copy, tmp_path, direct=True)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# Each case: JSON Lines and whether the reader reads it itself (False: datasets does, e.g. JSON fields).
JSON_CASES = {
    "key missing from some rows, order of first appearance": (
        ['{"b": 1, "a": "x"}', '{"a": "y", "c": [1, 2]}', '{"c": null, "b": 3}'], True),
    "ints beside floats become floats": (['{"x": 1}', '{"x": 2.5}', '{"x": -3}'], True),
    "nested ints beside floats": (['{"s": [{"start": 0, "prob": 1}]}', '{"s": [{"start": 2, "prob": 0.5}]}'], True),
    "a column of nulls and empty lists": (['{"a": null, "l": []}', '{"a": null, "l": []}'], True),
    "strings, bools, unicode, escapes": (['{"t": "Sentinel-2 \\u00e9\\n\\"q\\"", "f": true}', '{"t": "", "f": false}'], True),
    "ISO dates become timestamps": (['{"d": "2024-01-31"}', '{"d": "2024-02-01 10:00:00"}'], True),
    "structs with the same keys": (['{"c": {"label": ["A"], "text": ["x"]}}', '{"c": {"label": ["B", "C"], "text": ["y", "z"]}}'], True),
    "large ints": (['{"n": 9007199254740993}', '{"n": -5}'], True),
    "structs with different keys": (['{"c": {"a": 1}}', '{"c": {"b": 2}}'], False),
    "text beside numbers": (['{"x": 1}', '{"x": "one"}'], False),
    "an object beside text": (['{"x": {"a": 1}}', '{"x": "a"}'], False),
    "an empty object": (['{"x": {}}', '{"x": {}}'], False),
    "a blank line": (['{"x": 1}', '', '{"x": 2}'], False),
    "a JSON array of rows": (['[{"x": 1},', '{"x": 2}]'], False),
}


@pytest.mark.parametrize("case", list(JSON_CASES))
def test_json_lines_edge_cases_read_as_datasets_reads_them(case, tmp_path):
    lines, direct = JSON_CASES[case]
    path = write_lines(tmp_path / "rows.jsonl", lines)
    assert_same_rows(path, tmp_path, direct=direct)


def test_a_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"Question": "q", "Answer": "a"}\n{"Question": "r", "Answer": "b"}\n')
    assert_same_rows(path, tmp_path, direct=True)
    assert D.load_rows(str(path))[1] == ["Question", "Answer"]


CSV_CASES = {
    "numbers, empty cells, quoted text": 'a,b,c,d\n1,2.5,"x, y",true\n3,,"line\nbreak",false\n,4,,true\n',
    "a list as text": 'Question,Choices,Answer\nq,"[""a"", ""b""]",A\n',
    "ints and text in one column": "a\n1\nx\n",
}


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_csv_edge_cases_read_as_datasets_reads_them(case, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(CSV_CASES[case], encoding="utf-8")
    assert_same_rows(path, tmp_path, direct=True)


def assert_same_error(path: Path) -> str:
    """load_rows fails on `path` with the very message datasets gives; returns it."""
    with pytest.raises(DataError) as expected:
        load_with_datasets_only(path)
    with pytest.raises(DataError) as err:
        D.load_rows(str(path))
    assert str(err.value) == str(expected.value)
    return str(err.value)


def test_a_csv_without_rows_fails_as_through_datasets(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text("a,b\n", encoding="utf-8")
    assert_same_error(path)


def test_a_long_csv_is_left_to_datasets(tmp_path):
    # datasets reads 10,000 rows at a time and casts each chunk to the first one's types
    path = tmp_path / "long.csv"
    path.write_text("a,b\n" + "".join(f"{i},t{i}\n" for i in range(10_001)), encoding="utf-8")
    assert_same_rows(path, tmp_path, direct=False)


def test_a_split_expression_is_left_to_datasets(tmp_path, monkeypatch):
    path = write_lines(tmp_path / "rows.jsonl", ['{"x": 1}'])
    monkeypatch.setattr(D, "_read_local", lambda *a: pytest.fail("read directly"))
    try:
        D.load_rows(str(path), split="train[:1]")
    except DataError:
        pass  # datasets' answer to a split slice in data_files, whatever it is


# -- malformed files: the same errors as through datasets, naming the file and the line ---------------

MALFORMED_JSON = {
    "a truncated line": (['{"Question": "a", "Answer": "b"}', '{"Question": "c", "Ans'], r"line 2, column \d+: invalid JSON"),
    "not JSON": (['{"Question": "a"}', '{"Question": "b"}', '{not json'], r"line 3, column 2: invalid JSON"),
    "a line that is not an object": (['{"Question": "a"}', '["Question", "b"]'], r"line 2: expected a JSON object"),
    "two objects on a line": (['{"Question": "a"} {"Question": "b"}', '{"Question": "c"}'], None),
}


def load_with_datasets_only(path: Path) -> Any:
    """What load_rows gave before the direct reader: the file through datasets."""
    return D._load_local_with_datasets(path.resolve(), D.LOCAL_FORMATS[path.suffix.lower()], "train", None)


@pytest.mark.parametrize("case", list(MALFORMED_JSON))
def test_malformed_json_lines_fail_as_through_datasets_naming_file_and_line(case, tmp_path):
    lines, message = MALFORMED_JSON[case]
    path = write_lines(tmp_path / "bad.jsonl", lines)
    try:
        expected = load_with_datasets_only(path)
    except DataError as exc:
        expected = exc
    if message is None:  # pyarrow reads what Python's parser refuses: the rows, as before
        assert not isinstance(expected, DataError)
        assert typed(D.load_rows(str(path))[:2]) == typed(expected[:2])
        return
    assert isinstance(expected, DataError)
    with pytest.raises(DataError) as err:
        D.load_rows(str(path))
    assert str(err.value) == str(expected)
    assert str(err.value).startswith(f"{path.resolve()}, line ")
    assert err.value.__cause__ is not None
    assert re.search(message, str(err.value))


def test_malformed_csv_fails_as_through_datasets_naming_the_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('a,b\n1,2\n3,4,5,6\n"unclosed\n', encoding="utf-8")
    message = assert_same_error(path)
    assert message.startswith(f"{path.resolve()}: cannot be read as csv")
    assert "line 3" in message


def test_a_file_that_is_not_parquet_fails_as_through_datasets(tmp_path):
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    assert assert_same_error(path).startswith(f"{path.resolve()}: cannot be read as parquet")


# -- no `datasets` in a notebook that reads a local file ---------------------------------------------

NO_DATASETS = """
import sys
from evekit.runs.task import TaskRun
from evekit.runs.judge_validation.run import ValidationRun
from evekit.data import load_rows
from evekit.tasks import TASKS, load_items
for name in TASKS:
    assert load_items(name, f"data/{name}.jsonl"), name
for path in ("data/judge_validation/pointwise.jsonl", "data/examples/eo_entities.csv"):
    assert load_rows(path)[0], path
print("datasets" in sys.modules)
"""


def test_reading_local_files_never_imports_datasets(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", NO_DATASETS], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]
