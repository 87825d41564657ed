"""``explorer shape MODEL``: what a model is made of and what a token of context costs."""

from __future__ import annotations

import argparse
import json

from explorer.cli.args import context_tokens
from explorer.cli.hub_options import add_hub_options, hub_kwargs
from explorer.model.dtypes import KV_CACHE_TYPES
from explorer.sources.hub.early import start_cold_read
from explorer.units import gib


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``shape`` subcommand's arguments."""
    p.add_argument("model", metavar="MODEL", help="config.json, a model folder, a .gguf file, or a Hub id org/name")
    p.add_argument(
        "--kv-dtype", default="auto", choices=KV_CACHE_TYPES, help="KV cache type (default: the model's dtype)"
    )
    p.add_argument(
        "--context",
        type=context_tokens,
        default=None,
        help="context length for the KV figure (default: the model's limit)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_hub_options(p)


def run(args: argparse.Namespace) -> int:
    """Print the shape as a table or as JSON."""
    hub = hub_kwargs(args)
    start_cold_read(args.model, **hub)  # a cold Hub read starts here, and answers while the rest loads
    # imported once the read started: the model code loads while the Hub answers
    from explorer.model.summary import shape_rows, shape_summary
    from explorer.sources.resolve import load_model

    resolved = load_model(args.model, **hub)
    shape = resolved.shape
    summary = shape_summary(shape, kv_dtype=args.kv_dtype, context_tokens=args.context)
    source = resolved.summary()
    if args.json:
        print(
            json.dumps(
                {
                    **summary,
                    "source": {k: v for k, v in source.items() if k != "artifacts"},
                    "artifacts": source["artifacts"],
                },
                indent=2,
            )
        )
        return 0
    rows = shape_rows(summary)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    where = resolved.repo + (f"@{resolved.sha[:12]}" if resolved.sha else "") if resolved.repo else args.model
    print(f"{'from':<{width}}  {resolved.origin}: {where}")
    for a in resolved.artifacts:
        print(f"{'offers':<{width}}  {a.label}: {gib(a.size_bytes, 2)} ({a.size_bytes:,} bytes, {a.size_source})")
    for note in summary["notes"] + list(resolved.notes):
        print(f"note: {note}")
    return 0
