"""Manual plan files: a JSON or TOML dict in, a :class:`ManualPlan` out (and back).

The accepted shape, in TOML::

    swap_groups = [["ocr", "chat"]]      # optional: phase-disjoint models sharing memory

    [models.chat]
    cards = [0, 1]                       # also "devices"; "card = 0" for one card
    ratio = [3, 1]                       # optional; also "tensor_split"
    replicas = 1                         # optional
    context = 32768                      # optional; also "context_tokens"

    [models]
    embed = [2]                          # shorthand: just the cards (or one card index)
    rerank = [{ cards = [2] }, { cards = [3] }]   # several entries: replicas on different cards

A flat mapping of model -> entry (no ``models`` table) is accepted too. Parsing
is pure: reading the file is the caller's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from explorer.errors import ManualPlanError
from explorer.fleet.manual import ManualPlan, PlanEntry
from explorer.fleet.result import Placement
from explorer.limits import load_json, load_toml

# The spellings accepted for each entry key (the first is the one written back).
_KEYS = {
    "cards": ("cards", "devices", "card"),
    "ratio": ("ratio", "tensor_split"),
    "replicas": ("replicas",),
    "context_tokens": ("context", "context_tokens"),
}
_SPELLING = {alias: key for key, aliases in _KEYS.items() for alias in aliases}


def _entry(model: str, spec: object) -> PlanEntry:
    if isinstance(spec, int | list) and not isinstance(spec, bool):
        spec = {"cards": spec}
    if not isinstance(spec, Mapping):
        raise ManualPlanError(f"{model}: a plan entry is a card index, a list of cards or a table, got {spec!r}")
    unknown = sorted(set(spec) - set(_SPELLING))
    if unknown:
        raise ManualPlanError(f"{model}: unknown plan key(s) {unknown}; use {sorted(_SPELLING)}")
    fields: dict[str, Any] = {}
    for alias, value in spec.items():
        key = _SPELLING[alias]
        if key in fields:
            raise ManualPlanError(
                f"{model}: {key} is given twice (as {' and '.join(a for a in spec if _SPELLING[a] == key)})"
            )
        fields[key] = value
    if "cards" not in fields:
        raise ManualPlanError(f"{model}: a plan entry needs cards")
    cards = fields["cards"]
    fields["cards"] = (cards,) if isinstance(cards, int) and not isinstance(cards, bool) else cards
    return PlanEntry(model=model, **fields)


def parse_plan(data: Mapping[str, Any]) -> ManualPlan:
    """Turn a loaded JSON or TOML plan into a :class:`ManualPlan`; ManualPlanError names what is wrong."""
    if not isinstance(data, Mapping):
        raise ManualPlanError(f"a placement plan is a table of models, got {type(data).__name__}")
    groups = data.get("swap_groups", [])
    if "models" in data:
        extra = sorted(set(data) - {"models", "swap_groups"})
        if extra:
            raise ManualPlanError(f"unknown top-level plan key(s) {extra}; use models and swap_groups")
        models = data["models"]
        if not isinstance(models, Mapping):
            raise ManualPlanError(f"plan 'models' must be a table of model -> entry, got {type(models).__name__}")
    else:
        models = {k: v for k, v in data.items() if k != "swap_groups"}
    if not isinstance(groups, list) or not all(
        isinstance(g, list) and all(isinstance(n, str) for n in g) for g in groups
    ):
        raise ManualPlanError(f"swap_groups must be a list of lists of model names, got {groups!r}")
    entries: list[PlanEntry] = []
    for model, spec in models.items():
        specs = spec if isinstance(spec, list) and spec and all(isinstance(s, Mapping) for s in spec) else [spec]
        entries += [_entry(str(model), s) for s in specs]
    return ManualPlan(entries=tuple(entries), swap_groups=tuple(frozenset(g) for g in groups))


def parse_plan_text(text: str, *, fmt: Literal["json", "toml"]) -> ManualPlan:
    """Parse a plan file's text; ``fmt`` comes from the file's suffix (nesting bounded, see explorer.limits)."""
    load = load_json if fmt == "json" else load_toml
    return parse_plan(load(text, where="the placement plan", error=ManualPlanError))


def plan_to_dict(plan: ManualPlan) -> dict[str, Any]:
    """The plan as a JSON- and TOML-ready dict that :func:`parse_plan` reads back unchanged."""
    models: dict[str, list[dict[str, Any]]] = {}
    for e in plan.entries:
        row: dict[str, Any] = {"cards": list(e.cards)}
        if e.ratio is not None:
            row["ratio"] = list(e.ratio)
        if e.replicas != 1:
            row["replicas"] = e.replicas
        if e.context_tokens is not None:
            row["context"] = e.context_tokens
        models.setdefault(e.model, []).append(row)
    out: dict[str, Any] = {"models": {m: rows[0] if len(rows) == 1 else rows for m, rows in models.items()}}
    if plan.swap_groups:
        out["swap_groups"] = [sorted(g) for g in plan.swap_groups]
    return out


def plan_from_placement(placement: Placement) -> ManualPlan:
    """A plan that pins every instance where ``placement`` put it, at its context and split.

    Checking it against the same models and cards reports nothing unless the
    placement had tight models. A unified-memory placement has no cards to pin to.
    """
    if placement.unified:
        raise ManualPlanError("a unified-memory placement has no cards to pin, so it makes no manual plan")
    entries = tuple(
        PlanEntry(
            model=i.model,
            cards=i.cards,
            context_tokens=i.context_tokens,
            ratio=i.shard_bytes if len(i.cards) > 1 and sum(i.shard_bytes) > 0 else None,
        )
        for i in placement.instances
    )
    return ManualPlan(entries=entries, swap_groups=tuple(frozenset(g.members) for g in placement.swap_groups))
