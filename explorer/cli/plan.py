"""``explorer plan MODEL --cluster SPEC``: every way a model can run, best first, and why others cannot."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from explorer.artifacts.offer import fallback_artifacts, plan_artifacts
from explorer.cli.args import fraction, int_range
from explorer.cli.hub_options import add_hub_options, hub_kwargs
from explorer.cli.plan_table import print_result
from explorer.cli.request_args import add_setting_arguments, request_from_args
from explorer.cli.size_table import print_option_sizings
from explorer.cli.workload_args import add_workload_arguments, workload_from_args
from explorer.engines.registry import engine_serving
from explorer.engines.weight_kernels import RULE as WEIGHTS_UNSUPPORTED
from explorer.errors import ClusterSpecError
from explorer.hardware.cluster import MAX_GPUS, Cluster
from explorer.limits import MAX_CONCURRENCY
from explorer.plan.pinning import check_pinned, pinned_launch
from explorer.plan.planner import plan
from explorer.plan.ranking import GOALS, SORT_ALIASES
from explorer.plan.size import size_options
from explorer.sources.cache.calibrations import stored_calibrations
from explorer.sources.checkpoints import checkpoints_for_precision
from explorer.sources.resolve import load_model
from explorer.sources.shipped import (
    load_cluster_file,
    parse_cluster,
    read_prices,
    shipped_catalogue,
    shipped_prices,
)
from explorer.speed.estimate import SpeedSettings
from explorer.units import gib

__all__ = [
    "add_request_arguments",
    "goal_from_args",
    "print_result",
    "read_cluster",
    "request_from_args",
    "run",
]


def add_request_arguments(
    p: argparse.ArgumentParser, example: str = "2x8xh100-80g@ib0 + 1xcpu-256g", *, skip: tuple[str, ...] = ()
) -> None:
    """``--cluster`` and every request setting (:mod:`explorer.cli.request_args`) but the fields in ``skip``,
    shared with ``explorer fit``."""
    p.add_argument(
        "--cluster",
        required=True,
        metavar="SPEC",
        help=f"cluster spec ({example}) or a .json/.toml file",
    )
    add_setting_arguments(p.add_argument_group("request (each engine's own flag in parentheses)"), skip=skip)


def read_cluster(text: str) -> Cluster:
    """A cluster from a spec string or a .json/.toml file."""
    if text.endswith((".json", ".toml")):
        if not Path(text).exists():
            raise ClusterSpecError(f"cluster file {text} does not exist")
        return load_cluster_file(text)
    return parse_cluster(text)


def resolve_for_plan(args: argparse.Namespace):
    """(shape, artifacts, model reference, fallback) for a MODEL argument.

    The fallback (:func:`explorer.artifacts.offer.fallback_artifacts`) is planned only when the model's own
    weights keep no layout on accelerators alone; none when the user chose a precision or named a file.
    """
    resolved = load_model(args.model, **hub_kwargs(args))
    named = resolved.names_file
    found = checkpoints_for_precision(resolved, args.precision, offline=args.offline, token=args.token)
    if found.note:
        print(f"note: {found.note}", file=sys.stderr)
    artifacts = plan_artifacts(
        resolved.shape,
        resolved.artifacts,
        quant=args.precision,
        selected=resolved.selected if named else None,
        checkpoints=found.checkpoints,
    )
    chosen = bool(args.precision) or named
    fallback = () if chosen else fallback_artifacts(resolved.shape, artifacts, found.checkpoints)
    return resolved.shape, artifacts, resolved.launch_ref, fallback


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``plan`` subcommand's arguments."""
    p.add_argument(
        "model",
        metavar="MODEL",
        help="config.json, a model folder, a .gguf file, or a Hub id (org/name, org/name@revision, org/name:FILE.gguf)",
    )
    add_request_arguments(p)
    add_workload_arguments(p)
    add_hub_options(p)
    p.add_argument(
        "--gpus",
        default=None,
        metavar="NODE:IDX,...",
        help="pin these GPUs (the first --engine given; else llama.cpp for a GGUF, vLLM for weights) "
        "and report any overcommit",
    )
    p.add_argument(
        "--replicas",
        type=int_range(1, MAX_GPUS, "--replicas"),
        default=1,
        help="with --gpus: replicas over the pinned GPUs, in the order given (refused if any overcommits)",
    )
    add_goal_arguments(p)
    p.add_argument(
        "--top", type=int_range(0, MAX_CONCURRENCY, "--top"), default=15, help="options to print (human form)"
    )
    p.add_argument("--wide", action="store_true", help="every column: most sequences, free now, $/Mtok, full label")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_goal_arguments(p: argparse.ArgumentParser) -> None:
    """``--goal`` (and the deprecated ``--sort``) and the speed settings the goals rank by, shared with
    ``explorer fit``."""
    p.add_argument(
        "--goal",
        choices=GOALS,
        default=None,
        help="what to rank for inside each tier (default fewest-cards: the fewest cards and nodes, "
        "the better precision, free now, faster, more headroom)",
    )
    p.add_argument(
        "--sort",
        choices=tuple(SORT_ALIASES),
        default=None,
        help="deprecated: --sort speed is --goal fastest, --sort default is --goal fewest-cards",
    )
    add_speed_arguments(p)


