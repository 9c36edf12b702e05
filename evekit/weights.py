"""The embedded model's weights as llama-server serves them fastest on a CPU: a GGUF rewritten with
its quantized tensors stored as BF16 (`convert_to_bf16`, with PyPI's `gguf`, llama.cpp's own GGUF
library), for a file's quantization that has no repacked CPU kernel (`evekit.server.served_model_path`).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["convert_to_bf16"]


def convert_to_bf16(source: str | Path, target: str | Path) -> dict[str, int]:
    """Write `source` to `target` with every quantized tensor dequantized and stored as BF16.

    The metadata (tokenizer, chat template, hyper-parameters) is copied as it is, but for
    `general.file_type`; F32, F16 and BF16 tensors are copied unchanged. Every 4-bit weight of a
    Q4_1 file is d*q + m (fp16 d and m): BF16 keeps it to within 2**-8 of its value (half a BF16
    step), far below the 4-bit quantization step itself. Returns how many tensors were converted
    and copied. `target` is written in full or not at all (a temporary file renamed at the end).
    """
    import gguf as gguf_py  # imported here: only a first start of the embedded server needs it
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
