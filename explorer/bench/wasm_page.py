"""The published WASM page against marimo's floor exported the same way, in one chromium, offline.

    .ci/wasm/export.sh SITE MIRROR notebooks/app.py .      # the app's page alone (or the whole site)
    python -m explorer.bench.wasm_page --site SITE --mirror MIRROR [--opens 3] [--moves 8] [--json FILE]

The floor is :data:`explorer.bench.app.FLOOR_NOTEBOOK` (one slider and the table of its value), exported here
with the same marimo, the same flags (``html-wasm --mode run --offline``) and the same Pyodide mirror
(``.ci/wasm/build_mirror.sh``) into a temporary folder. Both pages are served from 127.0.0.1 and driven in one
chromium that reaches nothing else (as ``tests/notebooks/test_wasm_page.py`` does), interleaved as
``python -m explorer.bench.app --floor`` drives the served app: opens alternate (each timed from ``goto`` to the
table: Pyodide's start, the packages' install, the notebook's first run), then context moves alternate (to the
table and to the charts, and the page's main-thread time; Python runs in a web worker, so that is the drawing).
There is no websocket in a WASM page: bytes and messages a move are not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from explorer.bench.app import FLOOR_NOTEBOOK, VIEWPORT, run_versus_floor, versus_figures, versus_report
from explorer.bench.browser import launch_chromium, missing_browser, static_server

#: Pyodide's start on a loaded 2-core machine (the WASM page test allows the same)
START_S = 600


def export_floor(out: Path, mirror: Path, root: Path) -> Path:
    """Export the floor notebook as a WASM page into ``out`` (replaced), resolving its packages from ``mirror``
    as ``.ci/wasm/export.sh`` does (``root``'s ``.ci/wasm/marimo_pw.py``: marimo's CLI on the system chromium)."""
    with tempfile.TemporaryDirectory() as tmp, static_server(mirror) as mirror_url:
        notebook = Path(tmp) / "floor.py"
        notebook.write_text(FLOOR_NOTEBOOK)
        subprocess.run(
            [
                sys.executable,
                str(root / ".ci" / "wasm" / "marimo_pw.py"),
                "-q",
                "export",
                "html-wasm",
                str(notebook),
                "-o",
                str(out),
                "--mode",
                "run",
                "--offline",
                "--pyodide-index-url",
                f"{mirror_url}pyodide/",
                "--pypi-index-url",
                f"{mirror_url}simple",
            ],
            check=True,
            cwd=tmp,
            # marimo's export scans the imports with uv, installed beside this interpreter (the venv's bin/)
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        )
    return out


def _local_only(route) -> None:
    """Let 127.0.0.1 through; refuse everything else, as on a machine with no network."""
    if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
        route.continue_()
    else:
        route.abort()


def run(site: Path, floor: Path, opens: int, moves: int, timeout_s: float) -> dict:
    """Serve both exports and drive them, interleaved, in one offline chromium: ``run_versus_floor``'s figures."""
    from playwright.sync_api import sync_playwright

    with static_server(site) as app_url, static_server(floor) as floor_url, sync_playwright() as p:
        browser = launch_chromium(p, extra_args=("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",))
        context = browser.new_context(viewport=VIEWPORT, service_workers="block")
        context.route("**/*", _local_only)
        try:
            return run_versus_floor(context.new_page, app_url, floor_url, opens, moves, timeout_s)
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    """Export the floor, run the comparison and print the report."""
    ap = argparse.ArgumentParser(prog="python -m explorer.bench.wasm_page", description=__doc__.split("\n")[0])
    ap.add_argument("--site", type=Path, required=True, help="the app's WASM export (its index.html at the top)")
    ap.add_argument("--mirror", type=Path, required=True, help="the Pyodide mirror (.ci/wasm/build_mirror.sh)")
    ap.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout whose .ci/wasm exports the floor")
    ap.add_argument("--opens", type=int, default=3, help="opens of each page (the first cold)")
    ap.add_argument("--moves", type=int, default=8, help="context slider moves on each page")
    ap.add_argument("--timeout-s", type=float, default=START_S)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if why := missing_browser():
        print(f"cannot run the WASM page benchmark: {why}", file=sys.stderr)
        return 2
    if not (args.site / "index.html").exists():
        print(f"no WASM export at {args.site} (.ci/wasm/export.sh builds one)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        floor = export_floor(Path(tmp) / "floor", args.mirror.resolve(), args.root.resolve())
        result = run(args.site.resolve(), floor, args.opens, args.moves, args.timeout_s)
    print(versus_report(result, os.getloadavg()))
    if args.json:
        figures = {f: {"app": a, "floor": b} for f, a, b in versus_figures(result)}
        args.json.write_text(json.dumps({"site": str(args.site), "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
