"""Manual placement plans: a person says which cards each model goes on; we check it.

A plan is charged card by card with the planner's own charges
(:mod:`explorer.fleet.split`): each card pays its share of weights + KV
plus the fixed per-card cost, a split with no ratio is split the way the
planner would split it, and a swap group is charged its largest member per
card. Models are charged in the planner's order (rank, largest, name), so the
same plan always yields the same messages.

Every problem is collected, not just the first: :func:`check_plan` returns
them, :func:`validate_plan` raises :class:`PlanDoesNotFitError` listing them
(capped) or returns the plan as a :class:`Placement`. An instance that does not
fit is left uncharged, so each violation stands on its own rather than
cascading onto the models charged after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from explorer.errors import ManualPlanError, PlanDoesNotFitError, capped_list
from explorer.fleet.records import Card, ModelDemand, charge_order, check_request
from explorer.fleet.result import CardCharge, Instance, Placement, RatioRule, SwapGroup
from explorer.fleet.split import apportion, ratio_ladder
from explorer.units import gib

ViolationKind = Literal["overflow", "unknown_card", "unknown_model", "missing_model", "swap_group", "uneven_split"]


def _is_count(value: object, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEntry:
    """Some of a model's instances, on one set of cards.

    Attributes:
        model: the model's name.
        cards: the card indices; more than one is a split.
        ratio: split proportions, one int >= 0 per card with a positive sum, or
            None to split as the planner would (proportional to free room, shifted
            toward the roomiest card if the fixed per-card cost requires).
        replicas: how many instances run on these same cards (>= 1).
        context_tokens: the context to charge, or None for the model's own (tokens).
    """

    model: str
    cards: tuple[int, ...]
    ratio: tuple[int, ...] | None = None
    replicas: int = 1
    context_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ManualPlanError(f"a plan entry needs a model name, got {self.model!r}")
        cards = tuple(self.cards) if isinstance(self.cards, list | tuple) else ()
        if not cards or not all(_is_count(c) for c in cards) or len(set(cards)) != len(cards):
            raise ManualPlanError(f"{self.model}: cards must be distinct card indices >= 0, got {self.cards!r}")
        object.__setattr__(self, "cards", cards)
        if self.ratio is not None:
            ratio = tuple(self.ratio) if isinstance(self.ratio, list | tuple) else ()
            if len(ratio) != len(cards) or not all(_is_count(r) for r in ratio) or sum(ratio) <= 0:
                raise ManualPlanError(
                    f"{self.model}: ratio must be one int >= 0 per card ({len(cards)}) "
                    f"with a positive sum, got {self.ratio!r}"
                )
            object.__setattr__(self, "ratio", ratio)
        if not _is_count(self.replicas, 1):
            raise ManualPlanError(f"{self.model}: replicas must be an int >= 1, got {self.replicas!r}")
        if self.context_tokens is not None and not _is_count(self.context_tokens):
            raise ManualPlanError(f"{self.model}: context_tokens must be an int >= 0, got {self.context_tokens!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualPlan:
    """A user-written placement.

    Attributes:
        entries: the plan's entries; a model may have several (replicas on different cards).
        swap_groups: sets of phase-disjoint models that take turns in the same memory.
    """

    entries: tuple[PlanEntry, ...]
    swap_groups: tuple[frozenset[str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        entries = tuple(self.entries)
        if not all(isinstance(e, PlanEntry) for e in entries):
            raise ManualPlanError("a plan's entries must be PlanEntry records")
        if any(isinstance(g, str) or not all(isinstance(n, str) for n in g) for g in self.swap_groups):
            raise ManualPlanError(f"swap_groups must be sets of model names, got {self.swap_groups!r}")
        groups = tuple(frozenset(g) for g in self.swap_groups)
        seen: set[str] = set()
        for group in groups:
            if len(group) < 2:
                raise ManualPlanError(f"a swap group needs at least two models, got {sorted(group)}")
            if group & seen:
                raise ManualPlanError(f"{', '.join(sorted(group & seen))} appear(s) in more than one swap group")
            seen |= group
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "swap_groups", groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanViolation:
    """One way a manual plan breaks the fleet.

    Attributes:
        kind: "overflow", "unknown_card", "unknown_model", "missing_model", "swap_group" or
            "uneven_split" (an even-splitting model on cards of several classes, or given unequal shares).
        model: the model concerned.
        card: the card concerned, when there is one.
        need_bytes: what the instance needs on that card (bytes; 0 if not an overflow).
        room_bytes: what the card had for it (bytes; 0 if not an overflow).
        message: the sentence for people.
    """

    kind: ViolationKind
    model: str
    card: int | None = None
    need_bytes: int = 0
    room_bytes: int = 0
    message: str


def _structure(plan: ManualPlan, by_name: dict[str, ModelDemand], fleet: list[int]) -> list[PlanViolation]:
    """Problems found before charging anything: names, cards, swap groups."""
    out: list[PlanViolation] = []
    planned = dict.fromkeys(e.model for e in plan.entries)
    grouped = sorted({n for g in plan.swap_groups for n in g} - set(planned))
    known = capped_list(sorted(by_name))
    for name in (n for n in [*planned, *grouped] if n not in by_name):
        text = f"the plan names {name}, which is not among the models ({known})"
        out.append(PlanViolation(kind="unknown_model", model=name, message=text))
    for name in sorted(set(by_name) - set(planned)):
        out.append(PlanViolation(kind="missing_model", model=name, message=f"{name} has no entry in the plan"))
    for e in plan.entries:
        for card in (c for c in e.cards if c not in fleet):
            text = f"{e.model} pinned to card {card} but the fleet has cards {capped_list(fleet)}"
            out.append(PlanViolation(kind="unknown_card", model=e.model, card=card, message=text))
    for group in plan.swap_groups:
        members = sorted(n for n in group if n in by_name)
        for i, a in enumerate(members):
            for b in (b for b in members[i + 1 :] if not by_name[a].never_runs_with(by_name[b])):
                text = f"{a} and {b} can run at the same time, so they cannot share a swap group"
                out.append(PlanViolation(kind="swap_group", model=a, message=text))
        for name in members:
            if sum(e.replicas for e in plan.entries if e.model == name) > 1:
                text = f"{name} is in a swap group, so it can run only one instance"
                out.append(PlanViolation(kind="swap_group", model=name, message=text))
    return out


def _split(
    demand: ModelDemand, entry: PlanEntry, room: dict[int, int], context: int
) -> tuple[tuple[int, ...], RatioRule]:
    """Per-card charges of one instance of ``entry``: the plan's ratio, else the planner's ladder.

    With no ratio the first rung that fits is used; when none fits, the last
    (the one that comes closest) is the one reported.
    """
    shard, fixed, cards = demand.shard_bytes_at(context), demand.fixed_bytes_per_card, entry.cards
    if len(cards) == 1:
        return (shard + fixed,), "single"
    if demand.even_split:
        return tuple(p + fixed for p in apportion(shard, (1,) * len(cards))), "even"
    if entry.ratio is not None:
        return tuple(p + fixed for p in apportion(shard, entry.ratio)), "manual"
    rungs: list[tuple[RatioRule, tuple[int, ...]]] = ratio_ladder(cards, room, fixed) or [
        ("proportional", (1,) * len(cards))
    ]
    tried: list[tuple[tuple[int, ...], RatioRule]] = []
    for rule, weights in rungs:
        tried.append((tuple(p + fixed for p in apportion(shard, weights)), rule))
        if all(b <= room[c] for c, b in zip(cards, tried[-1][0], strict=True)):
            break
    return tried[-1]


class _Sheet:
    """Per-card charges as the plan is read: usable, charged, swap-group slots, who holds what."""

    def __init__(self, plan: ManualPlan, cards: Sequence[Card]) -> None:
        self.usable = {c.index: c.usable_bytes for c in sorted(cards, key=lambda c: c.index)}
        self.classes = {c.index: c.split_group for c in cards}
        self.charged = dict.fromkeys(self.usable, 0)
        self.group_of = {name: group for group in plan.swap_groups for name in group}
        self.slots: dict[frozenset[str], dict[int, int]] = {g: {} for g in plan.swap_groups}
        self.holders: dict[int, list[str]] = {c: [] for c in self.usable}

    def room(self, model: str, card: int) -> int:
        """What ``card`` has for ``model``: free bytes plus its swap group's slot there."""
        group = self.group_of.get(model)
        slot = self.slots[group].get(card, 0) if group else 0
        return max(0, self.usable[card] - self.charged[card] + slot)

    def others(self, model: str, card: int) -> list[str]:
        """Models already holding ``card``, less ``model``'s swap-group partners."""
        mates = self.group_of.get(model, frozenset()) - {model}
        return [h for h in dict.fromkeys(self.holders[card]) if h not in mates]

    def charge(self, inst: Instance) -> None:
        group = self.group_of.get(inst.model)
        for card, b in zip(inst.cards, inst.split_bytes, strict=True):
            if group:
                slot = self.slots[group]
                self.charged[card] += max(0, b - slot.get(card, 0))
                slot[card] = max(slot.get(card, 0), b)
            else:
                self.charged[card] += b
            self.holders[card].append(inst.model)


