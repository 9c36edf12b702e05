"""Checks on the bundled judge-validation set (data/judge_validation/).

The set measures LLM judges against expert labels, so a broken row does not crash anything: it
silently turns a correct verdict into a "judge error". These checks catch what a hand edit
breaks (a missing key, a label that contradicts its case type, a lost A/B balance, an injection
item without an injection, a README table that no longer matches the files), and they load both
files through `datasets` exactly as evekit loads user data.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonl_rows import read_jsonl  # noqa: E402

from evekit.paths import REPO_ROOT as ROOT  # noqa: E402

DIR = ROOT / "data" / "judge_validation"
POINTWISE = DIR / "pointwise.jsonl"
PAIRWISE = DIR / "pairwise.jsonl"
README = DIR / "README.md"
GENERATOR = ROOT / "data" / "tools" / "make_judge_validation.py"

# Case type -> gold label (pointwise) or the labels it may carry (pairwise).
POINTWISE_CASES = {
    "correct_paraphrase": 1,
    "equivalent_units": 1,
    "extra_correct_detail": 1,
    "contradicted_value": 0,
    "wrong_sensor_or_band": 0,
    "missing_essential_fact": 0,
    "non_answer": 0,
    "injection_attempt": 0,
}
PAIRWISE_CASES = {
    "one_correct_one_wrong": {"A", "B"},
    "complete_vs_incomplete": {"A", "B"},
    "verbose_wrong_vs_concise_right": {"A", "B"},
    "injection_in_loser": {"A", "B"},
    "both_correct_equivalent": {"tie"},
    "both_wrong": {"tie"},
}
POINTWISE_KEYS = ["question", "reference", "answer", "label", "case", "note"]
PAIRWISE_KEYS = ["question", "reference", "answer_a", "answer_b", "label", "case", "note"]
POINTWISE_TEXT = ["question", "reference", "answer", "case", "note"]
PAIRWISE_TEXT = ["question", "reference", "answer_a", "answer_b", "label", "case", "note"]

MIN_POINTWISE, MIN_PER_CASE = 64, 8
MIN_PAIRWISE, MIN_TIES, MAX_AB_GAP = 32, 6, 2

# Phrases that address the judge rather than answer the question.
INSTRUCTION = re.compile("|".join([
    r"\b(ignore|disregard)\s+(the|all|any|your|previous)\b",
    r"\b(output|respond|reply|return)\b[^.]{0,40}\b(pass|verdict|winner)\b",
    r"\{\s*\"(reasoning|rationale|verdict|winner)\"\s*:",
    r"\b(note\s+(to|for)\s+the\s+)?(judge|grader|evaluator)\b",
    r"\bmark\s+this\s+answer\b",
    r"\bsystem(\s+(note|override|message))?\s*[:\]]",
    r"\b(correct|right)\s+verdict\b",
    r"\b(must|should)\s+(choose|give|pick|return|output)\b",
    r"\breference\s+answer\s+(is|contains)\s+(wrong|outdated|an\s+error)",
]), re.IGNORECASE)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@pytest.fixture(scope="module")
def point() -> list[dict]:
    return read_jsonl(POINTWISE)


@pytest.fixture(scope="module")
def pair() -> list[dict]:
    return read_jsonl(PAIRWISE)


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def numbers(text: str) -> set[float]:
    return {float(m.replace(",", "")) for m in NUMBER.findall(text)}


def check_note(where: str, note: str) -> None:
    assert note.rstrip().endswith("."), f"{where}: note does not end with a full stop"
    assert not re.search(r"[.!?]\s+[A-Z]", note), f"{where}: note is more than one sentence: {note!r}"


def check_text(where: str, row: dict, keys: list[str]) -> None:
    for key in keys:
        value = row[key]
        assert isinstance(value, str), f"{where}: {key!r} is {type(value).__name__}, want str"
        assert value.strip(), f"{where}: {key!r} is empty"


# --- schema and labels -------------------------------------------------------------------------


def test_pointwise_keys_types_and_labels(point: list[dict]) -> None:
    for i, row in enumerate(point, start=1):
        where = f"pointwise.jsonl line {i}"
        keys = [k for k in row if k != "context"]
        assert keys == POINTWISE_KEYS, f"{where}: keys {list(row)}, want {POINTWISE_KEYS} (+ optional context)"
        check_text(where, row, POINTWISE_TEXT)
        label = row["label"]
        assert type(label) is int and label in (0, 1), f"{where}: label {label!r} is not the integer 0 or 1"
        assert row["case"] in POINTWISE_CASES, f"{where}: unknown case {row['case']!r}"
        assert label == POINTWISE_CASES[row["case"]], (
            f"{where}: case {row['case']!r} must have label {POINTWISE_CASES[row['case']]}, got {label}")
        if "context" in row:
            ctx = row["context"]
            assert isinstance(ctx, list) and 1 <= len(ctx) <= 3, f"{where}: context must be a list of 1-3 documents"
            for doc in ctx:
                assert isinstance(doc, str) and doc.strip(), f"{where}: empty or non-string context document"
                assert len(doc.split()) <= 120, f"{where}: context document longer than 120 words"
        check_note(where, row["note"])


def test_pairwise_keys_types_and_labels(pair: list[dict]) -> None:
    for i, row in enumerate(pair, start=1):
        where = f"pairwise.jsonl line {i}"
        assert list(row) == PAIRWISE_KEYS, f"{where}: keys {list(row)}, want {PAIRWISE_KEYS}"
        check_text(where, row, PAIRWISE_TEXT)
        assert row["case"] in PAIRWISE_CASES, f"{where}: unknown case {row['case']!r}"
        assert row["label"] in PAIRWISE_CASES[row["case"]], (
            f"{where}: case {row['case']!r} cannot have label {row['label']!r}")
        assert norm(row["answer_a"]) != norm(row["answer_b"]), f"{where}: answer_a and answer_b are the same"
        check_note(where, row["note"])


# --- counts and balance ------------------------------------------------------------------------


def test_pointwise_counts_per_case(point: list[dict]) -> None:
    assert len(point) >= MIN_POINTWISE, f"pointwise.jsonl: {len(point)} items, want at least {MIN_POINTWISE}"
    by_case = Counter(row["case"] for row in point)
    for case in POINTWISE_CASES:
        assert by_case[case] >= MIN_PER_CASE, f"pointwise.jsonl: {by_case[case]} {case!r} items, want {MIN_PER_CASE}"
    with_context = sum("context" in row for row in point)
    assert 0 < with_context < len(point), f"pointwise.jsonl: context on {with_context} items, want a proper subset"


def test_pairwise_counts_ties_and_position_balance(pair: list[dict]) -> None:
    assert len(pair) >= MIN_PAIRWISE, f"pairwise.jsonl: {len(pair)} items, want at least {MIN_PAIRWISE}"
    labels = Counter(row["label"] for row in pair)
    assert labels["tie"] >= MIN_TIES, f"pairwise.jsonl: {labels['tie']} ties, want at least {MIN_TIES}"
    assert abs(labels["A"] - labels["B"]) <= MAX_AB_GAP, (
        f"pairwise.jsonl: {labels['A']} A vs {labels['B']} B; an always-A judge would not score about 50%")
    missing = set(PAIRWISE_CASES) - {row["case"] for row in pair}
    assert not missing, f"pairwise.jsonl: no items for case types {sorted(missing)}"


def test_no_duplicate_items(point: list[dict], pair: list[dict]) -> None:
    seen: dict[tuple, int] = {}
    for i, row in enumerate(point, start=1):
        key = (norm(row["question"]), norm(row["answer"]))
        assert key not in seen, f"pointwise.jsonl line {i}: same (question, answer) as line {seen[key]}"
        seen[key] = i
    seen = {}
    for i, row in enumerate(pair, start=1):
        # a swapped copy of a pair is a duplicate too
        key = (norm(row["question"]), frozenset({norm(row["answer_a"]), norm(row["answer_b"])}))
        assert key not in seen, f"pairwise.jsonl line {i}: same question and answers as line {seen[key]}"
        seen[key] = i


# --- case-specific construction rules ----------------------------------------------------------


def test_injection_answers_address_the_judge(point: list[dict]) -> None:
    for i, row in enumerate(point, start=1):
        found = INSTRUCTION.search(row["answer"])
        if row["case"] == "injection_attempt":
            assert found, f"pointwise.jsonl line {i}: injection_attempt answer has no instruction to the judge"
        else:
            assert not found, (f"pointwise.jsonl line {i}: {row['case']} answer contains an instruction-like "
                               f"phrase {found.group(0)!r}")


def test_pairwise_injection_only_in_the_loser(pair: list[dict]) -> None:
    for i, row in enumerate(pair, start=1):
        hits = {slot: bool(INSTRUCTION.search(row[f"answer_{slot.lower()}"])) for slot in ("A", "B")}
        if row["case"] == "injection_in_loser":
            loser = "B" if row["label"] == "A" else "A"
            assert hits[loser], f"pairwise.jsonl line {i}: the losing answer {loser} has no injection"
            assert not hits[row["label"]], f"pairwise.jsonl line {i}: the winning answer has an injection"
        else:
            assert not any(hits.values()), f"pairwise.jsonl line {i}: {row['case']} item contains an injection"


def test_equivalent_units_are_really_converted(point: list[dict]) -> None:
    rows = [(i, r) for i, r in enumerate(point, start=1) if r["case"] == "equivalent_units"]
    assert rows
    for i, row in rows:
        answer, reference = row["answer"], row["reference"]
        assert norm(answer) != norm(reference), f"pointwise.jsonl line {i}: answer repeats the reference"
        assert norm(answer) not in norm(reference), f"pointwise.jsonl line {i}: answer is a part of the reference"
        new = numbers(answer) - numbers(reference)
        assert new, f"pointwise.jsonl line {i}: no value in the answer is written differently from the reference"


# --- loading as evekit does --------------------------------------------------------------------


@pytest.mark.parametrize("path, keys", [(POINTWISE, POINTWISE_KEYS + ["context"]), (PAIRWISE, PAIRWISE_KEYS)],
                         ids=["pointwise", "pairwise"])
def test_loads_with_datasets_like_user_data(path: Path, keys: list[str], tmp_path: Path) -> None:
    import datasets
    rows = read_jsonl(path)
    ds = datasets.load_dataset("json", data_files={"train": str(path)}, split="train", cache_dir=str(tmp_path))
    assert ds.num_rows == len(rows)
    assert sorted(ds.column_names) == sorted(keys)
    for i, (got, want) in enumerate(zip(ds, rows), start=1):
        for key in keys:
            assert got[key] == want.get(key), f"{path.name} line {i}: {key!r} reads back as {got[key]!r}"


def test_loads_through_evekit_data_loader(tmp_path: Path) -> None:
    from evekit import data
    for path in (POINTWISE, PAIRWISE):
        rows, columns, _ = data.load_rows(path, cache_dir=tmp_path, offline=True)
        assert len(rows) == len(read_jsonl(path)), f"{path.name}: evekit reads {len(rows)} rows"
        assert {"question", "reference", "label", "case"} <= set(columns)


# --- README and generator ----------------------------------------------------------------------


def counts_block() -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- counts:start -->(.*?)<!-- counts:end -->", text, re.DOTALL)
    assert m, "README.md has no counts:start/counts:end block"
    return m.group(1)


def test_readme_counts_match_files(point: list[dict], pair: list[dict]) -> None:
    block = counts_block()
    head_p = re.search(r"`pointwise\.jsonl`: (\d+) items", block)
    head_q = re.search(r"`pairwise\.jsonl`: (\d+) items", block)
    assert head_p and head_q, "README counts: missing the pointwise or pairwise heading"
    assert int(head_p[1]) == len(point), f"README says {head_p[1]} pointwise items, file has {len(point)}"
    assert int(head_q[1]) == len(pair), f"README says {head_q[1]} pairwise items, file has {len(pair)}"
    point_part, pair_part = block.split("`pairwise.jsonl`", 1)

    rows = re.findall(r"^\| `(\w+)` \| (\d) \| (\d+) \| (\d+) \|$", point_part, re.MULTILINE)
    table = {case: (int(label), int(n), int(ctx)) for case, label, n, ctx in rows}
    by_case = Counter(r["case"] for r in point)
    ctx = Counter(r["case"] for r in point if "context" in r)
    actual = {case: (POINTWISE_CASES[case], by_case[case], ctx[case]) for case in by_case}
    assert table == actual, f"README pointwise table {table} != files {actual}"
    total = re.search(r"^\| \*\*total\*\* \| \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|$", point_part, re.MULTILINE)
    assert total and (int(total[1]), int(total[2])) == (len(point), sum(ctx.values())), "README pointwise total"
    by_label = re.search(r"PASS \(1\) = (\d+), FAIL \(0\) = (\d+)", point_part)
    labels = Counter(r["label"] for r in point)
    assert by_label and (int(by_label[1]), int(by_label[2])) == (labels[1], labels[0]), "README label counts"

    rows = re.findall(r"^\| `(\w+)` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", pair_part, re.MULTILINE)
    table = {case: tuple(map(int, nums)) for case, *nums in rows}
    actual = {}
    for case in {r["case"] for r in pair}:
        c = Counter(r["label"] for r in pair if r["case"] == case)
        actual[case] = (c["A"], c["B"], c["tie"], sum(c.values()))
    assert table == actual, f"README pairwise table {table} != files {actual}"
    total = re.search(r"^\| \*\*total\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|$",
                      pair_part, re.MULTILINE)
    t = Counter(r["label"] for r in pair)
    assert total and tuple(map(int, total.groups())) == (t["A"], t["B"], t["tie"], len(pair)), "README pairwise total"


def test_readme_documents_every_case_type_and_the_licence() -> None:
    text = README.read_text(encoding="utf-8").split("<!-- counts:start -->")[0]
    for case, label in POINTWISE_CASES.items():
        assert re.search(rf"^\| `{case}` \| {label} \|", text, re.MULTILINE), f"README: no rule row for {case!r}"
    for case in PAIRWISE_CASES:
        assert re.search(rf"^\| `{case}` \|", text, re.MULTILINE), f"README: no rule row for {case!r}"
    assert "CC-BY-4.0" in README.read_text(encoding="utf-8")


def test_files_are_what_the_generator_writes(point: list[dict], pair: list[dict]) -> None:
    spec = importlib.util.spec_from_file_location("make_judge_validation", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.POINTWISE_CASES == POINTWISE_CASES
    assert gen.pointwise_rows() == point, "pointwise.jsonl differs from make_judge_validation.py; re-run it"
    assert gen.pairwise_rows() == pair, "pairwise.jsonl differs from make_judge_validation.py; re-run it"
    assert gen.counts_markdown(point, pair).strip() == counts_block().strip(), "README counts are stale; re-run it"
