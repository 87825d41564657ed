"""Build GGUF bytes for tests: by hand with ``struct.pack``, or with ``gguf.GGUFWriter``.

Two ways on purpose: the hand-built path can write anything (hostile headers
byte by byte), the writer path checks that real files parse the same way.

    build_gguf({"general.architecture": "llama", "llama.block_count": 2},
               [("blk.0.attn_q.weight", (256, 64), Q4_K)])

Shapes are in GGUF order (``ne0``, the row length, first). Tensor data is
zeros. Metadata values are typed by ``infer_type`` (int → UINT32, float →
FLOAT32, str → STRING, list → ARRAY) unless wrapped in :class:`Typed`.
"""

from __future__ import annotations

import math
import struct
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType

F32, F16, Q8_0, Q4_K, Q6_K = QT.F32, QT.F16, QT.Q8_0, QT.Q4_K, QT.Q6_K

#: struct format of each scalar value type, little-endian
SCALAR_FORMATS = {
    VT.UINT8: "<B",
    VT.INT8: "<b",
    VT.UINT16: "<H",
    VT.INT16: "<h",
    VT.UINT32: "<I",
    VT.INT32: "<i",
    VT.FLOAT32: "<f",
    VT.BOOL: "<?",
    VT.UINT64: "<Q",
    VT.INT64: "<q",
    VT.FLOAT64: "<d",
}

TensorSpec = tuple[str, Sequence[int], int]


@dataclass(frozen=True)
class Typed:
    """A metadata value with an explicit GGUF type (and item type for arrays)."""

    value: Any
    vtype: int
    sub_type: int | None = None


def infer_type(value: Any) -> tuple[int, int | None]:
    """The (value type, array item type) the factory writes for a plain Python value."""
    if isinstance(value, Typed):
        return value.vtype, value.sub_type
    if isinstance(value, bool):
        return VT.BOOL, None
    if isinstance(value, int):
        if 0 <= value < 2**32:
            return VT.UINT32, None
        return (VT.INT32 if -(2**31) <= value < 0 else VT.INT64 if value < 0 else VT.UINT64), None
    if isinstance(value, float):
        return VT.FLOAT32, None
    if isinstance(value, (str, bytes)):
        return VT.STRING, None
    if isinstance(value, (list, tuple)):
        return VT.ARRAY, (infer_type(value[0])[0] if value else VT.UINT32)
    raise TypeError(f"cannot infer a GGUF type for {value!r}")


def pack_string(s: str | bytes) -> bytes:
    """u64 length + bytes."""
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def pack_value(value: Any, vtype: int, sub_type: int | None = None) -> bytes:
    """A value's bytes (without its type tag)."""
    if isinstance(value, Typed):
        value = value.value
    if vtype == VT.STRING:
        return pack_string(value)
    if vtype == VT.ARRAY:
        assert sub_type is not None
        body = b"".join(pack_array_item(item, sub_type) for item in value)
        return struct.pack("<IQ", sub_type, len(value)) + body
    return struct.pack(SCALAR_FORMATS[vtype], value)


def pack_array_item(item: Any, sub_type: int) -> bytes:
    """One array item; nested arrays carry their own type and count."""
    if sub_type == VT.ARRAY:
        inner_type = infer_type(item)[1]
        return pack_value(item, VT.ARRAY, inner_type)
    return pack_value(item, sub_type)


def pack_kv(key: str | bytes, value: Any, vtype: int | None = None, sub_type: int | None = None) -> bytes:
    """A key/value: key string, u32 type, value."""
    if vtype is None:
        vtype, sub_type = infer_type(value)
    return pack_string(key) + struct.pack("<I", vtype) + pack_value(value, vtype, sub_type)


def pack_tensor_info(name: str | bytes, shape: Sequence[int], ggml_type: int, offset: int) -> bytes:
    """A tensor info: name, u32 n_dims, u64 dims (ne0 first), u32 type, u64 offset."""
    return (
        pack_string(name)
        + struct.pack("<I", len(shape))
        + struct.pack(f"<{len(shape)}Q", *shape)
        + struct.pack("<IQ", ggml_type, offset)
    )


def pack_preamble(n_tensors: int, n_kv: int, *, version: int = 3, magic: bytes = b"GGUF") -> bytes:
    """Magic, u32 version, u64 tensor count, u64 key/value count."""
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def tensor_nbytes(shape: Sequence[int], ggml_type: int) -> int:
    """Bytes of a tensor: elements × type size // block size."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[QT(ggml_type)]
    return math.prod(shape) * type_size // block_size


def _pad(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def layout(tensors: Sequence[TensorSpec], alignment: int = 32) -> tuple[list[int], int]:
    """Offsets of each tensor in the data section, packed and aligned, and the section's size."""
    offsets, size = [], 0
    for _, shape, t in tensors:
        offsets.append(size)
        size = _pad(size + tensor_nbytes(shape, t), alignment)
    return offsets, size


