"""vLLM's memory accounting, per card (V1 engine; V0 for releases before 0.8).

vLLM asks each card for ``total × gpu_memory_utilization`` (0.9 by default),
where the total is what CUDA shows the process (torch's ``total_memory``:
79.19 GiB on an H100 whose driver reports 79.65), and fills what its own use
leaves with KV cache blocks of 16 tokens (``vllm/v1/worker/gpu_worker.py``,
``kv_cache_utils.py``)::

    kv room = total × utilisation − weights − activation peak − non-torch [− CUDA graphs from 0.21]

- weights: this card's tensor/expert-parallel shard of its pipeline stage's
  layers (first stage: embeddings and vision tower; last: norm and LM head),
  MXFP4 experts as vLLM re-lays them (:mod:`explorer.engines.vllm_mxfp4`);
- activation peak, non-torch memory and CUDA graphs: :mod:`explorer.engines.vllm_budget`,
  by release (:mod:`explorer.engines.vllm_release`; ``PlanRequest.vllm_version``,
  the current release when unset), or as a calibration from the user's own
  log measured them (:mod:`explorer.engines.calibration`).

The KV cache must hold the asked context × concurrency; sliding-window
layers hold the window plus one prefill chunk; an MLA latent is whole on
every card, unless ``--decode-context-parallel-size`` splits it by token
(:mod:`explorer.engines.vllm_dcp`). Each figure's logs are in
docs/notes/engine_logs.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from explorer.engines.all2all import VLLM_BACKENDS, backend_refusals, buffer_note, vllm_buffer_bytes
from explorer.engines.attention_kernels import sparse_mla
from explorer.engines.calibration import Calibration, calibration_for
from explorer.engines.evaluation import CardMemory, Evaluation, NodeCommand
from explorer.engines.host_ram import HostClaim, vllm_claim
from explorer.engines.interface import FleetLaunch, Footprint, SpeedFacts
from explorer.engines.layouts import Layout, card_role, pp_partition
from explorer.engines.load_dtype import served, vllm_auto_dtype
from explorer.engines.names import ENGINE_LABELS, EngineName
from explorer.engines.parallel_rules import Refusal, expert_size_refusals, pp_refusals, tp_refusals
from explorer.engines.request import PlanRequest
from explorer.engines.rope_cache import rope_cache_bytes, vllm_rope_dtype
from explorer.engines.serve_command import HEAD_ADDRESS, across_nodes, kv_cache_flags, load_flags, replaced_ref
from explorer.engines.setting import launch_flags
from explorer.engines.split_walk import SplitWalk, split_layout, tp_pp_splits
from explorer.engines.stage_kv import longest_stage_context, stage_kv_bytes
from explorer.engines.vllm_budget import activation_bytes, graph_bytes, non_torch_bytes, scheduler_defaults
from explorer.engines.vllm_dcp import dcp_layouts, whole_split_widths
from explorer.engines.vllm_fp8_marlin import marlin_layer_extra_bytes
from explorer.engines.vllm_mxfp4 import relayout_extra_bytes
from explorer.engines.vllm_release import VLLMRelease, swap_space_refusal, vllm_release
from explorer.errors import PlanError
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.pools import Pool
from explorer.memo import memo
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.weights import WeightBreakdown, weight_breakdown

BLOCK_TOKENS = 16


def tp_widths(shape: ModelShape) -> tuple[int, ...]:
    """The tensor-parallel sizes vLLM and SGLang accept for ``shape`` (:func:`tp_refusals`): a tp size divides
    the attention heads, so none exceeds them."""
    return tuple(tp for tp in range(1, max(1, shape.attention_heads) + 1) if not tp_refusals(shape, tp))


def refusals(shape: ModelShape, layout: Layout, request: PlanRequest) -> list[Refusal]:
    """Divisibility rules vLLM enforces for this layout, an ``--ep`` vLLM cannot set apart from tp × dp, a KV
    cache type it has none of, and a swap space at a release without ``--swap-space``."""
    out = tp_refusals(shape, layout.tp) + pp_refusals(shape, layout.pp) + expert_size_refusals(shape, request)
    if (no_swap := swap_space_refusal(vllm_release(request.vllm_version), request.swap_space_gib)) is not None:
        out.append(("swap-space", no_swap))
    out += backend_refusals(shape, layout.ep, request.all2all_backend, VLLM_BACKENDS) or dp_backend_refusals(
        layout, request
    )
    asked = request.expert_parallel_size
    if asked and shape.moe is not None and asked != layout.ep:
        out.append(
            (
                "ep-size",
                f"vLLM's expert-parallel group is every rank of the launch (--enable-expert-parallel: tp × dp = "
                f"{layout.ep}); --ep {asked} cannot be set apart from it",
            )
        )
    if request.kv_dtype not in ("auto", shape.dtype, *KV_CACHE_DTYPE):
        out.append(
            (
                "kv-dtype",
                f"vLLM has no {request.kv_dtype} KV cache (--kv-cache-dtype: auto, {', '.join(KV_CACHE_DTYPE)})",
            )
        )
    return out


#: NVIDIA architectures whose vLLM sparse-MLA attention (DeepSeek-V3.2's and GLM-5's indexer) has no fp8 KV cache:
#: FlashMLA's sparse kernels need Hopper or Blackwell, and below them the TRITON_MLA_SPARSE backend keeps a 16-bit
#: cache (``vllm/v1/attention/backends/mla/triton_mla_sparse.py`` at 0033bf03: ``supported_kv_cache_dtypes`` auto,
#: float16, bfloat16; vllm-project/vllm#48374, "fp8 KV cache for the Ampere sparse-MLA path", open). The backend
#: itself runs on every card (:mod:`explorer.engines.attention_kernels`)
SPARSE_MLA_BF16_KV_ARCHITECTURES = frozenset({"volta", "turing", "ampere", "ada"})


def kv_cache_refusal(shape: ModelShape, gpu: GPUClass, kv_dtype: str) -> str | None:
    """Why vLLM cannot keep ``shape``'s KV cache at ``kv_dtype`` on ``gpu``, or None: an fp8 cache of sparse MLA
    below Hopper."""
    if kv_dtype == "fp8" and sparse_mla(shape) and gpu.architecture in SPARSE_MLA_BF16_KV_ARCHITECTURES:
        return (
            f"vLLM has no fp8 KV cache for sparse MLA attention on {gpu.architecture} cards ({gpu.name}): its "
            "sparse-MLA kernels store fp8 only from Hopper on (vllm-project/vllm#48374); use --kv-cache-dtype auto"
        )
    return None


def budget_total_bytes(gpu: GPUClass, calibration: Calibration | None) -> int:
    """The total vLLM takes ``gpu_memory_utilization`` of: the calibrated one, else the card's torch-visible total."""
    if calibration is not None and calibration.torch_memory_bytes:
        return calibration.torch_memory_bytes
    return gpu.visible_memory_bytes


