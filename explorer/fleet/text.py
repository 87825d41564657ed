"""Plain-text summary of a :class:`~explorer.fleet.records.Placement`, for people.

Display code: the only place in the placement modules where bytes become GiB.
"""

from __future__ import annotations

from explorer.fleet.result import POOL_INDEX, Instance, Placement
from explorer.units import gib


def _card_name(index: int) -> str:
    return "unified memory" if index == POOL_INDEX else f"card {index}"


def _instance_line(inst: Instance) -> str:
    if not inst.cards:
        return f"  {inst.model} #{inst.replica}: unpinned, {inst.context_tokens:,} tokens"
    where = ", ".join(f"{_card_name(c)} {gib(b)}" for c, b in zip(inst.cards, inst.split_bytes, strict=True))
    how = ""
    if inst.ratio_rule != "single":
        how = f" ({inst.ratio_rule} split)" if len(inst.cards) > 1 else f" ({inst.ratio_rule})"
    return f"  {inst.model} #{inst.replica}: {where}{how}, {inst.context_tokens:,} tokens"


def describe_placement(placement: Placement) -> str:
    """Cards, instances, swap groups, tight and refused models, missing replicas; one per line."""
    if placement.unpinned:
        lines = ["no cards and no memory budget: every instance runs unpinned", "instances:"]
        return "\n".join(lines + [_instance_line(inst) for inst in placement.instances])
    lines = ["cards:"]
    for card in placement.cards:
        over = f", {gib(card.overflow_bytes)} OVER" if card.overflow_bytes else ""
        who = f" -- {', '.join(card.models)}" if card.models else ""
        charged = f"{gib(card.charged_bytes)} charged of {gib(card.usable_bytes)} usable"
        lines.append(f"  {_card_name(card.index)}: {charged}, {gib(card.free_bytes)} free{over}{who}")
    lines.append("instances:" if placement.instances else "instances: none")
    lines += [_instance_line(inst) for inst in placement.instances]
    if placement.swap_groups:
        lines.append("swap groups (one member resident at a time, charged its largest member per card):")
        for group in placement.swap_groups:
            slots = ", ".join(f"{_card_name(c)} {gib(b)}" for c, b in zip(group.cards, group.charge_bytes, strict=True))
            lines.append(f"  {' / '.join(group.members)}: {slots}")
    if placement.tight:
        lines.append("tight (placed although they fit nowhere):")
        for t in placement.tight:
            cards = ", ".join(map(str, t.cards))
            lines.append(f"  {t.model}: {gib(t.shortfall_bytes)} short on card(s) {cards}")
    if placement.refused:
        lines.append("refused:")
        lines += [f"  {r.model}: {r.reason}" for r in placement.refused]
    if placement.missing_replicas:
        lines.append("fewer replicas than asked:")
        lines += [f"  {m.model}: {m.placed} of {m.requested} ({m.reason})" for m in placement.missing_replicas]
    return "\n".join(lines)
