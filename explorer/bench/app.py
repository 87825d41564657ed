"""How fast the app answers in a real browser: open to first table, and each control to table and charts.

    python -m explorer.bench.app [--notebook notebooks/app.py] [--root DIR] [--moves 12] [--opens 3]
                                 [--scenario default --scenario "1,000 GPUs" ...] [--json FILE]
    python -m explorer.bench.app --floor [--opens 4] [--moves 12] [--json FILE]

For each scenario (a URL query the app reads) a fresh ``marimo run`` server is
started. The first tab is the **cold** open: the server process has not run the
notebook yet. Each further tab is a **warm** open: a new session in a server
that has. Each open is timed from ``page.goto`` until the ranked table
(``#explorer-options``) is in the page.

On the last tab every control is moved in turn: the context slider (``--moves``
times), the concurrency slider, the engine menu, the KV cache menu and the
cluster spec. Each move is timed in the page, from the first key, click or input
event to:

- **table**: the table's text differs from before;
- **charts**: the last change inside any chart (``.vega-embed``, in marimo's
  shadow roots, or the per-card chart's inline ``svg#explorer-cards``), once no
  chart has changed for 0.6 s.

The report gives the median and the maximum of each, in milliseconds.
``--root`` runs another checkout (``PYTHONPATH=ROOT``, notebook under it), so
an older commit can be measured with the same script: ``git archive COMMIT |
tar x -C /tmp/before`` then ``--root /tmp/before``. This is a benchmark, not a
test: the figures move with the machine's load, which the report states.

With ``--floor`` the app is measured against marimo's own floor instead: a
one-slider notebook (:data:`FLOOR_NOTEBOOK`, a slider and the table of its
value) served beside the app and driven in the same chromium, interleaved (an
app open, a floor open, ...; then an app move, a floor move, ...), so both see
the same load. Each context move also records what it cost the page: the bytes
and the number of websocket messages (both directions), and the page's
main-thread time (chromium's ``TaskDuration``, from the first key to 0.6 s after
the last change). The report gives each figure for both and the ratio app /
floor (issue 27's targets: open ≤ 1.5 ×, slider → table ≤ 1.3 ×, bytes a move
≤ 10 KB plus the rows shown).

Needs playwright (the test extra) and chromium (``/usr/bin/chromium``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from explorer.bench.browser import DEEP_QUERY, launch_chromium, marimo_server, missing_browser
from explorer.bench.cell_profile import cell_costs, cell_names, profile_report

TABLE = "#explorer-options"
#: the charts a move may redraw: marimo's vega-lite outputs, and the app's per-card chart, drawn as inline SVG
CHARTS = ".vega-embed, svg#explorer-cards"

#: name -> the URL query the app opens with
SCENARIOS: dict[str, str] = {
    "default": "",
    "405B on 2 × 8 H100": "?model=meta-llama/Meta-Llama-3.1-405B&cluster=2x8xh100-80g@ib0",
    "1,000 GPUs": "?cluster=125x8xh100-80g@ib0",
}

#: installed in the page before each move: observers on every chart (and on the cell outputs that hold
#: them, which may replace a chart with a new one), a watch on the table, and the time of the first key,
#: click or input event
_ARM = f"""() => {{
  const w = window;
  (w.__benchObservers || []).forEach((o) => o.disconnect());
  w.__benchObservers = [];
  w.__bench = {{ t0: null, table: null, chart: null, origin: performance.timeOrigin }};
  const b = w.__bench;
  const start = () => {{ if (b.t0 === null) b.t0 = performance.now(); }};
  for (const kind of ['keydown', 'pointerdown', 'input']) document.addEventListener(kind, start, {{capture: true, once: true}});
  const seen = new Set();
  const watch = (node) => {{
    const o = new MutationObserver(() => {{
      if (b.t0 === null) return;
      b.chart = performance.now();
      ({DEEP_QUERY})('{CHARTS}').forEach((e) => {{ if (!seen.has(e)) {{ seen.add(e); watch(e); }} }});
    }});
    o.observe(node, {{subtree: true, childList: true, attributes: true}});
    w.__benchObservers.push(o);
  }};
  for (const e of ({DEEP_QUERY})('{CHARTS}')) {{
    seen.add(e);
    watch(e);
    const area = (e.getRootNode().host || e).closest('.output-area');
    if (area && !seen.has(area)) {{ seen.add(area); watch(area); }}
  }}
  const old = document.querySelector('{TABLE}')?.innerText;
  const poll = () => {{
    const t = document.querySelector('{TABLE}');
    if (b.t0 !== null && t && t.innerText !== old) {{ b.table = performance.now(); return; }}
    setTimeout(poll, 4);
  }};
  poll();
}}"""


#: the context slider's keys for successive moves, in turn: right, right, left, left, left, right (it stays near
#: where it started, and every move asks a context it did not have the move before)
CONTEXT_KEYS = ("ArrowRight", "ArrowRight", "ArrowLeft", "ArrowLeft", "ArrowLeft", "ArrowRight")


def context_keys(moves: int) -> list[str]:
    """The keys of ``moves`` context moves, :data:`CONTEXT_KEYS` in turn."""
    return [CONTEXT_KEYS[i % len(CONTEXT_KEYS)] for i in range(moves)]


@dataclass
class Timings:
    """One control's moves.

    Attributes:
        table_ms: event to changed table, per move.
        charts_ms: event to the last chart change, per move that changed a chart.
        missed: moves whose table did not change within the timeout.
    """

    table_ms: list[float] = field(default_factory=list)
    charts_ms: list[float] = field(default_factory=list)
    missed: int = 0


def _settle(page, timeout_s: float, quiet_s: float = 0.6) -> dict:
    """Wait for the table to change, then for the charts to be still for ``quiet_s``; the page's timings."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        b = page.evaluate("() => window.__bench")
        if b["table"] is not None:
            break
        page.wait_for_timeout(20)
    last = None
    while time.monotonic() < deadline:
        b = page.evaluate("() => window.__bench")
        if b["chart"] == last and (last is not None or b["table"] is not None):
            break
        last = b["chart"]
        page.wait_for_timeout(quiet_s * 1000)
    return page.evaluate("() => window.__bench")


