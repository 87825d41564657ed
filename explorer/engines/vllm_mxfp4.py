"""vLLM's re-layout of MXFP4 routed experts: what they take on a card once loaded, beyond the checkpoint.

vLLM does not keep an MXFP4 checkpoint's expert tensors as stored
(``vllm/model_executor/layers/quantization/mxfp4.py``, ``Mxfp4MoEMethod``):

- **Marlin** (A100, Ada, consumer Blackwell; Hopper up to 0.11) pads the
  intermediate size to a multiple of 128 and the hidden size to 256;
- **FlashInfer TRTLLM** (B200, B300, GB200) pads both to 256;
- **ROCm** pads both to 128 (256 on gfx950, the MI355X);
- **triton_kernels** (Hopper from 0.12) pads the intermediate size to 64,
  swizzles weights and scales into new tensors but keeps the loaded scale
  parameters too (scales held twice), and turns the bf16 biases into fp32.
  The swizzled tensors are padded (``mxfp4_utils._swizzle_mxfp4`` →
  triton_kernels ``convert_layout``, num_warps 8): the Hopper scale layout
  pads the rows of each ``(rows, cols / 32)`` scale matrix to a multiple of
  2 · num_warps · 2 · 8 = 256 (``HopperMXScaleLayoutTransformation``), and
  by 0.19 the Hopper value layout pads both byte dimensions of each packed
  weight (``cols / 2`` and ``rows``) to multiples of 64
  (``HopperMXValueLayoutTransformation.swizzle_data``: "Pre-pad both matrix
  dims to multiples of 64"; the 0.14.1 log shows no such padding, the 0.19.0
  logs do).

Per MoE layer and card, with E experts on the card, I its intermediate
share and H the hidden size (fp4 packed two a byte, one e8m0 scale byte a
32 weights, bf16 biases)::

    E × [2I'·H'/2 + 2I'·⌈H'/32⌉ + 2·2I' + H'·I'/2 + H'·⌈I'/32⌉ + 2·H']

gpt-oss-120b on one H100: checkpoint 60.77 GiB; Marlin 65.90 (logged 65.97
by 0.10.1); Triton 64.30 (logged 64.38 by 0.14.1). gpt-oss-20b on two H100s
(0.19.0): 6.96 GiB a card (logged 7.01).
"""

from __future__ import annotations

from explorer.engines.vllm_release import VLLMRelease
from explorer.hardware.catalogue import GPUClass
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.units import cdiv, round_up

#: GPU class name prefixes by architecture (catalogue names)
HOPPER = ("h100", "h200", "h20-", "gh200")
BLACKWELL_DATACENTER = ("b200", "b300", "gb200")
#: (intermediate, hidden) padding of the padded layouts
PADDING = {"marlin": (128, 256), "trtllm": (256, 256), "rocm": (128, 128), "rocm-gfx950": (256, 256)}
#: triton_kernels' Hopper scale layout pads a scale matrix's rows to 2 · num_warps · 2 · 8 (vLLM's num_warps: 8)
TRITON_SCALE_ROWS = 2 * 8 * 2 * 8
#: and its value layout (by 0.19) both byte dimensions of a packed weight to this multiple
TRITON_VALUE_ALIGN = 64


def mxfp4_backend(gpu: GPUClass, release: VLLMRelease) -> str:
    """The MoE backend vLLM picks for MXFP4 experts on this card: ``triton``, ``marlin``, ``trtllm`` or ``rocm``."""
    name = gpu.name.split(":")[0]
    if gpu.vendor == "amd":
        return "rocm-gfx950" if name.startswith("mi355") else "rocm"
    if name.startswith(BLACKWELL_DATACENTER):
        return "trtllm"
    if name.startswith(HOPPER) and release.mxfp4_triton_on_hopper:
        return "triton"
    return "marlin"


def _mx(rows: int, cols: int) -> int:
    return cdiv(rows * cols, 2) + rows * cdiv(cols, 32)


def _layer_bytes(experts: int, inter: int, hidden: int, biases: bool) -> int:
    bias = 2 * (2 * inter + hidden) if biases else 0
    return experts * (_mx(2 * inter, hidden) + _mx(hidden, inter) + bias)


def _triton_swizzled(inter: int, hidden: int, value_padding: bool) -> int:
    """Bytes one expert's swizzled tensors take beyond its loaded tensors: the scales again (rows padded to
    :data:`TRITON_SCALE_ROWS`), and the values' padding (:data:`TRITON_VALUE_ALIGN`) where the release pads.

    gpt-oss-20b at tp 2 (I 1,440 → 1,472, H 2,880) from 0.19: w13's 2,944 rows × 1,440 bytes of values become
    2,944 × 1,472 and w2's 2,880 × 736 become 2,880 × 768 (+94,208 + 92,160); its scales, 2,944 × 90 and
    2,880 × 46, are held again as 3,072 × 90 and 3,072 × 46 (11,520 + 8,832 more than an unpadded copy)."""
    scales = _swizzled_scales(2 * inter, hidden) + _swizzled_scales(hidden, inter)
    if not value_padding:
        return scales
    return scales + _value_padding(2 * inter, hidden) + _value_padding(hidden, inter)


def _swizzled_scales(rows: int, cols: int) -> int:
    """Bytes of a ``rows × cols`` weight's e8m0 scales in triton_kernels' Hopper scale layout."""
    return round_up(rows, TRITON_SCALE_ROWS) * round_up(cdiv(cols, 32), 2)


def _value_padding(rows: int, cols: int) -> int:
    """Bytes triton_kernels' Hopper value layout adds to a ``rows × cols`` fp4 weight (two values a byte)."""
    packed = cdiv(cols, 2)
    return round_up(packed, TRITON_VALUE_ALIGN) * round_up(rows, TRITON_VALUE_ALIGN) - packed * rows


def relayout_extra_bytes(
    shape: ModelShape, precision: Precision, gpu: GPUClass, release: VLLMRelease, tp: int, ep: int
) -> int:
    """Bytes vLLM's layout adds to one MoE layer's MXFP4 experts on one card (0 for other checkpoints)."""
    moe = shape.moe
    if moe is None or not moe.moe_layers:
        return 0
    layer = next((layer for layer in shape.decoder if any(t.role == "expert" for t in layer.tensors)), None)
    if layer is None:
        return 0
    experts = [t for t in layer.tensors if t.role == "expert"]
    formats = {precision.format_for(t, 0) for t in experts if t.cols > 1}
    if not formats or any(f is None or f.kind != "mxfp4" for f in formats):
        return 0
    biases = any(t.param == "bias" for t in experts)
    count = cdiv(moe.experts, ep) if ep > 1 else moe.experts
    inter = moe.moe_intermediate_size if ep > 1 else cdiv(moe.moe_intermediate_size, tp)
    hidden = shape.hidden_size
    stored = _layer_bytes(count, inter, hidden, biases)
    backend = mxfp4_backend(gpu, release)
    if backend == "triton":
        padded = round_up(inter, 64)
        fp32_bias = count * 2 * (2 * padded + hidden) if biases else 0
        swizzled = count * _triton_swizzled(padded, hidden, release.mxfp4_triton_value_padding)
        return _layer_bytes(count, padded, hidden, biases) - stored + swizzled + fp32_bias
    pad_inter, pad_hidden = PADDING[backend]
    return _layer_bytes(count, round_up(inter, pad_inter), round_up(hidden, pad_hidden), biases) - stored