def add_speed_arguments(p: argparse.ArgumentParser) -> None:
    """The speed settings (``--efficiency``, ``--price-table``), shared by plan, fit and size."""
    p.add_argument(
        "--efficiency",
        type=fraction("the efficiency"),
        default=None,
        metavar="F",
        help="share of the speed-of-light bound the engines reach, 0.01 to 1 (default: each engine's own)",
    )
    p.add_argument(
        "--price-table",
        default=None,
        metavar="FILE",
        help="CSV of gpu_class,usd_per_gpu_hour,... for cost per million tokens (default: data/prices.csv)",
    )


def goal_from_args(args: argparse.Namespace) -> str:
    """The goal: ``--goal``, else the deprecated ``--sort`` (with a note on stderr), else fewest-cards."""
    if args.sort is not None:
        goal = SORT_ALIASES[args.sort]
        print(f"explorer: --sort {args.sort} is deprecated; use --goal {goal}", file=sys.stderr)
        if args.goal is None:
            return goal
    return args.goal or "fewest-cards"


def run(args: argparse.Namespace) -> int:
    """Plan and print."""
    shape, artifacts, model_ref, fallback = resolve_for_plan(args)
    cluster = read_cluster(args.cluster)
    if args.gpus:
        return run_pinned(args, shape, cluster, artifacts, model_ref)
    workload = workload_from_args(args)
    request = request_from_args(args, stored_calibrations())
    if workload.given:  # the KV cache is planned for the workload's prompt + answer
        request = replace(request, context_tokens=workload.context_tokens)
    settings = speed_settings(args)
    result = plan(
        shape,
        cluster,
        request,
        artifacts=artifacts,
        model_ref=model_ref,
        goal=goal_from_args(args),
        speed=settings,
        catalogue=shipped_catalogue(),
        fallback=fallback,
    )
    sizings = size_options(result.options, shape, workload, request, settings) if workload.given else None
    if result.widened and not args.json:
        unsupported = next((r.reason for r in result.rejected if r.rule == WEIGHTS_UNSUPPORTED), "")
        print(
            "note: the model's own weights keep no all-GPU layout here that loads them as published with headroom "
            f"(at most 95 % of a card, room for 2 sequences) at its own KV cache type"
            f"{f'; {unsupported}' if unsupported else ''}; also planned: "
            f"{', '.join(result.widened)} (choose one with --quant)",
            file=sys.stderr,
        )
    if args.json:
        out = {**result.to_dict(), "assumed": list(cluster.assumptions)}
        if sizings is not None:
            out["workload"] = workload.to_dict()
            for option, sized in zip(out["options"], sizings, strict=True):
                option["workload"] = None if sized is None else sized.to_dict(workload.answer_tokens)
        print(json.dumps(out, indent=2))
    else:
        print_result(result, top=args.top, wide=args.wide, assumed=cluster.assumptions)
        if sizings is not None:
            print_option_sizings(result.options, sizings, workload, min(args.top, 5))
    return 0 if result.options else 3


def run_pinned(args: argparse.Namespace, shape, cluster, artifacts, model_ref: str) -> int:
    """Check user-pinned GPUs: the launch on exactly them, and by how much it overcommits."""
    engine = args.engines[0] if args.engines else engine_serving(artifacts[0]).name
    result = check_pinned(
        shape,
        cluster,
        [g.strip() for g in args.gpus.split(",") if g.strip()],
        engine=engine,
        request=request_from_args(args, stored_calibrations()),
        artifacts=artifacts,
        model_ref=model_ref,
        replicas=args.replicas,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "model": model_ref,
                    "option": result.option.to_dict(),
                    "replicas": [o.to_dict() for o in result.replicas],
                    "launch": list(pinned_launch(result)),
                    "overcommit_bytes": result.overcommit_bytes,
                    "short_now_bytes": result.short_now_bytes,
                    "cards_pinned": result.cards_pinned,
                    "cards_used": result.cards_used,
                    "cards_ready": result.cards_ready,
                    "usable_bytes": result.usable_bytes,
                    "free_bytes": result.free_bytes,
                    "message": result.message,
                },
                indent=2,
            )
        )
    else:
        card = result.option.per_card
        print(
            f"{result.option.label}\n  {card.role}: weights {gib(card.weights)} + KV {gib(card.kv_cache)} + "
            f"activations {gib(card.activations)} + overhead {gib(card.overhead)} = {gib(card.total)} "
            f"of {gib(card.usable)} usable\n  {result.option.memory_text}\n  {result.message}"
        )
        for line in pinned_launch(result):
            print(f"  {line}")
    return 3 if result.overcommitted else 0


def speed_settings(args: argparse.Namespace) -> SpeedSettings:
    """Speed settings from ``--efficiency`` and ``--price-table``."""
    kwargs: dict = {}
    if args.efficiency is not None:
        kwargs["efficiency"] = {}
        kwargs["default_efficiency"] = args.efficiency
    kwargs["prices"] = read_prices(args.price_table) if args.price_table else shipped_prices()
    return SpeedSettings(**kwargs)
