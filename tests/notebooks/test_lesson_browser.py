"""The lessons in a real browser: `marimo run notebooks/<lesson>.py`, driven with playwright and Debian's chromium.

Each test waits for the lesson's first figure, moves its main slider with the keyboard, and checks that
the words and the figure change with it (the figure compared as pixels before and after).
``EXPLORER_SCREENSHOT=1`` writes the README's pictures (docs/lesson-*.png); otherwise they go to a
temporary folder. Skips, saying why, when chromium or playwright is missing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.notebook_server import ROOT, chromium, marimo_app

pytestmark = pytest.mark.browser

FIGURE = ".vega-embed"


@contextlib.contextmanager
def _lesson(tmp_path: Path, filename: str) -> Iterator[tuple[object, str]]:
    """``marimo run notebooks/<filename>`` and a chromium: yields (browser, url)."""
    env = {"EXPLORER_CACHE": str(tmp_path / "cache.duckdb")}
    with marimo_app(ROOT / "notebooks" / filename, env=env) as url, chromium() as browser:
        yield browser, url


def _shots_dir(tmp_path: Path) -> Path:
    return ROOT / "docs" if os.environ.get("EXPLORER_SCREENSHOT") == "1" else tmp_path


def _open(browser, url: str, first_words: str):
    page = browser.new_page(viewport={"width": 1200, "height": 2400})
    page.goto(url)
    page.get_by_text(first_words).first.wait_for(timeout=90_000)
    page.locator(FIGURE).first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)  # let the charts finish drawing
    return page


def _shot(page, path: Path, top: str, bottom_figure: int, pad: int = 16) -> None:
    """A picture from the ``top`` heading to the bottom of the n-th figure, the page's full width."""
    a = page.locator(top).first.bounding_box()
    b = page.locator(FIGURE).nth(bottom_figure).bounding_box()
    y = max(0, a["y"] - pad)
    page.screenshot(path=str(path), clip={"x": 0, "y": y, "width": 1200, "height": b["y"] + b["height"] + pad - y})


def _move(page, key: str, then_words: str) -> None:
    slider = page.get_by_role("slider").first  # each lesson's main slider comes first
    slider.focus()
    slider.press(key)
    page.get_by_text(then_words).first.wait_for(timeout=30_000)
    page.wait_for_timeout(1500)


def test_parallelism_cards_slider_redraws_each_card(tmp_path):
    with _lesson(tmp_path, "parallelism.py") as (browser, url):
        page = _open(browser, url, "Tensor parallelism: tp = 4")
        _shot(page, _shots_dir(tmp_path) / "lesson-parallelism.png", "h1", 0)
        figure = page.locator(FIGURE).nth(1)  # the pipeline's cards (the tensor split's comes first)
        before = figure.screenshot()
        assert "28 query heads / 4 cards = 7 a card" in page.inner_text("body")
        _move(page, "ArrowRight", "Tensor parallelism: tp = 5")
        assert page.locator(FIGURE).nth(0).screenshot() != before  # five pipeline stages now
        # 28 heads over 5 cards: the planner's refusal takes the tensor split's place
        page.get_by_text("Total attention heads (28) must be divisible by tensor parallel size (5)").wait_for()
        for _ in range(3):
            page.get_by_role("slider").first.press("ArrowRight")
        page.get_by_text("Total attention heads (28) must be divisible by tensor parallel size (8)").wait_for(
            timeout=30_000
        )
        assert page.get_by_text("Traceback").count() == 0


def test_quantisation_precision_slider_moves_the_figures(tmp_path):
    with _lesson(tmp_path, "quantisation.py") as (browser, url):
        page = _open(browser, url, "meta-llama/Meta-Llama-3.1-8B at Q4_K_M")
        _shot(page, _shots_dir(tmp_path) / "lesson-quantisation.png", "h1", 0)
        ladder, mix = page.locator(FIGURE).nth(0).screenshot(), page.locator(FIGURE).nth(1).screenshot()
        assert "4,908,867,070 bytes" in page.inner_text("body")
        _move(page, "ArrowLeft", "meta-llama/Meta-Llama-3.1-8B at Q5_K_M")
        assert page.locator(FIGURE).nth(0).screenshot() != ladder  # the highlighted bar moved up a step
        assert page.locator(FIGURE).nth(1).screenshot() != mix  # Q5_K_M's mix: Q5_K and Q6_K
        assert "5,711,866,544 bytes" in page.inner_text("body")
        assert page.get_by_text("Traceback").count() == 0


def test_speed_batch_slider_moves_the_step_on_the_roofline(tmp_path):
    with _lesson(tmp_path, "speed.py") as (browser, url):
        page = _open(browser, url, "1 sequence(s) at 1,024 tokens")
        _shot(page, _shots_dir(tmp_path) / "lesson-speed.png", "h1", 0)
        roofline = page.locator(FIGURE).nth(0).screenshot()
        assert "221.2 tokens/s" in page.inner_text("body")
        _move(page, "ArrowRight", "2 sequence(s) at 1,024 tokens")
        assert page.locator(FIGURE).nth(0).screenshot() != roofline  # the red step moved up the roof
        assert "221.2 tokens/s" not in page.inner_text("body")
        assert page.get_by_text("Traceback").count() == 0
