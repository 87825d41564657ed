"""``explorer bench``: time plan() on 8-, 64- and 1,000-GPU clusters (a benchmark, not a test)."""

from __future__ import annotations

import argparse

from explorer.cli.args import int_range


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``bench`` subcommand's arguments."""
    p.add_argument("--model", default="meta-llama/Meta-Llama-3.1-70B", help="a model in the shipped snapshot")
    p.add_argument("--runs", type=int_range(1, 100_000, "--runs"), default=30, help="timed runs per cluster")


def run(args: argparse.Namespace) -> int:
    """Run :func:`explorer.bench.plan.main`."""
    from explorer.bench.plan import main

    return main(["--model", args.model, "--runs", str(args.runs)])
