"""Charts as vega-lite specs (plain dicts): what each card holds, memory and speed against context, the KV cache.

Rows in (from :mod:`explorer.ui.plan_rows` or :mod:`explorer.ui.kv_lesson`),
a vega-lite v6 spec out, built as plain data: no altair, so a notebook draws
them in the browser (Pyodide) with nothing more to install, and a slider move
costs no schema validation (the tests validate every builder once).
:class:`VegaLiteSpec` shows a spec in marimo; :mod:`explorer.ui.widgets` hands
the same specs to altair's renderer in Jupyter. Every size axis says GiB
(1024³ bytes); context axes are log-scale token counts; every chart fills its
container's width.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "MIME",
    "PARTS",
    "VegaLiteSpec",
    "card_memory_spec",
    "kv_context_spec",
    "kv_stack_spec",
    "memory_context_spec",
    "speed_context_spec",
]

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
#: the MIME type marimo (and altair 6 in Jupyter) draw a vega-lite v6 spec from
MIME = "application/vnd.vegalite.v6+json"
#: the parts of a card, left to right, and their colours
PARTS = ("weights", "kv cache", "activations", "overhead")
PART_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#9d755d")
MISFIT = "#d62728"
#: token counts as people say them: 512, 4k, 128k, 1M (k = 1,024 tokens)
_TOKENS = (
    "datum.value >= 1048576 ? datum.value / 1048576 + 'M' : "
    "datum.value >= 1024 ? datum.value / 1024 + 'k' : datum.value"
)
_GIB = "GiB a card (1024³ bytes)"


class VegaLiteSpec:
    """A vega-lite spec marimo (or IPython) shows as a chart.

    Attributes:
        spec: the vega-lite spec (a dict).
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = dict(spec)

    def _mime_(self) -> tuple[str, str]:
        return MIME, json.dumps(self.spec, default=str, separators=(",", ":"), ensure_ascii=False)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        return {MIME: self.spec, "text/plain": f"<chart: {self.spec.get('title', '')}>"}


def _top(data: Sequence[Mapping[str, Any]], title: str, subtitle: str, height: int) -> dict[str, Any]:
    return {
        "$schema": SCHEMA,
        "data": {"values": [dict(r) for r in data]},
        "title": {"text": title, "subtitle": subtitle, "anchor": "start"},
        "width": "container",
        "height": height,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "config": {"legend": {"labelLimit": 360, "titleLimit": 360}, "axis": {"labelFontSize": 11}},
    }


def _columns(rows: Sequence[Mapping[str, Any]], fields: Sequence[str], digits: int = 3) -> list[dict[str, Any]]:
    """Only the ``fields`` a chart draws, floats rounded to ``digits`` decimals (the charts show at most two):
    a spec sent on every slider move carries no column it does not use."""
    return [{f: round(r[f], digits) if isinstance(r[f], float) else r[f] for f in fields} for r in rows]


def _named_sweep(spec: dict[str, Any]) -> dict[str, Any]:
    """A sweep chart's rows moved to named data sets its layers read by name: ``sweep``, each row naming its
    option by number (``o``), and ``options``, each name once, which every layer drawing the sweep looks up.
    An option's long name is sent once, not once a context (a slider move resends the spec)."""
    rows = spec["data"]["values"]
    names = list(dict.fromkeys(r["option"] for r in rows))
    number = {name: i for i, name in enumerate(names)}
    spec["datasets"] = {
        "sweep": [{"o": number[r["option"]], **{k: v for k, v in r.items() if k != "option"}} for r in rows],
        "options": [{"o": i, "option": name} for i, name in enumerate(names)],
    }
    spec["data"] = {"name": "sweep"}
    lookup = {"lookup": "o", "from": {"data": {"name": "options"}, "key": "o", "fields": ["option"]}}
    for layer in spec["layer"]:
        if "data" not in layer:  # the asked-context marker brings its own
            layer["transform"] = [lookup, *layer.get("transform", [])]
    return spec


def _context_x() -> dict[str, Any]:
    """A log-2 context axis labelled at powers of two."""
    return {
        "field": "context",
        "type": "quantitative",
        "scale": {"type": "log", "base": 2},
        "title": "context a sequence (tokens, log scale; k = 1,024)",
        "axis": {"values": [2**i for i in range(9, 24)], "labelExpr": _TOKENS},
    }


def _context_rule(context: int | None) -> list[dict[str, Any]]:
    if not context:
        return []
    return [
        {
            "data": {"values": [{"context": int(context), "label": f"asked: {int(context):,}"}]},
            "mark": {"type": "rule", "color": "grey", "strokeWidth": 1.5},
            "encoding": {"x": {"field": "context", "type": "quantitative"}},
        },
        {
            "data": {"values": [{"context": int(context), "label": f"asked: {int(context):,}"}]},
            "mark": {"type": "text", "align": "left", "baseline": "top", "dx": 4, "dy": 2, "y": 0, "color": "grey"},
            "encoding": {"x": {"field": "context", "type": "quantitative"}, "text": {"field": "label"}},
        },
    ]


