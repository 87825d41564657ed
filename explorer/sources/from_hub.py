"""Resolving a Hub id: the cache, then the Hub (unless offline), then the shipped snapshot.

1. **Cache**: the revision's sha (a branch or tag mapping younger than the
   cache's TTL; a 40-hex sha never expires; offline, with a cache opened here,
   any age) and every record the answer needs at that sha.
2. **Hub** (not offline): listing, config.json and companions, safetensors
   parameter counts, GGUF headers (header bytes only: the first part of each
   set, every part of a set the user named or the shape is read from). Each is
   stored in the cache in its own transaction, the listing last: its row and
   revision mapping appear only once everything else is there, so a process
   killed mid-way leaves a miss, never half an answer. On a first read, with
   no cache file yet, the records go to the journal beside it, without duckdb
   (:mod:`explorer.sources.cache.journal`); the next process to open the file replays them.
   The model is built (its checks pass) before anything is cached, so a
   hostile header is never cached; a cached entry that fails its checks is
   dropped with a note and read again. The cache is let go while the Hub
   answers, so that other processes may write meanwhile.
3. **Stale cache, then snapshot**: offline, or when the Hub cannot answer
   (timeout or the deadline, connection, a 5xx or a 429 after the retries, an
   answer that is not the Hub's), a cache entry whose branch mapping expired
   (marked stale), else the shipped snapshot's entry, with a note naming the
   error. Gated, missing and other definite answers are raised.

The cache's side (opening it for a short read or write, checked answers, dropping a poisoned
entry, storing) is :mod:`explorer.sources.from_cache`; the model a repo's facts make is
:func:`explorer.sources.facts.build_model`. The token travels only in request headers; nothing
here writes it anywhere.
"""

from __future__ import annotations

import dataclasses
import threading
from functools import partial
from typing import Any

from explorer.errors import (
    ExplorerError,
    HubConnectionError,
    HubError,
    HubRateLimitError,
    HubResponseError,
    HubTimeoutError,
    OfflineMissError,
)
from explorer.sources.cache.location import absent_cache_path, indexed_miss
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.hub.settings import HubSettings, clean_token
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec

__all__ = ["from_snapshot", "resolve_hub"]


def from_snapshot(spec: ModelSpec, revision: str | None, note: str, notes: list[str] = ()) -> ResolvedModel | None:
    """The snapshot's answer for a Hub id, or None when it has no entry for it (or another revision)."""
    from explorer.sources.snapshot.names import snapshot_name
    from explorer.sources.snapshot.read import try_load_snapshot

    snapshot, _ = try_load_snapshot()
    entry = snapshot.get(spec.repo) if snapshot is not None else None
    if entry is None and snapshot is not None and (former := snapshot_name(spec.repo, snapshot.repos)) is not None:
        entry = snapshot.get(former)
        note += f"; the snapshot knows {spec.repo} by another name, {former} (the Hub renamed it)"
    if entry is None or revision not in (None, "main", entry.sha):
        return None
    artifacts = entry.offered()
    if spec.filename:
        if not any(spec.filename in a.files for a in artifacts):
            return None
        artifacts = tuple(sorted(artifacts, key=lambda a: spec.filename not in a.files))
    shape = snapshot.shape(entry.repo)
    return ResolvedModel(
        spec=spec,
        shape=shape,
        artifacts=artifacts,
        origin="snapshot",
        repo=entry.repo,
        sha=entry.sha,
        notes=(*notes, note, *entry.notes, *entry.size_notes()),
        checkpoints=shipped_checkpoints(entry.repo),
    )


def _falls_back(e: ExplorerError) -> bool:
    """Whether a Hub failure may be answered from the cache or the snapshot: the Hub was unreachable,
    slow, rate-limited or broken, not a definite answer (gated, not found...)."""
    fallible = (HubTimeoutError, HubConnectionError, HubResponseError, HubRateLimitError)
    return isinstance(e, fallible) or (type(e) is HubError and "HTTP 5" in str(e))


