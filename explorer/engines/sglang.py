"""SGLang's memory accounting, per card.

SGLang keeps a static share ``mem_fraction_static`` of each card for the
weights and the KV pool; the rest is for activations and CUDA graphs
(``python/sglang/srt/server_args.py``, ``model_runner.py``). The share is
of the memory free when it looks, after distributed init and before the
weights load (``min_per_gpu_memory``, the least over ranks), not of the
card::

    KV pool = (total − CUDA context − NCCL/all-reduce buffers) × mem_fraction_static − weights

with the total torch's (79.19 GiB on an H100), the context 0.5 GiB (vLLM
measures 0.51 GiB on an H100 at start) and the distributed buffers 2.0 GiB
across NVLink-class cards (1.96 to 2.01 GiB logged at tp 8 on H200) or 0.23
GiB over PCIe (tp 2 on 24 GB cards); a calibration from the user's own log
replaces both (:mod:`explorer.engines.calibration`).

The default fraction depends on the card: SGLang picks a chunked-prefill
size and a CUDA-graph batch cap by card memory, then reserves (MiB)::

    512 + max(chunk, 2048) × 1.5 + graph_bs × 2 + tp × pp / 8 × 1024
    (+ DP-attention padding, + 2 GiB for EAGLE drafts or 6 GiB for a standalone draft)

at least 10 GiB on cards over 60 GiB, and ``mfs = round((total − reserved) /
total, 3)``; a vision model's fraction shrinks by 0.95 × a factor of its ViT's
size. Worked: an H100 (81,559 MiB) at tp 1 → 0.835; at tp 8 → 0.818; an RTX
4090 (24,564 MiB) → 0.847.

The KV pool holds ``kv_heads/tp × (head_dim + v_head_dim) × layers`` values
a token (an MLA latent whole on every card), with no block rounding.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import ClassVar

from explorer.artifacts.weight_formats import weight_formats
from explorer.engines import vllm
from explorer.engines.all2all import ALL2ALL_BACKENDS, DEEPEP_MODE, backend_refusals, buffer_note, sglang_buffer_bytes
from explorer.engines.attention_kernels import sparse_mla
from explorer.engines.calibration import Calibration, calibration_for
from explorer.engines.evaluation import CardMemory, Evaluation
from explorer.engines.host_ram import HostClaim, sglang_claim
from explorer.engines.interface import FleetLaunch, Footprint, SpeedFacts
from explorer.engines.layouts import Layout, card_role, pp_partition
from explorer.engines.load_dtype import served, sglang_auto_dtype
from explorer.engines.names import ENGINE_LABELS, EngineName
from explorer.engines.parallel_rules import Refusal, expert_size_refusals, pp_refusals, tp_refusals
from explorer.engines.request import PlanRequest
from explorer.engines.rope_cache import rope_cache_bytes, sglang_rope_dtype
from explorer.engines.serve_command import HEAD_ADDRESS, across_nodes, kv_cache_flags, load_flags, replaced_ref
from explorer.engines.setting import launch_flags
from explorer.engines.sglang_dp_attention import dp_attention_layouts, dp_attention_refusals
from explorer.engines.split_walk import SplitWalk, split_layout, tp_pp_splits
from explorer.engines.stage_kv import longest_stage_context, stage_kv_bytes
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.weights import WeightBreakdown, weight_breakdown
from explorer.units import GiB, MiB, cdiv, gib

#: (card memory below, MiB) → (chunked prefill tokens, graph batch cap at tp < 4, at tp ≥ 4)
CARD_TIERS: tuple[tuple[int, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),  # T4, RTX 4080
    (35 * 1024, 2048, 24, 80),  # A10, RTX 4090, RTX 5090
    (60 * 1024, 4096, 32, 160),  # A100 40G, L40S
    (90 * 1024, 8192, 256, 512),  # H100, A100 80G
    (160 * 1024, 8192, 256, 512),  # H20, H200
)
LARGE_CARD = (16384, 512, 512)  # B200, MI300X
#: what is in use before SGLang measures the free memory: the CUDA context, and at tp × pp > 1 the
#: NCCL and custom all-reduce buffers (NVLink-class cards, ≥ 200 GB/s of interconnect, or PCIe)
STARTUP_CONTEXT_BYTES = GiB // 2
DIST_INIT_NVLINK_BYTES = 2 * GiB
DIST_INIT_PCIE_BYTES = int(0.23 * GiB)
NVLINK_CLASS_BYTES_PER_S = 200 * 10**9
#: a bound of SGLang's default static share on any card: the catalogue's discrete cards top out at 0.911
#: (an MI355X, 288 GiB: 26,240 MiB reserved); an H100 at tp 1 takes 0.835
DEFAULT_SHARE_BOUND = 0.95


def card_defaults(card_mib: int, tp: int, request: PlanRequest) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks for a card of ``card_mib`` MiB."""
    chunk, small, large = LARGE_CARD
    for below, c, s, l in CARD_TIERS:
        if card_mib < below:
            chunk, small, large = c, s, l
            break
    graph_bs = small if tp < 4 else large
    return request.chunked_prefill_size or chunk, request.cuda_graph_max_bs or graph_bs


