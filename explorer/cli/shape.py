"""``explorer shape MODEL``: what a model is made of and what a token of context costs."""

from __future__ import annotations

import argparse
import json

from explorer.dtypes import KV_CACHE_TYPES
from explorer.sources import load_shape
from explorer.summary import shape_rows, shape_summary


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``shape`` subcommand."""
    p = sub.add_parser("shape", help="show a model's shape, parameters and KV cache per token",
                       description="Show a model's shape: parameters, layers, attention, experts, context limit, "
                                   "weight bytes and KV cache bytes per token.")
    p.add_argument("model", metavar="MODEL", help="config.json, a model folder, a .gguf file, or a Hub id org/name")
    p.add_argument("--kv-dtype", default="auto", choices=KV_CACHE_TYPES, help="KV cache type (default: the model's dtype)")
    p.add_argument("--context", type=int, default=None, help="context length for the KV figure (default: the model's limit)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the shape as a table or as JSON."""
    shape = load_shape(args.model)
    summary = shape_summary(shape, kv_dtype=args.kv_dtype, context_tokens=args.context)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    rows = shape_rows(summary)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    for note in summary["notes"]:
        print(f"note: {note}")
    return 0