def _charge(
    plan: ManualPlan, models: Sequence[ModelDemand], cards: Sequence[Card]
) -> tuple[Placement, list[PlanViolation]]:
    """Charge the plan in the planner's order; returns what fitted and every violation."""
    check_request(models, cards)
    by_name = {m.name: m for m in models}
    sheet = _Sheet(plan, cards)
    violations = _structure(plan, by_name, list(sheet.usable))
    instances: list[Instance] = []
    for demand in charge_order([m for m in models if any(e.model == m.name for e in plan.entries)]):
        replica = 0
        for entry in (e for e in plan.entries if e.model == demand.name):
            context = demand.context_tokens if entry.context_tokens is None else entry.context_tokens
            uneven = _uneven(demand, entry, sheet.classes)
            if uneven:
                violations.append(PlanViolation(kind="uneven_split", model=demand.name, message=uneven))
                continue
            for _ in range(entry.replicas if all(c in sheet.usable for c in entry.cards) else 0):
                room = {c: sheet.room(demand.name, c) for c in entry.cards}
                split, rule = _split(demand, entry, room, context)
                bad = [(c, b) for c, b in zip(entry.cards, split, strict=True) if b > room[c]]
                violations += [
                    _overflow(demand.name, replica, c, b, room[c], sheet.usable[c], sheet.others(demand.name, c))
                    for c, b in bad
                ]
                inst = Instance(
                    model=demand.name,
                    replica=replica,
                    cards=entry.cards,
                    split_bytes=split,
                    fixed_bytes_per_card=demand.fixed_bytes_per_card,
                    context_tokens=context,
                    ratio_rule=rule,
                    load_flags=demand.load_flags,
                    kv_shards=demand.kv_shards(len(entry.cards)),
                )
                replica += 1
                if not bad:
                    sheet.charge(inst)
                    instances.append(inst)
    order = [d.name for d in charge_order(models)]
    swap = tuple(
        SwapGroup(
            members=tuple(n for n in order if n in g),
            cards=tuple(sorted(slot)),
            charge_bytes=tuple(slot[c] for c in sorted(slot)),
        )
        for g, slot in sheet.slots.items()
        if slot
    )
    charges = tuple(
        CardCharge(index=c, usable_bytes=u, charged_bytes=sheet.charged[c], models=tuple(dict.fromkeys(h)))
        for (c, u), h in zip(sheet.usable.items(), sheet.holders.values(), strict=True)
    )
    return Placement(instances=tuple(instances), swap_groups=swap, cards=charges), violations


