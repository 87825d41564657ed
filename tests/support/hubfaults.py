"""Faults the test Hub (``hubserver``) can inject, one :class:`Fault` per mode, for the requests a regex names.

``server.fault(mode, routes=REGEX, ...)`` (a context manager) arms one; the
first ``times`` matching requests (all, by default) get it, the others are
answered as usual. Modes, each a way a real Hub, proxy or CDN has failed:

- ``html``: 200 with an HTML page (a captive portal, a proxy's login page);
- ``not-utf8``: 200 with bytes that are not UTF-8;
- ``redirect-loop``: 302 to the same URL, for ever;
- ``drip``: 200 whose body comes one byte every ``drip_s`` seconds (a stalled
  proxy); ``Content-Length`` promises a megabyte;
- ``short-range``: a range request is answered 206 with only ``short_bytes``
  bytes of it (``Content-Range`` says so honestly);
- ``status``: the ``status`` given (429, 503, 401, 403, 404, 500…) with the
  ``headers`` given (``Retry-After``), a JSON body and huggingface_hub's
  ``X-Error-Code`` for 401/403/404;
- ``endless``: the ``status`` given (404, 500, 302 with a Location to itself) with a body that never ends
  (chunks of JSON-ish bytes until the client hangs up);
- ``gzip-bomb``: the ``status`` given with ``Content-Encoding: gzip`` and a 256 KiB body that decodes to
  256 MiB of zeros;
- ``drip-headers``: the status line, then the headers one byte every ``drip_s`` seconds.

Standard library only, like the server. PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import functools
import gzip
import io
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal[
    "html", "not-utf8", "redirect-loop", "drip", "short-range", "status", "endless", "gzip-bomb", "drip-headers"
]
MODES: tuple[str, ...] = (
    "html", "not-utf8", "redirect-loop", "drip", "short-range", "status", "endless", "gzip-bomb", "drip-headers"
)  # fmt: skip
#: what a gzip bomb decodes to (bytes of zeros); its body is about a thousandth of it
BOMB_DECODED_BYTES = 256 * 1024 * 1024

#: X-Error-Code huggingface_hub reads for each status (utils/_http.py hf_raise_for_status)
_ERROR_CODES = {401: "GatedRepo", 403: "GatedRepo", 404: "EntryNotFound"}


@dataclass
class Fault:
    """One armed fault.

    Attributes:
        mode: what goes wrong (see the module docstring).
        routes: the URL paths it applies to.
        times: how many matching requests get it (None: every one).
        status: the status of ``status`` mode.
        headers: extra headers of ``status`` mode (``{"Retry-After": "1"}``).
        drip_s: seconds between bytes in ``drip`` mode.
        short_bytes: bytes a ``short-range`` answer carries.
        hits: matching requests that got it so far.
    """

    mode: Mode
    routes: re.Pattern
    times: int | None = None
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    drip_s: float = 2.0
    short_bytes: int = 16
    hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, path: str) -> bool:
        """Whether this request gets the fault (and count it)."""
        if not self.routes.search(path):
            return False
        with self._lock:
            if self.times is not None and self.hits >= self.times:
                return False
            self.hits += 1
            return True


def apply(handler, fault: Fault, stop: threading.Event) -> bool:
    """Answer ``handler``'s request with ``fault``; True when answered, False to let the server answer
    (``short-range`` only narrows the request's Range and lets the server answer it)."""
    if fault.mode == "short-range":
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", (handler.headers.get("Range") or "").strip())
        if m:
            start = int(m.group(1))
            end = start + fault.short_bytes - 1
            if m.group(2):
                end = min(end, int(m.group(2)))
            handler.headers.replace_header("Range", f"bytes={start}-{end}")
        return False
    if fault.mode == "html":
        page = b"<!doctype html><html><body><h1>Sign in to the network</h1></body></html>"
        handler._send(200, page, ctype="text/html; charset=utf-8")
    elif fault.mode == "not-utf8":
        handler._send(200, b"\xff\xfe\xfa{\x80\x81 not text \xc3\x28", ctype="application/json")
    elif fault.mode == "redirect-loop":
        handler._send(302, b"", {"Location": handler.path})
    elif fault.mode == "status":
        code = _ERROR_CODES.get(fault.status)
        extra = {"X-Error-Code": code, "X-Error-Message": f"fault {fault.status}"} if code else {}
        handler._json({"error": f"fault {fault.status}"}, fault.status, {**extra, **fault.headers})
    elif fault.mode == "drip":
        _drip(handler, fault, stop)
    elif fault.mode == "endless":
        _endless(handler, fault, stop)
    elif fault.mode == "gzip-bomb":
        _head(handler, fault, {"Content-Encoding": "gzip", "Content-Length": str(len(_bomb()))})
        handler._write(_bomb())
    elif fault.mode == "drip-headers":
        _drip_headers(handler, fault, stop)
    return True


@functools.cache
def _bomb() -> bytes:
    """gzip of BOMB_DECODED_BYTES zeros (made once, about 1 s)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as g:
        block = bytes(1 << 20)
        for _ in range(BOMB_DECODED_BYTES >> 20):
            g.write(block)
    return out.getvalue()


def _head(handler, fault: Fault, headers: dict[str, str]) -> None:
    """The fault's status (a 302 to the same path) and ``headers``, the connection closed after the answer."""
    handler.send_response(fault.status)
    if fault.status in (301, 302, 303, 307, 308):
        handler.send_header("Location", handler.path)
    handler.send_header("Content-Type", "application/json")
    for k, v in headers.items():
        handler.send_header(k, v)
    handler.end_headers()
    handler.close_connection = True


def _endless(handler, fault: Fault, stop: threading.Event) -> None:
    """A body with no length that goes on until the client hangs up (or 1 GiB, or the server stops)."""
    _head(handler, fault, {})
    chunk = b'{"error": "' + b"x" * 65_000
    for _ in range((1 << 30) // len(chunk)):
        if stop.is_set():
            return
        try:
            handler._write(chunk)
        except OSError:
            return


def _drip_headers(handler, fault: Fault, stop: threading.Event) -> None:
    """The status line at once, then 4 kB of headers one byte every ``drip_s``."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
    handler.wfile.flush()
    handler.close_connection = True
    for byte in b"X-Slow: " + b"a" * 4096:
        try:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
        except OSError:
            return
        deadline = time.monotonic() + fault.drip_s
        while time.monotonic() < deadline:
            if stop.is_set():
                return
            time.sleep(0.02)


def _drip(handler, fault: Fault, stop: threading.Event) -> None:
    """Status and headers at once, then one byte every ``drip_s`` until the client hangs up or the server stops."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(1 << 20))
    handler.end_headers()
    handler.close_connection = True
    body = b'{"sha": "' + b"0" * (1 << 20)
    for i in range(len(body)):
        handler._write(body[i : i + 1])
        handler.wfile.flush()
        deadline = time.monotonic() + fault.drip_s
        while time.monotonic() < deadline:
            if stop.is_set():
                return
            time.sleep(0.02)
