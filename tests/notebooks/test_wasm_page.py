"""The published page (``marimo export html-wasm``, built by ``.ci/wasm/run``) in chromium with no network.

Every request off 127.0.0.1 is refused (a playwright route, DNS mapped to nothing, service workers
blocked): the page must carry Pyodide, marimo, explorer's wheel and the snapshot itself. The app plans in
the browser: the ranked table shows, a context slider move changes it, the URL carries the state and a
reload restores it, a pasted config.json is planned, and Fetch (no Hub client in a browser) is not offered.
Each lesson page opens too, computes its numbers and draws its charts. Prints the export's size, the time to
the first table and each lesson's time to its first render.

Marked ``wasm``: ``.ci/wasm/run`` exports the site and runs this with ``EXPLORER_WASM_SITE`` set; elsewhere it
skips, saying why. A cold page takes 20 s (an idle machine) to over a minute (a loaded one) to start Python.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest
from support.notebook_server import static_server

from explorer.bench.browser import launch_chromium, missing_browser
from explorer.sources.snapshot.read import load_snapshot

pytestmark = pytest.mark.wasm

TABLE = "#explorer-options"
START_S = 600  # Pyodide's start on a loaded 2-core machine


@pytest.fixture(scope="module")
def site() -> Path:
    if "EXPLORER_WASM_SITE" not in os.environ:
        pytest.skip("EXPLORER_WASM_SITE is not set: .ci/wasm/run exports the site and sets it")
    folder = Path(os.environ["EXPLORER_WASM_SITE"])
    if not (folder / "index.html").exists():
        pytest.skip(f"no WASM export at {folder} (.ci/wasm/run builds one)")
    if why := missing_browser():
        pytest.skip(why)
    return folder


@pytest.fixture(scope="module")
def offline_browser(site):
    """(a browser context that reaches only 127.0.0.1, the site's URL, the requests it refused)."""
    from playwright.sync_api import sync_playwright

    refused: list[str] = []
    with static_server(site) as url, sync_playwright() as p:
        browser = launch_chromium(p, extra_args=("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",))
        context = browser.new_context(viewport={"width": 1440, "height": 900}, service_workers="block")

        def local_only(route) -> None:
            if route.request.url.startswith((url, "data:", "blob:")):
                route.continue_()
            else:
                refused.append(route.request.url)
                route.abort()

        context.route("**/*", local_only)
        yield context, url, refused
        browser.close()


@pytest.fixture
def page(offline_browser):
    """A new tab, closed after the test: an open page keeps its Python running in a worker."""
    context, _url, _refused = offline_browser
    tab = context.new_page()
    yield tab
    tab.close()


def _slider(page):
    return page.locator("marimo-slider", has_text="Context").get_by_role("slider").locator("visible=true").first


def _changed(page, before: str) -> float:
    t0 = time.perf_counter()
    page.wait_for_function(
        "([sel, old]) => { const t = document.querySelector(sel); return t !== null && t.innerText !== old; }",
        arg=[TABLE, before],
        timeout=120_000,
        polling=20,
    )
    return time.perf_counter() - t0


def test_the_app_plans_in_the_browser_with_no_network(site, offline_browser, page):
    _context, url, refused = offline_browser
    t0 = time.perf_counter()
    page.goto(url)
    page.locator(TABLE).wait_for(timeout=START_S * 1000)
    first_table_s = time.perf_counter() - t0
    assert "meta-llama/Meta-Llama-3.1-70B: " in page.inner_text("body")
    # no Hub client in a browser: no Fetch, no model box; a config.json can be pasted instead
    assert page.get_by_role("button", name="Fetch").count() == 0
    assert page.get_by_placeholder("org/name, org/name:FILE.gguf or a path").count() == 0
    page.wait_for_timeout(3000)  # the charts below the table finish before the moves are timed

    slider = _slider(page)
    slider.focus()
    start = slider.get_attribute("aria-valuenow")
    times, before = [], page.locator(TABLE).inner_text()
    for key in ("ArrowRight", "ArrowLeft", "ArrowLeft", "ArrowRight"):
        slider.press(key)
        times.append(_changed(page, before))
        before = page.locator(TABLE).inner_text()
        page.wait_for_timeout(800)
    assert slider.get_attribute("aria-valuenow") == start
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    print(
        f"\nwasm page: {size / 1e6:,.1f} MB ({size:,} bytes); first table {first_table_s:.1f} s after opening; "
        f"slider -> table median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )
    assert refused == [], f"the page asked the network for {refused[:5]}"


#: the whole site's budget (issue 27): one Pyodide and one marimo frontend, shared by every page
SITE_BUDGET_BYTES = 60_000_000


def test_the_site_carries_no_stray_files(site):
    # marimo's export copies its whole _static folder, whose CLAUDE.md (rules for an AI assistant) is no page's;
    # .ci/wasm/export.sh drops it from every page's folder
    assert sorted(str(path.relative_to(site)) for path in site.rglob("CLAUDE.md")) == []


def test_the_pages_share_one_pyodide_and_one_frontend(site):
    # .ci/wasm/share_assets.py: a lesson's folder keeps its index.html alone, which loads the root's copies
    lessons = sorted(p.parent for p in site.glob("*/index.html"))
    assert lessons, "the site has lesson pages in folders"
    for folder in lessons:
        assert [p.name for p in folder.iterdir()] == ["index.html"], folder
        html = (folder / "index.html").read_text(encoding="utf-8")
        assert 'data-pyodide-index-url="../pyodide/"' in html and '"./assets/' not in html
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    print(f"\nwasm site: {size / 1e6:,.1f} MB ({size:,} bytes) for {len(lessons) + 1} pages")
    assert size <= SITE_BUDGET_BYTES, f"the site is {size:,} bytes, past its {SITE_BUDGET_BYTES:,}"


def test_a_link_restores_the_state_in_the_browser(site, offline_browser, page):
    _context, url, refused = offline_browser
    page.goto(url + "?context=8192&engine=vllm&cluster=1x4xl40s-48g")
    page.locator(TABLE).wait_for(timeout=START_S * 1000)
    assert "at 8,192 tokens × 1 sequence" in page.inner_text("body")
    table = page.locator(TABLE).inner_text()
    assert "vLLM" in table and "SGLang" not in table and "l40s-48g" in table
    slider = _slider(page)
    slider.focus()
    slider.press("ArrowRight")
    _changed(page, table)
    page.wait_for_function("() => location.search.includes('context=12288')", timeout=60_000)
    assert "cluster=1x4xl40s-48g" in page.url and "engine=vllm" in page.url
    assert refused == []


def test_a_pasted_config_is_planned(site, offline_browser, page):
    _context, url, refused = offline_browser
    page.goto(url)
    page.locator(TABLE).wait_for(timeout=START_S * 1000)
    config = json.dumps(load_snapshot().get("Qwen/Qwen3-8B").config)
    box = page.get_by_placeholder('{"model_type": "llama", "hidden_size": 4096, ...}').locator("visible=true").first
    box.fill(config)
    box.press("Tab")  # a text area sends its value on blur
    page.wait_for_function(
        "() => document.body.innerText.includes('pasted config.json: ')", timeout=120_000, polling=100
    )
    assert refused == []


def test_the_teaching_page_opens(site, offline_browser, page):
    _context, url, refused = offline_browser
    if not (site / "kv_cache.py" / "index.html").exists():
        pytest.skip("the site has no kv_cache.py page")
    page.goto(url + "kv_cache.py")  # the app's lesson link: the folder answers (a redirect to kv_cache.py/)
    page.wait_for_function(
        "() => ['Why long context eats memory', 'At 32,768 tokens'].every((t) => document.body.innerText.includes(t))",
        timeout=START_S * 1000,
        polling=500,
    )
    assert refused == []


#: each lesson's page: a line its Python writes (with the planner's numbers) once it has run
LESSON_TEXT = {
    "parallelism.py": ("Splitting a model across cards", "28 query heads / 4 cards = 7 a card"),
    "quantisation.py": ("What a precision costs and saves", "at 4.89 bits a weight"),
    "speed.py": ("Why decode is memory-bound", "221.2 tokens/s"),
}


@pytest.mark.parametrize("lesson", sorted(LESSON_TEXT))
def test_each_lesson_page_opens_and_draws(site, offline_browser, page, lesson):
    """The lesson's title and numbers show, and its charts (vega-lite dicts, no altair) draw, offline."""
    _context, url, refused = offline_browser
    if not (site / lesson / "index.html").exists():
        pytest.skip(f"the site has no {lesson} page")
    t0 = time.perf_counter()
    page.goto(url + lesson)  # the app's lesson link
    page.wait_for_function(
        "(texts) => texts.every((t) => document.body.innerText.includes(t))",
        arg=list(LESSON_TEXT[lesson]),
        timeout=START_S * 1000,
        polling=500,
    )
    page.locator(".vega-embed canvas, .vega-embed svg").first.wait_for(timeout=60_000)
    print(f"\nwasm lesson {lesson}: first render {time.perf_counter() - t0:.1f} s after opening")
    assert "Traceback" not in page.inner_text("body")
    assert refused == []
