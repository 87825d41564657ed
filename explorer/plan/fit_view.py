"""Hardware first: every model one knows, with its best option on one cluster ("what runs on my machine?").

:func:`fit_rows` plans each model (its own artifacts, at the asked context and
concurrency, ranked by the goal) and keeps the best option: its tier, engine,
precision, longest context, decode estimate and replicas. A model whose best
option leaves layers off the accelerators, or that fits nowhere, also gets
its best suggestion (the first change that fits: a precision, an fp8 KV
cache, a shorter context). Rows come best first: models that fit, by tier,
then by the goal (the biggest models first for ``fewest-cards``); then those
that do not fit, the smallest first (the nearest to fitting).

A model the planner cannot read is a row with its error, never a crash of the view.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.artifacts.known_model import KnownModel
from explorer.engines.options import TIER_LABELS, Option
from explorer.engines.request import PlanRequest
from explorer.errors import ExplorerError
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.cluster import Cluster
from explorer.plan.planner import plan
from explorer.plan.ranking import goal_named
from explorer.plan.suggest import Suggestion
from explorer.speed.estimate import SpeedSettings

__all__ = ["FIT_KINDS", "FitRow", "fit_row", "fit_rows"]

#: the suggestions the view tries, cheapest first; it keeps the first that fits
FIT_KINDS = ("precision", "kv-cache", "context")


@dataclass(frozen=True, slots=True, kw_only=True)
class FitRow:
    """One model on the cluster.

    Attributes:
        model: its id.
        params: its parameters (a count).
        origin: where the model came from.
        best: its best option by the goal, or None when nothing fits.
        suggestion: when the best option is not tier 1, the first change that fits, else the one
            holding the longest context on accelerators; None when no single change helps (a bigger
            cluster then: ``explorer plan`` lists those suggestions).
        widened: the best option is a fallback precision (the model's own weights keep no all-GPU layout
            that runs as printed; ``PlanResult.widened``); the suggestion is then left out, as the row
            already holds the change.
        error: why the model could not be planned, or None.
    """

    model: str
    params: int
    origin: str
    best: Option | None
    suggestion: Suggestion | None = None
    widened: bool = False
    error: str | None = None

    @property
    def tier(self) -> int | None:
        """The best option's tier (1 every layer on accelerators, 2 offload, 3 CPU), None when nothing fits."""
        return self.best.tier if self.best is not None else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """The best option's decode estimate, one sequence at the asked concurrency."""
        speed = self.best.speed if self.best is not None else None
        return speed.decode_estimate_tokens_per_s if speed is not None else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (byte figures stay ints in ``best``)."""
        best = self.best
        return {
            "model": self.model,
            "params": self.params,
            "origin": self.origin,
            "fits": best is not None,
            "tier": self.tier,
            "tier_label": TIER_LABELS[best.tier] if best is not None else None,
            "engine": best.engine if best is not None else None,
            "precision": best.precision if best is not None else None,
            "label": best.label if best is not None else None,
            "max_context": best.evaluation.max_context_tokens if best is not None else None,
            "decode_tokens_per_s": None if self.decode_tokens_per_s is None else round(self.decode_tokens_per_s, 2),
            "replicas": best.replicas if best is not None else None,
            "command": best.evaluation.command if best is not None else None,
            "suggestion": self.suggestion.to_dict() if self.suggestion is not None else None,
            "widened": self.widened,
            "error": self.error,
        }


def fit_row(
    model: KnownModel,
    cluster: Cluster,
    request: PlanRequest,
    *,
    goal: str = "fewest-cards",
    speed: bool | SpeedSettings = True,
    catalogue: Catalogue | None = None,
) -> FitRow:
    """The model's best option on the cluster, and its best suggestion when that is not tier 1."""
    try:
        result = plan(
            model.shape,
            cluster,
            request,
            artifacts=list(model.artifacts) or None,
            model_ref=model.ref,
            goal=goal,
            speed=speed,
            suggest=FIT_KINDS,
            first_fit=True,
            catalogue=catalogue,
            fallback=model.fallback,
        )
    except ExplorerError as err:
        return FitRow(model=model.ref, params=model.shape.params, origin=model.origin, best=None, error=str(err))
    made = () if result.widened else result.suggestions
    closer = [s for s in made if s.max_context > 0]  # changes that at least hold some context on accelerators
    suggestion = next((s for s in made if s.fits), max(closer, key=lambda s: s.max_context, default=None))
    best = result.options[0] if result.options else None
    return FitRow(
        model=model.ref,
        params=model.shape.params,
        origin=model.origin,
        best=best,
        suggestion=suggestion,
        widened=bool(result.widened),
    )


def _order(goal: str):
    """The sort key of rows: fitting first, by tier, then by the goal; the rest smallest first."""

    def key(row: FitRow) -> tuple:
        best = row.best
        if best is None:
            return (1, 9, row.params, row.model)
        speed = best.speed
        figure = {
            "fastest": -(speed.decode_estimate_tokens_per_s if speed else 0.0),
            "throughput": -(best.aggregate_decode_tokens_per_s or (0.0, 0.0))[1],
            "cost": (speed.cost_per_million_tokens if speed and speed.cost_per_million_tokens is not None else 1e30),
            "longest-context": -best.evaluation.max_context_tokens,
        }.get(goal, -row.params)
        return (0, best.tier, figure, row.model)

    return key


def fit_rows(
    models: Iterable[KnownModel],
    cluster: Cluster,
    request: PlanRequest | None = None,
    *,
    goal: str = "fewest-cards",
    speed: bool | SpeedSettings = True,
    catalogue: Catalogue | None = None,
) -> list[FitRow]:
    """Every model's row (:func:`fit_row`), best first (see the module docstring)."""
    goal = goal_named(goal)
    request = request or PlanRequest()
    rows = [fit_row(m, cluster, request, goal=goal, speed=speed, catalogue=catalogue) for m in models]
    return sorted(rows, key=_order(goal))


def summary(rows: Sequence[FitRow]) -> dict[str, int]:
    """How many models land in each tier, and how many fit nowhere."""
    out = {"tier 1": 0, "tier 2": 0, "tier 3": 0, "no fit": 0}
    for row in rows:
        out[f"tier {row.tier}" if row.tier else "no fit"] += 1
    return out
