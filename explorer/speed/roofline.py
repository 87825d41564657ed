"""The roofline behind :mod:`explorer.speed.estimate`: where an option's layers run, and how long a step takes.

A :class:`Placement` lists the *parts* a token passes through one after the
other — pipeline stages (one card's share of each, under tensor
parallelism), llama.cpp's GPU layers, the layers left on the host — each
with the bandwidth and FLOPs of the device it runs on, and the hand-offs
between them. :func:`decode_cycle_s` and :func:`prefill_s` turn a placement
into seconds; both are upper bounds on speed (lower bounds on time):

- a part's step is ``max(bytes read / bandwidth, FLOPs / peak)`` plus, under
  tensor parallelism, two ring all-reduces a layer:
  ``latency + 2(tp − 1)/tp × batch × hidden × 2 bytes / one-way link bandwidth``,
  and under data + expert parallelism a dispatch and a combine a MoE layer
  (each rank its own ⌈batch / dp⌉ sequences, its experts every rank's tokens);
  under vLLM's decode context parallelism a card reads 1/dcp of the KV cache
  and each attention layer adds three collectives over the dcp ranks (the
  queries gathered, the partial outputs' LSE gathered, the outputs
  reduce-scattered: :func:`dcp_exchange_bytes`);
- the estimate (:func:`part_estimate_s`) divides the roofline step by the
  efficiency, holds it to the layers' kernel floors, and pays the collectives
  at what they take in practice;
- a hand-off moves ``batch × hidden`` activations (2 bytes; llama.cpp 4) over
  its link, with the link's latency;
- llama.cpp runs its parts one after another for the whole batch; vLLM and
  SGLang split the batch into up to ``pp`` micro-batches that overlap, so a
  step cycle is ``max(Σ stages + hand-offs, micro-batches × slowest stage)``.

The link, fabric and host figures are in :mod:`explorer.speed.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.layouts import pp_partition
from explorer.engines.stage_kv import stage_kv_bytes
from explorer.memo import memo
from explorer.model.kv_cache import FullAttention, MLAAttention
from explorer.speed.floor import Pace, speed_facts
from explorer.speed.profile import (
    StageProfile,
    attention_width,
    experts_touched,
    held_sum,
    q_heads_per_card,
    stage_profile,
)
from explorer.speed.settings import (
    ACTIVATION_BYTES,
    ALLTOALL_LATENCIES,
    COLLECTIVE_ESTIMATE_S,
    FABRIC_LATENCY_S,
    HOST_LINK_MAX_BYTES_PER_S,
    LLAMACPP_ACTIVATION_BYTES,
    PCIE_LATENCY_S,
    RPC_LATENCY_S,
    UNKNOWN_LINK_BYTES_PER_S,
    SpeedSettings,
    card_link,
    card_link_kind,
    fabric_bytes_per_s,
    peak_flops_per_s,
)
from explorer.units import cdiv


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """Layers one device runs in turn (one card's share of them under tensor parallelism).

    Attributes:
        profile: what the card holds and computes.
        bandwidth_bytes_per_s: its memory bandwidth.
        flops_per_s: its peak for these weights (0: unknown, compute ignored).
        host: runs on the CPU.
        link_bytes_per_s: one-way bandwidth of the tensor-parallel all-reduce (0: no tensor parallelism).
        link_latency_s: latency of one all-reduce (the bound's).
        link_kind: ``nvlink``, ``pcie`` or ``fabric``: what a collective takes in practice
            (:data:`~explorer.speed.settings.COLLECTIVE_ESTIMATE_S`, the estimate's).
        dispatch_ranks: expert-parallel ranks a MoE layer dispatches tokens to and combines them from
            (data + expert parallelism; 0: the experts' outputs join the tensor-parallel all-reduce).
        data_parallel: data-parallel ranks the batch is spread over (data + expert parallelism): each rank
            runs its attention, dense layers and KV cache for its own share of the sequences, while its
            experts serve the tokens of every rank.
        kv_shards: decode-context-parallel ranks each sequence's KV tokens are spread over (vLLM ``-dcp``; 1:
            every tp card reads all of them).
        attention_ranks: DP attention ranks the batch's attention is spread over without expert parallelism
            (SGLang ``--enable-dp-attention``, ep < tp): a card attends to and reads the KV cache of its own rank's
            sequences only, while its dense and expert layers serve every token (gathered over the tp cards).
    """

    profile: StageProfile
    bandwidth_bytes_per_s: float
    flops_per_s: float
    host: bool = False
    link_bytes_per_s: float = 0.0
    link_latency_s: float = 0.0
    link_kind: str = "nvlink"
    dispatch_ranks: int = 0
    data_parallel: int = 1
    kv_shards: int = 1
    attention_ranks: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """The parts a token passes through, the hand-offs between them, and how they overlap.

    Attributes:
        parts: in the order a token visits them.
        hops: (one-way bytes/s, latency s) of each hand-off.
        activation_bytes: bytes per hidden value handed off.
        overlap: micro-batches overlap across pipeline stages (vLLM, SGLang).
        ubatch_tokens: llama.cpp prefill reads the weights once per ubatch of this many tokens (0: once).
        host_link_bytes_per_s: one-way host↔card bandwidth (llama.cpp streams host layers over it in prefill).
    """

    parts: tuple[Part, ...]
    hops: tuple[tuple[float, float], ...] = ()
    activation_bytes: int = ACTIVATION_BYTES
    overlap: bool = False
    ubatch_tokens: int = 0
    host_link_bytes_per_s: float = 0.0


@memo(1024, keyed_on="shape identity, precision, layout, card class, layers on host, head on host, ubatch, settings")
def placement(
    shape, precision, layout, gpu, layers_on_host: int, head_on_host: bool, ubatch_tokens: int, settings: SpeedSettings
) -> Placement | None:
    """Where the option's layers run; None when the device's bandwidth is unknown.

    ``layers_on_host``: llama.cpp's first layers left on the CPU; ``head_on_host``:
    the output head too (``-ngl 0``: llama.cpp offloads the head first, so any
    ``-ngl`` ≥ 1 puts it on a GPU).
    """
    host_bw, host_flops = float(settings.host_bandwidth_bytes_per_s), settings.host_tflops * 1e12
    host = {"bandwidth_bytes_per_s": host_bw, "flops_per_s": host_flops, "host": True}
    n = shape.layers
    if layout.cpu:
        return Placement(
            parts=(Part(profile=stage_profile(shape, precision, 1, 1, 0, n, True), **host),),
            activation_bytes=LLAMACPP_ACTIVATION_BYTES,
            ubatch_tokens=ubatch_tokens,
        )
    if gpu is None or not (gpu.bandwidth_bytes_per_s or layout.unified):
        return None
    if layout.unified:  # the chip's bandwidth; an unlisted uma host falls back to the host figures
        bw, flops = float(gpu.bandwidth_bytes_per_s or host_bw), gpu.bf16_tflops * 1e12 or host_flops
        link = latency = host_link = fabric_bw = 0.0
        kind = "nvlink"
    else:
        bw, flops = float(gpu.bandwidth_bytes_per_s), peak_flops_per_s(gpu, precision)
        link, latency = card_link(gpu)
        kind = card_link_kind(gpu)
        host_link = min(gpu.interconnect_bytes_per_s or UNKNOWN_LINK_BYTES_PER_S, HOST_LINK_MAX_BYTES_PER_S) / 2
        fabric_bw = fabric_bytes_per_s(layout.fabric, settings)
    fabric = (fabric_bw, RPC_LATENCY_S if layout.rpc else FABRIC_LATENCY_S)
    if speed_facts(layout.engine).host_layers:
        on_host = max(0, min(layers_on_host, n))
        head_host = head_on_host and on_host == n
        parts = []
        if on_host:  # llama.cpp keeps the first layers on the CPU
            parts.append(Part(profile=stage_profile(shape, precision, 1, 1, 0, on_host, head_host), **host))
        if on_host < n or not head_host:
            parts.append(
                Part(
                    profile=stage_profile(shape, precision, 1, 1, on_host, n, not head_host),
                    bandwidth_bytes_per_s=bw,
                    flops_per_s=flops,
                )
            )
        hops: list[tuple[float, float]] = []
        if len(parts) > 1 and not layout.unified:  # hidden states cross PCIe between the CPU and the first GPU
            hops.append((host_link, PCIE_LATENCY_S))
        network = max(0, layout.nodes - 1)
        hops += [fabric] * network + [(link, latency)] * max(0, layout.cards - 1 - network)
        return Placement(
            parts=tuple(parts),
            hops=tuple(hops),
            activation_bytes=LLAMACPP_ACTIVATION_BYTES,
            ubatch_tokens=ubatch_tokens,
            host_link_bytes_per_s=host_link,
        )
    # vLLM's dp ranks sharing experts; SGLang's DP attention with its experts spread whole (ep = tp), which serves
    # each DP rank as vLLM's data + expert parallelism does: attention whole at tp / dp, dispatch and combine
    attention_ep = layout.attention_dp and layout.ep == layout.tp
    dispatch = layout.ep if (layout.expert_dp or attention_ep) and shape.moe else 0
    rank_tp = max(1, layout.tp // layout.dp) if attention_ep else layout.tp
    # DP attention alone: each rank's attention whole on tp / dp cards, the dense and expert layers by tp
    attn_tp = max(1, layout.tp // layout.dp) if layout.attention_dp and not attention_ep else None
    # SGLang spans tp over nodes, and data + expert parallelism spans its ranks over them
    within = layout.nodes == 1 or (layout.tp <= layout.gpus_per_node and not dispatch)
    tp_link = (link, latency, kind) if within else (*fabric, "fabric")
    stages = pp_partition(n, layout.pp)
    parts = tuple(
        Part(
            profile=stage_profile(shape, precision, rank_tp, layout.ep, a, b, i == len(stages) - 1, attn_tp),
            bandwidth_bytes_per_s=bw,
            flops_per_s=flops,
            link_bytes_per_s=tp_link[0] if rank_tp > 1 or dispatch else 0.0,
            link_latency_s=tp_link[1],
            link_kind=tp_link[2],
            dispatch_ranks=dispatch,
            data_parallel=layout.dp if dispatch else 1,
            kv_shards=layout.dcp,
            attention_ranks=layout.dp if layout.attention_dp and not dispatch else 1,
        )
        for i, (a, b) in enumerate(stages)
    )
    network = min(max(0, layout.nodes - 1), layout.pp - 1) if layout.tp <= layout.gpus_per_node else 0
    return Placement(
        parts=parts,
        hops=(fabric,) * network + ((link, latency),) * (layout.pp - 1 - network),
        overlap=True,
        host_link_bytes_per_s=host_link,
    )


@dataclass(slots=True)
class Tally:
    """Seconds of one step by what bounds them, and the bytes read (for the breakdown).

    Attributes:
        memory_s: parts bound by their card's memory bandwidth.
        compute_s: parts bound by FLOPs (host parts too).
        host_s: host parts bound by host memory bandwidth.
        interconnect_s: all-reduces and hand-offs.
        weight_bytes: weights read over all parts.
        kv_bytes: KV cache read over all parts.
    """

    memory_s: float = 0.0
    compute_s: float = 0.0
    host_s: float = 0.0
    interconnect_s: float = 0.0
    weight_bytes: float = 0.0
    kv_bytes: float = 0.0

    @property
    def bound_by(self) -> str:
        """The largest share: ``memory bandwidth``, ``compute``, ``host memory`` or ``interconnect``."""
        shares = {
            "memory bandwidth": self.memory_s,
            "compute": self.compute_s,
            "host memory": self.host_s,
            "interconnect": self.interconnect_s,
        }
        return max(shares, key=shares.__getitem__)


def allreduce_bytes(tp: int, tokens: int, hidden: int, activation_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes each card sends in one ring all-reduce of ``tokens × hidden`` activations: 2(tp − 1)/tp × the tensor.

    Llama-3.1-70B at tp 4, one token: 2 × 3/4 × 8,192 × 2 bytes = 24,576 bytes a card; a layer has two.
    """
    return 2 * (tp - 1) / tp * handoff_bytes(tokens, hidden, activation_bytes) if tp > 1 else 0.0


def handoff_bytes(tokens: int, hidden: int, activation_bytes: int = ACTIVATION_BYTES) -> int:
    """Bytes a pipeline hand-off moves: the hidden states of ``tokens`` tokens (8,192 × 2 for one Llama-70B token)."""
    return tokens * hidden * activation_bytes


def dispatch_bytes(ranks: int, tokens: int, hidden: int, experts_per_token: int) -> float:
    """Bytes each rank sends in one expert-parallel dispatch (or combine): each token's hidden state (2 bytes a
    value) to each of its ``k`` experts, the share (ranks − 1)/ranks of them on other ranks.

    DeepSeek-V3 (hidden 7,168, k 8) over 8 ranks, one token: 8 × 7/8 × 7,168 × 2 = 100,352 bytes.
    """
    return tokens * experts_per_token * (ranks - 1) / ranks * hidden * ACTIVATION_BYTES if ranks > 1 else 0.0


#: collectives vLLM's decode context parallelism adds to an attention layer (``dcp_comm_backend="ag_rs"``, the
#: default: the queries' all-gather, then ``cp_lse_ag_out_rs``'s LSE all-gather and output reduce-scatter)
DCP_COLLECTIVES = 3
#: bytes of one softmax LSE value (fp32)
LSE_BYTES = 4


def dcp_exchange_bytes(cache, q_heads: int, dcp: int, tokens: int) -> float:
    """Bytes each card sends in one attention layer's decode-context-parallel exchange of ``tokens`` tokens.

    A card gathers the queries of its dcp group's ``q_heads`` heads each, attends them over its 1/dcp of the
    tokens, and the ``dcp × q_heads`` partial outputs and LSEs are merged back to their heads: of each ring
    collective a card sends (dcp − 1)/dcp of the gathered tensor, (dcp − 1) × its own share. MLA (absorbed)
    queries span the latent and rope dims, outputs the latent: Kimi-K2.5 at tp 8 dcp 8 (8 heads a card),
    one token: 7 × 8 × ((512 + 64) × 2 + 512 × 2 + 4) = 122,080 bytes.
    """
    if dcp <= 1:
        return 0.0
    if isinstance(cache, MLAAttention):
        q_width, out_width = cache.kv_lora_rank + cache.rope_dim, cache.kv_lora_rank
    elif isinstance(cache, FullAttention):
        q_width, out_width = cache.head_dim, cache.v_head_dim or cache.head_dim
    else:
        return 0.0
    per_head = (q_width + out_width) * ACTIVATION_BYTES + LSE_BYTES
    return float((dcp - 1) * tokens * q_heads * per_head)


def _dcp_s(shape, part: Part, tokens: int, latency_s: float) -> float:
    """A part's decode-context-parallel exchanges for ``tokens`` tokens: :data:`DCP_COLLECTIVES` latencies and
    :func:`dcp_exchange_bytes` an attention layer."""
    p = part.profile
    qh = q_heads_per_card(shape, p.tp)
    total = 0.0
    for cache, layers in p.caches:
        size = dcp_exchange_bytes(cache, qh, part.kv_shards, tokens)
        if size:
            total += layers * (DCP_COLLECTIVES * latency_s + size / part.link_bytes_per_s)
    return total


def _collectives_s(shape, part: Part, tokens: int, latency_s: float, *, decode: bool = True) -> float:
    """A part's collectives for ``tokens`` tokens, each paying ``latency_s``: two tensor-parallel all-reduces a
    layer, a dispatch and a combine a MoE layer under data + expert parallelism (each
    :data:`~explorer.speed.settings.ALLTOALL_LATENCIES` latencies), and in ``decode`` the decode-context-parallel
    exchanges (:func:`_dcp_s`; a fresh prompt attends on each card's own heads and stores 1/dcp of its tokens
    there, so prefill pays none of them [inferred from vLLM's MLA DCP, PR #23734])."""
    if not part.link_bytes_per_s:
        return 0.0
    p, total = part.profile, 0.0
    own = cdiv(tokens, part.data_parallel)  # a data-parallel rank all-reduces and dispatches its own tokens
    if p.tp > 1:
        size = allreduce_bytes(p.tp, own, shape.hidden_size, ACTIVATION_BYTES)
        total += 2 * p.layers * (latency_s + size / part.link_bytes_per_s)
    if part.dispatch_ranks and shape.moe:
        size = dispatch_bytes(part.dispatch_ranks, own, shape.hidden_size, shape.moe.experts_per_token)
        total += 2 * p.moe_layers * (ALLTOALL_LATENCIES * latency_s + size / part.link_bytes_per_s)
    if decode and part.kv_shards > 1:
        total += _dcp_s(shape, part, own, latency_s)
    return total


def _allreduce_s(shape, part: Part, tokens: int, *, decode: bool = True) -> float:
    """The bound's collectives: at the link's least latency (``decode``: with the decode-only exchanges)."""
    return _collectives_s(shape, part, tokens, part.link_latency_s, decode=decode)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """What one decode step costs one part, term by term (the roofline's inputs and its two times).

    Attributes:
        weight_bytes: weights read (dense share plus the touched share of routed experts).
        kv_bytes: KV cache read, all sequences.
        flops: floating-point operations (2 a parameter a token, plus attention over the held tokens).
        memory_s: bytes / bandwidth.
        compute_s: FLOPs / peak (0 when the peak is unknown).
        allreduce_s: the collectives: tensor-parallel all-reduces (two a layer), expert-parallel dispatch
            and combine (two a MoE layer under data + expert parallelism).
    """

    weight_bytes: float
    kv_bytes: int
    flops: float
    memory_s: float
    compute_s: float
    allreduce_s: float

    @property
    def seconds(self) -> float:
        """The part's step: ``max(memory, compute) + all-reduces``."""
        return max(self.memory_s, self.compute_s) + self.allreduce_s


def part_step_cost(shape, part: Part, batch: int, context: int, kv) -> StepCost:
    """One decode step of ``batch`` sequences at ``context`` tokens on one part, term by term.

    Under data + expert parallelism a rank reads its dense weights and the KV cache of its own ``⌈batch /
    dp⌉`` sequences, while its experts serve every rank's tokens (the share touched by ``batch`` tokens;
    their FLOPs ``2 × batch × k/E × expert params held``). Under DP attention alone a card reads the KV cache of
    its own attention rank's ``⌈batch / dp⌉`` sequences and attends over them, its dense layers seeing every token
    (DeepSeek-V3 at tp 8 dp 8, 64 sequences of 65,536 tokens: 8 × 65,536 × 35,136 fp8 bytes = 18.4 GB a card a
    step, not the 147.4 GB of every sequence's latent that tp 8 alone reads).
    """
    p, moe = part.profile, shape.moe
    own = cdiv(batch, part.data_parallel)
    attending = cdiv(own, part.attention_ranks)
    share = experts_touched(batch, moe.experts, moe.experts_per_token) if moe else 0.0
    k_over_e = moe.experts_per_token / moe.experts if moe and moe.experts else 0.0
    weights = p.dense_bytes + p.expert_bytes * share
    kv_read = stage_kv_bytes(shape, p.first_layer, p.end_layer, kv, p.tp, context, 1, dcp=part.kv_shards) * attending
    qh = q_heads_per_card(shape, p.tp)
    attn = sum(n * attention_width(c, qh) * c.tokens_held(context) for c, n in p.caches)
    flops = 2.0 * (own * p.dense_params + attending * attn) + 2.0 * batch * p.expert_params * k_over_e
    return StepCost(
        weight_bytes=weights,
        kv_bytes=kv_read,
        flops=flops,
        memory_s=(weights + kv_read) / part.bandwidth_bytes_per_s,
        compute_s=flops / part.flops_per_s if part.flops_per_s else 0.0,
        allreduce_s=_allreduce_s(shape, part, batch),
    )


def _part_step(shape, part: Part, batch: int, context: int, kv, tally: Tally | None) -> float:
    """One decode step of ``batch`` sequences at ``context`` tokens on one part."""
    cost = part_step_cost(shape, part, batch, context, kv)
    if tally is not None:
        tally.weight_bytes += cost.weight_bytes
        tally.kv_bytes += cost.kv_bytes
        tally.interconnect_s += cost.allreduce_s
        if cost.compute_s > cost.memory_s:
            tally.compute_s += cost.compute_s
        elif part.host:
            tally.host_s += cost.memory_s
        else:
            tally.memory_s += cost.memory_s
    return cost.seconds


def _hops_s(where: Placement, tokens: int, hidden: int) -> float:
    size = handoff_bytes(tokens, hidden, where.activation_bytes)
    return sum(latency + size / bw for bw, latency in where.hops)


def micro_batches(batch: int, stages: int) -> int:
    """How many micro-batches vLLM/SGLang split a decode batch into over ``stages`` pipeline stages: min(B, pp).

    One sequence is one micro-batch: it visits the stages in turn and each card idles (pp − 1)/pp of a cycle.
    """
    return min(batch, stages)


def part_estimate_s(shape, part: Part, batch: int, context: int, kv, pace: Pace) -> float:
    """The estimate of one decode step on one part: its roofline step / efficiency, never below its layers'
    kernel floors, plus its collectives at what they take in practice.

    ``max(max(memory, compute) / efficiency, dense layers × dense floor + MoE layers × MoE floor)
    + collectives(latency = COLLECTIVE_ESTIMATE_S[link kind])``.
    """
    cost = part_step_cost(shape, part, batch, context, kv)
    p = part.profile
    floor = pace.layers_s(p.layers - p.moe_layers, p.moe_layers)
    latency = COLLECTIVE_ESTIMATE_S[part.link_kind]
    return max(max(cost.memory_s, cost.compute_s) / pace.efficiency, floor) + _collectives_s(
        shape, part, batch, latency
    )


def decode_cycle_s(
    shape, where: Placement, batch: int, context: int, kv, tally: Tally | None = None, pace: Pace | None = None
) -> float:
    """Seconds between two tokens of one sequence when ``batch`` sequences decode together at ``context``: the
    bound, or with ``pace`` the estimate (each part's :func:`part_estimate_s`, plus the per-token overhead).

    Every sequence gets one token a cycle, so the aggregate rate is ``batch / cycle``.
    """

    def step(part: Part, size: int) -> float:
        if pace is None:
            return _part_step(shape, part, size, context, kv, tally)
        return part_estimate_s(shape, part, size, context, kv, pace)

    overhead = pace.token_s if pace is not None else 0.0
    if not where.overlap or len(where.parts) == 1:
        total = sum(step(p, batch) for p in where.parts)
        hops = _hops_s(where, batch, shape.hidden_size)
        if tally is not None:
            tally.interconnect_s += hops
        return total + hops + overhead
    micro = micro_batches(batch, len(where.parts))
    size = cdiv(batch, micro)
    steps = [step(p, size) for p in where.parts]
    hops = _hops_s(where, size, shape.hidden_size)
    if tally is not None:
        tally.interconnect_s += hops
    return max(sum(steps) + hops, micro * max(steps)) + overhead


def prefill_s(shape, where: Placement, prompt_tokens: int, sequences: int = 1) -> float | None:
    """Seconds to prefill ``sequences`` prompts of ``prompt_tokens`` each (compute-bound; weights read at least once).

    FLOPs a part: 2 × P × (dense + k/E × expert params) + 2 × Σ layers q heads ×
    (key + value dims) × Σ positions' held tokens (P(P+1)/2 for full attention).
    llama.cpp reads its weights once per ubatch; its host layers run either on
    the CPU or, streamed over PCIe, on the GPU (llama.cpp's op offload) —
    whichever is faster. None when a part's FLOPs are unknown.
    """
    p_tok, moe, seqs = prompt_tokens, shape.moe, max(1, sequences)
    share = experts_touched(p_tok * seqs, moe.experts, moe.experts_per_token) if moe else 0.0
    k_over_e = moe.experts_per_token / moe.experts if moe and moe.experts else 0.0
    passes = cdiv(p_tok * seqs, where.ubatch_tokens) if where.ubatch_tokens else 1
    gpu_flops = max((p.flops_per_s for p in where.parts if not p.host), default=0.0)
    total = _hops_s(where, p_tok * seqs, shape.hidden_size)
    for part in where.parts:
        if not part.flops_per_s:
            return None
        prof = part.profile
        qh = q_heads_per_card(shape, prof.tp)
        attn = sum(n * attention_width(c, qh) * held_sum(c, p_tok) for c, n in prof.caches)
        flops = 2.0 * seqs * (p_tok * (prof.dense_params + prof.expert_params * k_over_e) + attn)
        weights = prof.dense_bytes + prof.expert_bytes * share
        step = max(flops / part.flops_per_s, passes * weights / part.bandwidth_bytes_per_s)
        if part.host and gpu_flops and where.host_link_bytes_per_s:
            step = min(step, max(flops / gpu_flops, passes * weights / where.host_link_bytes_per_s))
        total += step + _allreduce_s(shape, part, p_tok * seqs, decode=False)
    return total
