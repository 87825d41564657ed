"""The walk of engines that split a replica tensor × pipeline over a pool's cards (vLLM, SGLang).

For a :class:`~explorer.engines.interface.SplitEngine` the walk takes every
GPU pool (a class on a set of nodes a replica may span: one fabric's nodes,
or one stand-alone node), every node count and every cards-per-node width,
and every tensor × pipeline split of those cards the engine runs. Each
candidate is refused by the first rule it breaks, in this order, and counted
under that rule:

1. ``mig-single-slice``: a MIG slice serves a replica alone, never joined;
2. divisibility (``attention-heads``, ``kv-heads``, ``vision-heads``,
   ``ssm-heads``, ``pipeline-layers``) and the engine's own refusals;
3. ``memory-lower-bound``: the weights alone exceed the engine's share of the cards;
4. ``memory``: the engine's accounting does not fit the asked context × concurrency;
5. ``more-than-needed``: it fits, but a way with no more cards and no more
   nodes (and fewer of one) fits too. On one node the fewest cards that fit
   are kept, with scale-ups to powers of two and the node's whole width up to
   :data:`SCALE_UP_CARDS` (8: 2 → 4 → 8, so a 100,000-card node offers what
   an 8-card one does, with more replicas); a model one node holds never
   spans two (its ``replicas`` say how many copies the cluster holds).
   Across nodes the fewest cards are kept, and the whole-node layout too
   (tp = a node's cards, pp = nodes), which the engines' docs recommend.
6. ``split``: the same cards fit with a better split (more tensor parallelism).

Card and node counts start at a lower bound (the weights and the asked KV
cache against the engine's share of a card, ``memory-lower-bound`` for those
below it) and step up at most :data:`SEARCH_STEPS` times (``search-limit``):
equal cards are counted, never enumerated one by one.

Before any pool, an artifact that is not safetensors (``format``), a context
past the model's limit (``context-limit``) and every unified-memory host
(``platform``) are refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from explorer.engines.collect import Collector
from explorer.engines.common import Layout, PlanRequest
from explorer.engines.interface import SplitEngine
from explorer.engines.options import Option, memory_reason
from explorer.hardware.cluster import Cluster
from explorer.hardware.pools import Pool, gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.weights import weight_breakdown
from explorer.units import gib


@dataclass(frozen=True, slots=True, kw_only=True)
class _Weights:
    """An artifact's weights at its precision: bits a served parameter, bytes in all (before any split),
    and the KV cache the request asks for, every layer once (no split makes it smaller in all)."""

    bits: float
    total_bytes: int
    asked_kv_bytes: int


def tp_pp_splits(nodes: int, width: int) -> Iterator[tuple[int, int]]:
    """(tp, pp) splits of ``nodes × width`` cards with tp dividing a node's width, most tensor parallelism first."""
    cards = nodes * width
    for tp in range(width, 0, -1):
        if width % tp == 0:
            yield tp, cards // tp


def split_layout(
    engine: SplitEngine, pool: Pool, nodes: int, width: int, tp: int, pp: int, *, dp: int = 1, ep: int = 1
) -> Layout:
    """The layout of one split on ``nodes × width`` cards of ``pool`` (the fabric named only across nodes)."""
    return Layout(
        engine=engine.name,
        gpu_class=pool.gpu.name,
        fabric=pool.fabric if nodes > 1 else None,
        nodes=nodes,
        gpus_per_node=width,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
    )


