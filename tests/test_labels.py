"""Expert labelling sheets (evekit.labels): what a sheet holds and never holds, a reproducible and
provably random draw (stratified by group with equal inclusion chances), and a filled sheet's
checks, each error naming its line."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from evekit import correction as C
from evekit import labels as L
from evekit.errors import DataError, ParameterError

JUDGE_COLUMNS = ["judge_j1", "judge_j1_reasoning", "judge_j1_raw", "judge_j1_error", "judge_j1_method", "judge_voting"]


def task_run(tmp_path, n=40, *, groups=None, context=False, failed=(), name="run"):
    """A judged task run folder as TaskRun writes it (the columns of a real open_ended_w_context
    run): item i's verdict is i % 2, its rationale names it."""
    d = tmp_path / name
    d.mkdir()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        row = {"doc_id": i, "doc.Question": f"question {i}?", "target": f"reference {i}"}
        if context:
            row.update({"doc.Doc 1": f"doc {i}a", "doc.Doc 2": f"doc {i}b", "doc.Doc 3": ""})
        row.update({"filtered_resps": f"answer {i}" if i % 7 else "NA", "response": f"answer {i}", "reasoning": "",
                    "parsed": "", "unparsed": False, "unparsed_reason": "", "failed": i in failed, "error": "",
                    "finish_reason": "stop", "completion_tokens": 5, "truncated": False, "rougeL": rng.random()})
        if groups:
            row["group"] = groups[i]
        row.update({"judge_j1": float(i % 2), "judge_j1_reasoning": f"SECRET rationale {i}", "judge_j1_raw": "{}",
                    "judge_j1_error": "", "judge_j1_method": "json_schema", "judge_voting": float(i % 2)})
        rows.append(row)
    pd.DataFrame(rows).to_csv(d / "samples.csv", index=False)
    params = {"task": "open_ended", "group_by": "topic" if groups else None}
    (d / "results.json").write_text(json.dumps({"task": "open_ended", "params": params, "judges": ["j1"]}))
    return d


def winrate_run(tmp_path, n=10):
    d = tmp_path / "wr"
    d.mkdir()
    rows = [{"comparison": "a_vs_b", "judge": j, "qid": q, "order": 0, "question": f"q{q}?", "target": f"ref {q}",
             "model_a": "a", "model_b": "b", "answer_a": f"a says {q}", "answer_b": f"b says {q}",
             "winner_model": "model_a", "rationale": "SECRET", "failed": False}
            for q in range(n) for j in ("j1", "j2")]
    pd.DataFrame(rows).to_csv(d / "results.csv", index=False)
    (d / "metrics.json").write_text("{}")
    return d


def fill(sheet, labels):
    df = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    df["label"] = labels if not callable(labels) else [labels(i) for i in df["id"]]
    df.to_csv(sheet, index=False)
    return df


def test_sheet_holds_the_item_and_answer_never_the_verdicts(tmp_path):
    d = task_run(tmp_path, context=True)
    sheet = L.sample_sheet(d, 10, seed=1)
    assert sheet == d / "labels.csv"
    df = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    assert list(df.columns) == ["id", "question", "reference", "context", "answer", "label", "note"]
    assert (df["label"] == "").all() and len(df) == 10
    text = sheet.read_text()
    assert "SECRET" not in text and "judge" not in text
    row = df.iloc[0]
    i = int(row["id"])
    assert row["question"] == f"question {i}?" and row["reference"] == f"reference {i}"
    assert json.loads(row["context"]) == [f"doc {i}a", f"doc {i}b"]  # the validation schema's list of documents
    nas = df[df["id"].astype(int) % 7 == 0]
    assert (nas["answer"] == "NA").all()  # an answer "NA" stays text


