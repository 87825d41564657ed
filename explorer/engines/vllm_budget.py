"""The terms of vLLM's budget besides weights and KV: the profiling run's activation peak, non-torch memory,
CUDA graphs, and the scheduler defaults they depend on.

**Activation peak** of the profiling run on one card (``profile_run``: a
forward pass of ``T = max_num_batched_tokens`` tokens, then the sampler on
``R = min(max_num_seqs, T)`` rows over the whole vocabulary ``V`` padded to
64)::

    A = max(c · R · V, T · (h·H + 3·I/tp) · b)  +  MoE workspace  [+ T · 2H · b between pipeline stages]

``c`` is the release's bytes a logit (:mod:`explorer.engines.vllm_release`:
38.9 up to 0.16, 15.5 from 0.17); the forward term is the residual, normed,
attention and MLP live set of one layer (``h`` hidden-size tensors: 4 in V1, 3 in V0;
``I`` the dense or shared-expert width, ``b`` the activation bytes), which only beats the sampler for small
vocabularies; the fused-MoE kernels keep two intermediate buffers of
``T · k · 2·I_expert/tp`` values alive (none for MXFP4 experts, which run on
their own kernels); a pipeline stage holds the ``T × 2H`` tensors it hands
on. Fitted on the vLLM 0.19 H100 logs (docs/notes/engine_logs.md): Llama-3.1-8B
1.89 GiB logged, 1.89 predicted; Qwen3-30B-A3B 2.68 / 2.62; gpt-oss-20b 2.87 / 2.97.

**CUDA graphs**: 0.10 GiB + 7 MiB a graph, PIECEWISE and FULL graphs for
each capture size (0.19's estimate for Llama-3.1-8B: 0.84 GiB for 2 × 51).
"""

from __future__ import annotations

from functools import lru_cache

from explorer.engines.calibration import Calibration
from explorer.engines.request import PlanRequest
from explorer.engines.vllm_release import VLLMRelease
from explorer.hardware.catalogue import GPUClass
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.units import GiB, MiB, cdiv, round_up

GRAPH_BASE_BYTES = GiB // 10
GRAPH_BYTES = 7 * MiB
#: graphs captured per batch size (FULL_AND_PIECEWISE, the V1 default)
GRAPH_MODES = 2
BIG_CARD_BYTES = 70 * GiB
#: V0 turns chunked prefill on past this context, with chunks of 512 tokens
V0_CHUNKED_CONTEXT = 32 * 1024
V0_CHUNK_TOKENS = 512


def scheduler_defaults(gpu: GPUClass, request: PlanRequest, release: VLLMRelease) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) as ``vllm serve`` picks them for a card.

    V1: 8192 and 1024 on cards of 70 GiB or more (A100 excepted), else 2048 and 256.
    V0: 256 sequences; 512-token chunks past a 32K context, else the whole context.
    """
    if not release.v1:
        context = request.context_tokens
        chunk = V0_CHUNK_TOKENS if context > V0_CHUNKED_CONTEXT else max(context, 2048)
        tokens, seqs = request.max_num_batched_tokens or chunk, request.max_num_seqs or 256
        return tokens, min(seqs, tokens)
    big = gpu.memory_bytes >= BIG_CARD_BYTES and "a100" not in gpu.name
    tokens = request.max_num_batched_tokens or (8192 if big else 2048)
    seqs = request.max_num_seqs or (1024 if big else 256)
    return tokens, min(seqs, tokens)


def capture_sizes(max_num_seqs: int, max_tokens: int) -> int:
    """How many batch sizes vLLM captures CUDA graphs for: [1, 2, 4], 8..248 by 8, 256.. by 16."""
    largest = min(2 * max_num_seqs, 512, max_tokens)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, largest + 1, 16)]
    return sum(1 for s in sizes if s <= largest)


def graph_bytes(seqs: int, tokens: int, calibration: Calibration | None) -> int:
    """The CUDA-graph pool: measured when calibrated, else 0.10 GiB + 7 MiB a graph."""
    if calibration is not None and calibration.graph_bytes is not None:
        return calibration.graph_bytes
    return GRAPH_BASE_BYTES + GRAPH_BYTES * GRAPH_MODES * capture_sizes(seqs, tokens)


def non_torch_bytes(release: VLLMRelease, tp: int, pp: int, calibration: Calibration | None) -> int:
    """Non-torch memory inside the budget on one card: measured when calibrated alike, else the release's."""
    if calibration is not None and calibration.non_torch_bytes is not None and calibration.distributed == (tp > 1):
        return calibration.non_torch_bytes
    return release.non_torch_bytes(tp, pp)


@lru_cache(maxsize=64)
def _widths(shape: ModelShape) -> tuple[int, int]:
    """(widest dense or shared-expert MLP, routed expert intermediate size) of any layer."""
    dense = 0
    for layer in {id(layer.tensors): layer for layer in shape.decoder}.values():
        rows = sum(t.rows for t in layer.tensors if t.role in ("mlp", "shared_expert") and t.split == "column")
        dense = max(dense, rows // 2)
    return dense, shape.moe.moe_intermediate_size if shape.moe else 0


def _moe_workspace(shape: ModelShape, precision: Precision, tp: int, ep: int, tokens: int, act: int) -> int:
    moe = shape.moe
    if moe is None or not moe.moe_layers:
        return 0
    expert = next((t for layer in shape.decoder for t in layer.tensors if t.role == "expert" and t.cols > 1), None)
    fmt = precision.format_for(expert, 0) if expert is not None else None
    if fmt is not None and fmt.kind == "mxfp4":
        return 0
    inter = moe.moe_intermediate_size if ep > 1 else cdiv(moe.moe_intermediate_size, tp)
    return 2 * tokens * moe.experts_per_token * 2 * inter * act


def activation_bytes(
    shape: ModelShape,
    precision: Precision,
    tp: int,
    ep: int,
    pp: int,
    tokens: int,
    seqs: int,
    last_stage: bool,
    release: VLLMRelease,
    calibration: Calibration | None = None,
) -> int:
    """The profiling run's activation peak on one card (module docstring), scaled by a calibration."""
    act = 4 if shape.dtype == "fp32" else 2
    dense, _ = _widths(shape)
    peak = tokens * (release.forward_hidden_copies * shape.hidden_size + 3 * cdiv(dense, tp)) * act
    if last_stage:
        peak = max(peak, int(release.sampler_bytes_per_logit * seqs * round_up(shape.vocab_size, 64)))
    peak += _moe_workspace(shape, precision, tp, ep, tokens, act)
    if pp > 1:
        peak += tokens * 2 * shape.hidden_size * act
    if calibration is not None and calibration.activation_scale is not None:
        peak = int(peak * calibration.activation_scale)
    return peak
