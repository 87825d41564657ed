"""What the placement planner is asked: each model's demand, and the cards.

:class:`ModelDemand` and :class:`Card`, the request check, and the order models
are charged in. All byte figures are ``int`` counts of bytes. The planner's
answers are records in :mod:`explorer.fleet.result`.

A demand splits its footprint the way a tensor split does: ``weights_bytes``
and the KV cache (``kv_bytes_per_token * context``) divide across cards, while
``fixed_bytes_per_card`` (CUDA context, activations, compute buffers) is paid
again by every card of a split.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from explorer.errors import PlacementInputError, capped_list


def _check_count(owner: str, name: str, value: object, minimum: int = 0) -> None:
    """Refuse anything but an int >= minimum (bools too), naming the owner and field."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlacementInputError(f"{owner}: {name} must be an int >= {minimum}, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDemand:
    """One model's per-instance footprint, as the planner charges it.

    Attributes:
        name: unique name of the model in this request.
        weights_bytes: weights, split across the cards of a split (bytes).
        fixed_bytes_per_card: overhead every card of a split pays in full (bytes).
        kv_bytes_per_token: KV cache per token of context, split like weights (bytes).
        context_tokens: the context the model is charged at; with
            ``min_context_tokens`` set it is the target it tries to reach (tokens).
        min_context_tokens: when set, the smallest context the model accepts; the
            planner may then serve less than ``context_tokens`` (tokens).
        replicas: instances wanted (>= 1); the first is placed with every other
            model's first, the rest fill what room remains.
        phases: the phases the model runs in ({"ingest"}, {"query"}); empty means
            it always runs. Models whose phases never meet may share a swap group.
        rank: placement priority; lower ranks are charged first.
        even_split: a split gives each card the same share, on cards of one class (vLLM's and
            SGLang's tensor parallelism); False: any proportion (llama.cpp's layer split).
        widths: the card counts a split may take, ascending (the tensor-parallel sizes the engine accepts: a
            64-head model never splits over 3 cards); empty: any count.
        kv_split_widths: the widths whose launch splits the KV cache by token over every card, as the even split
            charges it (:attr:`~explorer.engines.interface.Footprint.kv_split_widths`); empty: none.
        load_flags: the flags its launch needs to load it as sized (the engine's
            :attr:`~explorer.engines.interface.Footprint.load_flags`: ``--dtype bfloat16`` over a float32 checkpoint).
        model_ref: what its launch loads in place of its own id: the published checkpoint it was sized at, or the
            placeholder of a what-if nobody publishes (:attr:`~explorer.engines.interface.Footprint.model_ref`);
            None: its own id.
        note: what its weights are when they are not its own checkpoint (a published checkpoint of the Instruct
            model standing in, a what-if nobody publishes), or "".
    """

    name: str
    weights_bytes: int
    fixed_bytes_per_card: int = 0
    kv_bytes_per_token: int = 0
    context_tokens: int = 0
    min_context_tokens: int | None = None
    replicas: int = 1
    phases: frozenset[str] = field(default_factory=frozenset)
    rank: int = 0
    even_split: bool = False
    widths: tuple[int, ...] = ()
    kv_split_widths: tuple[int, ...] = ()
    load_flags: tuple[str, ...] = ()
    model_ref: str | None = None
    note: str = ""

    def kv_shards(self, cards: int) -> int:
        """Cards an instance split over ``cards`` keeps its KV cache split over by token: all of them at a width in
        :attr:`kv_split_widths`, else 1."""
        return cards if cards in self.kv_split_widths else 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PlacementInputError(f"a model needs a non-empty name, got {self.name!r}")
        owner = f"model {self.name!r}"
        for name in ("weights_bytes", "fixed_bytes_per_card", "kv_bytes_per_token", "context_tokens"):
            _check_count(owner, name, getattr(self, name))
        _check_count(owner, "replicas", self.replicas, minimum=1)
        if isinstance(self.rank, bool) or not isinstance(self.rank, int):
            raise PlacementInputError(f"{owner}: rank must be an int, got {self.rank!r}")
        if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in self.widths) or list(
            self.widths
        ) != sorted(set(self.widths)):
            raise PlacementInputError(
                f"{owner}: widths must be ascending card counts of at least 1, got {self.widths!r}"
            )
        if self.min_context_tokens is not None:
            _check_count(owner, "min_context_tokens", self.min_context_tokens)
            if self.min_context_tokens > self.context_tokens:
                raise PlacementInputError(
                    f"{owner}: min_context_tokens {self.min_context_tokens:,} is above "
                    f"its context_tokens target {self.context_tokens:,}"
                )
        if isinstance(self.phases, str) or not isinstance(self.phases, Iterable):
            raise PlacementInputError(f"{owner}: phases must be a set of names, got {self.phases!r}")
        phases = frozenset(self.phases)
        if not all(isinstance(p, str) and p.strip() for p in phases):
            raise PlacementInputError(
                f"{owner}: every phase must be a non-empty string, got {sorted(map(repr, phases))}"
            )
        object.__setattr__(self, "phases", phases)

    @property
    def floor_context_tokens(self) -> int:
        """The least context the model is placed at (tokens)."""
        return self.context_tokens if self.min_context_tokens is None else self.min_context_tokens

    @property
    def footprint_bytes(self) -> int:
        """One instance on one card at the target context: weights + KV + fixed (bytes)."""
        return self.shard_bytes_at(self.context_tokens) + self.fixed_bytes_per_card

    def shard_bytes_at(self, context_tokens: int) -> int:
        """The splittable part at a context: weights + KV (bytes)."""
        return self.weights_bytes + self.kv_bytes_per_token * context_tokens

    def takes(self, cards: int) -> bool:
        """Whether a split over ``cards`` cards is one the engine accepts (:attr:`widths`)."""
        return not self.widths or cards in self.widths

    def widest(self, cards: int) -> int:
        """The most cards, at most ``cards``, a split may take (one card always: it needs no split)."""
        return max((w for w in self.widths if w <= cards), default=1) if self.widths else cards

    def never_runs_with(self, other: ModelDemand) -> bool:
        """True when the two share no phase, so they are never resident together.

        A model with no phases always runs, so it is never phase-disjoint.
        """
        return bool(self.phases) and bool(other.phases) and self.phases.isdisjoint(other.phases)


