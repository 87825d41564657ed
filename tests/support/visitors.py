"""A visitor of the served app in chromium: open a page at a link, move the context slider and wait for the table
to change, and fetch a model from the Hub with the visitor's own token (the browser and security tests share these)."""

from __future__ import annotations

import time

__all__ = ["TABLE", "fetch_model", "move_slider_and_wait", "open_page", "wait_text_change"]

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
    wait_text_change(page, before)
    return time.monotonic() - t0


def wait_text_change(
    page, before: str, selector: str = TABLE, *, timeout_ms: int = 60_000, polling: int | str = "raf"
) -> None:
    """Wait until the text of ``selector`` (the table) is drawn and differs from ``before``; ``polling`` as
    playwright takes it (milliseconds, or ``"raf"``: each animation frame)."""
    page.wait_for_function(
        "([sel, old]) => { const t = document.querySelector(sel); return t !== null && t.innerText !== old; }",
        arg=[selector, before],
        timeout=timeout_ms,
        polling=polling,
    )


def fetch_model(page, text: str, token: str = "") -> None:
    """Type ``text`` in the "any model id" box and ``token`` in the Hub token box (empty: none), then press Fetch."""
    box = page.locator("marimo-text", has_text="any model id").locator("input").locator("visible=true").first
    box.fill(text)
    box.press("Enter")
    secret = page.get_by_placeholder("hf_… (gated repos only)").locator("visible=true")
    secret.fill(token)
    secret.press("Enter")
    page.get_by_role("button", name="Fetch").click()
