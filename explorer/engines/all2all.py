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
* SGLang ``python/sglang/srt/layers/moe/token_dispatcher/deepep.py`` (``DeepEPBuffer.get_deepep_buffer``):
  ``--moe-a2a-backend deepep --deepep-mode low_latency`` asks for the same low-latency RDMA hint at
  ``SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` (128) tokens and no NVLink buffer, and asserts
  ``num_experts % group.size() == 0``; ``--deepep-mode normal`` for the NVLink and RDMA hints of DeepEP's
  recommended dispatch and combine configs (``deep_ep/buffer.py``, ``csrc/config.hpp``
  ``Config::get_nvl_buffer_size_hint`` / ``get_rdma_buffer_size_hint``), the larger of the two each; ``auto`` both.
  One buffer a process (a class attribute), made at the first dispatch on the group its dispatcher was given.

  When SGLang makes it, read at sgl-project/sglang commits ``003a81bf2870c07b110de13641ad4f0ba63b1fa1``
  (``token_dispatcher/deepep.py``), ``001067fffe33427bee0ed2f007fb7551a1d76b44`` (``server_args.py``
  ``_handle_a2a_moe``) and ``003bbaf9ab79c09933e7a17ae6460ac48a756de9`` (``arg_groups/overrides.py``
  ``_a2a_ep_size``), with ``layers/moe/fused_moe_triton/layer.py`` ``create_moe_dispatcher``: every MoE layer
  gets a DeepEP dispatcher on ``get_tp_group()`` whenever the backend is ``deepep``, and ``_a2a_ep_size`` sets
  ``ep_size = tp_size`` whatever ``--ep-size`` asked. So the buffer is made with ``--enable-dp-attention`` and
  without it (``_handle_a2a_moe`` requires DP attention of the ``flashinfer`` backend only, not of ``deepep``;
  ``normal`` there only turns CUDA graphs off), and with pipeline parallelism too, on each stage's tp ranks
  (sglang PR 17823 fixed DeepEP across pp stages): a rank's buffer is sized for the tp ranks of its stage. SGLang
  refuses what DeepEP refuses: a rank count without a normal config ("Unsupported number of EP ranks"), experts
  that do not divide over the ranks (low latency; and ``FusedMoE``'s ``num_experts % moe_ep_size == 0`` for
  any mode, :func:`explorer.engines.sglang.refusals`).
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
    "AUTO",
    "DEEPEP_MODE",
    "HIGH_THROUGHPUT",
    "LOW_LATENCY",
    "SGLANG_DISPATCH_TOKENS",
    "VLLM_BACKENDS",
    "VLLM_BUFFER_BYTES",
    "VLLM_DISPATCH_TOKENS",
    "backend_refusals",
    "buffer_note",
    "low_latency_rdma_bytes",
    "normal_buffer_bytes",
    "sglang_buffer_bytes",
    "vllm_buffer_bytes",
]

Backend = Literal["deepep_high_throughput", "deepep_low_latency", "deepep_auto"]
HIGH_THROUGHPUT: Backend = "deepep_high_throughput"
LOW_LATENCY: Backend = "deepep_low_latency"
AUTO: Backend = "deepep_auto"
#: the backends explorer sizes, in vLLM's ``--all2all-backend`` spelling (SGLang: ``--moe-a2a-backend deepep`` with
#: ``--deepep-mode normal``, ``low_latency``, or ``auto``, SGLang's default, which holds both kernels' buffers)
ALL2ALL_BACKENDS: tuple[Backend, ...] = (HIGH_THROUGHPUT, LOW_LATENCY, AUTO)
#: those vLLM runs (it has no auto mode)
VLLM_BACKENDS: tuple[Backend, ...] = (HIGH_THROUGHPUT, LOW_LATENCY)
#: SGLang's ``--deepep-mode`` for each backend
DEEPEP_MODE: dict[str, str] = {HIGH_THROUGHPUT: "normal", LOW_LATENCY: "low_latency", AUTO: "auto"}
#: vLLM's ``VLLM_DEEPEP_BUFFER_SIZE_MB`` default (1,024 MiB), its NVLink (and across nodes RDMA) buffer
VLLM_BUFFER_BYTES = 1024 * MiB
#: vLLM's ``VLLM_MOE_DP_CHUNK_SIZE`` default: the tokens a rank dispatches at most in one low-latency call
VLLM_DISPATCH_TOKENS = 256
#: SGLang's ``SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` default
SGLANG_DISPATCH_TOKENS = 128
#: DeepEP's ``NUM_BUFFER_ALIGNMENT_BYTES`` and the signalling buffers' alignment
_ALIGN = 128
#: DeepEP (``csrc/kernels/configs.cuh``, ``config.hpp``): NVLink peers a node, the top-k and scale slots a token,
#: ``sizeof(SourceMeta)`` (two ints), and ``Buffer.num_sms`` (20, SGLang's too without ``--deepep-config``)
_NVL_PEERS, _MAX_TOPK, _MAX_SCALES, _SOURCE_META_BYTES, _NUM_SMS = 8, 128, 128, 8, 20
#: DeepEP ``Buffer.get_dispatch_config`` / ``get_combine_config``: EP ranks -> (NVLink receive tokens, RDMA send
#: tokens, RDMA receive tokens) of the recommended config
_DISPATCH_CONFIGS = {
    2: (256, 6, 128), 4: (256, 6, 128), 8: (256, 6, 128), 16: (288, 20, 128), 24: (288, 32, 128),
    32: (288, 32, 128), 64: (288, 28, 128), 128: (560, 32, 128), 144: (720, 12, 128), 160: (720, 12, 128),
}  # fmt: skip
_COMBINE_CONFIGS = {
    2: (256, 6, 128), 4: (256, 6, 128), 8: (256, 6, 128), 16: (288, 28, 128), 24: (288, 20, 128),
    32: (288, 20, 128), 64: (288, 20, 128), 128: (560, 12, 128), 144: (720, 8, 128), 160: (720, 8, 128),
}  # fmt: skip


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


