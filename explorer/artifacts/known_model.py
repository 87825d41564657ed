"""A model one knows with what its repository offers: the record ``explorer fit`` lists and the sources make."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownModel:
    """A model one knows, as ``explorer fit`` and the app's list show it.

    Attributes:
        ref: its id (``org/name``).
        shape: its shape.
        artifacts: what its repository offers (the original weights, GGUF files).
        origin: where it came from (``snapshot``, ``cache``, ``chosen``: an operator's pick).
        fallback: the precisions planned when ``artifacts`` keep no all-GPU layout that runs as printed
            (:func:`explorer.artifacts.offer.fallback_artifacts`, as ``explorer plan`` does), or a callable that
            makes them, called only for a model that needs them; empty: none.
    """

    ref: str
    shape: ModelShape
    artifacts: tuple[Artifact, ...]
    origin: str = "snapshot"
    fallback: tuple[Artifact, ...] | Callable[[], tuple[Artifact, ...]] = ()
