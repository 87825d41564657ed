"""The local cache of Hub facts: one DuckDB file, a thin adapter returning plain records.

Rows are keyed on (Hub endpoint, repo, resolved commit sha, file name) and
never go stale; only a branch or tag name's mapping to a sha expires, after
``ttl_s`` (24 h by default). A 40-hex sha resolves to itself and never
expires. A :class:`Cache` reads and writes the rows of one endpoint
(``HF_ENDPOINT``), so a mirror's answers and the Hub's never mix.

Where: ``path`` if given, else ``$EXPLORER_CACHE``, else
``$XDG_CACHE_HOME/explorer/cache.duckdb`` (``~/.cache/explorer/cache.duckdb``).
``":memory:"`` keeps it in memory.

Safety:
- every write is one transaction, rolled back on error, so a process killed
  mid-write (even with SIGKILL) leaves whole rows only: DuckDB replays its WAL;
- a second process finding the file locked retries for ``lock_wait_s``, then
  reads a copy of it as of its last checkpoint (writes are checkpointed at most
  a second apart) and queues its own writes: :meth:`Cache.close` takes the
  lock as soon as the other process lets it go (waiting at most
  ``flush_wait_s``) and writes them, so no fetched record is dropped; only
  past that wait are they given up, with a CacheWarning saying how many;
- a DuckDB file DuckDB cannot read is moved aside to ``cache.duckdb.corrupt-<time>``
  and rebuilt, with a warning; an older schema version of explorer's is
  rebuilt empty; any other file (not DuckDB, or another program's database)
  is refused with a CacheError and left alone; a file on a read-only file
  system is read (see :mod:`explorer.sources.cache.file`);
- no token is ever written: nothing here takes one.

Speed: one connection per Cache, held open; a hit is one or two point queries
(about 1 ms each), and rows found are remembered in memory (rows keyed by a
sha never change), so a repeated hit costs microseconds.

With :mod:`explorer.sources.cache.file`, the only modules that import duckdb, and only
once a file is opened: a cache that has no file yet, opened read-only, costs no import.
Errors surface as CacheError.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from explorer.artifacts.checkpoints import PublishedCheckpoint, checkpoint_from_record, checkpoint_record
from explorer.errors import CacheError
from explorer.limits import load_json
from explorer.safe_text import redact
from explorer.sources.cache import index, journal, sql
from explorer.sources.cache.file import (
    LOCK_WAIT_S,
    CacheWarning,
    Mode,
    connect_for_writing,
    is_no_room_error,
    open_connection,
)
from explorer.sources.cache.location import default_cache_path
from explorer.sources.cache.schema import DATA_TABLES, SCHEMA_VERSION, SHA_TABLES, dumps, loads
from explorer.sources.hub.records import RepoFile, RepoListing, SafetensorsParams, frozen
from explorer.sources.hub.settings import DEFAULT_ENDPOINT, HubSettings

__all__ = ["DEFAULT_TTL_S", "FLUSH_WAIT_S", "Cache", "CacheWarning", "default_cache_path", "open_default_cache"]

DEFAULT_TTL_S = 24 * 3600.0
CHECKPOINT_EVERY_S = 1.0
MEMO_ENTRIES = 1024
#: the longest :meth:`Cache.close` waits for another process to let the file go, to write what it queued
FLUSH_WAIT_S = 15.0
_SHA = re.compile(r"[0-9a-f]{40}")
#: the file size past which the least recently fetched entries are dropped (``EXPLORER_CACHE_MAX_BYTES``)
DEFAULT_MAX_BYTES = 1024**3
#: eviction starts when the stored text passes this share of the cap, and ends below EVICT_TO of it
EVICT_AT, EVICT_TO = 0.9, 0.75


def default_max_bytes() -> int:
    """``$EXPLORER_CACHE_MAX_BYTES`` (a whole number of bytes, at least 1 MiB), else :data:`DEFAULT_MAX_BYTES`."""
    text = os.environ.get("EXPLORER_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    if not text.isdigit() or not 1 << 20 <= int(text) <= 1 << 50:
        raise CacheError(f"EXPLORER_CACHE_MAX_BYTES is {text[:40]!r}; it must be a number of bytes, 1 MiB to 1 PiB")
    return int(text)


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(path + s) for s in ("", ".wal") if os.path.exists(path + s))


class Cache:
    """A connection to the cache file. Use :meth:`open`; thread-safe; a context manager.

    Attributes:
        path: the database file, or ``":memory:"``.
        mode: ``read-write``; ``read-only`` (asked for, another process holds the
            write lock but only reads, or the file system is read-only); ``snapshot``
            (a copy of a file another process is writing); ``disabled`` (no file could
            be opened: every read misses); ``journal`` (no file yet: every read misses, and
            writes go to the journal beside it, :mod:`explorer.sources.cache.journal`).
        why: why it is not ``read-write`` (empty when it is), for messages.
        endpoint: the Hub endpoint whose rows it reads and writes.
        ttl_s: seconds a branch or tag name -> sha mapping stays valid.
    """

    def __init__(self, con, *, path: str, mode: Mode, ttl_s: float, clock: Callable[[], float], tmp: str | None,
                 why: str = "", endpoint: str = DEFAULT_ENDPOINT, flush_wait_s: float = FLUSH_WAIT_S,
                 max_bytes: int | None = None) -> None:  # fmt: skip
        self._con = con
        self.path = path
        self.mode: Mode = mode
        self.why = why
        self.endpoint = endpoint
        self.ttl_s = ttl_s
        self._clock = clock
        self._tmp = tmp
        self._lock = threading.RLock()
        self._last_checkpoint = float("-inf")  # the first write checkpoints at once
        # rows keyed by sha never change, so repeated reads are served from memory
        self._memo: OrderedDict[tuple, list[tuple]] = OrderedDict()
        # writes made while another process held the file: written by close() once it lets go
        self._queue_writes = why == "locked"
        self._pending: list[tuple[str, list[tuple[str, list]]]] = []
        self._flush_wait_s = flush_wait_s
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes

    @classmethod
    def open(
        cls,
        path: str | os.PathLike | None = None,
        *,
        read_only: bool = False,
        ttl_s: float = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.time,
        lock_wait_s: float = LOCK_WAIT_S,
        endpoint: str = DEFAULT_ENDPOINT,
        flush_wait_s: float = FLUSH_WAIT_S,
        max_bytes: int | None = None,
    ) -> Cache:
        """Open (creating if needed) the cache of ``endpoint``'s answers.

        A locked, corrupt or read-only file degrades it with a CacheWarning.

        Raises:
            CacheError: the path holds a file explorer did not make (not DuckDB, or another
                program's database); it is left alone.
        """
        p = str(path) if path is not None else default_cache_path()
        if p != ":memory:" and journal.exists(p):
            why = _replay_journal(p, lock_wait_s)
            if why and not os.path.exists(p):  # the file cannot be made here: read the journal as it stands
                warnings.warn(f"cache {p} cannot be created ({why}): its journal is read, and nothing more is cached",
                              CacheWarning, stacklevel=2)  # fmt: skip
                return cls(_journal_in_memory(p), path=p, mode="read-only", ttl_s=ttl_s, clock=clock, tmp=None,
                           why=why, endpoint=endpoint.rstrip("/"), flush_wait_s=flush_wait_s)  # fmt: skip
        opened = open_connection(p, read_only=read_only, lock_wait_s=lock_wait_s)
        if opened.mode == "read-only" and opened.con is not None and p != ":memory:":
            index.refresh(opened.con, p)  # no process writes while this one reads: the index is exact
        return cls(opened.con, path=p, mode=opened.mode, ttl_s=ttl_s, clock=clock, tmp=opened.tmp, why=opened.why,
                   endpoint=endpoint.rstrip("/"), flush_wait_s=flush_wait_s, max_bytes=max_bytes)  # fmt: skip

    @classmethod
    def journal(
        cls,
        path: str | os.PathLike | None = None,
        *,
        clock: Callable[[], float] = time.time,
        endpoint: str = DEFAULT_ENDPOINT,
    ) -> Cache:
        """A cache whose file does not exist yet, written without duckdb: every read misses, and each write is
        appended to the journal beside the file, replayed into it by the next :meth:`open`
        (:mod:`explorer.sources.cache.journal`)."""
        p = str(path) if path is not None else default_cache_path()
        return cls(None, path=p, mode="journal", ttl_s=DEFAULT_TTL_S, clock=clock, tmp=None, why="no file yet",
                   endpoint=endpoint.rstrip("/"))  # fmt: skip

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.mode == "read-write" and self._con is not None

    def __repr__(self) -> str:
        return f"Cache(path={self.path!r}, mode={self.mode!r})"

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def keeps_writes(self) -> bool:
        """Whether writes are kept: written to the file now, queued for it, or appended to its journal."""
        return self.writable or bool(self._pending) or self.mode == "journal"

    @property
    def pending(self) -> int:
        """Writes queued while another process held the file (written by :meth:`close`)."""
        return len(self._pending)

    def close(self) -> None:
        """Write what was queued (see :meth:`flush`), checkpoint and close; the object reads as empty afterwards."""
        with self._lock:
            if self._pending:
                self.flush()
            self._release()

    def _release(self) -> None:
        """Checkpoint (when writable) and close the connection, and delete a snapshot copy."""
        if self._con is not None:
            try:
                if self.writable:
                    self._con.execute("CHECKPOINT")
            finally:
                self._con.close()
                self._con, self.mode = None, "disabled"
        self._memo.clear()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _rows(self, sql: str, params: list) -> list[tuple]:
        with self._lock:
            if self._con is None:  # disabled (no file yet, say): a miss, with no need of duckdb
                return []
            import duckdb  # loaded already: the connection is open

            try:
                return self._con.execute(sql, params).fetchall()
            except duckdb.Error as e:
                raise CacheError(f"cannot read the cache at {self.path}: {e}", hint="run `explorer cache clear`") from e

    def _memo_rows(self, key: tuple, sql: str, params: list) -> list[tuple]:
        """``_rows``, remembered per key when found (up to MEMO_ENTRIES keys, least recently used out)."""
        with self._lock:
            if (rows := self._memo.get(key)) is not None:
                self._memo.move_to_end(key)
                return rows
            rows = self._rows(sql, params)
            if rows:
                self._memo[key] = rows
                if len(self._memo) > MEMO_ENTRIES:
                    self._memo.popitem(last=False)
            return rows

    def _forget(self, repo: str | None = None, sha: str | None = None) -> None:
        with self._lock:
            for key in [k for k in self._memo if repo is None or k[1:3] == (repo, sha)]:
                del self._memo[key]

    def _write(self, what: str, statements: list[tuple[str, list]], *, queue: bool = True) -> bool:
        """Run ``statements`` as one transaction; False when not written now (queued, or not writable)."""
        with self._lock:
            if self.mode == "journal":
                if not queue:
                    return False
                if journal.append(self.path, what, statements):
                    return True
                self.mode, self.why = "disabled", f"its journal {journal.journal_path(self.path)} cannot be written"
                return False
            if not self.writable:
                if self._queue_writes and queue:
                    self._pending.append((what, statements))
                return False
            for _, params in statements:  # every statement's first two parameters are repo and sha
                if len(params) >= 2:
                    self._forget(params[0], params[1])
            try:
                sql.transaction(self._con, what, self.path, statements)
                if time.monotonic() - self._last_checkpoint >= CHECKPOINT_EVERY_S:
                    self._con.execute("CHECKPOINT")  # so that a process reading a copy sees recent rows
                    self._last_checkpoint = time.monotonic()
            except Exception as e:  # CacheError from the transaction, duckdb.Error from the checkpoint
                if not is_no_room_error(e):
                    raise
                self._no_room(e)
                return False
            self._keep_within_cap()
        return True

    def _keep_within_cap(self) -> None:
        """Past :attr:`max_bytes` of file, drop the least recently fetched entries (a repo at a commit, every
        table's rows) until the stored text is under :data:`EVICT_TO` of the cap. DuckDB reuses the blocks
        freed, so the file stops growing near the cap (issue 25: one repo with a 10^6-key config added 4.3 MiB,
        and nothing bounded the file)."""
        if self.path == ":memory:" or _file_bytes(self.path) <= self.max_bytes:
            return
        entries = self._rows(sql.entry_sizes(), [self.endpoint] * 4)  # (repo, sha, bytes, fetched_at), oldest first
        stored = sum(n for _, _, n, _ in entries)
        if stored <= self.max_bytes * EVICT_AT:
            return
        target, dropped = self.max_bytes * EVICT_TO, []
        for repo, sha, n, _ in entries:
            if stored <= target:
                break
            dropped += [sql.delete(t, {"repo": repo, "sha": sha}, self.endpoint) for t in SHA_TABLES]
            stored -= n
            self._forget(repo, sha)
        sql.transaction(self._con, "the eviction of the least recently fetched entries", self.path, dropped)

    def _no_room(self, error: BaseException) -> None:
        """The disk is full: go on answering from what is cached, writing nothing more, with one warning."""
        self.mode, self.why = "read-only", "disk full"
        warnings.warn(
            f"cache {self.path} cannot grow ({error}); answers go on without caching them",
            CacheWarning,
            stacklevel=4,
        )

    def flush(self) -> int:
        """Write the queued writes: wait (at most ``flush_wait_s``) for the other process to let the file go,
        then write each in its own transaction. Returns how many were written; those that could not be
        are given up with a CacheWarning saying how many."""
        with self._lock:
            if not self._pending:
                return 0
            pending, self._pending = self._pending, []
            self._release()  # this process's own read connection would conflict with its write one
            con = connect_for_writing(self.path, wait_s=self._flush_wait_s)
            if con is None:
                warnings.warn(
                    f"cache {self.path} stayed in use by another explorer process for {self._flush_wait_s:g} s: "
                    f"{len(pending)} fetched record(s) not cached",
                    CacheWarning,
                    stacklevel=3,
                )
                return 0
            try:
                for what, statements in pending:
                    sql.transaction(con, what, self.path, statements)
                con.execute("CHECKPOINT")
            finally:
                con.close()
            self._memo.clear()
            return len(pending)

    # --- revisions --------------------------------------------------------------------------

    def resolve_revision(self, repo: str, revision: str | None = None) -> str | None:
        """The sha a revision stands for: itself for a 40-hex sha, else the cached mapping if younger than ttl_s."""
        found = self.revision_entry(repo, revision)
        if found is None or self._clock() - found[1] > self.ttl_s:
            return None
        return found[0]

    def revision_entry(self, repo: str, revision: str | None = None) -> tuple[str, float] | None:
        """(sha, seconds since the epoch it was learnt) of a branch or tag mapping, of any age; a sha: (itself, inf)."""
        rev = revision or "main"
        if _SHA.fullmatch(rev.lower()):
            return rev.lower(), float("inf")
        rows = self._rows(*sql.select("revisions", "sha, fetched_at", {"repo": repo, "revision": rev}, self.endpoint))
        return (rows[0][0], rows[0][1]) if rows else None

    def age_s(self, learnt_at: float) -> float:
        """Seconds since ``learnt_at`` by this cache's clock."""
        return self._clock() - learnt_at

    def put_revision(self, repo: str, revision: str, sha: str) -> bool:
        """Remember that ``revision`` pointed at ``sha`` now."""
        return self._write("a revision", self._revision(repo, revision, sha))

    def _revision(self, repo: str, revision: str, sha: str) -> list[sql.Statement]:
        key = {"repo": repo, "revision": revision}
        return sql.replace("revisions", key, [repo, revision, sha, self._clock()], self.endpoint)

    def drop(self, repo: str, sha: str) -> bool:
        """Delete every row of (repo, sha) (one transaction)."""
        stmts = [sql.delete(t, {"repo": repo, "sha": sha}, self.endpoint) for t in SHA_TABLES]
        return self._write(f"the entry of {repo}@{sha[:12]}", stmts)

    # --- listings, configs, safetensors, GGUF headers ---------------------------------------

    def put_listing(self, listing: RepoListing) -> bool:
        """Store a listing and its revision -> sha mapping, in one transaction."""
        r, sha, f = listing.repo_id, listing.sha, listing.files
        key = {"repo": r, "sha": sha}
        stmts = [
            sql.delete("files", key, self.endpoint),
            *sql.replace("repos", key, [r, sha, listing.gated, listing.private, len(f), self._clock()], self.endpoint),
        ]
        if f:
            columns = [list(range(len(f))), [x.path for x in f], [x.size_bytes for x in f], [x.lfs for x in f]]
            stmts.append((sql.FILES_INSERT, [r, sha, *columns, self.endpoint]))
        if listing.revision and listing.revision != sha:
            stmts += self._revision(r, listing.revision, sha)
        return self._write(f"the listing of {r}", stmts)

    def get_listing(self, repo: str, sha: str, *, revision: str | None = None) -> RepoListing | None:
        """The listing stored for (repo, sha), or None (also when its rows are incomplete)."""
        key = {"repo": repo, "sha": sha}
        head = self._memo_rows(
            ("repos", repo, sha), *sql.select("repos", "gated, private, file_count", key, self.endpoint)
        )
        if not head:
            return None
        gated, private, count = head[0]
        rows = self._memo_rows(
            ("files", repo, sha), *sql.select("files", "idx, path, size_bytes, lfs", key, self.endpoint)
        )
        if len(rows) != count:  # cannot happen with whole transactions; a miss rather than half a listing
            return None
        files = tuple(RepoFile(path=p, size_bytes=s, lfs=lfs) for _, p, s, lfs in sorted(rows))
        return RepoListing(repo_id=repo, revision=revision or sha, sha=sha, gated=gated, private=private, files=files)

    def put_config(self, repo: str, sha: str, filename: str, config: Mapping | str | bytes) -> bool:
        """Store a JSON file's text (a dict is written with NaN and Infinity kept)."""
        if isinstance(config, bytes):
            config = config.decode("utf-8-sig")
        text = config if isinstance(config, str) else json.dumps(config, allow_nan=True)
        key = {"repo": repo, "sha": sha, "filename": filename}
        return self._write(
            f"{filename} of {repo}",
            sql.replace("configs", key, [repo, sha, filename, text, self._clock()], self.endpoint),
        )

    def get_config(self, repo: str, sha: str, filename: str = "config.json") -> dict | None:
        """The parsed JSON file, or None; CacheError when its text is not JSON (a damaged row)."""
        key = {"repo": repo, "sha": sha, "filename": filename}
        rows = self._memo_rows(("configs", repo, sha, filename), *sql.select("configs", "text", key, self.endpoint))
        return load_json(rows[0][0], where=f"the cached {filename} of {repo}", error=CacheError) if rows else None

    def put_safetensors(self, repo: str, sha: str, params: SafetensorsParams) -> bool:
        by_dtype, files = dumps(dict(params.params_by_dtype)), dumps(dict(params.files))
        row = [repo, sha, params.total_params, by_dtype, files, self._clock()]
        return self._write(
            f"the safetensors counts of {repo}",
            sql.replace("safetensors", {"repo": repo, "sha": sha}, row, self.endpoint),
        )

    def get_safetensors(self, repo: str, sha: str) -> SafetensorsParams | None:
        query = sql.select(
            "safetensors", "total_params, params_by_dtype, files", {"repo": repo, "sha": sha}, self.endpoint
        )
        rows = self._memo_rows(("safetensors", repo, sha), *query)
        if not rows:
            return None
        total, by_dtype, files = rows[0]
        by_dtype, files = frozen(loads(by_dtype)), frozen(loads(files))
        return SafetensorsParams(total_params=total, params_by_dtype=by_dtype, files=files)

    def put_gguf_header(self, repo: str, sha: str, filename: str, record: Mapping) -> bool:
        """Store a GGUF header record: ``metadata``, ``tensors`` (made JSON-safe, long arrays
        summarised), ``header_bytes`` and ``file_size_bytes`` (or ``file_size``)."""
        size = record.get("file_size_bytes", record.get("file_size"))
        metadata, tensors = dumps(record.get("metadata", {})), dumps(record.get("tensors", []))
        header_bytes, size = int(record.get("header_bytes") or 0), None if size is None else int(size)
        row = [repo, sha, filename, metadata, tensors, header_bytes, size, self._clock()]
        key = {"repo": repo, "sha": sha, "filename": filename}
        return self._write(f"the GGUF header of {filename}", sql.replace("gguf_headers", key, row, self.endpoint))

    def get_gguf_header(self, repo: str, sha: str, filename: str) -> dict | None:
        """``{"metadata", "tensors", "header_bytes", "file_size_bytes", "fetched_at"}`` or None."""
        columns = "metadata, tensors, header_bytes, file_size_bytes, fetched_at"
        key = {"repo": repo, "sha": sha, "filename": filename}
        rows = self._memo_rows(
            ("gguf_headers", repo, sha, filename), *sql.select("gguf_headers", columns, key, self.endpoint)
        )
        if not rows:
            return None
        md, tensors, header_bytes, size, at = rows[0]
        return {
            "metadata": loads(md),
            "tensors": loads(tensors),
            "header_bytes": header_bytes,
            "file_size_bytes": size,
            "fetched_at": at,
        }

    def repos(self) -> list[str]:
        """Every repo this endpoint's rows hold a config.json or a GGUF header of, sorted (for ``explorer fit``)."""
        rows = self._rows(
            "SELECT DISTINCT repo FROM configs WHERE filename = 'config.json' AND endpoint = ? "
            "UNION SELECT DISTINCT repo FROM gguf_headers WHERE endpoint = ? ORDER BY 1",
            [self.endpoint, self.endpoint],
        )
        return [r[0] for r in rows]

    # --- published checkpoints -------------------------------------------------------------

    def put_checkpoints(self, repo: str, checkpoints: Sequence[PublishedCheckpoint]) -> bool:
        """Remember a model's published quantised checkpoints (as found in the Hub's model tree now)."""
        entries = dumps([checkpoint_record(c) for c in checkpoints])
        row = [repo, entries, self._clock()]
        return self._write(f"the checkpoints of {repo}", sql.replace("checkpoints", {"repo": repo}, row, self.endpoint))

    def get_checkpoints(self, repo: str) -> tuple[PublishedCheckpoint, ...] | None:
        """A model's cached checkpoints if younger than ttl_s (marked ``source="cache"``), else None.

        A row that does not read back as checkpoints (damaged, or written by another explorer) is a miss.
        """
        rows = self._rows(*sql.select("checkpoints", "entries, fetched_at", {"repo": repo}, self.endpoint))
        if not rows or self._clock() - rows[0][1] > self.ttl_s:
            return None
        try:
            records = loads(rows[0][0])
            if not isinstance(records, list):
                return None
            return tuple(checkpoint_from_record(e, source="cache") for e in records)
        except (CacheError, ValueError):
            return None

    # --- housekeeping -----------------------------------------------------------------------

    def info(self) -> dict:
        """``{"path", "mode", "size_bytes", "schema_version", "counts": {table: rows}}``."""
        counts = {t: (self._rows(f"SELECT count(*) FROM {t}", []) or [(0,)])[0][0] for t in DATA_TABLES}
        size = sum(os.path.getsize(self.path + s) for s in ("", ".wal") if os.path.exists(self.path + s))
        return {
            "path": self.path,
            "mode": self.mode,
            "size_bytes": size,
            "schema_version": SCHEMA_VERSION,
            "counts": counts,
        }

    def clear(self) -> bool:
        """Delete every cached row (one transaction); False, with nothing queued, when the file cannot be written."""
        self._forget()
        return self._write("a clear", [(f"DELETE FROM {t}", []) for t in DATA_TABLES], queue=False)

    def export(self, path: str | os.PathLike) -> Path:
        """Write every table to one JSON file and return its path.

        ``{"format": "explorer-cache", "schema_version", "exported_at", "tables": {table: [row, ...]}}``;
        JSON columns are parsed back into objects. NaN and Infinity are written
        as Python's json does (not strict JSON).
        """
        tables = {}
        for t in DATA_TABLES:
            with self._lock:
                cols = [c[0] for c in self._con.execute(f"SELECT * FROM {t} LIMIT 0").description] if self._con else []
            rows = [dict(zip(cols, r, strict=True)) for r in self._rows(f"SELECT * FROM {t} ORDER BY ALL", [])]
            for r in rows:
                for k in ("text", "params_by_dtype", "files", "metadata", "tensors"):
                    if k in r and isinstance(r[k], str):
                        r[k] = json.loads(r[k])
            tables[t] = rows
        out = Path(path)
        doc = {
            "format": "explorer-cache",
            "schema_version": SCHEMA_VERSION,
            "exported_at": self._clock(),
            "tables": tables,
        }
        text = redact(json.dumps(doc, indent=1, allow_nan=True))  # no token-shaped string leaves in a file
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as e:
            raise CacheError(
                f"cannot write the export to {out}: {e.strerror or e}",
                hint="give a path to a file in a folder that exists and that you can write",
            ) from None
        return out


def _replay_journal(path: str, lock_wait_s: float) -> str:
    """Write the journal's transactions into the cache file (creating it), each in its own, then checkpoint.

    Returns why it could not ("" when it did): the file cannot be opened to write now (another process holds
    it, a read-only file system); the journal is then left for a later process. A transaction the file refuses
    is left out with a CacheWarning, the others are written.
    """
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", CacheWarning)
        opened = open_connection(path, read_only=False, lock_wait_s=lock_wait_s)
    if opened.con is None or opened.mode != "read-write":  # the open that follows says why, or reads the journal
        if opened.con is not None:
            opened.con.close()
        if opened.tmp:
            shutil.rmtree(opened.tmp, ignore_errors=True)
        return opened.why or opened.mode
    for w in said:  # a file moved aside and rebuilt, say: said once, here
        warnings.warn(w.message, w.category, stacklevel=4)
    try:
        for what, statements in journal.claim(path):
            _replay(opened.con, path, what, statements)
        opened.con.execute("CHECKPOINT")
    finally:
        opened.con.close()
    return ""


def _journal_in_memory(path: str):
    """A DuckDB connection in memory holding the journal's transactions (the journal is left as it is)."""
    con = open_connection(":memory:", read_only=False).con
    for what, statements in journal.read(path):
        _replay(con, path, what, statements)
    return con


def _replay(con, path: str, what: str, statements: list[sql.Statement]) -> None:
    try:
        sql.transaction(con, what, path, statements)
    except CacheError as e:
        warnings.warn(f"{e.message}: left out of the cache", CacheWarning, stacklevel=5)


def open_default_cache(s: HubSettings, *, read_only: bool, notes: list[str]) -> Cache | None:
    """The default cache of ``s.endpoint``'s answers, or None (with a note) when it cannot be opened.

    Offline, a branch mapping of any age beats no answer. Opened to write, it waits up to
    FLUSH_WAIT_S for another process to let the file go (each holds it for one short read or
    write), and only then reads a copy and queues its writes.
    """
    ttl_s = float("inf") if s.offline else DEFAULT_TTL_S
    wait_s = LOCK_WAIT_S if read_only else FLUSH_WAIT_S
    try:
        return Cache.open(read_only=read_only, ttl_s=ttl_s, endpoint=s.endpoint, lock_wait_s=wait_s)
    except CacheError as e:
        notes.append(f"the cache was not used: {e}")
        return None
