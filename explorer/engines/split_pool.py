"""One pool of the tensor × pipeline walk (:mod:`explorer.engines.split_walk`): which card and node counts are
tried, from a memory lower bound, and the split each gets.

On one node: the fewest cards that fit, then scale-ups to powers of two and
the node's whole width up to :data:`SCALE_UP_CARDS`. Across nodes (when no
node holds it): for each node count the narrowest width that fits, and the
whole-node layout; when every one of those fits only at the brim, the next
node count's narrowest fit and whole nodes too (the ranking prefers headroom). Counts below the lower bound are refused at once
(``memory-lower-bound``), so equal cards are counted, never enumerated.

With the user's ``--tp``/``--pp``/``--dp`` (a world size) only launches of
exactly that many cards are tried, fewest nodes first
(:mod:`explorer.engines.launches`). Each launch is evaluated as the engine
starts it (plain dp replicas each with their share of the sequences), and a
node must also hold the host RAM the engine claims (``host-ram``,
:mod:`explorer.engines.host_ram`); :mod:`explorer.engines.split_trial` checks each
and adds the engine's expert data parallelism on whole nodes. A launch the user's
sizes leave no split for is refused with the reason (``split-rules``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from explorer.engines.collect import Collector
from explorer.engines.interface import SplitEngine
from explorer.engines.launches import (
    launch_splits,
    make_launch,
    no_split_reason,
    plain_dp,
)
from explorer.engines.layouts import Layout
from explorer.engines.options import Option, at_the_brim
from explorer.engines.request import PlanRequest
from explorer.engines.split_trial import PoolWeights, Trial, attention_ep_option, expert_dp_option
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.units import gib

__all__ = ["SCALE_UP_CARDS", "SEARCH_STEPS", "PoolWeights", "scale_up_widths", "walk_pool"]


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
    shape: ModelShape, weights: PoolWeights, pool: Pool, engine: SplitEngine, request: PlanRequest, *, kv: bool = True
) -> int:
    """Cards no split can go below: the weights (and with ``kv`` the asked KV cache, counted once whatever
    the split) against the engine's share of a card."""
    cache = weights.asked_kv_bytes if kv else 0
    room = _card_room(pool, engine, request)
    return max(1, math.ceil((weights.total_bytes + cache) / room)) if room > 0 else 1


def _card_room(pool: Pool, engine: SplitEngine, request: PlanRequest) -> int:
    """The most of one of the pool's cards the engine fills (a bound: weights, KV and the rest)."""
    return int(pool.gpu.memory_bytes * engine.usable_share(request))


