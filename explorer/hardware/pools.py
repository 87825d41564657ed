"""GPU pools: the cards of one class a replica may use together.

A pool is one class on a set of nodes: a fabric's nodes (a replica may span
them), or the nodes of that class that stand alone (a replica takes one).
MIG slices never span. Unified-memory hosts are not pools: their GPU shares
the host's RAM and only llama.cpp plans them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster, GPUGroup, Node


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """GPUs of one class that one replica may use together.

    Attributes:
        gpu: the class.
        nodes: the nodes holding it (spannable: one fabric; else nodes that stand alone).
        fabric: the fabric they share, or None.
        spannable: whether a replica may span several of the nodes.
        groups: each node's GPU group of the class (filled in from ``nodes``).
        alike: the distinct groups, each with how many nodes hold it (filled in: 60 alike nodes
            are one entry, so counting nodes costs the same on any cluster of that make).
        kinds: the distinct nodes by their group and host RAM (total and free now), the first of each
            in node order with how many nodes are like it (filled in; for host RAM checks).
    """

    gpu: GPUClass
    nodes: tuple[Node, ...]
    fabric: str | None
    spannable: bool
    groups: tuple[GPUGroup, ...] = ()
    alike: tuple[tuple[GPUGroup, int], ...] = ()
    kinds: tuple[tuple[Node, int], ...] = ()

    def __post_init__(self) -> None:
        if not self.groups:  # each node's GPU group of the class, in node order
            object.__setattr__(self, "groups", tuple(n.group(self.gpu.name) for n in self.nodes))
        if not self.alike or not self.kinds:  # keyed by primitives: hashing a group hashes its whole class
            groups: dict[tuple, GPUGroup] = {}
            first: dict[tuple, Node] = {}
            alike: Counter[tuple] = Counter()
            kinds: Counter[tuple] = Counter()
            for node, group in zip(self.nodes, self.groups, strict=True):
                key = group.alike_key
                groups.setdefault(key, group)
                alike[key] += 1
                kind = (key, node.host_ram_bytes, node.host_free_bytes)
                first.setdefault(kind, node)
                kinds[kind] += 1
            object.__setattr__(self, "alike", tuple((groups[k], alike[k]) for k in groups))
            object.__setattr__(self, "kinds", tuple((first[k], kinds[k]) for k in first))

    def width(self) -> int:
        """The most cards of the class one node offers."""
        return max(g.count for g, _ in self.alike)

    def hosts(self, cards: int) -> int:
        """How many nodes have at least ``cards`` cards of the class."""
        return sum(many for g, many in self.alike if g.count >= cards)

    def kinds_holding(self, cards: int, host_fits: Callable[[Node], bool]) -> list[tuple[Node, int]]:
        """The :attr:`kinds` of node with at least ``cards`` cards of the class whose host passes ``host_fits``."""
        return [(n, many) for n, many in self.kinds if n.group(self.gpu.name).count >= cards and host_fits(n)]

    def free_now(self, nodes: int, width: int, needed_bytes: int) -> bool:
        """Whether ``nodes`` of its nodes each have ``width`` cards with ``needed_bytes`` free right now
        (see :meth:`explorer.hardware.cluster.GPUGroup.free_bytes_for`)."""
        return sum(many for g, many in self.alike if g.free_bytes_for(width) >= needed_bytes) >= nodes


def gpu_pools(cluster: Cluster) -> list[Pool]:
    """The cluster's GPU pools: each fabric's nodes of a class, and each class's stand-alone nodes together.

    Built once per cluster (:meth:`Cluster.derived`): every engine of every plan walks the same pools.
    """
    return list(cluster.derived(_build_pools))


def _build_pools(cluster: Cluster) -> tuple[Pool, ...]:
    pools: list[Pool] = []
    for (name, fabric), nodes in cluster.pools().items():
        if nodes[0].unified:
            continue
        gpu = nodes[0].group(name).gpu  # type: ignore[union-attr]
        spannable = fabric is not None and not gpu.is_mig
        pools.append(Pool(gpu=gpu, nodes=nodes, fabric=fabric, spannable=spannable))
    return tuple(pools)
