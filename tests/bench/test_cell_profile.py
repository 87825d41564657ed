"""explorer.bench.cell_profile: a move's websocket frames grouped by cell, and the table they make."""

from __future__ import annotations

import json

from explorer.bench.cell_profile import CellCost, cell_costs, cell_names, profile_report


def _op(cell_id: str, status: str | None, stamp: float, output: str = "") -> str:
    data = {"cell_id": cell_id, "timestamp": stamp, **({"status": status} if status else {})}
    return json.dumps({"op": "cell-op", "data": {**data, **({"output": output} if output else {})}})


def test_a_moves_frames_are_grouped_by_cell_with_its_server_time():
    frames = [
        _op("a", "queued", 100.000),
        _op("a", "running", 100.010),
        _op("a", None, 100.020, output="x" * 500),
        _op("a", "idle", 100.035),  # ran 25 ms, ended 35 ms after the key press at 100.000
        json.dumps({"op": "execution", "data": {"cell_id": "b", "phase": "planned"}}),
        json.dumps({"op": "completed-run", "data": {}}),
    ]
    costs = {c.name: c for c in cell_costs(frames, {"a": "result, plan_ms"}, since_s=100.0)}
    a = costs["result, plan_ms"]
    assert a.messages == 4 and a.bytes_count == sum(len(f) for f in frames[:4])
    assert round(a.server_ms, 6) == 25.0 and round(a.ended_ms, 6) == 35.0
    assert costs["b"].server_ms is None and costs["b"].messages == 1  # an unnamed cell keeps its id
    assert costs["(completed-run)"].bytes_count == len(frames[5])
    assert cell_costs(["not json", b"\x00"], {})[0].messages == 2  # unreadable frames still count, under (?)


def test_the_report_gives_each_cells_medians_in_the_order_cells_end():
    moves = [
        [CellCost(name="table", messages=8, bytes_count=1000, server_ms=3.0, ended_ms=40.0),
         CellCost(name="plan", messages=8, bytes_count=200, server_ms=10.0, ended_ms=30.0)],
        [CellCost(name="table", messages=8, bytes_count=3000, server_ms=5.0, ended_ms=60.0)],
    ]  # fmt: skip
    lines = profile_report(moves).splitlines()
    assert lines[2] == "| plan | 1 | 10.0 | 30.0 | 8 | 200 |"
    assert lines[3] == "| table | 2 | 4.0 | 50.0 | 8 | 2,000 |"  # medians of 3 and 5, 40 and 60, 1,000 and 3,000
    assert lines[4] == "| all | | 14.0 | | 16 | 2,200 |"


def test_cells_are_named_by_what_they_define(tmp_path):
    path = tmp_path / "nb.py"
    path.write_text(
        "import marimo\napp = marimo.App()\n\n\n@app.cell\ndef _():\n    x = 1\n    return (x,)\n\n\n"
        "@app.cell\ndef _(x):\n    print(x)\n    return\n"
    )
    assert sorted(cell_names(path).values()) == ["print(x)", "x"]