def test_draw_is_reproducible_recorded_and_uniform(tmp_path):
    d = task_run(tmp_path, n=30, failed=(3, 4))
    a = L.sample_sheet(d, 8, seed=5, out=tmp_path / "a.csv")
    b = L.sample_sheet(d, 8, seed=5, out=tmp_path / "b.csv")
    c = L.sample_sheet(d, 8, seed=6, out=tmp_path / "c.csv")
    ids = lambda p: pd.read_csv(p, dtype=str)["id"].tolist()  # noqa: E731
    assert ids(a) == ids(b) != ids(c)
    record = json.loads(L.draw_path(a).read_text())
    assert record["ids"] == ids(a) and record["seed"] == 5 and record["n"] == 8 and record["items"] == 28
    assert len(record["source_sha256"]) == 64 and record["stratified_by"] is None
    assert not {"3", "4"} & set(ids(a))  # items whose generation failed are not drawn
    # uniform: over many seeds every item is drawn about n / N of the time
    items, *_ = L.run_items(d)
    counts = pd.Series(0, index=items["id"])
    for seed in range(700):
        counts[L.draw_ids(items, 8, seed)[0]] += 1
    assert counts.between(700 * 8 / 28 * 0.75, 700 * 8 / 28 * 1.25).all()
    with pytest.raises(ParameterError, match="between 1 and the 28 items"):
        L.sample_sheet(d, 29)


def test_draw_is_stratified_by_group_with_equal_inclusion_chances(tmp_path):
    groups = ["land"] * 25 + ["ocean"] * 10 + ["ice"] * 5
    d = task_run(tmp_path, groups=groups)
    sheet = L.sample_sheet(d, 8, seed=2)
    df = pd.read_csv(sheet, dtype=str)
    assert df["group"].value_counts().to_dict() == {"land": 5, "ocean": 2, "ice": 1}  # exact shares
    record = json.loads(L.draw_path(sheet).read_text())
    assert record["stratified_by"] == "topic"
    assert record["strata"] == {"ice": {"items": 5, "drawn": 1}, "land": {"items": 25, "drawn": 5},
                                "ocean": {"items": 10, "drawn": 2}}
    # fractional shares (n = 7: 4.375, 1.75, 0.875) are rounded at random so each item keeps 7/40
    items, *_ = L.run_items(d)
    hits = pd.Series(0.0, index=items["id"])
    for seed in range(1500):
        ids, strata = L.draw_ids(items, 7, seed, "topic")
        assert sum(s["drawn"] for s in strata.values()) == 7 and strata["land"]["drawn"] in (4, 5)
        hits[ids] += 1
    by_group = hits.groupby(np.array(groups)).mean() / 1500
    assert by_group.to_numpy() == pytest.approx([7 / 40] * 3, abs=0.015)


def test_a_filled_sheet_reads_back_and_corrects_the_score(tmp_path):
    d = task_run(tmp_path, n=60)
    sheet = L.sample_sheet(d, 20, seed=0)
    fill(sheet, lambda i: "1" if int(i) % 3 else "FAIL")
    got = L.read_sheet(sheet, d)
    assert list(got.columns) == ["id", "label", "score", "line"] and len(got) == 20
    assert got["line"].tolist() == list(range(2, 22)) and got.attrs["notes"] == []
    assert got.attrs["draw"]["seed"] == 0 and got.attrs["kind"] == "pointwise"
    assert set(got["label"]) <= {0, 1}
    verdicts = L.run_verdicts(d)
    assert verdicts.loc["7"] == 1.0 and len(verdicts) == 60
    r = C.corrected_score(verdicts, got.set_index("id")["score"])
    assert r["n_labels"] == 20 and r["n"] == 60
    with pytest.raises(DataError, match="no column 'judge_j9'; verdict columns: judge_j1, judge_voting"):
        L.run_verdicts(d, "judge_j9")


def test_every_bad_row_is_named(tmp_path):
    d = task_run(tmp_path, n=30)
    sheet = L.sample_sheet(d, 6, seed=3)
    df = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    drawn = df["id"].tolist()
    not_drawn = next(str(i) for i in range(30) if str(i) not in drawn)
    df["label"] = ["1", "yes", "", "0", "1", "0"]
    df.loc[3, "id"] = "999"
    df.loc[4, "id"] = not_drawn
    df = pd.concat([df, df.iloc[[0]]], ignore_index=True)  # line 8 repeats line 2
    df.loc[5, "question"] = "another question?"
    df.to_csv(sheet, index=False)
    with pytest.raises(DataError) as err:
        L.read_sheet(sheet, d)
    msg = str(err.value)
    assert "6 unusable row(s)" in msg
    assert f"line 3 (id {drawn[1]!r}): label must be 1 (PASS) or 0 (FAIL), got 'yes'" in msg
    assert f"line 4 (id {drawn[2]!r}): blank label" in msg
    assert "line 5 (id '999'): no item with this id" in msg
    assert f"line 6 (id {not_drawn!r}): not among the 6 items drawn" in msg
    assert f"line 7 (id {drawn[5]!r}): the question differs from the run's" in msg
    assert f"line 8 (id {drawn[0]!r}): the same id as line 2" in msg


