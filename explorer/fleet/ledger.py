"""The planner's working state: per-card charges and the tenancies that hold them.

Internal to :mod:`explorer.fleet.place`. A *tenancy* is what is charged as one
unit: a model with its replicas, or a swap group charged per card at its
largest member. The :class:`Ledger` keeps per-card charged bytes in step with
the tenancies, and the functions here form swap groups and add replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from explorer.fleet.records import ModelDemand
from explorer.fleet.result import Instance
from explorer.fleet.rooms import Rooms
from explorer.fleet.split import Layout, find_layout, tight_layout


@dataclass(slots=True)
class Tenancy:
    """Models charged together: one model with its replicas, or a swap group."""

    members: list[tuple[ModelDemand, Instance]]
    replicas: list[Instance] = field(default_factory=list)

    def charges(self) -> dict[int, int]:
        """Per card: the largest member's charge, plus every extra replica's."""
        slot: dict[int, int] = {}
        for _, inst in self.members:
            for card, b in zip(inst.cards, inst.split_bytes, strict=True):
                slot[card] = max(slot.get(card, 0), b)
        for inst in self.replicas:
            for card, b in zip(inst.cards, inst.split_bytes, strict=True):
                slot[card] = slot.get(card, 0) + b
        return slot

    def never_runs_with(self, model: ModelDemand) -> bool:
        """True when no member ever shares a phase with ``model``."""
        return all(model.never_runs_with(d) for d, _ in self.members)


class Ledger:
    """Per-card usable and charged bytes, each card's class, and the tenancies charged so far.

    The free room is kept as a :class:`Rooms` in step with every charge, so a layout search walks the
    roomiest cards without sorting the fleet again.
    """

    def __init__(self, usable: dict[int, int], classes: dict[int, str | None] | None = None) -> None:
        self.usable = usable
        self.classes = classes or {}
        self.charged = dict.fromkeys(usable, 0)
        self.tenancies: list[Tenancy] = []
        self._rooms = Rooms(usable, self.classes)

    def room(self) -> Rooms:
        """Free bytes per card, never negative (an overrun card has none); live: later charges show in it."""
        return self._rooms

    def debit(self, tenancy: Tenancy, sign: int = 1) -> None:
        """Charge a tenancy's per-card bytes (``sign=-1`` refunds them)."""
        for card, b in tenancy.charges().items():
            self.charged[card] += sign * b
            self._rooms.set(card, max(0, self.usable[card] - self.charged[card]))


def make_instance(demand: ModelDemand, layout: Layout, replica: int = 0) -> Instance:
    """The ``Instance`` record for ``demand`` laid out as ``layout``."""
    return Instance(
        model=demand.name,
        replica=replica,
        cards=layout.cards,
        split_bytes=layout.split_bytes,
        fixed_bytes_per_card=demand.fixed_bytes_per_card,
        context_tokens=layout.context_tokens,
        ratio_rule=layout.ratio_rule,
        load_flags=demand.load_flags,
        kv_shards=demand.kv_shards(len(layout.cards)),
    )


def swap_partners(model: ModelDemand, ledger: Ledger, *, tight: bool) -> list[Tenancy]:
    """Tenancies that never run with ``model`` nor with each other, largest charge first.

    Partners must be pairwise phase-disjoint, so taking one can rule out
    another; taking the largest first frees the most room. Equal charges keep
    their charge order.

    Bytes over a card's usable room belong to a tight model and must stay
    exactly as reported. A group charges its largest member, so two partners
    on one overrun card would shrink its overrun; at most one is taken there.
    For a tight ``model`` no partner may sit on an overrun card at all, since
    its own overrun and the old one would then overlap inside one group slot.
    """
    over = {c for c, u in ledger.usable.items() if ledger.charged[c] > u}
    chosen: list[Tenancy] = []
    taken: set[int] = set()
    for t in sorted(ledger.tenancies, key=lambda t: -sum(t.charges().values())):
        touched = set(t.charges()) & over
        if t.replicas or not t.never_runs_with(model) or (touched and tight) or touched & taken:
            continue
        if all(t.never_runs_with(d) for other in chosen for d, _ in other.members):
            chosen.append(t)
            taken |= touched
    return chosen


