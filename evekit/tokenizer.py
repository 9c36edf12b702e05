"""The embedded model's tokenizer: prompt tokens counted as llama.cpp's `llama-server` counts them,
from the GGUF file's own metadata, without loading the model (or llama.cpp at all).

`read_metadata` reads a GGUF file's key/values with `gguf.GGUFReader` (PyPI's `gguf`, llama.cpp's own
GGUF library). The reader makes a numpy view of every string, which for a 49,152-token vocabulary
takes seconds (2.6 s on an idle core, 20 s on this shared machine under load, against 0.07 s for a
plain read), so `tokenizer_metadata` keeps the tokenizer's keys in the per-user cache, keyed by the
file's path, size and modification time: `evekit plan` reads them back in milliseconds.

`GgufTokenizer` is llama.cpp's byte-level BPE (`tokenizer.ggml.model` = "gpt2") for the
pre-tokenizers listed in `PRE_TOKENIZERS`: the
special tokens (control, user-defined and unknown types) are cut out of the text first, longest
first, as the server does when it parses special tokens in a prompt; then the pre-tokenizer's
regex splits the rest into pieces; each piece's UTF-8 bytes are mapped to GPT-2's printable
characters and merged by the rank of `tokenizer.ggml.merges`. The chat template is rendered with jinja2 as the server applies it
(`add_generation_prompt=True`). Only the count is needed, so tokens are never looked up by id.
(`evekit.weights.convert_to_bf16` is the other thing evekit does with a GGUF: the served weights.)
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from .paths import user_cache_dir

__all__ = ["read_metadata", "tokenizer_metadata", "GgufTokenizer", "PRE_TOKENIZERS"]

# tokenizer.ggml.pre -> llama.cpp's pre-tokenizer regexes (llama-vocab.cpp) as one regex whose
# matches cover the text. "smollm", the embedded model's, is llama.cpp's `\p{N}` split, then GPT-2's
# regex on each piece: digits one by one, and a space before a digit ends the piece before it (the
# lookahead `(?![^\s\p{N}])`). The last `\s+` takes what GPT-2's regex leaves (one whitespace before
# a word that is not a space), which llama.cpp keeps as a piece of its own. tests/test_tokenizer.py
# checks the one regex against the two, one after the other.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_DIGITS_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"
PRE_TOKENIZERS = {"smollm": _DIGITS_GPT2, "starcoder": _DIGITS_GPT2, "refact": _DIGITS_GPT2, "gpt-2": _GPT2}
# Token types of tokenizer.ggml.token_type that are cut out of the text as single tokens.
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The key/values of a GGUF file (those `gguf.GGUFReader` reads: versions 2 and 3), arrays as
    lists; the header's own counts (`GGUF.*`) left out."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, IndexError) as exc:  # a wrong magic or version; a file too short to hold a header
        raise ValueError(f"{path}: not a GGUF file that can be read ({exc})") from None
    return {name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")}


def tokenizer_metadata(path: str | Path) -> dict[str, Any]:
    """The `tokenizer.*` keys of a GGUF file: from the per-user cache when this file (path, size,
    modification time) was read before, else `read_metadata`'s, then kept there (a cache that cannot
    be written or read is only slower)."""
    path = Path(path)
    st = path.stat()
    digest = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    kept = user_cache_dir() / "tokenizers" / f"{path.stem}-{digest}.json"
    try:
        return json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    meta = {k: v for k, v in read_metadata(path).items() if k.startswith("tokenizer.")}
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, kept)  # whole or not at all: another process may read it at once
    except OSError:
        pass
    return meta


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

        meta = tokenizer_metadata(path)
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
