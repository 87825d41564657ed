"""Where one instance goes: which cards, what share each, at what context.

Pure integer arithmetic over a *room map* (card index -> free bytes). The
planner (:mod:`explorer.fleet.place`) and the manual-plan checker
(:mod:`explorer.fleet.manual`) both charge through here, so a layout written
by hand is charged exactly as the planner would charge the same layout.

A split over cards ``c1..ck`` charges card ``ci`` its share of the splittable
part ``S`` (weights + KV) plus the fixed per-card cost ``F``. It fits when every
card's own charge fits its own room; the sum over cards is never compared.

Why the ratio sometimes has to shift. Proportional to free room, card ``i``
gets ``S * room_i / sum(room)``; the fixed cost comes on top, and it weighs
most on the smallest card. Two cards with 40 and 20 GiB free, ``S`` = 48 GiB and
``F`` = 4 GiB: proportional gives 32 + 4 = 36 GiB (fits 40) and 16 + 4 = 20 GiB
(fits 20) -- but with ``F`` = 5 GiB the small card needs 21 GiB and fails,
although the pair has 60 - 2*5 = 50 GiB of room past the fixed cost. Splitting
proportional to ``room_i - F`` instead (35 : 15) moves load toward the roomiest
card: 33.6 + 5 = 38.6 GiB and 14.4 + 5 = 19.4 GiB, both fit. With one fixed
cost for every card that shifted ratio fits whenever any ratio does, so the
ladder is two rungs: proportional first (what a person would write), shifted
second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, takewhile

from explorer.fleet.records import ModelDemand
from explorer.fleet.result import RatioRule
from explorer.fleet.rooms import Rooms


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One instance's cards and charges, before it becomes an ``Instance``.

    Attributes:
        cards: the cards, roomiest first.
        split_bytes: each card's charge, fixed cost included (bytes).
        context_tokens: the context it is charged at (tokens).
        ratio_rule: "single", "proportional", "shifted", "even", "manual" or "tight".
    """

    cards: tuple[int, ...]
    split_bytes: tuple[int, ...]
    context_tokens: int
    ratio_rule: RatioRule


def apportion(total: int, weights: Sequence[int]) -> tuple[int, ...]:
    """Split ``total`` bytes in proportion to ``weights``; the parts sum to ``total`` exactly.

    Cuts fall at ``floor(total * cumulative_weight / sum(weights))``, so each
    part is within one byte of its exact share and never above ``ceil`` of it:
    ``apportion(10, (1, 1, 1)) == (3, 3, 4)``. Weights are >= 0 with a positive sum.
    """
    weight_sum = sum(weights)
    parts: list[int] = []
    cumulative = previous = 0
    for weight in weights:
        cumulative += weight
        cut = total * cumulative // weight_sum
        parts.append(cut - previous)
        previous = cut
    return tuple(parts)


def ratio_ladder(
    cards: Sequence[int], room: Mapping[int, int], fixed_bytes: int, *, even: bool = False
) -> list[tuple[RatioRule, tuple[int, ...]]]:
    """The split proportions worth trying on ``cards``, best first (see the module docstring); ``even``: only
    equal shares.

    A rung whose weights are not all positive is left out: a card at or under
    the fixed cost has nothing to give a split.
    """
    if even:
        return [("even", (1,) * len(cards))]
    rungs: list[tuple[RatioRule, tuple[int, ...]]] = [("proportional", tuple(room[c] for c in cards))]
    if fixed_bytes > 0:
        rungs.append(("shifted", tuple(room[c] - fixed_bytes for c in cards)))
    return [(rule, w) for rule, w in rungs if all(x > 0 for x in w)]


def split_on(demand: ModelDemand, cards: Sequence[int], room: Mapping[int, int], context_tokens: int) -> Layout | None:
    """The first ratio on the ladder that fits every card of ``cards``, or None."""
    shard = demand.shard_bytes_at(context_tokens)
    fixed = demand.fixed_bytes_per_card
    if len(cards) == 1:
        need = shard + fixed
        if need > room[cards[0]]:
            return None
        return Layout(cards=tuple(cards), split_bytes=(need,), context_tokens=context_tokens, ratio_rule="single")
    for rule, weights in ratio_ladder(cards, room, fixed, even=demand.even_split):
        split = tuple(part + fixed for part in apportion(shard, weights))
        if all(b <= room[c] for c, b in zip(cards, split, strict=True)):
            return Layout(cards=tuple(cards), split_bytes=split, context_tokens=context_tokens, ratio_rule=rule)
    return None


