"""Resolving a Hub id: the cache, then the Hub (unless offline), then the shipped snapshot.

1. **Cache**: the revision's sha (a branch or tag mapping younger than the
   cache's TTL; a 40-hex sha never expires; offline, with a cache opened here,
   any age) and every record the answer needs at that sha.
2. **Hub** (not offline): listing, config.json and companions, safetensors
   parameter counts, GGUF headers (header bytes only: the first part of each
   set, every part of a set the user named or the shape is read from). Each is
   stored in the cache in its own transaction, the listing last: its row and
   revision mapping appear only once everything else is there, so a process
   killed mid-way leaves a miss, never half an answer.
3. **Snapshot**: offline, or when the Hub cannot be reached (timeout,
   connection, a 5xx answer), the shipped snapshot's entry, with a note
   naming the error. Gated, missing and other definite answers are raised.

The token travels only in request headers; nothing here writes it anywhere.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from explorer.errors import (
    CacheError,
    ExplorerError,
    GGUFError,
    HubConnectionError,
    HubError,
    HubTimeoutError,
    NothingToPlanError,
    OfflineMissError,
    capped_list,
)
from explorer.gguf_header import GGUFHeader, merge_split_headers
from explorer.gguf_quant import quant_from_filename
from explorer.hub import COMPANION_FILES, CONFIG_FILE, HubSettings, RepoListing, SafetensorsParams, check_cancel
from explorer.offer import build_offer, gguf_sets
from explorer.resolve import ResolvedModel
from explorer.resolve_gguf import header_from_record, header_record, shape_from_header
from explorer.shapes import ModelShape, shape_from_config
from explorer.sources import ModelSpec

__all__ = ["HubFacts", "facts_from_cache", "fetch_facts", "resolve_hub", "store_facts", "wanted_gguf"]

#: the quant a GGUF-only repo's shape is read from, by preference (then the first set by name)
_SHAPE_QUANTS = ("Q4_K_M", "Q8_0", "Q6_K", "Q5_K_M")


@dataclass(frozen=True, kw_only=True)
class HubFacts:
    """Everything read about a repo at one commit.

    Attributes:
        listing: files, sizes, sha, flags.
        configs: config.json and its companions, parsed, by file name.
        safetensors: parameter counts from the safetensors headers, or None.
        headers: GGUF file -> parsed header (each part of a split set on its own).
        notes: what was skipped or failed along the way.
    """

    listing: RepoListing
    configs: Mapping[str, dict] = field(default_factory=dict)
    safetensors: SafetensorsParams | None = None
    headers: Mapping[str, GGUFHeader] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def wanted_gguf(listing: RepoListing, filename: str | None) -> tuple[list[str], list[str]]:
    """(every GGUF file whose header to read, those that must be read) for a listing.

    Read: the first part of each set; required: every part of the set the user
    named, or (no config.json) of the set the shape is read from.

    Raises:
        HubError: ``filename`` is not a GGUF model file of the repo.
    """
    sets = gguf_sets(f.path for f in listing.files)
    required: tuple[str, ...] = ()
    if filename:
        found = next((s for s in sets if filename in s), None)
        if found is None:
            offered = [s[0] for s in sets]
            raise HubError(f"{listing.repo_id}@{listing.sha[:12]} has no GGUF model file {filename}",
                           hint=f"pick one of: {capped_list(offered) or 'none (the repo has no GGUF model files)'}")  # fmt: skip
        required = found
    elif sets and not listing.has(CONFIG_FILE):
        required = shape_set(sets)
    read = list(dict.fromkeys([s[0] for s in sets] + list(required)))
    return read, list(required)


def shape_set(sets: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The GGUF set a repo without config.json is shaped from: a single file of a preferred quant, else the first."""
    singles = [s for s in sets if len(s) == 1] or sets
    for quant in _SHAPE_QUANTS:
        for s in singles:
            if quant_from_filename(s[0]) == quant:
                return s
    return singles[0]


def _parse_for(path: str, size: int):
    from explorer.gguf_header import parse_gguf_header

    return lambda prefix: parse_gguf_header(prefix, file_size=size or None, name=path)


def fetch_facts(repo: str, revision: str | None, filename: str | None, *, settings: HubSettings, progress=None,
                cancel: threading.Event | None = None) -> HubFacts:  # fmt: skip
    """Read a repo's facts from the Hub (headers only for weights)."""
    from explorer.hub import fetch_companions, fetch_config, fetch_repo_listing
    from explorer.hub_weights import fetch_gguf_header_bytes, fetch_safetensors_params

    listing = fetch_repo_listing(repo, revision, settings=settings)
    if progress:
        progress(f"{repo}: listing", 1, 1)
    read, required = wanted_gguf(listing, filename)
    if not listing.has(CONFIG_FILE) and not gguf_sets(f.path for f in listing.files):
        raise NothingToPlanError(
            f"{repo}@{listing.sha[:12]} has neither {CONFIG_FILE} nor a GGUF model file "
            f"({len(listing.files)} files: {capped_list(f.path for f in listing.files) or 'none'})",
            hint="pick the repo that holds the weights, or pass a local config.json or .gguf path",
        )
    configs: dict[str, dict] = {}
    if listing.has(CONFIG_FILE):
        check_cancel(cancel, f"the config of {repo}")
        if (config := fetch_config(repo, listing.sha, settings=settings)) is not None:
            configs[CONFIG_FILE] = config
        configs.update(fetch_companions(listing, settings=settings))
    check_cancel(cancel, f"the weights of {repo}")
    st = fetch_safetensors_params(repo, listing.sha, listing=listing, settings=settings, progress=progress,
                                  cancel=cancel)  # fmt: skip
    headers, notes = {}, []
    for path in read:
        size = listing.file(path).size_bytes
        try:
            headers[path], _ = fetch_gguf_header_bytes(repo, listing.sha, path, size_bytes=size,
                                                       parse=_parse_for(path, size), settings=settings,
                                                       progress=progress, cancel=cancel)  # fmt: skip
        except GGUFError as e:
            if path in required:
                raise
            notes.append(f"{path}: header unreadable ({e}); its quant is taken from the file name")
    return HubFacts(listing=listing, configs=configs, safetensors=st, headers=headers, notes=tuple(notes))


