"""llama.cpp beyond one class on one node: a node's cards of several classes, and RPC across nodes.

- **Several classes on one node**: a node whose cards differ (an RTX 4090 beside an
  RTX 3090) is one pool to llama.cpp, split in proportion to each card's memory
  (gpustack's ``_generate_combinations_for_single_worker_multi_gpus``). Tried only
  with more cards than one class of the node needs to hold every layer.
- **RPC** (gpustack's ``find_multi_worker_multi_gpu_candidates``): the node with the
  most cards keeps them, and single cards on the pool's other nodes join as
  ``rpc-server``s, the fewest that hold every layer (and, when those fill a card to the
  brim, also the fewest that leave headroom, for the ranking to choose). When all of them do not, the
  most layers they hold, the rest on the CPU: only when CPU offload is allowed,
  no ``-ngl`` was given, and that beats the node's own partial offload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import islice

from explorer.engines.layouts import Layout
from explorer.engines.llamacpp.launch import NAME
from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES, card_seats, class_seats, rpc_seats
from explorer.engines.llamacpp.walk import Ctx, accept, asked, more_than_needed, try_launch
from explorer.engines.options import Option, at_the_brim
from explorer.hardware.cards import CardRef, class_cards, node_cards
from explorer.hardware.cluster import Node
from explorer.hardware.pools import Pool

#: the most single-card RPC servers one launch is planned with (gpustack caps its search at 16 cards too)
MAX_RPC_SERVERS = 16


def walk_rpc(ctx: Ctx, pool: Pool, local: Option | None) -> None:
    """The node with the most cards, plus single-card RPC servers on the pool's other nodes."""
    main = max(pool.nodes, key=lambda n: (n.group(pool.gpu.name).count, n.host_ram_bytes))
    width = main.group(pool.gpu.name).count if not pool.gpu.is_mig else 1
    others = list(
        islice((c for n in pool.nodes if n is not main for c in class_cards(n, pool.gpu.name)), MAX_RPC_SERVERS)
    )
    if not others:
        return
    room = pool.gpu.memory_bytes - CUDA_CONTEXT_BYTES
    first = 1
    if ctx.offload.fixed_ngl is None:  # the offloaded weights alone need this many cards
        first = max(1, -(-ctx.offloadable_bytes // room) - width)

    def layout_with(k: int) -> Layout:
        nodes = 1 + len({c.node.name for c in others[:k]})
        return Layout(
            engine=NAME,
            gpu_class=pool.gpu.name,
            fabric=pool.fabric,
            nodes=nodes,
            gpus_per_node=width,
            pp=width + k,
            rpc=True,
            rpc_servers=k,
        )

    def probe(k: int) -> Option | None:
        seats = class_seats(pool.gpu, width) + rpc_seats(others[:k], placeholder=True)
        return try_launch(
            ctx, layout_with(k), seats, pool.gpu, main, hosts=max(1, len(pool.nodes) // layout_with(k).nodes)
        )

    def holds_every_layer(k: int) -> bool:
        option = probe(k)
        return option is not None and asked(ctx, option)

    def holds_with_headroom(k: int) -> bool:
        option = probe(k)
        return option is not None and asked(ctx, option) and not at_the_brim(option)

    found = _fewest(first, len(others), holds_every_layer)
    main_cards = class_cards(main, pool.gpu.name, width)
    if found is not None:
        option = probe(found)
        accept(ctx, option, [(card_seats(main_cards, now=True) + rpc_seats(others[:found], now=True), main)])
        roomy = _fewest(found + 1, len(others), holds_with_headroom) if at_the_brim(option) else None
        if roomy is not None:
            option = replace(probe(roomy), beside_brim=True)
            accept(ctx, option, [(card_seats(main_cards, now=True) + rpc_seats(others[:roomy], now=True), main)])
        last = roomy or found
        if last < len(others):
            more_than_needed(ctx, layout_with(last + 1), option.layout.label, len(others) - last)
        return
    widest = probe(len(others))
    if widest is None or not ctx.offload.partial or ctx.offload.fixed_ngl is not None:
        return
    if local is None or widest.evaluation.layers_on_host < local.evaluation.layers_on_host:
        accept(ctx, widest, [(card_seats(main_cards, now=True) + rpc_seats(others, now=True), main)])


def _fewest(low: int, high: int, holds: Callable[[int], bool]) -> int | None:
    """The least k in [low, high] for which ``holds(k)`` (true from some k on, as more devices hold more)."""
    if low > high or not holds(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid + 1
    return low


def mixed_cards(node: Node) -> list[CardRef]:
    """A node's cards of more than one class (MIG slices and unified hosts aside), largest first; else empty."""
    if node.unified or len({g.gpu.name for g in node.gpus if not g.gpu.is_mig}) < 2:
        return []  # decided from the groups: a node of one class is never enumerated card by card
    cards = [c for c in node_cards(node) if not c.gpu.is_mig]
    return sorted(cards, key=lambda c: (-c.capacity_bytes, c.position))


def walk_mixed(ctx: Ctx, node: Node, *, hosts: int) -> None:
    """A node's cards of several classes as one pool, split in proportion to each card's memory."""
    cards = mixed_cards(node)
    # one class of the node already holds every layer on this many of its cards: more cards only split it
    enough = min(
        (ctx.full_width[g.gpu.name] for g in node.gpus if ctx.full_width.get(g.gpu.name, 1 << 30) <= g.count),
        default=len(cards) + 1,
    )
    chosen: Option | None = None
    for k in range(2, min(len(cards), enough - 1) + 1):
        picked = cards[:k]
        classes = list(dict.fromkeys(c.gpu.name for c in picked))
        if len(classes) < 2:
            continue
        layout = Layout(engine=NAME, gpu_class="+".join(classes), gpus_per_node=k, pp=k)
        slowest = min((c.gpu for c in picked), key=lambda g: (g.bandwidth_bytes_per_s, g.memory_bytes))
        option = try_launch(ctx, layout, card_seats(picked), slowest, node, hosts=hosts)
        if option is None:
            continue
        if asked(ctx, option):
            chosen = option
            break
        if k == len(cards):
            chosen = option
    if chosen is not None:
        picked = cards[: chosen.layout.gpus_per_node]
        accept(ctx, chosen, [(card_seats(picked, now=True), node)])
