"""Many models on one fleet: which cards each model's instances go to.

:func:`place` charges models in rank order, largest first within a rank
(footprint at the target context; equal ones by name). For each model's first
instance, in turn:

1. **Fits**: the fewest roomiest cards that hold it (:func:`find_layout`): one
   card when one will do -- the card with the most room, so small models end
   up sharing cards -- else a split, each card charged its own share plus the
   fixed per-card cost. A model with a context floor widens the split while a
   tighter one would serve less than its context target.
2. **Swap group**: it fits nowhere, but models charged earlier that never share
   a phase with it (nor with each other) would make room. They are refunded,
   the model is placed, and the ones whose cards it uses become one swap group,
   charged per card its largest member. Refunded models it does not need go
   back to being charged on their own, so a group forms only when needed.
3. **Tight**: still nowhere. On a unified-memory budget the model is refused (an
   oversize load there makes the host swap). On cards it is placed anyway, in
   its phase-disjoint partners' room when it has any, on every card with room
   past its fixed cost (the roomiest card alone if none has), at its least
   context, and its shortfall in bytes is reported.

Then each model's further replicas fill what room is left, on cards holding
fewest of its instances first, so they spread before they stack. Swap-group
members and tight models run one instance. Equal room goes to the lower card
index, so the answer does not depend on the order of the inputs.

Every byte a card is charged past its usable room belongs to a reported tight
model, and stays exactly as reported: swap partners are chosen so that a
group's largest-member charge never swallows part of an overrun (see
:func:`explorer.fleet.ledger.swap_partners`).

Within a rank, models that run in more phases are charged first, an always-running
one first of all (:func:`explorer.fleet.records.charge_order`). A model whose
engine splits evenly (vLLM, SGLang) is split only over cards of one class
(:mod:`explorer.fleet.split`). With no cards and no memory budget there is
nothing to charge: every instance runs unpinned.
"""

from __future__ import annotations

from collections.abc import Sequence

from explorer.fleet.ledger import Ledger, Tenancy, add_replicas, make_instance, place_in_group
from explorer.fleet.manual import ManualPlan, PlanEntry, PlanViolation, check_plan, validate_plan
from explorer.fleet.planfile import parse_plan, parse_plan_text, plan_from_placement, plan_to_dict
from explorer.fleet.records import Card, ModelDemand, charge_order, check_request
from explorer.fleet.result import (
    POOL_INDEX,
    CardCharge,
    Instance,
    Placement,
    Refusal,
    ReplicaShortfall,
    SwapGroup,
    TightModel,
)
from explorer.fleet.split import find_layout, tight_layout
from explorer.fleet.terms import ModelTerm, parse_model_term
from explorer.units import gib

__all__ = [
    "POOL_INDEX",
    "Card",
    "CardCharge",
    "Instance",
    "ManualPlan",
    "ModelDemand",
    "ModelTerm",
    "Placement",
    "PlanEntry",
    "PlanViolation",
    "Refusal",
    "ReplicaShortfall",
    "SwapGroup",
    "TightModel",
    "charge_order",
    "check_plan",
    "parse_model_term",
    "parse_plan",
    "parse_plan_text",
    "place",
    "plan_from_placement",
    "plan_to_dict",
    "validate_plan",
]


def place(
    models: Sequence[ModelDemand], cards: Sequence[Card], *, unified_budget_bytes: int | None = None
) -> Placement:
    """Place every model's instances on ``cards`` (see the module docstring for the rules).

    With ``unified_budget_bytes`` the cards are ignored and every model shares
    one pool of that many bytes, reported as card ``POOL_INDEX``; a model that
    does not fit there is refused rather than placed tight. With neither cards nor
    a budget, every instance runs unpinned (``Placement.unpinned``).
    """
    check_request(models, cards, unified_budget_bytes, need_cards=False)
    unified = unified_budget_bytes is not None
    if not cards and not unified:
        return _unpinned(models)
    if unified_budget_bytes is not None:
        usable = {POOL_INDEX: unified_budget_bytes}
    else:
        usable = {c.index: c.usable_bytes for c in cards}
    ledger = Ledger(dict(sorted(usable.items())), {c.index: c.split_group for c in cards})
    order = charge_order(models)
    tenancy_of: dict[str, Tenancy] = {}
    tight: list[TightModel] = []
    refused: list[Refusal] = []
    for demand in order:
        layout = find_layout(demand, ledger.room())
        if layout is not None:
            tenancy = Tenancy(members=[(demand, make_instance(demand, layout))])
        else:
            grouped = place_in_group(demand, ledger, tight=False)
            if grouped is None and unified:
                refused.append(_refusal(demand, ledger.room()[POOL_INDEX]))
                continue
            if grouped is None:
                grouped = place_in_group(demand, ledger, tight=True)
            if grouped is None:
                layout, short = tight_layout(demand, ledger.room())
                grouped = Tenancy(members=[(demand, make_instance(demand, layout))]), short
            tenancy, short = grouped
            if short:
                tight.append(TightModel(model=demand.name, cards=tenancy.members[-1][1].cards, shortfall_bytes=short))
        ledger.debit(tenancy)
        ledger.tenancies.append(tenancy)
        for member, _ in tenancy.members:
            tenancy_of[member.name] = tenancy
    missing = _fill_replicas(order, tenancy_of, ledger, {t.model for t in tight})
    return _assemble(order, ledger, tenancy_of, tight, refused, missing, unified)


