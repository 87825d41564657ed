"""A small read-only index beside the cache file: which revisions it maps, so an offline miss needs no duckdb.

``explorer shape ID --offline`` asks the cache first. Opening the DuckDB file
costs the duckdb import (about 0.19 s of CPU and 35 MiB) even when the cache
holds nothing of ``ID``, and the answer then comes from the shipped snapshot.
The index (``cache.duckdb.revisions.json``) lists every (endpoint, repo,
branch or tag) the file maps to a sha; when it says the asked one is absent,
the cache would have missed, and it is not opened.

An index is trusted only for the exact file it was made from: it carries the
file's size, modification time (ns) and inode, and no write-ahead log (nor a
journal of writes to replay) may be beside the file. Any write changes the file, so the stamp no longer matches
and the cache is opened as before. A process that opened the file read-only
(other processes then cannot write it) refreshes a stale index. It skips the
refresh while the file is less than :data:`SETTLED_S` old, so that a later
write within the same clock tick of the file system can never keep the stamp
(the way git treats a "racily clean" index).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from explorer.sources.cache import journal

#: a file modified more recently than this is not indexed (see the module docstring)
SETTLED_S = 2.0
_FORMAT = 1


def index_path(db_path: str) -> str:
    """Where the index of the cache file ``db_path`` lives: beside it."""
    return db_path + ".revisions.json"


def _stamp(db_path: str) -> list[int] | None:
    """(size, mtime ns, inode) of the file, or None when it is absent or has a write-ahead log or a journal
    (:mod:`explorer.sources.cache.journal`: writes the file does not hold yet) beside it."""
    try:
        st = os.stat(db_path)
    except OSError:
        return None
    if os.path.exists(db_path + ".wal") or journal.exists(db_path):
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _read(db_path: str) -> dict[str, Any] | None:
    try:
        with open(index_path(db_path), encoding="utf-8") as f:
            index = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(index, dict) or index.get("format") != _FORMAT or not isinstance(index.get("revisions"), dict):
        return None
    stamp = _stamp(db_path)
    return index if stamp is not None and index.get("stamp") == stamp else None


def known_absent(db_path: str, endpoint: str, repo: str, revision: str) -> bool:
    """True only when a current index says the file maps no ``revision`` of ``repo`` for ``endpoint``.

    False whenever it cannot say (no index, a stale or unreadable one): then the cache is opened.
    """
    index = _read(db_path)
    if index is None:
        return False
    repos = index["revisions"].get(endpoint)
    if not isinstance(repos, dict):
        return endpoint not in index["revisions"]
    revisions = repos.get(repo)
    return not isinstance(revisions, list) or revision not in revisions


def refresh(con: Any, db_path: str, *, now: float | None = None) -> bool:
    """Write the index of ``db_path`` from ``con`` (a read-only connection to it) unless a current one exists.

    Returns whether it wrote one. Never raises: the index only saves an import, and a cache that cannot
    be indexed is opened as before.
    """
    stamp = _stamp(db_path)
    if stamp is None or _read(db_path) is not None:
        return False
    if (time.time() if now is None else now) - stamp[1] / 1e9 < SETTLED_S:
        return False
    import duckdb  # loaded already: ``con`` is open

    try:
        rows = con.execute("SELECT endpoint, repo, revision FROM revisions").fetchall()
    except duckdb.Error:
        return False
    revisions: dict[str, dict[str, list[str]]] = {}
    for endpoint, repo, revision in rows:
        revisions.setdefault(endpoint, {}).setdefault(repo, []).append(revision)
    if _stamp(db_path) != stamp:
        return False
    text = json.dumps({"format": _FORMAT, "stamp": stamp, "revisions": revisions}, sort_keys=True)
    tmp = f"{index_path(db_path)}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, index_path(db_path))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True
