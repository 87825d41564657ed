"""The app's cache of context sweeps: a slider move re-plans, but the drawn curves rarely change.

A sweep re-checks the top options at a dozen contexts; the asked context does
not change an option's curve, so :data:`SWEEPS` keeps the last few curves, one
an option, keyed on (shape identity, what a re-check of the option reads:
``plan_rows._curve_key``, the request with its context blanked, the contexts,
whether speed is drawn). A move that ranks one new option among the drawn ones
re-checks only that one. `marimo run` serves its sessions from threads of one
process, so the cache takes a lock; it hands out copies, so no caller can
change what another sees.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

Rows = list[dict[str, Any]]


class SweepCache:
    """The last ``kept`` sweeps, least recently used dropped first; thread-safe."""

    def __init__(self, kept: int = 32) -> None:
        self._kept = kept
        self._rows: OrderedDict[Hashable, Rows] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Rows | None:
        """A copy of the rows kept under ``key``, or None."""
        with self._lock:
            rows = self._rows.get(key)
            if rows is None:
                return None
            self._rows.move_to_end(key)
            return [dict(r) for r in rows]

    def put(self, key: Hashable, rows: Rows) -> Rows:
        """Keep ``rows`` under ``key``; returns a copy for the caller."""
        with self._lock:
            self._rows[key] = [dict(r) for r in rows]
            while len(self._rows) > self._kept:
                self._rows.popitem(last=False)
        return [dict(r) for r in rows]

    def __len__(self) -> int:
        """How many entries are kept."""
        with self._lock:
            return len(self._rows)

    def clear(self) -> None:
        """Forget every sweep."""
        with self._lock:
            self._rows.clear()


#: the process's sweep cache: a sweep draws up to six options (the best four, two misses), so the curves of about
#: thirty sweeps
SWEEPS = SweepCache(kept=192)
