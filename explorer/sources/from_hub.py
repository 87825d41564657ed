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
3. **Snapshot**: offline, or when the Hub cannot be reached (timeout,
   connection, a 5xx answer), the shipped snapshot's entry, with a note
   naming the error. Gated, missing and other definite answers are raised.

The token travels only in request headers; nothing here writes it anywhere.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from explorer.errors import (
    CacheError,
    ExplorerError,
    GGUFError,
    HubConnectionError,
    HubError,
    HubTimeoutError,
    OfflineMissError,
)
from explorer.gguf.header import GGUFHeader, merge_split_headers
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.plan.offer import build_offer, gguf_sets
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.facts import (
    HubFacts,
    facts_from_cache,
    fetch_facts,
    shape_set,
    store_facts,
)
from explorer.sources.gguf_files import shape_from_header
from explorer.sources.hub.records import CONFIG_FILE
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec

__all__ = ["build_model", "from_snapshot", "resolve_hub"]


def _set_header(headers: Mapping[str, GGUFHeader], parts: tuple[str, ...]) -> GGUFHeader | None:
    if not all(p in headers for p in parts):
        return None
    return headers[parts[0]] if len(parts) == 1 else merge_split_headers([headers[p] for p in parts])


def build_model(spec: ModelSpec, facts: HubFacts, origin: str, notes: list[str]) -> ResolvedModel:
    """The ResolvedModel of a repo's facts: the shape and the offer."""
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
        checkpoints=shipped_checkpoints(repo),
    )


def from_snapshot(spec: ModelSpec, revision: str | None, note: str) -> ResolvedModel | None:
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
        notes=(note, *entry.notes, *entry.size_notes()),
        checkpoints=shipped_checkpoints(entry.repo),
    )


def _falls_back(e: ExplorerError) -> bool:
    """Whether a Hub failure may be answered from the snapshot: the Hub was unreachable or broken, not definite."""
    return isinstance(e, (HubTimeoutError, HubConnectionError)) or (type(e) is HubError and "HTTP 5" in str(e))


def _settings(settings: HubSettings | None, *, offline: bool, token: str | None) -> HubSettings:
    if settings is None:
        return HubSettings.resolve(token=token, offline=True if offline else None)
    changes: dict[str, Any] = {}
    if offline:
        changes["offline"] = True
    if token:
        changes["token"] = token
    return dataclasses.replace(settings, **changes) if changes else settings


def _open_cache_meanwhile() -> Callable[[], Any]:
    """Open (create) the cache on a thread of its own; returns the call that waits for it.

    For a first read, when there is no cache file: nothing in it could answer,
    and importing duckdb and creating the tables take about as long as the
    Hub's answers, so they overlap the reads instead of coming before them.
    """
    from concurrent.futures import ThreadPoolExecutor

    from explorer.sources.cache.store import open_default_cache

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-open")
    opened = pool.submit(open_default_cache, False)
    pool.shutdown(wait=False)
    return opened.result


def _no_cache_file() -> bool:
    from explorer.sources.cache.file import default_cache_path

    path = default_cache_path()
    return path != ":memory:" and not os.path.exists(path)


def resolve_hub(spec: ModelSpec, *, revision: str | None = None, offline: bool = False, token: str | None = None,
                cache: Any = None, settings: HubSettings | None = None, progress=None,
                cancel: threading.Event | None = None) -> ResolvedModel:  # fmt: skip
    """Resolve a Hub id: the cache, then the Hub unless offline, then the snapshot (see the module docstring)."""
    s = _settings(settings, offline=offline, token=token)
    own = cache is None
    opening = None  # the wait for a cache being created meanwhile
    if own:
        if not s.offline and _no_cache_file():
            opening = _open_cache_meanwhile()
        else:
            from explorer.sources.cache.store import open_default_cache

            cache = open_default_cache(s.offline)
    try:
        facts, sha = None, None
        try:
            sha = cache.resolve_revision(spec.repo, revision) if cache is not None else None
            facts = facts_from_cache(cache, spec.repo, sha, revision, spec.filename) if sha else None
        except CacheError:  # an unreadable cache is a miss; the Hub or the snapshot answers
            pass
        if facts is not None:
            return build_model(spec, facts, "cache", [f"from the cache at {cache.path} (sha {sha[:12]})"])
        where = f"{spec.repo}{'@' + revision if revision else ''}{':' + spec.filename if spec.filename else ''}"
        if s.offline:
            got = from_snapshot(spec, revision, "offline: answered from the shipped snapshot")
            if got is None:
                cached = f"the cache ({cache.path})" if cache is not None else "the cache (not open)"
                raise OfflineMissError(f"offline, and neither {cached} nor the shipped snapshot knows {where}")
            return got
        from explorer.sources.hub.many import default_progress

        try:
            facts = fetch_facts(
                spec.repo, revision, spec.filename, settings=s, progress=default_progress(progress), cancel=cancel
            )
        except HubError as e:
            if not _falls_back(e) or (got := from_snapshot(spec, revision, _fallback_note(e))) is None:
                raise
            return got
        notes = [f"read from the Hub at {s.endpoint} (sha {facts.listing.sha[:12]})"]
        if opening is not None:
            cache, opening = opening(), None
        if (why := store_facts(cache, facts)) is not None:
            notes.append(why)
        return build_model(spec, facts, "hub", notes)
    finally:
        if opening is not None:  # the Hub failed or the read was cancelled: the cache exists all the same
            cache = opening()
        if own and cache is not None:
            cache.close()


def _fallback_note(e: HubError) -> str:
    return f"the Hub failed ({type(e).__name__}: {e.message}); answered from the shipped snapshot instead"
