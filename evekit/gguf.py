"""A GGUF model's own tokenizer and chat template, read from the file's metadata, to count prompt
tokens as llama.cpp's `llama-server` does without loading the model (or llama.cpp at all).

`read_metadata` reads the key/values at the head of a GGUF file (magic, version, tensor count,
key/value count, then typed key/values) and stops before the tensor infos and data.

`GgufTokenizer` is llama.cpp's byte-level BPE (`tokenizer.ggml.model` = "gpt2") for the
pre-tokenizers listed in `PRE_TOKENIZERS`: the
special tokens (control, user-defined and unknown types) are cut out of the text first, longest
first, as the server does when it parses special tokens in a prompt; then the pre-tokenizer's
regex splits the rest into pieces; each piece's UTF-8 bytes are mapped to GPT-2's printable
characters and merged by the rank of `tokenizer.ggml.merges`. The chat template is rendered with jinja2 as the server applies it
(`add_generation_prompt=True`). Only the count is needed, so tokens are never looked up by id.

`convert_to_bf16` rewrites a GGUF with its quantized weights stored as BF16 (with PyPI's `gguf`,
llama.cpp's own GGUF library): the way llama-server evaluates prompts fastest on a CPU without a
repacked kernel for the file's quantization (`evekit.server.served_model_path`).
"""
from __future__ import annotations

import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Mapping, Sequence

__all__ = ["read_metadata", "GgufTokenizer", "PRE_TOKENIZERS", "convert_to_bf16"]

# tokenizer.ggml.pre -> llama.cpp's pre-tokenizer regexes (llama-vocab.cpp) as one regex whose
# matches cover the text. "smollm", the embedded model's, is llama.cpp's `\p{N}` split, then GPT-2's
# regex on each piece: digits one by one, and a space before a digit ends the piece before it (the
# lookahead `(?![^\s\p{N}])`). The last `\s+` takes what GPT-2's regex leaves (one whitespace before
# a word that is not a space), which llama.cpp keeps as a piece of its own. tests/test_gguf.py checks
# the one regex against the two, one after the other.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_DIGITS_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"
PRE_TOKENIZERS = {"smollm": _DIGITS_GPT2, "starcoder": _DIGITS_GPT2, "refact": _DIGITS_GPT2, "gpt-2": _GPT2}
# Token types of tokenizer.ggml.token_type that are cut out of the text as single tokens.
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The key/values of a GGUF file (versions 2 and 3); arrays come back as lists."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version, _tensors, count = struct.unpack("<IQQ", f.read(20))
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported (2 or 3 are)")
        return {_string(f): _value(f, _unpack(f, "I")) for _ in range(count)}


