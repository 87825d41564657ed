"""A Hub repo's facts at one commit: read from the Hub, stored in the cache, read back, made a model.

:func:`fetch_facts` reads the listing, config.json and companions, the
safetensors parameter counts and GGUF headers (header bytes only: the first
part of each set, every part of a set the user named or the shape is read
from). :func:`store_facts` writes them one transaction per record, the
listing last, so a listed repo has everything; :func:`facts_from_cache`
reads them back, or misses when anything required is absent; :func:`build_model`
makes the shape and the offer of them (the checks a poisoned entry fails).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from explorer.artifacts.offer import build_offer, gguf_sets
from explorer.errors import (
    CacheError,
    GGUFError,
    HubError,
    HubFileNotFoundError,
    HubResponseError,
    capped_list,
)
from explorer.gguf.header import GGUFHeader, merge_split_headers
from explorer.gguf.quant import quant_from_filename
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.gguf_files import header_from_record, header_record, shape_from_header
from explorer.sources.hub.records import (
    COMPANION_FILES,
    CONFIG_FILE,
    RepoListing,
    SafetensorsParams,
)
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec

__all__ = ["HubFacts", "build_model", "facts_from_cache", "fetch_facts", "shape_set", "store_facts", "wanted_gguf"]

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
            choices = capped_list(offered) or "none (the repo has no GGUF model files)"
            raise HubError(
                f"{listing.repo_id}@{listing.sha[:12]} has no GGUF model file {filename}",
                hint=f"pick one of: {choices}",
            )
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
    from explorer.gguf.header import parse_gguf_header

    return lambda prefix: parse_gguf_header(prefix, file_size=size or None, name=path)


def fetch_facts(repo: str, revision: str | None, filename: str | None, *, settings: Any, progress=None,
                cancel: threading.Event | None = None) -> HubFacts:  # fmt: skip
    """Read a repo's facts from the Hub (headers only for weights)."""
    from explorer.sources.hub import early
    from explorer.sources.hub.many import fetch_repo_basics, has_gguf_model
    from explorer.sources.hub.weights import fetch_gguf_header_bytes

    # the command line may have started this read before it loaded the model code (explorer.sources.hub.early)
    basics = early.take_basics(repo, revision, settings)
    settings = settings.started()
    if basics is None:
        basics = fetch_repo_basics(
            repo, revision, settings=settings, has_gguf=has_gguf_model, progress=progress, cancel=cancel
        )
    listing, configs, st = basics
    read, required = wanted_gguf(listing, filename)
    headers, notes, missing = {}, [], set()
    for path in read:
        size = listing.file(path).size_bytes
        try:
            headers[path], _ = fetch_gguf_header_bytes(
                repo,
                listing.sha,
                path,
                size_bytes=size,
                parse=_parse_for(path, size),
                settings=settings,
                progress=progress,
                cancel=cancel,
            )
        except HubFileNotFoundError:
            if path in required:
                raise
            missing.add(path)
            notes.append(f"{path}: the Hub answered 404 (not found) for it; dropped from the offer")
        except (GGUFError, HubResponseError) as e:
            if path in required:
                raise
            notes.append(f"{path}: header unreadable ({e}); its quant is taken from the file name")
    if missing:  # a 404 at a resolved commit is for good: the file is not part of the repo at that commit
        listing = replace(listing, files=tuple(f for f in listing.files if f.path not in missing))
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
    if not cache.keeps_writes:
        return f"not cached: the cache at {cache.path} is {cache.mode}" + (f" ({cache.why})" if cache.why else "")
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


# --- the model the facts make ----------------------------------------------------------------


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
    if shape is None and not sets:  # the listing named config.json, then its download answered 404
        listed = (
            "names config.json, but the Hub answered 404 (not found) for it"
            if CONFIG_FILE in files
            else ("has neither a config.json nor a GGUF file")
        )
        raise HubFileNotFoundError(f"the file listing of {repo} {listed}", hint="try again later, or pick another repo")
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
        stale=stale,
    )
