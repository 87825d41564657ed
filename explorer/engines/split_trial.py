"""One launch of the tensor × pipeline walk checked and evaluated (:mod:`explorer.engines.split_pool` tries them):
the engine's rules and the block-FP8 rule, the memory lower bound, the engine's accounting and its host RAM, each
refusal said; and the engine's expert data parallelism on whole nodes (vLLM ``--data-parallel-size`` with
``--enable-expert-parallel``), offered beside the tensor × pipeline split of the same cards.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.engines.collect import Collector
from explorer.engines.host_ram import with_host
from explorer.engines.interface import SplitEngine
from explorer.engines.launches import evaluate_sharded, weight_copy_cards
from explorer.engines.layouts import Layout
from explorer.engines.options import Option, memory_reason
from explorer.engines.parallel_rules import Refusal, block_refusals
from explorer.engines.request import PlanRequest
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape

__all__ = ["PoolWeights", "Trial", "attention_ep_option", "expert_dp_option"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolWeights:
    """An artifact's weights at its precision: bits a served parameter, bytes in all (before any split),
    and the KV cache the request asks for, every layer once (no split makes it smaller in all)."""

    bits: float
    total_bytes: int
    asked_kv_bytes: int


def attention_ep_option(trial: Trial, nodes: int, width: int) -> Option | None:
    """Under DP attention, the same tp cards with the experts spread whole over them (SGLang ``--enable-dp-attention
    --ep-size tp``, DeepSeek's published `--tp 8 --dp 8 --enable-dp-attention --ep-size 8`), offered beside DP
    attention alone: the speed model prices each rank's own tokens dispatched to the experts instead of every token
    all-reduced. None when the engine has none, the model has no experts, the user named an ep (or a backend,
    which sets it), or it does not fit."""
    engine, shape, request, pool = trial.engine, trial.shape, trial.request, trial.pool
    if not (engine.attention_expert_parallel and request.dp_attention) or shape.moe is None:
        return None
    if request.expert_parallel_size is not None or request.all2all_backend or request.pipeline_parallel_size:
        return None
    cards = nodes * width
    if request.tensor_parallel_size not in (None, cards) or pool.gpu.is_mig or cards < 2:
        return None
    layout = engine.make_layout(pool, nodes, width, cards, 1, shape, request)
    if layout.ep == layout.tp:
        return None
    option, _ = trial.check(replace(layout, ep=layout.tp), nodes, width)
    return option


def expert_dp_option(trial: Trial, nodes: int, width: int) -> Option | None:
    """The engine's expert data parallelism on ``nodes`` whole nodes, when the user named no sizes: dp ranks of
    tp cards each, the fewest tp that fits first (tp 1 × dp 8 on one 8-card node, vLLM's recipe for DeepSeek-V3);
    None when the engine has none, the model has no experts, or none fits."""
    engine, shape, request, pool = trial.engine, trial.shape, trial.request, trial.pool
    sizes = (
        request.tensor_parallel_size,
        request.pipeline_parallel_size,
        request.data_parallel_size,
        request.expert_parallel_size,
    )
    if not engine.expert_data_parallel or shape.moe is None or any(v is not None for v in sizes):
        return None
    if request.dp_attention or pool.gpu.is_mig or width != pool.width() or nodes * width < 2:
        return None
    cards = nodes * width
    for tp in (t for t in range(1, width + 1) if width % t == 0 and cards // t > 1):
        layout = replace(engine.make_layout(pool, nodes, width, tp, 1, shape, request), dp=cards // tp, ep=cards)
        option, stop = trial.check(layout, nodes, width)
        if option is not None or stop:
            return option
    return None


class Trial:
    """One artifact's layouts on one pool, checked and evaluated; refusals go to the collector."""

    __slots__ = ("artifact", "engine", "hosts", "model_ref", "out", "pool", "precision", "request", "shape", "weights")

    def __init__(
        self,
        engine: SplitEngine,
        shape: ModelShape,
        artifact: Artifact,
        precision: Precision,
        weights: PoolWeights,
        pool: Pool,
        hosts: int,
        request: PlanRequest,
        model_ref: str,
        out: Collector,
    ) -> None:
        self.engine, self.shape, self.artifact, self.precision = engine, shape, artifact, precision
        self.weights, self.pool, self.hosts, self.request, self.model_ref, self.out = (
            weights, pool, hosts, request, model_ref, out,
        )  # fmt: skip

    def _refusals(self, layout: Layout) -> list[Refusal]:
        return self.engine.refusals(self.shape, layout, self.request) or list(
            block_refusals(self.shape, self.precision, layout.tp, layout.ep)
        )

    def block_kept(self, layout: Layout) -> Layout:
        """``layout``, or with its experts spread whole (ep = tp) when splitting them by tp breaks the block-FP8
        rule (the split refused with the engine's message); SGLang's ``--tp 8 --ep 8`` for MiniMax-M2."""
        if self.shape.moe is None or layout.ep > 1 or layout.tp == 1:
            return layout
        reasons = block_refusals(self.shape, self.precision, layout.tp, layout.ep)
        if not reasons:
            return layout
        kept = replace(layout, ep=layout.tp)
        if block_refusals(self.shape, self.precision, kept.tp, kept.ep):
            return layout
        rule, reason = reasons[0]
        self.out.refuse(self.engine.name, layout, self.artifact.name, rule, reason)
        return kept

    def check(self, layout: Layout, nodes: int, width: int) -> tuple[Option | None, bool]:
        """(the option when ``layout`` fits, whether no other split of these cards can fit), refusals said."""
        engine, name, request, pool = self.engine, self.engine.name, self.request, self.pool
        reasons = self._refusals(layout)
        if reasons:
            rule, reason = reasons[0]
            self.out.refuse(name, layout, self.artifact.name, rule, reason)
            return None, False
        copy_cards = weight_copy_cards(layout, request)
        if self.weights.total_bytes > pool.gpu.memory_bytes * engine.usable_share(request) * copy_cards:
            self.out.refuse(
                name,
                layout,
                self.artifact.name,
                "memory-lower-bound",
                f"the weights alone ({self.weights.total_bytes / 2**30:.1f} GiB) exceed {copy_cards} × {pool.gpu.name}",
            )
            return None, True
        layout, evaluation = evaluate_sharded(
            engine, self.shape, self.precision, layout, pool.gpu, request, self.model_ref
        )
        claim = engine.host_claim(layout, evaluation, request)
        roomy = pool.kinds_holding(width, claim.fits)  # kinds of node, counted: never enumerated one by one
        held = sum(many for _, many in roomy)
        if held < nodes:
            most = max((n for n, _ in pool.kinds), key=lambda n: n.host_ram_bytes)
            self.out.refuse(name, layout, self.artifact.name, "host-ram", claim.refusal(most, name))
            return None, True
        node = max((n for n, _ in roomy), key=lambda n: n.host_ram_bytes)
        evaluation = with_host(evaluation, claim, node)
        ram_now = sum(many for n, many in roomy if claim.fits_now(n)) >= nodes
        option = Option(
            layout=layout,
            artifact=self.artifact,
            precision=self.precision.name,
            bits_per_weight=self.weights.bits,
            nominal_bits=self.precision.nominal_bits,
            evaluation=evaluation,
            free_now=ram_now and pool.free_now(nodes, width, evaluation.free_needed_bytes),
            hosts=min(self.hosts, held),
            gpu=pool.gpu,
            node=node,
            dtype=self.shape.dtype if self.shape.cast_from else "",
        )
        if not evaluation.fits:
            self.out.refuse(name, layout, self.artifact.name, "memory", memory_reason(option.per_card), option=option)
            return None, False
        return option, False
