"""``explorer fit --cluster SPEC``: every model explorer knows, with its best option on that cluster.

Hardware first ("what runs on my machine?"): the shipped snapshot's models
and those in the local cache (read-only), each planned at the asked context
and concurrency and ranked by the goal; the best option's tier, engine,
precision, longest context, decode estimate and replicas. Models that leave
layers off the accelerators, or fit nowhere, come with their best suggestion.
The core is :func:`explorer.plan.fit_view.fit_rows`; the listing
:func:`explorer.sources.known_models.known_models`.
"""

from __future__ import annotations

import argparse
import json

from explorer.cli.args import int_range
from explorer.cli.hub_options import add_offline_option
from explorer.cli.plan import add_goal_arguments, add_request_arguments, goal_from_args, read_cluster, speed_settings
from explorer.cli.plan_table import compact_label
from explorer.cli.request_args import request_from_args
from explorer.limits import MAX_CONCURRENCY
from explorer.plan.fit_view import FitRow, fit_rows, summary
from explorer.sources.cache.calibrations import stored_calibrations
from explorer.sources.known_models import known_models
from explorer.sources.shipped import shipped_catalogue
from explorer.units import human_count


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``fit`` subcommand's arguments."""
    add_request_arguments(p, "1x8xh100-80g, 1x1xm4-max-128g, 2x1xrtx4090-24g@eth", skip=("precision",))
    add_goal_arguments(p)
    p.add_argument(
        "--no-cache", action="store_true", help="list only the shipped snapshot's models; no stored calibrations"
    )
    p.add_argument("--top", type=int_range(0, MAX_CONCURRENCY, "--top"), default=0, help="rows to print (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_offline_option(p, "accepted for symmetry: fit never asks the Hub (the snapshot and the cache answer)")


def run(args: argparse.Namespace) -> int:
    """List the models with their best option on the cluster."""
    cluster = read_cluster(args.cluster)
    # explorer check --calibrate's calibrations, as plan reads them
    request = request_from_args(args, () if args.no_cache else stored_calibrations())
    known = known_models(use_cache=not args.no_cache)
    goal = goal_from_args(args)
    rows = fit_rows(
        known.models, cluster, request, goal=goal, speed=speed_settings(args), catalogue=shipped_catalogue()
    )
    if args.json:
        out = {
            "cluster": args.cluster,
            "request": {"context": request.context_tokens, "concurrency": request.concurrency, "goal": goal},
            "summary": summary(rows),
            "models": [r.to_dict() for r in rows],
            "skipped": list(known.skipped),
            "cache": known.cache_path,
        }
        print(json.dumps(out, indent=2))
    else:
        print_rows(rows, args, goal, known.cache_path, top=args.top)
    return 0 if any(r.best is not None for r in rows) else 3


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _row(i: int, r: FitRow) -> str:
    params = human_count(r.params)
    if r.best is None:
        why = r.error or "fits nowhere"
        return f"{i:>3} {_fit(r.model, 33):<33} {params:>7}  {_fit(why, 70)}"
    b = r.best
    tok = r.decode_tokens_per_s
    label = ("* " if r.widened else "") + compact_label(b)  # *: a quantised fallback, not the own weights
    return (
        f"{i:>3} {_fit(r.model, 33):<33} {params:>7} {b.tier:>4}  {_fit(label, 44):<44} "
        f"{b.evaluation.max_context_tokens:>9,} {'?' if tok is None else f'{tok:,.1f}':>7} {b.replicas:>5,}"
    )


def print_rows(rows: list[FitRow], args: argparse.Namespace, goal: str, cache: str | None, *, top: int = 0) -> None:
    """The table (fits a 120-column terminal), each lower-tier or unfitting model with its best suggestion."""
    counts = summary(rows)
    print(f"{args.cluster}: {len(rows)} models at context {args.context_tokens:,} × {args.concurrency}, goal {goal}")
    print(
        f"  {', '.join(f'{k}: {v}' for k, v in counts.items())}; from the snapshot"
        + (f" and the cache {cache}" if cache else "")
    )
    head = (
        f"{'#':>3} {'model':<33} {'params':>7} {'tier':>4}  {'best option':<44} {'max ctx':>9} {'tok/s':>7} {'repl':>5}"
    )
    print(head)
    print("-" * len(head))
    for i, r in enumerate(rows[: top or None], 1):
        print(_row(i, r))
        s = r.suggestion
        if s is not None:
            if s.fits and s.best is not None:
                speed = s.best.speed.decode_estimate_tokens_per_s if s.best.speed is not None else None
                outcome = f"tier {s.best.tier}, {compact_label(s.best)}" + (f", {speed:,.1f} tok/s" if speed else "")
            else:
                outcome = f"still short, longest context {s.max_context:,}"
            print(_fit(f"{'':>8}try {s.text}: {outcome}", 120))
        elif r.best is None or r.best.tier > 1:
            print(
                _fit(f"{'':>8}no single change holds it on these cards; explorer plan {r.model} suggests clusters", 120)
            )
    if top and len(rows) > top:
        print(f"    … and {len(rows) - top} more (--top N)")
    print(
        "    (tier 1: every layer on accelerators; 2: llama.cpp RPC or layers in host memory; 3: CPU only. "
        "tok/s: one\n     sequence's decode estimate; repl: copies the cluster holds at once; *: a quantised "
        "precision, as explorer plan\n     widens to when the model's own weights keep no all-GPU layout)"
    )
