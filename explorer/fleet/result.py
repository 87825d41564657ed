"""What the placement planner answers: instances, swap groups, tight and refused models.

All byte figures are ``int`` counts of bytes; GiB appear only in
:func:`explorer.fleet.text.describe_placement`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How an instance's split was chosen (see ``Instance.ratio_rule``).
RatioRule = Literal["single", "proportional", "shifted", "even", "manual", "tight", "unpinned"]
#: The card index the unified-memory pool is reported under (real cards are >= 0).
POOL_INDEX = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """One running copy of a model.

    Attributes:
        model: the model's name.
        replica: index within the model's replicas (0 for the first).
        cards: the cards it is pinned to (the planner lists the roomiest first, a
            manual plan keeps its own order); more than one is a split.
        split_bytes: bytes charged to each card of ``cards``, fixed cost included.
        fixed_bytes_per_card: the model's per-card overhead inside each charge (bytes).
        context_tokens: the context it was charged at (tokens).
        ratio_rule: how the split was chosen: "single", "proportional" (to free
            room), "shifted" (toward the roomiest card, after the fixed cost),
            "even" (equal shares: tensor parallelism), "manual" (the plan's own
            ratio), "tight" (fits nowhere) or "unpinned" (no cards to pin to).
        load_flags: the flags its launch needs to load the model as sized
            (:attr:`~explorer.fleet.records.ModelDemand.load_flags`).
        kv_shards: cards its KV cache is split over by token (:meth:`~explorer.fleet.records.ModelDemand.kv_shards`; 1: none).
    """

    model: str
    replica: int
    cards: tuple[int, ...]
    split_bytes: tuple[int, ...]
    fixed_bytes_per_card: int
    context_tokens: int
    ratio_rule: RatioRule
    load_flags: tuple[str, ...] = ()
    kv_shards: int = 1

    @property
    def shard_bytes(self) -> tuple[int, ...]:
        """Each card's part of weights + KV: the proportions a ``--tensor-split`` takes (bytes)."""
        return tuple(b - self.fixed_bytes_per_card for b in self.split_bytes)

    @property
    def charged_bytes(self) -> int:
        """Everything the instance charges, summed over its cards (bytes)."""
        return sum(self.split_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class SwapGroup:
    """Phase-disjoint models that take turns in the same memory.

    Attributes:
        members: the models, in charge order; at most one is resident at a time.
        cards: every card a member uses, by index.
        charge_bytes: per card of ``cards``, the largest member's charge there (bytes).
    """

    members: tuple[str, ...]
    cards: tuple[int, ...]
    charge_bytes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TightModel:
    """A model placed although it fits nowhere; expect it to fail to load or offload.

    Attributes:
        model: the model's name.
        cards: the cards it was given (every card with room past the fixed cost).
        shortfall_bytes: how far its charge runs past those cards' room (bytes).
    """

    model: str
    cards: tuple[int, ...]
    shortfall_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A model the planner would not place (only on a unified-memory budget).

    Attributes:
        model: the model's name.
        need_bytes: its footprint at its least context (bytes).
        free_bytes: what the pool had left when its turn came (bytes).
        reason: a sentence for people.
    """

    model: str
    need_bytes: int
    free_bytes: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaShortfall:
    """A model that got fewer instances than it asked for.

    Attributes:
        model: the model's name.
        requested: replicas asked for.
        placed: replicas placed.
        reason: why no more were placed.
    """

    model: str
    requested: int
    placed: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CardCharge:
    """What a card ends up carrying.

    Attributes:
        index: the card's index (``POOL_INDEX`` for a unified-memory pool).
        usable_bytes: what may be charged to it (bytes).
        charged_bytes: what was charged, swap groups counted at their largest member (bytes).
        models: the models with a charge on it, in charge order.
    """

    index: int
    usable_bytes: int
    charged_bytes: int
    models: tuple[str, ...] = ()

    @property
    def free_bytes(self) -> int:
        """Room left, never negative (bytes)."""
        return max(0, self.usable_bytes - self.charged_bytes)

    @property
    def overflow_bytes(self) -> int:
        """How far the charge runs past the usable room; non-zero only under a tight model (bytes)."""
        return max(0, self.charged_bytes - self.usable_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """The planner's answer for a fleet.

    Attributes:
        instances: every instance placed, by model in charge order, replicas ascending.
        swap_groups: groups of phase-disjoint models sharing memory.
        tight: models placed although they fit nowhere, with their shortfall.
        refused: models not placed at all (unified-memory budgets only).
        missing_replicas: models that got fewer replicas than asked.
        cards: every card's charge, by index (one ``POOL_INDEX`` entry when unified).
        unified: True when everything shared one unified-memory pool.
        unpinned: True when there was nothing to place on (no cards, no memory budget): every
            instance runs unpinned, and nothing is charged or refused (lilbee's ungated placement).
    """

    instances: tuple[Instance, ...]
    swap_groups: tuple[SwapGroup, ...] = ()
    tight: tuple[TightModel, ...] = ()
    refused: tuple[Refusal, ...] = ()
    missing_replicas: tuple[ReplicaShortfall, ...] = ()
    cards: tuple[CardCharge, ...] = ()
    unified: bool = False
    unpinned: bool = False

    def instances_of(self, model: str) -> tuple[Instance, ...]:
        """The instances of one model, replicas ascending."""
        return tuple(i for i in self.instances if i.model == model)

    @property
    def shortfall_bytes(self) -> int:
        """Every tight model's shortfall, summed (bytes)."""
        return sum(t.shortfall_bytes for t in self.tight)
