"""``explorer bench``: time plan() on 8-, 64- and 1,000-GPU clusters (a benchmark, not a test)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` subcommand."""
    p = sub.add_parser("bench", help="time plan() on 8-, 64- and 1,000-GPU clusters")
    p.add_argument("--model", default="meta-llama/Meta-Llama-3.1-70B", help="a model in the shipped snapshot")
    p.add_argument("--runs", type=int, default=30, help="timed runs per cluster")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run :func:`explorer.bench.plan.main`."""
    from explorer.bench.plan import main

    return main(["--model", args.model, "--runs", str(args.runs)])