@dataclass(frozen=True, slots=True, kw_only=True)
class Card:
    """One accelerator as the planner sees it.

    Attributes:
        index: the card's index in the fleet (>= 0, unique).
        usable_bytes: memory the planner may charge, after any headroom (bytes).
        total_bytes: the card's full memory when known, shown in summaries (bytes).
        gpu_class: the card's class when known; an even split takes cards of one class.
        span: what the cards one even split may cover share (``l40s-48g on ib0``: the class on a fabric, or on
            one node that shares none); None: the class alone.
    """

    index: int
    usable_bytes: int
    total_bytes: int | None = None
    gpu_class: str | None = None
    span: str | None = None

    @property
    def split_group(self) -> str | None:
        """The cards an even split may take together share this: :attr:`span`, else the class."""
        return self.span or self.gpu_class

    def __post_init__(self) -> None:
        _check_count("card", "index", self.index)
        _check_count(f"card {self.index}", "usable_bytes", self.usable_bytes)
        if self.total_bytes is not None:
            _check_count(f"card {self.index}", "total_bytes", self.total_bytes, minimum=self.usable_bytes)

    @classmethod
    def from_total(cls, *, index: int, total_bytes: int, usable_fraction: float) -> Card:
        """A card whose usable room is ``int(total_bytes * usable_fraction)``."""
        _check_count(f"card {index}", "total_bytes", total_bytes)
        if (
            isinstance(usable_fraction, bool)
            or not isinstance(usable_fraction, int | float)
            or not 0 < usable_fraction <= 1
        ):
            raise PlacementInputError(f"card {index}: usable_fraction must be in (0, 1], got {usable_fraction!r}")
        return cls(index=index, usable_bytes=int(total_bytes * usable_fraction), total_bytes=total_bytes)


def charge_order(models: Sequence[ModelDemand]) -> list[ModelDemand]:
    """Models in the order they are charged: rank, then the most phases, then largest footprint, then name.

    Within a rank, a model that runs in more phases goes first, one that always runs first of all: it is
    resident beside more of the fleet and can never make room by swapping (nothing is phase-disjoint from it),
    so a same-rank model of one phase must not crowd it out (lilbee's ``_shared_pool_order``).
    """
    return sorted(models, key=lambda m: (m.rank, bool(m.phases), -len(m.phases), -m.footprint_bytes, m.name))


def check_request(
    models: Sequence[ModelDemand], cards: Sequence[Card], budget: int | None = None, *, need_cards: bool = True
) -> None:
    """Refuse duplicate model names or card indices, a bad budget, or (with ``need_cards``) nothing to place on."""
    twice = sorted(n for n, k in Counter(m.name for m in models).items() if k > 1)
    if twice:
        raise PlacementInputError(f"model names must be unique; given more than once: {capped_list(twice)}")
    dupes = sorted(i for i, k in Counter(c.index for c in cards).items() if k > 1)
    if dupes:
        raise PlacementInputError(f"card indices must be unique; given more than once: {capped_list(dupes)}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise PlacementInputError(f"unified_budget_bytes must be an int >= 0, got {budget!r}")
    if need_cards and budget is None and not cards:
        raise PlacementInputError(
            "nothing to place on: no cards and no unified-memory budget",
            hint="pass at least one card, or unified_budget_bytes for a shared-memory host",
        )
