"""What the app says beside its ranked table: the best way of each engine, and the suggestions as changes a
click applies (:func:`explorer.ui.app_state.apply_change`). Plain text and rows: no marimo."""

from __future__ import annotations

from typing import Any

from explorer.engines.options import PlanResult
from explorer.engines.registry import engine_labels
from explorer.safe_text import safe_html
from explorer.ui.plan_rows import speed_of_option
from explorer.units import gib

__all__ = ["best_per_engine_strip", "suggestion_rows"]


def best_per_engine_strip(result: PlanResult) -> str:
    """The best way of each engine, by the plan's goal (:meth:`PlanResult.best_per_engine`), as one line of
    HTML (the app writes its answer as HTML, not markdown): ``<strong>vLLM</strong> #1: 4 × h100-80g, 31.2 GiB
    of 72.0 GiB · <strong>llama.cpp</strong> #3: …``."""
    ranks = {id(o): i for i, o in enumerate(result.options, 1)}
    parts = []
    for engine, o in result.best_per_engine().items():
        tps, _ttft, _cost = speed_of_option(o)
        speed = f", {tps:,.1f} tok/s" if tps is not None else ""
        parts.append(
            f"<strong>{safe_html(engine_labels().get(engine, engine))}</strong> #{ranks[id(o)]}: "
            f"{safe_html(o.layout.label)}, "
            f"{gib(o.per_card.total)} of {gib(o.per_card.usable)}{speed}"
        )
    return " · ".join(parts)


def suggestion_rows(result: PlanResult) -> list[dict[str, Any]]:
    """The plan's suggestions as the app shows them: ``text`` (the change), ``outcome`` (what it leads to),
    ``fits``, and ``change`` (:attr:`explorer.plan.suggestion.Suggestion.change`, what clicking applies)."""
    rows = []
    for s in result.suggestions:
        best = s.best
        if s.fits and best is not None:
            tps, _ttft, _cost = speed_of_option(best)
            speed = f", {tps:,.1f} tok/s" if tps is not None else ""
            outcome = f"fits (tier {best.tier}): {best.label}{speed}"
        else:
            outcome = f"still short: longest context {s.max_context:,} tokens"
        rows.append({"text": s.text, "outcome": outcome, "fits": s.fits, "change": dict(s.change)})
    return rows