def served_context(demand: ModelDemand, net_room_bytes: int) -> int | None:
    """The most context up to the target whose shard fits ``net_room_bytes``; None below the floor.

    ``net_room_bytes`` is the room past the fixed cost, summed over the cards.
    Worked: 10 GiB weights, 128 KiB/token, 12 GiB net room -> 2 GiB spare
    -> 16,384 tokens, capped at the target.
    """
    spare = net_room_bytes - demand.weights_bytes
    if spare < 0:
        return None
    per_token = demand.kv_bytes_per_token
    served = demand.context_tokens if per_token == 0 else min(demand.context_tokens, spare // per_token)
    return served if served >= demand.floor_context_tokens else None


def as_rooms(room: Mapping[int, int], classes: Mapping[int, str | None] | None = None) -> Rooms:
    """``room`` as a :class:`Rooms` (itself when it is one: it knows its classes), its cards roomiest first."""
    return room if isinstance(room, Rooms) else Rooms(room, classes)


def find_layout(
    demand: ModelDemand, room: Mapping[int, int], classes: Mapping[int, str | None] | None = None
) -> Layout | None:
    """The fewest roomiest cards that hold ``demand``, widened for its context target.

    An even demand looks at each card class alone and takes the best of them: the most context, then the
    fewest cards, then the most room on its tightest card, then the lowest card index. ``classes`` names
    each card's class for a plain room map (a :class:`Rooms` knows its own).
    """
    rooms = as_rooms(room, classes)
    if not demand.even_split:
        return _fewest_cards(demand, rooms)
    found = [layout for sub in rooms.by_class() if (layout := _fewest_cards(demand, sub)) is not None]
    if not found:
        return None
    return min(
        found,
        key=lambda lay: (-lay.context_tokens, len(lay.cards), -min(room[c] for c in lay.cards), min(lay.cards)),
    )


def _fewest_cards(demand: ModelDemand, room: Rooms) -> Layout | None:
    """The fewest roomiest cards of ``room`` that hold ``demand``, widened for its context target.

    Tries the roomiest card alone, then the two roomiest, and so on (the k
    roomiest cards are the k with the most room past the fixed cost, so if any
    k cards hold the model these do), skipping counts the engine refuses as a
    tensor-parallel size (:attr:`ModelDemand.widths`). A card with no room past the fixed cost
    ends the widening. A model with a fixed context takes the first set that
    holds it. A model with a context floor takes the first set that serves its
    full target; when none does, the set that serves the most, fewest cards on a
    tie. None when not even the floor fits anywhere.
    """
    fixed = demand.fixed_bytes_per_card
    walked: list[int] = []  # the roomiest cards, as far as the widening went
    best: tuple[int, int] | None = None  # (served context, card count)
    net = 0
    for count, card in enumerate(room.roomiest(), start=1):
        if count > 1 and room[card] <= fixed:
            break
        walked.append(card)
        # equal shares are bound by the tightest card, the k-th roomiest
        net = count * (room[card] - fixed) if demand.even_split else net + room[card] - fixed
        if not demand.takes(count):  # a tensor-parallel size the engine refuses: widen on
            continue
        served = served_context(demand, net)
        if served is None:
            continue
        if served >= demand.context_tokens:
            best = (served, count)
            break
        if best is None or served > best[0]:
            best = (served, count)
    if best is None:
        return None
    served, count = best
    return split_on(demand, walked[:count], room, served)


def tight_layout(
    demand: ModelDemand, room: Mapping[int, int], classes: Mapping[int, str | None] | None = None
) -> tuple[Layout, int]:
    """The widest useful cards for a model that fits nowhere, and its shortfall in bytes.

    Useful cards have room past the fixed cost; adding any other would only add
    its fixed cost. With none, the roomiest card alone. The shard is split in
    proportion to room past the fixed cost, so each card runs over by its share
    of the shortfall, and the overruns add up to exactly
    ``shard + k * fixed - sum(room)``. The model is charged at its least context.
    An even demand takes one class's useful cards in equal shares (the class it is
    least short on), as many as a tensor-parallel size it may take, and its shortfall
    is the sum of the cards' overruns.
    """
    rooms = as_rooms(room, classes)
    if not demand.even_split:
        return _tight_on(demand, rooms)
    laid = (_tight_on(demand, sub) for sub in rooms.by_class() if next(sub.roomiest(), None) is not None)
    return min(laid, key=lambda t: (t[1], min(t[0].cards)))


def _tight_on(demand: ModelDemand, room: Rooms) -> tuple[Layout, int]:
    fixed = demand.fixed_bytes_per_card
    context = demand.floor_context_tokens
    shard = demand.shard_bytes_at(context)
    order = room.roomiest()
    roomiest = next(order)
    # the cards with room past the fixed cost come first in the order: take them while they last
    cards = list(takewhile(lambda c: room[c] > fixed, chain((roomiest,), order))) or [roomiest]
    cards = cards[: demand.widest(len(cards))]
    if demand.even_split:
        split = tuple(part + fixed for part in apportion(shard, (1,) * len(cards)))
        shortfall = sum(max(0, b - room[c]) for c, b in zip(cards, split, strict=True))
    else:
        weights = [room[c] - fixed for c in cards] if len(cards) > 1 else [1]
        split = tuple(part + fixed for part in apportion(shard, weights))
        shortfall = shard + len(cards) * fixed - sum(room[c] for c in cards)
    layout = Layout(cards=tuple(cards), split_bytes=split, context_tokens=context, ratio_rule="tight")
    return layout, shortfall
