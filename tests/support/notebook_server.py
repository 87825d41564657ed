"""Helpers for the browser tests: a `marimo run` server, a static file server, chromium via playwright.

- :func:`marimo_app` starts ``marimo run NOTEBOOK --headless --no-token`` on a free
  127.0.0.1 port and waits until it answers; the process is stopped (by its id) on exit.
- :func:`static_server` serves a folder on 127.0.0.1 with ``Access-Control-Allow-Origin: *``
  (the exported page loads its scripts as CORS modules).
- :func:`chromium` launches Debian's ``/usr/bin/chromium`` through playwright, or skips the
  test with the reason when either is missing (never a silent pass).
- :func:`marimo_static_dir` is the marimo package's bundled frontend (``marimo/_static``);
  :func:`localise_export` points an exported page's CDN asset URLs at a local copy of it.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.corpus import ROOT

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: the CDN prefix `marimo export html` writes before every asset
CDN_PREFIX = re.compile(r"https://cdn\.jsdelivr\.net/npm/@marimo-team/frontend@[^/\"']+/dist/")


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
def marimo_app(notebook: Path, *, timeout_s: float = 60, env: dict | None = None) -> Iterator[str]:
    """``marimo run`` the notebook headless without token auth; yields its URL."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "marimo",
        "-q",
        "run",
        str(notebook),
        "--headless",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-token",
    ]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    log = open(os.devnull, "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(url):
            if proc.poll() is not None:
                raise RuntimeError(f"marimo run exited with {proc.returncode}: {' '.join(cmd)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"marimo run did not answer on {url} within {timeout_s:.0f} s")
            time.sleep(0.3)
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


class _CORSHandler(http.server.SimpleHTTPRequestHandler):
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
    """Serve ``folder`` on 127.0.0.1 (CORS open); yields the base URL ending in ``/``."""
    handler = functools.partial(_CORSHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def marimo_static_dir() -> Path:
    """The installed marimo's bundled frontend (index.html and assets/)."""
    import marimo

    folder = Path(marimo.__file__).parent / "_static"
    if not (folder / "assets").is_dir():
        pytest.skip(f"marimo's bundled frontend is not at {folder}")
    return folder


def localise_export(page: str, base_url: str) -> str:
    """An exported page with its CDN asset prefix replaced by ``base_url`` (which ends in ``/``)."""
    return CDN_PREFIX.sub(base_url, page)


def copy_assets(dest: Path) -> Path:
    """Copy marimo's bundled frontend into ``dest`` (to publish a page with its assets beside it)."""
    shutil.copytree(marimo_static_dir(), dest, dirs_exist_ok=True)
    return dest


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless chromium browser (playwright), or ``pytest.skip`` naming what is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run installs it)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
