"""The operator's chosen models in the published app (issue 25): ``EXPLORER_PUBLISHED_MODELS`` names models
the hardware-first list ("What runs on this cluster?") shows visitors beside the snapshot's, read from the
server's cache; what a visitor fetched into the same cache is not listed. ``marimo run``, offline, driven by
headless chromium. Marked ``browser``.
"""

from __future__ import annotations

import pytest
from support.hub_fixtures import SHARDED, SINGLE
from support.notebook_server import ROOT, chromium, marimo_app

from explorer.bench.browser import missing_browser
from explorer.sources.cache.store import Cache
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolve import resolve_model

pytestmark = pytest.mark.browser

APP = ROOT / "notebooks" / "app.py"


@pytest.fixture(scope="module")
def served(tmp_path_factory, hub_server):
    """A published server whose cache holds SHARDED (fetched by the operator, who chose it) and SINGLE (a
    visitor's fetch); the operator names SHARDED only."""
    if why := missing_browser():
        pytest.skip(why)
    cache_path = tmp_path_factory.mktemp("chosen") / "cache.duckdb"
    settings = HubSettings.resolve(endpoint=hub_server.endpoint, token=None, implicit_token=False)
    with Cache.open(cache_path, endpoint=settings.endpoint) as cache:
        for repo in (SHARDED, SINGLE):
            resolve_model(repo, settings=settings, cache=cache, progress=lambda *a: None)
    env = {
        "EXPLORER_CACHE": str(cache_path),
        "HF_ENDPOINT": hub_server.endpoint,
        "HF_HUB_OFFLINE": "1",
        "EXPLORER_PUBLISHED_MODELS": f"{SHARDED}, org/never-fetched",
    }
    with marimo_app(APP, env=env, timeout_s=120) as url:
        yield url


def test_visitors_list_the_operators_chosen_model_and_not_another_visitors_fetch(served):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1200})
        page.goto(served)
        page.locator("#explorer-options").wait_for(timeout=120_000)
        page.get_by_role("button", name="What runs on this cluster?").click()
        page.locator("#explorer-fit").wait_for(timeout=180_000)
        listed = page.locator("#explorer-fit").inner_text()
        assert SHARDED in listed and SINGLE not in listed
        assert "Traceback" not in page.inner_text("body")
