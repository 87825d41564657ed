"""The Python a context move runs in the app, cell by cell, headless: ``python -m explorer.bench.move_cells``.

    python -m explorer.bench.move_cells [--root DIR] [--scenario default --scenario 405B ...] [--moves 12]
                                        [--profile N]

The app (``notebooks/app.py`` under ``--root``) is run once with marimo's
script runner for each scenario (:data:`SCENARIOS`: its link state), then the
context slider is moved ``--moves`` times, each to a step not planned before
(alternately above and below the open's context), and the two cells a context
move runs in ``marimo run`` are run again: the answer's cell (the plan, the
table, the drawn option) and the cell below it (the URL, the ways forward, the
curves, the refusal tabs). Each runs marimo's own compiled code of the cell in
the script's context, with the names the first run defined, so it does what the
served app's cell does, minus marimo's sending of the output. The report gives
each cell's CPU milliseconds a move (median and mean: a move that draws new
curves costs more than one that does not); with ``--profile N`` also the N
functions with the most own time in the two cells (cProfile, which slows what
it measures: read it for shares, not for times).

CPython here; Pyodide (the WASM page) runs the same Python about 2–4 × slower.
``--root`` runs another checkout the same way (``git archive COMMIT | tar x -C
/tmp/before`` then ``--root /tmp/before``): this file is run as a script with
``PYTHONPATH=ROOT``, so that checkout's package and notebook are measured.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: a scenario's link state (``AppDefaults`` fields): the app's default and two of issue 27's
SCENARIOS: dict[str, dict[str, str]] = {
    "default": {},
    "405B": {"model": "meta-llama/Meta-Llama-3.1-405B", "spec": "2x8xh100-80g@ib0"},
    "DeepSeek-V3": {"model": "deepseek-ai/DeepSeek-V3", "spec": "1x8xh200-141g"},
}
#: a cell is found by a name it defines
CELLS = {"answer": "option_rows", "below": "app_state", "slider": "context_steps"}


def _app(root: Path):
    """The notebook's marimo ``App``, imported from its file."""
    spec = importlib.util.spec_from_file_location("bench_move_cells_app", root / "notebooks" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def _opened(root: Path, scenario: str):
    """The app run once for ``scenario`` inside a script context that stays installed: (its cells by role, the
    names it defined)."""
    from marimo._ast.app import InternalApp
    from marimo._messaging.types import NoopStream
    from marimo._runtime.context.script_context import initialize_script_context
    from marimo._runtime.context.types import runtime_context_installed, teardown_context

    from explorer.ui.app_state import AppDefaults

    app = _app(root)
    if runtime_context_installed():
        teardown_context()
    initialize_script_context(app=InternalApp(app), stream=NoopStream(), filename=str(root / "notebooks" / "app.py"))
    _outputs, defs = app.run(defs={"defaults": AppDefaults(**SCENARIOS[scenario])})
    cells = {}
    for _cid, cell in app._cell_manager.valid_cells():
        for role, name in CELLS.items():
            if name in cell.defs:
                cells[role] = cell._cell
    return cells, dict(defs)


def _steps(steps: list[int], start: int, moves: int) -> list[int]:
    """``moves`` slider steps, none the start: one above it, one below, and so on outwards."""
    i = steps.index(start)
    up, down = steps[i + 1 :], steps[:i][::-1]
    order = [s for pair in zip(up, down, strict=False) for s in pair]
    return (order + up[len(down) :] + down[len(up) :])[:moves]


def _run_cell(cell, names: dict) -> None:
    """A cell's code as marimo runs it: its body, then its last expression (its output); a ``mo.stop`` ends it."""
    from marimo._runtime.context.types import get_context
    from marimo._runtime.control_flow import MarimoStopError

    with get_context().with_cell_id(cell.cell_id):
        try:
            exec(cell.body, names)
            if cell.last_expr is not None:
                eval(cell.last_expr, names)
        except MarimoStopError:
            pass


def measure(root: Path, scenario: str, moves: int, profile: int | None) -> str:
    """Move the context ``moves`` times in ``scenario``; the report's lines. With ``profile`` (not None) each cell
    runs under cProfile: the Python calls a move (a count that does not move with the machine's load) and the
    ``profile`` functions with the most own time."""
    from marimo._runtime.context.types import runtime_context_installed, teardown_context

    try:
        return _measured(root, scenario, moves, profile)
    finally:  # the script context _opened installed: nothing after this sees it
        if runtime_context_installed():
            teardown_context()


def _measured(root: Path, scenario: str, moves: int, profile: int | None) -> str:
    import marimo as mo
    from marimo._runtime.context.types import get_context

    cells, names = _opened(root, scenario)
    contexts = _steps(names["context_steps"], names["context"].value, moves)
    cpu: dict[str, list[float]] = {"answer": [], "below": []}
    profilers = {role: cProfile.Profile() for role in cpu} if profile is not None else {}
    for tokens in contexts:
        with get_context().with_cell_id(cells["slider"].cell_id):  # the slider, as its own cell defines it
            names["context"] = mo.ui.slider(steps=names["context_steps"], value=tokens)
        for role in cpu:
            start = time.thread_time()
            if profilers:
                profilers[role].enable()
            _run_cell(cells[role], names)
            if profilers:
                profilers[role].disable()
            cpu[role].append((time.thread_time() - start) * 1000)
    lines = [f"{scenario}: {len(contexts)} moves to contexts not planned before ({', '.join(map(str, contexts))})"]
    for role, ms in cpu.items():
        lines.append(f"  {role:6} cell: median {statistics.median(ms):6.2f} ms CPU, mean {statistics.fmean(ms):6.2f}")
    both = [a + b for a, b in zip(cpu["answer"], cpu["below"], strict=True)]
    lines.append(f"  a move:      median {statistics.median(both):6.2f} ms CPU, mean {statistics.fmean(both):6.2f}")
    if profilers:
        stats = {role: pstats.Stats(p) for role, p in profilers.items()}
        calls = ", ".join(f"{role} {s.total_calls / len(contexts):,.0f}" for role, s in stats.items())
        lines.append(f"  Python calls a move (under cProfile, which slows the times above): {calls}")
        if profile:
            out = io.StringIO()
            both_stats = pstats.Stats(profilers["answer"], stream=out)
            both_stats.add(profilers["below"])
            both_stats.sort_stats("tottime").print_stats(profile)
            lines += ["  " + line for line in out.getvalue().splitlines() if line.strip()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(prog="python -m explorer.bench.move_cells", description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=None, help="the checkout to run (default: this package's)")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="default: all")
    ap.add_argument("--moves", type=int, default=12)
    ap.add_argument(
        "--profile", type=int, default=None, help="count the Python calls, and list this many functions by own time"
    )
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parents[2]
    root = (args.root or here).resolve()
    if root != here and os.environ.get("EXPLORER_BENCH_ROOT") != str(root):
        env = {**os.environ, "PYTHONPATH": str(root), "EXPLORER_BENCH_ROOT": str(root)}
        again = list(argv if argv is not None else sys.argv[1:])
        script = (
            f"import runpy, sys; sys.argv = {[__file__, *again]!r}; runpy.run_path({__file__!r}, run_name='__main__')"
        )
        return subprocess.run([sys.executable, "-c", script], env=env, check=False).returncode
    print(f"load average {os.getloadavg()[0]:.1f} (1 min); {root}")
    for scenario in args.scenario or list(SCENARIOS):
        print(measure(root, scenario, args.moves, args.profile), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
