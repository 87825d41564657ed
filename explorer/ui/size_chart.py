"""The size mode's chart: tokens/s a GPU against tokens/s a user as the batch grows, the first options side by side.

Rows from :func:`explorer.ui.size_view.frontier_of`; a vega-lite v6 spec out as a plain dict (as
:mod:`explorer.ui.vega`: no altair, so it draws in the WASM page). The rows travel in one named data set,
``frontier``; the targets are rules: the user speed the TPOT target asks (a dashed vertical line), and the
batch each option's KV cache holds is where its points turn hollow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from explorer.ui.vega import SCHEMA

__all__ = ["FRONTIER_DATA", "frontier_chart"]

#: the name of the chart's data set
FRONTIER_DATA = "frontier"
#: the fields a row carries into the chart
_FIELDS = ("option", "batch", "user_tokens_per_s", "gpu_tokens_per_s", "tpot_ms", "ttft_ms", "fits", "meets")


def _q(field: str, **more: Any) -> dict[str, Any]:
    return {"field": field, "type": "quantitative", **more}


def frontier_chart(
    rows: Sequence[Mapping[str, Any]], *, user_tokens_per_s: float | None, height: int = 300
) -> dict[str, Any]:
    """The frontier of each option (a line a option, a point a batch, labelled with the batch; filled where the
    targets are met, hollow past what the KV cache holds), the user-speed target as a dashed rule."""
    x = _q("user_tokens_per_s", title="tokens/s a user (1 / TPOT)")
    y = _q("gpu_tokens_per_s", title="tokens/s a GPU (all its users)")
    colour = {"field": "option", "type": "nominal", "legend": {"orient": "bottom", "columns": 1, "title": None}}
    line = {"mark": {"type": "line"}, "encoding": {"x": x, "y": y, "color": colour, "order": _q("batch")}}
    points = {
        "mark": {"type": "point", "size": 60},
        "encoding": {
            "x": x,
            "y": y,
            "color": colour,
            "fill": {"condition": {"test": "datum.meets", "field": "option", "type": "nominal"}, "value": "white"},
            "opacity": {"condition": {"test": "datum.fits", "value": 1}, "value": 0.4},
            "tooltip": [
                {"field": "option", "type": "nominal"},
                _q("batch", title="sequences a replica"),
                _q("user_tokens_per_s", format=",.1f", title="tokens/s a user"),
                _q("gpu_tokens_per_s", format=",.0f", title="tokens/s a GPU"),
                _q("tpot_ms", format=",.2f", title="TPOT ms"),
                _q("ttft_ms", format=",.0f", title="TTFT ms"),
                {"field": "fits", "type": "nominal", "title": "the KV cache holds it"},
                {"field": "meets", "type": "nominal", "title": "targets met"},
            ],
        },
    }
    labels = {
        "mark": {"type": "text", "dx": 6, "dy": -8, "fontSize": 9, "align": "left"},
        "encoding": {"x": x, "y": y, "text": _q("batch"), "color": colour},
    }
    layers: list[dict[str, Any]] = [line, points, labels]
    if user_tokens_per_s:
        layers.append({
            "data": {"values": [{"user_tokens_per_s": round(user_tokens_per_s, 3)}]},
            "mark": {"type": "rule", "strokeDash": [4, 3], "color": "black"},
            "encoding": {"x": _q("user_tokens_per_s")},
        })  # fmt: skip
    return {
        "$schema": SCHEMA,
        "datasets": {FRONTIER_DATA: [{f: _rounded(r.get(f)) for f in _FIELDS} for r in rows]},
        "data": {"name": FRONTIER_DATA},
        "title": {
            "text": "Tokens/s a GPU against tokens/s a user as the batch grows (estimates)",
            "subtitle": "filled: the targets met; faded: more sequences than the KV cache holds"
            + ("; dashed: the TPOT target" if user_tokens_per_s else ""),
            "anchor": "start",
        },
        "width": "container",
        "height": height,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "layer": layers,
    }


def _rounded(value: Any) -> Any:
    """Floats to three decimals (a spec sent on every slider move carries no more than the chart shows)."""
    return round(value, 3) if isinstance(value, float) else value
