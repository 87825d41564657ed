"""EDGE: a model's published quantised checkpoints: the cache, else the Hub's model tree, else the shipped list.

The shipped list (``data/checkpoints.json``, provenance in ``data/checkpoints.md``)
answers offline for the snapshot's popular models; the Hub's model tree
(:mod:`explorer.sources.hub.tree`) answers for any model and is cached (the
``checkpoints`` table expires with the cache's ttl, as the tree grows). A Hub
that fails falls back to the shipped list, and says so.

Meta renamed ``meta-llama/Meta-Llama-3.1-*`` to ``meta-llama/Llama-3.1-*``, and
Neural Magic became Red Hat AI: both spellings of an id find the same entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from explorer.artifacts.checkpoints import PublishedCheckpoint, checkpoint_from_record
from explorer.datafiles import data_path
from explorer.errors import ExplorerError
from explorer.memo import memo
from explorer.sources.resolved import ResolvedModel

__all__ = [
    "PublishedList",
    "checkpoints_for_plan",
    "checkpoints_for_precision",
    "id_spellings",
    "published_checkpoints",
    "shipped_checkpoints",
]

#: (old prefix, new prefix) of repository ids the Hub renamed; ids match under either
RENAMED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("meta-llama/meta-llama-3.1-", "meta-llama/llama-3.1-"),
    ("neuralmagic/", "redhatai/"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedList:
    """A model's published checkpoints and where they came from.

    Attributes:
        checkpoints: every one known, in the order found.
        origin: ``cache``, ``hub``, ``shipped``, ``none``, or ``resolver``: those the model's resolver found.
        note: what a user should know (the Hub failed and the shipped list answered…), or "".
    """

    checkpoints: tuple[PublishedCheckpoint, ...]
    origin: str
    note: str = ""


def id_spellings(repo: str) -> frozenset[str]:
    """The lower-case spellings of ``repo`` that name the same model (before and after a rename)."""
    key = repo.lower()
    out = {key}
    for old, new in RENAMED_PREFIXES:
        if key.startswith(old):
            out.add(new + key[len(old) :])
        elif key.startswith(new):
            out.add(old + key[len(new) :])
    return frozenset(out)


@memo(1, keyed_on="nothing: the shipped list is read once per process")
def _shipped_index() -> dict[str, tuple[dict, ...]]:
    """The shipped list by base-model id (lower case), each entry's record; Instruct quants under the base ids too."""
    doc = json.loads(data_path("checkpoints.json").read_text(encoding="utf-8"))
    index: dict[str, list[dict]] = {}
    for entry in doc["entries"]:
        index.setdefault(entry["base_model"].lower(), []).append({**entry, "stands_in": False})
        for base in entry.get("also_base_of") or ():
            index.setdefault(base.lower(), []).append({**entry, "stands_in": True})
    return {k: tuple(v) for k, v in index.items()}


def shipped_checkpoints(repo: str) -> tuple[PublishedCheckpoint, ...]:
    """The shipped list's checkpoints of ``repo`` (either spelling of a renamed id)."""
    index = _shipped_index()
    records = [r for key in sorted(id_spellings(repo)) for r in index.get(key, ())]
    return tuple(checkpoint_from_record(r, source="shipped") for r in records)


def published_checkpoints(repo: str, *, settings=None, cache=None, offline: bool = False) -> PublishedList:
    """``repo``'s published checkpoints: the cache, else the Hub (unless ``offline``), else the shipped list.

    ``settings`` is a :class:`~explorer.sources.hub.settings.HubSettings`; ``cache`` an open
    :class:`~explorer.sources.cache.store.Cache` or None. A Hub answer is stored in the cache.
    """
    if cache is not None and (cached := cache.get_checkpoints(repo)) is not None:
        return PublishedList(checkpoints=cached, origin="cache")
    note = ""
    if not offline and settings is not None:
        from explorer.sources.hub.tree import fetch_model_tree  # the Hub client only when it is asked

        try:
            found = fetch_model_tree(repo, settings=settings)
        except ExplorerError as e:
            note = f"the Hub's model tree could not be read ({e.message}): published checkpoints from the shipped list"
        else:
            if cache is not None:
                cache.put_checkpoints(repo, found)
            return PublishedList(checkpoints=found, origin="hub")
    shipped = shipped_checkpoints(repo)
    return PublishedList(checkpoints=shipped, origin="shipped" if shipped else "none", note=note)


def checkpoints_for_plan(repo: str, *, offline: bool = False, token: str | None = None) -> PublishedList:
    """:func:`published_checkpoints` with the Hub settings of the environment and the default cache of
    their endpoint (opened read-only offline, and only when it exists), for a command that plans one model."""
    from explorer.sources.cache.store import open_default_cache
    from explorer.sources.hub.settings import HubSettings

    settings = HubSettings.resolve(token=token, offline=True if offline else None)
    cache = open_default_cache(settings, read_only=settings.offline, notes=[])
    try:
        return published_checkpoints(repo, settings=settings, cache=cache, offline=settings.offline)
    finally:
        if cache is not None:
            cache.close()


def checkpoints_for_precision(
    resolved: ResolvedModel, precision: str | None, *, offline: bool = False, token: str | None = None
) -> PublishedList:
    """The published checkpoints a model planned at ``precision`` may load, for ``explorer plan`` and
    ``explorer place`` alike: a Hub repository's, asked of the cache, the Hub's model tree and the shipped list
    (:func:`checkpoints_for_plan`); without a precision, or for a file the user named, those the resolver
    found (``resolved.checkpoints``: the cache's or the shipped list's; origin ``resolver``)."""
    if precision and resolved.repo and not resolved.names_file:
        return checkpoints_for_plan(resolved.repo, offline=offline, token=token)
    return PublishedList(checkpoints=resolved.checkpoints, origin="resolver")