def normal_buffer_bytes(hidden_bytes: int, ranks: int) -> int | None:
    """DeepEP's high-throughput ("normal") buffers on each of ``ranks``: the larger of the dispatch and combine
    configs' NVLink hint plus the larger RDMA hint (none within a node), as SGLang asks for them; None for a rank
    count DeepEP has no config for ("Unsupported number of EP ranks")."""
    hints = _normal_hints(hidden_bytes, ranks)
    return None if hints is None else sum(hints)


def _normal_hints(hidden_bytes: int, ranks: int) -> tuple[int, int] | None:
    """(NVLink, RDMA) bytes of the normal kernels' buffers, the larger of the dispatch and combine configs'."""
    configs = (_DISPATCH_CONFIGS.get(ranks), _COMBINE_CONFIGS.get(ranks))
    if configs[0] is None or configs[1] is None:
        return None
    nvl = max(_nvl_hint(hidden_bytes, ranks, nvl_recv) for nvl_recv, _, _ in configs)
    rdma = max(_rdma_hint(hidden_bytes, ranks, send, recv) for _, send, recv in configs)
    return nvl, rdma


def _nvl_hint(hidden_bytes: int, ranks: int, recv_tokens: int) -> int:
    """``Config::get_nvl_buffer_size_hint``: per channel (SMs / 2) and NVLink peer, ``recv_tokens`` tokens of hidden
    bytes, source meta, 128 top-k indices (8 bytes) and weights (4) and 128 scales (4), and the channels' counters.
    DeepSeek-V3 (bf16 hidden 14,336 bytes) on 8 ranks: 10 × 8 × 256 × (14,336 + 8 + 1,024 + 512 + 512) + 10 × 8 × 5
    × 4 = 335,709,760, rounded to 335,709,824."""
    rdma_ranks, nvl_ranks, channels = max(ranks // _NVL_PEERS, 1), min(ranks, _NVL_PEERS), _NUM_SMS // 2
    per_token = hidden_bytes + _SOURCE_META_BYTES + _MAX_TOPK * 8 + _MAX_TOPK * 4 + _MAX_SCALES * 4
    total = channels * nvl_ranks * ((2 * rdma_ranks + 3) * 4 + recv_tokens * per_token)
    return cdiv(total, _ALIGN) * _ALIGN


def _rdma_hint(hidden_bytes: int, ranks: int, send_tokens: int, recv_tokens: int) -> int:
    """``Config::get_rdma_buffer_size_hint``: 0 within a node; across nodes, per channel and RDMA peer, twice the
    receive tokens (aligned up to the send chunk) of hidden bytes, source meta, top-k, scales and an int4, the
    counters, and 1 MiB "to be safe"."""
    if ranks <= _NVL_PEERS:
        return 0
    recv = cdiv(recv_tokens, send_tokens) * send_tokens
    rdma_ranks, channels = ranks // _NVL_PEERS, _NUM_SMS // 2
    per_token = hidden_bytes + _SOURCE_META_BYTES + _MAX_TOPK * 8 + _MAX_TOPK * 4 + _MAX_SCALES * 4 + 16
    total = channels * rdma_ranks * ((_NVL_PEERS * 2 + 2) * 2 * 4 + recv * per_token * 2) + MiB
    return cdiv(total, _ALIGN) * _ALIGN


def sglang_buffer_bytes(backend: str | None, hidden: int, experts: int, ranks: int) -> int:
    """One rank's DeepEP buffer under SGLang's ``--moe-a2a-backend deepep``: ``--deepep-mode low_latency`` the
    low-latency RDMA hint at 128 tokens; ``normal`` DeepEP's config hints at a bf16 hidden state (2 bytes a value:
    the larger of SGLang's two dispatch dtypes); ``auto`` both: the normal NVLink hint and the larger RDMA one.
    0 without the backend or where DeepEP has no config for ``ranks`` (:func:`backend_refusals` refuses that)."""
    if backend == LOW_LATENCY:
        return low_latency_rdma_bytes(SGLANG_DISPATCH_TOKENS, hidden, experts)
    hints = _normal_hints(2 * hidden, ranks)
    if backend not in (HIGH_THROUGHPUT, AUTO) or hints is None:
        return 0
    nvl, rdma = hints
    if backend == AUTO:
        rdma = max(rdma, low_latency_rdma_bytes(SGLANG_DISPATCH_TOKENS, hidden, experts))
    return nvl + rdma


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
    if backend in (HIGH_THROUGHPUT, AUTO) and ep not in _DISPATCH_CONFIGS:
        return [
            (
                "all2all-backend",
                f"DeepEP's high-throughput kernels have no config for {ep} ranks (its message: "
                f"'Unsupported number of EP ranks: {ep}'; {', '.join(map(str, _DISPATCH_CONFIGS))})",
            )
        ]
    if backend in (LOW_LATENCY, AUTO) and shape.moe.experts % ep:
        return [
            (
                "all2all-backend",
                f"DeepEP's low-latency kernels need the experts ({shape.moe.experts}) to divide "
                f"evenly over the {ep} ranks",
            )
        ]
    return []


def buffer_note(backend: str, nbytes: int) -> str:
    """The note that says what the backend holds on each rank: ``deepep_low_latency: 2.78 GiB of DeepEP buffers a
    rank``."""
    return f"{backend}: {nbytes / 2**30:.2f} GiB of DeepEP buffers a rank (NVLink + NVSHMEM, outside the KV cache)"
