"""The buffers an expert-parallel all-to-all backend allocates on each rank (issue 23).

vLLM's default all-to-all (``allgather_reducescatter``) and SGLang's (``--moe-a2a-backend none``) move tokens with
NCCL collectives and keep no buffer of their own. DeepEP's kernels do: a ``deep_ep.Buffer`` on every rank of the
expert-parallel group, ``num_nvl_bytes`` of CUDA memory shared over NVLink and ``num_rdma_bytes`` of NVSHMEM memory.

Sources, read at the engines' pinned releases and DeepEP's main branch:

* vLLM ``vllm/distributed/device_communicators/all2all.py``: ``DeepEPHTAll2AllManager`` (``--all2all-backend
  deepep_high_throughput``) asks for ``VLLM_DEEPEP_BUFFER_SIZE_MB`` (1,024) MiB of NVLink buffer and, across nodes,
  as much RDMA buffer (none within one node); ``DeepEPLLAll2AllManager`` (``deepep_low_latency``) the same NVLink
  buffer and ``Buffer.get_low_latency_rdma_size_hint(VLLM_MOE_DP_CHUNK_SIZE (256) tokens, hidden, ranks, experts)``
  (``fused_moe/all2all_utils.py``: ``max_num_tokens_per_dp_rank=moe.max_num_tokens``).
* SGLang ``python/sglang/srt/layers/moe/token_dispatcher/deepep.py``: ``--moe-a2a-backend deepep --deepep-mode
  low_latency`` asks for the same low-latency RDMA hint at ``SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK``
  (128) tokens and no NVLink buffer.
* DeepEP ``csrc/config.hpp`` ``LowLatencyLayout``: two (odd/even) send, receive and signalling buffers; a dispatch
  message is ``16 + max(2 × hidden, hidden + 4 × hidden / 128)`` bytes (bf16, or fp8 with its scales), a combine
  message ``4 × hidden / 128 + 2 × hidden``; the total rounded as ``(n + 128) // 128 × 128``.
"""

from __future__ import annotations

from typing import Literal

from explorer.engines.parallel_rules import Refusal
from explorer.model.shapes import ModelShape
from explorer.units import MiB, cdiv

__all__ = [
    "ALL2ALL_BACKENDS",
    "HIGH_THROUGHPUT",
    "LOW_LATENCY",
    "SGLANG_DISPATCH_TOKENS",
    "VLLM_BUFFER_BYTES",
    "VLLM_DISPATCH_TOKENS",
    "backend_refusals",
    "buffer_note",
    "low_latency_rdma_bytes",
    "sglang_buffer_bytes",
    "vllm_buffer_bytes",
]

Backend = Literal["deepep_high_throughput", "deepep_low_latency"]
HIGH_THROUGHPUT: Backend = "deepep_high_throughput"
LOW_LATENCY: Backend = "deepep_low_latency"
#: the backends explorer sizes, in vLLM's ``--all2all-backend`` spelling (SGLang: ``--moe-a2a-backend deepep`` with
#: ``--deepep-mode normal`` or ``low_latency``)
ALL2ALL_BACKENDS: tuple[Backend, ...] = (HIGH_THROUGHPUT, LOW_LATENCY)
#: vLLM's ``VLLM_DEEPEP_BUFFER_SIZE_MB`` default (1,024 MiB), its NVLink (and across nodes RDMA) buffer
VLLM_BUFFER_BYTES = 1024 * MiB
#: vLLM's ``VLLM_MOE_DP_CHUNK_SIZE`` default: the tokens a rank dispatches at most in one low-latency call
VLLM_DISPATCH_TOKENS = 256
#: SGLang's ``SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` default
SGLANG_DISPATCH_TOKENS = 128
#: DeepEP's ``NUM_BUFFER_ALIGNMENT_BYTES`` and the signalling buffers' alignment
_ALIGN = 128


def low_latency_rdma_bytes(tokens_per_rank: int, hidden: int, experts: int) -> int:
    """DeepEP's ``get_low_latency_rdma_size_hint``: the low-latency kernels' NVSHMEM buffer on each rank.

    DeepSeek-V3 (hidden 7,168, 256 experts) at SGLang's 128 tokens: dispatch message 16 + 14,336 = 14,352 bytes,
    combine 224 + 14,336 = 14,560; send and receive buffers 256 × 128 × 14,560 = 477,102,080 each, twice
    over (odd/even): 1,908,408,320, + 2 × 1,024 of signals = 1,908,410,368, rounded to 1,908,410,496 (1.78 GiB).
    """
    scales = hidden // 128
    dispatch_msg = 16 + max(2 * hidden, hidden + 4 * scales)
    combine_msg = 4 * scales + 2 * hidden
    send = max(tokens_per_rank * dispatch_msg, experts * tokens_per_rank * combine_msg)
    receive = experts * tokens_per_rank * max(dispatch_msg, combine_msg)
    signals = cdiv(experts * 4, _ALIGN) * _ALIGN
    total = 2 * send + 2 * receive + 2 * signals
    return (total + _ALIGN) // _ALIGN * _ALIGN


def vllm_buffer_bytes(backend: str | None, hidden: int, experts: int, nodes: int) -> int:
    """One rank's DeepEP buffers under vLLM's ``--all2all-backend`` (0 for the default and the NCCL ones)."""
    if backend == HIGH_THROUGHPUT:
        return VLLM_BUFFER_BYTES * (2 if nodes > 1 else 1)
    if backend == LOW_LATENCY:
        return VLLM_BUFFER_BYTES + low_latency_rdma_bytes(VLLM_DISPATCH_TOKENS, hidden, experts)
    return 0


def sglang_buffer_bytes(backend: str | None, hidden: int, experts: int) -> int:
    """One rank's DeepEP buffer under SGLang's ``--moe-a2a-backend deepep --deepep-mode low_latency`` (0 without)."""
    if backend == LOW_LATENCY:
        return low_latency_rdma_bytes(SGLANG_DISPATCH_TOKENS, hidden, experts)
    return 0


def backend_refusals(shape: ModelShape, ep: int, backend: str | None, sized: tuple[str, ...]) -> list[Refusal]:
    """Why an asked all-to-all backend cannot be planned: one the engine's buffers are not sized for here
    (``sized``), a model without experts, or a layout without expert parallelism (ep 1)."""
    if backend is None:
        return []
    if backend not in sized:
        return [("all2all-backend", f"{backend}: explorer sizes the buffers of {', '.join(sized)} for this engine")]
    if shape.moe is None:
        return [("all2all-backend", f"{backend} moves a mixture of experts' tokens; this model has no experts")]
    if ep <= 1:
        return [("all2all-backend", f"{backend} runs between expert-parallel ranks; this layout has none (ep 1)")]
    return []


def buffer_note(backend: str, nbytes: int) -> str:
    """The note that says what the backend holds on each rank: ``deepep_low_latency: 2.78 GiB of DeepEP buffers a
    rank``."""
    return f"{backend}: {nbytes / 2**30:.2f} GiB of DeepEP buffers a rank (NVLink + NVSHMEM, outside the KV cache)"