def reserved_mib(
    card_mib: int, tp: int, pp: int, dp: int, request: PlanRequest, attention_dp: bool = False
) -> tuple[float, float]:
    """(reserved MiB in all, of which the prefill activation reserve); ``attention_dp``: the launch runs DP
    attention (:func:`dp_attention`), whose padding SGLang reserves ``graph_bs × dp × 3`` MiB for (× 4.5 above a
    graph cap of 300: H200 at tp 8 dp 8, 512 × 8 × 4.5 = 18,432 MiB)."""
    chunk, graph_bs = card_defaults(card_mib, tp, request)
    prefill = max(chunk, 2048) * 1.5
    reserved = 512 + prefill + graph_bs * 2 + tp * pp / 8 * 1024
    if attention_dp:
        reserved += graph_bs * dp * 3
        if graph_bs > 300:
            reserved += graph_bs * dp * 1.5
    if card_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if request.speculative:
        algo = request.speculative.upper()
        reserved += 6 * 1024 if algo == "STANDALONE" else 0 if algo == "NGRAM" else 2 * 1024
    reserved += piecewise_graph_mib(request)
    return reserved, prefill


def piecewise_graph_mib(request: PlanRequest) -> float:
    """What piecewise CUDA graphs reserve: a quarter MiB per ``--piecewise-cuda-graph-max-tokens`` token, added
    after the 10 GiB floor (gpustack's MemFractionStaticCalculator, from SGLang's server_args); 0 when off or
    when no token count is given (4,096 tokens → 1,024 MiB)."""
    if not request.piecewise_cuda_graph:
        return 0.0
    return (request.piecewise_cuda_graph_max_tokens or 0) // 4


def vision_factor(shape: ModelShape) -> float:
    """SGLang's shrink for vision models: 0.95 × clamp(1 − 0.1 × (ViT size / ViT-L size − 1), 0.8, 1.05)."""
    v = shape.vision_tower
    if v is None:
        return 1.0
    ratio = v.layers * v.hidden_size**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def mem_fraction_static(shape: ModelShape, gpu: GPUClass, layout: Layout, request: PlanRequest) -> float:
    """SGLang's default ``mem_fraction_static`` for this card and layout (or the user's)."""
    if request.mem_fraction_static:
        return request.mem_fraction_static
    card_mib = gpu.memory_bytes // MiB
    reserved, _ = reserved_mib(card_mib, layout.tp, layout.pp, layout.dp, request, dp_attention(layout, request))
    fraction = round((card_mib - reserved) / card_mib, 3)
    factor = vision_factor(shape)
    return round(fraction * factor, 3) if factor != 1.0 else fraction


def startup_bytes(gpu: GPUClass, layout: Layout, calibration: Calibration | None) -> int:
    """Memory in use on a card before SGLang measures what is free (module docstring)."""
    if calibration is not None and calibration.startup_bytes is not None:
        return calibration.startup_bytes
    if layout.tp * layout.pp == 1:
        return STARTUP_CONTEXT_BYTES
    nvlink = (gpu.interconnect_bytes_per_s or 0) >= NVLINK_CLASS_BYTES_PER_S
    return STARTUP_CONTEXT_BYTES + (DIST_INIT_NVLINK_BYTES if nvlink else DIST_INIT_PCIE_BYTES)