def store_facts(cache: Any, facts: HubFacts) -> str | None:
    """Write the facts to the cache, one transaction per record, the listing last; None, or why it failed."""
    if cache is None:
        return None
    listing, repo = facts.listing, facts.listing.repo_id
    try:
        for name, config in facts.configs.items():
            cache.put_config(repo, listing.sha, name, config)
        if facts.safetensors is not None:
            cache.put_safetensors(repo, listing.sha, facts.safetensors)
        for path, header in facts.headers.items():
            size = listing.file(path).size_bytes
            cache.put_gguf_header(repo, listing.sha, path, header_record(header, file_size_bytes=size))
        cache.put_listing(listing)
    except CacheError as e:
        return f"not cached: {e}"
    return None


def facts_from_cache(cache: Any, repo: str, sha: str, revision: str | None, filename: str | None) -> HubFacts | None:
    """The facts stored for (repo, sha), or None when anything required is missing."""
    listing = cache.get_listing(repo, sha, revision=revision)
    if listing is None:
        return None
    configs = {}
    for name in (CONFIG_FILE, *COMPANION_FILES):
        if listing.has(name):
            if (config := cache.get_config(repo, sha, name)) is None:
                return None
            configs[name] = config
    read, required = wanted_gguf(listing, filename)
    headers = {}
    for path in read:
        record = cache.get_gguf_header(repo, sha, path)
        header = header_from_record(record, name=path) if record is not None else None
        if header is not None:
            headers[path] = header
        elif path in required:
            return None
    return HubFacts(listing=listing, configs=configs, safetensors=cache.get_safetensors(repo, sha), headers=headers)


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
    artifacts = build_offer(files, shape=shape, params_by_dtype=st.params_by_dtype if st else None,
                            shards=list(st.files) if st else None, gguf_headers=facts.headers,
                            has_config=config is not None, where=f"{repo}@{listing.sha[:12]}")  # fmt: skip
    if spec.filename:
        artifacts = tuple(sorted(artifacts, key=lambda a: spec.filename not in a.files))
    notes += list(facts.notes)
    notes += [f"{a.label}: size computed from the shape" for a in artifacts if a.size_source == "computed"]
    return ResolvedModel(spec=spec, shape=shape, artifacts=artifacts, origin=origin, repo=repo,  # type: ignore[arg-type]
                         sha=listing.sha, notes=tuple(notes))  # fmt: skip


def from_snapshot(spec: ModelSpec, revision: str | None, note: str) -> ResolvedModel | None:
    """The snapshot's answer for a Hub id, or None when it has no entry for it (or another revision)."""
    from explorer.snapshot import try_load_snapshot

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
    return ResolvedModel(spec=spec, shape=shape, artifacts=artifacts, origin="snapshot", repo=entry.repo,
                         sha=entry.sha, notes=(note, *entry.notes, *entry.size_notes()))  # fmt: skip


def _falls_back(e: ExplorerError) -> bool:
    """Whether a Hub failure may be answered from the snapshot: the Hub was unreachable or broken, not definite."""
    return isinstance(e, (HubTimeoutError, HubConnectionError)) or type(e) is HubError and "HTTP 5" in str(e)


def _settings(settings: HubSettings | None, *, offline: bool, token: str | None) -> HubSettings:
    if settings is None:
        return HubSettings.resolve(token=token, offline=True if offline else None)
    changes: dict[str, Any] = {}
    if offline:
        changes["offline"] = True
    if token:
        changes["token"] = token
    return dataclasses.replace(settings, **changes) if changes else settings


def _open_cache(offline: bool):
    from explorer.cache import DEFAULT_TTL_S, Cache

    try:  # offline, a branch mapping of any age beats no answer
        return Cache.open(ttl_s=float("inf") if offline else DEFAULT_TTL_S)
    except CacheError:
        return None


def resolve_hub(spec: ModelSpec, *, revision: str | None = None, offline: bool = False, token: str | None = None,
                cache: Any = None, settings: HubSettings | None = None, progress=None,
                cancel: threading.Event | None = None) -> ResolvedModel:  # fmt: skip
    """Resolve a Hub id: the cache, then the Hub unless offline, then the snapshot (see the module docstring)."""
    s = _settings(settings, offline=offline, token=token)
    own = cache is None
    if own:
        cache = _open_cache(s.offline)
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
        from explorer.hub_many import default_progress

        try:
            facts = fetch_facts(spec.repo, revision, spec.filename, settings=s, progress=default_progress(progress),
                                cancel=cancel)  # fmt: skip
        except HubError as e:
            if not _falls_back(e) or (got := from_snapshot(spec, revision, _fallback_note(e))) is None:
                raise
            return got
        notes = [f"read from the Hub at {s.endpoint} (sha {facts.listing.sha[:12]})"]
        if (why := store_facts(cache, facts)) is not None:
            notes.append(why)
        return build_model(spec, facts, "hub", notes)
    finally:
        if own and cache is not None:
            cache.close()


def _fallback_note(e: HubError) -> str:
    return f"the Hub failed ({type(e).__name__}: {e.message}); answered from the shipped snapshot instead"
