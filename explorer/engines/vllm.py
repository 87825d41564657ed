"""vLLM's memory accounting, per card (V1 engine).

vLLM asks each card for ``total × gpu_memory_utilization`` (0.9 by default)
and fills what its own use leaves with KV cache blocks of 16 tokens
(``vllm/v1/worker/gpu_worker.py``, ``kv_cache_utils.py``):

    kv room = total × utilisation − weights − activation peak − CUDA graphs − non-torch

- weights: this card's tensor/expert-parallel shard of its pipeline stage's
  layers (first stage: embeddings and vision tower; last: norm and LM head);
- activation peak of the profiling run at ``max_num_batched_tokens`` T tokens:
  T·(2H + 3·I/tp)·2 bytes, plus the sampler's fp32 logits R·V·4 on the last
  stage (R = min(max_num_seqs, T));
- CUDA graphs: 0.10 GiB + 7 MiB per captured batch size (counted inside the
  budget, as vLLM ≥ 0.21 estimates it);
- non-torch memory: 0.15 GiB, + 0.15 GiB when distributed.

T and R default by card: ``vllm serve`` uses 8192 / 1024 on cards of 70 GiB
or more (A100 excepted) and 2048 / 256 otherwise. The activation, graph and
non-torch constants are calibrated on published vLLM logs
(docs/notes/vllm_memory.md §6): about ±0.5 GiB. The KV cache must hold the
asked context × concurrency; sliding-window layers hold the window plus one
prefill chunk; an MLA latent is whole on every card.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from explorer.engines.common import (
    CardMemory,
    EngineName,
    Evaluation,
    Layout,
    PlanRequest,
    card_role,
    largest_context,
    pp_partition,
    stage_kv_bytes,
)
from explorer.engines.interface import Footprint
from explorer.engines.parallel_rules import Refusal, pp_refusals, tp_refusals
from explorer.engines.split_walk import SplitWalk, split_layout, tp_pp_splits
from explorer.errors import PlanError
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.weights import weight_breakdown
from explorer.units import GiB, MiB, cdiv, round_up

BLOCK_TOKENS = 16
GRAPH_BASE_BYTES = GiB // 10
GRAPH_PER_SIZE_BYTES = 7 * MiB
NON_TORCH_BYTES = int(0.15 * GiB)
NON_TORCH_DISTRIBUTED_BYTES = int(0.15 * GiB)
BIG_CARD_BYTES = 70 * GiB


def scheduler_defaults(gpu: GPUClass, request: PlanRequest) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) as ``vllm serve`` picks them for a card."""
    big = gpu.memory_bytes >= BIG_CARD_BYTES and "a100" not in gpu.name
    tokens = request.max_num_batched_tokens or (8192 if big else 2048)
    seqs = request.max_num_seqs or (1024 if big else 256)
    return tokens, min(seqs, tokens)


def capture_sizes(max_num_seqs: int, max_tokens: int) -> int:
    """How many batch sizes vLLM captures CUDA graphs for: [1, 2, 4], 8..248 by 8, 256.. by 16."""
    largest = min(2 * max_num_seqs, 512, max_tokens)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, largest + 1, 16)]
    return sum(1 for s in sizes if s <= largest)