def place_in_group(model: ModelDemand, ledger: Ledger, *, tight: bool) -> tuple[Tenancy, int] | None:
    """Refund swap partners, place ``model`` in their room, and keep the partners it needs.

    Returns the new tenancy and the model's shortfall: 0 when it fits beside
    the partners' room, else (only when ``tight``) what it lacks on the widest
    useful cards. None when there are no partners, or when it does not fit and
    ``tight`` is False. Partners whose cards it does not use are charged on
    their own again, and so is any partner it fits without.
    """
    baseline = dict(ledger.charged)
    partners = swap_partners(model, ledger, tight=tight)
    if not partners:
        return None
    for t in partners:
        ledger.debit(t, -1)
    shortfall = 0
    layout = find_layout(model, ledger.room())
    if layout is None and not tight:
        for t in partners:
            ledger.debit(t)
        return None
    if layout is None:
        layout, shortfall = tight_layout(model, ledger.room())
    own = Tenancy(members=[(model, make_instance(model, layout))])
    keep = [t for t in partners if set(t.charges()) & set(layout.cards)]
    for t in partners:
        if t not in keep:
            ledger.debit(t)
    if not shortfall:
        for t in reversed(list(keep)):
            rest = [x for x in keep if x is not t]
            if fits(ledger, [merge(own, rest), t], baseline):
                keep = rest
                ledger.debit(t)
    for t in keep:
        ledger.tenancies.remove(t)
    return merge(own, keep), shortfall


def fits(ledger: Ledger, extra: Sequence[Tenancy], baseline: dict[int, int]) -> bool:
    """True when charging ``extra`` pushes no card it touches past its usable room.

    A card already over (under a tight model) may stay as far over, no further.
    """
    total: dict[int, int] = {}
    for t in extra:
        for card, b in t.charges().items():
            total[card] = total.get(card, ledger.charged[card]) + b
    return all(b <= max(ledger.usable[c], baseline[c]) for c, b in total.items())


def merge(own: Tenancy, partners: Sequence[Tenancy]) -> Tenancy:
    """One swap group of the partners' members and ``own``'s, in charge order."""
    members = [m for t in partners for m in t.members] + own.members
    return Tenancy(members=members)


def add_replicas(demand: ModelDemand, tenancy: Tenancy, ledger: Ledger) -> int:
    """Place replicas 1.. of a model alone in ``tenancy``; returns how many were placed.

    Each replica goes on the fewest cards that hold it, and among layouts that
    small, on cards holding the fewest of the model's instances: one per card
    until every card has one, then stacking. A replica is never split across
    fresh cards when it fits whole on a card that already has one. Replicas are
    charged at the context the first instance got; the first that fits nowhere
    ends the pool.
    """
    first = tenancy.members[0][1]
    fixed = replace(demand, context_tokens=first.context_tokens, min_context_tokens=None)
    held: dict[int, int] = {}  # instances of the model per card, for the cards holding any
    for card in first.cards:
        held[card] = held.get(card, 0) + 1
    room = ledger.room()
    for replica in range(1, demand.replicas):
        best = None
        for level in _levels(held, len(ledger.usable)):
            layout = find_layout(fixed, room.where(lambda c, level=level: held.get(c, 0) <= level))
            if layout is not None and (best is None or len(layout.cards) < len(best.cards)):
                best = layout
            if best is not None and len(best.cards) == 1:
                break  # one card at the least-stacked level: nothing beats it
        if best is None:
            return replica - 1
        inst = make_instance(fixed, best, replica)
        ledger.debit(Tenancy(members=[], replicas=[inst]))
        tenancy.replicas.append(inst)
        for card in inst.cards:
            held[card] = held.get(card, 0) + 1
    return demand.replicas - 1


def _levels(held: dict[int, int], card_count: int) -> list[int]:
    """The distinct instance counts over all ``card_count`` cards, lowest first (0 while a card holds none)."""
    return sorted({*held.values(), *((0,) if len(held) < card_count else ())})
