"""Loading datasets (local files as `datasets` reads them, hub ids through it) and validating rows."""
from __future__ import annotations

import json
from pathlib import Path

import datasets
import pandas as pd
import pytest

from evekit import data as D
from evekit.data import DataError
from evekit.paths import REPO_ROOT as ROOT
from evekit.tasks import load_items
from evekit.tasks import REFUSAL_ANSWER, TASKS, get_task


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "hf-cache"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def single_rows(n: int = 3) -> list[dict]:
    return [{"Question": f"Question {i}?", "Choices": ["10 m", "20 m", "60 m", "300 m"], "Answer": "ABCD"[i % 4]}
            for i in range(n)]


def multi_rows(n: int = 3) -> list[dict]:
    return [{"Question": f"Which bands {i}?", "Answers": ["A", "C"],
             "Choices": {"label": ["A", "B", "C", "D", "E"], "text": ["B2", "B5", "B4", "B9", "B10"]}}
            for i in range(n)]


HALLU_ANSWER = "Sentinel-2 acquires B2, B3, B4 and B5 at 10 m."


def hallu_rows() -> list[dict]:
    start = HALLU_ANSWER.index("B5")
    return [
        {"Question": "Which bands are at 10 m?", "Answer": HALLU_ANSWER,
         "Soft labels": [{"start": start, "end": start + 2, "text": "B5", "prob": 0.9}],
         "Hard labels": [[start, start + 2]], "is_hallucinated": True},
        {"Question": "Orbit?", "Answer": "About 786 km.", "Soft labels": [], "Hard labels": [],
         "is_hallucinated": False},
    ]


# ---------------------------------------------------------------------------------------------
# Loading: a local file read as datasets reads it (tests/test_local_reader.py), a hub id through datasets


def test_local_jsonl_is_read_without_datasets(tmp_path, cache, monkeypatch):
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append((a, k)))
    path = write_jsonl(tmp_path / "single.jsonl", single_rows(3))
    items = load_items("mcqa_single_answer", str(path), cache_dir=cache)
    assert calls == []
    assert [it.doc_id for it in items] == [0, 1, 2]
    assert [it.target for it in items] == ["A", "B", "C"]
    assert items[0].fields["labels"] == ["A", "B", "C", "D"]
    assert items[0].source == str(path.resolve()) and items[2].row == 2


def test_parquet_and_csv_load_the_same(tmp_path, cache):
    rows = multi_rows(2)
    pd.DataFrame(rows).to_parquet(tmp_path / "multi.parquet")
    csv_rows = [{**r, "Answers": json.dumps(r["Answers"]), "Choices": repr(r["Choices"])} for r in rows]
    pd.DataFrame(csv_rows).to_csv(tmp_path / "multi.csv", index=False)
    task = get_task("mcqa_multiple_answer")
    from_parquet = load_items(task, str(tmp_path / "multi.parquet"), cache_dir=cache)
    from_csv = load_items(task, str(tmp_path / "multi.csv"), cache_dir=cache)
    for items in (from_parquet, from_csv):
        assert [it.target for it in items] == ["A, C", "A, C"]
        assert items[0].fields["choices"] == ["B2", "B5", "B4", "B9", "B10"]
        assert items[0].fields["gold"] == ["A", "C"]


def test_column_names_match_case_insensitively(tmp_path, cache):
    rows = [{"question": "What is the revisit of Sentinel-2?", "choices": ["5 days", "16 days"], "answer": "a"}]
    items = load_items("mcqa_single_answer", str(write_jsonl(tmp_path / "lower.jsonl", rows)), cache_dir=cache)
    assert items[0].question == "What is the revisit of Sentinel-2?"
    assert items[0].target == "A"


def test_relative_path_from_cwd_then_repo_root(tmp_path, cache, monkeypatch):
    write_jsonl(tmp_path / "here.jsonl", single_rows(1))
    monkeypatch.chdir(tmp_path)
    assert len(load_items("mcqa_single_answer", "here.jsonl", cache_dir=cache)) == 1
    assert D.resolve_local("here.jsonl") == (tmp_path / "here.jsonl").resolve()
    # a path relative to the repository root works from anywhere (e.g. notebooks/)
    probe = ROOT / "pyproject.toml"
    assert D.resolve_local("pyproject.toml") == probe.resolve()


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match=r"not found \(tried"):
        load_items("open_ended", str(tmp_path / "nope.jsonl"))


