"""Model source -> ModelShape + artifacts: a local file, the cache, the Hub or the shipped snapshot.

:func:`resolve_model` takes what a user typed (see :mod:`explorer.sources.spec`):

- a local ``config.json``, model folder or ``.gguf`` file: read by
  :mod:`explorer.sources.local_files` (imported only then);
- a Hub id (``org/name``, ``org/name@revision``, ``org/name:FILE.gguf``):
  answered, in order, by the cache, the Hub (unless offline), or the
  shipped snapshot; see :mod:`explorer.sources.from_hub`.

The result (:class:`explorer.sources.resolved.ResolvedModel`) says which one
answered in ``origin``. A token is never part of a result, a note or an error.

This is the top of the resolver: it imports the Hub path
(:mod:`explorer.sources.from_hub`), which imports the records below it
(:mod:`explorer.sources.resolved`, :mod:`explorer.sources.spec`); nothing
below imports this module. Each source's readers load when that source is
asked, so that an offline answer from the shipped snapshot loads no GGUF
reader, Hub client or cache (``tests/cli/test_startup.py``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.sources.from_hub import resolve_hub
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec, parse_model_spec

__all__ = ["load_model", "load_shape", "resolve_config_text", "resolve_model"]


def resolve_model(
    text: str,
    *,
    offline: bool = False,
    token: str | None = None,
    revision: str | None = None,
    cache: Any = None,
    settings: Any = None,
    progress: Any = None,
    cancel: threading.Event | None = None,
    local_paths: bool = True,
    local_root: str | Path | None = None,
) -> ResolvedModel:
    """Resolve a MODEL argument into its shape and artifacts.

    Args:
        text: a path (config.json, folder, .gguf) or a Hub id (``org/name[@rev][:FILE.gguf]``).
        offline: never ask the Hub (also ``HF_HUB_OFFLINE=1``).
        token: a Hub token (else ``HF_TOKEN``); sent only in request headers.
        revision: a branch, tag or commit; overrides none given in ``text``.
        cache: an open :class:`explorer.sources.cache.store.Cache`; default: the one at
            ``$EXPLORER_CACHE`` (or the XDG path), opened and closed here.
        settings: :class:`explorer.sources.hub.settings.HubSettings`; ``offline`` and ``token`` override its fields.
        progress: ``progress(stage, done, total)`` (default: bars on a terminal).
        cancel: set it to stop a fetch between requests (FetchCancelled).
        local_paths, local_root: whether a path is read, and the one folder paths may name (a published
            app's visitor: none, or the operator's); see :func:`explorer.sources.spec.parse_model_spec`.

    Raises:
        ConfigError, GGUFError: a local file cannot be read.
        HubError: a subclass naming the failure (gated, not found, timeout, offline miss…).
    """
    spec = parse_model_spec(text, local_paths=local_paths, local_root=local_root)
    if spec.kind in ("config", "gguf"):
        # imported here: the local readers (GGUF headers, the offer of a folder's files) serve only a path;
        # a Hub id answered from the snapshot never loads them
        from explorer.sources.local_files import resolve_local

        return resolve_local(spec)
    if revision and spec.revision and revision != spec.revision:
        raise ConfigError(
            f"{text} names revision {spec.revision!r} but --revision says {revision!r}", hint="give the revision once"
        )
    return resolve_hub(
        spec,
        revision=revision or spec.revision,
        offline=offline,
        token=token,
        cache=cache,
        settings=settings,
        progress=progress,
        cancel=cancel,
    )


def resolve_config_text(text: str, name: str = "pasted config.json") -> ResolvedModel:
    """A model from a config.json's text (pasted into the app): its shape, and original weights sized from it.

    Raises:
        ConfigError: the text is not JSON, or not a model's config.
    """
    import json

    from explorer.artifacts.offer import build_offer  # as for a local file: only a pasted config needs the offer

    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"{name} is not JSON ({e})", hint="paste the whole config.json, braces included") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{name} is not a JSON object", hint="paste the whole config.json, braces included")
    shape = shape_from_config(config, name=str(config.get("_name_or_path") or name))
    artifacts = build_offer({}, shape=shape, has_config=True, where=name)
    notes = tuple(f"{a.label}: size computed from the shape (no weight files)" for a in artifacts)
    spec = ModelSpec(kind="config", text=name)
    return ResolvedModel(spec=spec, shape=shape, artifacts=artifacts, origin="pasted", notes=notes)


def load_model(text: str, **kw) -> ResolvedModel:
    """Resolve a MODEL argument: shape, artifacts and origin (see :func:`resolve_model`).

    Keyword arguments (``offline``, ``token``, ``revision``, ``cache``,
    ``settings``, ``progress``, ``cancel``) go to the resolver.
    """
    return resolve_model(text, **kw)


def load_shape(text: str, **kw) -> ModelShape:
    """The shape of a local config.json, model folder or .gguf file, or of a Hub id (see :func:`load_model`)."""
    spec = parse_model_spec(text)
    if spec.kind == "config" and not kw:
        from explorer.sources.local_files import read_local_config  # as in resolve_model

        local = read_local_config(spec.path)
        return shape_from_config(local.config, name=local.name, companions=local.companions)
    return load_model(text, **kw).shape