def _unpinned(models: Sequence[ModelDemand]) -> Placement:
    """Every replica of every model as an instance on no card: nothing to place on, so nothing to charge."""
    instances = tuple(
        Instance(
            model=m.name,
            replica=r,
            cards=(),
            split_bytes=(),
            fixed_bytes_per_card=m.fixed_bytes_per_card,
            context_tokens=m.context_tokens,
            ratio_rule="unpinned",
            load_flags=m.load_flags,
        )
        for m in charge_order(models)
        for r in range(m.replicas)
    )
    return Placement(instances=instances, unpinned=True)


def _refusal(demand: ModelDemand, free: int) -> Refusal:
    need = demand.shard_bytes_at(demand.floor_context_tokens) + demand.fixed_bytes_per_card
    reason = (
        f"{demand.name} needs {gib(need)} at {demand.floor_context_tokens:,} tokens but the unified "
        f"memory pool has {gib(free)} free; an oversize load there makes the host swap"
    )
    return Refusal(model=demand.name, need_bytes=need, free_bytes=free, reason=reason)


def _fill_replicas(
    order: Sequence[ModelDemand], tenancy_of: dict[str, Tenancy], ledger: Ledger, tight: set[str]
) -> list[ReplicaShortfall]:
    missing: list[ReplicaShortfall] = []
    for demand in order:
        tenancy = tenancy_of.get(demand.name)
        if demand.replicas == 1 or tenancy is None:
            continue
        if demand.name in tight:
            placed, reason = 1, "placed tight, so it runs one instance"
        elif len(tenancy.members) > 1:
            placed, reason = 1, "in a swap group, so it runs one instance"
        else:
            placed, reason = 1 + add_replicas(demand, tenancy, ledger), "no room left for another instance"
        if placed < demand.replicas:
            missing.append(ReplicaShortfall(model=demand.name, requested=demand.replicas, placed=placed, reason=reason))
    return missing


def _assemble(
    order: Sequence[ModelDemand],
    ledger: Ledger,
    tenancy_of: dict[str, Tenancy],
    tight: list[TightModel],
    refused: list[Refusal],
    missing: list[ReplicaShortfall],
    unified: bool,
) -> Placement:
    instances: list[Instance] = []
    on_card: dict[int, list[str]] = {c: [] for c in ledger.usable}
    for demand in order:
        tenancy = tenancy_of.get(demand.name)
        if tenancy is None:
            continue
        mine = [i for d, i in tenancy.members if d is demand]
        mine += [i for i in tenancy.replicas if i.model == demand.name]
        instances += mine
        for card in sorted({c for i in mine for c in i.cards}):
            on_card[card].append(demand.name)
    groups = []
    for tenancy in ledger.tenancies:
        if len(tenancy.members) > 1:
            slot = tenancy.charges()
            names = tuple(d.name for d in order if tenancy_of.get(d.name) is tenancy)
            cards = tuple(sorted(slot))
            groups.append(SwapGroup(members=names, cards=cards, charge_bytes=tuple(slot[c] for c in cards)))
    groups.sort(key=lambda g: [d.name for d in order].index(g.members[0]))
    charges = tuple(
        CardCharge(index=c, usable_bytes=u, charged_bytes=ledger.charged[c], models=tuple(on_card[c]))
        for c, u in ledger.usable.items()
    )
    return Placement(
        instances=tuple(instances),
        swap_groups=tuple(groups),
        tight=tuple(tight),
        refused=tuple(refused),
        missing_replicas=tuple(missing),
        cards=charges,
        unified=unified,
    )
