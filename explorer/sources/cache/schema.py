"""The cache's tables, and turning values into JSON the cache can store.

Every table is keyed by the Hub endpoint (``HF_ENDPOINT``: a mirror's answers
never mix with the Hub's), repo and resolved commit sha (and file name where a
repo has several), so a row never goes stale: only ``revisions`` (branch or
tag -> sha) and ``checkpoints`` (a model's quantised repos, keyed by endpoint
and repo: they grow) expire. ``calibrations`` holds the user's own
measurements (``explorer check --calibrate``), not Hub facts: it is keyed by
engine and card class, not by endpoint, and ``cache clear`` keeps it.

Bump :data:`SCHEMA_VERSION` when a table changes; an older file is then
rebuilt empty, but for its calibrations when their table has the same
columns. Version 3 keys every Hub-fact table, ``checkpoints`` included, by
endpoint; both earlier version 2 layouts (endpoint keys without
``checkpoints``; ``checkpoints`` and ``calibrations`` without endpoint keys)
are rebuilt, the latter keeping its calibrations. ``meta`` also holds :data:`CREATED_BY`, the mark of
a file explorer made.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping

from explorer.errors import CacheError
from explorer.limits import load_json

SCHEMA_VERSION = 3
#: ``meta``'s ``created_by`` value in every file explorer makes
CREATED_BY = "explorer"

#: arrays longer than this are stored as a summary (a GGUF vocabulary has 150k entries)
MAX_ARRAY_ITEMS = 64
#: how many leading items a summary keeps
SUMMARY_HEAD = 8

#: each data table's columns; the endpoint column (last, so rows are written as its key's last part) is added below
_COLUMNS: dict[str, tuple[str, str]] = {
    # repo facts at one commit; file_count lets a reader check the files rows are all there
    "repos": ("repo VARCHAR, sha VARCHAR, gated BOOLEAN, private BOOLEAN, file_count INTEGER, fetched_at DOUBLE",
              "repo, sha"),
    # branch, tag or sha -> sha, with the time it was learnt (seconds since the epoch)
    "revisions": ("repo VARCHAR, revision VARCHAR, sha VARCHAR, fetched_at DOUBLE", "repo, revision"),
    # idx keeps the Hub's order of the listing
    "files": ("repo VARCHAR, sha VARCHAR, idx INTEGER, path VARCHAR, size_bytes BIGINT, lfs BOOLEAN", "repo, sha, path"),
    "configs": ("repo VARCHAR, sha VARCHAR, filename VARCHAR, text VARCHAR, fetched_at DOUBLE", "repo, sha, filename"),
    # params_by_dtype and files are JSON objects: dtype -> count, file -> size in bytes
    "safetensors": ("repo VARCHAR, sha VARCHAR, total_params BIGINT, params_by_dtype VARCHAR, files VARCHAR,"
                    " fetched_at DOUBLE", "repo, sha"),
    # metadata and tensors are JSON (arrays summarised); header_bytes: bytes the header spans
    "gguf_headers": ("repo VARCHAR, sha VARCHAR, filename VARCHAR, metadata VARCHAR, tensors VARCHAR,"
                     " header_bytes BIGINT, file_size_bytes BIGINT, fetched_at DOUBLE", "repo, sha, filename"),
    # a base model's published quantised checkpoints (the Hub's model tree), a JSON list; expires like revisions
    "checkpoints": ("repo VARCHAR, entries VARCHAR, fetched_at DOUBLE", "repo"),
}  # fmt: skip

#: the calibrations table's columns (unchanged since version 2: a rebuild keeps a table that has exactly these)
_CALIBRATION_COLUMNS = (("engine", "VARCHAR"), ("gpu_class", "VARCHAR"), ("record", "VARCHAR"), ("stored_at", "DOUBLE"))
CALIBRATION_COLUMNS = tuple(name for name, _ in _CALIBRATION_COLUMNS)

TABLES: dict[str, str] = {
    "meta": "key VARCHAR PRIMARY KEY, value VARCHAR",
    **{t: f"{cols}, endpoint VARCHAR, PRIMARY KEY ({key}, endpoint)" for t, (cols, key) in _COLUMNS.items()},
    # constants measured from the user's engine logs (explorer check --calibrate): record is the JSON of an
    # explorer.engines.calibration.Calibration; not Hub facts, so `cache clear` keeps them and no endpoint keys them
    "calibrations": ", ".join(f"{name} {kind}" for name, kind in _CALIBRATION_COLUMNS)
    + ", PRIMARY KEY (engine, gpu_class)",
}

#: the user's own measurements: kept by `cache clear`, dropped by `cache clear --calibrations`
CALIBRATIONS = "calibrations"
#: tables holding cached Hub facts (all but meta and the calibrations), in the order info() and export() list them
DATA_TABLES = tuple(t for t in TABLES if t not in ("meta", CALIBRATIONS))
#: the Hub-fact tables whose rows belong to one commit (they have a sha column): a dropped entry's rows
SHA_TABLES = tuple(t for t, (cols, _) in _COLUMNS.items() if "sha VARCHAR" in cols)


def json_safe(value: object, *, max_items: int = MAX_ARRAY_ITEMS) -> object:
    """A JSON-storable copy of ``value``.

    Dataclasses become dicts, enums their names, bytes a hex string (or a
    summary when long), numpy scalars Python numbers, non-finite floats stay
    (Python's json writes NaN). A list or tuple longer than ``max_items``
    becomes ``{"__array__": True, "length": n, "head": [first items], "types": [...]}``.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name), max_items=max_items) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, max_items=max_items) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        return b.hex() if len(b) <= max_items else {"__bytes__": True, "length": len(b), "head": b[:SUMMARY_HEAD].hex()}
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return json_safe(value.item(), max_items=max_items)  # a numpy scalar
    if hasattr(value, "tolist") and callable(value.tolist):
        value = value.tolist()  # a numpy array
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if len(items) <= max_items:
            return [json_safe(v, max_items=max_items) for v in items]
        return {
            "__array__": True,
            "length": len(items),
            "head": [json_safe(v, max_items=max_items) for v in items[:SUMMARY_HEAD]],
            "types": sorted({type(v).__name__ for v in items}),
        }
    return repr(value)


def dumps(value: object) -> str:
    """JSON text of a JSON-safe value (NaN and Infinity written as Python's json does)."""
    return json.dumps(json_safe(value), separators=(",", ":"), allow_nan=True)


def loads(text: str | None) -> object:
    """Parse what :func:`dumps` wrote; CacheError for text that is not (bad JSON, nested too deep)."""
    return None if text is None else load_json(text, where="a cached record", error=CacheError)
