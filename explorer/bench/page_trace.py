"""What the page's main thread does with a context move: a chromium trace of the app and the floor, summed by kind.

    python -m explorer.bench.page_trace [--root DIR] [--moves 6] [--out DIR]

The app and marimo's floor (:data:`explorer.bench.app.FLOOR_NOTEBOOK`) are served and opened in one chromium;
``--moves`` context moves are traced on each (``devtools.timeline``, ``v8.execute``, ``blink.user_timing``). The
page marks the key press and each websocket message as its JS receives it (``performance.mark``), so the trace
says which task handled what. Each renderer main-thread task in the 700 ms after a key is put in one kind
(:func:`task_kind`): a websocket message's handler, React's render and commit (marimo renders outputs from its
scheduler), the key press, a frame (style, layout, paint), garbage collection, or other. The report gives, for
each page, the wall time and the number of tasks of each kind a move, and three counts a move: documents created
(marimo parses an HTML output with ``DOMParser`` for its outline), HTML parses and the elements restyled.
``--out`` keeps the raw traces (load them in chromium's performance panel). A benchmark: the times move with the
machine's load; the counts do not (docs/notes/app_speed.md, the fifth pass).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from explorer.bench.app import TABLE, VIEWPORT, _control, app_and_floor, context_keys
from explorer.bench.browser import missing_browser

#: installed before the page's scripts: a mark at each key press and at each websocket message received
MARKS = """(() => {
  const Socket = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Socket(...args);
    ws.addEventListener('message', () => performance.mark('ws'), true);
    return ws;
  };
  window.WebSocket.prototype = Socket.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  document.addEventListener('keydown', () => performance.mark('key'), true);
})();"""

CATEGORIES = ("devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink", "blink.user_timing")
#: what follows a key press, µs (a move ends well within it)
WINDOW_US = 700_000
#: the kinds of task, in the report's order
KINDS = ("websocket message", "React render and commit", "key press", "frame", "garbage collection", "other")


def _is_mark(e: dict, name: str) -> bool:
    return e.get("name") == name and "user_timing" in e.get("cat", "")


def main_thread(events: list[dict]) -> tuple[int, int]:
    """(pid, tid) of the renderer thread that marked the key presses."""
    key = next(e for e in events if _is_mark(e, "key"))
    return key["pid"], key["tid"]


def task_kind(inner: list[dict], marks: list[float]) -> str:
    """The kind of one task from the events inside it (``inner``) and the mark times that fall in it."""
    names = {e["name"] for e in inner}
    calls = [e.get("args", {}).get("data", {}) for e in inner if e["name"] in ("FunctionCall", "EventDispatch")]
    if marks or any(c.get("functionName") == "_handleMessage" for c in calls):
        return "websocket message"
    if any(c.get("type") == "keydown" for c in calls):
        return "key press"
    if "MessagePort::Accept" in names:  # React's scheduler runs its work from a MessageChannel
        return "React render and commit"
    if names & {"Paint", "Commit", "FireAnimationFrame", "BeginMainThreadFrame"}:
        return "frame"
    if any(n.startswith(("V8.GC", "Major")) for n in names):
        return "garbage collection"
    return "other"


def move_summary(events: list[dict]) -> dict:
    """Per move (averaged over the moves in ``events``): ``{kind: (ms, tasks)}`` under ``kinds``, and ``documents``,
    ``html_parses``, ``restyled`` (elements)."""
    thread = main_thread(events)
    mine = sorted((e for e in events if (e.get("pid"), e.get("tid")) == thread), key=lambda e: e["ts"])
    keys = [e["ts"] for e in mine if _is_mark(e, "key")]
    messages = [e["ts"] for e in mine if _is_mark(e, "ws")]
    spans = [e for e in mine if e.get("ph") == "X"]
    in_move = [e for e in spans if any(k - 2_000 <= e["ts"] <= k + WINDOW_US for k in keys)]
    ms, tasks = Counter(), Counter()
    for task in (e for e in in_move if e["name"] == "RunTask"):
        end = task["ts"] + task.get("dur", 0)
        inner = [e for e in in_move if task["ts"] <= e["ts"] <= end and e is not task]
        kind = task_kind(inner, [t for t in messages if task["ts"] <= t <= end])
        ms[kind] += task.get("dur", 0) / 1000
        tasks[kind] += 1
    n = max(len(keys), 1)
    return {
        "kinds": {k: (ms[k] / n, tasks[k] / n) for k in KINDS},
        "documents": sum(e["name"] == "Document::Document" for e in in_move) / n,
        "html_parses": sum(e["name"] == "ParseHTML" for e in in_move) / n,
        "restyled": sum(e.get("args", {}).get("elementCount", 0) for e in in_move if e["name"] == "UpdateLayoutTree")
        / n,
    }


def report(summaries: dict[str, dict], load: tuple[float, float, float]) -> str:
    """The pages' summaries side by side, as markdown."""
    names = list(summaries)
    lines = [f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs", ""]
    lines += ["| the page's work a move | " + " | ".join(f"{n} (ms, tasks)" for n in names) + " |"]
    lines += ["|---|" + "---:|" * len(names)]
    for kind in KINDS:
        cells = [f"{s['kinds'][kind][0]:.1f} ({s['kinds'][kind][1]:.1f})" for s in summaries.values()]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    total = [sum(ms for ms, _ in s["kinds"].values()) for s in summaries.values()]
    lines.append("| all | " + " | ".join(f"{t:.1f}" for t in total) + " |")
    for count in ("documents", "html_parses", "restyled"):
        lines.append(
            f"| {count.replace('_', ' ')} | " + " | ".join(f"{s[count]:.1f}" for s in summaries.values()) + " |"
        )
    return "\n".join(lines)


def trace_moves(browser, url: str, moves: int) -> list[dict]:
    """Open ``url``, wait for the table, trace ``moves`` context moves (right, right, left, ...); the events."""
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(MARKS)
    page.goto(url)
    page.locator(TABLE).wait_for(timeout=90_000)
    page.wait_for_timeout(3000)  # the open's last outputs
    slider = _control(page, "marimo-slider", "Context", "slider")
    slider.focus()
    page.wait_for_timeout(300)
    browser.start_tracing(page=page, categories=list(CATEGORIES))
    for key in context_keys(moves):
        text = f"() => document.querySelector('{TABLE}')?.textContent"  # textContent: the wait forces no layout
        old = page.evaluate(text)
        slider.press(key)
        page.wait_for_function(f"(old) => ({text})() !== old", arg=old, polling=20)
        page.wait_for_timeout(WINDOW_US // 1000)
    trace = json.loads(browser.stop_tracing())
    page.close()
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def main(argv: list[str] | None = None) -> int:
    """Trace both pages and print the report."""
    ap = argparse.ArgumentParser(prog="python -m explorer.bench.page_trace", description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout to run (default: here)")
    ap.add_argument("--moves", type=int, default=6, help="context moves traced on each page")
    ap.add_argument("--out", type=Path, default=None, help="keep the traces here (app.json, floor.json)")
    args = ap.parse_args(argv)
    if why := missing_browser():
        print(f"cannot trace the app: {why}", file=sys.stderr)
        return 2
    root = args.root.resolve()
    summaries = {}
    with app_and_floor(root) as (browser, app_url, floor_url):
        for name, url in (("app", app_url), ("floor", floor_url)):
            events = trace_moves(browser, url, args.moves)
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{name}.json").write_text(json.dumps(events))
            summaries[name] = move_summary(events)
    print(report(summaries, os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