def free_at_start_bytes(gpu: GPUClass, layout: Layout, calibration: Calibration | None) -> int:
    """What SGLang takes ``mem_fraction_static`` of: the torch-visible total less what start-up holds."""
    total = calibration.torch_memory_bytes if calibration and calibration.torch_memory_bytes else None
    return (total or gpu.visible_memory_bytes) - startup_bytes(gpu, layout, calibration)


#: architectures where SGLang keeps a sparse-attention (NSA) model's KV cache in fp8 when ``--kv-cache-dtype`` is
#: ``auto``: docs/basic_usage/deepseek_v32.md (stored commit 01253e4e), "the default configuration on H200 and
#: B200 ...: H200: ... ``bf16`` kv cache dtype; B200: ... ``fp8_e4m3`` kv cache dtype"
NSA_FP8_KV_ARCHITECTURES = frozenset({"blackwell"})


def default_kv_dtype(shape: ModelShape, gpu: GPUClass, kv_dtype: str) -> str:
    """The KV dtype SGLang runs with: the asked one, or for ``auto`` its default by model and card (fp8 for
    DeepSeek-V3.2's sparse attention on Blackwell: 656 + 132 bytes a token a layer, not 1,152 + 132)."""
    if kv_dtype not in ("auto", "") or gpu.architecture not in NSA_FP8_KV_ARCHITECTURES:
        return kv_dtype  # decided without reading the layers (asked for every layout a walk weighs)
    return "fp8" if sparse_mla(shape) else kv_dtype


#: SGLang's data parallelism across nodes (``server_args.py``: multi-node dp needs ``--enable-dp-attention``)
DP_NODES_RULE = (
    'SGLang runs data parallelism across nodes only with --enable-dp-attention (its message: "multi-node data '
    'parallel is not supported unless dp attention!"), and DP attention (--dp-attention here) applies only to '
    "models that support it (DeepSeek-style MLA and some MoE models); use one launch per node instead (the plan's "
    "replicas), or --tp over the nodes"
)


def refusals(shape: ModelShape, layout: Layout, request: PlanRequest) -> list[Refusal]:
    """Rules SGLang enforces: divisibility (the vision tower's heads skipped with ``--language-only``), and what
    pipeline parallelism and multi-node data parallelism cannot combine with."""
    out = tp_refusals(shape, layout.tp, check_vision=not request.language_only) + pp_refusals(shape, layout.pp)
    limit = shape.context_limit(keeps_stated_length=True)
    if request.context_tokens > limit:  # get_context_length keeps the stated length when rope names an original
        out.append(
            (
                "context-limit",
                f"SGLang derives a context length of {limit:,} (max_position_embeddings; its rope scaling names an "
                f"original length), below {request.context_tokens:,}: SGLang refuses a longer --context-length "
                "unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
            )
        )
    if layout.pp > 1 and (request.speculative or request.enable_mixed_chunk):
        what = "speculative decoding" if request.speculative else "mixed chunked prefill"
        out.append(("pp-incompatible", f"SGLang cannot combine pipeline parallelism (pp {layout.pp}) with {what}"))
    if request.speculative and request.enable_mixed_chunk:
        out.append(("spec-mixed-chunk", "SGLang cannot combine speculative decoding with --enable-mixed-chunk"))
    if layout.dp > 1 and layout.nodes > 1 and not dp_attention(layout, request):
        out.append(("dp-nodes", DP_NODES_RULE))
    if layout.ep > 1 and layout.tp % layout.ep:
        out.append(
            ("ep-size", f"SGLang splits experts by tp / ep: --ep-size {layout.ep} must divide --tp-size {layout.tp}")
        )
    if layout.ep > 1 and shape.moe is not None and shape.moe.experts % layout.ep:
        out.append(
            (
                "ep-size",
                f"SGLang's FusedMoE gives each of the {layout.ep} expert-parallel ranks whole experts: the "
                f"{shape.moe.experts} experts must divide by ep {layout.ep} (its check: num_experts % moe_ep_size == 0)",
            )
        )
    out += expert_size_refusals(shape, request)
    out += backend_refusals(shape, layout.ep, request.all2all_backend, ALL2ALL_BACKENDS)
    if request.kv_dtype not in ("auto", shape.dtype, *KV_CACHE_DTYPE):
        out.append(
            (
                "kv-dtype",
                f"SGLang has no {request.kv_dtype} KV cache (--kv-cache-dtype: auto, {', '.join(KV_CACHE_DTYPE)})",
            )
        )
    if (layout.tp * layout.pp) % layout.nodes:
        out.append(
            ("nnodes", f"tp × pp ({layout.tp * layout.pp}) must be divisible by the node count ({layout.nodes})")
        )
    return out


