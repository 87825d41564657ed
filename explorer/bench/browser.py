"""A notebook in a real browser, for the app benchmark and the browser tests: a ``marimo run`` server,
a static file server, and Debian's chromium through playwright.

- :func:`marimo_server` starts ``marimo run NOTEBOOK --headless --no-token`` on a free
  127.0.0.1 port and waits until it answers; the process group it started is stopped on exit.
- :func:`static_server` serves a folder on 127.0.0.1 (CORS open, ``.mjs`` and ``.wasm`` typed,
  as a static host such as GitHub Pages serves them).
- :func:`launch_chromium` starts ``/usr/bin/chromium`` (or ``$EXPLORER_CHROMIUM``) through
  playwright; ``playwright install`` is never needed. :func:`missing_browser` says what is absent.
- :data:`DEEP_QUERY` finds elements inside shadow roots too (marimo draws charts in them).

playwright is imported only by :func:`launch_chromium`'s caller (it comes with the test extra).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "DEEP_QUERY",
    "free_port",
    "launch_chromium",
    "marimo_server",
    "missing_browser",
    "static_server",
]

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
#: a JS function ``(selector) => [elements]`` that also looks inside every shadow root
DEEP_QUERY = """(sel) => { const out = []; const walk = (root) => {
  root.querySelectorAll(sel).forEach((e) => out.push(e));
  root.querySelectorAll('*').forEach((e) => { if (e.shadowRoot) walk(e.shadowRoot); }); };
  walk(document); return out; }"""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def marimo_server(
    notebook: Path,
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
    timeout_s: float = 60,
    args: tuple[str, ...] = (),
) -> Iterator[str]:
    """``marimo run`` the notebook headless without token auth (offline unless ``env`` says otherwise); yields its URL.

    ``args`` go after ``--`` (the notebook's own command-line arguments).
    """
    port = free_port()
    cmd = [python, "-m", "marimo", "-q", "run", str(notebook), "--headless", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--no-token"] + (["--", *args] if args else [])
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    log = open(os.devnull, "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(url):
            if proc.poll() is not None:
                raise RuntimeError(f"marimo run exited with {proc.returncode}: {' '.join(cmd)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"marimo run did not answer on {url} within {timeout_s:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the group this Popen started, nothing else
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


class _StaticHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
        ".whl": "application/octet-stream",
    }

    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass

    def handle(self) -> None:  # a page that stops loading mid-file is not an error
        with contextlib.suppress(ConnectionError):
            super().handle()


@contextlib.contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1; yields the base URL ending in ``/``."""
    handler = functools.partial(_StaticHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def missing_browser() -> str | None:
    """Why a browser cannot be driven here (playwright or chromium absent), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run installs it)"
    return None


def launch_chromium(playwright, *, extra_args: tuple[str, ...] = ()):
    """A headless chromium from a started ``sync_playwright()`` (or async) object."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args])
