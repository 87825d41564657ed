"""The app's last plan and the question it answered: what the cells below the table read, and what lets the
answer's cell redraw more rows, other columns or another drawn option without planning again (issue 27 §1: a
move runs as few cells as it can, so the table, the drawn option and its chart are one cell)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from explorer.engines.options import PlanResult
from explorer.engines.request import PlanRequest
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape

__all__ = ["LastPlan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LastPlan:
    """A plan the app made, with its question.

    Attributes:
        shape: the model's shape (the app's model cell's object: the same object while the model is unchanged).
        cluster: the cluster planned on (the cluster cell's object, likewise).
        request: the request planned.
        chosen: the weights planned.
        goal: the goal that ranked the ways.
        result: the planner's answer.
        fallback: the precisions planned beside the chosen weights (``fallback_artifacts``, empty when a what-if was
            chosen): the ways forward plan them too, and reading them here saves computing them again on a move.
        plan_ms: the planner call's wall time, in milliseconds (shown in the table's heading).
    """

    shape: ModelShape
    cluster: Cluster
    request: PlanRequest
    chosen: tuple[Artifact, ...]
    goal: str
    result: PlanResult
    plan_ms: float
    fallback: tuple[Artifact, ...] = ()

    def same_weights(self, shape: ModelShape, chosen: Sequence[Artifact]) -> bool:
        """Whether ``chosen`` are this plan's weights of the same model: then its :attr:`fallback` stands (the
        fallback precisions depend on the model and the weights alone, not on the context)."""
        return shape is self.shape and tuple(chosen) == self.chosen

    def same_question(
        self, shape: ModelShape, cluster: Cluster, request: PlanRequest, chosen: Sequence[Artifact], goal: str
    ) -> bool:
        """Whether planning this question again would repeat this plan: the same model and cluster objects (the
        cells that build them did not re-run), an equal request, the same weights and goal."""
        return (
            shape is self.shape
            and cluster is self.cluster
            and request == self.request
            and tuple(chosen) == self.chosen
            and goal == self.goal
        )
