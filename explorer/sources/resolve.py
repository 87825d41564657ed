"""Model source -> ModelShape + artifacts: a local file, the cache, the Hub or the shipped snapshot.

:func:`resolve_model` takes what a user typed (see :mod:`explorer.sources.spec`):

- a local ``config.json`` or model folder: the shape from the config, the
  offer from the folder's weight files (sizes read from the disk);
- a local ``.gguf`` file: only its header bytes are read (a split set's
  sibling parts too, merged), the shape comes from the header;
- a Hub id (``org/name``, ``org/name@revision``, ``org/name:FILE.gguf``):
  answered, in order, by the cache, the Hub (unless offline), or the
  shipped snapshot; see :mod:`explorer.sources.from_hub`.

The result says which one answered in ``origin``. A token is never part of
a result, a note or an error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from explorer.model.artifacts import Artifact
from explorer.errors import ConfigError
from explorer.sources.local_files import read_local_config
from explorer.plan.offer import (
    DEFAULT_WHAT_IFS,
    build_offer,
    is_projector,
    what_if_artifacts,
)
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.sources.spec import ModelSpec, parse_model_spec

__all__ = ["Origin", "ResolvedModel", "resolve_model"]

Origin = Literal["file", "cache", "hub", "snapshot"]


@dataclass(frozen=True, kw_only=True)
class ResolvedModel:
    """A model ready to plan, and where its facts came from.

    Attributes:
        spec: the parsed MODEL argument.
        shape: the model's shape.
        artifacts: what it offers (original weights, GGUF files), the chosen GGUF first.
        origin: ``file`` (local disk), ``cache``, ``hub`` or ``snapshot``.
        repo: the Hub repository, None for local files.
        sha: the commit the facts belong to, when known.
        notes: how it was resolved: fallbacks, approximations, where sizes came from.
    """

    spec: ModelSpec
    shape: ModelShape
    artifacts: tuple[Artifact, ...]
    origin: Origin
    repo: str | None = None
    sha: str | None = None
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        labels = ", ".join(a.label for a in self.artifacts)
        return (f"ResolvedModel(text={self.spec.text!r}, origin={self.origin!r}, repo={self.repo!r}, "
                f"sha={self.sha!r}, params={self.shape.params:,}, artifacts=[{labels}])")  # fmt: skip

    @property
    def selected(self) -> Artifact | None:
        """The artifact the user named (``org/name:FILE.gguf``, a local .gguf), else the first offered."""
        want = self.spec.filename or (self.spec.path.name if self.spec.kind == "gguf" and self.spec.path else None)
        if want:
            for a in self.artifacts:
                if want in a.files or a.name == want:
                    return a
        return self.artifacts[0] if self.artifacts else None

    def what_ifs(self, names: tuple[str, ...] = DEFAULT_WHAT_IFS) -> tuple[Artifact, ...]:
        """What-if artifacts of the original weights (sizes computed from the shape)."""
        return what_if_artifacts(self.shape, names)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready dict of where the model came from and what it offers (no GGUF headers)."""
        return {
            "origin": self.origin,
            "repo": self.repo,
            "sha": self.sha,
            "notes": list(self.notes),
            "artifacts": [_artifact_dict(a) for a in self.artifacts],
        }


def _artifact_dict(a: Artifact) -> dict[str, Any]:
    return {"name": a.name, "format": a.format, "quant": a.quant, "size_bytes": a.size_bytes,
            "size_source": a.size_source, "files": list(a.files), "projector": a.projector, "what_if": a.what_if}


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

    Raises:
        ConfigError, GGUFError: a local file cannot be read.
        HubError: a subclass naming the failure (gated, not found, timeout, offline miss…).
    """
    spec = parse_model_spec(text)
    if spec.kind == "config":
        return _resolve_config(spec)
    if spec.kind == "gguf":
        return _resolve_gguf_file(spec)
    from explorer.sources.from_hub import resolve_hub

    if revision and spec.revision and revision != spec.revision:
        raise ConfigError(f"{text} names revision {spec.revision!r} but --revision says {revision!r}",
                          hint="give the revision once")  # fmt: skip
    return resolve_hub(spec, revision=revision or spec.revision, offline=offline, token=token, cache=cache,
                       settings=settings, progress=progress, cancel=cancel)  # fmt: skip


def _folder_files(folder: Path) -> dict[str, int]:
    try:
        return {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    except OSError:
        return {}


def _resolve_config(spec: ModelSpec) -> ResolvedModel:
    local = read_local_config(spec.path)
    shape = shape_from_config(local.config, name=local.name, companions=local.companions)
    # only a model folder's files belong to the model (a config.json lying among others does not)
    files = _folder_files(local.path.parent) if local.path.name == "config.json" else {}
    artifacts = build_offer(files, shape=shape, has_config=True, where=str(local.path.parent))
    notes = tuple(f"{a.label}: size computed from the shape (no weight files beside the config)"
                  for a in artifacts if a.size_source == "computed")  # fmt: skip
    return ResolvedModel(spec=spec, shape=shape, artifacts=artifacts, origin="file", notes=notes)


def _resolve_gguf_file(spec: ModelSpec) -> ResolvedModel:
    from explorer.gguf.header import split_parts
    from explorer.sources.gguf_files import (
        read_header_file,
        shape_from_header,
        split_siblings,
    )

    path = spec.path
    parts = split_siblings(path)
    headers = {p.name: read_header_file(p)[0] for p in parts}
    files = {p.name: p.stat().st_size for p in parts}
    for p in path.parent.glob("*.gguf"):  # a projector beside the model goes with it
        if is_projector(p.name):
            files[p.name] = p.stat().st_size
    artifacts = build_offer(files, gguf_headers=headers, has_config=False, where=str(path.parent))
    chosen = next(a for a in artifacts if path.name in a.files)
    split = split_parts(path.name)
    name = split[0] if split else path.stem
    shape = shape_from_header(chosen.gguf_header, name=name)
    span = sum(h.header_bytes for h in headers.values())
    notes = (f"read only the header ({span:,} bytes) of {sum(files[p.name] for p in parts):,} in {len(parts)} file(s)",)
    return ResolvedModel(spec=spec, shape=shape, artifacts=(chosen,), origin="file", notes=notes)
