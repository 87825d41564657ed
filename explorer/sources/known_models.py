"""Every model explorer knows without the network: the shipped snapshot's, and those in the local cache.

:func:`known_models` lists them as :class:`~explorer.artifacts.known_model.KnownModel`
records (shape and offered artifacts) for the hardware-first view (``explorer
fit``): the snapshot's entries first, then every repo the DuckDB cache holds a
config or GGUF header of (from the Hub endpoint of ``HF_ENDPOINT``) that the
snapshot lacks, each resolved offline from the cache (or, for visitors of the published app, only the
operator's ``chosen`` repos from it, so no visitor lists what another fetched). The cache is opened
read-only and only when its file exists, so listing never creates or writes
one (and imports no DuckDB without a file).
A model that cannot be read is left out with a note saying why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from explorer.artifacts.known_model import KnownModel
from explorer.artifacts.offer import fallback_artifacts, original_artifact
from explorer.errors import ExplorerError
from explorer.sources.cache.journal import present
from explorer.sources.cache.location import default_cache_path
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.snapshot.read import Snapshot, load_snapshot

__all__ = ["KnownModels", "known_models"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownModels:
    """The models listed, and those left out.

    Attributes:
        models: the models, snapshot first, then the cache's.
        skipped: ``"repo: why"`` for each model that could not be read.
        cache_path: the cache file read, or None when there was none.
    """

    models: tuple[KnownModel, ...]
    skipped: tuple[str, ...] = field(default=())
    cache_path: str | None = None


def _known(repo: str, shape, artifacts, origin: str) -> KnownModel:
    """A listed model with the fallback precisions ``explorer plan`` would widen to (published where known)."""
    artifacts = tuple(artifacts)
    fallback = partial(fallback_artifacts, shape, artifacts, shipped_checkpoints(repo))  # made when needed
    return KnownModel(ref=repo, shape=shape, artifacts=artifacts, origin=origin, fallback=fallback)


def _from_snapshot(snapshot: Snapshot, skipped: list[str]) -> list[KnownModel]:
    out = []
    for repo in snapshot.repos:
        try:
            shape = snapshot.shape(repo)
            artifacts = snapshot.get(repo).offered() or (original_artifact(shape),)  # type: ignore[union-attr]
        except ExplorerError as err:
            skipped.append(f"{repo}: {err}")
            continue
        out.append(_known(repo, shape, artifacts, "snapshot"))
    return out


def _from_cache(path: str, known: set[str], skipped: list[str], only: Sequence[str] | None = None) -> list[KnownModel]:
    """The cache's models the snapshot lacks: every one, or those of ``only`` (each must be in the cache)."""
    from explorer.sources.cache.store import Cache
    from explorer.sources.hub.settings import HubSettings
    from explorer.sources.resolve import resolve_model

    out = []
    settings = HubSettings.resolve(offline=True)  # the rows of HF_ENDPOINT's answers: a mirror's never mix in
    with Cache.open(path, read_only=True, endpoint=settings.endpoint) as cache:
        for repo in cache.repos() if only is None else only:
            if repo.lower() in known:
                continue
            known.add(repo.lower())
            try:
                resolved = resolve_model(repo, offline=True, cache=cache, settings=settings)
            except ExplorerError as err:
                skipped.append(f"{repo}: {err}")
                continue
            artifacts = resolved.artifacts or (original_artifact(resolved.shape),)
            out.append(_known(repo, resolved.shape, artifacts, "cache" if only is None else "chosen"))
    return out


def known_models(
    *,
    snapshot: Snapshot | None = None,
    cache_path: str | os.PathLike | None = None,
    use_cache: bool = True,
    chosen: Sequence[str] = (),
) -> KnownModels:
    """The snapshot's models, then the cache's others (read-only; ``cache_path`` default: ``$EXPLORER_CACHE``
    or the user's cache directory; skipped when the file does not exist or ``use_cache`` is False).

    With ``use_cache`` False, ``chosen`` (the published app's operator's repos) are still read from the
    cache, and only they; one the cache lacks is skipped with a note saying so.
    """
    skipped: list[str] = []
    models = _from_snapshot(snapshot or load_snapshot(), skipped)
    path = str(cache_path) if cache_path is not None else default_cache_path()
    known = {m.ref.lower() for m in models}
    only = None if use_cache else [repo for repo in chosen if repo.lower() not in known]
    if only == [] or path == ":memory:" or not present(path):
        skipped += [f"{repo}: not in the cache (fetch it once on this machine)" for repo in only or ()]
        return KnownModels(models=tuple(models), skipped=tuple(skipped))
    try:
        models += _from_cache(path, known, skipped, only)
    except ExplorerError as err:
        skipped.append(f"the cache at {path}: {err}")
    return KnownModels(models=tuple(models), skipped=tuple(skipped), cache_path=path)
