"""``explorer place --cluster SPEC --model TERM ...``: many models on one fleet."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from explorer.cli.args import fraction
from explorer.cli.hub_options import add_hub_options, hub_kwargs
from explorer.cli.plan import read_cluster
from explorer.cli.request_args import ENGINE_METAVAR, add_setting_arguments, engine_choice
from explorer.engines.registry import FLEET_ENGINE
from explorer.errors import ManualPlanError, PlacementError
from explorer.fleet.footprints import demand_for, fleet_cards, launch_ids, unique_names
from explorer.fleet.place import Placement, parse_model_term, parse_plan_text, place, validate_plan
from explorer.fleet.text import describe_placement
from explorer.sources.checkpoints import checkpoints_for_precision
from explorer.sources.resolve import load_model
from explorer.sources.shipped import read_user_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``place`` subcommand's arguments."""
    p.add_argument("--cluster", required=True, metavar="SPEC", help="cluster spec or a .json/.toml file")
    p.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="TERM",
        help="ID[:QUANT][:CONTEXT[/MIN]][xREPLICAS][@phase,...], e.g. Qwen/Qwen3-8B:32k/8kx2@query or "
        "meta-llama/Meta-Llama-3.1-70B:int4-awq:8k (repeatable; order = rank; /MIN: the least context it accepts; "
        ":QUANT: a precision as --quant takes it, for this model only)",
    )
    p.add_argument("--plan", default=None, metavar="FILE", help="a manual plan (.json or .toml) to check instead")
    p.add_argument(
        "--engine",
        type=engine_choice,
        metavar=ENGINE_METAVAR,
        default=FLEET_ENGINE.name,
        help="whose accounting sizes each model (vllm, sglang: even shards on cards of one class; llamacpp: any split)",
    )
    p.add_argument(
        "--usable-fraction",
        type=fraction("the usable share"),
        default=0.9,
        help="share of each card a placement may use",
    )
    add_setting_arguments(p, only=("kv_dtype", "precision"))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_hub_options(p)


def _model(model_id: str, args: argparse.Namespace):
    """The model as the resolver reads it: its shape and the files it offers (a GGUF repository's quants)."""
    given = args.offline or args.token or args.revision or args.timeout
    return load_model(model_id, **hub_kwargs(args)) if given else load_model(model_id)


def _checkpoints(model, precision: str | None, args: argparse.Namespace):
    """The published checkpoints the model's what-if ``precision`` loads from, as ``explorer plan`` finds them."""
    found = checkpoints_for_precision(model, precision, offline=args.offline, token=args.token)
    if found.note:
        print(f"note: {found.note}", file=sys.stderr)
    return found.checkpoints


def run(args: argparse.Namespace) -> int:
    """Place (or check a manual plan) and print."""
    if not 0 < args.usable_fraction <= 1:
        raise PlacementError(f"--usable-fraction must be in (0, 1], got {args.usable_fraction}")
    cluster = read_cluster(args.cluster)
    offer = fleet_cards(cluster, usable_fraction=args.usable_fraction)
    terms = [parse_model_term(t) for t in args.model]
    names = unique_names([t.model_id for t in terms])
    resolved = [_model(t.model_id, args) for t in terms]
    published = [
        _checkpoints(model, t.precision or args.precision, args) for t, model in zip(terms, resolved, strict=True)
    ]
    models = [
        demand_for(
            model.shape,
            t,
            gpu=offer.gpu,
            engine=args.engine,
            rank=rank,
            kv_dtype=args.kv_dtype,
            precision=args.precision,
            name=name,
            offered=model.artifacts,
            checkpoints=checkpoints,
        )
        for rank, (t, name, model, checkpoints) in enumerate(zip(terms, names, resolved, published, strict=True))
    ]
    if args.plan:
        path = Path(args.plan)
        text = read_user_text(path, "the placement plan", ManualPlanError)
        manual = parse_plan_text(text, fmt="toml" if path.suffix == ".toml" else "json")
        placement = validate_plan(manual, models, offer.plan_cards)  # a plan is charged against each card's total
    else:
        placement = place(models, offer.cards, unified_budget_bytes=offer.unified_budget_bytes)
    from explorer.ui.fleet_launch import launch_rows  # the app's launch lines: the same for the CLI

    ids = launch_ids(models, dict(zip(names, (t.model_id for t in terms), strict=True)))
    launches = launch_rows(placement, offer, ids, engine=args.engine)
    if args.json:
        print(json.dumps({**placement_dict(placement, offer.labels, models), "launch": launches}, indent=2))
    else:
        if offer.labels:
            print(
                "cards: "
                + ", ".join(f"{i}={label}" for i, label in enumerate(offer.labels[:16]))
                + (" …" if len(offer.labels) > 16 else "")
            )
        print(describe_placement(placement))
        weights = [f"  {m.name}: {m.note}" for m in models if m.note]
        if weights:
            print("\nweights:\n" + "\n".join(weights))
        print("\nlaunch (each instance on its GPUs, a port a server on a node, a line a node):")
        print("\n".join(f"  {line}" for row in launches for line in row["command"].split("\n")))
    return 0 if not placement.tight and not placement.refused else 3


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def placement_dict(placement: Placement, labels: tuple[str, ...], models) -> dict[str, Any]:
    """A JSON-ready dict of a placement, byte figures as ints, with the models' footprints."""
    out = _plain(dataclasses.asdict(placement))
    out["card_labels"] = list(labels)
    out["models"] = [_plain(dataclasses.asdict(m)) for m in models]
    return out
