"""The precision of a checkpoint once converted to a GGUF, as llama.cpp's tools write it.

``convert_hf_to_gguf.py`` writes its own file types (``--outtype``: :data:`CONVERTER_TYPES`) from the
checkpoint's tensors. For an MXFP4 checkpoint
(gpt-oss) it copies the experts' blocks and scales unchanged at every file type: ``GptOssModel.dequant_model``
leaves MXFP4 tensors alone and ``repack_mxfp4`` writes them with ``raw_dtype=MXFP4``, so gpt-oss-20b's "F16"
GGUF is 12.8 GiB, not the 38 GiB of every matrix at F16. ``llama-quantize`` to any other type re-quantises
every weight it may: ``llama-quant.cpp`` dequantises a 3-D expert tensor and quantises it to the mix's type.
"""

from __future__ import annotations

from dataclasses import replace

from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape

#: a GGUF file type that keeps an MXFP4 checkpoint's experts → the type of every other tensor: llama.cpp's
#: ``MOSTLY_MXFP4_MOE`` (``src/llama-quant.cpp``: "MoE tensors -> MXFP4, other tensors -> Q8_0"; ggml-org's
#: gpt-oss-20b-MXFP4.gguf is 12,109,566,624 bytes, the shape at Q8_0 with MXFP4 experts 12,076,119,168: 0.3 % less,
#: the header and metadata)
MXFP4_MOE_TYPES = {"MXFP4": "Q8_0", "MXFP4_MOE": "Q8_0"}

#: the GGUF types that hold a checkpoint's own weights as they are, by its precision (an MXFP4 checkpoint's
#: method, a float checkpoint's name): a published GGUF of one is the model itself, ready to load
NATIVE_GGUF_TYPES = {
    "mxfp4": frozenset(MXFP4_MOE_TYPES),
    "bf16": frozenset({"BF16"}),
    "fp16": frozenset({"F16", "FP16"}),
}

#: the GGUF types llama.cpp's ``convert_hf_to_gguf.py --outtype`` writes itself (its choices besides ``auto``);
#: any other type is the converter's output run through ``llama-quantize``
CONVERTER_TYPES = frozenset({"F32", "F16", "BF16", "Q8_0", "TQ1_0", "TQ2_0"})


def converted_precision(shape: ModelShape, quant: str) -> Precision:
    """``shape``'s checkpoint in a GGUF at ``quant`` (``"F16"``, ``"Q4_K_M"``…): the what-if of that name,
    with the checkpoint's MXFP4 tensors kept as they are when the converter writes the type itself, or in an
    ``MXFP4`` (``MXFP4_MOE``) file, where every other tensor is Q8_0 (:data:`MXFP4_MOE_TYPES`).

    Raises:
        UnknownPrecisionError: ``quant`` is not a precision explorer knows.
    """
    own = shape.precision
    key = str(quant).upper().replace("-", "_")
    if own.method == "mxfp4" and key in MXFP4_MOE_TYPES:  # llama-quantize's MXFP4_MOE: the experts kept as they are
        quant = key = MXFP4_MOE_TYPES[key]
    precision = shape.resolve_precision(quant)
    if own.method == "mxfp4" and key in CONVERTER_TYPES:
        return replace(precision, name=f"{precision.name} + mxfp4 experts", kept=own)
    return precision


def native_gguf_types(shape: ModelShape) -> frozenset[str]:
    """The GGUF types (upper case) that hold ``shape``'s own weights as they are (:data:`NATIVE_GGUF_TYPES`):
    ``MXFP4`` for gpt-oss, ``BF16`` for a bf16 checkpoint; none for other precisions."""
    own = shape.precision
    key = own.method if own.method != "none" else own.name
    return NATIVE_GGUF_TYPES.get(key, frozenset())
