"""The writes of a first read, before any cache file exists: a journal beside it, kept without duckdb.

A first ``explorer shape ORG/NAME`` finds no cache file: nothing cached could
answer it, and importing duckdb and creating the file would cost more CPU
(about 0.2 s, and 60 MiB) than the Hub's answers. Such a process appends each
write instead (one transaction: what it holds and its statements) as one JSON
line to ``cache.duckdb.journal``, beside the file, and never imports duckdb.
The next process that opens the cache file replays the journal into it
(:meth:`explorer.sources.cache.store.Cache.open`), each line in its own
transaction and in order, then deletes it. A process that cannot create the
file (a read-only file system) reads the journal into memory instead.

Safety, as the DuckDB file's own:

- a line is one ``os.write`` on a file opened to append, so the lines of two
  processes never interleave; a process killed mid-line leaves a torn last
  line, which replay skips: the listing (and the branch mapping with it) is
  written last, so a torn line is a miss, never half an answer;
- replay first claims the journal by renaming it (atomic), so two processes
  never replay one line twice, and a writer that comes later starts a new one;
- only the statements the cache itself writes are replayed (a ``DELETE`` or an
  ``INSERT`` of a data table, in the forms of :mod:`explorer.sources.cache.sql`);
  a line holding any other SQL is dropped whole, so a file planted beside the
  cache runs nothing else;
- no token: the statements hold what the cache stores, which never includes one.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence

from explorer.sources.cache.schema import DATA_TABLES
from explorer.sources.cache.sql import FILES_INSERT, Statement

__all__ = ["append", "claim", "exists", "journal_path", "present", "read"]

_DELETE = re.compile(r"DELETE FROM (\w+) WHERE (?:\w+ = \? AND )*endpoint = \?")
_INSERT = re.compile(r"INSERT INTO (\w+) VALUES \(\?(?:, \?)*\)")


def journal_path(db_path: str) -> str:
    """Where the journal of the cache file ``db_path`` lives: beside it."""
    return db_path + ".journal"


def exists(db_path: str) -> bool:
    """Whether writes wait in a journal for the cache file ``db_path``."""
    return os.path.exists(journal_path(db_path))


def present(db_path: str) -> bool:
    """Whether there is a cache at ``db_path`` (not ``:memory:``): its file, or a journal of writes for it."""
    return os.path.exists(db_path) or exists(db_path)


def append(db_path: str, what: str, statements: Sequence[Statement]) -> bool:
    """Append one transaction (``what`` it holds, its statements) to the journal; False when it cannot be written
    (no folder can be made, a full disk): the read goes on uncached."""
    line = json.dumps({"what": what, "statements": [[text, params] for text, params in statements]}, allow_nan=True)
    data = (line + "\n").encode("utf-8")
    try:
        os.makedirs(os.path.dirname(db_path) or ".", exist_ok=True)
        fd = os.open(journal_path(db_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        return False
    return written == len(data)


def claim(db_path: str) -> list[tuple[str, list[Statement]]]:
    """Take the journal (renamed, read, deleted) and return its whole, well-formed transactions in order.

    Empty when there is none or another process claimed it first. A torn or foreign line is left out.
    """
    path = journal_path(db_path)
    taken = f"{path}.replaying-{os.getpid()}"
    try:
        os.rename(path, taken)
    except OSError:
        return []
    try:
        return _entries(taken)
    finally:
        try:
            os.unlink(taken)
        except OSError:
            pass


def read(db_path: str) -> list[tuple[str, list[Statement]]]:
    """The journal's whole, well-formed transactions in order, left where it is (for a reader that cannot write
    the file: a read-only file system)."""
    return _entries(journal_path(db_path))


def _entries(path: str) -> list[tuple[str, list[Statement]]]:
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return []
    return [entry for line in lines if (entry := _entry(line)) is not None]


def _entry(line: bytes) -> tuple[str, list[Statement]] | None:
    """One line's transaction, or None when it is torn, malformed or holds SQL the cache does not write."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("what"), str):
        return None
    statements = doc.get("statements")
    if not isinstance(statements, list) or not statements:
        return None
    out: list[Statement] = []
    for item in statements:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list) and _ours(item[0])):
            return None
        out.append((item[0], item[1]))
    return doc["what"], out


def _ours(text: object) -> bool:
    """Whether ``text`` is a statement the cache writes: a DELETE or INSERT of a data table."""
    if text == FILES_INSERT:
        return True
    if not isinstance(text, str):
        return False
    m = _DELETE.fullmatch(text) or _INSERT.fullmatch(text)
    return m is not None and m[1] in DATA_TABLES
