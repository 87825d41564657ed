"""The ``explorer`` command line: parse arguments, call the library, print.

Each subcommand lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``handler``. Library errors
(:class:`explorer.errors.ExplorerError`) become a one-line message on stderr
and exit status 2; nothing here computes a figure.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from explorer import __version__
from explorer.errors import ExplorerError

#: subcommand modules, in the order ``explorer --help`` lists them
SUBCOMMANDS = ("shape", "plan", "place", "cache", "snapshot", "bench")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="explorer",
        description="Will it fit? Plan where and how a large language model can be served.",
    )
    parser.add_argument("--version", action="version", version=f"explorer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"explorer.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 1
    try:
        return int(args.handler(args) or 0)
    except ExplorerError as err:
        print(f"explorer {args.command}: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head, less...
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"explorer {args.command}: interrupted", file=sys.stderr)
        return 130