def _timed(page, action, into: Timings, timeout_s: float) -> dict:
    """Arm the page, act, wait for it to settle; the page's timings (``t0``, ``table``, ``chart``: ms on the
    page's clock, which starts at ``origin``, ms since the epoch)."""
    page.evaluate(_ARM)
    action()
    b = _settle(page, timeout_s)
    if b["t0"] is None or b["table"] is None:
        into.missed += 1
        return b
    into.table_ms.append(b["table"] - b["t0"])
    if b["chart"] is not None:
        into.charts_ms.append(b["chart"] - b["t0"])
    return b


def _control(page, tag: str, label: str, inner: str):
    """The visible ``inner`` element (``input``, ``select``, ``slider``) of the marimo element ``tag`` whose label
    contains ``label`` (labels live in shadow roots; a sidebar's elements are also in the page hidden)."""
    part = page.get_by_role("slider") if inner == "slider" else page.locator(inner)
    return page.locator(tag, has_text=label).locator(part).locator("visible=true").first


def measure_controls(page, moves: int, timeout_s: float) -> dict[str, Timings]:
    """Move each control in turn; their timings by name."""
    out: dict[str, Timings] = {}
    context = _control(page, "marimo-slider", "Context", "slider")
    context.focus()
    keys = context_keys(moves)
    out["context slider"] = t = Timings()
    for key in keys:
        _timed(page, lambda k=key: context.press(k), t, timeout_s)
    concurrency = _control(page, "marimo-slider", "Concurrent", "slider")
    concurrency.focus()
    out["concurrency slider"] = t = Timings()
    for key in ("ArrowRight", "ArrowRight", "ArrowLeft", "ArrowLeft"):
        _timed(page, lambda k=key: concurrency.press(k), t, timeout_s)
    out["engine menu"] = t = Timings()
    menu = _control(page, "marimo-dropdown", "Engine", "select")
    for name in ("vLLM", "SGLang", "llama.cpp", "all three"):
        radio = page.get_by_role("radio", name=name)  # an older app offers the engines as a radio
        if radio.count():
            _timed(page, lambda r=radio: r.first.click(), t, timeout_s)
        elif menu.count():
            _timed(page, lambda n=name: menu.select_option(label=n), t, timeout_s)
    out["KV cache menu"] = t = Timings()
    kv = _control(page, "marimo-dropdown", "KV cache", "select")
    for value in ("fp8", "auto"):
        _timed(page, lambda v=value: kv.select_option(v), t, timeout_s)
    out["cluster spec edit"] = t = Timings()
    spec = _control(page, "marimo-text", "Cluster spec", "input")
    before = spec.input_value()
    for text in ("2x8xh100-80g@ib0 + 1x4xl40s-48g", before):
        _timed(page, lambda s=text: (spec.fill(s), spec.press("Enter")), t, timeout_s)
    return out