def test_hub_id_is_not_mistaken_for_a_file():
    assert D.resolve_local("eve-esa/open-ended") is None


def test_limit_keeps_first_rows_but_validates_all(tmp_path, cache):
    rows = single_rows(5)
    path = write_jsonl(tmp_path / "s.jsonl", rows)
    items = load_items("mcqa_single_answer", str(path), limit=2, cache_dir=cache)
    assert [it.doc_id for it in items] == [0, 1]
    rows[4]["Answer"] = "Z"
    write_jsonl(path, rows)
    with pytest.raises(DataError, match="row 4"):
        load_items("mcqa_single_answer", str(path), limit=2, cache_dir=cache)


# ---------------------------------------------------------------------------------------------
# Hub errors


def test_unreachable_hub_says_so_and_shows_local_alternative(monkeypatch, cache):
    monkeypatch.setattr(D, "_hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(DataError) as err:
        load_items("open_ended", "eve-esa/open-ended", cache_dir=cache)
    msg = str(err.value)
    assert "cannot be reached" in msg and "HF_HUB_OFFLINE" in msg
    assert "dataset='data/open_ended.jsonl'" in msg


def test_hub_failure_when_reachable_is_wrapped(monkeypatch):
    monkeypatch.setattr(D, "_hub_reachable", lambda timeout=3.0: True)

    def boom(*args, **kwargs):
        raise FileNotFoundError("Dataset 'eve-esa/nope' doesn't exist on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", boom)
    with pytest.raises(DataError, match=r"eve-esa/nope.*doesn't exist.*local file"):
        load_items("open_ended", "eve-esa/nope")


def test_offline_env_is_honoured(monkeypatch):
    import huggingface_hub.constants as hfc

    monkeypatch.setattr(hfc, "HF_HUB_OFFLINE", True)
    assert D._hub_reachable() is False


# ---------------------------------------------------------------------------------------------
# Bad input: file, row (0-based) and column are named


def load_bad(tmp_path, cache, task: str, rows: list[dict]):
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_items(task, str(path), cache_dir=cache)
    return str(err.value), str(path.resolve())


def test_missing_column_names_file_row_column_and_lists_columns(tmp_path, cache):
    rows = [{"Questoin": "Misspelt?", "Answer": "Yes"}]
    msg, path = load_bad(tmp_path, cache, "open_ended", rows)
    assert path in msg
    assert "'Question'" in msg and "missing" in msg
    assert "row 0" in msg and "0-based" in msg
    assert "'Questoin'" in msg and "'Answer'" in msg  # the columns that do exist


def test_null_value_in_one_row(tmp_path, cache):
    rows = [{"Question": "Q1", "Answer": "A1"}, {"Question": "Q2", "Answer": None}]
    msg, path = load_bad(tmp_path, cache, "open_ended", rows)
    assert path in msg and "row 1 (0-based), column 'Answer'" in msg and "missing" in msg


@pytest.mark.parametrize(
    "task, change, column, words",
    [
        ("mcqa_single_answer", {"Choices": []}, "Choices", "no choices"),
        ("mcqa_single_answer", {"Answer": "E"}, "Answer", "not among the choices A-D"),
        ("mcqa_single_answer", {"Answer": "AB"}, "Answer", "not among the choices"),
        ("mcqa_single_answer", {"Question": "  "}, "Question", "empty"),
        ("mcqa_multiple_answer", {"Answers": []}, "Answers", "empty list"),
        ("mcqa_multiple_answer", {"Answers": ["A", "F"]}, "Answers", "'F' not among the choices A-E"),
        ("mcqa_multiple_answer", {"Choices": {"label": [], "text": []}}, "Choices", "no choices"),
        ("mcqa_multiple_answer", {"Choices": {"label": ["A", "B"], "text": ["x"]}}, "Choices", "2 labels but 1 texts"),
        # issue 24: one choice (chance 1.0) and two choices with one text (the second scored wrong)
        ("mcqa_single_answer", {"Choices": ["10 m"], "Answer": "A"}, "Choices", "only one choice (A: '10 m')"),
        ("mcqa_single_answer", {"Choices": ["10 m", "20 m", "10 m", "60 m"]}, "Choices",
         "choices A and C have the same text '10 m'"),
        ("mcqa_single_answer", {"Choices": ["10 m", "20 m", " 10  M", "60 m"]}, "Choices", "choices A and C"),
        ("mcqa_single_answer", {"Choices": ["Ｂ4", "B4\u200b", "B8", "B2"]}, "Choices", "choices A and B"),
        ("mcqa_multiple_answer", {"Choices": {"label": ["A"], "text": ["B2"]}, "Answers": ["A"]}, "Choices",
         "only one choice"),
        ("mcqa_multiple_answer", {"Choices": {"label": ["A", "B", "C"], "text": ["B2", "B5", "B2"]}}, "Choices",
         "choices A and C have the same text 'B2'"),
    ],
)
def test_bad_mcqa_rows(tmp_path, cache, task, change, column, words):
    rows = single_rows(3) if task == "mcqa_single_answer" else multi_rows(3)
    rows[1].update(change)
    msg, path = load_bad(tmp_path, cache, task, rows)
    assert path in msg
    assert f"row 1 (0-based), column '{column}'" in msg
    assert words in msg
    assert "1 of 3 rows" in msg  # nothing half-loaded


@pytest.mark.parametrize(
    "column, value, words",
    [
        ("Hard labels", [[40, 60]], "outside the Answer text"),
        ("Hard labels", [[-1, 3]], "outside the Answer text"),
        ("Hard labels", [[5, 5]], "outside the Answer text"),
        ("Hard labels", [[1, 2, 3]], "expected [start, end]"),
        ("Soft labels", [{"start": 0, "end": 999, "text": "x", "prob": 0.5}], "outside the Answer text"),
        ("Soft labels", [{"start": 0, "end": 3, "text": "x", "prob": 1.5}], "outside [0, 1]"),
        ("is_hallucinated", "maybe", "expected true/false"),
    ],
)
def test_bad_hallucination_rows(tmp_path, cache, column, value, words):
    rows = hallu_rows()
    rows[0][column] = value
    if column == "is_hallucinated":  # keep the column type consistent across rows for the JSON reader
        rows[1][column] = "false"
    msg, path = load_bad(tmp_path, cache, "hallucination_detection", rows)
    assert f"row 0 (0-based), column '{column}'" in msg
    assert words in msg


def test_hallucination_spans_and_offsets_kept(tmp_path, cache):
    rows = hallu_rows()
    rows[1]["Answer"] = "  About 786 km."  # leading spaces: offsets must not shift
    rows[1]["Hard labels"] = [[8, 14]]
    items = load_items("hallucination_detection", str(write_jsonl(tmp_path / "h.jsonl", rows)), cache_dir=cache)
    start = HALLU_ANSWER.index("B5")
    assert items[0].fields["hard_labels"] == [[start, start + 2]]
    assert items[0].fields["soft_labels"][0]["prob"] == 0.9
    assert items[0].target == "A" and items[1].target == "B"
    assert items[1].fields["answer"][8:14] == "786 km"


def test_csv_list_columns_are_parsed(tmp_path, cache):
    start = HALLU_ANSWER.index("B5")
    frame = pd.DataFrame([
        {"Question": "Which bands?", "Answer": HALLU_ANSWER, "Hard labels": f"[[{start}, {start + 2}]]",
         "Soft labels": f"[{{'start': {start}, 'end': {start + 2}, 'text': 'B5', 'prob': 1.0}}]",
         "is_hallucinated": "true"},
        {"Question": "Orbit?", "Answer": "786 km", "Hard labels": "[]", "Soft labels": "[]",
         "is_hallucinated": "false"},
    ])
    frame.to_csv(tmp_path / "h.csv", index=False)
    items = load_items("hallucination_detection", str(tmp_path / "h.csv"), cache_dir=cache)
    assert items[0].fields["hard_labels"] == [[start, start + 2]]
    assert items[0].fields["soft_labels"][0]["text"] == "B5"
    assert items[0].fields["is_hallucinated"] is True and items[1].fields["is_hallucinated"] is False

    single = pd.DataFrame([{"question": "Q?", "choices": "['10 m', '20 m']", "answer": "B"},
                           {"question": "Q2?", "choices": '["a", "b", "c"]', "answer": "c"}])
    single.to_csv(tmp_path / "s.csv", index=False)
    items = load_items("mcqa_single_answer", str(tmp_path / "s.csv"), cache_dir=cache)
    assert items[0].fields["choices"] == ["10 m", "20 m"] and items[1].target == "C"


def test_csv_unparseable_list_string_is_an_error(tmp_path, cache):
    pd.DataFrame([{"Question": "Q?", "Choices": "['10 m', '20 m'", "Answer": "A"}]).to_csv(
        tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError) as err:
        load_items("mcqa_single_answer", str(tmp_path / "bad.csv"), cache_dir=cache)
    msg = str(err.value)
    assert "bad.csv" in msg and "row 0 (0-based), column 'Choices'" in msg and "cannot parse" in msg


def test_many_bad_rows_show_the_first_few_and_the_count(tmp_path, cache):
    rows = single_rows(10)
    for r in rows:
        r["Answer"] = "Q"
    msg, _ = load_bad(tmp_path, cache, "mcqa_single_answer", rows)
    assert "10 of 10 rows" in msg
    assert "row 0 (0-based)" in msg and "row 4 (0-based)" in msg and "row 5 (0-based)" not in msg
    assert "and 5 more" in msg


def test_unreadable_file_names_the_file(tmp_path, cache):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"Question": "a", "Answer": "b"}\n{not json\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.jsonl, line 2, column 2: invalid JSON"):
        load_items("open_ended", str(path), cache_dir=cache)


def test_context_docs_null_when_absent(tmp_path, cache):
    rows = [
        {"Question": "Q1", "Answer": "A1", "Doc 1": "first", "Doc 2": "second", "Doc 3": None,
         "Source 1": "s1", "Source 2": "s2", "Source 3": None},
        {"Question": "Q2", "Answer": "A2", "Doc 1": "only", "Doc 2": "", "Doc 3": None,
         "Source 1": "s1", "Source 2": None, "Source 3": None},
    ]
    items = load_items("open_ended_w_context", str(write_jsonl(tmp_path / "c.jsonl", rows)), cache_dir=cache)
    assert items[0].fields["docs"] == ["first", "second"]
    assert items[0].fields["sources"] == ["s1", "s2"]
    assert items[1].fields["docs"] == ["only"]
    rows[1]["Doc 1"] = None
    msg, _ = load_bad(tmp_path, cache, "open_ended_w_context", rows)
    assert "row 1 (0-based), column 'Doc 1'" in msg and "no context document" in msg


def test_refusal_target_is_the_refusal_sentence(tmp_path, cache):
    rows = [{"question": "Launch mass of Sentinel-2B?", "Context": "The MSI samples 13 bands."}]
    items = load_items("refusal", str(write_jsonl(tmp_path / "r.jsonl", rows)), cache_dir=cache)
    assert items[0].target == REFUSAL_ANSWER
    assert items[0].fields["docs"] == ["The MSI samples 13 bands."]


# ---------------------------------------------------------------------------------------------
# The bundled sample set loads through the same code path


@pytest.mark.parametrize("task_name", list(TASKS))
def test_bundled_file_loads(task_name, cache):
    path = ROOT / "data" / f"{task_name}.jsonl"
    if not path.is_file():
        pytest.skip(f"bundled file data/{task_name}.jsonl not written yet")
    items = load_items(task_name, f"data/{task_name}.jsonl", cache_dir=cache)
    assert len(items) >= 10
    assert all(it.question and it.target for it in items)
    assert len({it.doc_id for it in items}) == len(items)


# -- files that cannot be read: the message names the file and the line, and keeps the cause ----------


def test_empty_file_says_so(tmp_path):
    for name in ("empty.jsonl", "empty.csv"):
        (tmp_path / name).write_text("\n")
        with pytest.raises(DataError, match=rf"{name}: the file is empty \(no rows\)"):
            load_items("open_ended", str(tmp_path / name))


def test_truncated_jsonl_line_names_line_and_column(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_text('{"Question": "Orbit of Sentinel-2?", "Answer": "sun-synchronous"}\n{"Question": "Band 8", "Ans')
    with pytest.raises(DataError, match=r"cut\.jsonl, line 2, column \d+: invalid JSON") as err:
        load_items("open_ended", str(path))
    assert err.value.__cause__ is not None  # the parser's own error is kept as the cause


def test_json_array_file_with_a_syntax_error_names_its_line(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text('[\n {"Question": "q", "Answer": "a"},\n {"Question": "q2" "Answer": "b"}\n]\n')
    with pytest.raises(DataError, match=r"rows\.json, line 3, column \d+: invalid JSON"):
        load_items("open_ended", str(path))


def test_latin1_bytes_name_file_line_and_the_fix(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("Question,Answer\nAlbedo of snow?,tr\xe8s haut\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.csv, line 2, column 19: not UTF-8 text \(byte 0xe8\).*iconv") as err:
        load_items("open_ended", str(path))
    assert isinstance(err.value.__cause__, UnicodeDecodeError)