def walk_pool(
    engine: SplitEngine,
    shape: ModelShape,
    artifact: Artifact,
    precision: Precision,
    weights: PoolWeights,
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
    max_nodes = min(len(pool.nodes), shape.layers) if pool.spannable else 1
    if request.world_size is not None:
        walk.launches_of(request.world_size, max_width, len(pool.nodes) if pool.spannable else 1)
        return
    least = _least_cards(shape, weights, pool, engine, request)
    fewest = walk.one_node(least, max_width, _least_cards(shape, weights, pool, engine, request, kv=False))
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
    walk.past_the_brim(least, max_width, max_nodes)


class _PoolWalk:
    """The splits of one artifact on one pool, tried and reported into the collector."""

    __slots__ = (
        "artifact",
        "engine",
        "model_ref",
        "offered",
        "out",
        "pool",
        "precision",
        "request",
        "shape",
        "weights",
    )

    def __init__(self, engine, shape, artifact, precision, weights, pool, request, model_ref, out) -> None:
        self.engine, self.shape, self.artifact, self.precision = engine, shape, artifact, precision
        self.weights, self.pool, self.request, self.model_ref, self.out = weights, pool, request, model_ref, out
        self.offered: dict[tuple[int, int], Option] = {}  # the layouts across nodes accepted, by (nodes, width)

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
            f"{least} × {gpu.name} (at most {gib(room)} each)",
            count=count,
        )

    def launches_of(self, world: int, max_width: int, max_nodes: int) -> None:
        """The user's world size: every ``nodes × width`` of exactly ``world`` cards the pool offers, fewest nodes
        first; the first that fits is kept, launches over more nodes are more than needed."""
        kept: Option | None = None
        for width in range(min(max_width, world), 0, -1):
            nodes = world // width
            if world % width or nodes > max_nodes or self.pool.hosts(width) < nodes:
                continue
            if kept is not None:
                self._refuse(
                    nodes,
                    width,
                    "more-than-needed",
                    f"{nodes} nodes × {width} is more than needed: {kept.layout.label} holds it",
                    count=1,
                )
                continue
            kept = self._try(nodes, width)
            if kept is not None:
                self.out.accept(kept)

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
        skipped = next((w for w in range(fewest.layout.cards + 1, max_width + 1) if w not in wider), None)
        if skipped is not None:  # the first width not offered stands for all of them
            self._refuse(
                1,
                skipped,
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
                    self._accept(option, nodes, width)
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
                self._accept(option, nodes, max_width)
                return

    def past_the_brim(self, least: int, max_width: int, max_nodes: int) -> None:
        """When every layout across nodes fits only at the brim (:func:`~explorer.engines.options.at_the_brim`), the
        next node count too: its narrowest fit and its whole nodes, however many cards, for the ranking to choose
        (it puts headroom first). GLM-5 at 131,072 tokens on 4 × 8 × A100: vLLM's 3 × 8 needs 96.8 % of a card
        and holds one sequence, 4 × 6 needs 96.8 % too; 4 × 8 needs 74.8 % and holds six."""
        if not self.offered or any(not at_the_brim(o) for o in self.offered.values()):
            return
        nodes = min(n for n, _ in self.offered) + 1
        if nodes > max_nodes:
            return
        for width in range(max(1, math.ceil(least / nodes)), max_width + 1):
            if self.pool.hosts(width) < nodes:
                return
            if self._offer(nodes, width):
                break
        self._offer(nodes, max_width)

    def _accept(self, option: Option, nodes: int, width: int) -> None:
        self.out.accept(option)
        self.offered[nodes, width] = option

    def _offer(self, nodes: int, width: int) -> bool:
        """``nodes`` × ``width`` tried and accepted if it fits (marked ``beside_brim``), once, where the pool has
        the nodes; whether it is offered."""
        if (nodes, width) in self.offered:
            return True
        if self.pool.hosts(width) < nodes:
            return False
        option = self._try(nodes, width)
        if option is not None:
            self._accept(replace(option, beside_brim=True), nodes, width)
        return option is not None


def _sharded_to_the_brim(option: Option | None, tried: Layout) -> bool:
    """Whether ``option`` fits only by splitting its KV cache further than ``tried`` (vLLM's decode context
    parallelism, SGLang's DP attention: :func:`~explorer.engines.launches.evaluate_sharded`), and only at the brim
    (:func:`~explorer.engines.options.at_the_brim`). Such a layout yields to a later split of the same cards
    that fits with headroom: DeepSeek-V3's int4 weights at 131,072 × 8 on 8 H200s with SGLang keep tp4 pp2
    (131.7 GiB of 140.4) over tp8 dp2 (136.0 GiB)."""
    return option is not None and option.layout != tried and at_the_brim(option)


def _refuse_split(out: Collector, engine: SplitEngine, artifact: Artifact, layout: Layout, accepted: Option) -> None:
    out.refuse(
        engine.name, layout, artifact.name, "split", f"{accepted.layout.parallel} is a better split of the same cards"
    )


def _try_split(
    engine: SplitEngine,
    shape: ModelShape,
    artifact: Artifact,
    precision: Precision,
    weights: PoolWeights,
    pool: Pool,
    nodes: int,
    width: int,
    hosts: int,
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> Option | None:
    """The best (tp, pp) split of ``nodes × width`` cards that fits, refusing the others.

    A launch's split is narrowed by the user's tp, pp and dp (:func:`~explorer.engines.launches.launch_splits`);
    it needs ``nodes`` nodes with the cards and the host RAM the engine claims on each. A mixture of experts
    whose experts the block-FP8 rule keeps from splitting by tp spreads them whole instead (ep = tp). On a
    pool's whole nodes, the engine's expert data parallelism is tried too
    (:func:`~explorer.engines.split_trial.expert_dp_option`), and under DP attention its experts spread whole
    (:func:`~explorer.engines.split_trial.attention_ep_option`): it is accepted here beside the split, or returned
    when no split fits.
    """
    trial = Trial(engine, shape, artifact, precision, weights, pool, hosts, request, model_ref, out)
    accepted, tried, sharded_at_brim = None, False, None
    for tp, pp in launch_splits(engine, nodes, width, request, shape):
        tried = True
        layout = make_launch(engine, pool, nodes, width, tp, pp, shape, request)
        if accepted is not None:
            _refuse_split(out, engine, artifact, layout, accepted)
            continue
        kept = trial.block_kept(layout)
        option, stop = trial.check(kept, nodes, width)
        if stop:
            break
        if sharded_at_brim is None and _sharded_to_the_brim(option, kept):
            sharded_at_brim = option  # kept unless a later split of the same cards fits with headroom
            continue
        accepted = option
    if sharded_at_brim is not None:
        if accepted is None:
            accepted = sharded_at_brim
        else:
            _refuse_split(out, engine, artifact, sharded_at_brim.layout, accepted)
    if not tried:
        tp, pp = request.tensor_parallel_size or width, request.pipeline_parallel_size or 1
        layout = replace(engine.make_layout(pool, nodes, width, tp, pp, shape, request), dp=plain_dp(request))
        out.refuse(
            engine.name, layout, artifact.name, "split-rules", no_split_reason(engine, nodes, width, request, shape)
        )
    extra = expert_dp_option(trial, nodes, width) or attention_ep_option(trial, nodes, width)
    if extra is None or accepted is None:
        return accepted or extra
    out.accept(extra)
    return accepted