#: marimo's floor: one slider and a table of its value (the table has the app's id, so both are timed alike)
FLOOR_NOTEBOOK = """import marimo

app = marimo.App(width="full")


@app.cell(hide_code=True)
def _():
    import marimo as mo

    context = mo.ui.slider(steps=[2**i for i in range(9, 18)], value=8192, label="Context", show_value=True)
    context
    return context, mo


@app.cell(hide_code=True)
def _(context, mo):
    mo.Html(f"<table id='explorer-options'><tr><td>context</td><td>{context.value:,}</td></tr></table>")
    return


if __name__ == "__main__":
    app.run()
"""


@dataclass
class Wire:
    """What a page's websocket carried, counted as it goes (both directions).

    Attributes:
        messages: frames sent and received.
        bytes: their payloads' length (UTF-8 bytes for text frames).
        received: the frames received while recording (:meth:`record`), else None.
    """

    messages: int = 0
    bytes: int = 0
    received: list | None = None

    def count(self, payload) -> None:
        """Count one frame (``str`` or ``bytes``)."""
        self.messages += 1
        self.bytes += len(payload.encode() if isinstance(payload, str) else payload)

    def receive(self, payload) -> None:
        """Count one frame from the server, and keep it while recording."""
        self.count(payload)
        if self.received is not None:
            self.received.append(payload)

    def record(self) -> list:
        """Keep the frames received from now on (a new list, returned)."""
        self.received = []
        return self.received


def _wired(page) -> Wire:
    """Count every websocket frame the page sends or receives from now on."""
    wire = Wire()

    def on_socket(ws) -> None:
        ws.on("framesent", wire.count)
        ws.on("framereceived", wire.receive)

    page.on("websocket", on_socket)
    return wire


@dataclass
class MoveCost:
    """Context moves on one page, with what each cost.

    Attributes:
        timings: event to table and to charts.
        bytes: websocket bytes a move.
        messages: websocket messages a move.
        main_ms: the page's main-thread time a move (ms).
        frames: the frames the page received in each move (for :func:`explorer.bench.cell_profile.cell_costs`).
        pressed_s: when each move's key was pressed (s since the epoch, the page's clock).
    """

    timings: Timings = field(default_factory=Timings)
    bytes: list[int] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)
    main_ms: list[float] = field(default_factory=list)
    frames: list[list] = field(default_factory=list)
    pressed_s: list[float] = field(default_factory=list)


def _task_s(cdp) -> float:
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "TaskDuration")


def _costed_move(page, cdp, wire: Wire, key: str, into: MoveCost, timeout_s: float) -> None:
    slider = _control(page, "marimo-slider", "Context", "slider")
    slider.focus()
    page.wait_for_timeout(300)  # the focus's own work is not the move's
    sent, count, task = wire.bytes, wire.messages, _task_s(cdp)
    into.frames.append(wire.record())
    b = _timed(page, lambda: slider.press(key), into.timings, timeout_s)
    wire.received = None
    into.pressed_s.append((b["origin"] + (b["t0"] or 0.0)) / 1000)
    into.bytes.append(wire.bytes - sent)
    into.messages.append(wire.messages - count)
    into.main_ms.append((_task_s(cdp) - task) * 1000)


#: the window both pages are opened in
VIEWPORT = {"width": 1440, "height": 900}


def _open_page(new_page, url: str, timeout_s: float):
    """(the page, its wire recording every frame since the open, seconds to the table, when it was opened: s
    since the epoch)."""
    page = new_page()
    wire = _wired(page)
    wire.record()
    opened_s, t0 = time.time(), time.perf_counter()
    page.goto(url)
    page.locator(TABLE).wait_for(timeout=int(timeout_s * 1000))
    return page, wire, time.perf_counter() - t0, opened_s


