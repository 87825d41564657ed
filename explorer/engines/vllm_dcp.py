"""vLLM's decode context parallelism (``--decode-context-parallel-size``, ``-dcp``): which sizes it accepts.

Under tensor parallelism an MLA model keeps its one latent KV vector a token whole on every tp card, and a GQA
model with fewer KV heads than tp cards keeps each head on tp / heads of them. ``-dcp N`` reuses N of the tp
ranks to split those duplicated tokens instead: token i on rank ``i % N``, so each card holds ``cdiv(context,
N)`` of them (:func:`explorer.engines.stage_kv.card_kv_bytes`). The rules below are vLLM's own
(docs/notes/vllm_memory.md §3.5 has the sources):

- tp is a multiple of dcp (``ParallelConfig``: ``tp_size=… must be divisible by dcp_size=…``);
- a GQA model needs more tp cards than KV heads, dcp ≤ tp // heads, and the query heads of one KV head a
  multiple of dcp (``ModelConfig.verify_with_parallel_config``); MLA has no such bound (dcp up to tp);
- every attention layer's backend returns the softmax LSE in decode: full attention (FlashAttention,
  FlashInfer) and dense MLA (FlashMLA, CUTLASS MLA, Triton MLA) do; sliding windows, recurrent states and
  sparse MLA are not planned with it;
- NVIDIA cards from Ampere on; first in 0.11 (vllm-project/vllm#23734 for MLA, #24864 for GQA, both
  September 2025).
"""

from __future__ import annotations

from dataclasses import replace

from explorer.engines.attention_kernels import sparse_mla
from explorer.engines.layouts import Layout
from explorer.engines.parallel_rules import Refusal, kv_head_counts
from explorer.engines.vllm_release import VLLMRelease
from explorer.hardware.catalogue import GPUClass
from explorer.model.kv_cache import FullAttention, MLAAttention, NoCache
from explorer.model.shapes import ModelShape

#: the first release with ``--decode-context-parallel-size`` (vllm-project/vllm#23734, merged September 2025)
FIRST_RELEASE: tuple[int, int] = (0, 11)
#: NVIDIA generations with a decode backend that returns the LSE DCP merges by (FlashAttention 2/3 and Triton
#: MLA from Ampere, FlashMLA on Hopper, FlashInfer and CUTLASS MLA on Blackwell)
ARCHITECTURES = frozenset({"ampere", "ada", "hopper", "blackwell", "blackwell-rtx"})


def dcp_refusals(shape: ModelShape, tp: int, dcp: int, gpu: GPUClass, release: VLLMRelease) -> list[Refusal]:
    """Why vLLM refuses ``--decode-context-parallel-size dcp`` at ``tp`` for this model on ``gpu`` (empty: it
    runs), in its own words where it has them."""
    if dcp <= 1:
        return []
    if release.version < FIRST_RELEASE:
        return [("dcp-release", f"vLLM {release.label} has no --decode-context-parallel-size (from 0.11)")]
    if gpu.architecture not in ARCHITECTURES:
        return [
            (
                "dcp-gpu",
                f"vLLM's decode context parallelism needs a decode kernel that returns its softmax LSE: none for "
                f"{gpu.architecture or 'unknown'} cards ({gpu.name})",
            )
        ]
    if tp % dcp:
        return [("dcp-size", f"tp_size={tp} must be divisible by dcp_size={dcp}.")]
    caches = {type(layer.cache) for layer in shape.decoder} - {NoCache}
    if sparse_mla(shape) or not caches or not caches <= {FullAttention, MLAAttention}:
        return [
            (
                "dcp-attention",
                "vLLM's decode context parallelism is planned for full attention and dense MLA only; "
                f"this model has {', '.join(sorted(c.kind for c in caches)) or 'no attention'}"
                f"{' (sparse MLA)' if sparse_mla(shape) else ''}",
            )
        ]
    return _gqa_refusals(shape, tp, dcp)


def _gqa_refusals(shape: ModelShape, tp: int, dcp: int) -> list[Refusal]:
    """vLLM's bounds on dcp for grouped-query attention (``ModelConfig.verify_with_parallel_config``)."""
    for heads in sorted(kv_head_counts(shape)):
        if tp <= heads:
            return [
                (
                    "dcp-kv-heads",
                    f"tensor parallel size {tp} must be greater than total num kv heads {heads} when enable "
                    "decode context parallel for GQA/MQA",
                )
            ]
        if dcp > tp // heads:
            return [
                (
                    "dcp-kv-heads",
                    f"decode context parallel size must less than or equal to (tensor parallel size {tp} // total "
                    f"num kv heads {heads}) = {tp // heads}, but got {dcp}",
                )
            ]
        if (shape.attention_heads // heads) % dcp:
            return [
                (
                    "dcp-kv-heads",
                    f"Total number of q per kv attn heads ({shape.attention_heads // heads}) must be divisible by "
                    f"dcp world size when enable decode context parallel for GQA ({dcp}).",
                )
            ]
    return []


def dcp_layouts(shape: ModelShape, layout: Layout, gpu: GPUClass, release: VLLMRelease) -> tuple[Layout, ...]:
    """``layout`` with each dcp vLLM accepts beyond 1, smallest first: the ways to split its duplicated KV
    cache over its tp cards (DeepSeek-V3 at tp 8: dcp 2, 4, 8; Qwen3-235B's 4 KV heads at tp 8: dcp 2)."""
    if layout.tp <= 1 or layout.dcp > 1:
        return ()
    return tuple(
        replace(layout, dcp=dcp)
        for dcp in range(2, layout.tp + 1)
        if not dcp_refusals(shape, layout.tp, dcp, gpu, release)
    )


def whole_split_widths(
    shape: ModelShape, widths: tuple[int, ...], gpu: GPUClass, release: VLLMRelease
) -> tuple[int, ...]:
    """The tp sizes among ``widths`` at which vLLM splits the KV cache by token over every card (``-dcp`` = tp):
    a fleet's even split charges each card 1/tp of the cache, which an MLA latent needs ``-dcp tp`` for
    (DeepSeek-V3: 2, 4, 8, 16, 32, 64, 128 on Hopper; Qwen3-235B's 4 KV heads: none)."""
    return tuple(tp for tp in widths if tp > 1 and not dcp_refusals(shape, tp, tp, gpu, release))
