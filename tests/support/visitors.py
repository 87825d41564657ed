"""A visitor of the served app in chromium: open a page at a link, and move the context slider and wait for the
table to change (the security tests' two-visitor cases share these)."""

from __future__ import annotations

import time

__all__ = ["TABLE", "move_slider_and_wait", "open_page"]

#: the ranked table's element
TABLE = "#explorer-options"


def open_page(browser, url: str, *, wait_table: bool = True):
    """A new page at ``url`` (1,440 × 1,200), once its table is drawn unless ``wait_table`` is false."""
    page = browser.new_page(viewport={"width": 1440, "height": 1200})
    page.goto(url)
    if wait_table:
        page.locator(TABLE).wait_for(timeout=120_000)
    return page


def move_slider_and_wait(page) -> float:
    """Move the first visible slider one step and wait until the table's text changes; the seconds it took."""
    before = page.locator(TABLE).inner_text()
    t0 = time.monotonic()
    slider = page.get_by_role("slider").locator("visible=true").first
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_function(
        "([sel, old]) => { const t = document.querySelector(sel); return t && t.innerText !== old; }",
        arg=[TABLE, before],
        timeout=60_000,
    )
    return time.monotonic() - t0