def card_memory_spec(rows: Sequence[Mapping[str, Any]], *, title: str = "") -> dict[str, Any]:
    """What each card role holds, part by part (stacked), against the card's memory (grey) and what the
    engine may use (the black tick, labelled). ``rows``: :func:`explorer.ui.plan_rows.card_parts`."""
    roles = [r for _, r in sorted({(row["order"], row["role"]) for row in rows})]
    y = {"field": "role", "type": "nominal", "sort": roles, "title": None, "axis": {"labelLimit": 160}}
    tip = [
        {"field": "role", "type": "nominal"},
        {"field": "part", "type": "nominal"},
        {"field": "gib", "type": "quantitative", "format": ",.2f", "title": "GiB"},
    ]
    spec = _top(
        rows,
        title or "What each card holds",
        "GiB (1024³ bytes); grey: the card's memory; black tick: what the engine may use",
        max(60, 30 * len(roles)),
    )
    spec["layer"] = [
        {
            "transform": [{"filter": "datum.part_order == 0"}],
            "mark": {"type": "bar", "color": "#e5e7eb", "height": 22},
            "encoding": {"x": {"field": "capacity_gib", "type": "quantitative"}, "y": y},
        },
        {
            "mark": {"type": "bar", "height": 16},
            "encoding": {
                "x": {"field": "gib", "type": "quantitative", "stack": "zero", "title": "GiB (1024³ bytes)"},
                "y": y,
                "color": {
                    "field": "part",
                    "type": "nominal",
                    "scale": {"domain": list(PARTS), "range": list(PART_COLOURS)},
                    "legend": {"title": "part", "orient": "bottom", "direction": "horizontal"},
                },
                "order": {"field": "part_order", "type": "quantitative"},
                "tooltip": tip,
            },
        },
        {
            "transform": [{"filter": "datum.part_order == 0"}],
            "mark": {"type": "tick", "color": "black", "thickness": 3, "size": 26},
            "encoding": {
                "x": {"field": "usable_gib", "type": "quantitative"},
                "y": y,
                "tooltip": [{"field": "usable_gib", "type": "quantitative", "format": ",.1f", "title": "usable GiB"}],
            },
        },
        {
            "transform": [
                {"filter": "datum.part_order == 0"},
                {"calculate": "'usable ' + format(datum.usable_gib, ',.1f')", "as": "usable_label"},
            ],
            "mark": {"type": "text", "align": "left", "dx": 5, "fontSize": 10},
            "encoding": {
                "x": {"field": "usable_gib", "type": "quantitative"},
                "y": y,
                "text": {"field": "usable_label"},
            },
        },
    ]
    return spec


def memory_context_spec(rows: Sequence[Mapping[str, Any]], *, context: int | None = None) -> dict[str, Any]:
    """Per-card memory against context for the options the table ranks first: solid, what the binding card
    needs; dashed, what the engine may use there (same colour); red crosses where an option no longer fits.
    ``rows``: :func:`explorer.ui.plan_rows.context_sweep`."""
    x = _context_x()
    colour = {"field": "option", "type": "nominal", "legend": {"orient": "bottom", "columns": 1, "title": "option"}}
    dash = {
        "field": "series",
        "type": "nominal",
        "scale": {"domain": ["needed", "usable"], "range": [[1, 0], [6, 4]]},
        "legend": {"title": "line", "orient": "bottom", "labelExpr": "datum.label == 'needed' ? 'what a card needs' "
                   ": 'what the engine may use'"},
    }  # fmt: skip
    tip = [
        {"field": "option", "type": "nominal"},
        {"field": "context", "type": "quantitative", "format": ","},
        {"field": "total_gib", "type": "quantitative", "format": ",.2f", "title": "GiB a card"},
        {"field": "usable_gib", "type": "quantitative", "format": ",.1f", "title": "usable GiB"},
        {"field": "fits", "type": "nominal"},
    ]
    spec = _top(
        _columns(rows, ("option", "context", "total_gib", "usable_gib", "fits")),
        "Memory a card needs as the context grows",
        "solid: what the binding card needs; dashed: what the engine may use; red ✗: no longer fits",
        280,
    )
    needed = [{"calculate": "'needed'", "as": "series"}]
    spec["layer"] = [
        {
            "transform": needed,
            "mark": {"type": "line", "point": {"filled": True, "size": 30}},
            "encoding": {
                "x": x,
                "y": {"field": "total_gib", "type": "quantitative", "title": _GIB},
                "color": colour,
                "strokeDash": dash,
                "tooltip": tip,
            },
        },
        {
            "transform": [{"filter": "datum.fits == false"}],
            "mark": {"type": "point", "shape": "cross", "size": 90, "color": MISFIT, "filled": True},
            "encoding": {"x": x, "y": {"field": "total_gib", "type": "quantitative"}, "tooltip": tip},
        },
        {
            "transform": [
                {"aggregate": [{"op": "max", "field": "usable_gib", "as": "usable_gib"}], "groupby": ["option"]},
                {"calculate": "'usable'", "as": "series"},
            ],
            "mark": {"type": "rule", "strokeWidth": 1.5},
            "encoding": {
                "y": {"field": "usable_gib", "type": "quantitative"},
                "color": colour,
                "strokeDash": dash,
                "tooltip": [
                    {"field": "option", "type": "nominal"},
                    {"field": "usable_gib", "type": "quantitative", "format": ",.1f", "title": "usable GiB a card"},
                ],
            },
        },
        *_context_rule(context),
    ]
    return _named_sweep(spec)


