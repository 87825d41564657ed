"""How many copies of one layout a cluster holds at once, counted from card counts, never by enumerating cards.

A layout takes ``width`` cards of one class on each of ``nodes`` nodes. A
node with ``c`` such cards offers ``c // width`` slots (a MIG slice is a
card of its own class, width 1). One copy on one node takes one slot; a
copy spanning ``nodes`` nodes takes one slot on each of that many distinct
nodes of one fabric. ``k`` copies fit on a fabric's nodes exactly when

    sum over its nodes of min(slots, k)  ≥  nodes × k

(each node serves at most one rank-set of a copy, so it gives at most ``k``
slots to ``k`` copies; the left side grows by the number of nodes with more
than ``k`` slots, so the condition holds for every ``k`` up to the largest,
which a bisection finds). Worked: 3 nodes with 2, 2 and 1 slots and copies
spanning 2 nodes: k = 2 gives 2 + 2 + 1 = 5 ≥ 4; k = 3 gives 5 < 6; so 2.

A :class:`Census` counts alike nodes together (class group, fabric, host
RAM), so 12,500 nodes of 8 H100 are one entry × 12,500 and a 100,000-card
node one entry: counting copies costs the same on any cluster of that make.
With ``needed_bytes`` only the cards with that much free right now count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from explorer.hardware.cluster import Cluster, GPUGroup, Node

__all__ = ["Census", "HostCap", "NodeRun", "class_runs", "host_kinds", "spanning_copies"]

#: at most this many copies on a node of this much host RAM (bytes); None: no cap
HostCap = Callable[[int], int] | None


def _slots(group: GPUGroup, host_ram_bytes: int, width: int, needed_bytes: int | None, cap: HostCap) -> int:
    cards = group.count if needed_bytes is None else group.cards_free_for(needed_bytes)
    slots = cards // width
    return slots if cap is None else min(slots, max(0, cap(host_ram_bytes)))


def spanning_copies(slots: list[tuple[int, int]], nodes: int) -> int:
    """The most copies that each take one slot on ``nodes`` distinct nodes; ``slots`` holds
    (slots a node offers, how many such nodes)."""
    if nodes <= 1:
        return sum(s * m for s, m in slots)
    lo, hi = 0, sum(s * m for s, m in slots) // nodes
    while lo < hi:  # the largest k with sum(min(s, k)) >= nodes * k (the module docstring)
        k = (lo + hi + 1) // 2
        if sum(min(s, k) * m for s, m in slots) >= nodes * k:
            lo = k
        else:
            hi = k - 1
    return lo


class Census:
    """A cluster's GPU nodes of each class, alike nodes counted together (build it once a plan).

    Attributes:
        kinds: class name -> [(fabric, the class's group on the node, host RAM bytes, how many such nodes)].
    """

    __slots__ = ("kinds",)

    def __init__(self, cluster: Cluster) -> None:
        counted: Counter[tuple] = Counter()
        groups: dict[tuple, GPUGroup] = {}
        for n in cluster.nodes:
            for g in n.gpus:
                key = (g.alike_key, n.fabric, n.host_ram_bytes)  # primitives: cheap to hash
                groups.setdefault(key, g)
                counted[key] += 1
        self.kinds: dict[str, list[tuple[str | None, GPUGroup, int, int]]] = {}
        for key, many in counted.items():
            group, (_, fabric, ram) = groups[key], key
            self.kinds.setdefault(group.gpu.name, []).append((fabric, group, ram, many))

    def copies(
        self,
        gpu_class: str,
        nodes: int,
        width: int,
        *,
        needed_bytes: int | None = None,
        host_cap: HostCap = None,
    ) -> int:
        """Copies of a layout of ``width`` cards of ``gpu_class`` on each of ``nodes`` nodes that fit at once.

        One node: every node holding the class counts, whatever its fabric. Several: only nodes
        sharing a fabric may form one copy, and MIG slices never do. ``needed_bytes``: count only
        cards with that much free now. ``host_cap(host RAM bytes)``: at most that many copies on a node.
        """
        if width < 1 or nodes < 1:
            return 0
        kinds = self.kinds.get(gpu_class, [])
        if nodes == 1:
            return sum(_slots(g, ram, width, needed_bytes, host_cap) * many for _, g, ram, many in kinds)
        fabrics: dict[str, list[tuple[int, int]]] = {}
        for fabric, g, ram, many in kinds:
            if fabric is not None and not g.gpu.is_mig:
                fabrics.setdefault(fabric, []).append((_slots(g, ram, width, needed_bytes, host_cap), many))
        return sum(spanning_copies(slots, nodes) for slots in fabrics.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRun:
    """Consecutive nodes that hold one class alike (the class's group, the node's classes in order, fabric, host
    RAM), in the cluster's order: the class's cards sit at the same positions on each.

    Attributes:
        nodes: the run's nodes, in order.
        group: the class's group on each of them.
        host_ram_bytes: each node's host RAM.
    """

    nodes: tuple[Node, ...]
    group: GPUGroup
    host_ram_bytes: int

    @property
    def fabric(self) -> str | None:
        """The network the run's nodes share (None: each stands alone)."""
        return self.nodes[0].fabric

    @property
    def make(self) -> tuple[tuple[str, int], ...]:
        """Each node's classes and their counts, in order: what numbers its cards."""
        return _make(self.nodes[0])

    def slots(self, width: int, *, host_cap: HostCap = None) -> int:
        """How many ``width``-card copies each node of the run takes on its own (on every card)."""
        return _slots(self.group, self.host_ram_bytes, width, None, host_cap)


def class_runs(cluster: Cluster, gpu_class: str) -> tuple[NodeRun, ...]:
    """The nodes holding ``gpu_class`` as runs of alike nodes, in node order (for launch lines, which name nodes).

    Found once per cluster (:meth:`Cluster.derived`): 12,500 alike nodes are one run, so writing an option's launch
    lines costs the same on them as on one node."""
    return cluster.derived(_runs_by_class).get(gpu_class, ())


def _make(node: Node) -> tuple[tuple[str, int], ...]:
    """A node's classes and their counts, in order: what numbers its cards."""
    return tuple((g.gpu.name, g.count) for g in node.gpus)


def _runs_by_class(cluster: Cluster) -> dict[str, tuple[NodeRun, ...]]:
    runs: dict[str, list[tuple[tuple, GPUGroup, int, list[Node]]]] = {}
    for n in cluster.nodes:
        for g in n.gpus:
            key = (g.alike_key, _make(n), n.fabric, n.host_ram_bytes)
            of_class = runs.setdefault(g.gpu.name, [])
            if of_class and of_class[-1][0] == key:
                of_class[-1][3].append(n)
            else:
                of_class.append((key, g, n.host_ram_bytes, [n]))
    return {
        name: tuple(NodeRun(nodes=tuple(nodes), group=g, host_ram_bytes=ram) for _, g, ram, nodes in of_class)
        for name, of_class in runs.items()
    }


def host_kinds(cluster: Cluster) -> tuple[tuple[Node, int], ...]:
    """Every node by its host RAM and free host RAM: the first node of each kind (in node order) with how many
    nodes are like it. Counted once per cluster (:meth:`Cluster.derived`), so a host-RAM check costs the same on
    12,500 alike nodes as on one."""
    return cluster.derived(_count_hosts)


def _count_hosts(cluster: Cluster) -> tuple[tuple[Node, int], ...]:
    first: dict[tuple[int, int], Node] = {}
    many: Counter[tuple[int, int]] = Counter()
    for n in cluster.nodes:
        key = (n.host_ram_bytes, n.host_free_bytes)
        first.setdefault(key, n)
        many[key] += 1
    return tuple((node, many[key]) for key, node in first.items())
