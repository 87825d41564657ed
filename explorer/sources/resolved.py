"""What resolving a MODEL argument gives: :class:`ResolvedModel`, a shape and what it offers, and whence.

Made by :mod:`explorer.sources.local_files` (local files), :mod:`explorer.sources.resolve`
(a pasted config) and :mod:`explorer.sources.from_hub` (cache, Hub, snapshot), read by the CLI, the
notebooks and the planner's callers. It imports only the parsed argument
(:mod:`explorer.sources.spec`) and the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from explorer.artifacts.checkpoints import PublishedCheckpoint
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.sources.spec import ModelSpec

__all__ = ["Origin", "ResolvedModel"]

Origin = Literal["file", "pasted", "cache", "hub", "snapshot"]


@dataclass(frozen=True, kw_only=True)
class ResolvedModel:
    """A model ready to plan, and where its facts came from.

    Attributes:
        spec: the parsed MODEL argument.
        shape: the model's shape.
        artifacts: what it offers (original weights, GGUF files), the chosen GGUF first.
        origin: ``file`` (local disk), ``pasted`` (a config.json's text), ``cache``, ``hub`` or ``snapshot``.
        repo: the Hub repository, None for local files.
        sha: the commit the facts belong to, when known.
        notes: how it was resolved: fallbacks, approximations, where sizes came from.
        checkpoints: published quantised checkpoints of the model known without asking the Hub
            (the cache, the shipped list): what-if precisions load from them
            (:func:`explorer.sources.checkpoints.published_checkpoints` asks the Hub's model tree).
        stale: answered from a cache entry past its TTL because the Hub could not answer.
    """

    spec: ModelSpec
    shape: ModelShape
    artifacts: tuple[Artifact, ...]
    origin: Origin
    repo: str | None = None
    sha: str | None = None
    notes: tuple[str, ...] = ()
    checkpoints: tuple[PublishedCheckpoint, ...] = ()
    stale: bool = False

    def __repr__(self) -> str:
        labels = ", ".join(a.label for a in self.artifacts)
        return (
            f"ResolvedModel(text={self.spec.text!r}, origin={self.origin!r}, repo={self.repo!r}, "
            f"sha={self.sha!r}, params={self.shape.params:,}, artifacts=[{labels}])"
        )

    @property
    def launch_ref(self) -> str:
        """What a launch command loads the model from: its Hub repository; a local model folder or .gguf file
        by its absolute path; a visible placeholder when only a config file was given (or pasted), which has no
        weights beside it. Never a file's stem, which an engine would look up on the Hub as a repository."""
        if self.repo:
            return self.repo
        path = self.spec.path.expanduser() if self.spec.path is not None else None
        if path is not None and self.spec.kind == "gguf":
            return str(path.resolve())
        if path is not None and (path.is_dir() or path.name == "config.json"):
            return str((path if path.is_dir() else path.parent).resolve())
        return f"<the folder with {self.shape.name or 'the model'}'s config.json and weights>"

    @property
    def names_file(self) -> bool:
        """Whether the user named one file (``org/name:FILE.gguf``, a local .gguf): it alone is planned, at no
        other precision."""
        return bool(self.spec.filename) or self.spec.kind == "gguf"

    @property
    def selected(self) -> Artifact | None:
        """The artifact the user named (``org/name:FILE.gguf``, a local .gguf), else the first offered."""
        want = self.spec.filename or (self.spec.path.name if self.spec.kind == "gguf" and self.spec.path else None)
        if want:
            for a in self.artifacts:
                if want in a.files or a.name == want:
                    return a
        return self.artifacts[0] if self.artifacts else None

    @property
    def offer(self) -> tuple[Artifact, ...]:
        """What a plan of the model's own weights considers: :attr:`artifacts`, with a published GGUF of those
        very weights beside them (:func:`explorer.artifacts.offer.native_gguf`: ggml-org's MXFP4 file of
        gpt-oss), which llama.cpp loads rather than converting the weights."""
        from explorer.artifacts.offer import plan_artifacts  # as what_ifs: the offer reads GGUF headers

        return tuple(plan_artifacts(self.shape, self.artifacts, checkpoints=self.checkpoints))

    def what_ifs(self, names: tuple[str, ...] | None = None) -> tuple[Artifact, ...]:
        """The model at other precisions (default: :data:`explorer.artifacts.offer.DEFAULT_WHAT_IFS`): its
        published checkpoints where known, else what-ifs sized from the shape."""
        # imported here: the offer reads GGUF headers, which a model answered from the snapshot never needs
        from explorer.artifacts.offer import DEFAULT_WHAT_IFS, what_if_artifacts

        return what_if_artifacts(self.shape, DEFAULT_WHAT_IFS if names is None else names, self.checkpoints)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready dict of where the model came from and what it offers (no GGUF headers)."""
        return {
            "origin": self.origin,
            "stale": self.stale,
            "repo": self.repo,
            "sha": self.sha,
            "notes": list(self.notes),
            "artifacts": [_artifact_dict(a) for a in self.artifacts],
        }


def _artifact_dict(a: Artifact) -> dict[str, Any]:
    return {
        "name": a.name,
        "format": a.format,
        "quant": a.quant,
        "size_bytes": a.size_bytes,
        "size_source": a.size_source,
        "files": list(a.files),
        "projector": a.projector,
        "what_if": a.what_if,
        "repo": a.repo,
        "note": a.note,
    }