def test_blank_labels_may_be_allowed_and_are_noted(tmp_path):
    d = task_run(tmp_path, n=30)
    sheet = L.sample_sheet(d, 5, seed=3)
    fill(sheet, ["1", "", "0", "1", ""])
    got = L.read_sheet(sheet, d, allow_blank=True)
    assert len(got) == 3 and "3 of the 5 items drawn are labelled" in got.attrs["notes"][0]


def test_a_tampered_draw_or_a_changed_run_is_refused(tmp_path):
    d = task_run(tmp_path, n=30)
    sheet = L.sample_sheet(d, 5, seed=3)
    fill(sheet, ["1"] * 5)
    rec = json.loads(L.draw_path(sheet).read_text())
    rec["ids"][0] = next(str(i) for i in range(30) if str(i) not in rec["ids"])  # a hand-picked item
    L.draw_path(sheet).write_text(json.dumps(rec))
    with pytest.raises(DataError, match="not the draw of n=5, seed=3"):
        L.read_sheet(sheet, d)
    L.draw_path(sheet).unlink()  # no record: read, with a note that randomness is not shown
    got = L.read_sheet(sheet, d)
    assert "no draw record" in got.attrs["notes"][0]


def test_pairwise_sheet_from_a_win_rate_comparison(tmp_path):
    d = winrate_run(tmp_path)
    sheet = L.sample_sheet(d, 4, seed=0)
    df = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    assert list(df.columns) == ["id", "question", "reference", "answer_a", "answer_b", "label", "note"]
    assert "SECRET" not in sheet.read_text() and len(df) == 4  # one row per question, not per judge
    fill(sheet, ["A", "b", "Tie", "B"])
    got = L.read_sheet(sheet, d)
    assert got["label"].tolist() == ["A", "B", "tie", "B"] and got["score"].tolist() == [1.0, 0.0, 0.5, 0.0]
    fill(sheet, ["A", "1", "tie", "B"])
    with pytest.raises(DataError, match="line 3 .*label must be A, B or tie"):
        L.read_sheet(sheet, d)


def test_folders_that_are_not_judged_runs(tmp_path):
    with pytest.raises(DataError, match="not a judged run folder"):
        L.sample_sheet(tmp_path, 3)
    d = task_run(tmp_path)
    s = pd.read_csv(d / "samples.csv").drop(columns=JUDGE_COLUMNS)
    s.to_csv(d / "samples.csv", index=False)
    with pytest.raises(DataError, match="no judge verdicts"):
        L.sample_sheet(d, 3)


def test_validation_counts_feed_rogan_gladen(tmp_path):
    d = tmp_path / "validation"
    d.mkdir()
    pd.DataFrame({"row": range(8), "label": [1, 1, 1, 1, 0, 0, 0, 0],
                  "judge_j1": [1, 1, 0, "", 0, 1, 0, 0], "judge_voting": [1, 1, 1, 1, 1, 1, 0, 0]}
                 ).to_csv(d / "verdicts.csv", index=False)
    (d / "results.json").write_text("{}")
    assert L.validation_counts(d / "results.json", "judge_j1") == {"sensitivity": (2, 3), "specificity": (3, 4)}
    counts = L.validation_counts(d)
    assert counts == {"sensitivity": (4, 4), "specificity": (2, 4)}
    r = C.rogan_gladen(np.ones(10), **counts)
    assert r["sensitivity"] == 1.0 and r["specificity"] == 0.5
    with pytest.raises(DataError, match="no column 'judge_j2'"):
        L.validation_counts(d, "judge_j2")
