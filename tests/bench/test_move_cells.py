"""explorer.bench.move_cells: the slider's steps a move goes to, and one move of the app's two cells, headless."""

from __future__ import annotations

from pathlib import Path

from explorer.bench.move_cells import _steps, measure

ROOT = Path(__file__).resolve().parents[2]


def test_moves_go_outwards_from_the_start_and_never_back_to_it():
    steps = [512, 1024, 2048, 4096, 8192, 16384]
    assert _steps(steps, 4096, 4) == [8192, 2048, 16384, 1024]
    assert _steps(steps, 4096, 9) == [8192, 2048, 16384, 1024, 512]  # every other step, once
    assert _steps(steps, 16384, 2) == [8192, 4096]  # the top: only downwards


def test_one_move_runs_both_cells_and_counts_their_calls():
    lines = measure(ROOT, "default", 1, 0).splitlines()
    assert lines[0].startswith("default: 1 moves to contexts not planned before (49152)")
    assert [line.split(":")[0].strip() for line in lines[1:4]] == ["answer cell", "below  cell", "a move"]
    answer, below = (int(part.split()[-1].replace(",", "")) for part in lines[4].split(": ", 1)[1].split(", "))
    assert answer > 1000 and below > 100  # the plan and the table; the URL, the curves and the tabs
