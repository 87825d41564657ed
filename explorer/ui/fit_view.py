"""Hardware first: which snapshot models run on this cluster, and the best way for each.

The app's "What runs here" tab: every model of the shipped snapshot planned
on the cluster with the app's request (its original weights, the engines
asked), biggest first. Issue 13's ``explorer fit`` view will answer the same
question in the core; this loop is the app's until then, and its rows are
what that view returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from explorer.engines.common import ENGINE_LABELS, PlanRequest
from explorer.errors import ExplorerError
from explorer.hardware.cluster import Cluster
from explorer.plan.planner import plan
from explorer.units import GiB

__all__ = ["FIT_COLUMNS", "fit_rows"]

#: the table's columns
FIT_COLUMNS = ("model", "params (B)", "best way", "cards", "per card (GiB)", "max context", "decode tok/s")


def fit_rows(
    cluster: Cluster,
    request: PlanRequest,
    models: Iterable[tuple[str, Callable[[], Any]]],
    *,
    speed: Any = None,
    fits_only: bool = True,
) -> list[dict[str, Any]]:
    """One row a model that fits (or every model, ``fits_only=False``): its best option on ``cluster``.

    ``models``: (repo, a call giving its :class:`~explorer.sources.resolved.ResolvedModel`) pairs, so a model
    is read only when planned. Rows come biggest model first; a model whose shape does not build or
    plan is left out (the app's main view says why for one model).
    """
    rows = []
    for repo, resolve in models:
        try:
            model = resolve()
            result = plan(model.shape, cluster, request, artifacts=model.artifacts, model_ref=repo, speed=speed)
        except ExplorerError:
            continue
        best = result.options[0] if result.options else None
        if best is None and fits_only:
            continue
        tps = getattr(getattr(best, "speed", None), "decode_estimate_tokens_per_s", None)
        rows.append(
            {
                "model": repo,
                "params": model.shape.params,
                "params (B)": f"{model.shape.params / 1e9:,.1f}",
                "fits": "✓" if best else "✗",
                "best way": f"{ENGINE_LABELS.get(best.engine, best.engine)} · {best.label.split(' · ', 1)[1]}"
                if best
                else "does not fit",
                "cards": ("CPU" if best.layout.cpu else str(best.layout.cards)) if best else "—",
                "per card (GiB)": f"{best.per_card.total / GiB:,.1f} / {best.per_card.usable / GiB:,.1f}"
                if best
                else "—",
                "max context": f"{best.evaluation.max_context_tokens:,}" if best else "—",
                "decode tok/s": "—" if tps is None else f"{tps:,.1f}",
            }
        )
    rows.sort(key=lambda r: (-r["params"], r["model"]))
    return rows