def _unpack(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    return f.read(_unpack(f, "Q")).decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item, n = _unpack(f, "I"), _unpack(f, "Q")
        if item in _SCALARS:  # read at once: token types are one per token
            fmt = _SCALARS[item]
            return list(struct.unpack(f"<{n}{fmt}", f.read(n * struct.calcsize(fmt))))
        return [_value(f, item) for _ in range(n)]
    if kind not in _SCALARS:
        raise ValueError(f"unknown GGUF value type {kind}")
    return _unpack(f, _SCALARS[kind])


def _byte_chars() -> list[str]:
    """GPT-2's byte -> printable character table (bytes_to_unicode)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b], extra = chr(256 + extra), extra + 1
    return [chars[b] for b in range(256)]


class GgufTokenizer:
    """Counts the tokens llama.cpp gives a prompt or a chat, from a GGUF file's metadata."""

    def __init__(self, path: str | Path) -> None:
        import jinja2.sandbox
        import regex

        meta = read_metadata(path)
        model, pre = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.pre", "default")
        if model != "gpt2" or pre not in PRE_TOKENIZERS:
            raise ValueError(f"{path}: tokenizer {model!r} with pre-tokenizer {pre!r} is not supported")
        tokens: list[str] = meta["tokenizer.ggml.tokens"]
        types = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        self.vocab = set(tokens)
        self.ranks = {tuple(m.split(" ", 1)): i for i, m in enumerate(meta.get("tokenizer.ggml.merges", ()))}
        self.special = sorted((t for t, k in zip(tokens, types) if k in (_UNKNOWN, _CONTROL, _USER_DEFINED) and t),
                              key=len, reverse=True)
        self.words = regex.compile(PRE_TOKENIZERS[pre]).findall
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
        self.add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
        self.bytes = _byte_chars()
        self.word_tokens = lru_cache(maxsize=1 << 16)(self._word_tokens)
        self.count_plain = lru_cache(maxsize=1 << 12)(self._count_plain)  # system prompts, few-shot turns
        token = lambda key: tokens[meta[key]] if meta.get(key) is not None else ""  # noqa: E731
        self.bos_token, self.eos_token = token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")
        template = meta.get("tokenizer.chat_template")
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        try:
            self.template = env.from_string(template) if template else None
        except jinja2.TemplateSyntaxError as exc:
            raise ValueError(f"{path}: its chat template does not parse ({exc})") from None

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The prompt text the chat template makes of `messages` (with the assistant's turn opened)."""
        if self.template is None:
            raise ValueError("the GGUF has no chat template")
        return self.template.render(messages=[dict(m) for m in messages], add_generation_prompt=True,
                                    bos_token=self.bos_token, eos_token=self.eos_token)

    def count_text(self, text: str, add_special: bool = True) -> int:
        """Tokens of `text`, special tokens parsed, with the BOS and EOS the model adds (`add_special`,
        as llama-server tokenizes a prompt)."""
        pieces: list[str | None] = [text]  # None: a special token, cut out
        for special in self.special:
            pieces = [part for piece in pieces
                      for part in ([piece] if piece is None or special not in piece else _cut(piece, special))]
        n = sum(self.count_plain(p) for p in pieces if p is not None) + pieces.count(None)
        return n + (self.add_bos + self.add_eos if add_special else 0)

    def _count_plain(self, text: str) -> int:
        """Tokens of a text without special tokens."""
        return sum(map(self.word_tokens, self.words(text)))

    def count(self, *, messages: Sequence[Mapping[str, Any]] | None = None, prompt: str | None = None) -> int:
        """Prompt tokens of a chat call or a completions call, as llama-server counts them (a chat
        prompt's BOS or EOS text is dropped when the tokenizer adds that token)."""
        if messages is not None and self.template is not None:
            text = self.chat_prompt(messages)
            if self.add_bos and self.bos_token and text.startswith(self.bos_token):
                text = text[len(self.bos_token):]
            if self.add_eos and self.eos_token and text.endswith(self.eos_token):
                text = text[:-len(self.eos_token)]
            return self.count_text(text)
        return self.count_text(prompt if prompt is not None else "\n".join(m["content"] for m in messages or ()))

    def _word_tokens(self, word: str) -> int:
        """BPE tokens of one pre-tokenized piece (lowest merge rank first, leftmost on ties); a
        symbol the vocabulary lacks is one token per byte."""
        symbols = [self.bytes[b] for b in word.encode("utf-8")]
        ranks = self.ranks
        while len(symbols) > 1:
            best = min(range(len(symbols) - 1), key=lambda i: ranks.get((symbols[i], symbols[i + 1]), 1 << 30))
            if (symbols[best], symbols[best + 1]) not in ranks:
                break
            symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
        return sum(1 if s in self.vocab else len(s) for s in symbols)


def _cut(text: str, special: str) -> list[str | None]:
    """`text` around every occurrence of `special` (None in its place), empty parts left out."""
    parts: list[str | None] = []
    for i, part in enumerate(text.split(special)):
        if i:
            parts.append(None)
        if part:
            parts.append(part)
    return parts


def _raise(message: str) -> None:
    raise ValueError(message)


def convert_to_bf16(source: str | Path, target: str | Path) -> dict[str, int]:
    """Write `source` to `target` with every quantized tensor dequantized and stored as BF16.

    The metadata (tokenizer, chat template, hyper-parameters) is copied as it is, but for
    `general.file_type`; F32, F16 and BF16 tensors are copied unchanged. Every 4-bit weight of a
    Q4_1 file is d*q + m (fp16 d and m): BF16 keeps it to within 2**-8 of its value (half a BF16
    step), far below the 4-bit quantization step itself. Returns how many tensors were converted
    and copied. `target` is written in full or not at all (a temporary file renamed at the end).
    """
    import os
    import tempfile

    import gguf as gguf_py  # PyPI's gguf (llama.cpp's gguf-py), not this module
    import numpy as np
    from gguf.quants import dequantize, quantize

    kinds = gguf_py.GGMLQuantizationType
    kept = {kinds.F32, kinds.F16}  # copied as they are (a BF16 source goes through dequantize: exact)
    reader = gguf_py.GGUFReader(str(source))
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=target.name + ".", suffix=".partial", dir=target.parent)
    os.close(fd)
    counts = {"converted": 0, "copied": 0}
    try:
        writer = gguf_py.GGUFWriter(partial, reader.fields["general.architecture"].contents())
        for name, field in reader.fields.items():
            # The writer sets these itself: the header, the architecture, the alignment.
            if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment", "general.file_type"):
                continue
            sub_type = field.types[-1] if field.types[0] == gguf_py.GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), field.types[0], sub_type=sub_type)
        writer.add_file_type(gguf_py.LlamaFileType.MOSTLY_BF16)
        for tensor in reader.tensors:
            shape = tuple(reversed([int(n) for n in tensor.shape]))  # GGUF lists the fastest axis first
            if tensor.tensor_type in kept:
                writer.add_tensor(tensor.name, np.asarray(tensor.data).reshape(shape))
                counts["copied"] += 1
                continue
            weights = dequantize(tensor.data, tensor.tensor_type).reshape(shape).astype(np.float32)
            writer.add_tensor(tensor.name, quantize(weights, kinds.BF16), raw_dtype=kinds.BF16)
            counts["converted"] += 1
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.chmod(partial, 0o644)  # mkstemp makes it private; the cache is per user anyway
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return counts
