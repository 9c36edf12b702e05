"""The cosine metric's embeddings are kept on disk: a re-run loads neither torch nor the model."""
from __future__ import annotations

import numpy as np
import pytest

from evekit import metrics as M

HYP = ["Sentinel-2 carries a multispectral imager.", "Bananas are yellow.", "", "Sentinel-2 carries a multispectral imager."]
REF = ["The Sentinel-2 MSI acquires 13 bands.", "The Sentinel-2 MSI acquires 13 bands.", "x", "Landsat 8 has OLI."]


@pytest.mark.embeddings
def test_a_rerun_reads_the_embeddings_from_disk_and_gets_the_same_values(tmp_path, monkeypatch):
    if note := M.embeddings_unavailable():
        pytest.skip(f"embeddings extra not installed: {note}")
    monkeypatch.setenv(M.EMBEDDINGS_CACHE_ENV, "off")
    fresh = M.cosine_similarities(HYP, REF)
    monkeypatch.setenv(M.EMBEDDINGS_CACHE_ENV, str(tmp_path / "emb.sqlite"))
    first = M.cosine_similarities(HYP, REF)
    np.testing.assert_allclose(first, fresh, atol=1e-5)

    def no_model():
        raise AssertionError("the model was loaded although every text was cached")
    monkeypatch.setattr(M, "_embedding_model", no_model)
    again = M.cosine_similarities(HYP, REF)
    np.testing.assert_array_equal(again, first)
    with pytest.raises(AssertionError, match="model was loaded"):   # a new text does need the model
        M.cosine_similarities(["A text never seen before."], ["x"])


def test_an_unusable_cache_file_only_costs_time(tmp_path, monkeypatch):
    bad = tmp_path / "emb.sqlite"
    bad.write_text("not a database")
    monkeypatch.setenv(M.EMBEDDINGS_CACHE_ENV, str(bad))
    monkeypatch.setattr(M, "_embedding_model", lambda: type("Fake", (), {
        "encode": staticmethod(lambda texts, **k: np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3))})())
    vectors = M.embed(["a", "b", "a"])
    assert vectors.shape == (3, 3) and np.allclose((vectors ** 2).sum(axis=1), 1.0)