def speed_context_spec(rows: Sequence[Mapping[str, Any]], *, context: int | None = None) -> dict[str, Any]:
    """Decode tokens/s of one sequence (an estimate) against context, for the options that have one;
    dotted where the option no longer fits."""
    data = _columns(
        [r for r in rows if r.get("tokens_per_s") is not None], ("option", "context", "tokens_per_s", "fits")
    )
    x = _context_x()
    spec = _top(
        data,
        "Decode speed as the context grows",
        "tokens/s of one sequence, an estimate (roofline × efficiency); dotted: no longer fits",
        240,
    )
    spec["layer"] = [
        {
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": x,
                "y": {"field": "tokens_per_s", "type": "quantitative", "title": "decode tokens/s (estimate)"},
                "color": {"field": "option", "type": "nominal", "legend": {"orient": "bottom", "columns": 1}},
                "strokeDash": {
                    "field": "fits",
                    "type": "nominal",
                    "scale": {"domain": [True, False], "range": [[1, 0], [3, 3]]},
                    "legend": None,
                },
                "tooltip": [
                    {"field": "option", "type": "nominal"},
                    {"field": "context", "type": "quantitative", "format": ","},
                    {"field": "tokens_per_s", "type": "quantitative", "format": ",.1f", "title": "tokens/s"},
                    {"field": "fits", "type": "nominal"},
                ],
            },
        },
        *_context_rule(context),
    ]
    return _named_sweep(spec)


def kv_context_spec(rows: Sequence[Mapping[str, Any]], *, context: int | None = None) -> dict[str, Any]:
    """KV cache GiB against context, one line per model (its layer kinds summed), log-log;
    dashed, with hollow points, past the model's own context limit. ``rows``: :func:`explorer.ui.kv_lesson.kv_curve`."""
    spec = _top(
        rows,
        "KV cache as the context grows",
        "GiB (1024³ bytes), log scale; dashed past a model's own context limit: what it would keep",
        320,
    )
    spec["transform"] = [
        {"aggregate": [{"op": "sum", "field": "gib", "as": "gib"}], "groupby": ["model", "context", "beyond"]}
    ]
    spec["layer"] = [
        {
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": _context_x(),
                "y": {
                    "field": "gib",
                    "type": "quantitative",
                    "scale": {"type": "log"},
                    "title": "KV cache (GiB, log scale)",
                },
                "color": {"field": "model", "type": "nominal", "legend": {"orient": "bottom", "columns": 2}},
                "strokeDash": {
                    "field": "beyond",
                    "type": "nominal",
                    "scale": {"domain": [False, True], "range": [[1, 0], [4, 3]]},
                    "legend": {"title": "past the model's limit", "orient": "bottom"},
                },
                "tooltip": [
                    {"field": "model", "type": "nominal"},
                    {"field": "context", "type": "quantitative", "format": ","},
                    {"field": "gib", "type": "quantitative", "format": ",.3f", "title": "GiB"},
                    {"field": "beyond", "type": "nominal", "title": "past the limit"},
                ],
            },
        },
        *_context_rule(context),
    ]
    return spec


def kv_stack_spec(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """KV cache GiB per model at one context, stacked by layer kind (full, sliding, mla, recurrent…)."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    spec = _top(
        rows, "What each kind of layer keeps", "GiB (1024³ bytes) at the context asked", max(80, 30 * len(models))
    )
    spec.update(
        mark="bar",
        encoding={
            "x": {"aggregate": "sum", "field": "gib", "type": "quantitative", "title": "KV cache (GiB, 1024³ bytes)"},
            "y": {"field": "model", "type": "nominal", "sort": models, "title": None, "axis": {"labelLimit": 260}},
            "color": {"field": "kind", "type": "nominal", "legend": {"title": "layer kind", "orient": "bottom"}},
            "tooltip": [
                {"field": "model", "type": "nominal"},
                {"field": "kind", "type": "nominal"},
                {"aggregate": "sum", "field": "gib", "type": "quantitative", "format": ",.3f", "title": "GiB"},
            ],
        },
    )
    return spec