def distributed_size(layout: Layout) -> int:
    """The group size the non-torch term is read at: tp, or every rank of an expert-parallel dp launch (its
    expert group talks over NCCL like a tensor-parallel one; no log of it yet, so the tp figure stands in)."""
    return layout.tp * layout.dp if layout.expert_dp else layout.tp


def dp_backend_refusals(layout: Layout, request: PlanRequest) -> list[Refusal]:
    """An asked all-to-all backend on a layout without data parallelism: vLLM runs its all-to-all kernels between
    dp ranks only (``FusedMoEParallelConfig.use_all2all_kernels``: ``dp_size > 1 and use_ep``), so tp 8 with
    ``--enable-expert-parallel`` moves tokens by all-reduce, makes no DeepEP buffer and ignores the backend."""
    if not request.all2all_backend or layout.expert_dp:
        return []
    return [
        (
            "all2all-backend",
            f"vLLM runs {request.all2all_backend} between data-parallel ranks only (dp > 1 with "
            f"--enable-expert-parallel); {layout.parallel} moves the experts' tokens by all-reduce and ignores it",
        )
    ]


def all2all_bytes(shape: ModelShape, layout: Layout, request: PlanRequest) -> int:
    """One rank's all-to-all buffers (:func:`explorer.engines.all2all.vllm_buffer_bytes`), counted with the non-torch
    memory vLLM profiles before it sizes the KV cache (they are allocated when the model's MoE layers are set up);
    none without data parallelism, where vLLM runs no all-to-all kernel (:func:`dp_backend_refusals`)."""
    if shape.moe is None or not layout.expert_dp:
        return 0
    return vllm_buffer_bytes(request.all2all_backend, shape.hidden_size, shape.moe.experts, layout.nodes)


