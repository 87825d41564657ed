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
   ``memory``: the engine's accounting does not fit the asked context × concurrency (a tp layout whose KV
   cache, whole on every tp card, is what keeps it out first takes the least split of it that holds the request:
   vLLM's decode-context-parallel size, SGLang's DP attention size: :func:`~explorer.engines.launches.evaluate_sharded`);
5. ``more-than-needed``: it fits, but a way with no more cards and no more
   nodes (and fewer of one) fits too. On one node the fewest cards that fit
   are kept, with scale-ups to powers of two and the node's whole width up to
   :data:`~explorer.engines.split_pool.SCALE_UP_CARDS` (8: 2 → 4 → 8, so a 100,000-card node offers what
   an 8-card one does, with more replicas); a model one node holds never
   spans two (its ``replicas`` say how many copies the cluster holds).
   Across nodes the fewest cards are kept, and the whole-node layout too
   (tp = a node's cards, pp = nodes), which the engines' docs recommend.
6. ``split``: the same cards fit with a better split (more tensor parallelism).

Card and node counts start at a lower bound (the weights and the asked KV
cache against the engine's share of a card, ``memory-lower-bound`` for those
below it) and step up at most :data:`~explorer.engines.split_pool.SEARCH_STEPS` times (``search-limit``):
equal cards are counted, never enumerated one by one.

Before any pool, an artifact that is not safetensors (``format``), a context
past the model's limit (``context-limit``) and every unified-memory host
(``platform``) are refused; before a pool's layouts, weights the engine has no
kernel for on the pool's cards (``weights-unsupported``: block-FP8 on A100,
NVFP4 before Blackwell; :mod:`explorer.engines.weight_kernels`) and attention it has no kernel for there
(``attention-unsupported``: SGLang's sparse MLA below Hopper; :mod:`explorer.engines.attention_kernels`).

A user's ``--tp``/``--pp``/``--dp`` narrow the walk to launches of exactly tp ×
pp × dp cards with that split (:func:`~explorer.engines.launches.launch_splits`; the pool walk then tries
only those launches, fewest nodes first); no pool offering that
many is ``world-size``. Plain data parallelism (``--dp`` without DP attention)
runs dp replicas of the tp × pp split side by side on one node, in one launch,
each holding its share of the sequences (:func:`~explorer.engines.launches.evaluate_launch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from explorer.engines.attention_kernels import RULE as ATTENTION_RULE
from explorer.engines.attention_kernels import attention_refusal
from explorer.engines.collect import Collector
from explorer.engines.host_ram import with_host
from explorer.engines.interface import PinnedLayout, SplitEngine
from explorer.engines.launches import evaluate_launch, world_refusal
from explorer.engines.layouts import Layout
from explorer.engines.load_dtype import served
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.engines.serve_command import serve_reference
from explorer.engines.split_pinned import pin_split
from explorer.engines.split_pool import PoolWeights, walk_pool
from explorer.engines.weight_kernels import RULE, weights_refusal
from explorer.hardware.cards import CardRef
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster
from explorer.hardware.pools import Pool, gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.model.weights import weight_breakdown


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
        pools = gpu_pools(cluster)
        world = world_refusal(pools, request)
        if world:
            out.refuse(name, None, artifact.name, "world-size", world)
            continue
        for pool in pools:
            loaded, precision = served(engine, shape, artifact, pool.gpu)
            unsupported = weights_refusal(name, precision, pool.gpu)
            if unsupported:
                out.refuse(name, None, artifact.name, RULE, unsupported)
                continue
            no_attention = attention_refusal(name, loaded, pool.gpu)
            if no_attention:
                out.refuse(name, None, artifact.name, ATTENTION_RULE, no_attention)
                continue
            no_kv = engine.kv_refusal(loaded, pool.gpu, request.kv_dtype)
            if no_kv:
                out.refuse(name, None, artifact.name, "kv-dtype", no_kv)
                continue
            weights = PoolWeights(
                bits=loaded.bits_per_weight(precision),
                total_bytes=weight_breakdown(loaded, precision).total_bytes,
                asked_kv_bytes=loaded.kv_bytes(request.context_tokens, request.kv_dtype, request.concurrency),
            )
            ref = serve_reference(artifact, precision.method, model_ref, engine.online_methods, shape.precision.method)
            walk_pool(engine, loaded, artifact, precision, weights, pool, request, ref, out)


def recheck_split(
    engine: SplitEngine, shape: ModelShape, option: Option, request: PlanRequest, model_ref: str
) -> Option:
    """The same split at another context or concurrency: weights and overhead stay, the KV cache changes."""
    loaded, precision = served(engine, shape, option.artifact, option.gpu)
    ref = serve_reference(option.artifact, precision.method, model_ref, engine.online_methods, shape.precision.method)
    ev = evaluate_launch(engine, loaded, precision, option.layout, option.gpu, request, ref)
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

    def kv_refusal(self, shape: ModelShape, gpu: GPUClass, kv_dtype: str) -> str | None:
        """Every KV type the engine accepts (its ``refusals`` name those it has none of) runs on every card."""
        return None

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
