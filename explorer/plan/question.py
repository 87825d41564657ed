"""The question a plan answers, as a key: what :func:`explorer.plan.planner.plan` remembers whole plans by."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer.engines.request import PlanRequest
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.speed.estimate import SpeedSettings


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PlanQuestion:
    """Everything a plan is made from (:func:`~explorer.plan.planner.plan`'s arguments, the engines they name
    resolved), as a memo's key: the shape, the cluster, the catalogue and the engines by identity (the memos below
    the planner key a shape so too), the rest by equality (the app builds its request, artifacts and speed
    settings afresh on every run).

    Attributes:
        engines: the engines ``request.engines`` names, as the registry gives them now (a plugin registered
            since makes another question).
        artifacts: None: the shape's own weights (or the request's what-if precision).
        fallback: the other precisions planned when the artifacts keep no layout on accelerators alone (a
            callable making them: compared by identity).
        suggest: True, False or the suggestion kinds.
    """

    shape: ModelShape
    cluster: Cluster
    catalogue: Catalogue | None
    engines: tuple[object, ...]
    request: PlanRequest
    artifacts: tuple[Artifact, ...] | None
    fallback: tuple[Artifact, ...] | Callable[[], Sequence[Artifact]]
    model_ref: str | None
    goal: str | None
    sort: str | None
    speed: bool | SpeedSettings
    suggest: bool | tuple[str, ...]
    first_fit: bool

    def _same_objects(self, other: PlanQuestion) -> bool:
        return (
            self.shape is other.shape
            and self.cluster is other.cluster
            and self.catalogue is other.catalogue
            and all(a is b for a, b in zip(self.engines, other.engines, strict=True))
        )

    def _asked(self) -> tuple:
        return (self.request, self.artifacts, self.fallback, self.model_ref, self.goal, self.sort, self.speed,
                self.suggest, self.first_fit)  # fmt: skip

    def __hash__(self) -> int:
        # artifacts hold dicts (no hash): they and the fallback are compared, not hashed
        held = (id(self.shape), id(self.cluster), id(self.catalogue), len(self.engines))
        return hash((held, self.request, self.model_ref, self.goal, self.sort, self.speed, self.suggest))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlanQuestion) or len(self.engines) != len(other.engines):
            return False
        return self._same_objects(other) and self._asked() == other._asked()
