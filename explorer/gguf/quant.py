"""Name a GGUF file's quantisation and measure its bits per weight.

The name comes, in order of trust, from ``general.file_type`` (what
llama-quantize was asked for), from the file name (``…-Q4_K_M.gguf``), or
from the tensor type holding the most bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from explorer.errors import GGUFError
from explorer.gguf.constants import FILE_TYPE_NAMES_BY_VALUE, GGML_QUANT_SIZES, KEY_FILE_TYPE
from explorer.gguf.header import GGUFHeader

__all__ = [
    "FILE_TYPE_NAMES",
    "NOMINAL_BITS_PER_WEIGHT",
    "QuantName",
    "bits_per_weight",
    "file_type_name",
    "header_bits_per_weight",
    "nominal_bits_per_weight",
    "quant_from_filename",
    "quant_name",
]

QuantSource = Literal["file_type", "filename", "tensors"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantName:
    """A quantisation name and where it came from.

    Attributes:
        name: llama.cpp's spelling: ``Q4_K_M``, ``Q8_0``, ``IQ2_XS``, ``BF16``, ``UD-Q4_K_XL``…
        source: ``file_type`` (the header's ``general.file_type``), ``filename``,
            or ``tensors`` (the type holding the most bytes).
    """

    name: str
    source: QuantSource


def _ftype_name(member: str) -> str:
    for prefix in ("MOSTLY_", "ALL_"):
        if member.startswith(prefix):
            return member[len(prefix) :]
    return member


#: ``general.file_type`` value → name; from llama.h's llama_ftype (explorer.gguf.constants),
#: ``MOSTLY_Q4_K_M`` → ``Q4_K_M``, ``ALL_F32`` → ``F32``; GUESSED (1024) is not a name.
FILE_TYPE_NAMES: dict[int, str] = {
    # values gguf-py comments out but old files carry (llama.h):
    4: "Q4_1_SOME_F16",
    33: "Q4_0_4_4",
    34: "Q4_0_4_8",
    35: "Q4_0_8_8",
    **{value: _ftype_name(member) for value, member in FILE_TYPE_NAMES_BY_VALUE.items()},
}

#: bits per weight of each tensor type: type_size × 8 / block_size (gguf-py GGML_QUANT_SIZES);
#: Q4_K: 144 bytes per 256 weights = 4.5 bits
NOMINAL_BITS_PER_WEIGHT: dict[str, float] = {
    t.name: type_size * 8 / block_size for t, (block_size, type_size) in GGML_QUANT_SIZES.items()
}

# Quant names as they appear in file names; the `_` suffix groups let Q4_K_M
# win over Q4_K and Q4_0_4_4 over Q4_0. Bounded by non-alphanumerics so
# "Qwen3" or "F16x" do not match.
_QUANT_IN_NAME = re.compile(
    r"""(?<![A-Za-z0-9])(
        (?:UD-)?I?Q[1-8]_(?:K|[01]|NL|XXS|XS|S|M)(?:_(?:XXS|XS|S|M|L|XL|[48]))*
      | TQ[12]_0
      | MXFP4(?:_MOE)? | NVFP4
      | BF16 | F16 | F32 | FP16 | FP32
    )(?![A-Za-z0-9])""",
    re.IGNORECASE | re.VERBOSE,
)
_SPELLING = {"FP16": "F16", "FP32": "F32"}


def file_type_name(value: object) -> str | None:
    """llama.cpp's name for a ``general.file_type`` value, or None if unknown."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return FILE_TYPE_NAMES.get(value)


def quant_from_filename(filename: str) -> str | None:
    """The quant named in a file name (the last one wins), upper-cased; None if none.

    ``"Qwen2.5-7B-Instruct-Q4_K_M.gguf"`` → ``"Q4_K_M"``;
    ``"gemma-3-27b-it-UD-Q4_K_XL-00001-of-00002.gguf"`` → ``"UD-Q4_K_XL"``.
    """
    stem = filename.rsplit("/", 1)[-1]
    found = _QUANT_IN_NAME.findall(stem)
    if not found:
        return None
    name = found[-1].upper()
    return _SPELLING.get(name, name)


def quant_name(header: GGUFHeader, filename: str | None = None) -> QuantName:
    """Name the file's quantisation: file type, else file name, else dominant tensor type.

    ``filename`` defaults to ``header.name``.
    """
    name = file_type_name(header.get(KEY_FILE_TYPE))
    if name is not None:
        return QuantName(name=name, source="file_type")
    name = quant_from_filename(header.name if filename is None else filename)
    if name is not None:
        return QuantName(name=name, source="filename")
    by_type: dict[str, int] = {}
    for t in header.tensors:
        by_type[t.type_name] = by_type.get(t.type_name, 0) + t.n_bytes
    if not by_type:
        raise GGUFError(
            f"cannot name the quantisation of {header.name or 'this GGUF'}: "
            "no general.file_type, no quant in the file name, and no tensors"
        )
    # the most bytes wins; ties go to the alphabetically first name, for stable output
    dominant = min(by_type, key=lambda n: (-by_type[n], n))
    return QuantName(name=dominant, source="tensors")


def bits_per_weight(total_bytes: int, params: int) -> float:
    """Average bits per weight: ``total_bytes × 8 / params`` (12.55 GiB over 6.74B weights = 16.0)."""
    if params <= 0:
        raise GGUFError(f"bits per weight needs a positive parameter count, got {params:,}")
    return total_bytes * 8 / params


def header_bits_per_weight(header: GGUFHeader) -> float:
    """Bits per weight of a header's tensors (data bytes over element counts)."""
    return bits_per_weight(header.tensor_bytes_total, header.parameter_count)


def nominal_bits_per_weight(type_name: str) -> float | None:
    """Bits per weight of one tensor type (``Q4_K`` → 4.5, ``Q8_0`` → 8.5), None if unknown."""
    return NOMINAL_BITS_PER_WEIGHT.get(type_name.upper())
