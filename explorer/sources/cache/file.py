"""Opening the cache file, and degrading instead of failing.

DuckDB lets one process open a file for writing, and while it does, no other
process can open it at all (read-only included: the lock is exclusive). So a
second explorer process retries for a short while with backoff, then reads a
copy of the file as of its last checkpoint and queues its writes for later
(:func:`connect_for_writing` waits for the lock again when they are written).

Only a file explorer made is ever changed:

- a file that is not DuckDB (its bytes 8 to 12 are not ``DUCK``), or a DuckDB
  database without explorer's ``meta`` table, is another program's: refused
  with a CacheError, left as it is;
- a DuckDB file DuckDB cannot read, or one shorter than the blocks it uses
  (:func:`check_intact`, on every open), is a damaged cache: moved aside
  (``cache.duckdb.corrupt-<time>``) and rebuilt (read-only: not used);
- a file of a newer schema version (a newer explorer's) is not used and left
  as it is; an older one is rebuilt empty when opened for writing;
- a file on a read-only file system (or one that cannot be opened for
  writing for want of permission) is opened read-only: it is still read.

Each degradation warns with :class:`CacheWarning`.
"""

from __future__ import annotations

import os
import random
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from explorer.errors import CacheError
from explorer.sources.cache.schema import (
    CALIBRATION_COLUMNS,
    CALIBRATIONS,
    CREATED_BY,
    DATA_TABLES,
    SCHEMA_VERSION,
    TABLES,
)

LOCK_WAIT_S = 2.0
#: DuckDB's words when another process (or, with other settings, this one) holds the file
_LOCKED = ("could not set lock", "conflicting lock", "different configuration than existing connections")
#: DuckDB's words for a damaged file; anything else (a directory, no permission) is not moved aside
_CORRUPT = ("not a valid duckdb database file", "corrupt", "checksum", "could not read enough bytes", "serializ", "wal")
#: DuckDB's (and the system's) words for a file that may be read but not written
_READ_ONLY_FS = ("read-only file system", "permission denied")
#: where a DuckDB file says what it is: bytes 8 to 12 of its main header
DUCKDB_MAGIC = (8, b"DUCK")

Mode = Literal["read-write", "read-only", "snapshot", "disabled", "journal"]


class CacheWarning(UserWarning):
    """The cache is degraded (locked by another process, corrupt, unwritable); explorer goes on without it."""


@dataclass(slots=True)
class Opened:
    """What :func:`open_connection` got.

    Attributes:
        con: the DuckDB connection, or None when ``mode`` is ``disabled``.
        mode: ``read-write``; ``read-only`` (asked for, or the other process only
            reads); ``snapshot`` (a copy of a file another process writes);
            ``disabled`` (nothing could be opened: reads miss, writes are no-ops).
        tmp: a temporary folder holding the snapshot copy, to delete on close.
        why: why it is not ``read-write``: ``asked``, ``locked`` (another process holds it),
            ``read-only file system``, ``absent`` or the error met; empty when it is.
    """

    con: Any
    mode: Mode
    tmp: str | None = None
    why: str = ""


def is_lock_error(e: Exception) -> bool:
    return any(s in str(e).lower() for s in _LOCKED)


def is_corrupt_error(e: Exception) -> bool:
    return any(s in f"{type(e).__name__} {e}".lower() for s in _CORRUPT)


def is_read_only_error(e: Exception) -> bool:
    return any(s in str(e).lower() for s in _READ_ONLY_FS)


def refuse_foreign_file(p: str) -> None:
    """Raise CacheError when ``p`` is a file that is not a DuckDB database (explorer makes only those)."""
    try:
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            return
        with open(p, "rb") as f:
            head = f.read(DUCKDB_MAGIC[0] + len(DUCKDB_MAGIC[1]))
    except OSError:
        return  # unreadable: DuckDB's own error says why
    if head[DUCKDB_MAGIC[0] :] != DUCKDB_MAGIC[1]:
        raise CacheError(
            f"the cache path {p} holds a file that is not a DuckDB database, so explorer did not make it;"
            " it is left as it is",
            hint="set EXPLORER_CACHE (or --cache) to a new file's path, or move that file away",
        )


def _foreign_database(p: str) -> CacheError:
    return CacheError(
        f"the cache path {p} holds a DuckDB database that explorer did not make (no explorer meta table);"
        " it is left as it is",
        hint="set EXPLORER_CACHE (or --cache) to a new file's path",
    )


