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

from explorer.hardware.cluster import Cluster, GPUGroup, Node

__all__ = ["Census", "HostCap", "host_kinds", "node_slots", "spanning_copies"]

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


def node_slots(cluster: Cluster, gpu_class: str, width: int, *, host_cap: HostCap = None) -> list[tuple[Node, int]]:
    """(node, slots) for every node holding ``gpu_class``: how many ``width``-card copies each takes on its own
    (for launch lines, which name nodes)."""
    return [
        (n, _slots(n.group(gpu_class), n.host_ram_bytes, width, None, host_cap))  # type: ignore[arg-type]
        for n in cluster.nodes_with(gpu_class)
    ]


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
