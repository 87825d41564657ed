"""The resolver's cache: opened for one short read or write, answers checked, what the Hub said stored.

- :func:`~explorer.sources.cache.store.open_default_cache` opens the cache of one Hub endpoint
  (``HF_ENDPOINT``): read-only to read, so that processes read at once; to write, waiting for
  another process's write to end (:data:`explorer.sources.cache.store.FLUSH_WAIT_S`)
  before queueing. A file explorer did not make is a note, not an error: the
  model is answered without the cache.
- :func:`from_cache` answers from it only when the model it holds passes
  every check (:func:`explorer.sources.facts.build_model`); an entry that
  fails them (written by an older explorer, or damaged) is dropped, with a
  note. With ``stale`` (why the Hub could not answer) a branch mapping past its
  TTL answers too, marked stale.
- :func:`store` writes what the Hub said, after the model was built from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from explorer.errors import CacheError, ExplorerError
from explorer.sources.cache.location import absent_cache_path
from explorer.sources.cache.store import Cache, open_default_cache
from explorer.sources.facts import HubFacts, build_model, facts_from_cache, store_facts
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec

__all__ = [
    "drop_entry",
    "from_cache",
    "stale_answer",
    "store",
]


def from_cache(
    spec: ModelSpec,
    revision: str | None,
    cache: Any,
    notes: list[str],
    *,
    stale: str = "",
    drop: Callable[[str, str], bool] | None = None,
) -> ResolvedModel | None:
    """The cache's answer, checked: None on a miss, or when the entry fails its checks (then dropped, with a note).

    A branch mapping older than the cache's TTL is a miss, unless ``stale``
    (why the Hub could not answer) is given: then it answers, marked stale.
    ``drop(repo, sha)`` deletes a poisoned entry (default: ``cache.drop``, a
    no-op on a read-only cache).
    """
    if cache is None:
        return None
    try:
        entry = cache.revision_entry(spec.repo, revision)
        if entry is None:
            return None
        sha, learnt_at = entry
        age_s = cache.age_s(learnt_at)
        if age_s > cache.ttl_s and not stale:
            return None
        facts = facts_from_cache(cache, spec.repo, sha, revision, spec.filename)
    except CacheError:  # an unreadable cache is a miss; the Hub or the snapshot answers
        return None
    if facts is None:
        return None
    note = f"from the cache at {cache.path} (sha {sha[:12]})"
    if stale and age_s > cache.ttl_s:
        note = f"stale: {stale}; answered from the cache entry learnt {age_s / 3600:,.1f} h ago (sha {sha[:12]})"
    try:
        return build_model(spec, facts, "cache", [*notes, note], stale=bool(stale) and age_s > cache.ttl_s)
    except ExplorerError as e:  # a poisoned entry (written by an older explorer, or damaged): never answer from it
        dropped = (drop or cache.drop)(spec.repo, sha)
        notes.append(
            f"the cached entry of {spec.repo}@{sha[:12]} failed its checks ({e.message}); "
            + ("dropped from the cache" if dropped else "ignored (the cache is read-only)")
        )
        return None


def stale_answer(spec: ModelSpec, revision: str | None, s: HubSettings, cache: Any, notes: list[str], why: str):
    """A cache entry of any age for a Hub that cannot answer, marked stale; None when the cache has none."""
    if cache is not None:
        return from_cache(spec, revision, cache, notes, stale=why)
    opened = open_default_cache(s, read_only=True, notes=[])
    if opened is None:
        return None
    with opened:
        return from_cache(spec, revision, opened, notes, stale=why)


def drop_entry(s: HubSettings, reading: Any, repo: str, sha: str) -> bool:
    """Delete a poisoned entry from the cache file, opened for this write only (``reading``, this
    process's read-only connection to it, is closed first: the two would conflict)."""
    if reading is not None:
        reading.close()
    opened = open_default_cache(s, read_only=False, notes=[])
    if opened is None:
        return False
    with opened:
        return opened.drop(repo, sha) or bool(opened.pending)


def store(facts: HubFacts, s: HubSettings, cache: Any) -> str | None:
    """Cache what the Hub said (the caller's cache, else one opened for the write); None, or why it was not."""
    if cache is not None:
        return store_facts(cache, facts)
    if absent_cache_path() is not None:  # a first read: the journal keeps it, without duckdb (replayed next open)
        return store_facts(Cache.journal(endpoint=s.endpoint), facts)
    notes: list[str] = []
    opened = open_default_cache(s, read_only=False, notes=notes)
    if opened is None:
        return notes[0] if notes else "not cached: the cache could not be opened"
    with opened:  # closing writes what was queued while another process held the file
        return store_facts(opened, facts)