def open_connection(p: str, *, read_only: bool, lock_wait_s: float = LOCK_WAIT_S) -> Opened:
    """Connect to the cache at ``p`` (``:memory:`` allowed), degrading rather than failing.

    Raises:
        CacheError: ``p`` is another program's file (see the module docstring).
    """
    if read_only and p != ":memory:" and not os.path.exists(p):
        return Opened(None, "disabled", why="absent")  # no cache yet: nothing to warn about, nor duckdb to import
    refuse_foreign_file(p)
    import duckdb  # 0.15 s: paid only by a process that opens a cache file

    if p == ":memory:":
        con = duckdb.connect(":memory:")
        ensure_schema(con)
        return Opened(con, "read-only" if read_only else "read-write", why="asked" if read_only else "")
    if not read_only:
        try:
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            if not os.path.exists(p):
                warnings.warn(f"cache {p} cannot be created ({e.strerror}); going on without it", CacheWarning, 3)
                return Opened(None, "disabled", why=str(e.strerror))
    con = None
    try:
        con = _connect(p, read_only=read_only, wait_s=lock_wait_s)
        if not ours(con):
            con.close()
            raise _foreign_database(p)
        version = stored_schema_version(con)
        if version is not None and version > SCHEMA_VERSION:
            con.close()
            warnings.warn(
                f"cache {p} was written by a newer explorer (schema {version}; this one reads {SCHEMA_VERSION}):"
                " not used, and left as it is",
                CacheWarning,
                stacklevel=3,
            )
            return Opened(None, "disabled", why=f"a newer schema ({version})")
        if version is None or version == SCHEMA_VERSION:  # None: new, or its meta table cannot be read
            check_intact(con, p)  # a truncated or damaged file fails here, at open, not at a later lookup
        if not read_only:
            ensure_schema(con)
        elif version != SCHEMA_VERSION:
            con.close()
            return Opened(None, "disabled", why="an older schema")
        return Opened(con, "read-only" if read_only else "read-write", why="asked" if read_only else "")
    except duckdb.Error as e:
        if con is not None:
            con.close()  # a file that opened but fails to read: release it before moving it aside
        if is_lock_error(e):
            return _shared(p)
        if not read_only and is_read_only_error(e):
            return _read_only(p, e)
        if read_only or not is_corrupt_error(e):
            warnings.warn(f"cache {p} cannot be opened ({e}); going on without it", CacheWarning, stacklevel=3)
            return Opened(None, "disabled", why="damaged" if is_corrupt_error(e) else str(e))
        return _rebuild(p, e)


def _read_only(p: str, err: Exception) -> Opened:
    """The file cannot be written (a read-only file system, no permission): read it, write nothing."""
    import duckdb

    why = "read-only file system" if "read-only file system" in str(err).lower() else "no permission to write it"
    try:
        con = duckdb.connect(p, read_only=True)
    except duckdb.Error as e:
        warnings.warn(f"cache {p} cannot be opened ({e}); going on without it", CacheWarning, stacklevel=4)
        return Opened(None, "disabled", why=why)
    if not schema_ok(con):
        con.close()
        return Opened(None, "disabled", why=why)
    warnings.warn(f"cache {p} cannot be written ({why}); reading it without writing", CacheWarning, stacklevel=4)
    return Opened(con, "read-only", why=why)


def connect_for_writing(p: str, *, wait_s: float):
    """A read-write connection to an existing cache file, waiting up to ``wait_s`` for another process's lock;
    None when the lock stayed held (or the file cannot be written)."""
    import duckdb

    try:
        con = _connect(p, read_only=False, wait_s=wait_s)
    except duckdb.Error:
        return None
    if not schema_ok(con):
        con.close()
        return None
    return con


def _connect(p: str, *, read_only: bool, wait_s: float):
    """Connect, retrying while another process holds the lock: waits of 10 ms doubling to 100 ms, each
    stretched by a random 0 to 50 % so that processes waiting together do not retry in step."""
    import duckdb

    deadline, delay = time.monotonic() + wait_s, 0.01
    while True:
        try:
            return duckdb.connect(p, read_only=read_only)
        except duckdb.Error as e:
            other_process = any(s in str(e).lower() for s in _LOCKED[:2])  # worth waiting for
            left = deadline - time.monotonic()
            if not other_process or left <= 0:
                raise
        time.sleep(min(delay * (1 + random.random() / 2), left))  # the last wait lands on the deadline
        delay = min(delay * 2, 0.1)


def _shared(p: str) -> Opened:
    """Another process holds the file: open it read-only, else a copy of it; never write."""
    import duckdb

    opened = Opened(None, "disabled", why="locked")
    try:
        opened = Opened(duckdb.connect(p, read_only=True), "read-only", why="locked")
    except duckdb.Error:
        import tempfile  # only here, for the rare copy of a file another process holds

        tmp = tempfile.mkdtemp(prefix="explorer-cache-")
        try:
            shutil.copyfile(p, os.path.join(tmp, "cache.duckdb"))  # the WAL stays behind: last checkpoint only
            opened = Opened(
                duckdb.connect(os.path.join(tmp, "cache.duckdb"), read_only=True), "snapshot", tmp, "locked"
            )
        except (OSError, duckdb.Error):
            shutil.rmtree(tmp, ignore_errors=True)
    if opened.con is not None and not schema_ok(opened.con):
        opened.con.close()
        opened = Opened(None, "disabled", opened.tmp, "locked")
    warnings.warn(
        f"cache {p} is in use by another explorer process; reading it ({opened.mode}) without writing",
        CacheWarning,
        stacklevel=4,
    )
    return opened


