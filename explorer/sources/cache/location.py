"""Where the default cache lies, and what can be known of it without opening it (nor importing duckdb).

A read that the cache cannot answer should not pay for opening it: the duckdb
import alone is about 0.19 s of CPU and 35 MiB. Two facts need only the file
system:

- :func:`absent_cache_path`: neither the file nor a journal of a first read's
  writes (:mod:`explorer.sources.cache.journal`) exists, so nothing cached
  could answer;
- :func:`indexed_miss`: the revision index beside the file
  (:mod:`explorer.sources.cache.index`) says it maps no such branch or tag.

This module defines no records and imports no Hub or GGUF code, so that an
offline ``shape`` answered from the shipped snapshot loads only what it uses.
"""

from __future__ import annotations

import os
import re

from explorer.sources.cache import index, journal

__all__ = ["absent_cache_path", "default_cache_path", "indexed_miss"]


def default_cache_path() -> str:
    """``$EXPLORER_CACHE``, else ``$XDG_CACHE_HOME/explorer/cache.duckdb``, else ``~/.cache/explorer/cache.duckdb``."""
    if env := os.environ.get("EXPLORER_CACHE"):
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "explorer", "cache.duckdb")


def absent_cache_path() -> str | None:
    """The default cache's path when it has neither a file nor a journal: nothing cached could answer, so a read
    need not open it (nor a first read's writes import duckdb: they go to the journal). None when a cache is there
    (or lives in memory)."""
    path = default_cache_path()
    return None if path == ":memory:" or journal.present(path) else path


def indexed_miss(endpoint: str, repo: str, revision: str | None) -> str | None:
    """The cache file's path when its index says it maps no such branch or tag of ``repo`` for ``endpoint``:
    offline, the cache would miss, so it need not be opened. Else None (a sha, which the index does not list,
    or an index that cannot say)."""
    rev = revision or "main"
    path = default_cache_path()
    if path == ":memory:" or re.fullmatch(r"[0-9a-f]{40}", rev.lower()):
        return None  # a sha is answered by the rows of that sha, which the index does not list
    return path if index.known_absent(path, endpoint.rstrip("/"), repo, rev) else None
