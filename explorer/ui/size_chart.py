"""The size mode's chart: tokens/s a GPU against tokens/s a user as the batch grows, the first options side by side.

Rows from :func:`explorer.ui.size_view.frontier_of`; a vega-lite v6 spec out as a plain dict (as
:mod:`explorer.ui.vega`: no altair, so it draws in the WASM page). The rows travel in one named data set,
``frontier``; the targets are dashed rules: the user speed the TPOT target asks (vertical, beside the
frontier) and the TTFT target (horizontal, over the time to first token against the batch); past the batch each
option's KV cache holds its points fade.
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
    rows: Sequence[Mapping[str, Any]],
    *,
    user_tokens_per_s: float | None,
    ttft_ms: float | None = None,
    width: int = 460,
    height: int = 280,
) -> dict[str, Any]:
    """Left: the frontier of each option (a line an option, a point a batch, labelled with the batch; filled where
    the targets are met, faded past what the KV cache holds), the user-speed target as a dashed rule. Right: the
    time to first token against the batch, the TTFT target as a dashed rule. Both read the one named data set."""
    x = _q("user_tokens_per_s", title="tokens/s a user (1 / TPOT)")
    y = _q("gpu_tokens_per_s", title="tokens/s a GPU (all its users)")
    legend = {"orient": "bottom", "columns": 1, "title": None, "labelLimit": 640}
    colour = {"field": "option", "type": "nominal", "legend": legend}
    faded = {"condition": {"test": "datum.fits", "value": 1}, "value": 0.4}
    line = {"mark": {"type": "line"}, "encoding": {"x": x, "y": y, "color": colour, "order": _q("batch")}}
    points = {
        "mark": {"type": "point", "size": 60},
        "encoding": {
            "x": x,
            "y": y,
            "color": colour,
            "fill": {"condition": {"test": "datum.meets", "field": "option", "type": "nominal"}, "value": "white"},
            "opacity": faded,
            "tooltip": _TOOLTIP,
        },
    }
    labels = {
        "mark": {"type": "text", "dx": 6, "dy": -8, "fontSize": 9, "align": "left"},
        "encoding": {"x": x, "y": y, "text": _q("batch"), "color": colour},
    }
    left: list[dict[str, Any]] = [line, points, labels]
    if user_tokens_per_s:
        left.append(_rule("x", "user_tokens_per_s", user_tokens_per_s))
    batch = _q("batch", scale={"type": "log", "base": 2}, title="sequences a replica (log scale)")
    ttft = _q("ttft_ms", title="time to first token (ms)")
    right: list[dict[str, Any]] = [
        {
            "mark": {"type": "line", "point": True},
            "encoding": {"x": batch, "y": ttft, "color": colour, "opacity": faded, "tooltip": _TOOLTIP},
        }
    ]
    if ttft_ms:
        right.append(_rule("y", "ttft_ms", ttft_ms))
    subtitle = "filled: the targets met; faded: more sequences than the KV cache holds; dashed: the targets"
    return {
        "$schema": SCHEMA,
        "datasets": {FRONTIER_DATA: [{f: _rounded(r.get(f)) for f in _FIELDS} for r in rows]},
        "data": {"name": FRONTIER_DATA},
        "title": {
            "text": "Tokens/s a GPU against tokens/s a user as the batch grows (estimates)",
            "subtitle": subtitle,
            "anchor": "start",
        },
        "hconcat": [
            {"width": width, "height": height, "layer": left},
            {"width": round(width * 0.6), "height": height, "layer": right},
        ],
        "resolve": {"scale": {"color": "shared"}},
    }


#: what a point's tooltip says
_TOOLTIP = [
    {"field": "option", "type": "nominal"},
    _q("batch", title="sequences a replica"),
    _q("user_tokens_per_s", format=",.1f", title="tokens/s a user"),
    _q("gpu_tokens_per_s", format=",.0f", title="tokens/s a GPU"),
    _q("tpot_ms", format=",.2f", title="TPOT ms"),
    _q("ttft_ms", format=",.0f", title="TTFT ms"),
    {"field": "fits", "type": "nominal", "title": "the KV cache holds it"},
    {"field": "meets", "type": "nominal", "title": "targets met"},
]


def _rule(channel: str, field: str, value: float) -> dict[str, Any]:
    """A target as a dashed black rule across the view, at ``value`` on ``channel``."""
    return {
        "data": {"values": [{field: round(value, 3)}]},
        "mark": {"type": "rule", "strokeDash": [4, 3], "color": "black"},
        "encoding": {channel: _q(field)},
    }


def _rounded(value: Any) -> Any:
    """Floats to three decimals (a spec sent on every slider move carries no more than the chart shows)."""
    return round(value, 3) if isinstance(value, float) else value
