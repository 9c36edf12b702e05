"""Metrics against hand-computed values."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from evekit import metrics as M
from evekit.tasks import get_task


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        ({"A", "C"}, {"A", "C"}, 1.0),
        ({"A"}, {"A", "C"}, 1 / 2),
        ({"A", "B"}, {"A", "C"}, 1 / 3),
        ({"A", "F"}, {"A", "B", "C"}, 1 / 4),  # a letter outside the choices is a wrong pick
        ({"D"}, {"A", "C"}, 0.0),
        (set(), {"A"}, 0.0),
    ],
)
def test_iou(pred, gold, expected):
    assert M.iou(pred, gold) == pytest.approx(expected)


def test_exact_match():
    assert M.exact_match(["C", "A"], ["A", "C"]) == 1.0
    assert M.exact_match(["A"], ["A", "C"]) == 0.0


def test_binary_prf_hand_computed():
    # pred: 1 1 1 0 0 0 ; gold: 1 0 1 1 0 0 -> tp=2, fp=1, fn=1
    pred = [1, 1, 1, 0, 0, 0]
    gold = [1, 0, 1, 1, 0, 0]
    p, r, f = M.binary_prf(pred, gold)
    assert p == pytest.approx(2 / 3)
    assert r == pytest.approx(2 / 3)
    assert f == pytest.approx(2 / 3)
    p, r, f = M.binary_prf([1, 0, 0, 0], [1, 1, 1, 0])  # tp=1 fp=0 fn=2
    assert (p, r) == (pytest.approx(1.0), pytest.approx(1 / 3))
    assert f == pytest.approx(2 * 1 * (1 / 3) / (1 + 1 / 3))


def test_binary_prf_zero_division_and_batch():
    p, r, f = M.binary_prf([0, 0], [1, 0])  # nothing predicted positive
    assert (float(p), float(r), float(f)) == (0.0, 0.0, 0.0)
    batch_p, batch_r, _ = M.binary_prf([[1, 0], [1, 1]], [[1, 0], [0, 1]], axis=-1)
    np.testing.assert_allclose(batch_p, [1.0, 0.5])
    np.testing.assert_allclose(batch_r, [1.0, 1.0])


def test_bleu_hand_computed():
    # hyp vs ref: clipped n-gram precisions 5/6, 3/5, 2/4, 1/3; equal length -> no brevity penalty
    hyp, ref = "the cat sat on the mat", "the cat sat on a mat"
    expected = (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert M.bleu(hyp, ref) == pytest.approx(expected, abs=1e-4)
    assert M.bleu(ref, ref) == pytest.approx(1.0)
    assert M.bleu("", ref) == 0.0


def test_rouge_l_hand_computed():
    # LCS("the cat sat on the mat", "the cat sat on a mat") = 5 tokens; P = R = 5/6
    assert M.rouge_l("the cat sat on the mat", "the cat sat on a mat") == pytest.approx(5 / 6)
    # LCS = 2 of hyp 2 tokens and ref 4 tokens: P=1, R=1/2, F=2/3
    assert M.rouge_l("cat mat", "the cat on mat") == pytest.approx(2 / 3)
    assert M.rouge_l("", "anything") == 0.0


def test_metric_notes_never_raise():
    open_ended, mcqa = get_task("open_ended"), get_task("mcqa_single_answer")
    notes = M.metric_notes(open_ended.metrics, judged=True)
    assert "bertscore" in notes and "offline" in notes["bertscore"]
    assert M.metric_notes(mcqa.metrics, judged=False) == {}
    if M.embeddings_unavailable():
        assert "evekit[embeddings]" in notes["cosine"]
    else:
        assert "cosine" not in notes


def test_cosine_without_extra_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sentence_transformers" else real(name, *a))
    note = M.embeddings_unavailable()
    assert note and "sentence-transformers" in note and "evekit[embeddings]" in note
    with pytest.raises(RuntimeError, match="embeddings"):
        M.cosine_similarities(["a"], ["b"])


@pytest.mark.embeddings
def test_cosine_similarity_with_offline_model():
    note = M.embeddings_unavailable()
    if note:
        pytest.skip(f"embeddings extra not installed: {note}")
    sims = M.cosine_similarities(
        ["Sentinel-2 carries a multispectral imager with 13 bands.", "Bananas are yellow.", "",
         "The satellite images the Earth."],
        ["The Sentinel-2 MSI acquires 13 spectral bands.", "The Sentinel-2 MSI acquires 13 spectral bands.",
         "anything", "The satellite images the Earth."],
    )
    assert sims.shape == (4,)
    assert sims[0] > sims[1] + 0.3  # related text is much closer than unrelated
    assert sims[2] == 0.0  # empty answers score 0
    assert math.isclose(sims[3], 1.0, abs_tol=1e-4)


def test_every_task_metric_is_registered_with_its_kind():
    from evekit.tasks import TASKS

    for task in TASKS.values():
        for name in task.metrics:
            assert M.get_metric(name).kind in ("proportion", "graded_mean", "corpus", "agreement")
    assert M.get_metric("acc").kind == "proportion" and M.get_metric("f1").kind == "corpus"
    assert M.get_metric("llm_as_judge_strict").inputs == ("judge_strict",)
    with pytest.raises(KeyError, match="unknown metric"):
        M.get_metric("no_such_metric")
    with pytest.raises(ValueError, match="already registered"):
        M.register_metric(M.Metric("acc", "proportion", "again"))