def _uneven(demand: ModelDemand, entry: PlanEntry, classes: dict[int, str | None]) -> str | None:
    """Why an even-splitting model (tensor parallelism) cannot run as the entry asks, or None."""
    if not demand.even_split or len(entry.cards) < 2:
        return None
    kinds = {classes.get(c) for c in entry.cards if c in classes}
    if len(kinds) > 1:
        named = ", ".join(f"card {c} {classes.get(c)}" for c in entry.cards)
        return f"{demand.name} splits evenly (tensor parallelism): its cards must be of one class (on one node, or nodes sharing a fabric), not {named}"
    if entry.ratio is not None and len(set(entry.ratio)) > 1:
        return f"{demand.name} splits evenly (tensor parallelism): ratio {list(entry.ratio)} cannot be honoured"
    if not demand.takes(len(entry.cards)):
        sizes = ", ".join(map(str, demand.widths))
        return (
            f"{demand.name} splits evenly (tensor parallelism): the engine refuses tp {len(entry.cards)} for it; "
            f"it takes {sizes} cards"
        )
    return None


def _overflow(
    model: str, replica: int, card: int, need: int, room: int, usable: int, others: list[str]
) -> PlanViolation:
    """The overflow violation, worded "X pinned to card N needs A GiB but card N has B GiB usable"."""
    who = model if replica == 0 else f"{model} replica {replica}"
    text = f"{who} pinned to card {card} needs {gib(need)} but card {card} has {gib(room)} usable"
    if others:
        text += f" left after {capped_list(others, 4)} (of {gib(usable)})"
    return PlanViolation(kind="overflow", model=model, card=card, need_bytes=need, room_bytes=room, message=text)


def check_plan(plan: ManualPlan, models: Sequence[ModelDemand], cards: Sequence[Card]) -> list[PlanViolation]:
    """Every way ``plan`` breaks the fleet, in charge order; empty when it fits."""
    return _charge(plan, models, cards)[1]


def validate_plan(plan: ManualPlan, models: Sequence[ModelDemand], cards: Sequence[Card]) -> Placement:
    """The plan as a :class:`Placement`, or :class:`PlanDoesNotFitError` listing every violation."""
    placement, violations = _charge(plan, models, cards)
    if violations:
        raise PlanDoesNotFitError(violations)
    return placement
