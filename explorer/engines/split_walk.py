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
4. ``host-ram``: no node has the host RAM the engine claims (vLLM's swap space,
   SGLang's hierarchical-cache pool: :mod:`explorer.engines.host_ram`);
   ``memory``: the engine's accounting does not fit the asked context × concurrency;
5. ``more-than-needed``: it fits, but a way with no more cards and no more
   nodes (and fewer of one) fits too. On one node every width that fits is
   kept (scaling up is a choice); across nodes only the fewest are.
6. ``split``: the same cards fit with a better split (more tensor parallelism).

Before any pool, an artifact that is not safetensors (``format``), a context
past the model's limit (``context-limit``) and every unified-memory host
(``platform``) are refused.

A user's ``--tp``/``--pp``/``--dp`` narrow the walk to launches of exactly tp ×
pp × dp cards with that split (:func:`launch_splits`); no pool offering that
many is ``world-size``. Plain data parallelism (``--dp`` without DP attention)
runs dp replicas of the tp × pp split side by side on one node, in one launch,
each holding its share of the sequences (:func:`evaluate_launch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from explorer.engines.collect import Collector
from explorer.engines.common import Layout, PlanRequest, serve_reference
from explorer.engines.host_ram import with_host
from explorer.engines.interface import PinnedLayout, SplitEngine
from explorer.engines.launches import evaluate_launch, launch_splits, make_launch, plain_dp, world_refusal
from explorer.engines.options import Option, memory_reason
from explorer.engines.split_pinned import pin_split
from explorer.hardware.cards import CardRef
from explorer.hardware.cluster import Cluster
from explorer.hardware.pools import Pool, gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.weights import weight_breakdown


@dataclass(frozen=True, slots=True, kw_only=True)
class _Weights:
    """An artifact's weights at its precision: bits a served parameter, bytes in all (before any split)."""

    bits: float
    total_bytes: int


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
            bits=shape.bits_per_weight(precision), total_bytes=weight_breakdown(shape, precision).total_bytes
        )
        pools = gpu_pools(cluster)
        world = world_refusal(pools, request)
        if world:
            out.refuse(name, None, artifact.name, "world-size", world)
            continue
        ref = serve_reference(artifact, precision.method, model_ref, engine.online_methods, shape.precision.method)
        for pool in pools:
            _walk_pool(engine, shape, artifact, precision, weights, pool, request, ref, out)


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
    max_nodes = len(pool.nodes) if pool.spannable else 1
    best: Option | None = None  # fewest cards, then fewest nodes, of the ways that fit so far
    for nodes in range(1, max_nodes + 1):
        if nodes > 1 and best is not None and nodes >= best.layout.cards:
            layout = engine.make_layout(pool, nodes, max_width, max_width, nodes, shape, request)
            out.refuse(
                name,
                layout,
                artifact.name,
                "more-than-needed",
                f"{nodes} or more nodes are more than needed: {best.layout.label} holds it",
                count=(max_nodes - nodes + 1) * max_width,
            )
            break
        for width in range(1, max_width + 1):
            hosts = pool.hosts(width)
            if hosts < nodes or (request.world_size is not None and nodes * width != request.world_size):
                continue
            if nodes > 1 and best is not None and nodes * width >= best.layout.cards:
                layout = engine.make_layout(pool, nodes, width, width, nodes, shape, request)
                out.refuse(
                    name,
                    layout,
                    artifact.name,
                    "more-than-needed",
                    f"{layout.label} is more than needed: {best.layout.label} holds it",
                    count=max_width - width + 1,
                )
                break
            option = _try_split(
                engine, shape, artifact, precision, weights, pool, nodes, width, hosts, request, model_ref, out
            )
            if option is None:
                continue
            out.accept(option)
            if best is None or option.layout.cards < best.layout.cards:
                best = option
            if nodes > 1:
                break  # wider widths on as many nodes take more cards


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
    for tp, pp in launch_splits(engine, nodes, width, request):
        layout = make_launch(engine, pool, nodes, width, tp, pp, shape, request)
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
        replica_cards = cards // plain_dp(request)
        if weights.total_bytes > pool.gpu.memory_bytes * engine.usable_share(request) * replica_cards:
            out.refuse(
                name,
                layout,
                artifact.name,
                "memory-lower-bound",
                f"the weights alone ({weights.total_bytes / 2**30:.1f} GiB) exceed {replica_cards} × {pool.gpu.name}",
            )
            break
        evaluation = evaluate_launch(engine, shape, precision, layout, pool.gpu, request, model_ref)
        claim = engine.host_claim(layout, evaluation, request)
        roomy = [n for n in pool.nodes if n.group(pool.gpu.name).count >= width and claim.fits(n)]
        if len(roomy) < nodes:
            most = max(pool.nodes, key=lambda n: n.host_ram_bytes)
            out.refuse(name, layout, artifact.name, "host-ram", claim.refusal(most, name))
            break
        node = max(roomy, key=lambda n: n.host_ram_bytes)
        evaluation = with_host(evaluation, claim, node)
        ram_now = sum(1 for n in roomy if claim.fits_now(n)) >= nodes
        option = Option(
            layout=layout,
            artifact=artifact,
            precision=precision.name,
            bits_per_weight=weights.bits,
            evaluation=evaluation,
            free_now=ram_now and pool.free_now(nodes, width, evaluation.free_needed_bytes),
            hosts=min(hosts, len(roomy)),
            gpu=pool.gpu,
            node=node,
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
    ref = serve_reference(option.artifact, precision.method, model_ref, engine.online_methods, shape.precision.method)
    ev = evaluate_launch(engine, shape, precision, option.layout, option.gpu, request, ref)
    return option.with_evaluation(with_host(ev, engine.host_claim(option.layout, ev, request), option.node))


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

    def serves(self, artifact: Artifact) -> bool:
        """Safetensors weights only."""
        return artifact.format == "safetensors"

    def pin(
        self,
        shape: ModelShape,
        cards: Sequence[CardRef],
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
    ) -> PinnedLayout:
        """The best split of exactly ``cards`` (:func:`explorer.engines.split_pinned.pin_split`)."""
        return pin_split(self, shape, cards, artifacts, request, model_ref)  # type: ignore[arg-type]
