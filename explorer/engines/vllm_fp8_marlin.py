"""vLLM's Marlin path for block-scaled fp8 on cards without fp8 compute: the scales it re-lays.

On a card below compute capability 8.9 (Ampere: A100, A10, RTX 30xx) vLLM runs
fp8 checkpoints weight-only through Marlin (``fp8.py``: ``use_marlin = not
has_device_capability(89)``). Marlin knows channel and group scales, not
blocks, so ``prepare_fp8_layer_for_marlin`` and ``prepare_moe_fp8_layer_for_marlin``
(``utils/marlin_utils_fp8.py``) turn a (bn, bk) block scale into a group scale:
one scale a bk inputs for every output row, in the model's own dtype. The fp8
weights keep their bytes (repacked into int32 words); the scales grow.

For one N × K matrix on a card (N its output rows, K its inputs)::

    stored:  ⌈N / bn⌉ · ⌈K / bk⌉ fp32 block scales
    loaded:  ⌈K / bk⌉ · N scales of the model's dtype (bf16: 2 bytes)

DeepSeek-R1 (128 × 128 blocks) on A100s: about 1/64 byte a weight more, some
10 GB over the whole model.
"""

from __future__ import annotations

from explorer.hardware.catalogue import GPUClass
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.tensors import Tensor
from explorer.model.weights import shard_shape
from explorer.units import cdiv

#: the weight-support table's name of block-scaled fp8, and the level at which vLLM runs it through Marlin
FP8_BLOCK = "fp8-block"
WEIGHT_ONLY = "weight-only"
#: bytes of a stored block scale (``weight_scale_inv``, fp32)
BLOCK_SCALE_BYTES = 4


def _matrix_extra(rows: int, cols: int, block: tuple[int, int], scale_bytes: int) -> int:
    """Bytes Marlin's group scales take beyond the stored block scales, for one ``rows`` × ``cols`` matrix."""
    block_rows, block_cols = block
    k_groups = cdiv(cols, block_cols)
    return k_groups * rows * scale_bytes - cdiv(rows, block_rows) * k_groups * BLOCK_SCALE_BYTES


def _tensor_extra(t: Tensor, precision: Precision, layer: int | None, tp: int, ep: int) -> int:
    fmt = precision.format_for(t, layer)
    if fmt is None or fmt.kind != "fp8" or fmt.block is None or t.cols <= 1:
        return 0
    rows, cols, count = shard_shape(t, tp, ep)
    return count * _matrix_extra(rows, cols, fmt.block, precision.base.block_bytes // precision.base.block_elements)


def marlin_layer_extra_bytes(
    shape: ModelShape, precision: Precision, gpu: GPUClass, tp: int, ep: int
) -> tuple[int, ...]:
    """Bytes each decoder layer's block-fp8 matrices take on one card beyond the checkpoint when vLLM runs them
    through Marlin on ``gpu`` (all zeros where it runs them natively, or the weights are not block fp8)."""
    if gpu.runs("vllm", FP8_BLOCK) != WEIGHT_ONLY:
        return (0,) * len(shape.decoder)
    memo: dict[int, int] = {}
    out = []
    for i, layer in enumerate(shape.decoder):
        key = id(layer.tensors)
        if key not in memo:
            memo[key] = sum(_tensor_extra(t, precision, i, tp, ep) for t in layer.tensors)
        out.append(memo[key])
    return tuple(out)