def forced_dp_attention(shape: ModelShape, tp: int, pp: int, request: PlanRequest) -> bool:
    """Whether SGLang runs this tensor-parallel launch with DP attention at dp = tp whether asked or not: a sparse-MLA
    (NSA) model, DeepSeek-V3.2 (``_handle_model_specific_adjustments``: "DP attention is enabled for DeepSeek
    NSA."), so its plan charges each card the attention weights whole and its own sequences' latents, as the
    engine will. Planned at pp 1 only (SGLang's recipe is ``--tp N --dp N``)."""
    return pp == 1 and tp > 1 and sparse_mla(shape) and not dp_attention_refusals(shape, tp, tp, request)


def dp_attention(layout: Layout, request: PlanRequest) -> bool:
    """Whether the launch runs DP attention (``--enable-dp-attention``): asked (``--dp-attention``), or a layout
    whose dp ranks share its tp cards (:attr:`Layout.attention_dp`: the KV-sharded layouts of
    :func:`~explorer.engines.sglang_dp_attention.dp_attention_layouts`)."""
    return request.dp_attention or layout.attention_dp


def attention_tp(layout: Layout, request: PlanRequest) -> int:
    """The attention's tensor-parallel size: tp, or under DP attention ``tp / dp`` (SGLang's ``attn_tp_size``:
    each DP rank's attention whole on ``tp / dp`` cards, its own sequences' KV cache beside it)."""
    if dp_attention(layout, request) and layout.dp > 1:
        return max(1, layout.tp // layout.dp)
    return layout.tp


def deepep_ep_size(tp: int) -> int:
    """The expert-parallel size SGLang runs under ``--moe-a2a-backend deepep``: the tp size, whatever ``--ep-size``
    asked (``arg_groups/overrides.py`` ``_a2a_ep_size``: "The expert parallel size is adjusted from 4 to the tensor
    parallel size [8]"); with pipeline parallelism, the tp size of a stage, whose ranks hold the buffer
    (:mod:`explorer.engines.all2all`)."""
    return tp


def ep_notes(layout: Layout, request: PlanRequest) -> tuple[str, ...]:
    """The note that SGLang overrides an ``--ep-size`` asked beside ``--moe-a2a-backend deepep`` (:func:`deepep_ep_size`)."""
    asked = request.expert_parallel_size
    if not request.all2all_backend or asked is None or asked == layout.ep or layout.ep <= 1:
        return ()
    return (
        f"--ep-size {asked} is not what SGLang runs: --moe-a2a-backend deepep sets the expert-parallel size to the "
        f"tp size, {layout.ep} (its log: 'The expert parallel size is adjusted from {asked} to the tensor parallel "
        f"size [{layout.ep}]'); planned so",
    )


def all2all_bytes(shape: ModelShape, layout: Layout, request: PlanRequest) -> int:
    """One rank's DeepEP buffer (:func:`explorer.engines.all2all.sglang_buffer_bytes`) for the ep = tp ranks of a
    stage, with DP attention or without and at any pp (SGLang makes it whenever ``--moe-a2a-backend deepep`` is
    set: :mod:`explorer.engines.all2all`). SGLang makes it at the first dispatch, after the KV pool is sized, so it
    must fit in what ``mem_fraction_static`` leaves."""
    if shape.moe is None or layout.ep <= 1:
        return 0
    return sglang_buffer_bytes(request.all2all_backend, shape.hidden_size, shape.moe.experts, layout.ep)


def card_weights(shape: ModelShape, precision: Precision, layout: Layout, request: PlanRequest) -> WeightBreakdown:
    """One card's weights: the dense and expert layers by tp (experts by ep), the attention by :func:`attention_tp`."""
    return weight_breakdown(shape, precision, layout.tp, layout.ep, attention_tp(layout, request))


def evaluate(
    shape: ModelShape, precision: Precision, layout: Layout, gpu: GPUClass, request: PlanRequest, model_ref: str
) -> Evaluation:
    """Per-card memory of an SGLang layout."""
    capacity = gpu.memory_bytes
    calibration = calibration_for(request.calibrations, "sglang", gpu.name)
    mfs = mem_fraction_static(shape, gpu, layout, request)
    free = free_at_start_bytes(gpu, layout, calibration)
    static = max(0, int(free * mfs))  # a reserve past the card (pp 61 on a T4) leaves nothing: a memory refusal
    attn_dp = dp_attention(layout, request)
    _, prefill_mib = reserved_mib(capacity // MiB, layout.tp, layout.pp, layout.dp, request, attn_dp)
    activations = min(int(prefill_mib * MiB), capacity - static)
    a2a = all2all_bytes(shape, layout, request)
    overhead = max(capacity - static - activations, a2a)  # the buffer comes out of what the static share leaves
    attn_tp = attention_tp(layout, request)
    weights = card_weights(shape, precision, layout, request)
    seqs_per_card = cdiv(request.concurrency, layout.dp) if attn_dp else request.concurrency
    kv_type = shape.kv_type(default_kv_dtype(shape, gpu, request.kv_dtype))

    def seq_kv(a: int, b: int, ctx: int) -> int:
        return stage_kv_bytes(shape, a, b, kv_type, attn_tp, ctx, 1)

    rope = rope_cache_bytes(shape, sglang_rope_dtype(shape, gpu))  # every stage builds its own
    stages = pp_partition(shape.layers, layout.pp)
    cards, pools = [], []
    for s, (a, b) in enumerate(stages):
        w = weights.stage_bytes(a, b, first=s == 0, last=s == len(stages) - 1) + rope
        per_seq = seq_kv(a, b, request.context_tokens)
        cards.append(
            CardMemory(
                role=card_role(layout, s, a, b),
                weights=w,
                kv_cache=per_seq * seqs_per_card,
                activations=activations,
                overhead=overhead,
                usable=capacity,
                capacity=capacity,
                count=layout.tp,
            )
        )
        pools.append((a, b, static - w, per_seq))
    max_context = longest_stage_context(
        shape,
        kv_type,
        attn_tp,
        tuple((a, b, pool) for a, b, pool, _ in pools),
        shape.context_limit(keeps_stated_length=True),
        1,  # SGLang's KV pool counts single tokens
        0,  # and keeps no prefill chunk beyond a window
    )
    conc = min((pool // kv if kv else request.concurrency) for _, _, pool, kv in pools)
    if attn_dp:
        conc *= layout.dp
    notes = (f"mem_fraction_static {mfs:g} of the {gib(free)} free at start", combined_note(cards, layout, mfs))
    if attn_dp and not request.dp_attention:
        notes += (
            f"DP attention: {layout.dp} attention ranks of {attn_tp} card(s), each card keeping only its own "
            f"{seqs_per_card} sequence(s)' KV cache, not every sequence's (--enable-dp-attention --dp-size {layout.dp})",
        )
    if a2a:
        notes += (buffer_note(request.all2all_backend or "", a2a),)
    notes += ep_notes(layout, request)
    if calibration is not None:
        notes += (calibration.note,)
    batch = card_defaults(capacity // MiB, layout.tp, request)
    head, workers = across_nodes(command(model_ref, shape, precision, layout, request, mfs, batch), layout.nodes,
                                 partial(rank_flags, layout.nodes))  # fmt: skip
    return Evaluation(
        cards=tuple(cards),
        host=None,
        max_context_tokens=max_context,
        max_concurrency=max(0, conc),
        command=head,
        notes=notes,
        workers=workers,
        meeting_ports=(DIST_INIT_FLAG,) if workers else (),
        free_needed_bytes=static,
    )


def combined_note(cards: list[CardMemory], layout: Layout, mfs: float) -> str:
    """SGLang's static need over the whole launch, as gpustack words it: weights + KV of every card ÷ the static
    share is what all cards together must offer, and each card must have that share of its memory free."""
    static = sum((c.weights + c.kv_cache) * c.count for c in cards) * max(1, layout.cards // layout.tp // layout.pp)
    cards = f"all {layout.cards} GPUs combined need" if layout.cards > 1 else "the GPU needs"
    return (
        f"with --mem-fraction-static={mfs:g}, {cards} at least "
        f"{gib(int(static / mfs))} and each card needs {int(mfs * 100)} % of its memory allocatable"
    )


#: ``--kv-cache-dtype`` for explorer's KV types (SGLang 0.5.10.post1 ``server_args.py``: auto, fp8_e5m2, fp8_e4m3,
#: bf16, bfloat16, fp4_e2m1); the others (fp16 on a bf16 model, fp32, llama.cpp's q8_0…) are refused
KV_CACHE_DTYPE = {"bf16": "bf16", "fp8": "fp8_e4m3"}


#: SGLang runs compressed-tensors W8A8 int8 checkpoints with its own int8 kernels (linear and MoE) when told so:
#: ``model_config.py`` lets ``--quantization w8a8_int8`` override a ``compressed-tensors`` config, and SGLang's
#: DeepSeek docs launch ``meituan/DeepSeek-R1-Channel-INT8`` with it
W8A8_INT8_FLAG = "--quantization w8a8_int8"


def int8_flags(precision: Precision) -> list[str]:
    """``--quantization w8a8_int8`` for compressed-tensors W8A8 int8 weights; none for any other."""
    return [W8A8_INT8_FLAG] if precision.method == "compressed-tensors" and "int8" in weight_formats(precision) else []


#: the port ``--dist-init-addr`` names on the head node (SGLang's docs use 5000; any free port does)
DIST_INIT_PORT = 5000
#: how every node of a launch names the head's rendezvous
DIST_INIT_FLAG = f"--dist-init-addr {HEAD_ADDRESS}:{DIST_INIT_PORT}"


def command(
    model_ref: str,
    shape: ModelShape,
    precision: Precision,
    layout: Layout,
    request: PlanRequest,
    mfs: float,
    batch: tuple[int, int],
) -> str:
    """The ``sglang.launch_server`` line for this layout, with every setting the plan assumed: the static share
    and ``batch`` (the chunked prefill size and the CUDA-graph batch cap, :func:`card_defaults`) are written
    out even at SGLang's defaults, which depend on the card and the release."""
    parts = ["python -m sglang.launch_server", f"--model-path {model_ref}"]
    if layout.tp > 1:
        parts.append(f"--tp-size {layout.tp}")
    if layout.pp > 1:
        parts.append(f"--pp-size {layout.pp}")
    if layout.ep > 1:
        parts.append(f"--ep-size {layout.ep}")
    if request.all2all_backend and layout.ep > 1:
        parts.append(f"--moe-a2a-backend deepep --deepep-mode {DEEPEP_MODE[request.all2all_backend]}")
    parts.append(f"--context-length {request.context_tokens}")
    parts.append(f"--mem-fraction-static {mfs:g}")
    if dp_attention(layout, request):
        parts.append(f"--enable-dp-attention --dp-size {layout.dp}")
    elif layout.dp > 1:
        parts.append(f"--dp-size {layout.dp}")
    parts += kv_cache_flags(shape, request.kv_dtype, KV_CACHE_DTYPE)
    parts += load_flags(shape, precision, SGLang.online_methods)
    parts += int8_flags(precision)
    # --speculative-algorithm, --chunked-prefill-size and --cuda-graph-max-bs (written out as resolved: SGLang's
    # defaults depend on the card and the release), --disable-cuda-graph… in their declarations' order
    chunk, graph_bs = batch
    parts += launch_flags(request, "sglang", resolved={"chunked_prefill_size": chunk, "cuda_graph_max_bs": graph_bs})
    if request.hierarchical_cache:  # the host pool's size (whole GB), or its ratio (SGLang's default 2 written out)
        size = request.hicache_size_gb
        parts.append(f"--hicache-size {size:.0f}" if size else f"--hicache-ratio {request.hicache_ratio:g}")
    return " ".join(parts)


def rank_flags(nodes: int, rank: int) -> str:
    """One node's flags in a launch across ``nodes`` nodes: its rank and the head's address."""
    return f"--nnodes {nodes} --node-rank {rank} {DIST_INIT_FLAG}"


@dataclass(frozen=True, slots=True)
class SGLang(SplitWalk):
    """SGLang for the planner (a :class:`~explorer.engines.interface.SplitEngine`).

    Across nodes it spans tensor parallelism itself (``--nnodes``), so that
    split comes first; DP attention makes dp equal to tp; a card offers its
    static share (``mem_fraction_static``) to the weights and the KV pool.
    """

    name: ClassVar[EngineName] = "sglang"
    label: ClassVar[str] = ENGINE_LABELS[name]
    #: fp8 quantises bf16 weights while loading (``--quantization fp8``)
    online_methods: ClassVar[frozenset[str]] = frozenset({"fp8"})
    #: prefill and decode on separate servers (``--disaggregation-mode prefill|decode``, Mooncake / NIXL)
    disaggregated_prefill: ClassVar[bool] = True
    #: the scheduler admits what its KV cache holds and queues the rest (``--max-running-requests`` caps them)
    queues_past_kv: ClassVar[bool] = True
    data_parallel_flag: ClassVar[str | None] = "--dp-size"
    #: SGLang's dp ranks of a mixture of experts share experts only under DP attention (``--enable-dp-attention``)
    expert_data_parallel: ClassVar[bool] = False
    attention_expert_parallel: ClassVar[bool] = True
    data_parallel_nodes_rule: ClassVar[str] = DP_NODES_RULE
    #: fitted on published vLLM and SGLang rows together (docs/notes/speed_model.md)
    speed: ClassVar[SpeedFacts] = SpeedFacts(
        efficiency=0.6, dense_layer_floor_s=0.25e-4, moe_layer_floor_s=0.625e-4, token_overhead_s=0.75e-3
    )

    def fleet_command(self, model_id: str, fleet: FleetLaunch) -> Evaluation:
        """``sglang.launch_server``: ``--mem-fraction-static`` the largest share of a card charged, rounded *up* to
        the hundredth, at most 1; several cards ``--tp-size``; the flags that load the model as its footprint sized
        it (``--dtype float16`` over a float32 checkpoint, ``--kv-cache-dtype``); across nodes a rank a node meeting
        at the head's ``--dist-init-addr`` (:func:`rank_flags`)."""
        cmd = f"python -m sglang.launch_server --model-path {model_id} --context-length {fleet.context_tokens}"
        if fleet.share is not None:
            cmd += f" --mem-fraction-static {min(math.ceil(fleet.share * 100) / 100, 1.0):.2f}"
        if fleet.cards > 1:
            cmd += f" --tp-size {fleet.cards}"
        cmd = " ".join((cmd, *fleet.load_flags))
        nodes = len(fleet.nodes)
        head, workers = across_nodes(cmd, nodes, partial(rank_flags, nodes))
        return fleet.evaluation(head, workers, (DIST_INIT_FLAG,) if workers else ())

    def prefill_chunk_tokens(self, gpu: GPUClass, request: PlanRequest) -> int:
        """``--chunked-prefill-size``: the request's, else SGLang's default for the card's memory."""
        return card_defaults(gpu.memory_bytes // MiB, 1, request)[0]

    def decompositions(self, nodes: int, width: int, request: PlanRequest) -> Iterator[tuple[int, int]]:
        """Across nodes tp over every card first (``--nnodes``), then tp within a node, most first."""
        if nodes > 1:
            yield nodes * width, 1
        yield from tp_pp_splits(nodes, width)

    def make_layout(
        self, pool: Pool, nodes: int, width: int, tp: int, pp: int, shape: ModelShape, request: PlanRequest
    ) -> Layout:
        """The split, with dp = tp under ``--enable-dp-attention`` (asked, or a sparse-MLA model's tensor-parallel
        launch, which SGLang turns to DP attention at dp = tp itself: :func:`forced_dp_attention`) and, on a mixture
        of experts, ep = tp under ``--moe-a2a-backend deepep`` whatever ``--ep-size`` says (:func:`deepep_ep_size`),
        else the user's ``--ep-size``."""
        ep = 1
        if shape.moe is not None:
            ep = deepep_ep_size(tp) if request.all2all_backend else request.expert_parallel_size or 1
        dp = tp if request.dp_attention or forced_dp_attention(shape, tp, pp, request) else 1
        return split_layout(self, pool, nodes, width, tp, pp, dp=dp, ep=ep)

    def refusals(self, shape: ModelShape, layout: Layout, request: PlanRequest) -> list[Refusal]:
        """Divisibility and combination rules (:func:`refusals`)."""
        return refusals(shape, layout, request)

    def kv_shard_layouts(
        self, shape: ModelShape, layout: Layout, gpu: GPUClass, request: PlanRequest
    ) -> tuple[Layout, ...]:
        """``layout`` with each DP attention size SGLang accepts there, smallest first: each tp card keeps only its
        own attention rank's sequences (:func:`~explorer.engines.sglang_dp_attention.dp_attention_layouts`)."""
        return dp_attention_layouts(shape, layout, request)

    def host_claim(self, layout: Layout, evaluation: Evaluation, request: PlanRequest) -> HostClaim:
        """Its hierarchical cache's host pool (:func:`explorer.engines.host_ram.sglang_claim`)."""
        return sglang_claim(layout, evaluation, request)

    def auto_dtype(self, shape: ModelShape, gpu: GPUClass) -> str:
        """The dtype it loads a float32 checkpoint at (float16, bfloat16 for Gemma: :func:`sglang_auto_dtype`)."""
        return sglang_auto_dtype(shape, gpu)

    def usable_share(self, request: PlanRequest) -> float:
        """A bound of ``mem_fraction_static``: the user's, else :data:`DEFAULT_SHARE_BOUND` (the default's
        depends on the layout; the bound only refuses weights that cannot fit at any)."""
        return max(DEFAULT_SHARE_BOUND, request.mem_fraction_static or 0.0)

    def card_weights(
        self, shape: ModelShape, precision: Precision, layout: Layout, request: PlanRequest
    ) -> WeightBreakdown:
        """The dense and expert layers by tp (experts by ep), the attention by :func:`attention_tp`."""
        return card_weights(shape, precision, layout, request)

    def evaluate(
        self,
        shape: ModelShape,
        precision: Precision,
        layout: Layout,
        gpu: GPUClass,
        request: PlanRequest,
        model_ref: str,
    ) -> Evaluation:
        """SGLang's accounting of one layout (:func:`evaluate`)."""
        return evaluate(shape, precision, layout, gpu, request, model_ref)

    def footprint(self, shape: ModelShape, artifact: Artifact, gpu: GPUClass | None, kv_dtype: str) -> Footprint:
        """vLLM's footprint: a fleet offers each card a share of its memory, which is vLLM's budget rule,
        not SGLang's static fraction; the model as SGLang loads it (a float32 checkpoint at float16, a published
        checkpoint from its repository: :func:`replaced_ref`), and the flags that make SGLang load it so; no
        kv-split widths (:attr:`~explorer.engines.interface.Footprint.kv_split_widths` are vLLM's ``-dcp`` sizes,
        and SGLang's fleet launch is plain ``--tp-size``)."""
        if gpu is None:
            return vllm.ENGINE.footprint(shape, artifact, gpu, kv_dtype)  # refused there: it needs a GPU class
        loaded, precision = served(self, shape, artifact, gpu)
        flags = (*kv_cache_flags(loaded, kv_dtype, KV_CACHE_DTYPE), *load_flags(loaded, precision, self.online_methods),
                 *int8_flags(precision))  # fmt: skip
        ref = replaced_ref(loaded, artifact, precision, self.online_methods)
        vllms = vllm.ENGINE.footprint(loaded, artifact, gpu, kv_dtype)
        return replace(vllms, load_flags=flags, model_ref=ref, kv_split_widths=())


ENGINE = SGLang()