@lru_cache(maxsize=64)
def mlp_width(shape: ModelShape) -> int:
    """The widest per-token MLP hidden size: a dense MLP's, or top-k experts' plus shared ones."""
    widest = 0
    for layer in {id(layer.tensors): layer for layer in shape.decoder}.values():
        dense = sum(t.rows for t in layer.tensors if t.role in ("mlp", "shared_expert") and t.split == "column")
        routed = sum(t.rows for t in layer.tensors if t.role == "expert" and t.split == "expert_column")
        if routed and shape.moe:
            routed = routed * shape.moe.experts_per_token
        widest = max(widest, (dense + routed) // 2)
    return widest


def activation_bytes(shape: ModelShape, tp: int, tokens: int, seqs: int, last_stage: bool) -> int:
    """The profiling run's activation peak on one card."""
    act = 4 if shape.dtype == "fp32" else 2
    peak = tokens * (2 * shape.hidden_size + 3 * cdiv(mlp_width(shape), tp)) * act
    if last_stage:
        peak += seqs * round_up(shape.vocab_size, 64) * 4
    return peak


def refusals(shape: ModelShape, layout: Layout, request: PlanRequest) -> list[Refusal]:
    """Divisibility rules vLLM enforces for this layout (none depends on the request)."""
    return tp_refusals(shape, layout.tp) + pp_refusals(shape, layout.pp)


def evaluate(
    shape: ModelShape, precision: Precision, layout: Layout, gpu: GPUClass, request: PlanRequest, model_ref: str
) -> Evaluation:
    """Per-card memory of a vLLM layout at the request's context and concurrency."""
    capacity = gpu.memory_bytes
    usable = int(capacity * request.gpu_memory_utilization)
    tokens, seqs = scheduler_defaults(gpu, request)
    graphs = 0 if request.enforce_eager else GRAPH_BASE_BYTES + GRAPH_PER_SIZE_BYTES * capture_sizes(seqs, tokens)
    distributed = layout.tp * layout.pp > 1
    overhead = graphs + NON_TORCH_BYTES + (NON_TORCH_DISTRIBUTED_BYTES if distributed else 0)
    weights = weight_breakdown(shape, precision, layout.tp, layout.ep)
    stages = pp_partition(shape.layers, layout.pp)
    context, conc = request.context_tokens, request.concurrency
    window_extra = tokens
    kv_type = shape.kv_type(request.kv_dtype)
    cards, rooms = [], []
    for s, (a, b) in enumerate(stages):
        last = s == len(stages) - 1
        w = weights.stage_bytes(a, b, first=s == 0, last=last)
        act = activation_bytes(shape, layout.tp, tokens, seqs, last)
        per_seq = stage_kv_bytes(shape, a, b, kv_type, layout.tp, context, BLOCK_TOKENS, window_extra)
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
                count=layout.tp,
            )
        )
        rooms.append((a, b, usable - w - act - overhead, per_seq))

    def slack(ctx: int) -> int:
        return min(
            room - stage_kv_bytes(shape, a, b, kv_type, layout.tp, ctx, BLOCK_TOKENS, window_extra)
            for a, b, room, _ in rooms
        )

    limit = shape.max_context_tokens
    max_context = largest_context(slack, limit, step=BLOCK_TOKENS) if rooms and min(r[2] for r in rooms) > 0 else 0
    max_conc = min((room // kv if kv else seqs) for _, _, room, kv in rooms) if rooms else 0
    max_conc = max(0, min(max_conc, seqs))
    notes = [f"max_num_batched_tokens {tokens}, max_num_seqs {seqs}"]
    if max_conc == seqs and request.concurrency <= seqs:
        notes.append(f"concurrency capped by max_num_seqs ({seqs})")
    return Evaluation(
        cards=tuple(cards),
        host=None,
        max_context_tokens=max_context,
        max_concurrency=max_conc,
        command=command(model_ref, shape, precision, layout, request),
        notes=tuple(notes),
        free_needed_bytes=usable,
    )


def command(model_ref: str, shape: ModelShape, precision: Precision, layout: Layout, request: PlanRequest) -> str:
    """The ``vllm serve`` line for this layout."""
    parts = ["vllm serve", model_ref]
    if layout.tp > 1:
        parts.append(f"--tensor-parallel-size {layout.tp}")
    if layout.pp > 1:
        parts.append(f"--pipeline-parallel-size {layout.pp}")
    parts.append(f"--max-model-len {request.context_tokens}")
    if request.gpu_memory_utilization != 0.9:
        parts.append(f"--gpu-memory-utilization {request.gpu_memory_utilization:g}")
    if layout.ep > 1:
        parts.append("--enable-expert-parallel")
    if request.kv_dtype not in ("auto", shape.dtype):
        parts.append(f"--kv-cache-dtype {request.kv_dtype}")
    if precision.source == "what-if" and precision.method == "fp8" and precision is not shape.precision:
        parts.append("--quantization fp8")
    if request.max_num_seqs:
        parts.append(f"--max-num-seqs {request.max_num_seqs}")
    if request.max_num_batched_tokens:
        parts.append(f"--max-num-batched-tokens {request.max_num_batched_tokens}")
    if request.enforce_eager:
        parts.append("--enforce-eager")
    if layout.nodes > 1:
        parts.append("--distributed-executor-backend ray")
    return " ".join(parts)


#: the two contexts a footprint's KV slope is measured between
FOOTPRINT_PROBE_TOKENS = (4096, 8192)


@dataclass(frozen=True, slots=True)
class VLLM(SplitWalk):
    """vLLM for the planner (a :class:`~explorer.engines.interface.SplitEngine`).

    Splits are tp × pp with tp within a node; a mixture of experts runs
    expert-parallel over the tensor-parallel cards; a card offers
    ``gpu_memory_utilization`` of its memory.
    """

    name: ClassVar[EngineName] = "vllm"
    data_parallel_flag: ClassVar[str | None] = "--data-parallel-size"

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

    def usable_share(self, request: PlanRequest) -> float:
        """``gpu_memory_utilization``: vLLM asks each card for that share."""
        return request.gpu_memory_utilization

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
        """One card of ``gpu`` at two contexts: the KV slope between them, the rest fixed."""
        if gpu is None:
            raise PlanError("vLLM's footprint needs a GPU class; a host without GPUs is sized by llama.cpp")
        precision = shape.precision_of(artifact)
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
        return Footprint(weights_bytes=small.weights, fixed_bytes_per_card=fixed, kv_bytes_per_token=per_token)


ENGINE = VLLM()
