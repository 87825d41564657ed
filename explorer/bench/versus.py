"""Two checkouts' app side by side: is a change faster? A paired A/B for a noisy shared machine.

    python -m explorer.bench.versus ROOT_A ROOT_B [--moves 30] [--opens 6] [--query '?model=…']

Both checkouts' ``notebooks/app.py`` are served (``marimo run``, each with a cache of its own) and opened in one
chromium. Context-slider moves then alternate between the two pages in the order A, B, B, A (:func:`abba`), so a
change in the machine's load falls on both alike; so do the opens. A move is timed as
:mod:`explorer.bench.app` times it (key press to a changed table); an open from navigation to the ranked table
entering the DOM (a ``MutationObserver``, so no polling interval is added to either side). The report gives
each side's median and the ratio B / A: below 1, B is faster. Run the same checkout as A and B to see the noise
(a run of 30 moves a side gave 1.01 on a quiet 2-core machine). A benchmark, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from explorer.bench.app import TABLE, VIEWPORT, Timings, _control, _timed, context_keys
from explorer.bench.browser import launch_chromium, marimo_server, missing_browser

#: installed before the page's scripts: the time the ranked table enters the DOM (ms on the page's clock)
TABLE_MARK = (
    "new MutationObserver((_, o) => { if (document.querySelector('" + TABLE + "')) "
    "{ window.__tableAt = performance.now(); o.disconnect(); } })"
    ".observe(document, {subtree: true, childList: true});"
)


def abba(n: int) -> list[str]:
    """The sides of ``n`` paired trials each: A, B, B, A, A, B, B, A, … (``2 n`` entries)."""
    return [("A", "B", "B", "A")[i % 4] for i in range(2 * n)]


def ratio_report(what: str, unit: str, samples: dict[str, list[float]]) -> str:
    """Each side's median (and how many samples) and the ratio of the medians, B / A, in one line."""
    a, b = (statistics.median(samples[s]) for s in ("A", "B"))
    return (
        f"{what}: A {a:,.1f} {unit}, B {b:,.1f} {unit} (medians of {len(samples['A'])} and {len(samples['B'])}); "
        f"B / A = {b / a:.3f}"
    )


def _move(page, key: str, into: Timings, timeout_s: float) -> None:
    """One context move on ``page``, timed into ``into`` as :mod:`explorer.bench.app` times it."""
    slider = _control(page, "marimo-slider", "Context", "slider")
    page.bring_to_front()
    slider.focus()
    page.wait_for_timeout(400)  # the focus's own work is not the move's
    _timed(page, lambda: slider.press(key), into, timeout_s)


def _open_ms(browser, url: str, timeout_s: float) -> float:
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(TABLE_MARK)
    page.goto(url)
    page.wait_for_function("() => window.__tableAt !== undefined", timeout=timeout_s * 1000, polling=100)
    at = page.evaluate("() => window.__tableAt")
    page.wait_for_timeout(1000)  # the open's last outputs, before the next page opens
    page.close()
    return at


def run(browser, urls: dict[str, str], moves: int, opens: int, timeout_s: float) -> dict[str, dict[str, list]]:
    """``{"moves": {"A": [ms…], "B": […]}, "opens": {…}}``: each side's move and open times, paired A, B, B, A."""
    timings = {"A": Timings(), "B": Timings()}
    opens_ms: dict[str, list[float]] = {"A": [], "B": []}
    pages = {}
    for side, url in urls.items():
        pages[side] = browser.new_page(viewport=VIEWPORT)
        pages[side].goto(url)
        pages[side].locator(TABLE).wait_for(timeout=timeout_s * 1000)
    for page in pages.values():
        page.wait_for_timeout(3000)  # the charts below the table finish before the first move
    keys = context_keys(moves)
    for i, side in enumerate(abba(moves)):
        _move(pages[side], keys[i // 2], timings[side], timeout_s)
    for page in pages.values():
        page.close()
    for side in abba(opens):
        opens_ms[side].append(_open_ms(browser, urls[side], timeout_s))
    return {"moves": {side: t.table_ms for side, t in timings.items()}, "opens": opens_ms}


def main(argv: list[str] | None = None) -> int:
    """Serve both checkouts, time them paired, print the report."""
    ap = argparse.ArgumentParser(prog="python -m explorer.bench.versus", description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path, help="checkout A (the reference: main)")
    ap.add_argument("b", type=Path, help="checkout B (the change)")
    ap.add_argument("--moves", type=int, default=30, help="context moves a side")
    ap.add_argument("--opens", type=int, default=6, help="opens a side (after the moves)")
    ap.add_argument("--query", default="", help="the URL query both pages open with")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    args = ap.parse_args(argv)
    if why := missing_browser():
        print(f"cannot compare the apps: {why}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p, ExitStack() as servers:
        browser = launch_chromium(p)
        urls = {}
        for side, root in (("A", args.a.resolve()), ("B", args.b.resolve())):
            env = {"PYTHONPATH": str(root), "EXPLORER_CACHE": str(Path(tmp) / f"cache-{side}.duckdb")}
            url = servers.enter_context(
                marimo_server(root / "notebooks/app.py", cwd=root, env=env, python=sys.executable)
            )
            urls[side] = url + args.query
        try:
            result = run(browser, urls, args.moves, args.opens, args.timeout_s)
        finally:
            browser.close()
    load = os.getloadavg()
    print(
        f"A = {args.a}, B = {args.b}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs"
    )
    if result["moves"]["A"] and result["moves"]["B"]:
        print(ratio_report("slider → table", "ms", result["moves"]))
    if result["opens"]["A"] and result["opens"]["B"]:
        print(ratio_report("open → table in the DOM", "ms", result["opens"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
