"""The app's expensive calls off the visitor's thread, with a deadline (issue 25).

A ``marimo run`` server runs every visitor's session in one process. A plan, a context sweep, the
hardware-first list, an engine-log check or a Fetch that runs long would hold that visitor's session, and
(CPU-bound) slow every other. :func:`within_deadline` runs such a call on a small shared pool of worker
threads and waits for it at most a deadline: the answer, or :class:`~explorer.errors.ActionDeadlineError`
("… took longer than 30 s"), which the app shows as a callout. The session is free again at the deadline.

Python cannot stop a thread: a call past its deadline runs on to its end in its worker (bounded by the
paste caps and the planner's own limits), and the pool's size bounds how many such calls run at once; a
call still queued at its deadline is cancelled and never runs. The WASM page has no threads and the
owner's app needs no deadline: there ``seconds`` is None and the call runs inline.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from explorer.errors import ActionDeadlineError

__all__ = ["ACTION_WORKERS", "within_deadline"]

#: the most expensive calls that run at once in one server (the rest wait, within their own deadlines)
ACTION_WORKERS = 4

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    """The server's one pool, made on first use (so importing this module starts no thread)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=ACTION_WORKERS, thread_name_prefix="explorer-action")
        return _pool


def within_deadline(call: Callable[[], T], *, what: str, seconds: float | None) -> T:
    """``call()``'s value, computed on the shared pool and waited for at most ``seconds``.

    ``what`` names the action in the message ("the plan"); ``seconds`` None runs ``call`` inline (the WASM
    page, the owner's app). The caller's context variables (the visitor's secret scope) go with the call;
    its exceptions are raised here as they are.

    Raises:
        ActionDeadlineError: ``call`` did not end within ``seconds``.
    """
    if seconds is None:
        return call()
    future = _shared_pool().submit(contextvars.copy_context().run, call)
    try:
        return future.result(timeout=seconds)
    except FutureTimeout:
        future.cancel()  # a call still queued never starts; a running one ends in its worker
        raise ActionDeadlineError(
            f"{what} took longer than {seconds:g} s, the most this server gives one action",
            hint="try a smaller cluster, fewer weights or a shorter paste",
        ) from None