def _rebuild(p: str, err: Exception) -> Opened:
    """Move an unreadable file (and its WAL) aside and start a new one."""
    import duckdb

    aside = move_aside(p, "corrupt")
    warnings.warn(f"cache {p} was unreadable ({err}); moved it to {aside} and started anew", CacheWarning, 4)
    try:
        con = duckdb.connect(p)
        ensure_schema(con)
    except duckdb.Error as e:
        raise CacheError(f"cannot create the cache at {p}: {e}", hint="set EXPLORER_CACHE to a writable path") from e
    return Opened(con, "read-write")


def move_aside(p: str, tag: str) -> str:
    """Rename the cache file (and its WAL) to ``<p>.<tag>-<time>-<pid>``, keeping it; the new name."""
    aside = f"{p}.{tag}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    for suffix in ("", ".wal"):
        if os.path.exists(p + suffix):
            os.replace(p + suffix, aside + suffix)
    return aside


#: DuckDB's (and the system's) words for a write that found no room
_NO_ROOM = ("no space left", "disk full", "not enough space", "could not write", "file too large")


def is_no_room_error(e: BaseException) -> bool:
    """Whether a write failed for want of disk space (or a file-size limit)."""
    return any(s in str(e).lower() for s in _NO_ROOM)


def ours(con) -> bool:
    """Whether an opened file is explorer's: empty (just created), or holding explorer's ``meta`` table."""
    import duckdb

    try:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    except duckdb.Error:
        return True  # cannot even list its tables: a damaged file, handled as such
    return not tables or "meta" in tables


def stored_schema_version(con) -> int | None:
    """The schema version the file says it holds; None when it says none (a new file, or another's)."""
    import duckdb

    try:
        rows = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    except duckdb.Error:
        return None
    try:
        return int(rows[0][0]) if rows else None
    except (TypeError, ValueError):
        return None


def schema_ok(con) -> bool:
    """Whether the file holds this version's schema."""
    return stored_schema_version(con) == SCHEMA_VERSION


#: the bytes before a DuckDB file's first block (its main header and two database headers of 4 KiB)
_DUCKDB_HEADER_BYTES = 3 * 4096


def check_intact(con, p: str) -> None:
    """Raise ``duckdb.IOException`` (a damaged file, moved aside by the caller) when the file is shorter than
    the blocks DuckDB says it uses, or ends inside a block: a truncated cache (issue 25: one was reported
    healthy while every lookup of a row past the cut missed)."""
    import duckdb

    if p == ":memory:" or not os.path.isfile(p):
        return
    row = con.execute("PRAGMA database_size").fetchone()
    block_bytes, used_blocks = int(row[2]), int(row[4])
    data_bytes = os.path.getsize(p) - _DUCKDB_HEADER_BYTES
    # e.g. 5 used blocks of 262,144 bytes need a file of at least 12,288 + 1,310,720 bytes
    if used_blocks and (data_bytes < used_blocks * block_bytes or data_bytes % block_bytes):
        raise duckdb.IOException(
            f"corrupt: the file holds {data_bytes:,} bytes of blocks, but {used_blocks} blocks of"
            f" {block_bytes:,} bytes are in use (it was cut short)"
        )


def ensure_schema(con) -> None:
    """Create the tables, or drop and recreate them when the file has another schema version.

    The calibrations are the user's own measurements, not Hub facts: a rebuild keeps their table
    when it has this version's columns (a version 2 file's does), and creates it where it is missing.
    """
    if schema_ok(con):
        for t in DATA_TABLES:  # touch every table, so that a damaged file fails here, at open
            con.execute(f"SELECT count(*) FROM {t}").fetchall()
        con.execute(f"CREATE TABLE IF NOT EXISTS {CALIBRATIONS} ({TABLES[CALIBRATIONS]})")  # added after version 1
        return
    keep = _table_columns(con, CALIBRATIONS) == CALIBRATION_COLUMNS
    con.execute("BEGIN TRANSACTION")
    for t in TABLES:
        if t == CALIBRATIONS and keep:
            continue
        con.execute(f"DROP TABLE IF EXISTS {t}")
        con.execute(f"CREATE TABLE {t} ({TABLES[t]})")
    con.execute("INSERT INTO meta VALUES ('schema_version', ?), ('created_by', ?)", [str(SCHEMA_VERSION), CREATED_BY])
    con.execute("COMMIT")
    con.execute("CHECKPOINT")


def _table_columns(con, table: str) -> tuple[str, ...]:
    """The column names of ``table`` in the file, in order; empty when it has no such table."""
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [table]
    ).fetchall()
    return tuple(name for (name,) in rows)
