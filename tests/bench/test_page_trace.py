"""explorer.bench.page_trace: a move's main-thread tasks put in kinds, from a trace's events (the browser run
itself is a benchmark)."""

from __future__ import annotations

from explorer.bench.page_trace import move_summary, report


def _task(ts: int, dur: int, *inner: dict) -> list[dict]:
    """A RunTask of ``dur`` µs at ``ts`` on the page's main thread (pid 1, tid 2), with events inside it."""
    return [{"name": "RunTask", "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": 2}] + [
        {"ph": "X", "dur": 10, "pid": 1, "tid": 2, "args": {}, **e} for e in inner
    ]


def _mark(name: str, ts: int) -> dict:
    return {"name": name, "cat": "blink.user_timing", "ph": "R", "ts": ts, "pid": 1, "tid": 2}


def test_a_moves_tasks_go_in_their_kinds_and_the_counts_are_a_moves():
    events = [
        _mark("key", 1_000),
        *_task(900, 15_000, {"name": "EventDispatch", "ts": 1_000, "args": {"data": {"type": "keydown"}}}),
        # a websocket message: marked by the page, and marimo's handler parses an output for its outline
        *_task(40_000, 2_000, {"name": "Document::Document", "ts": 40_100}, {"name": "ParseHTML", "ts": 40_200}),
        _mark("ws", 40_050),
        *_task(50_000, 6_000, {"name": "MessagePort::Accept", "ts": 50_000}, {"name": "ParseHTML", "ts": 50_100}),
        *_task(
            60_000,
            4_000,
            {"name": "UpdateLayoutTree", "ts": 60_000, "args": {"elementCount": 190}},
            {"name": "Paint", "ts": 62_000},
        ),
        *_task(70_000, 3_000, {"name": "V8.GC_SCAVENGER", "ts": 70_000}),
        *_task(80_000, 1_000),
        *_task(900_000, 5_000),  # past the move's 700 ms: not counted
        {"name": "RunTask", "ph": "X", "ts": 50_000, "dur": 9_000, "pid": 1, "tid": 3},  # another thread
    ]
    s = move_summary(events)
    assert s["kinds"] == {
        "websocket message": (2.0, 1),
        "React render and commit": (6.0, 1),
        "key press": (15.0, 1),
        "frame": (4.0, 1),
        "garbage collection": (3.0, 1),
        "other": (1.0, 1),
    }
    assert (s["documents"], s["html_parses"], s["restyled"]) == (1, 2, 190)
    text = report({"app": s, "floor": s}, (1.0, 2.0, 3.0))
    assert "| React render and commit | 6.0 (1.0) | 6.0 (1.0) |" in text
    assert "| all | 31.0 | 31.0 |" in text  # 15 + 2 + 6 + 4 + 3 + 1
