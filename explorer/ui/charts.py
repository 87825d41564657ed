"""The placement chart for notebooks/placement.py: plain rows in (:func:`explorer.ui.fleet_rows.card_segments`),
a plain vega-lite dict out, shown through :class:`explorer.ui.vega.VegaLiteSpec` like the app's and the lessons'
charts (no altair, so it runs in a browser page too). Every size axis says GiB (1024³ bytes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from explorer.ui.vega import SCHEMA

__all__ = ["MISFIT", "MODEL_COLOURS", "placement_chart"]

MISFIT = "#d62728"

#: model colours for the placement chart: no red, which marks tight models and overfull cards
MODEL_COLOURS = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#b279a2",
    "#72b7b2",
    "#eeca3b",
    "#9d755d",
    "#bab0ac",
    "#1f77b4",
    "#ff9da6",
    "#8c6d31",
    "#17becf",
)


def _tip(field: str, kind: str, title: str | None = None, fmt: str | None = None) -> dict[str, Any]:
    return {"field": field, "type": kind} | ({"title": title} if title else {}) | ({"format": fmt} if fmt else {})


def _layer(row: str, calculate: Mapping[str, str], mark: Mapping[str, Any], encoding: Mapping[str, Any],
           *, where: str | None = None) -> dict[str, Any]:  # fmt: skip
    """One layer over the rows of one kind (``segment``, ``slot``, ``card``), with calculated fields."""
    transform: list[dict[str, Any]] = [{"filter": f"datum.row == '{row}'"}]
    transform += [{"filter": where}] if where else []
    transform += [{"calculate": expr, "as": name} for name, expr in calculate.items()]
    return {"transform": transform, "mark": dict(mark), "encoding": dict(encoding)}


def placement_chart(
    rows: Sequence[Mapping[str, Any]], *, title: str = "What each card holds", height: int = 320
) -> dict[str, Any]:
    """Cards side by side, each a stack of its models' charges (one colour a model), in GiB: a vega-lite spec.

    A swap group's charge on a card (its largest member there) is a dashed box
    marked ⇄, its members drawn side by side inside it; a tight model's parts have
    a red outline and a card's charge past its usable room is shaded red; the
    black line across each card is its usable room. Cards sit at x = 0, 1, 2 …
    (their order), so a swap group's members can share a card's width.
    ``rows``: :func:`explorer.ui.fleet_rows.card_segments`.
    """
    card_rows = sorted((r for r in rows if r["row"] == "card"), key=lambda r: r["card_order"])
    names = [r["card"] for r in card_rows]
    models = list(dict.fromkeys(r["model"] for r in rows if r["row"] == "segment"))
    step = max(24, min(110, 760 // max(1, len(names))))
    axis = {
        "values": list(range(len(names))),
        "labelExpr": f"{json.dumps(names)}[datum.value]",
        "grid": False,
        "ticks": False,
        "labelAngle": 0 if len(names) <= 8 else -45,
        "labelBound": False,
    }
    scale = {"domain": [-0.5, len(names) - 0.5], "nice": False, "zero": False}
    x = {"field": "x0", "type": "quantitative", "title": None, "axis": axis, "scale": scale}
    x2, y2 = {"field": "x1"}, {"field": "y1"}
    y = {"field": "y0", "type": "quantitative", "title": "GiB (1024³ bytes)"}
    colour = {
        "field": "model",
        "type": "nominal",
        "scale": {"domain": models, "range": list(MODEL_COLOURS)},
        "legend": {"title": "model", "orient": "right"},
    }
    tight = {
        "stroke": {"condition": {"test": "datum.tight", "value": MISFIT}, "value": "white"},
        "strokeWidth": {"condition": {"test": "datum.tight", "value": 3}, "value": 0.5},
    }
    tip = [_tip("card", "nominal"), _tip("model", "nominal"), _tip("replica", "quantitative"),
           _tip("gib", "quantitative", "GiB", ",.2f"), _tip("context", "quantitative", "context", ","),
           _tip("status", "nominal"), _tip("group", "nominal", "swap group")]  # fmt: skip
    # a segment's share of its card's width: the whole bar, or 1/n of it for one of a swap group's n members
    seg = {
        "x0": "datum.card_order - 0.4 + datum.member * 0.8 / datum.members",
        "x1": "datum.card_order - 0.4 + (datum.member + 1) * 0.8 / datum.members",
        "mid": "(datum.y0 + datum.y1) / 2",
    }
    slot = {"x0": "datum.card_order - 0.44", "x1": "datum.card_order + 0.44", "xm": "datum.card_order"}
    card = {"x0": "datum.card_order - 0.46", "x1": "datum.card_order + 0.46"}
    card_tip = [_tip("card", "nominal"), _tip("gpu", "nominal", "GPU"),
                _tip("usable_gib", "quantitative", "usable GiB", ",.1f"),
                _tip("charged_gib", "quantitative", "charged GiB", ",.1f")]  # fmt: skip
    usable = {"field": "usable_gib", "type": "quantitative"}
    layers = [
        _layer("segment", seg, {"type": "bar"},
               {"x": x, "x2": x2, "y": y, "y2": y2, "color": colour, "tooltip": tip, **tight}),
        _layer("card", card, {"type": "bar", "color": MISFIT, "opacity": 0.3},
               {"x": x, "x2": x2, "y": usable, "y2": {"field": "charged_gib"}, "tooltip": card_tip},
               where="datum.over"),
        _layer("slot", slot, {"type": "bar", "filled": False, "stroke": "black", "strokeDash": [5, 3],
                              "strokeWidth": 1.5},
               {"x": x, "x2": x2, "y": y, "y2": y2,
                "tooltip": [_tip("card", "nominal"), _tip("group", "nominal", "swap group"),
                            _tip("gib", "quantitative", "charged GiB (largest member)", ",.2f")]}),
        _layer("segment", seg | {"xm": "(datum.x0 + datum.x1) / 2"}, {"type": "text", "fontSize": 11},
               {"x": {"field": "xm", "type": "quantitative"}, "y": {"field": "mid", "type": "quantitative"},
                "text": {"field": "label", "type": "nominal"}}, where="datum.label != ''"),
        _layer("slot", slot, {"type": "text", "fontWeight": "bold", "fontSize": 11, "baseline": "top", "dy": 3},
               {"x": {"field": "xm", "type": "quantitative"}, "y": {"field": "y1", "type": "quantitative"},
                "text": {"value": "⇄ swap"}}),
        _layer("card", card, {"type": "rule", "color": "black", "strokeWidth": 3},
               {"x": x, "x2": x2, "y": usable, "tooltip": card_tip}),
    ]  # fmt: skip
    return {
        "$schema": SCHEMA,
        "data": {"values": [dict(r) for r in rows]},
        "title": {
            "text": title,
            "subtitle": "black line: usable room · dashed box ⇄: a swap group, one member resident "
            "at a time · red: tight (short of room)",
        },
        "width": max(360, step * len(names)),
        "height": height,
        "layer": layers,
    }
