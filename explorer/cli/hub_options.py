"""The Hub options shared by the commands that take a Hub id (``plan``, ``shape``, ``place``, ``check``,
``snapshot refresh``); ``--offline`` alone for ``fit``, which never asks the Hub."""

from __future__ import annotations

import argparse

from explorer.cli.args import seconds
from explorer.sources.hub.settings import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, HubSettings


def add_hub_options(p: argparse.ArgumentParser) -> None:
    """``--offline``, ``--token``, ``--revision``, ``--timeout`` for commands that take a Hub id."""
    g = p.add_argument_group("Hub")
    add_offline_option(g)
    g.add_argument(
        "--token",
        default=None,
        metavar="TOKEN",
        help="Hub token for gated or private repos (default: HF_TOKEN); never printed or stored",
    )
    g.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit (default: main)")
    g.add_argument(
        "--timeout",
        type=seconds(MAX_TIMEOUT_S),
        default=None,
        metavar="SECONDS",
        help=f"seconds the whole Hub read may take, retries included (default: {DEFAULT_TIMEOUT_S:g})",
    )


def add_offline_option(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    help: str = "never ask the Hub: answer from the cache or the shipped snapshot (also HF_HUB_OFFLINE=1)",
) -> None:
    """``--offline``: the commands that never go online take it too, and say so in ``help``."""
    p.add_argument("--offline", action="store_true", help=help)


def hub_kwargs(args: argparse.Namespace) -> dict:
    """The resolver's keyword arguments from the Hub options (the token stays out of everything printed)."""
    settings = HubSettings.resolve(token=args.token, timeout_s=args.timeout, offline=True if args.offline else None)
    return {"settings": settings, "revision": args.revision}