def walk_splits(
    engine: SplitEngine,
    shape: ModelShape,
    cluster: Cluster,
    artifacts: Sequence[Artifact],
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> None:
    """Every way ``engine`` runs each artifact on the cluster's GPU pools, into ``out``."""
    name = engine.name
    for artifact in artifacts:
        if artifact.format != "safetensors":
            out.refuse(name, None, artifact.name, "format", f"{name} serves safetensors weights, not {artifact.format}")
            continue
        precision = shape.precision_of(artifact)
        if request.context_tokens > shape.max_context_tokens:
            out.refuse(
                name,
                None,
                artifact.name,
                "context-limit",
                f"context {request.context_tokens:,} exceeds the model's limit of {shape.max_context_tokens:,} tokens",
            )
            continue
        for node in cluster.unified_nodes:
            out.refuse(
                name,
                None,
                artifact.name,
                "platform",
                f"{name} does not run on unified-memory host {node.name} (use llama.cpp)",
            )
        weights = _Weights(
            bits=shape.bits_per_weight(precision),
            total_bytes=weight_breakdown(shape, precision).total_bytes,
            asked_kv_bytes=shape.kv_bytes(request.context_tokens, request.kv_dtype, request.concurrency),
        )
        for pool in gpu_pools(cluster):
            _walk_pool(engine, shape, artifact, precision, weights, pool, request, model_ref, out)


#: on one node, layouts wider than the fewest cards that fit are offered at powers of two up to this many
#: cards (an HGX board's NVLink domain), and at the node's whole width within it
SCALE_UP_CARDS = 8
#: widths (or node counts) tried past the memory lower bound before a walk stops looking
SEARCH_STEPS = 64


def scale_up_widths(fewest: int, node_width: int) -> list[int]:
    """Widths offered on one node beyond the fewest cards that fit: 2 → [4, 8] on an 8-card node
    (and on a 100,000-card one); 2 → [4, 6] on a 6-card node; none past :data:`SCALE_UP_CARDS`."""
    limit = min(node_width, max(fewest, SCALE_UP_CARDS))
    out, width = [], 1
    while width * 2 <= limit:
        width *= 2
        if width > fewest:
            out.append(width)
    if fewest < node_width <= limit and node_width not in out:
        out.append(node_width)
    return out


def _least_cards(
    shape: ModelShape, weights: _Weights, pool: Pool, engine: SplitEngine, request: PlanRequest, *, kv: bool = True
) -> int:
    """Cards no split can go below: the weights (and with ``kv`` the asked KV cache, counted once whatever
    the split) against the engine's share of a card."""
    cache = weights.asked_kv_bytes if kv else 0
    room = _card_room(pool, engine, request)
    return max(1, math.ceil((weights.total_bytes + cache) / room)) if room > 0 else 1


def _card_room(pool: Pool, engine: SplitEngine, request: PlanRequest) -> int:
    """The most of one of the pool's cards the engine fills (a bound: weights, KV and the rest)."""
    return int(pool.gpu.memory_bytes * engine.usable_share(request))


def _walk_pool(
    engine: SplitEngine,
    shape: ModelShape,
    artifact: Artifact,
    precision: Precision,
    weights: _Weights,
    pool: Pool,
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> None:
    """One pool: the fewest cards on one node and its scale-ups, else the fewest across nodes and the
    whole-node layout. Card and node counts are stepped from a memory lower bound, never enumerated."""
    name = engine.name
    max_width = 1 if pool.gpu.is_mig else pool.width()
    if pool.gpu.is_mig and pool.width() > 1:
        out.refuse(
            name,
            None,
            artifact.name,
            "mig-single-slice",
            f"{pool.gpu.name}: a replica takes exactly one MIG slice; slices are never joined",
            count=pool.width() - 1,
        )
    walk = _PoolWalk(engine, shape, artifact, precision, weights, pool, request, model_ref, out)
    least = _least_cards(shape, weights, pool, engine, request)
    fewest = walk.one_node(least, max_width, _least_cards(shape, weights, pool, engine, request, kv=False))
    max_nodes = min(len(pool.nodes), shape.layers) if pool.spannable else 1
    if max_nodes < 2:
        return
    if fewest is not None:
        layout = engine.make_layout(pool, 2, max_width, max_width, 2, shape, request)
        out.refuse(
            name,
            layout,
            artifact.name,
            "more-than-needed",
            f"2 or more nodes are more than needed: {fewest.layout.label} holds it on one node "
            "(replicas say how many copies the cluster holds)",
            count=(max_nodes - 1) * max_width,
        )
        return
    best = walk.across_nodes(least, max_width, max_nodes)
    if best is not None and best.layout.gpus_per_node < max_width:
        walk.whole_nodes(least, max_width, best.layout.nodes)


class _PoolWalk:
    """The splits of one artifact on one pool, tried and reported into the collector."""

    __slots__ = ("artifact", "engine", "model_ref", "out", "pool", "precision", "request", "shape", "weights")

    def __init__(self, engine, shape, artifact, precision, weights, pool, request, model_ref, out) -> None:
        self.engine, self.shape, self.artifact, self.precision = engine, shape, artifact, precision
        self.weights, self.pool, self.request, self.model_ref, self.out = weights, pool, request, model_ref, out

    def _try(self, nodes: int, width: int) -> Option | None:
        return _try_split(
            self.engine,
            self.shape,
            self.artifact,
            self.precision,
            self.weights,
            self.pool,
            nodes,
            width,
            self.pool.hosts(width),
            self.request,
            self.model_ref,
            self.out,
        )

    def _refuse(self, nodes: int, width: int, rule: str, reason: str, count: int) -> None:
        if count < 1:
            return
        layout = self.engine.make_layout(self.pool, nodes, width, width, nodes, self.shape, self.request)
        self.out.refuse(self.engine.name, layout, self.artifact.name, rule, reason, count=count)

    def _below_bound(self, nodes: int, width: int, least: int, count: int) -> None:
        """Refuse ``count`` layouts at once, the widest ``nodes`` × ``width``: their cards hold less than
        the weights and the KV cache."""
        if count < 1:
            return
        kv, room = self.weights.asked_kv_bytes, _card_room(self.pool, self.engine, self.request)
        gpu = self.pool.gpu
        self._refuse(
            nodes,
            width,
            "memory-lower-bound",
            f"the weights ({gib(self.weights.total_bytes)}) and the asked KV cache ({gib(kv)}) need at least "
            f"{least} × {gpu.name} ({gib(room)} usable each)",
            count=count,
        )

    def one_node(self, least: int, max_width: int, weights_least: int) -> Option | None:
        """The fewest cards of one node that fit (from the lower bound up), then its scale-ups; the fewest.

        When the KV cache alone pushes the bound up, the fewest cards the weights need are evaluated
        still, so the refusal says what the engine would hold there (its ``max_context``).
        """
        first = min(least, max_width + 1)
        probe = weights_least if weights_least < first else None
        if probe is not None:
            self._try(1, probe)  # refused on memory (the bound is a true lower bound), with the engine's numbers
        below = first - 1 - (probe is not None)
        self._below_bound(1, first - 1, least, count=below)
        fewest = None
        for width in range(first, min(max_width, first + SEARCH_STEPS - 1) + 1):
            fewest = self._try(1, width)
            if fewest is not None:
                break
        if fewest is None:
            self._refuse(
                1,
                max_width,
                "search-limit",
                f"no split of {first}–{first + SEARCH_STEPS - 1} cards fits; wider ones on one node are not tried",
                count=max(0, max_width - first - SEARCH_STEPS + 1),
            )
            return None
        self.out.accept(fewest)
        wider = scale_up_widths(fewest.layout.cards, max_width)
        for width in wider:
            option = self._try(1, width)
            if option is not None:
                self.out.accept(option)
        self._refuse(
            1,
            max_width,
            "more-than-needed",
            f"{fewest.layout.label} holds it; wider layouts on one node are offered at "
            f"{', '.join(map(str, wider)) or 'none'} cards",
            count=max_width - fewest.layout.cards - len(wider),
        )
        return fewest

    def across_nodes(self, least: int, max_width: int, max_nodes: int) -> Option | None:
        """The fewest cards across nodes: for each node count from the bound, the narrowest width that fits."""
        best: Option | None = None
        first = max(2, math.ceil(least / max_width))
        if first > 2:
            self._below_bound(first - 1, max_width, least, count=(first - 2) * max_width)
        for nodes in range(first, min(max_nodes, first + SEARCH_STEPS - 1) + 1):
            if best is not None and nodes >= best.layout.cards:
                self._refuse(
                    nodes,
                    max_width,
                    "more-than-needed",
                    f"{nodes} or more nodes are more than needed: {best.layout.label} holds it",
                    count=(max_nodes - nodes + 1) * max_width,
                )
                return best
            low = math.ceil(least / nodes)
            narrower = min(low, max_width + 1) - 1
            self._below_bound(nodes, narrower, least, count=narrower)
            for width in range(low, max_width + 1):
                if self.pool.hosts(width) < nodes:
                    break  # fewer nodes hold a wider width still
                if best is not None and nodes * width >= best.layout.cards:
                    self._refuse(
                        nodes,
                        width,
                        "more-than-needed",
                        f"{nodes} nodes × {width} is more than needed: {best.layout.label} holds it",
                        count=max_width - width + 1,
                    )
                    break
                option = self._try(nodes, width)
                if option is not None:
                    self.out.accept(option)
                    if best is None or option.layout.cards < best.layout.cards:
                        best = option
                    break  # wider widths on as many nodes take more cards
        return best

    def whole_nodes(self, least: int, max_width: int, most_nodes: int) -> None:
        """The layout the engines' docs recommend across nodes: every card of the fewest whole nodes that hold it
        (tp = a node's cards, pp = nodes; 405B on 2 × 8 × H100 → tp 8 × pp 2)."""
        for nodes in range(max(2, math.ceil(least / max_width)), most_nodes + 1):
            if self.pool.hosts(max_width) < nodes:
                return
            option = self._try(nodes, max_width)
            if option is not None:
                self.out.accept(option)
                return


def _try_split(
    engine: SplitEngine,
    shape: ModelShape,
    artifact: Artifact,
    precision: Precision,
    weights: _Weights,
    pool: Pool,
    nodes: int,
    width: int,
    hosts: int,
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> Option | None:
    """The best (tp, pp) split of ``nodes × width`` cards that fits, refusing the others."""
    name, cards = engine.name, nodes * width
    accepted = None
    for tp, pp in engine.decompositions(nodes, width, request):
        layout = engine.make_layout(pool, nodes, width, tp, pp, shape, request)
        if accepted is not None:
            out.refuse(
                name, layout, artifact.name, "split", f"{accepted.layout.parallel} is a better split of the same cards"
            )
            continue
        reasons = engine.refusals(shape, layout, request)
        if reasons:
            rule, reason = reasons[0]
            out.refuse(name, layout, artifact.name, rule, reason)
            continue
        if weights.total_bytes > pool.gpu.memory_bytes * engine.usable_share(request) * cards:
            out.refuse(
                name,
                layout,
                artifact.name,
                "memory-lower-bound",
                f"the weights alone ({weights.total_bytes / 2**30:.1f} GiB) exceed {cards} × {pool.gpu.name}",
            )
            break
        evaluation = engine.evaluate(shape, precision, layout, pool.gpu, request, model_ref)
        option = Option(
            layout=layout,
            artifact=artifact,
            precision=precision.name,
            bits_per_weight=weights.bits,
            evaluation=evaluation,
            free_now=pool.free_now(nodes, width, evaluation.free_needed_bytes),
            hosts=hosts,
            gpu=pool.gpu,
            node=pool.nodes[0],
        )
        if not evaluation.fits:
            out.refuse(name, layout, artifact.name, "memory", memory_reason(option.per_card), option=option)
            continue
        accepted = option
    return accepted


def recheck_split(
    engine: SplitEngine, shape: ModelShape, option: Option, request: PlanRequest, model_ref: str
) -> Option:
    """The same split at another context or concurrency: weights and overhead stay, the KV cache changes."""
    precision = shape.precision_of(option.artifact)
    return option.with_evaluation(engine.evaluate(shape, precision, option.layout, option.gpu, request, model_ref))


class SplitWalk:
    """The walk and recheck every tensor × pipeline engine shares: a base class for vLLM and SGLang.

    The subclass supplies the rest of :class:`~explorer.engines.interface.SplitEngine`
    (its splits, layouts, refusals, usable share and evaluation).
    """

    __slots__ = ()

    def walk(
        self,
        shape: ModelShape,
        cluster: Cluster,
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
        out: Collector,
    ) -> None:
        """The tensor × pipeline walk (:func:`walk_splits`)."""
        walk_splits(self, shape, cluster, artifacts, request, model_ref, out)  # type: ignore[arg-type]

    def recheck(self, shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str) -> Option:
        """The same layout re-evaluated for the new request."""
        return recheck_split(self, shape, option, request, model_ref)  # type: ignore[arg-type]
