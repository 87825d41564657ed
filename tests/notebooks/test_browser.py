"""The app in a real browser: `marimo run notebooks/app.py`, driven with playwright and Debian's chromium.

- The answer stays in view while the context slider moves (1,440 × 900), and the 1,024 px page has no
  element wider than the viewport; with ``EXPLORER_SCREENSHOT=1`` both write the README's pictures
  (docs/screenshot-1440.png, docs/screenshot-1024.png), else into a temporary folder.
- The typed cluster spec and the simple controls stay one source of truth.
- The URL carries the whole state, and opening it restores the same answer.
- An unknown id offline gets the nearest snapshot ids as buttons; the Hub's new name of a snapshot model
  answers from the snapshot.
- Fetch reads a model from the test Hub (tests/support/hubserver.py); a refused token never shows.
- notebooks/placement.py: an impossible pin typed into its plan editor brings up the planner's message.

Skips, saying why, when chromium or playwright is missing. Timings here are printed, never asserted:
``python -m explorer.bench.app`` is the benchmark.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from support.hub_fixtures import GATED, SINGLE
from support.notebook_server import ROOT, chromium, in_viewport, marimo_app, too_wide
from support.readme_sample import SHOTS, readme_query
from support.visitors import TABLE, fetch_model, wait_text_change

from explorer.bench.browser import DEEP_QUERY, missing_browser

pytestmark = pytest.mark.browser

APP = ROOT / "notebooks" / "app.py"


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """One `marimo run` of the app, offline, for the tests that need nothing else (each opens its own tabs)."""
    if why := missing_browser():
        pytest.skip(why)
    with marimo_app(APP, env=_env(tmp_path_factory.mktemp("app"))) as url:
        yield url


def _shots_dir(tmp_path: Path) -> Path:
    return ROOT / "docs" if os.environ.get("EXPLORER_SCREENSHOT") == "1" else tmp_path


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"EXPLORER_CACHE": str(tmp_path / "cache.duckdb"), **more}


def _open(browser, url: str, width: int, height: int):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.locator(TABLE).wait_for(timeout=120_000)
    return page


def _control(page, tag: str, label: str, inner: str):
    """The visible ``inner`` element (``input``, ``select``, a slider) of the marimo element ``tag`` whose label
    contains ``label``. Labels sit in shadow roots; a sidebar's elements are in the page twice, once hidden
    where their cell's output would be."""
    part = page.get_by_role("slider") if inner == "slider" else page.locator(inner)
    return page.locator(tag, has_text=label).locator(part).locator("visible=true").first


def _table(page) -> str:
    return page.locator(TABLE).inner_text()


def _card_chart(page):
    """The per-card chart: inline SVG in the answer's output, under the table (explorer.ui.card_svg)."""
    return page.locator("svg#explorer-cards").first


def _first_option(page) -> str:
    """The option column of the table's first row."""
    return page.evaluate(
        """sel => { const t = document.querySelector(sel);
            const at = [...t.querySelectorAll('th')].findIndex(th => th.innerText.trim() === 'option');
            return t.querySelector('tbody tr').querySelectorAll('td')[at].innerText.trim(); }""",
        TABLE,
    )


