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
   no cache file yet, the file is created on a thread while the Hub answers.
   The model is built (its checks pass) before anything is cached, so a
   hostile header is never cached; a cached entry that fails its checks is
   dropped with a note and read again. The cache is let go while the Hub
   answers, so that other processes may write meanwhile.
3. **Stale cache, then snapshot**: offline, or when the Hub cannot answer
   (timeout or the deadline, connection, a 5xx or a 429 after the retries, an
   answer that is not the Hub's), a cache entry whose branch mapping expired
   (marked stale), else the shipped snapshot's entry, with a note naming the
   error. Gated, missing and other definite answers are raised.

The token travels only in request headers; nothing here writes it anywhere.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from explorer.errors import (
    CacheError,
    ExplorerError,
    GGUFError,
    HubConnectionError,
    HubError,
    HubRateLimitError,
    HubResponseError,
    HubTimeoutError,
    OfflineMissError,
)
from explorer.gguf.header import GGUFHeader, merge_split_headers
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.plan.offer import build_offer, gguf_sets
from explorer.sources.facts import (
    HubFacts,
    facts_from_cache,
    fetch_facts,
    shape_set,
    store_facts,
)
from explorer.sources.gguf_files import shape_from_header
from explorer.sources.hub.records import CONFIG_FILE
from explorer.sources.hub.settings import HubSettings, clean_token
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec

__all__ = ["build_model", "from_snapshot", "resolve_hub"]


def _set_header(headers: Mapping[str, GGUFHeader], parts: tuple[str, ...]) -> GGUFHeader | None:
    if not all(p in headers for p in parts):
        return None
    return headers[parts[0]] if len(parts) == 1 else merge_split_headers([headers[p] for p in parts])


def build_model(
    spec: ModelSpec, facts: HubFacts, origin: str, notes: list[str], *, stale: bool = False
) -> ResolvedModel:
    """The ResolvedModel of a repo's facts: the shape and the offer (every check of the shape passed).

    Raises:
        ExplorerError: the facts do not make a model (a hostile or broken header or config).
    """
    listing, repo = facts.listing, facts.listing.repo_id
    files = {f.path: f.size_bytes for f in listing.files}
    config = facts.configs.get(CONFIG_FILE)
    companions = {k: v for k, v in facts.configs.items() if k != CONFIG_FILE}
    sets = gguf_sets(files)
    shape: ModelShape | None = None
    if spec.filename:
        chosen = next(s for s in sets if spec.filename in s)
        try:
            shape = shape_from_header(_set_header(facts.headers, chosen), name=f"{repo}:{chosen[0]}")
        except GGUFError as e:
            if config is None:
                raise
            notes.append(f"shape from config.json, not from {chosen[0]} ({e.message})")
    if shape is None and config is not None:
        shape = shape_from_config(config, name=repo, companions=companions)
    if shape is None:
        parts = shape_set(sets)
        shape = shape_from_header(_set_header(facts.headers, parts), name=repo)
        notes.append(f"shape read from the GGUF header of {parts[0]}")
    st = facts.safetensors
    artifacts = build_offer(
        files,
        shape=shape,
        params_by_dtype=st.params_by_dtype if st else None,
        shards=list(st.files) if st else None,
        gguf_headers=facts.headers,
        has_config=config is not None,
        where=f"{repo}@{listing.sha[:12]}",
    )
    if spec.filename:
        artifacts = tuple(sorted(artifacts, key=lambda a: spec.filename not in a.files))
    notes += list(facts.notes)
    notes += [f"{a.label}: size computed from the shape" for a in artifacts if a.size_source == "computed"]
    return ResolvedModel(
        spec=spec,
        shape=shape,
        artifacts=artifacts,
        origin=origin,  # type: ignore[arg-type]
        repo=repo,
        sha=listing.sha,
        notes=tuple(notes),
        stale=stale,
    )


def from_snapshot(spec: ModelSpec, revision: str | None, note: str, notes: list[str] = ()) -> ResolvedModel | None:
    """The snapshot's answer for a Hub id, or None when it has no entry for it (or another revision)."""
    from explorer.sources.snapshot.read import try_load_snapshot

    snapshot, _ = try_load_snapshot()
    entry = snapshot.get(spec.repo) if snapshot is not None else None
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


def _open_cache(s: HubSettings, *, read_only: bool, notes: list[str]):
    """The cache of ``s.endpoint``'s answers, or None (with a note) when it cannot be opened.

    Opened to write, it waits up to FLUSH_WAIT_S for another process to let the file go (each holds it
    for one short read or write), and only then reads a copy and queues its writes.
    """
    from explorer.sources.cache.file import LOCK_WAIT_S
    from explorer.sources.cache.store import DEFAULT_TTL_S, FLUSH_WAIT_S, Cache

    ttl_s = float("inf") if s.offline else DEFAULT_TTL_S  # offline, a branch mapping of any age beats no answer
    wait_s = LOCK_WAIT_S if read_only else FLUSH_WAIT_S
    try:
        return Cache.open(read_only=read_only, ttl_s=ttl_s, endpoint=s.endpoint, lock_wait_s=wait_s)
    except CacheError as e:
        notes.append(f"the cache was not used: {e}")
        return None


def _create_cache_meanwhile(s: HubSettings) -> Callable[[], Any]:
    """Create the cache file on a thread of its own; returns the call that waits for it.

    For a first read, when there is no cache file: nothing in it could answer,
    and importing duckdb and creating the tables take about as long as the
    Hub's answers, so they overlap the reads instead of coming before them.
    The file is let go at once: other processes may write while this one reads.
    """
    from concurrent.futures import ThreadPoolExecutor

    def create() -> None:
        if (cache := _open_cache(s, read_only=False, notes=[])) is not None:
            cache.close()

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-open")
    created = pool.submit(create)
    pool.shutdown(wait=False)
    return created.result


def _no_cache_file() -> bool:
    from explorer.sources.cache.file import default_cache_path

    path = default_cache_path()
    return path != ":memory:" and not os.path.exists(path)


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


def resolve_hub(spec: ModelSpec, *, revision: str | None = None, offline: bool = False, token: str | None = None,
                cache: Any = None, settings: HubSettings | None = None, progress=None,
                cancel: threading.Event | None = None) -> ResolvedModel:  # fmt: skip
    """Resolve a Hub id: the cache, then the Hub unless offline, then the snapshot (see the module docstring)."""
    s = _settings(settings, offline=offline, token=token)
    notes: list[str] = []
    own = cache is None
    creating = None  # the wait for a cache file being created meanwhile
    if own:
        if not s.offline and _no_cache_file():
            creating = _create_cache_meanwhile(s)
        else:  # read-only: other processes may read at once; a write opens the file again, briefly
            cache = _open_cache(s, read_only=True, notes=notes)
    drop = None if not own or s.offline else partial(_drop_entry, s, cache)
    try:
        if (got := from_cache(spec, revision, cache, notes, drop=drop)) is not None:
            return got
        where = f"{spec.repo}{'@' + revision if revision else ''}{':' + spec.filename if spec.filename else ''}"
        if s.offline:
            got = from_snapshot(spec, revision, "offline: answered from the shipped snapshot", notes)
            if got is None:
                cached = f"the cache ({cache.path})" if cache is not None else "the cache (not open)"
                raise OfflineMissError(f"offline, and neither {cached} nor the shipped snapshot knows {where}")
            return got
        if own and cache is not None:  # let the file go while the Hub answers: other processes may write
            cache.close()
        return _from_the_hub(spec, revision, s, None if own else cache, notes, created=creating or (lambda: None),
                             progress=progress, cancel=cancel)  # fmt: skip
    finally:
        if creating is not None:  # the file exists all the same, whatever the Hub did
            creating()
        if own and cache is not None:
            cache.close()


def _from_the_hub(spec: ModelSpec, revision: str | None, s: HubSettings, cache: Any, notes: list[str], *,
                  created: Callable[[], Any], progress, cancel: threading.Event | None) -> ResolvedModel:  # fmt: skip
    """Read the Hub; build the model (its checks pass before anything is cached), then cache it.
    A Hub that cannot answer is answered from a stale cache entry, else the snapshot, saying so.
    ``created`` waits for a cache file being created meanwhile."""
    from explorer.sources.hub.many import default_progress

    try:
        facts = fetch_facts(
            spec.repo, revision, spec.filename, settings=s, progress=default_progress(progress), cancel=cancel
        )
    except HubError as e:
        if not _falls_back(e):
            raise
        created()
        why = f"the Hub failed ({type(e).__name__}: {e.message})"
        got = _stale(spec, revision, s, cache, notes, why) or from_snapshot(
            spec, revision, f"{why}; answered from the shipped snapshot instead", notes
        )
        if got is None:
            raise
        return got
    model = build_model(
        spec, facts, "hub", [*notes, f"read from the Hub at {s.endpoint} (sha {facts.listing.sha[:12]})"]
    )
    created()
    if (why := _store(facts, s, cache)) is not None:
        model = dataclasses.replace(model, notes=(*model.notes, why))
    return model


def _stale(spec: ModelSpec, revision: str | None, s: HubSettings, cache: Any, notes: list[str], why: str):
    """A cache entry of any age for a Hub that cannot answer, marked stale; None when the cache has none."""
    if cache is not None:
        return from_cache(spec, revision, cache, notes, stale=why)
    opened = _open_cache(s, read_only=True, notes=[])
    if opened is None:
        return None
    with opened:
        return from_cache(spec, revision, opened, notes, stale=why)


def _drop_entry(s: HubSettings, reading: Any, repo: str, sha: str) -> bool:
    """Delete a poisoned entry from the cache file, opened for this write only (``reading``, this
    process's read-only connection to it, is closed first: the two would conflict)."""
    if reading is not None:
        reading.close()
    opened = _open_cache(s, read_only=False, notes=[])
    if opened is None:
        return False
    with opened:
        return opened.drop(repo, sha) or bool(opened.pending)


def _store(facts: HubFacts, s: HubSettings, cache: Any) -> str | None:
    """Cache what the Hub said (the caller's cache, else one opened for the write); None, or why it was not."""
    if cache is not None:
        return store_facts(cache, facts)
    notes: list[str] = []
    opened = _open_cache(s, read_only=False, notes=notes)
    if opened is None:
        return notes[0] if notes else "not cached: the cache could not be opened"
    with opened:  # closing writes what was queued while another process held the file
        return store_facts(opened, facts)
