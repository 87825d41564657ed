"""`marimo export html` gives a static page that renders with no network, once its assets are served locally.

The exported page loads marimo's frontend from a CDN, so offline it is blank.
This test exports notebooks/app.py, serves the frontend bundled inside the
installed marimo package (``marimo/_static``) from 127.0.0.1, rewrites the
page's asset prefix to that server, and checks in chromium (every request
off 127.0.0.1 refused) that the title, a table cell and a chart render.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.notebook_server import (
    CDN_PREFIX,
    ROOT,
    chromium,
    copy_assets,
    localise_export,
    marimo_static_dir,
    static_server,
)

pytestmark = pytest.mark.browser


def _local_only(route) -> None:
    """Let 127.0.0.1 through; refuse everything else, as on a machine with no network."""
    if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
        route.continue_()
    else:
        route.abort()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, str]:
    """(the exported page, the best option's label it must show)."""
    out = tmp_path_factory.mktemp("export")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "EXPLORER_CACHE": str(out / "cache.duckdb")}
    page = out / "explorer.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "marimo",
            "-q",
            "export",
            "html",
            "notebooks/app.py",
            "-o",
            str(page),
            "--no-include-code",
            "-f",
        ],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    from explorer.engines.common import PlanRequest
    from explorer.plan.planner import plan
    from explorer.sources.shipped import parse_cluster
    from explorer.sources.snapshot.read import load_snapshot
    from explorer.ui import plan_rows as nd
    from explorer.ui.presets import AppDefaults

    d = AppDefaults()
    shape = load_snapshot().shape(d.model)
    best = plan(
        shape,
        parse_cluster("1x8xh100-80g"),
        PlanRequest(context_tokens=d.context_tokens, engines=nd.ENGINE_CHOICES[d.engine]),
        model_ref=d.model,
    ).options[0]
    return page, best.label


def test_export_points_at_the_cdn(exported):
    page, _label = exported
    text = page.read_text()
    assert CDN_PREFIX.search(text), "the export no longer loads from the CDN: update localise_export"
    assert "import marimo" not in text  # --no-include-code: the page carries outputs, not code


def test_export_renders_offline_from_local_assets(exported, tmp_path):
    page, label = exported
    with static_server(marimo_static_dir()) as assets, static_server(tmp_path) as site:
        (tmp_path / "index.html").write_text(localise_export(page.read_text(), assets))
        with chromium() as browser:
            tab = browser.new_page(viewport={"width": 1400, "height": 2400})
            tab.route("**/*", _local_only)
            tab.goto(site + "index.html")
            tab.get_by_role("heading", name="Will it fit?").wait_for(timeout=60_000)
            table = tab.locator("#explorer-options")
            table.wait_for(timeout=30_000)
            assert label in table.inner_text()
            assert "GiB" in tab.inner_text("body")
            tab.locator(".vega-embed").first.wait_for(timeout=30_000)  # the altair charts drew
            tab.screenshot(path=str(tmp_path / "export.png"))


def test_export_with_its_assets_beside_it(exported, tmp_path):
    """The GitHub Pages recipe of docs/publishing.md: marimo's assets copied into the site, the prefix made relative."""
    page, label = exported
    site = tmp_path / "site"
    copy_assets(site / "marimo")
    (site / "index.html").write_text(localise_export(page.read_text(), "marimo/"))
    with static_server(site) as url, chromium() as browser:
        tab = browser.new_page(viewport={"width": 1400, "height": 2400})
        tab.route("**/*", _local_only)
        tab.goto(url)
        tab.get_by_role("heading", name="Will it fit?").wait_for(timeout=60_000)
        assert label in tab.locator("#explorer-options").inner_text()


def test_export_is_blank_without_local_assets(exported, tmp_path):
    """The control: the same page, not rewritten, shows nothing when the CDN cannot be reached."""
    page, _label = exported
    with static_server(page.parent) as site, chromium() as browser:
        tab = browser.new_page()
        tab.route("**/*", _local_only)
        tab.goto(site + page.name)
        tab.wait_for_timeout(3000)
        assert tab.get_by_role("heading", name="Will it fit?").count() == 0
