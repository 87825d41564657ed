"""EDGE: the calibrations ``explorer check --calibrate`` stores, one per engine and card class, in the cache file.

A calibration is the user's own measurement (:class:`~explorer.engines.calibration.Calibration`),
not a Hub fact: ``explorer cache clear`` keeps it, ``explorer cache clear
--calibrations`` drops it. A cache file made before the table existed reads as
having none.
"""

from __future__ import annotations

import dataclasses
import json

from explorer.engines.calibration import Calibration
from explorer.errors import CacheError, ExplorerError
from explorer.limits import load_json
from explorer.sources.cache.schema import CALIBRATIONS
from explorer.sources.cache.store import Cache

_FIELDS = {f.name for f in dataclasses.fields(Calibration)}


def put_calibration(cache: Cache, calibration: Calibration) -> bool:
    """Store ``calibration``, replacing the one of the same engine and card class; False when it cannot be
    written now (never queued: the user is told at once, see :meth:`Cache._write`)."""
    key = [calibration.engine, calibration.gpu_class]
    record = json.dumps(dataclasses.asdict(calibration), sort_keys=True)
    return cache._write(
        "a calibration",
        [
            (f"DELETE FROM {CALIBRATIONS} WHERE engine = ? AND gpu_class = ?", key),
            (f"INSERT INTO {CALIBRATIONS} VALUES (?, ?, ?, ?)", [*key, record, cache._clock()]),
        ],
        queue=False,
    )


def _has_table(cache: Cache) -> bool:
    rows = cache._rows("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [CALIBRATIONS])
    return bool(rows) and rows[0][0] > 0


def load_calibrations(cache: Cache) -> tuple[Calibration, ...]:
    """Every stored calibration, by engine and card class; rows of another explorer's making, or that fail
    their checks (not JSON, nested too deep, a figure negative or not finite), are skipped."""
    if not _has_table(cache):
        return ()
    out = []
    for (text,) in cache._rows(f"SELECT record FROM {CALIBRATIONS} ORDER BY engine, gpu_class", []):
        try:
            fields = load_json(text, where="a stored calibration", error=CacheError)
            out.append(Calibration(**{k: v for k, v in fields.items() if k in _FIELDS}))
        except (ExplorerError, AttributeError, TypeError, ValueError):
            continue
    return tuple(out)


def clear_calibrations(cache: Cache) -> int:
    """Drop every calibration; how many there were (0 when the cache is read-only)."""
    count = len(load_calibrations(cache))
    if count and not cache._write("a clear of the calibrations", [(f"DELETE FROM {CALIBRATIONS}", [])], queue=False):
        return 0
    return count


def stored_calibrations(path: str | None = None) -> tuple[Calibration, ...]:
    """The calibrations in the cache at ``path`` (default: the cache file), read-only; none without a file."""
    with Cache.open(path, read_only=True) as cache:
        return load_calibrations(cache)
