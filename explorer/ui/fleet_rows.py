"""Many models on one fleet, for ``notebooks/placement.py``: model rows in, placement rows out.

Pure: model terms, shapes and a :class:`~explorer.fleet.place.Placement` in,
demands, lists of dicts and strings out. The placing and the checking are
:mod:`explorer.fleet.place`'s own; this module only turns the notebook's rows
into model terms (the CLI's ``ID[:QUANT][:context][xREPLICAS][@phase,...]``) and the
answers into rows a table or :func:`explorer.ui.charts.placement_chart` shows.
Byte figures stay ints until a row shows them, in GiB (1024³ bytes).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from explorer.engines.registry import FLEET_ENGINE
from explorer.errors import ExplorerError
from explorer.fleet.footprints import demand_for, unique_names
from explorer.fleet.place import (
    Card,
    Instance,
    ModelDemand,
    ModelTerm,
    Placement,
    PlanViolation,
    check_plan,
    parse_model_term,
    parse_plan_text,
    plan_from_placement,
    plan_to_dict,
    validate_plan,
)
from explorer.ui.presets import PRESETS, Preset
from explorer.units import GiB, gib

__all__ = [
    "CARD_COLUMNS",
    "CONTEXT_CHOICES",
    "DEFAULT_FLEET",
    "FLEET_PRESETS",
    "INSTANCE_COLUMNS",
    "FleetRow",
    "PlanCheck",
    "card_rows",
    "card_segments",
    "check_plan_text",
    "cli_command",
    "fleet_demands",
    "fleet_text",
    "instance_rows",
    "parse_extra_terms",
    "placement_notes",
    "plan_text",
    "row_term",
    "term_text",
    "terms_from_rows",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetRow:
    """One model row of the notebook.

    Attributes:
        name: the model's name in the placement (and in a manual plan).
        repo: a repository of the shipped snapshot.
        context_tokens: the context to charge, or None for the model's default (tokens).
        replicas: instances wanted.
        phases: comma-separated phases it runs in; empty: always.
        why: what the row stands for (the notebook lists it with the default fleet).
    """

    name: str
    repo: str
    context_tokens: int | None = None
    replicas: int = 1
    phases: str = ""
    why: str = ""


#: The default fleet: a document-search service on three 48 GB cards. The two 32B models never run
#: in the same phase (vision reads documents at ingest, chat answers at query) and do not both fit,
#: so they form a swap group on two cards; the small models share the third card; the embedder runs
#: in both phases and spreads its two replicas over two cards. The snapshot has no embedder or
#: reranker, so the base models of Qwen3-Embedding-0.6B and Qwen3-Reranker-4B stand in (same layers).
DEFAULT_FLEET: tuple[FleetRow, ...] = (
    FleetRow(
        name="chat", repo="Qwen/Qwen3-32B", context_tokens=32768, phases="query", why="answers questions at query time"
    ),
    FleetRow(
        name="vision",
        repo="Qwen/Qwen3-VL-32B-Instruct",
        context_tokens=16384,
        phases="ingest",
        why="describes figures and scans while documents come in",
    ),
    FleetRow(
        name="ocr",
        repo="allenai/olmOCR-7B-0225-preview",
        context_tokens=16384,
        phases="ingest",
        why="reads page images into text at ingest",
    ),
    FleetRow(
        name="rerank",
        repo="Qwen/Qwen3-4B-Thinking-2507",
        context_tokens=8192,
        phases="query",
        why="stand-in for Qwen3-Reranker-4B (built on Qwen3-4B)",
    ),
    FleetRow(
        name="embed",
        repo="Qwen/Qwen3-0.6B",
        context_tokens=8192,
        replicas=2,
        why="stand-in for Qwen3-Embedding-0.6B; embeds documents and questions, so it always runs",
    ),
)

#: the clusters offered: a small box the default fleet needs a swap group on, then the app's presets
FLEET_PRESETS: tuple[Preset, ...] = (
    Preset(
        name="Three L40S (a small box)",
        spec="1x3xl40s-48g",
        description="Three 48 GB cards: the default fleet fits only with a swap group.",
    ),
    *(
        p
        for p in PRESETS
        if p.name in ("One RTX 4090", "One 8×H100 node", "A mixed fleet", "Mac with 128 GB unified memory")
    ),
)

#: the context menu: label -> tokens (None: the model's default, at most 8,192)
CONTEXT_CHOICES: dict[str, int | None] = {
    "default": None,
    "2k": 2048,
    "4k": 4096,
    "8k": 8192,
    "16k": 16384,
    "32k": 32768,
    "64k": 65536,
    "128k": 131072,
    "256k": 262144,
}


def _tokens_text(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def term_text(term: ModelTerm) -> str:
    """The term as the CLI spells it: ``Qwen/Qwen3-32B:32k/8k@query``, ``Qwen/Qwen3-0.6B:8kx2``,
    ``meta-llama/Meta-Llama-3.1-70B:int4-awq``."""
    text = term.model_id + (f":{term.precision}" if term.precision else "")
    if term.context_tokens:
        text += f":{_tokens_text(term.context_tokens)}"
        if term.min_context_tokens:
            text += f"/{_tokens_text(term.min_context_tokens)}"
    if term.replicas != 1 or (not term.context_tokens and re.search(r"[xX]\d+$", text)):
        text += f"x{term.replicas}"  # an id ending in x<digits> needs its x1, or it reads as replicas
    if term.phases:
        text += "@" + ",".join(sorted(term.phases))
    return text


def row_term(
    repo: str,
    context_tokens: int | None = None,
    replicas: int = 1,
    phases: str = "",
    min_context_tokens: int | None = None,
) -> ModelTerm:
    """A row's controls as a model term, read by the CLI's own parser (which checks the phases and the floor).

    ``phases`` is comma-separated (spaces ignored); empty means the model always runs. A context floor
    counts only with a context.
    """
    floor = f"/{int(min_context_tokens)}" if context_tokens and min_context_tokens else ""
    text = repo.strip() + (f":{int(context_tokens)}{floor}" if context_tokens else "") + f"x{int(replicas)}"
    names = [p.strip() for p in str(phases or "").split(",") if p.strip()]
    return parse_model_term(text + ("@" + ",".join(names) if names else ""))


def parse_extra_terms(text: str) -> tuple[list[tuple[str | None, ModelTerm]], list[str]]:
    """Lines of ``TERM`` or ``name = TERM`` (``#`` starts a comment): the terms, and one error a bad line."""
    out: list[tuple[str | None, ModelTerm]] = []
    errors: list[str] = []
    for number, raw in enumerate(str(text or "").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, term = line.partition("=") if "=" in line else ("", "", line)
        try:
            out.append((name.strip() or None, parse_model_term(term.strip())))
        except ExplorerError as e:
            errors.append(f"line {number}: {e}")
    return out, errors


def terms_from_rows(
    rows: Sequence[Mapping[str, Any]], extra_text: str = ""
) -> tuple[list[tuple[str | None, ModelTerm]], list[str]]:
    """The notebook's model rows (dicts of name, model, context label, replicas, phases and, optionally, the
    least context's label, ``min context``), then the extra terms' lines, as (name or None, term); rows
    without a model are skipped. Returns (terms, errors)."""
    terms: list[tuple[str | None, ModelTerm]] = []
    errors: list[str] = []
    for number, row in enumerate(rows, 1):
        if not row.get("model"):
            continue
        try:
            term = row_term(
                str(row["model"]),
                CONTEXT_CHOICES.get(str(row.get("context"))),
                int(row.get("replicas") or 1),
                str(row.get("phases") or ""),
                CONTEXT_CHOICES.get(str(row.get("min context"))),
            )
        except (ExplorerError, ValueError) as e:
            errors.append(f"row {number}: {e}")
            continue
        terms.append((str(row.get("name") or "").strip() or None, term))
    extra, bad = parse_extra_terms(extra_text)
    return terms + extra, errors + bad


def fleet_demands(
    terms: Sequence[tuple[str | None, ModelTerm]],
    model_of: Callable[[str], Any],
    *,
    gpu: Any,
    engine: str = "vllm",
    precision: str | None = None,
) -> tuple[list[ModelDemand], list[str], list[str]]:
    """Each term's footprint (:func:`explorer.fleet.footprints.demand_for`), ranked in row order as the CLI ranks them.

    ``model_of(model_id)`` gives the resolved model (its ``shape``, the ``artifacts`` the resolver offers, so a
    GGUF repository is sized and launched at the file llama-server loads, and the published ``checkpoints`` it
    knows, which a ``precision`` loads from as ``explorer plan --quant`` does), or None when it has none (an error
    for that model; so does an ExplorerError it raises). A context past the model's
    own limit is lowered to the limit, with a note; weights that are not the model's own checkpoint (a published
    checkpoint of the Instruct model standing in, a what-if nobody publishes) get a note too. Names are the terms' names, else
    their ids, made unique (``#2``). Returns (demands, notes, errors), a line each.
    """
    names = unique_names([name or t.model_id for name, t in terms])
    demands, notes, errors = [], [], []
    for rank, ((_n, term), name) in enumerate(zip(terms, names, strict=True)):
        try:
            model = model_of(term.model_id)
            if model is None:
                errors.append(f"{name}: no model is known as {term.model_id}")
                continue
            shape = model.shape
            asked = term.context_tokens or 0
            charged = shape.clamp_context(asked)
            if charged < asked:
                notes.append(f"{name}: {asked:,} tokens asked; the model's limit, {charged:,}, is charged")
                floor = term.min_context_tokens
                term = replace(term, context_tokens=charged, min_context_tokens=floor and min(floor, charged))
            demand = demand_for(
                shape,
                term,
                gpu=gpu,
                engine=engine,
                rank=rank,
                precision=precision,
                name=name,
                offered=model.artifacts,
                checkpoints=model.checkpoints,
            )
            demands.append(demand)
            if demand.note:
                notes.append(f"{name}: {demand.note}")
        except ExplorerError as e:
            errors.append(f"{name}: {e}")
    return demands, notes, errors


def cli_command(
    spec: str,
    terms: Sequence[tuple[str | None, ModelTerm]],
    *,
    engine: str = FLEET_ENGINE.name,
    usable_fraction: float = 0.9,
    precision: str | None = None,
) -> str:
    """The same placement from the command line (the CLI names each model by its id)."""
    parts = ["explorer place --offline", f"--cluster '{spec}'", *(f"--model '{term_text(t)}'" for _n, t in terms)]
    if engine != FLEET_ENGINE.name:  # explorer place's default need not be written
        parts.append(f"--engine {engine}")
    if round(usable_fraction, 4) != 0.9:
        parts.append(f"--usable-fraction {usable_fraction:g}")
    if precision:
        parts.append(f"--quant {precision}")
    return " ".join(parts)


def fleet_text(labels: Sequence[str], unified_budget_bytes: int | None = None) -> str:
    """The cards in words: ``3 cards (3 × l40s-48g)``, ``one unified-memory pool of 96.0 GiB``."""
    if not labels:
        return f"one unified-memory pool of {gib(unified_budget_bytes or 0)}"
    classes: dict[str, int] = {}
    for label in labels:  # "node:index (class)", as explorer.fleet.footprints.fleet_cards writes it
        name = label.rsplit("(", 1)[-1].rstrip(")")
        classes[name] = classes.get(name, 0) + 1
    kinds = ", ".join(f"{n} × {c}" for c, n in classes.items())
    return f"{len(labels)} card{'s' if len(labels) != 1 else ''} ({kinds})"


def _card_name(index: int) -> str:
    return "unified memory" if index < 0 else f"card {index}"


def _cards_text(indices: Sequence[int]) -> str:
    """``card 2``, ``cards 0, 1``, or ``unified memory`` for the pool."""
    if any(i < 0 for i in indices):
        return "unified memory"
    return ("card " if len(indices) == 1 else "cards ") + ", ".join(map(str, indices))


def card_segments(
    placement: Placement, labels: Sequence[str] = (), *, label_share: float = 0.06
) -> list[dict[str, Any]]:
    """Chart rows: what each card holds, stacked in charge order, in GiB.

    ``row`` is "segment" (one instance's charge on a card), "slot" (a swap group's
    charge on a card: its largest member there; its members' segments sit side by
    side inside it, ``member`` 0, 1 …) or "card" (usable and charged, one per card).
    A segment's ``label`` is its model's name when it is at least ``label_share`` of
    the tallest card, so small slivers stay unlabelled. Each card's stack ends at its
    charged bytes.
    """
    group_of = {m: g for g in placement.swap_groups for m in g.members}
    tight = {t.model: t for t in placement.tight}
    top = max([1, *(max(c.usable_bytes, c.charged_bytes) for c in placement.cards)])
    rows: list[dict[str, Any]] = []

    def segment(card: int, order: int, inst: Instance, base: int, nbytes: int, **extra: Any) -> dict[str, Any]:
        t = tight.get(inst.model)
        return {
            "row": "segment",
            "card": _card_name(card),
            "card_order": order,
            "model": inst.model,
            "replica": inst.replica,
            "context": inst.context_tokens,
            "y0": base / GiB,
            "y1": (base + nbytes) / GiB,
            "gib": nbytes / GiB,
            "tight": t is not None,
            "swap": False,
            "member": 0,
            "members": 1,
            "group": "",
            "label": inst.model if nbytes >= label_share * top else "",
            "status": f"tight: short by {gib(t.shortfall_bytes)}" if t else "fits",
            **extra,
        }

    for order, card in enumerate(placement.cards):
        c, base, done = card.index, 0, set()
        for inst in (i for i in placement.instances if c in i.cards):
            nbytes = inst.split_bytes[inst.cards.index(c)]
            group = group_of.get(inst.model)
            if group is None:
                rows.append(segment(c, order, inst, base, nbytes))
                base += nbytes
                continue
            if id(group) in done:
                continue
            done.add(id(group))
            slot = group.charge_bytes[group.cards.index(c)]
            members = " / ".join(group.members)
            for k, member in enumerate(group.members):
                for mi in (i for i in placement.instances_of(member) if c in i.cards):
                    mb = mi.split_bytes[mi.cards.index(c)]
                    rows.append(
                        segment(c, order, mi, base, mb, swap=True, member=k, members=len(group.members), group=members)
                    )
            rows.append(
                {
                    "row": "slot",
                    "card": _card_name(c),
                    "card_order": order,
                    "y0": base / GiB,
                    "y1": (base + slot) / GiB,
                    "mid": (base + slot / 2) / GiB,
                    "gib": slot / GiB,
                    "group": members,
                }
            )
            base += slot
        label = labels[c] if 0 <= c < len(labels) else _card_name(c)
        rows.append(
            {
                "row": "card",
                "card": _card_name(c),
                "card_order": order,
                "gpu": label,
                "usable_gib": card.usable_bytes / GiB,
                "charged_gib": card.charged_bytes / GiB,
                "stacked_gib": base / GiB,
                "over": card.overflow_bytes > 0,
            }
        )
    return rows


#: the instance table's columns
INSTANCE_COLUMNS = ("fits", "model", "replica", "cards", "per card (GiB)", "context (tokens)", "split")
#: the card table's columns
CARD_COLUMNS = ("fits", "card", "GPU", "usable (GiB)", "charged (GiB)", "free (GiB)", "models")


def instance_rows(placement: Placement) -> list[dict[str, Any]]:
    """The instances as table rows (:data:`INSTANCE_COLUMNS`); a tight one's ``fits`` starts with ✗."""
    group_of = {m: g for g in placement.swap_groups for m in g.members}
    tight = {t.model: t for t in placement.tight}
    rows = []
    for i in placement.instances:
        fits = f"✗ tight, short by {gib(tight[i.model].shortfall_bytes)}" if i.model in tight else "✓"
        if i.model in group_of:
            fits += f" swap group ({' / '.join(group_of[i.model].members)})"
        rows.append(
            {
                "fits": fits,
                "model": i.model,
                "replica": str(i.replica),
                "cards": _cards_text(i.cards),
                "per card (GiB)": ", ".join(f"{b / GiB:,.1f}" for b in i.split_bytes),
                "context (tokens)": f"{i.context_tokens:,}",
                "split": _split_text(i),
            }
        )
    return rows


def _split_text(inst: Instance) -> str:
    if inst.cards[0] < 0:
        return "the pool"
    return "one card" if len(inst.cards) == 1 else f"{inst.ratio_rule} over {len(inst.cards)} cards"


def card_rows(placement: Placement, labels: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every card's charge as table rows (:data:`CARD_COLUMNS`); an overfull card's ``fits`` starts with ✗."""
    return [
        {
            "fits": f"✗ over by {gib(c.overflow_bytes)}" if c.overflow_bytes else "✓",
            "card": _card_name(c.index),
            "GPU": labels[c.index] if 0 <= c.index < len(labels) else "",
            "usable (GiB)": f"{c.usable_bytes / GiB:,.1f}",
            "charged (GiB)": f"{c.charged_bytes / GiB:,.1f}",
            "free (GiB)": f"{c.free_bytes / GiB:,.1f}",
            "models": ", ".join(c.models) or "—",
        }
        for c in placement.cards
    ]


def placement_notes(placement: Placement) -> dict[str, list[str]]:
    """Sentences for the swap groups, the tight and refused models and the missing replicas (keyed so)."""
    return {
        "swap groups": [
            f"{' / '.join(g.members)}: one resident at a time on {_cards_text(g.cards)}, charged its "
            "largest member per card: "
            + ", ".join(f"{_card_name(c)} {gib(b)}" for c, b in zip(g.cards, g.charge_bytes, strict=True))
            for g in placement.swap_groups
        ],
        "tight": [f"{t.model}: short by {gib(t.shortfall_bytes)} on {_cards_text(t.cards)}" for t in placement.tight],
        "refused": [r.reason for r in placement.refused],
        "missing replicas": [
            f"{m.model}: {m.placed} of {m.requested} replicas ({m.reason})" for m in placement.missing_replicas
        ],
    }


def plan_text(placement: Placement) -> str:
    """The placement as a manual plan in JSON, one model a line, or "" for a unified-memory pool.

    The plan is :func:`plan_to_dict` of :func:`plan_from_placement`, with each split's
    ratio (the shards' bytes) divided by their greatest common divisor: the same
    proportions, so the same charges, and ``[1, 1]`` for an even split.
    """
    if placement.unified:
        return ""
    plan = plan_to_dict(plan_from_placement(placement))

    def reduced(entry: dict[str, Any]) -> dict[str, Any]:
        ratio = entry.get("ratio")
        if ratio and math.gcd(*ratio) > 1:
            entry = {**entry, "ratio": [r // math.gcd(*ratio) for r in ratio]}
        return entry

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = [
        f"    {dump(m)}: {dump([reduced(e) for e in v] if isinstance(v, list) else reduced(v))}"
        for m, v in plan["models"].items()
    ]
    body = '{\n  "models": {\n' + ",\n".join(lines) + "\n  }"
    if plan.get("swap_groups"):
        body += f',\n  "swap_groups": {dump(plan["swap_groups"])}'
    return body + "\n}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCheck:
    """A manual plan's text, checked against the models and cards.

    Attributes:
        error: why the text is not a plan (bad JSON, a malformed entry), or None.
        violations: every way the plan breaks the fleet (:func:`explorer.fleet.place.check_plan`).
        placement: the plan as a placement when it fits, with its per-card charges; else None.
    """

    error: str | None = None
    violations: tuple[PlanViolation, ...] = ()
    placement: Placement | None = None

    @property
    def fits(self) -> bool:
        """True when the text parsed and the plan breaks nothing."""
        return self.placement is not None


def check_plan_text(text: str, models: Sequence[ModelDemand], cards: Sequence[Card]) -> PlanCheck:
    """Parse a JSON plan and check it with the planner's own :func:`check_plan`; never raises ExplorerError."""
    try:
        manual = parse_plan_text(text, fmt="json")
        violations = check_plan(manual, models, cards)
        if violations:
            return PlanCheck(violations=tuple(violations))
        return PlanCheck(placement=validate_plan(manual, models, cards))
    except ExplorerError as e:
        return PlanCheck(error=str(e))