def build_gguf(
    metadata: Mapping[str, Any],
    tensors: Sequence[TensorSpec] = (),
    *,
    version: int = 3,
    alignment: int = 32,
    with_data: bool = True,
) -> bytes:
    """A valid GGUF file (or only its header with ``with_data=False``), built with struct.pack.

    ``general.alignment`` is written when ``alignment`` is not the default 32.
    """
    kvs = dict(metadata)
    if alignment != gguf.GGUF_DEFAULT_ALIGNMENT and "general.alignment" not in kvs:
        kvs["general.alignment"] = Typed(alignment, VT.UINT32)
    offsets, data_size = layout(tensors, alignment)
    out = bytearray(pack_preamble(len(tensors), len(kvs), version=version))
    for key, value in kvs.items():
        out += pack_kv(key, value)
    for (name, shape, t), offset in zip(tensors, offsets, strict=True):
        out += pack_tensor_info(name, shape, t, offset)
    if with_data:
        out += bytes(_pad(len(out), alignment) - len(out)) + bytes(data_size)
    return bytes(out)


def data_file_size(header: bytes, tensors: Sequence[TensorSpec], alignment: int = 32) -> int:
    """The size the whole file would have: header, padding, then the data section."""
    return _pad(len(header), alignment) + layout(tensors, alignment)[1]


def build_gguf_with_writer(
    metadata: Mapping[str, Any], tensors: Sequence[TensorSpec] = (), *, arch: str = "llama"
) -> bytes:
    """A GGUF file written by ``gguf.GGUFWriter`` (which adds ``general.architecture``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.gguf"
        writer = gguf.GGUFWriter(path, arch)
        for key, value in metadata.items():
            vtype, sub_type = infer_type(value)
            raw = value.value if isinstance(value, Typed) else value
            writer.add_key_value(key, raw, VT(vtype), None if sub_type is None else VT(sub_type))
        for name, shape, t in tensors:
            block_size, type_size = gguf.GGML_QUANT_SIZES[QT(t)]
            byte_shape = (*reversed(shape[1:]), shape[0] // block_size * type_size)  # numpy order, bytes per row
            writer.add_tensor(name, np.zeros(byte_shape, dtype=np.uint8), raw_dtype=QT(t))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path.read_bytes()


def llama_like(
    blocks: int = 2, hidden: int = 256, ffn: int = 512, vocab: int = 320, quant: int = Q4_K
) -> list[TensorSpec]:
    """A small llama-shaped tensor list: embeddings, per-block attention/FFN/norms, output."""
    out: list[TensorSpec] = [("token_embd.weight", (hidden, vocab), quant)]
    for b in range(blocks):
        out += [
            (f"blk.{b}.attn_norm.weight", (hidden,), F32),
            (f"blk.{b}.attn_q.weight", (hidden, hidden), quant),
            (f"blk.{b}.attn_k.weight", (hidden, hidden // 4), quant),
            (f"blk.{b}.attn_v.weight", (hidden, hidden // 4), Q8_0),
            (f"blk.{b}.attn_output.weight", (hidden, hidden), quant),
            (f"blk.{b}.ffn_norm.weight", (hidden,), F32),
            (f"blk.{b}.ffn_gate.weight", (hidden, ffn), quant),
            (f"blk.{b}.ffn_up.weight", (hidden, ffn), quant),
            (f"blk.{b}.ffn_down.weight", (ffn, hidden), F16),
        ]
    out += [("output_norm.weight", (hidden,), F32), ("output.weight", (hidden, vocab), Q6_K)]
    return out


def llama_metadata(blocks: int = 2, vocab: int = 320, **extra: Any) -> dict[str, Any]:
    """Typical llama key/values, with a small vocabulary."""
    md: dict[str, Any] = {
        "general.architecture": "llama",
        "general.name": "tiny",
        "general.file_type": 15,  # MOSTLY_Q4_K_M
        "llama.block_count": blocks,
        "llama.context_length": 4096,
        "llama.embedding_length": 256,
        "llama.attention.head_count": 8,
        "llama.attention.head_count_kv": 2,
        "llama.rope.freq_base": 10000.0,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(vocab)],
        "tokenizer.ggml.token_type": Typed([1] * vocab, VT.ARRAY, VT.INT32),
    }
    md.update(extra)
    return md


def dump_scalar_metadata(dump: dict) -> dict:
    """A converter test dump's scalar key/values, typed (its arrays and tensors are given as hashes)."""
    md: dict = {}
    for key, text in dump.items():
        if key.endswith((".weight", ".bias")) or (len(text) == 64 and all(c in "0123456789abcdef" for c in text)):
            continue
        if text in ("true", "false"):
            md[key] = text == "true"
        elif text.lstrip("-").isdigit():
            md[key] = int(text)
        else:
            try:
                md[key] = Typed(float(text), VT.FLOAT32)
            except ValueError:
                md[key] = text
    return md
