"""Which model the app plans: the snapshot first, the cache or the Hub only when asked, a pasted config.json.

:func:`pick_model` answers what the model box says without the network
unless Fetch was pressed: the shipped snapshot (following Hub renames), then,
outside the browser, the cache (offline). A miss raises
:class:`UnknownModelError`, whose :attr:`~UnknownModelError.suggestions` are
the nearest snapshot ids; :func:`unknown_model_advice` phrases it for the app
(its buttons and boxes, not the CLI's flags). :func:`in_browser` tells the
page running on Pyodide (a WASM export), where there is no Hub client, cache
or local disk: the snapshot and a pasted config.json answer there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from explorer.errors import OfflineMissError
from explorer.safe_text import safe_html
from explorer.sources.resolved import ResolvedModel
from explorer.ui.published import OWNER, Audience

__all__ = ["UnknownModelError", "in_browser", "pick_model", "unknown_model_advice"]


def in_browser() -> bool:
    """Whether Python runs inside a browser page (Pyodide: marimo's html-wasm export)."""
    return sys.platform == "emscripten"


class UnknownModelError(OfflineMissError):
    """Neither the snapshot nor (outside the browser) the cache knows the model, and Fetch was not pressed.

    Attributes:
        text: what the model box said.
        suggestions: the nearest snapshot ids, best first.
    """

    def __init__(self, text: str, suggestions: list[str]) -> None:
        self.text = text
        self.suggestions = suggestions
        super().__init__(f"the shipped snapshot does not know {text}", hint="")


def _snapshot_answer(text: str, spec_options: dict[str, Any]) -> ResolvedModel | None:
    from explorer.errors import ConfigError
    from explorer.sources.from_hub import from_snapshot
    from explorer.sources.spec import parse_model_spec

    try:
        spec = parse_model_spec(text, **spec_options)
    except ConfigError:
        return None
    if spec.kind != "hub" or spec.revision:
        return None
    return from_snapshot(spec, None, "answered from the shipped snapshot")


def pick_model(
    text: str,
    *,
    fetch: bool = False,
    token: str | None = None,
    progress: Callable[[str, int, int], Any] | None = None,
    audience: Audience = OWNER,
) -> ResolvedModel:
    """The model ``text`` names: the snapshot, else (not in a browser) the cache, or the Hub when ``fetch``;
    for a published app's visitor (``audience``), only what :meth:`Audience.hub_access` allows.

    Raises:
        UnknownModelError: no one answered without the network (the nearest snapshot ids attached).
        ExplorerError: a local file that does not read (or, for a visitor, any path), a Hub failure.
    """
    text = text.strip()
    if not fetch and (got := _snapshot_answer(text, audience.spec_options())) is not None:
        return got
    if in_browser():
        raise UnknownModelError(text, _nearest(text))
    from explorer.sources.resolve import resolve_model

    try:
        with audience.hub_access(token) as access:
            return resolve_model(text, offline=not fetch, progress=progress, **access)
    except OfflineMissError:
        if fetch:
            raise
        raise UnknownModelError(text, _nearest(text)) from None


def _nearest(text: str) -> list[str]:
    from explorer.sources.snapshot.names import nearest_ids
    from explorer.sources.snapshot.read import try_load_snapshot

    snapshot, _ = try_load_snapshot()
    return nearest_ids(text, snapshot.repos) if snapshot is not None else []


def unknown_model_advice(error: UnknownModelError, *, can_fetch: bool) -> str:
    """What the app says about a model it does not know (markdown; the ids HTML-escaped in ``<code>``, since
    what a visitor typed or a link carried may hold markup or backticks that would end a code span)."""
    lines = [f"**explorer does not know <code>{safe_html(error.text)}</code> offline.**"]
    if error.suggestions:
        ids = ", ".join(f"<code>{safe_html(s)}</code>" for s in error.suggestions)
        lines.append(f"Did you mean {ids}? Pick one below.")
    if can_fetch:
        lines.append("Press **Fetch** to read it from the Hugging Face Hub (a token for gated models goes beside it).")
    else:
        lines.append(
            "This page runs in your browser and plans the models of the shipped snapshot; "
            "**paste the model's config.json** below to plan any other."
        )
    return "\n\n".join(lines)