def _shoot(page, tmp_path: Path, name: str) -> None:
    """The README's picture ``name`` (docs/ with EXPLORER_SCREENSHOT=1), and in docs/screenshots.json the state it
    shows and its first row, which tests/notebooks/test_notebooks.py holds to the planner's first row now."""
    folder = _shots_dir(tmp_path)
    page.screenshot(path=str(folder / name))
    record = folder / SHOTS.name
    shots = json.loads(record.read_text()) if record.exists() else {}
    shots[name] = {"query": readme_query(), "first option": _first_option(page)}
    record.write_text(json.dumps(shots, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


#: observers on every vega-lite chart (the sweep's: the per-card chart is inline SVG); the number watched
_WATCH_SWEEP_CHARTS = f"""() => {{
  window.__sweepChanges = 0;
  const charts = ({DEEP_QUERY})('.vega-embed');
  for (const c of charts) new MutationObserver((ms) => {{ window.__sweepChanges += ms.length; }})
    .observe(c, {{subtree: true, childList: true, attributes: true}});
  return charts.length;
}}"""


#: every lazily drawn output (the sweep charts, the tabs) scrolled into view, the last first
_SCROLL_TO_LAZY = """() => [...document.querySelectorAll('marimo-lazy')].reverse()
  .forEach((e) => e.closest('.output-area')?.scrollIntoView())"""


def test_answer_stays_in_view_while_sliding_at_1440(app_url, tmp_path):
    # opened at the README's `explorer plan` sample, so its picture shows the first row the sample prints
    url = app_url + readme_query()
    with chromium() as browser:
        page = _open(browser, url, 1440, 900)
        _card_chart(page).wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        _shoot(page, tmp_path, "screenshot-1440.png")
        context = _control(page, "marimo-slider", "Context", "slider")
        before, step = _table(page), int(context.get_attribute("aria-valuenow"))
        t0 = time.perf_counter()
        context.focus()
        context.press("ArrowRight")
        wait_text_change(page, before, polling=20)
        print(f"\nslider -> table: {(time.perf_counter() - t0) * 1000:.0f} ms (printed, not asserted)")
        page.wait_for_timeout(1500)  # the chart below redraws after the table
        # the control moved, the table and the per-card chart are on screen beside it, none scrolled away
        assert in_viewport(page, context)
        assert in_viewport(page, page.locator(TABLE))
        assert in_viewport(page, _card_chart(page))
        assert int(context.get_attribute("aria-valuenow")) == step + 1  # 32,768 -> 49,152 tokens
        assert "49,152" in page.inner_text("body")


def test_a_context_move_redraws_only_the_charts_whose_input_changed(app_url):
    """70B on one 8 × H100 node: 32,768 -> 49,152 tokens draws the same options against context (the same
    curves, kept by explorer.ui.sweep_cache), so the move sends and redraws the per-card chart (inline SVG in the
    answer's output, no vega-lite spec), not the sweep's."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        received: list[str] = []
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.append(f)))
        page.goto(app_url)
        page.locator(TABLE).wait_for(timeout=120_000)
        _card_chart(page).wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        # the sweep charts sit below the fold: an open sends and draws neither until it is scrolled into view
        assert page.evaluate(_WATCH_SWEEP_CHARTS) == 0
        page.evaluate(_SCROLL_TO_LAZY)
        page.locator(".vega-embed").nth(1).wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        assert page.evaluate(_WATCH_SWEEP_CHARTS) == 2  # memory and speed against context
        context = _control(page, "marimo-slider", "Context", "slider")
        before = _table(page)
        context.focus()
        received.clear()
        context.press("ArrowRight")
        wait_text_change(page, before, polling=20)
        page.wait_for_timeout(2500)  # the runs after the table's (the curves, the refusals) are over
        assert "49,152" in _table(page) or "49,152" in page.inner_text("body")
        assert page.evaluate("() => window.__sweepChanges") == 0
        assert not [f for f in received if "application/vnd.vegalite" in f]  # no chart spec at all
        assert len([f for f in received if "explorer-cards" in f]) == 1  # the per-card chart, in the answer's output


def test_nothing_wider_than_the_viewport_at_1024(app_url, tmp_path):
    """The default scenario and the widest tables (DeepSeek-V3 and Qwen3-235B on two nodes) fit 1,024 px, and
    the per-card chart of the first option is in view on open (1,024 × 768), directly under the table's box."""
    url = app_url
    with chromium() as browser:
        for query, shot in (
            (readme_query(), "screenshot-1024.png"),
            ("?model=deepseek-ai/DeepSeek-V3&cluster=2x8xh100-80g@ib0", None),
            ("?model=Qwen/Qwen3-235B-A22B&cluster=2x8xh100-80g@ib0&engine=vllm", None),
        ):
            page = _open(browser, url + query, 1024, 768)
            _card_chart(page).wait_for(timeout=60_000)
            page.wait_for_timeout(1500)
            assert too_wide(page) == [], query
            table = page.locator(TABLE).bounding_box()
            assert table["x"] + table["width"] <= 1024, "the table is clipped on the right"
            chart, box = _card_chart(page), page.locator(".explorer-table:has(> #explorer-options)").bounding_box()
            assert in_viewport(page, chart), (query, chart.bounding_box())
            assert box["y"] + box["height"] <= chart.bounding_box()["y"] < box["y"] + box["height"] + 200, query
            if shot:
                _shoot(page, tmp_path, shot)
            page.close()


def _spec_box(page):
    return _control(page, "marimo-text", "Cluster spec", "input")


def _wait_value(locator, value: str, timeout_s: float = 30) -> None:
    """Wait until an input holds ``value``."""
    deadline = time.monotonic() + timeout_s
    while locator.input_value() != value:
        assert time.monotonic() < deadline, f"the input holds {locator.input_value()!r}, not {value!r}"
        time.sleep(0.1)


def test_typed_spec_and_controls_are_one_source_of_truth(app_url):
    """Type a spec: the controls follow it; move a control: only that part of the typed spec changes;
    the description is the parsed cluster's; host RAM says assumed until it is given."""
    url = app_url
    with chromium() as browser:
        page = _open(browser, url, 1440, 1200)
        spec = _spec_box(page)
        spec.fill("1x4xl40s-48g")
        spec.press("Enter")
        nodes = _control(page, "marimo-number", "Nodes", "input")
        gpus = _control(page, "marimo-number", "GPUs a node", "input")
        page.get_by_text("1 node: 4 × l40s-48g").first.wait_for(timeout=30_000)
        _wait_value(gpus, "4")
        assert nodes.input_value() == "1"
        page.get_by_text("host RAM assumed").first.wait_for(timeout=30_000)

        nodes.fill("2")
        nodes.press("Enter")
        _wait_value(spec, "2x4xl40s-48g")
        assert spec.input_value() == "2x4xl40s-48g"  # never a preset's spec: the typed class and count stay
        page.get_by_text("2 nodes: 4 × l40s-48g").first.wait_for(timeout=30_000)

        ram = _control(page, "marimo-text", "Host RAM", "input")
        ram.fill("512")
        ram.press("Enter")
        _wait_value(spec, "2x4xl40s-48g,ram=512g")
        page.get_by_text("host RAM 512 GiB a node, as given").first.wait_for(timeout=30_000)


def test_the_url_carries_the_state_and_restores_it(app_url):
    url = app_url
    with chromium() as browser:
        page = _open(browser, url, 1440, 1000)
        before = _table(page)
        spec = _spec_box(page)
        spec.fill("1x4xl40s-48g")
        spec.press("Enter")
        wait_text_change(page, before, polling=20)
        _control(page, "marimo-dropdown", "Engine", "select").select_option(label="vLLM")
        _control(page, "marimo-dropdown", "KV cache", "select").select_option("fp8")
        context = _control(page, "marimo-slider", "Context", "slider")
        context.focus()
        context.press("ArrowLeft")
        page.wait_for_function(
            "() => ['engine=vllm', 'kv=fp8', 'cluster=', 'context='].every((k) => location.search.includes(k))",
            timeout=30_000,
        )
        page.wait_for_timeout(1500)
        query = parse_qs(urlparse(page.url).query)
        assert query["engine"] == ["vllm"] and query["kv"] == ["fp8"] and query["cluster"] == ["1x4xl40s-48g"]
        assert int(query["context"][0]) == 24576  # one step left of 32,768 on the log slider
        answer = _table(page)

        again = _open(browser, page.url, 1440, 1000)
        page.wait_for_timeout(500)
        assert _table(again) == answer
        assert _spec_box(again).input_value() == "1x4xl40s-48g"
        assert _control(again, "marimo-slider", "Context", "slider").get_attribute(
            "aria-valuenow"
        ) == context.get_attribute("aria-valuenow")


def test_unknown_id_offline_offers_the_nearest_snapshot_ids(app_url):
    url = app_url
    with chromium() as browser:
        page = _open(browser, url, 1440, 1000)
        box = _control(page, "marimo-text", "any model id", "input")
        box.fill("Qwen/Qwen3-14B")
        box.press("Enter")
        page.get_by_text("explorer does not know Qwen/Qwen3-14B offline").first.wait_for(timeout=60_000)
        # the callout sits in a shadow root: locators see into it (the body's inner text does not)
        assert page.get_by_text("Did you mean").count() == 1
        assert page.get_by_text("--offline").count() == 0 and page.get_by_text("Traceback").count() == 0
        page.get_by_role("button", name="Qwen/Qwen3-8B").click()
        page.wait_for_function("() => document.body.innerText.includes('Qwen/Qwen3-8B: ')", timeout=60_000)
        page.locator(TABLE).wait_for(timeout=30_000)
        # the Hub's new name of a snapshot model answers from the snapshot, saying so
        page2 = _open(browser, url + "?model=meta-llama/Llama-3.1-8B", 1440, 1000)
        assert "meta-llama/Meta-Llama-3.1-8B: " in page2.inner_text("body")


def test_a_suggestion_clicked_changes_the_controls(app_url):
    """Nothing fits 128k on one 4090 with vLLM at a bf16 KV cache (at fp8 the FP8 checkpoint holds one sequence):
    clicking the shorter-context suggestion moves the slider, the URL and the table to a context that fits."""
    url = app_url + "?model=meta-llama/Meta-Llama-3.1-8B&cluster=1x1xrtx4090-24g&engine=vllm&context=131072&kv=bf16"
    with chromium() as browser:
        page = _open(browser, url, 1440, 1000)
        assert page.get_by_text("Nothing fits").count() >= 1
        shorter = page.get_by_role("button", name="a context of").locator("visible=true").first
        shorter.wait_for(timeout=60_000)  # the suggestions are planned after the table
        asked = int(shorter.inner_text().split("a context of ")[1].split(" tokens")[0].replace(",", ""))
        before = _table(page)
        shorter.click()
        wait_text_change(page, before, polling=20)
        page.wait_for_function(f"() => location.search.includes('context={asked}')", timeout=30_000)
        assert f"{asked:,}" in page.inner_text("body")  # the slider shows the suggested context
        assert "✓" in _table(page)  # the change fits


def test_fetch_button_reads_the_hub_and_errors_are_callouts(tmp_path, hub_server):
    """Fetch reads a model from a (test) Hub; a refused token gives a callout that never shows the token."""
    env = _env(tmp_path, HF_HUB_OFFLINE="0", HF_ENDPOINT=hub_server.endpoint)
    with marimo_app(APP, env=env) as url, chromium() as browser:
        page = _open(browser, url, 1440, 1400)
        fetch_model(page, SINGLE)
        page.wait_for_function(
            "s => document.querySelector('#explorer-options') && document.body.innerText.includes(s)",
            arg=f"{SINGLE}: ",
            timeout=60_000,
        )
        wrong = "hf_wrongTOKENnotallowed0123456789"
        fetch_model(page, GATED, wrong)
        page.get_by_text(f"Could not fetch `{GATED}`").or_(page.get_by_text(f"Could not fetch {GATED}")).first.wait_for(
            timeout=60_000
        )
        body = page.inner_text("body")
        assert wrong not in body and "Traceback" not in body


def test_placement_notebook_draws_and_checks_an_edited_plan(tmp_path):
    """notebooks/placement.py: the chart and tables draw; an impossible pin typed into the plan editor
    brings up the planner's own message, and the planner's plan put back says it fits."""
    with marimo_app(ROOT / "notebooks" / "placement.py", env=_env(tmp_path)) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 3000})
        page.goto(url)
        page.locator("#placement-instances").wait_for(timeout=90_000)
        page.locator(".vega-embed").first.wait_for(timeout=30_000)
        page.get_by_text("The plan fits.").wait_for(timeout=30_000)
        assert "6 instances of 5 models" in page.inner_text("body")
        editor = page.locator("textarea").last  # the plan editor (the extra-terms box comes first)
        planned = editor.input_value()
        assert '"swap_groups": [["chat", "vision"]]' in planned
        editor.fill(planned.replace('"ocr": {"cards": [2]', '"ocr": {"cards": [0]'))
        editor.press("Tab")  # the text area sends its value on blur
        page.get_by_text(
            "ocr pinned to card 0 needs 17.9 GiB but card 0 has 4.4 GiB usable left after chat, vision (of 40.5 GiB)"
        ).wait_for(timeout=30_000)
        assert page.get_by_text("The plan does not fit").count() == 1
        assert page.get_by_text("Traceback").count() == 0
        editor.fill(planned)
        editor.press("Tab")
        page.get_by_text("The plan fits.").wait_for(timeout=30_000)
