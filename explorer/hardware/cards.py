"""Single cards: one device of a node, named as a user names it (``NODE:INDEX``).

A node's cards are numbered across its GPU groups in order: a node with two
RTX 4090s then one RTX 3090 has cards 0 and 1 (4090s) and 2 (the 3090). A
card's free memory now is its group's figure
(:meth:`explorer.hardware.cluster.GPUGroup.free_bytes_on`: 0 on a busy card).
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import GPUGroup, Node


@dataclass(frozen=True, slots=True, kw_only=True)
class CardRef:
    """One card of a node.

    Attributes:
        node: the node holding it.
        group: its GPU group on that node.
        index: its index within the group (what ``free_bytes_on`` takes).
        position: its index on the node, across groups (what ``NODE:INDEX`` names).
    """

    node: Node
    group: GPUGroup
    index: int
    position: int

    @property
    def name(self) -> str:
        """``NODE:INDEX``, as a user pins it."""
        return f"{self.node.name}:{self.position}"

    @property
    def gpu(self) -> GPUClass:
        """The card's class."""
        return self.group.gpu

    @property
    def capacity_bytes(self) -> int:
        """The card's whole memory (bytes)."""
        return self.group.gpu.memory_bytes

    @property
    def free_bytes(self) -> int:
        """Its free memory right now (bytes; 0 when a workload holds the card)."""
        return self.group.free_bytes_on(self.index)

    @property
    def busy(self) -> bool:
        """Whether a workload holds the card now (beyond its group's ``free_count``)."""
        return self.index >= self.group.free_count


def node_cards(node: Node) -> tuple[CardRef, ...]:
    """Every card of a node, by position."""
    out: list[CardRef] = []
    for group in node.gpus:
        for k in range(group.count):
            out.append(CardRef(node=node, group=group, index=k, position=len(out)))
    return tuple(out)


def class_cards(node: Node, class_name: str, count: int | None = None) -> list[CardRef]:
    """A node's cards of one class, by position (the first ``count`` of them): built from its one group of
    that class, so a 100,000-card node costs ``count`` cards, not all of them."""
    offset = 0
    for group in node.gpus:
        if group.gpu.name == class_name:
            many = group.count if count is None else min(count, group.count)
            return [CardRef(node=node, group=group, index=k, position=offset + k) for k in range(many)]
        offset += group.count
    return []


def roomiest_cards(cards: tuple[CardRef, ...] | list[CardRef], count: int) -> list[CardRef]:
    """The ``count`` cards with the most memory free now (ties: lower position first)."""
    return sorted(cards, key=lambda c: (-c.free_bytes, c.node.name, c.position))[:count]


def roomiest_class_cards(node: Node, class_name: str, count: int) -> list[CardRef]:
    """:func:`roomiest_cards` of a node's cards of one class. Without per-card figures the group's free cards
    come first by index and offer alike, so the roomiest are its first ``count``: counted, not sorted."""
    group = node.group(class_name)
    if group is None:
        return []
    if not group.card_free_bytes:
        return class_cards(node, class_name, count)
    return roomiest_cards(class_cards(node, class_name), count)
