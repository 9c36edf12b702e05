"""The embedded model's weights as llama-server loads them: the packaged Q4_1 GGUF rewritten with
BF16 weights (`evekit.weights.convert_to_bf16`, `evekit.server.served_model_path`)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize, quantize  # noqa: E402

from evekit import server  # noqa: E402
from evekit.tokenizer import read_metadata  # noqa: E402
from evekit.weights import convert_to_bf16  # noqa: E402

Q = gguf.GGMLQuantizationType
BF16_STEP = 2.0 ** -7  # BF16's gap between numbers in [1, 2) (7 stored fraction bits): rounding to nearest
# moves a value x by at most half a gap of its binade, i.e. by at most BF16_STEP / 2 * |x|


def write_q4_1_model(path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A small GGUF in the packaged model's layout: Q4_1 matrices, a Q8_0 embedding, F32 norms."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<|im_start|>", "a", "b", "ab"])
    writer.add_chat_template("{{ messages[0]['content'] }}")
    stored = {"blk.0.attn_q.weight": (Q.Q4_1, rng.normal(0, 0.05, (64, 128))),
              "blk.0.ffn_up.weight": (Q.Q4_1, rng.normal(0, 0.5, (32, 96))),
              "token_embd.weight": (Q.Q8_0, rng.normal(0, 1.0, (16, 64))),
              "blk.0.attn_norm.weight": (Q.F32, rng.normal(1, 0.1, (128,)))}
    values = {}
    for name, (kind, data) in stored.items():
        data = data.astype(np.float32)
        if kind == Q.F32:
            writer.add_tensor(name, data)
            values[name] = data
        else:
            packed = quantize(data, kind)
            writer.add_tensor(name, packed, raw_dtype=kind)
            values[name] = dequantize(packed, kind).reshape(data.shape)  # what the model computes with
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return values


def test_every_weight_stays_within_half_a_bf16_step_and_the_metadata_is_kept(tmp_path):
    source, target = tmp_path / "model.Q4_1.gguf", tmp_path / "cache" / "model.bf16.gguf"
    values = write_q4_1_model(source, np.random.default_rng(7))

    counts = convert_to_bf16(source, target)

    assert counts == {"converted": 3, "copied": 1}
    before, after = gguf.GGUFReader(str(source)), gguf.GGUFReader(str(target))
    assert [t.name for t in after.tensors] == [t.name for t in before.tensors]
    for old, new in zip(before.tensors, after.tensors):
        assert list(new.shape) == list(old.shape), new.name
        if old.tensor_type == Q.F32:
            assert new.tensor_type == Q.F32
            np.testing.assert_array_equal(np.asarray(new.data), np.asarray(old.data))
            continue
        assert new.tensor_type == Q.BF16, new.name
        weights = dequantize(new.data, Q.BF16).reshape(values[new.name].shape)
        exact = values[new.name]
        assert np.all(np.abs(weights - exact) <= BF16_STEP / 2 * np.abs(exact)), new.name
        assert np.array_equal(np.sign(weights), np.sign(exact))
    keys = {k for k in before.fields if not k.startswith("GGUF.")}
    assert keys == {k for k in after.fields if not k.startswith("GGUF.")}
    for key in keys - {"general.file_type"}:
        assert after.fields[key].contents() == before.fields[key].contents(), key
    assert after.fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_BF16
    # evekit's own reader (the tokenizer of `evekit plan`) reads the same metadata from both.
    assert {k: v for k, v in read_metadata(target).items() if k != "general.file_type"} == \
        {k: v for k, v in read_metadata(source).items() if k != "general.file_type"}


def test_a_rewrite_that_fails_half_way_leaves_no_file_behind(tmp_path, monkeypatch):
    source, target = tmp_path / "model.gguf", tmp_path / "cache" / "model.bf16.gguf"
    write_q4_1_model(source, np.random.default_rng(1))

    def disk_full(self, *args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", disk_full)
    with pytest.raises(OSError, match="No space left"):
        convert_to_bf16(source, target)
    assert list(target.parent.iterdir()) == []  # neither the target nor the partial file


@pytest.fixture
def packaged(tmp_path, monkeypatch):
    """A small Q4_1 model standing in for the packaged file, and an empty per-user model cache."""
    source = tmp_path / "site-packages" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    source.parent.mkdir()
    write_q4_1_model(source, np.random.default_rng(3))
    monkeypatch.delenv(server.MODEL_PATH_ENV, raising=False)
    monkeypatch.setenv("EVEKIT_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setattr(server, "default_model_path", lambda: source)
    return source


def test_the_server_loads_the_rewrite_made_once_per_file(packaged, tmp_path, monkeypatch):
    served = server.served_model_path()
    assert served.parent == tmp_path / "models" and served.name.startswith("SmolLM2-135M-Instruct.Q4_1.bf16-")
    assert gguf.GGUFReader(str(served)).tensors[0].tensor_type == Q.BF16
    stamp = served.stat().st_mtime_ns

    def must_not_run(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr("evekit.weights.convert_to_bf16", must_not_run)
    assert server.served_model_path() == served and served.stat().st_mtime_ns == stamp
    # Other bytes (another release of the package) get a rewrite of their own.
    packaged.write_bytes(packaged.read_bytes() + b"\0")
    monkeypatch.undo()
    monkeypatch.setenv("EVEKIT_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setattr(server, "default_model_path", lambda: packaged)
    assert server.served_model_path() != served


def test_a_model_the_user_names_is_served_as_it_is(packaged, tmp_path, monkeypatch):
    own = tmp_path / "mine.Q4_1.gguf"
    own.write_bytes(packaged.read_bytes())
    monkeypatch.setenv(server.MODEL_PATH_ENV, str(own))
    monkeypatch.setattr(server, "default_model_path", lambda: own)
    assert server.served_model_path() == own
    assert not (tmp_path / "models").exists()


def test_when_the_rewrite_fails_the_packaged_file_is_served_with_a_warning(packaged, monkeypatch):
    def fail(source, target):
        raise OSError("No space left on device")

    monkeypatch.setattr("evekit.weights.convert_to_bf16", fail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert server.served_model_path() == packaged
    assert any("No space left on device" in str(w.message) and "serving it as it is" in str(w.message)
               for w in caught)


@pytest.mark.integration
def test_the_embedded_server_runs_the_bf16_rewrite_of_the_packaged_model(embedded_server_process):
    loaded = embedded_server_process.process.args[embedded_server_process.process.args.index("--model") + 1]
    reader = gguf.GGUFReader(loaded)
    packaged = gguf.GGUFReader(str(server.default_model_path()))
    assert {t.tensor_type for t in reader.tensors} == {Q.F32, Q.BF16}
    assert [(t.name, list(t.shape)) for t in reader.tensors] == [(t.name, list(t.shape)) for t in packaged.tensors]
    # One whole matrix of the real model, checked weight by weight.
    old = next(t for t in packaged.tensors if t.name == "blk.0.attn_q.weight")
    new = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
    exact, weights = dequantize(old.data, old.tensor_type), dequantize(new.data, Q.BF16)
    assert np.all(np.abs(weights - exact) <= BF16_STEP / 2 * np.abs(exact))


def test_without_evekit_model_cache_the_rewrite_goes_to_the_user_cache(packaged, tmp_path, monkeypatch):
    from evekit import metrics

    monkeypatch.delenv("EVEKIT_MODEL_CACHE")
    monkeypatch.delenv(metrics.EMBEDDINGS_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert server.served_model_path().parent == tmp_path / "xdg" / "evekit" / "models"
    assert metrics._embeddings_cache_path() == tmp_path / "xdg" / "evekit" / "embeddings.sqlite"  # the same root