def run_versus_floor(new_page, app_url: str, floor_url: str, opens: int, moves: int, timeout_s: float) -> dict:
    """The app and the floor opened ``opens`` times each, interleaved, then ``moves`` context moves on each,
    interleaved; every figure for both (``{"app": ..., "floor": ...}``), with the frames each page received in its
    last open (``open_frames``, until the app's charts were drawn) and when it was opened (``opened_s``).
    ``new_page()`` opens a tab (:data:`VIEWPORT` wide)."""
    urls = {"app": app_url, "floor": floor_url}
    open_s: dict[str, list[float]] = {"app": [], "floor": []}
    pages: dict[str, tuple] = {}
    last_open: dict[str, float] = {}
    for _ in range(opens):
        for name, url in urls.items():
            if name in pages:
                pages[name][0].close()
            page, wire, seconds, opened_s = _open_page(new_page, url, timeout_s)
            open_s[name].append(seconds)
            pages[name] = (page, wire)
            last_open[name] = opened_s
    pages["app"][0].locator(CHARTS).last.wait_for(timeout=int(timeout_s * 1000))
    pages["app"][0].wait_for_timeout(1500)  # the charts below the table finish before the first move
    open_frames = {name: wire.received for name, (_page, wire) in pages.items()}
    costs = {name: MoveCost() for name in urls}
    cdps = {}
    for name, (page, _) in pages.items():
        cdps[name] = page.context.new_cdp_session(page)
        cdps[name].send("Performance.enable")
    keys = context_keys(moves)
    for key in keys:
        for name, (page, wire) in pages.items():
            _costed_move(page, cdps[name], wire, key, costs[name], timeout_s)
    for page, _ in pages.values():
        page.close()
    return {
        name: {
            "open_s": open_s[name],
            "moves": costs[name],
            "open_frames": open_frames[name],
            "opened_s": last_open[name],
        }
        for name in urls
    }


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def versus_figures(result: dict) -> list[tuple[str, float | None, float | None]]:
    """(figure, app median, floor median) for each figure the floor report gives."""
    app, floor = result["app"], result["floor"]

    def both(read) -> tuple[float | None, float | None]:
        return _median(read(app)), _median(read(floor))

    return [
        ("open, cold (s)", app["open_s"][0], floor["open_s"][0]),
        ("open, warm (s, median)", *both(lambda r: r["open_s"][1:])),
        ("slider → table (ms, median)", *both(lambda r: r["moves"].timings.table_ms)),
        (
            "slider → charts (ms, median)",
            _median(app["moves"].timings.charts_ms),
            _median(floor["moves"].timings.table_ms),
        ),
        ("bytes a move (median)", *both(lambda r: r["moves"].bytes)),
        ("websocket messages a move (median)", *both(lambda r: r["moves"].messages)),
        ("main-thread time a move (ms, median)", *both(lambda r: r["moves"].main_ms)),
    ]


def versus_report(result: dict, load: tuple[float, float, float]) -> str:
    """The app against the floor as a markdown table, with the ratio app / floor."""
    lines = [f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs", ""]
    lines += ["| figure | app | floor | app / floor |", "|---|---:|---:|---:|"]
    for figure, app, floor in versus_figures(result):
        if not app and not floor:  # not measured (a WASM page has no websocket)
            continue
        ratio = f"{app / floor:.2f}" if app is not None and floor else "—"
        shown = [
            f"{v:,.2f}" if v is not None and v < 100 else f"{v:,.0f}" if v is not None else "—" for v in (app, floor)
        ]
        lines.append(f"| {figure} | {shown[0]} | {shown[1]} | {ratio} |")
    lines.append("")
    lines.append("slider → charts: the floor has no chart, so its slider → table stands as its floor.")
    missed = {n: r["moves"].timings.missed for n, r in result.items() if r["moves"].timings.missed}
    if missed:
        lines.append(f"moves missed (no table change within the timeout): {missed}")
    return "\n".join(lines)


@contextmanager
def app_and_floor(root: Path, notebook: Path | str = "notebooks/app.py", python: str | None = None):
    """One chromium and two ``marimo run`` servers of ``root``'s checkout, side by side: the app (``notebook``)
    and :data:`FLOOR_NOTEBOOK`, with a cache of their own, under ``python`` (this interpreter when None); yields
    ``(browser, app_url, floor_url)``."""
    from playwright.sync_api import sync_playwright

    python = python or sys.executable

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        floor = Path(tmp) / "floor.py"
        floor.write_text(FLOOR_NOTEBOOK)
        env = {"PYTHONPATH": str(root), "EXPLORER_CACHE": str(Path(tmp) / "cache.duckdb")}
        browser = launch_chromium(p)
        try:
            with (
                marimo_server(root / notebook, cwd=root, env=env, python=python) as app_url,
                marimo_server(floor, cwd=root, env=env, python=python) as floor_url,
            ):
                yield browser, app_url, floor_url
        finally:
            browser.close()


def _run_floor(args, root: Path) -> int:
    with app_and_floor(root, args.notebook, args.python) as (browser, app_url, floor_url):
        result = run_versus_floor(
            lambda: browser.new_page(viewport=VIEWPORT), app_url, floor_url, args.opens, args.moves, args.timeout_s
        )
    print(versus_report(result, os.getloadavg()))
    names = {"app": cell_names(root / args.notebook), "floor": {}}
    profiles = {
        side: [
            cell_costs(frames, names[side], since_s=pressed)
            for frames, pressed in zip(r["moves"].frames, r["moves"].pressed_s, strict=True)
        ]
        for side, r in result.items()
    }
    for side, moves in profiles.items():
        print(f"\n{side}: what a context move ran and sent, cell by cell\n\n{profile_report(moves)}")
    for side, r in result.items():
        opening = cell_costs(r["open_frames"], names[side], since_s=r["opened_s"])
        print(f"\n{side}: what its last open ran and sent (ended at: ms after the page was asked for)\n")
        print(profile_report([opening]))
    if args.json:
        plain = {
            name: {
                "open_s": r["open_s"],
                "moves": {**vars(r["moves"]), "timings": vars(r["moves"].timings), "frames": None},
                "cells": [[asdict(c) for c in move] for move in profiles[name]],
            }
            for name, r in result.items()
        }
        figures = {f: {"app": a, "floor": b} for f, a, b in versus_figures(result)}
        args.json.write_text(json.dumps({"root": str(root), "figures": figures, "results": plain}, indent=1))
    return 0


def run_scenario(browser, url: str, opens: int, moves: int, timeout_s: float) -> dict:
    """Open the app ``opens`` times (the first cold), then move every control on the last tab."""
    open_s: list[float] = []
    page = None
    for _ in range(opens):
        if page is not None:
            page.close()
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        t0 = time.perf_counter()
        page.goto(url)
        page.locator(TABLE).wait_for(timeout=int(timeout_s * 1000))
        open_s.append(time.perf_counter() - t0)
    page.locator(CHARTS).last.wait_for(timeout=int(timeout_s * 1000))
    page.wait_for_timeout(1500)  # the charts below the table finish before the first move
    controls = measure_controls(page, moves, timeout_s)
    page.close()
    return {"open_cold_s": open_s[0], "open_warm_s": open_s[1:], "controls": controls}


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.0f} / {max(xs):,.0f}" if xs else "—"


