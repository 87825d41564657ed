"""The resolution's deadline inside the HTTP library: every socket wait (connect, TLS, each read and write)
is cut to the time left, so a server that drips its status line or headers a byte at a time is stopped at
the deadline too.

The HTTP library bounds each wait (``timeout``), not a whole answer: a server sending one header byte every
2 s never trips a 10 s read timeout (issue 25: past 240 s with ``--timeout 5``). :class:`DeadlineBackend`
wraps the connection pool's network backend; :func:`bounded_by` sets, for the calling thread, the
``time.monotonic()`` by which every wait must end. Past it a wait raises the library's own ``ReadTimeout``
(``ConnectTimeout`` while connecting), which :func:`explorer.sources.hub.errors.hub_errors` turns into a
typed timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2

__all__ = ["DeadlineBackend", "bounded_by"]

_local = threading.local()


@contextmanager
def bounded_by(deadline: float | None) -> Iterator[None]:
    """Every socket wait of this thread ends by ``deadline`` (a ``time.monotonic()``; None: no bound)."""
    before = getattr(_local, "deadline", None)
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = before


def _bounded(timeout: float | None, error: type[Exception] = httpcore2.ReadTimeout) -> float | None:
    """``timeout`` cut to the time left before this thread's deadline; ``error`` when none is left."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the deadline passed while the server was still answering")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    """A network stream whose every wait ends by the thread's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout, httpcore2.ConnectTimeout))
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore2.NetworkBackend):
    """A network backend (``inner``, the library's own) whose streams end every wait by the thread's deadline."""

    def __init__(self, inner: httpcore2.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        bounded = _bounded(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        bounded = _bounded(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