@memo(512, keyed_on="shape identity, precision, layout, card class, vLLM release")  # the same at every context
def stage_weight_bytes(
    shape: ModelShape, precision: Precision, layout: Layout, gpu: GPUClass, release: VLLMRelease
) -> tuple[int, ...]:
    """Each pipeline stage's weights on one of its cards, MXFP4 experts and block-fp8 scales as vLLM re-lays
    them (:mod:`~explorer.engines.vllm_mxfp4`, :mod:`~explorer.engines.vllm_fp8_marlin`), with the RoPE cache
    every stage builds (:func:`~explorer.engines.rope_cache.rope_cache_bytes`)."""
    weights = weight_breakdown(shape, precision, layout.tp, layout.ep)
    extra = relayout_extra_bytes(shape, precision, gpu, release, layout.tp, layout.ep)
    marlin = marlin_layer_extra_bytes(shape, precision, gpu, layout.tp, layout.ep)
    rope = rope_cache_bytes(shape, vllm_rope_dtype(shape))
    stages = pp_partition(shape.layers, layout.pp)
    out = []
    for s, (a, b) in enumerate(stages):
        moe_layers = sum(1 for layer in shape.decoder[a:b] if any(t.role == "expert" for t in layer.tensors))
        stage = weights.stage_bytes(a, b, first=s == 0, last=s == len(stages) - 1)
        out.append(stage + extra * moe_layers + sum(marlin[a:b]) + rope)
    return tuple(out)


