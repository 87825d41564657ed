"""explorer.bench.app: the floor comparison's counting and its report (the browser run itself is a benchmark)."""

from __future__ import annotations

import importlib.util

from explorer.bench.app import FLOOR_NOTEBOOK, MoveCost, Timings, Wire, versus_figures, versus_report


def test_the_wire_counts_frames_and_their_utf8_bytes():
    wire = Wire()
    wire.count('{"op": "x"}')  # 11 ASCII characters
    wire.count("×")  # one character, two UTF-8 bytes
    wire.count(b"\x00\x01\x02")  # a binary frame
    assert (wire.messages, wire.bytes) == (3, 11 + 2 + 3)


def _side(open_s, table_ms, charts_ms, sent, main_ms):
    cost = MoveCost(timings=Timings(table_ms=table_ms, charts_ms=charts_ms), bytes=sent, messages=[10, 12, 14])
    cost.main_ms = main_ms
    return {"open_s": open_s, "moves": cost}


def test_the_report_gives_medians_and_the_ratio_app_over_floor():
    result = {
        "app": _side([6.0, 4.0, 5.0], [100, 300, 200], [400, 600, 500], [30_000, 20_000, 10_000], [90, 30, 60]),
        "floor": _side([3.0, 2.0, 2.5], [40, 50, 60], [], [2_000, 2_000, 2_000], [20, 30, 40]),
    }
    figures = {name: (app, floor) for name, app, floor in versus_figures(result)}
    assert figures["open, cold (s)"] == (6.0, 3.0)  # the first open of each
    assert figures["open, warm (s, median)"] == (4.5, 2.25)  # the median of the others
    assert figures["slider → table (ms, median)"] == (200, 50)
    assert figures["slider → charts (ms, median)"] == (500, 50)  # the floor has no chart: its table stands in
    assert figures["bytes a move (median)"] == (20_000, 2_000)
    text = versus_report(result, (1.0, 2.0, 3.0))
    # 6.0 / 3.0 = 2.00; 200 / 50 = 4.00; 20,000 / 2,000 = 10.00; 60 / 30 = 2.00
    assert "| open, cold (s) | 6.00 | 3.00 | 2.00 |" in text
    assert "| slider → table (ms, median) | 200 | 50.00 | 4.00 |" in text
    assert "| bytes a move (median) | 20,000 | 2,000 | 10.00 |" in text
    assert "| main-thread time a move (ms, median) | 60.00 | 30.00 | 2.00 |" in text


def test_the_floor_is_one_slider_and_the_apps_table_id(tmp_path):
    path = tmp_path / "floor.py"  # as the benchmark writes it for `marimo run`
    path.write_text(FLOOR_NOTEBOOK)
    spec = importlib.util.spec_from_file_location("floor", path)
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    outputs, defs = floor.app.run()
    assert defs["context"].value == 8192
    assert "id='explorer-options'" in outputs[1].text and "8,192" in outputs[1].text


def test_figures_neither_page_measured_are_left_out():
    # a WASM page has no websocket: bytes and messages are 0 on both sides, and no row says 0 / 0
    result = {
        "app": _side([6.0, 4.0], [100, 300], [400, 600], [0, 0], [90, 30]),
        "floor": _side([3.0, 2.0], [40, 50], [], [0, 0], [20, 30]),
    }
    for side in result.values():
        side["moves"].messages = [0, 0]
    text = versus_report(result, (1.0, 1.0, 1.0))
    assert "bytes a move" not in text and "websocket messages" not in text
    assert "| slider → table (ms, median) | 200 | 45.00 | 4.44 |" in text  # 200 / 45 = 4.44
