"""Element types of weights and of the KV cache, as byte facts.

A type is stored in blocks: ``block_elements`` values take ``block_bytes``
bytes. Plain types have blocks of one element (bf16: 1 value in 2 bytes);
llama.cpp's block-quantised cache types pack 32 values with a scale
(q8_0: 32 values in 34 bytes; q4_0: 32 values in 18 bytes), as in ggml's
``GGML_QUANT_SIZES`` table.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import UnknownPrecisionError
from explorer.units import cdiv


@dataclass(frozen=True, slots=True, kw_only=True)
class ElementType:
    """A storage type.

    Attributes:
        name: canonical name (``bf16``, ``fp8``, ``q8_0``...).
        block_elements: values per block (1 for plain types).
        block_bytes: bytes per block.
    """

    name: str
    block_elements: int
    block_bytes: int

    def row_bytes(self, elements: int) -> int:
        """Bytes for ``elements`` values, rounded up to whole blocks (ggml's row size)."""
        return cdiv(elements, self.block_elements) * self.block_bytes

    @property
    def bits_per_element(self) -> float:
        """Average bits per value, scales included (q8_0: 34 × 8 / 32 = 8.5)."""
        return self.block_bytes * 8 / self.block_elements


def _plain(name: str, nbytes: int) -> ElementType:
    return ElementType(name=name, block_elements=1, block_bytes=nbytes)


# Source: torch dtype sizes; ggml/src/ggml.c type_traits (block size, type size).
ELEMENT_TYPES: dict[str, ElementType] = {
    "fp32": _plain("fp32", 4),
    "bf16": _plain("bf16", 2),
    "fp16": _plain("fp16", 2),
    "fp8": _plain("fp8", 1),
    "q8_0": ElementType(name="q8_0", block_elements=32, block_bytes=34),
    "q5_1": ElementType(name="q5_1", block_elements=32, block_bytes=24),
    "q5_0": ElementType(name="q5_0", block_elements=32, block_bytes=22),
    "q4_1": ElementType(name="q4_1", block_elements=32, block_bytes=20),
    "q4_0": ElementType(name="q4_0", block_elements=32, block_bytes=18),
    "iq4_nl": ElementType(name="iq4_nl", block_elements=32, block_bytes=18),
}

_ALIASES = {
    "float32": "fp32",
    "f32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_e4m3fn": "fp8",
    "float8_e4m3fn": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "int8": "fp8",  # one byte a value, as vLLM's int8 KV cache
}

#: the KV cache types a user may choose; "auto" means the model's own dtype
KV_CACHE_TYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")


def element_type(name: str) -> ElementType:
    """Look up a type by any of its spellings (``torch.bfloat16``, ``F16``, ``fp8_e4m3``, ``q8_0``)."""
    key = str(name).strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    try:
        return ELEMENT_TYPES[key]
    except KeyError:
        raise UnknownPrecisionError(
            f"unknown element type {name!r}",
            hint=f"use one of {', '.join(ELEMENT_TYPES)}",
        ) from None


def model_dtype_name(config_dtype: object, default: str = "bf16") -> str:
    """The canonical name of a config's ``torch_dtype``/``dtype`` (``bfloat16`` → ``bf16``).

    Anything unrecognised falls back to ``default``; a model's activations are
    never block-quantised, so only plain types are accepted here.
    """
    if not isinstance(config_dtype, str):
        return default
    try:
        et = element_type(config_dtype)
    except UnknownPrecisionError:
        return default
    return et.name if et.block_elements == 1 and et.name != "fp8" else default
