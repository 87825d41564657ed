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

#: the GGUF types llama.cpp's ``convert_hf_to_gguf.py --outtype`` writes itself (its choices besides ``auto``);
#: any other type is the converter's output run through ``llama-quantize``
CONVERTER_TYPES = frozenset({"F32", "F16", "BF16", "Q8_0", "TQ1_0", "TQ2_0"})


def converted_precision(shape: ModelShape, quant: str) -> Precision:
    """``shape``'s checkpoint in a GGUF at ``quant`` (``"F16"``, ``"Q4_K_M"``…): the what-if of that name,
    with the checkpoint's MXFP4 tensors kept as they are when the converter writes the type itself.

    Raises:
        UnknownPrecisionError: ``quant`` is not a precision explorer knows.
    """
    precision = shape.resolve_precision(quant)
    own = shape.precision
    if own.method == "mxfp4" and str(quant).upper().replace("-", "_") in CONVERTER_TYPES:
        return replace(precision, name=f"{precision.name} + mxfp4 experts", kept=own)
    return precision
