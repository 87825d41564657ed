"""``explorer size``: the card classes and counts that serve a workload, cheapest an hour first.

Parses the model, the workload (:mod:`explorer.cli.workload_args`) and the engine settings, calls
:func:`explorer.plan.size.size`, and prints a table or JSON. Nothing here computes a figure.
"""

from __future__ import annotations

import argparse
import json

from explorer.cli.args import int_range
from explorer.cli.hub_options import add_hub_options
from explorer.cli.plan import add_speed_arguments, read_cluster, resolve_for_plan, speed_settings
from explorer.cli.request_args import add_setting_arguments, request_from_args
from explorer.cli.size_table import print_size
from explorer.cli.workload_args import add_workload_arguments, workload_from_args
from explorer.errors import PlanError
from explorer.plan.size import size
from explorer.sources.cache.calibrations import stored_calibrations
from explorer.sources.shipped import shipped_catalogue

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``size`` subcommand's arguments."""
    p.add_argument("model", metavar="MODEL", help="config.json, a model folder, a .gguf file, or a Hub id")
    add_workload_arguments(p)
    add_setting_arguments(
        p.add_argument_group("engine settings (each engine's own flag in parentheses)"),
        skip=("context_tokens", "concurrency"),
    )
    p.add_argument(
        "--cluster", default=None, metavar="SPEC", help="your own cluster, sized as one more candidate (optional)"
    )
    p.add_argument(
        "--classes", default=None, metavar="A,B", help="card classes to try (default: every class with a price)"
    )
    add_speed_arguments(p)
    p.add_argument("--top", type=int_range(1, 1000, "--top"), default=10, help="clusters to print (human form)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_hub_options(p)


def run(args: argparse.Namespace) -> int:
    """Size and print; exit status 3 when no cluster meets the workload."""
    workload = workload_from_args(args)
    if not workload.given:
        raise PlanError("explorer size needs a workload: --users N (users at once) or --rate R (requests a second)")
    shape, artifacts, _model_ref, _fallback = resolve_for_plan(args)
    settings = speed_settings(args)
    own = read_cluster(args.cluster) if args.cluster else None
    classes = [c.strip() for c in args.classes.split(",") if c.strip()] if args.classes else None
    result = size(shape, workload, shipped_catalogue(), settings.prices, request_from_args(args, stored_calibrations()),
                  artifacts=artifacts, own=own, classes=classes, settings=settings)  # fmt: skip
    if args.json:
        print(json.dumps({"model": shape.name or args.model, **result.to_dict()}, indent=2))
    else:
        print_size(result, shape.name or args.model, args.top)
    return 0 if result.met else 3
