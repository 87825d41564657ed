"""Helpers for the browser tests: the app served by ``marimo run``, chromium through playwright, page checks.

The servers and the browser launch are :mod:`explorer.bench.browser`'s (the app
benchmark uses the same); this module adds what only tests need:

- :func:`marimo_app`: ``marimo run`` a notebook of this checkout, offline, with a fresh cache.
- :func:`chromium`: a headless chromium, or ``pytest.skip`` naming what is missing (never a silent pass).
- :func:`local_only`: a playwright route that refuses every request off 127.0.0.1, as with no network.
- :func:`too_wide`: the elements wider than the viewport (shadow roots included).
- :func:`in_viewport`: whether an element is wholly on screen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from explorer.bench.browser import DEEP_QUERY, launch_chromium, marimo_server, missing_browser, static_server
from support.corpus import ROOT

__all__ = ["ROOT", "chromium", "in_viewport", "local_only", "marimo_app", "static_server", "too_wide"]


@contextlib.contextmanager
def marimo_app(notebook: Path, *, env: dict | None = None, timeout_s: float = 60) -> Iterator[str]:
    """``marimo run`` the notebook headless without token auth; yields its URL."""
    with marimo_server(notebook, cwd=ROOT, env=env, timeout_s=timeout_s) as url:
        yield url


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless chromium browser (playwright), or ``pytest.skip`` naming what is missing."""
    if why := missing_browser():
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            yield browser
        finally:
            browser.close()


def local_only(route) -> None:
    """Let 127.0.0.1 through; refuse everything else, as on a machine with no network."""
    if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
        route.continue_()
    else:
        route.abort()


_TOO_WIDE = f"""() => {{
  const limit = window.innerWidth + 1;
  return ({DEEP_QUERY})('*').filter((e) => {{
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && (r.width > limit || r.right > limit);
  }}).map((e) => `${{e.tagName.toLowerCase()}}#${{e.id}}.${{String(e.className).slice(0, 60)}}: ` +
    `${{Math.round(e.getBoundingClientRect().width)}} px wide, right edge ${{Math.round(e.getBoundingClientRect().right)}}`);
}}"""


def too_wide(page) -> list[str]:
    """Every element (shadow roots included) wider than the viewport or reaching past its right edge."""
    return page.evaluate(_TOO_WIDE)


def in_viewport(page, locator) -> bool:
    """Whether the element is wholly inside the viewport as the page is scrolled now."""
    box = locator.bounding_box()
    size = page.viewport_size
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= size["width"] + 1
        and box["y"] + box["height"] <= size["height"] + 1
    )