def _settings(settings: HubSettings | None, *, offline: bool, token: str | None) -> HubSettings:
    if settings is None:
        return HubSettings.resolve(token=token, offline=True if offline else None)
    changes: dict[str, Any] = {}
    if offline:
        changes["offline"] = True
    if token:
        changes["token"] = clean_token(token, source="--token")
    return dataclasses.replace(settings, **changes) if changes else settings


def resolve_hub(spec: ModelSpec, *, revision: str | None = None, offline: bool = False, token: str | None = None,
                cache: Any = None, settings: HubSettings | None = None, progress=None,
                cancel: threading.Event | None = None) -> ResolvedModel:  # fmt: skip
    """Resolve a Hub id: the cache, then the Hub unless offline, then the snapshot (see the module docstring)."""
    s = _settings(settings, offline=offline, token=token)
    notes: list[str] = []
    own = cache is None
    unopened = None  # the cache file left shut: there is none, or (offline) its index says it cannot answer
    if (
        own
        and (unopened := absent_cache_path()) is None
        and not (s.offline and (unopened := indexed_miss(s.endpoint, spec.repo, revision)))
    ):
        # imported here, like the rest of the cache's side: an answer the cache cannot give (a first read,
        # an indexed miss) never loads the cache's records, nor the Hub's and GGUF's ones its checks use
        from explorer.sources.cache.store import open_default_cache

        # read-only: other processes may read at once; a write opens the file again, briefly
        cache = open_default_cache(s, read_only=True, notes=notes)
    try:
        if cache is not None and (got := _cached_answer(spec, revision, s, cache, notes, own=own)) is not None:
            return got
        where = f"{spec.repo}{'@' + revision if revision else ''}{':' + spec.filename if spec.filename else ''}"
        if s.offline:
            got = from_snapshot(spec, revision, "offline: answered from the shipped snapshot", notes)
            if got is None:
                path = cache.path if cache is not None else unopened
                cached = f"the cache ({path})" if path else "the cache (not open)"
                raise OfflineMissError(f"offline, and neither {cached} nor the shipped snapshot knows {where}")
            return got
        if own and cache is not None:  # let the file go while the Hub answers: other processes may write
            cache.close()
        return _from_the_hub(spec, revision, s, None if own else cache, notes, progress=progress, cancel=cancel)
    finally:
        if own and cache is not None:
            cache.close()


def _cached_answer(spec: ModelSpec, revision: str | None, s: HubSettings, cache: Any, notes: list[str], *,
                   own: bool) -> ResolvedModel | None:  # fmt: skip
    """The cache's checked answer, or None (see :mod:`explorer.sources.from_cache`); online, a poisoned entry of
    the cache opened here is dropped from the file."""
    from explorer.sources.from_cache import drop_entry, from_cache  # only a read that opened a cache needs them

    drop = None if not own or s.offline else partial(drop_entry, s, cache)
    return from_cache(spec, revision, cache, notes, drop=drop)


def _from_the_hub(spec: ModelSpec, revision: str | None, s: HubSettings, cache: Any, notes: list[str], *,
                  progress, cancel: threading.Event | None) -> ResolvedModel:  # fmt: skip
    """Read the Hub; build the model (its checks pass before anything is cached), then cache it.
    A Hub that cannot answer is answered from a stale cache entry, else the snapshot, saying so."""
    # the Hub's side, imported when the Hub is asked: an offline answer never loads its records and readers
    from explorer.sources.facts import build_model, fetch_facts
    from explorer.sources.from_cache import stale_answer, store
    from explorer.sources.hub.many import default_progress

    try:
        facts = fetch_facts(
            spec.repo, revision, spec.filename, settings=s, progress=default_progress(progress), cancel=cancel
        )
    except HubError as e:
        if not _falls_back(e):
            raise
        why = f"the Hub failed ({type(e).__name__}: {e.message})"
        got = stale_answer(spec, revision, s, cache, notes, why) or from_snapshot(
            spec, revision, f"{why}; answered from the shipped snapshot instead", notes
        )
        if got is None:
            raise
        return got
    model = build_model(
        spec, facts, "hub", [*notes, f"read from the Hub at {s.endpoint} (sha {facts.listing.sha[:12]})"]
    )
    if (why := store(facts, s, cache)) is not None:
        model = dataclasses.replace(model, notes=(*model.notes, why))
    return model
