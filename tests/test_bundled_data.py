"""Schema and consistency checks for the bundled EO sample sets written by data-A.

The files must match EVE's Hugging Face schemas exactly, so that a user can swap the hub id for
the local path (and back) without any other change. Only json/stdlib + pytest are used.
"""
from __future__ import annotations

import json
import string
import sys
from collections import Counter
from pathlib import Path

import pytest

from evekit.paths import REPO_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonl_rows import read_jsonl  # noqa: E402

DATA = REPO_ROOT / "data"
SINGLE = DATA / "mcqa_single_answer.jsonl"
MULTI = DATA / "mcqa_multiple_answer.jsonl"
HALLU = DATA / "hallucination_detection.jsonl"


def load(path: Path) -> list[dict]:
    return read_jsonl(path)


def is_str_list(x) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) and v.strip() for v in x)


@pytest.fixture(scope="module")
def single() -> list[dict]:
    return load(SINGLE)


@pytest.fixture(scope="module")
def multi() -> list[dict]:
    return load(MULTI)


@pytest.fixture(scope="module")
def hallu() -> list[dict]:
    return load(HALLU)


@pytest.mark.parametrize("path", [SINGLE, MULTI, HALLU], ids=lambda p: p.name)
def test_enough_rows_and_unique_questions(path: Path) -> None:
    rows = load(path)
    assert len(rows) >= 40
    questions = [r["Question"].strip().lower() for r in rows]
    dupes = [q for q, c in Counter(questions).items() if c > 1]
    assert not dupes, f"{path.name}: duplicate questions {dupes}"


# ---------------------------------------------------------------- mcqa_single_answer
def test_single_schema(single: list[dict]) -> None:
    for i, r in enumerate(single):
        assert set(r) == {"Question", "Choices", "Answer"}, f"row {i}: columns {sorted(r)}"
        assert isinstance(r["Question"], str) and r["Question"].strip(), f"row {i}: Question"
        assert is_str_list(r["Choices"]) and len(r["Choices"]) >= 2, f"row {i}: Choices"
        assert len(set(r["Choices"])) == len(r["Choices"]), f"row {i}: repeated choice"
        assert isinstance(r["Answer"], str) and len(r["Answer"]) == 1, f"row {i}: Answer"
        labels = string.ascii_uppercase[: len(r["Choices"])]
        assert r["Answer"] in labels, f"row {i}: gold {r['Answer']!r} not among {labels}"


def test_single_gold_letters_balanced(single: list[dict]) -> None:
    gold = Counter(r["Answer"] for r in single)
    assert set("ABCD") <= set(gold), gold
    # roughly even over A-D: no letter more than twice as frequent as another
    assert max(gold[c] for c in "ABCD") <= 2 * min(gold[c] for c in "ABCD"), gold
    assert len({len(r["Choices"]) for r in single}) >= 3, "choice counts should vary"


# ---------------------------------------------------------------- mcqa_multiple_answer
def test_multi_schema(multi: list[dict]) -> None:
    for i, r in enumerate(multi):
        assert set(r) == {"Question", "Answers", "Choices"}, f"row {i}: columns {sorted(r)}"
        assert isinstance(r["Question"], str) and r["Question"].strip(), f"row {i}: Question"
        ch = r["Choices"]
        assert isinstance(ch, dict) and set(ch) == {"label", "text"}, f"row {i}: Choices"
        assert is_str_list(ch["label"]) and is_str_list(ch["text"]), f"row {i}: Choices types"
        assert len(ch["label"]) == len(ch["text"]) >= 2, f"row {i}: label/text lengths"
        assert ch["label"] == list(string.ascii_uppercase[: len(ch["label"])]), f"row {i}: labels"
        assert len(set(ch["text"])) == len(ch["text"]), f"row {i}: repeated choice"
        ans = r["Answers"]
        assert is_str_list(ans) and ans, f"row {i}: Answers"
        assert len(set(ans)) == len(ans), f"row {i}: repeated gold label"
        assert set(ans) <= set(ch["label"]), f"row {i}: gold {ans} not among {ch['label']}"
        assert len(ans) < len(ch["label"]), f"row {i}: every choice is correct"


def test_multi_varies(multi: list[dict]) -> None:
    n_choices = Counter(len(r["Choices"]["label"]) for r in multi)
    n_correct = Counter(len(r["Answers"]) for r in multi)
    assert len(n_choices) >= 3, n_choices
    assert len(n_correct) >= 3, n_correct
    assert 1 in n_correct, "some rows should have a single correct answer"
    assert any(k >= 3 for k in n_correct), "some rows should have 3+ correct answers"


# ---------------------------------------------------------------- hallucination_detection
def test_hallucination_schema_and_spans(hallu: list[dict]) -> None:
    cols = {"Question", "Answer", "Soft labels", "Hard labels", "is_hallucinated"}
    for i, r in enumerate(hallu):
        assert set(r) == cols, f"row {i}: columns {sorted(r)}"
        answer = r["Answer"]
        assert isinstance(r["Question"], str) and r["Question"].strip(), f"row {i}: Question"
        assert isinstance(answer, str) and answer.strip(), f"row {i}: Answer"
        assert isinstance(r["is_hallucinated"], bool), f"row {i}: is_hallucinated"
        hard, soft = r["Hard labels"], r["Soft labels"]
        assert isinstance(hard, list) and isinstance(soft, list), f"row {i}: label types"
        assert r["is_hallucinated"] == bool(hard), f"row {i}: is_hallucinated vs Hard labels"
        assert bool(soft) == bool(hard), f"row {i}: Soft labels vs Hard labels"
        prev_end = 0
        for span in hard:
            assert isinstance(span, list) and len(span) == 2, f"row {i}: hard span {span}"
            s, e = span
            assert type(s) is int and type(e) is int, f"row {i}: hard span {span} types"
            assert prev_end <= s < e <= len(answer), f"row {i}: hard span {span} out of order/bounds"
            text = answer[s:e]
            assert text and text == text.strip(), f"row {i}: hard span {span} = {text!r}"
            prev_end = e
        for lab in soft:
            assert isinstance(lab, dict) and set(lab) == {"start", "end", "text", "prob"}, f"row {i}: {lab}"
            s, e = lab["start"], lab["end"]
            assert type(s) is int and type(e) is int and 0 <= s < e <= len(answer), f"row {i}: {lab}"
            assert lab["text"] == answer[s:e], f"row {i}: soft text {lab['text']!r} != {answer[s:e]!r}"
            assert isinstance(lab["prob"], float) and 0.0 < lab["prob"] <= 1.0, f"row {i}: prob {lab}"
            # a soft span must overlap some hard span
            assert any(s < he and hs < e for hs, he in hard), f"row {i}: soft span {lab} overlaps no hard span"


def test_hallucinated_share(hallu: list[dict]) -> None:
    share = sum(r["is_hallucinated"] for r in hallu) / len(hallu)
    assert 0.4 <= share <= 0.6, share


def test_hallucination_generator_is_in_sync() -> None:
    """The committed JSONL must equal what data/tools/make_hallucination.py produces."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_hallucination", DATA / "tools" / "make_hallucination.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.make_rows() == load(HALLU)


def test_mcqa_generator_is_in_sync() -> None:
    """The committed MCQA JSONL files must equal what data/tools/make_mcqa.py produces."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_mcqa", DATA / "tools" / "make_mcqa.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.single_rows() == load(SINGLE)
    assert mod.multi_rows() == load(MULTI)