def report(results: dict[str, dict], load: tuple[float, float, float]) -> str:
    """The results as markdown tables (median / max, ms)."""
    lines = [f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs", ""]
    lines += ["| scenario | open, cold (s) | open, warm (s, median / max) |", "|---|---:|---:|"]
    for name, r in results.items():
        warm = r["open_warm_s"]
        warm_text = f"{statistics.median(warm):.2f} / {max(warm):.2f}" if warm else "—"
        lines.append(f"| {name} | {r['open_cold_s']:.2f} | {warm_text} |")
    lines += ["", "| scenario | control | moves | → table (ms, median / max) | → charts (ms, median / max) |"]
    lines.append("|---|---|---:|---:|---:|")
    for name, r in results.items():
        for control, t in r["controls"].items():
            missed = f" ({t.missed} missed)" if t.missed else ""
            lines.append(f"| {name} | {control} | {len(t.table_ms)}{missed} | {_ms(t.table_ms)} | {_ms(t.charts_ms)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the report."""
    ap = argparse.ArgumentParser(prog="python -m explorer.bench.app", description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout to run (default: here)")
    ap.add_argument("--notebook", default="notebooks/app.py", help="the app, relative to --root")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs marimo")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="default: all")
    ap.add_argument("--opens", type=int, default=3, help="tabs opened per scenario (the first cold)")
    ap.add_argument("--moves", type=int, default=12, help="context slider moves")
    ap.add_argument("--timeout-s", type=float, default=90)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--floor", action="store_true", help="the app against a one-slider notebook, interleaved")
    args = ap.parse_args(argv)
    if why := missing_browser():
        print(f"cannot run the app benchmark: {why}", file=sys.stderr)
        return 2
    root = args.root.resolve()
    if args.floor:
        return _run_floor(args, root)
    from playwright.sync_api import sync_playwright

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = launch_chromium(p)
        for name in args.scenario or list(SCENARIOS):
            env = {"PYTHONPATH": str(root), "EXPLORER_CACHE": str(Path(tmp) / f"{len(results)}.duckdb")}
            with marimo_server(root / args.notebook, cwd=root, env=env, python=args.python) as url:
                results[name] = run_scenario(browser, url + SCENARIOS[name], args.opens, args.moves, args.timeout_s)
            print(f"{name}: done", file=sys.stderr)
        browser.close()
    print(report(results, os.getloadavg()))
    if args.json:
        plain = {name: {**r, "controls": {c: vars(t) for c, t in r["controls"].items()}} for name, r in results.items()}
        args.json.write_text(json.dumps({"root": str(root), "results": plain}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
