"""The app's size mode in a real browser: `marimo run notebooks/app.py`, driven with playwright and chromium.

Off by default (no clusters' table, nothing sized); a click on its switch opens it (its controls, the clusters'
table, the frontier chart); moving the users slider one step changes the table's rows, and the URL carries the
mode and the workload. Skips, saying why, when chromium or playwright is missing.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from support.notebook_server import ROOT, chromium, marimo_app
from support.visitors import TABLE, wait_text_change

from explorer.bench.browser import DEEP_QUERY

pytestmark = pytest.mark.browser

SIZES = "#explorer-sizes"


def test_the_size_mode_opens_and_follows_the_workload_sliders(tmp_path):
    env = {"EXPLORER_CACHE": str(tmp_path / "cache.duckdb")}
    with marimo_app(ROOT / "notebooks" / "app.py", env=env) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1200})
        page.goto(url)
        page.locator(TABLE).wait_for(timeout=120_000)
        page.wait_for_timeout(3000)  # the charts below the table are drawn
        assert page.locator(SIZES).count() == 0  # off: nothing sized
        charts = page.locator(".vega-embed").count()
        switch = page.locator("marimo-switch", has_text="Size a cluster for a workload").locator("button[role=switch]")
        switch.first.click()
        page.locator(SIZES).wait_for(timeout=90_000)
        page.wait_for_function(f"() => ({DEEP_QUERY})('.vega-embed').length > {charts}", timeout=60_000)  # the frontier
        before = page.locator(SIZES).inner_text()
        assert "h100-80g (yours)" in before  # the user's 8 × H100 is one candidate
        users = page.locator("marimo-slider", has_text="users with a request in flight").get_by_role("slider").first
        assert users.get_attribute("aria-valuenow") is not None
        users.focus()
        users.press("ArrowRight")  # 200 -> 500 users
        wait_text_change(page, before, SIZES, timeout_ms=90_000, polling=50)
        assert page.locator(SIZES).inner_text() != before
        page.wait_for_function("() => location.search.includes('users=500')", timeout=30_000)
        query = parse_qs(urlparse(page.url).query)
        assert query.get("size") == ["on"] and query.get("users") == ["500"]