def evaluate(
    shape: ModelShape, precision: Precision, layout: Layout, gpu: GPUClass, request: PlanRequest, model_ref: str
) -> Evaluation:
    """Per-card memory of a vLLM layout at the request's context and concurrency."""
    release = vllm_release(request.vllm_version)
    calibration = calibration_for(request.calibrations, "vllm", gpu.name)
    capacity = gpu.memory_bytes
    usable = int(budget_total_bytes(gpu, calibration) * request.gpu_memory_utilization)
    tokens, seqs = scheduler_defaults(gpu, request, release)
    graphs = 0
    if release.graphs_in_budget and not request.enforce_eager:
        graphs = graph_bytes(seqs, tokens, calibration)
    a2a = all2all_bytes(shape, layout, request)
    overhead = graphs + non_torch_bytes(release, distributed_size(layout), layout.pp, calibration) + a2a
    stages = pp_partition(shape.layers, layout.pp)
    stage_weights = stage_weight_bytes(shape, precision, layout, gpu, release)
    context, conc = request.context_tokens, request.concurrency
    window_extra = tokens
    kv_type = shape.kv_type(request.kv_dtype)
    cards, rooms = [], []
    for s, (a, b) in enumerate(stages):
        last = s == len(stages) - 1
        w = stage_weights[s]
        act = activation_bytes(
            shape, precision, layout.tp, layout.ep, layout.pp, tokens, seqs, last, release, calibration
        )
        per_seq = stage_kv_bytes(shape, a, b, kv_type, layout.tp, context, BLOCK_TOKENS, window_extra, layout.dcp)
        kv = per_seq * conc
        cards.append(
            CardMemory(
                role=card_role(layout, s, a, b),
                weights=w,
                kv_cache=kv,
                activations=act,
                overhead=overhead,
                usable=usable,
                capacity=capacity,
                count=layout.tp * layout.dp if layout.expert_dp else layout.tp,
            )
        )
        rooms.append((a, b, usable - w - act - overhead, per_seq))

    max_context = longest_stage_context(
        shape,
        kv_type,
        layout.tp,
        tuple((a, b, room) for a, b, room, _ in rooms),
        shape.max_context_tokens,
        BLOCK_TOKENS,
        window_extra,
        layout.dcp,
    )
    max_conc = min((room // kv if kv else seqs) for _, _, room, kv in rooms) if rooms else 0
    max_conc = max(0, min(max_conc, seqs))
    notes = [f"vLLM {release.label}: max_num_batched_tokens {tokens}, max_num_seqs {seqs}"]
    if not release.graphs_in_budget and not request.enforce_eager:
        notes.append("CUDA graphs are captured outside the budget (before vLLM 0.21)")
    if max_conc == seqs and request.concurrency <= seqs:
        notes.append(f"concurrency capped by max_num_seqs ({seqs})")
    if a2a:
        notes.append(buffer_note(request.all2all_backend or "", a2a))
    if layout.dcp > 1:
        notes.append(
            f"decode context parallelism: each card keeps 1 in {layout.dcp} of a sequence's KV tokens "
            f"(--decode-context-parallel-size {layout.dcp})"
        )
    if calibration is not None:
        notes.append(calibration.note)
    base = command(model_ref, shape, precision, layout, request, max_num_seqs=seqs, max_num_batched_tokens=tokens)
    head, workers = launch_over_nodes(base, layout)
    return Evaluation(
        cards=tuple(cards),
        host=None,
        max_context_tokens=max_context,
        max_concurrency=max_conc,
        command=head,
        notes=tuple(notes),
        free_needed_bytes=usable,
        workers=workers,
        meeting_ports=meeting_ports(head) if workers else (),
    )


#: ``--kv-cache-dtype`` for explorer's KV types (vLLM 0.26.0 ``vllm/config/cache.py`` ``CacheDType``); the others
#: (fp32, llama.cpp's q8_0…) vLLM has no cache of, and a layout asking for one is refused
KV_CACHE_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}


#: the port the head's data-parallel RPC listens on in vLLM's multi-node example
DP_RPC_PORT = 13345
#: the port the head's torch.distributed store listens on (``--master-port``, 29501 by default in 0.26.0)
MASTER_PORT_FLAG = "--master-port 29501"
#: the data-parallel RPC port as every node of an expert-parallel dp launch names it
DP_RPC_FLAG = f"--data-parallel-rpc-port {DP_RPC_PORT}"
#: nodes beyond which the headless nodes' lines are folded into one with a placeholder start rank
MAX_NODE_LINES = 4


def command(
    model_ref: str,
    shape: ModelShape,
    precision: Precision,
    layout: Layout,
    request: PlanRequest,
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> str:
    """The ``vllm serve`` line for this layout (the head's part common to every node), with every setting the plan
    assumed: the memory share and the scheduler's batch sizes are written out even at their defaults (the
    defaults moved between releases: ``gpu_memory_utilization`` is 0.92 in 0.26, the batch sizes depend on the
    card), and the swap space the plan charges as host RAM where the release takes ``--swap-space``. A launch over
    nodes adds each node's flags (:func:`launch_over_nodes`)."""
    parts = ["vllm serve", model_ref]
    if layout.tp > 1:
        parts.append(f"--tensor-parallel-size {layout.tp}")
    if layout.dcp > 1:
        parts.append(f"--decode-context-parallel-size {layout.dcp}")
    if layout.pp > 1:
        parts.append(f"--pipeline-parallel-size {layout.pp}")
    if layout.dp > 1:
        parts.append(f"--data-parallel-size {layout.dp}")
    parts.append(f"--max-model-len {request.context_tokens}")
    parts.append(f"--gpu-memory-utilization {request.gpu_memory_utilization:g}")
    if layout.ep > 1:
        parts.append("--enable-expert-parallel")
        if request.all2all_backend:
            parts.append(f"--all2all-backend {request.all2all_backend}")
    parts += kv_cache_flags(shape, request.kv_dtype, KV_CACHE_DTYPE)
    parts += load_flags(shape, precision, VLLM.online_methods)
    # --max-num-seqs and --max-num-batched-tokens written out as resolved (their defaults depend on the card and
    # the release), then --enforce-eager… as the user set them, in their declarations' order
    resolved = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens}
    parts += launch_flags(request, "vllm", resolved=resolved)
    if swap_gib := vllm_release(request.vllm_version).swap_space(request.swap_space_gib):
        parts.append(f"--swap-space {swap_gib:g}")  # the host RAM the plan charges (host_ram.vllm_claim)
    return " ".join(parts)


def launch_over_nodes(base: str, layout: Layout) -> tuple[str, tuple[NodeCommand, ...]]:
    """The head's command and each other node's: an expert-parallel dp launch starts its dp ranks node by node
    (:func:`node_commands`); any other runs vLLM's multiprocessing backend over the nodes (:func:`rank_flags`)."""
    if layout.nodes > 1 and layout.expert_dp:
        head, *others = node_commands(base, layout)
        return head, tuple(NodeCommand(rank=k, command=line) for k, line in enumerate(others, 1))
    return across_nodes(base, layout.nodes, partial(rank_flags, layout.nodes))


def meeting_ports(head: str) -> tuple[str, ...]:
    """The texts of a launch across nodes that name a port on the head node (``Evaluation.meeting_ports``)."""
    return tuple(flag for flag in (MASTER_PORT_FLAG, DP_RPC_FLAG) if flag in head)


def rank_flags(nodes: int, rank: int) -> str:
    """One node's flags in a launch across ``nodes`` nodes, as vLLM's multiprocessing backend takes them
    (docs/serving/parallelism_scaling.md, 0.26.0): every node names the head and its port (the default, written
    so that a second launch headed on the node can take another), the others run ``--headless``."""
    flags = f"--nnodes {nodes} --node-rank {rank} --master-addr {HEAD_ADDRESS} {MASTER_PORT_FLAG}"
    return flags + (" --headless" if rank else "")


def node_commands(base: str, layout: Layout) -> list[str]:
    """One line a node for dp ranks over several nodes: each starts its ``dp / nodes`` local ranks; the head
    (rank 0 on) serves the API, the others run ``--headless`` from their first rank."""
    local = layout.dp // layout.nodes
    shared = f"{base} --data-parallel-size-local {local} --data-parallel-address {HEAD_ADDRESS} {DP_RPC_FLAG}"
    if layout.nodes > MAX_NODE_LINES:
        return [
            shared,
            f"{shared} --data-parallel-start-rank <{local} × k on node k = 1..{layout.nodes - 1}> --headless",
        ]
    return [shared] + [f"{shared} --data-parallel-start-rank {local * k} --headless" for k in range(1, layout.nodes)]


#: the two contexts a footprint's KV slope is measured between
FOOTPRINT_PROBE_TOKENS = (4096, 8192)


@dataclass(frozen=True, slots=True)
class VLLM(SplitWalk):
    """vLLM for the planner (a :class:`~explorer.engines.interface.SplitEngine`).

    Splits are tp × pp with tp within a node; a mixture of experts runs
    expert-parallel over the tensor-parallel cards, or over dp ranks of tp
    cards each (``--data-parallel-size`` with ``--enable-expert-parallel``); a card offers
    ``gpu_memory_utilization`` of its memory.
    """

    name: ClassVar[EngineName] = "vllm"
    label: ClassVar[str] = ENGINE_LABELS[name]
    #: fp8 and bitsandbytes 4-bit quantise bf16 weights while loading (``--quantization fp8`` / ``bitsandbytes``)
    online_methods: ClassVar[frozenset[str]] = frozenset({"fp8", "bitsandbytes"})
    #: prefill and decode on separate instances (``--kv-transfer-config``, the NIXL / P2P NCCL connectors)
    disaggregated_prefill: ClassVar[bool] = True
    #: the scheduler admits what its KV cache holds and queues the rest (``--max-num-seqs`` caps the running ones)
    queues_past_kv: ClassVar[bool] = True
    data_parallel_flag: ClassVar[str | None] = "--data-parallel-size"
    #: a mixture of experts' dp ranks spread the experts over all of them (``--enable-expert-parallel``)
    expert_data_parallel: ClassVar[bool] = True
    attention_expert_parallel: ClassVar[bool] = False
    data_parallel_nodes_rule: ClassVar[str] = (
        "vLLM's data-parallel copies of a dense model are planned on one node; start one launch a node instead "
        "(the plan's replicas)"
    )
    #: fitted on published vLLM and SGLang rows together (docs/notes/speed_model.md)
    speed: ClassVar[SpeedFacts] = SpeedFacts(
        efficiency=0.6, dense_layer_floor_s=0.25e-4, moe_layer_floor_s=0.625e-4, token_overhead_s=0.75e-3
    )

    def fleet_command(self, model_id: str, fleet: FleetLaunch) -> Evaluation:
        """``vllm serve``: several cards ``--tensor-parallel-size``; ``--gpu-memory-utilization`` the largest
        share of a card charged, rounded *up* to the hundredth (vLLM budgets that share of every card it uses), at
        most 1 (a tight instance asks for the whole card); the scheduler's batch sizes vLLM's defaults for the
        card, which the footprint was measured at; the flags that load the model as its footprint sized it
        (``--dtype bfloat16`` over a float32 checkpoint, ``--kv-cache-dtype``); the decode-context-parallel size
        that splits its KV cache as the placement charged it (:attr:`FleetLaunch.kv_shards`); across nodes a rank
        a node (:func:`rank_flags`)."""
        parts = [f"vllm serve {model_id}"]
        if fleet.cards > 1:
            parts.append(f"--tensor-parallel-size {fleet.cards}")
        if fleet.kv_shards > 1:
            parts.append(f"--decode-context-parallel-size {fleet.kv_shards}")
        parts.append(f"--max-model-len {fleet.context_tokens}")
        if fleet.share is not None:
            parts.append(f"--gpu-memory-utilization {min(math.ceil(fleet.share * 100) / 100, 1.0):.2f}")
        if fleet.gpu is not None:
            request = PlanRequest(context_tokens=max(1, fleet.context_tokens))  # a weights-only demand charges none
            tokens, seqs = scheduler_defaults(fleet.gpu, request, vllm_release(request.vllm_version))
            parts.append(f"--max-num-seqs {seqs} --max-num-batched-tokens {tokens}")
        parts += fleet.load_flags
        nodes = len(fleet.nodes)
        head, workers = across_nodes(" ".join(parts), nodes, partial(rank_flags, nodes))
        return fleet.evaluation(head, workers, meeting_ports(head) if workers else ())

    def prefill_chunk_tokens(self, gpu: GPUClass, request: PlanRequest) -> int:
        """``--max-num-batched-tokens``: the request's, else the release's default for the card (V1: 8,192 on
        cards of 70 GiB or more but the A100, else 2,048)."""
        return scheduler_defaults(gpu, request, vllm_release(request.vllm_version))[0]

    def decompositions(self, nodes: int, width: int, request: PlanRequest) -> Iterator[tuple[int, int]]:
        """(tp, pp) with tp dividing a node's width, most tensor parallelism first."""
        return tp_pp_splits(nodes, width)

    def make_layout(
        self, pool: Pool, nodes: int, width: int, tp: int, pp: int, shape: ModelShape, request: PlanRequest
    ) -> Layout:
        """The split, its experts expert-parallel over tp (``--enable-expert-parallel``)."""
        ep = tp if shape.moe is not None and tp > 1 else 1
        return split_layout(self, pool, nodes, width, tp, pp, ep=ep)

    def refusals(self, shape: ModelShape, layout: Layout, request: PlanRequest) -> list[Refusal]:
        """Divisibility rules (:func:`refusals`)."""
        return refusals(shape, layout, request)

    def kv_shard_layouts(
        self, shape: ModelShape, layout: Layout, gpu: GPUClass, request: PlanRequest
    ) -> tuple[Layout, ...]:
        """``layout`` with each decode-context-parallel size vLLM accepts there, smallest first
        (:func:`~explorer.engines.vllm_dcp.dcp_layouts`)."""
        return dcp_layouts(shape, layout, gpu, vllm_release(request.vllm_version))

    def host_claim(self, layout: Layout, evaluation: Evaluation, request: PlanRequest) -> HostClaim:
        """Its swap space (:func:`explorer.engines.host_ram.vllm_claim`)."""
        return vllm_claim(layout, request)

    def auto_dtype(self, shape: ModelShape, gpu: GPUClass) -> str:
        """The dtype it loads a float32 checkpoint at (bfloat16 from compute capability 8.0, float16 below:
        :func:`vllm_auto_dtype`)."""
        return vllm_auto_dtype(shape, gpu)

    def kv_refusal(self, shape: ModelShape, gpu: GPUClass, kv_dtype: str) -> str | None:
        """Why it cannot keep the KV cache at ``kv_dtype`` on ``gpu`` (:func:`kv_cache_refusal`), or None."""
        return kv_cache_refusal(shape, gpu, kv_dtype)

    def usable_share(self, request: PlanRequest) -> float:
        """``gpu_memory_utilization``: vLLM asks each card for that share."""
        return request.gpu_memory_utilization

    def card_weights(
        self, shape: ModelShape, precision: Precision, layout: Layout, request: PlanRequest
    ) -> WeightBreakdown:
        """Every layer split by tp, the experts by ep (before MXFP4's re-layout)."""
        return weight_breakdown(shape, precision, layout.tp, layout.ep)

    def evaluate(
        self,
        shape: ModelShape,
        precision: Precision,
        layout: Layout,
        gpu: GPUClass,
        request: PlanRequest,
        model_ref: str,
    ) -> Evaluation:
        """vLLM's accounting of one layout (:func:`evaluate`)."""
        return evaluate(shape, precision, layout, gpu, request, model_ref)

    def footprint(self, shape: ModelShape, artifact: Artifact, gpu: GPUClass | None, kv_dtype: str) -> Footprint:
        """One card of ``gpu`` at two contexts: the KV slope between them, the rest fixed; what the launch loads
        (a published checkpoint's repository: :func:`replaced_ref`) and the flags that load it so."""
        if gpu is None:
            raise PlanError("vLLM's footprint needs a GPU class; a host without GPUs is sized by llama.cpp")
        shape, precision = served(self, shape, artifact, gpu)
        layout = Layout(engine=self.name, gpu_class=gpu.name)
        small, large = (
            evaluate(shape, precision, layout, gpu, PlanRequest(context_tokens=c, kv_dtype=kv_dtype), shape.name).cards[
                0
            ]
            for c in FOOTPRINT_PROBE_TOKENS
        )
        low, high = FOOTPRINT_PROBE_TOKENS
        per_token = (large.kv_cache - small.kv_cache) // (high - low)
        fixed = small.activations + small.overhead + max(0, small.kv_cache - per_token * low)
        widths = tp_widths(shape)
        return Footprint(
            weights_bytes=small.weights,
            fixed_bytes_per_card=fixed,
            kv_bytes_per_token=per_token,
            even_split=True,
            split_widths=widths,
            kv_split_widths=whole_split_widths(shape, widths, gpu, vllm_release(None)),
            load_flags=(
                *kv_cache_flags(shape, kv_dtype, KV_CACHE_DTYPE),
                *load_flags(shape, precision, self.online_methods),
            ),
            model_ref=replaced_ref(shape, artifact, precision, self.online_methods),
        )


ENGINE = VLLM()
