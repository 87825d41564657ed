"""The lessons' charts (parallelism, quantisation, speed) as vega-lite specs (plain dicts): rows from the
``*_lesson`` modules in, a vega-lite v6 spec out.

Built as :mod:`explorer.ui.vega` builds the app's: plain data, no altair, so the lessons draw in a browser
page (Pyodide) with nothing more to install; :class:`explorer.ui.vega.VegaLiteSpec` shows one in marimo.
Every axis says its unit; a single or layered chart fills its container's width, a concatenated one
(side by side, one above the other) keeps fixed widths, as vega-lite sizes concatenated views one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from explorer.ui.vega import MISFIT, SCHEMA, _top

__all__ = [
    "batch_spec",
    "frontier_spec",
    "ladder_spec",
    "mix_spec",
    "offload_spec",
    "published_spec",
    "quality_spec",
    "roofline_spec",
    "split_spec",
]

Rows = Sequence[Mapping[str, Any]]
Spec = dict[str, Any]

#: a card's parts, bottom to top
SPLIT_PARTS = ("embeddings", "decoder layers", "LM head", "built while loading", "KV cache", "activations + overhead")
SPLIT_COLOURS = ("#72b7b2", "#4c78a8", "#b279a2", "#bab0ac", "#f58518", "#9d755d")
#: ggml types, most bits first, coloured warm (more bits) to cool (fewer)
MIX_TYPES = ("F32", "F16", "Q8_0", "Q6_K", "Q5_1", "Q5_0", "Q5_K", "Q4_K", "Q4_0", "Q3_K")
MIX_COLOURS = (
    "#bab0ac",
    "#9d755d",
    "#d62728",
    "#f58518",
    "#e45756",
    "#ff9da6",
    "#eeca3b",
    "#4c78a8",
    "#72b7b2",
    "#54a24b",
)
_BATCH_TICKS = [2**i for i in range(11)]
_LOG = {"type": "log"}
#: the perplexity points labelled by name (the rest are close neighbours)
LABELLED_MIXES = ("Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16")


def _q(field: str, **more: Any) -> Spec:
    """A quantitative channel (``title``, ``format``, ``scale``… as keywords)."""
    return {"field": field, "type": "quantitative", **more}


def _n(field: str, **more: Any) -> Spec:
    """A nominal channel."""
    return {"field": field, "type": "nominal", **more}


def _values(rows: Rows) -> Spec:
    return {"values": [dict(r) for r in rows]}


def _if(test: str, yes: Any, no: Any) -> Spec:
    """A conditional value: ``yes`` where the vega expression ``test`` holds, else ``no``."""
    return {"condition": {"test": test, "value": yes}, "value": no}


def _concat(key: str, views: list[Spec], rows: Rows = ()) -> Spec:
    """Views side by side (``hconcat``) or one above the other (``vconcat``), sharing ``rows``."""
    return {"$schema": SCHEMA, "data": _values(rows), key: views}


def split_spec(rows: Rows, *, title: str, height: int = 240) -> Spec:
    """Cards side by side, each a stack of its parts (GiB); outlined red where the card does not hold them."""
    cards = [c for _, c in sorted({(r["card_order"], r["card"]) for r in rows})]
    spec = _top(rows, title, "GiB (1024³ bytes) a card, part by part; red outline: does not fit", height)
    spec.update(
        mark="bar",
        encoding={
            "x": _n("card", sort=cards, title=None, axis={"labelAngle": 0 if len(cards) <= 12 else -45}),
            "y": _q("gib", title="GiB (1024³ bytes)", stack="zero"),
            "color": _n(
                "part",
                scale={"domain": list(SPLIT_PARTS), "range": list(SPLIT_COLOURS)},
                legend={"title": None, "orient": "right"},
            ),
            "order": _q("part_order"),
            "stroke": _if("datum.fits", None, MISFIT),
            "strokeWidth": {"value": 2},
            "tooltip": [
                _n("card"),
                _n("layers", title="layers"),
                _n("part"),
                _q("gib", format=",.2f", title="GiB"),
                _q("usable_gib", format=",.1f", title="usable GiB"),
            ],
        },
    )
    return spec


def batch_spec(rows: Rows, *, batch: int, width: int = 520, height: int = 260) -> Spec:
    """Left: one step's milliseconds against the batch (reading weights, reading KV, both, computing);
    right: tokens/s of all sequences together. A grey rule marks the chosen batch."""
    x = _q(
        "batch",
        scale={"type": "log", "base": 2},
        title="sequences decoding together (log scale)",
        axis={"values": _BATCH_TICKS},
    )
    names = {
        "weights_ms": "read weights",
        "kv_ms": "read KV cache",
        "memory_ms": "read both (memory)",
        "compute_ms": "compute",
    }
    rule = {
        "data": _values([{"batch": int(batch)}]),
        "mark": {"type": "rule", "color": "grey"},
        "encoding": {"x": _q("batch")},
    }
    lines = {
        "transform": [{"fold": list(names), "as": ["what", "ms"]}, {"calculate": _lookup(names), "as": "label"}],
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": x,
            "y": _q("ms", scale=_LOG, title="ms a step (log scale)"),
            "color": _n(
                "label",
                sort=list(names.values()),
                scale={"domain": list(names.values()), "range": ["#4c78a8", "#f58518", "#000000", "#d62728"]},
                legend={"title": None, "orient": "bottom", "columns": 2},
            ),
            "tooltip": [_q("batch"), _n("label"), _q("ms", format=",.3f")],
        },
    }
    speed = {
        "mark": {"type": "line", "point": True, "color": "black"},
        "encoding": {
            "x": x,
            "y": _q("tokens_per_s", title="tokens/s, all sequences (bound)"),
            "tooltip": [_q("batch"), _q("tokens_per_s", format=",.0f"), _n("bound_by")],
        },
    }
    left = {"title": "One decode step", "width": width, "height": height, "layer": [lines, rule]}
    right = {"title": "Throughput", "width": width // 2 + 60, "height": height, "layer": [speed, rule]}
    return _concat("hconcat", [left, right], rows)


def _lookup(names: Mapping[str, str]) -> str:
    """A vega expression mapping a folded key to its label."""
    expr = "''"
    for key, label in reversed(list(names.items())):
        expr = f"datum.what == '{key}' ? '{label}' : {expr}"
    return expr


def roofline_spec(ceiling: Rows, points: Rows, *, batch: int, height: int = 300) -> Spec:
    """The card's roofline (log-log): attainable TFLOP/s against FLOPs per byte read, each batch's step a point,
    the chosen batch in red. Left of the ridge a step waits on memory; right of it, on compute."""
    x = _q("intensity", scale=_LOG, title="FLOPs per byte read (arithmetic intensity, log)")
    y = _q("tflops", scale=_LOG, title="TFLOP/s (10¹² a second, log)")
    chosen = f"datum.batch == {int(batch)}"
    tip = [
        _q("batch"),
        _q("intensity", format=",.1f", title="FLOPs a byte"),
        _q("tflops", format=",.1f", title="TFLOP/s"),
        _n("bound_by"),
    ]
    spec = _top([], "The roofline of one card", "points: one decode step at each batch 1 … 1,024", height)
    spec["layer"] = [
        {"data": _values(ceiling), "mark": {"type": "line", "color": "black"}, "encoding": {"x": x, "y": y}},
        {
            "data": _values(points),
            "mark": {"type": "point", "filled": True, "size": 50},
            "encoding": {
                "x": x,
                "y": y,
                "color": _if(chosen, MISFIT, "#4c78a8"),
                "size": _if(chosen, 160, 50),
                "tooltip": tip,
            },
        },
        {
            "data": _values([p for p in points if p["batch"] == batch]),
            "transform": [{"calculate": "'batch ' + datum.batch", "as": "label"}],
            "mark": {"type": "text", "dy": -14, "fontSize": 12, "color": MISFIT},
            "encoding": {"x": x, "y": y, "text": _n("label")},
        },
    ]
    return spec


def offload_spec(rows: Rows, *, height: int = 220) -> Spec:
    """One sequence's decode bound against the layers llama.cpp leaves on the host."""
    spec = _top(rows, "Layers left on the host run at the host's bandwidth", "tokens/s, a bound", height)
    spec.update(
        mark={"type": "line", "point": True},
        encoding={
            "x": _q("layers_on_host", title="layers on the host (of the model's decoder layers)"),
            "y": _q("tokens_per_s", title="tokens/s (bound, one sequence)"),
            "tooltip": [_q("layers_on_host"), _q("tokens_per_s", format=",.1f")],
        },
    )
    return spec


def published_spec(rows: Rows, *, height: int = 400) -> Spec:
    """Each published measurement (x) against the model's bound and estimate (y), log-log, with y = x."""
    low = min(r["measured"] for r in rows) * 0.8
    high = max(max(r["bound"], r["measured"]) for r in rows) * 1.2
    spec = _top(rows, "Published measurements", "dashed: explorer = measured; a bound sits above it", height)
    spec["layer"] = [
        {
            "data": _values([{"measured": low, "y": low}, {"measured": high, "y": high}]),
            "mark": {"type": "line", "color": "grey", "strokeDash": [4, 3]},
            "encoding": {"x": _q("measured", scale=_LOG), "y": _q("y", scale=_LOG)},
        },
        {
            "transform": [{"fold": ["bound", "estimate"], "as": ["figure", "model_tokens_per_s"]}],
            "mark": {"type": "point", "filled": True, "size": 60},
            "encoding": {
                "x": _q("measured", scale=_LOG, title="measured tokens/s (published)"),
                "y": _q("model_tokens_per_s", scale=_LOG, title="explorer's tokens/s"),
                "color": _n("figure", scale={"domain": ["bound", "estimate"], "range": ["#d62728", "#4c78a8"]}),
                "shape": _n("engine", legend={"title": "engine"}),
                "tooltip": [
                    _n("source"),
                    _n("setup"),
                    _n("metric"),
                    _q("measured", format=",.1f"),
                    _n("figure"),
                    _q("model_tokens_per_s", format=",.1f"),
                ],
            },
        },
    ]
    return spec


def ladder_spec(rows: Rows, *, chosen: str) -> Spec:
    """Weight GiB per precision, split into what is quantised and what stays at 16 bits; the chosen one opaque."""
    long = []
    for r in rows:
        for part, nbytes in (("quantised", r["bytes"] - r["kept_bytes"]), ("kept at 16 bits", r["kept_bytes"])):
            long.append({**r, "part": part, "part_gib": nbytes / 2**30, "chosen": r["name"] == chosen})
    spec = _top(
        long, "The same weights at each precision", "GiB (1024³ bytes); outlined: the one chosen", 24 * len(rows)
    )
    spec.update(
        mark="bar",
        encoding={
            "y": _n("label", sort=[r["label"] for r in rows], title=None),
            "x": _q("part_gib", stack="zero", title="weights (GiB, 1024³ bytes)"),
            "color": _n(
                "part",
                scale={"domain": ["quantised", "kept at 16 bits"], "range": ["#4c78a8", "#bab0ac"]},
                legend={"title": None, "orient": "bottom"},
            ),
            "opacity": _if("datum.chosen", 1.0, 0.35),
            "stroke": _if("datum.chosen", "black", None),
            "tooltip": [
                _n("label"),
                _n("part"),
                _q("part_gib", format=",.2f", title="GiB"),
                _q("bits", format=".2f", title="bits a weight"),
            ],
        },
    )
    return spec


def mix_spec(rows: Rows, *, title: str, height: int = 220) -> Spec:
    """Each decoder layer's MiB by the ggml type llama.cpp stores it in."""
    present = [t for t in MIX_TYPES if any(r["type"] == t for r in rows)]
    spec = _top(rows, title, "MiB (1024² bytes) a layer, by ggml type", height)
    spec.update(
        mark="bar",
        encoding={
            "x": {"field": "layer", "type": "ordinal", "title": "decoder layer",
                  "axis": {"labelAngle": 0, "values": _every(rows)}},
            "y": _q("mib", stack="zero", title="MiB (1024² bytes)"),
            "color": _n(
                "type",
                sort=present,
                scale={"domain": present, "range": [MIX_COLOURS[MIX_TYPES.index(t)] for t in present]},
                legend={"title": "ggml type", "orient": "right"},
            ),
            "tooltip": [
                {"field": "layer", "type": "ordinal"},
                _n("type"),
                _q("mib", format=",.1f", title="MiB"),
            ],
        },
    )  # fmt: skip
    return spec


def _every(rows: Rows) -> list[int]:
    """Layer labels every 4th (every 8th past 40 layers)."""
    layers = sorted({int(r["layer"]) for r in rows})
    step = 4 if len(layers) <= 40 else 8
    return [n for n in layers if n % step == 0]


def quality_spec(quality: Rows, perplexity: Rows, *, marks: Rows, width: int = 520) -> Spec:
    """Top: the ranking's precision score against bits a weight (GPU, CPU), the ladder's precisions as ticks;
    bottom: llama-quantize's perplexity increase at the same bits (symlog scale)."""
    x_scale = {"domain": [2, 16.5]}
    x = _q("bits", scale=x_scale, title="bits a weight (scales counted)")
    mark_tip = [_n("label"), _q("bits", format=".2f")]
    ticks = {
        "data": _values(marks),
        "mark": {"type": "rule", "strokeDash": [2, 2], "color": "grey"},
        "encoding": {"x": _q("bits", scale=x_scale), "tooltip": mark_tip},
    }
    score = {
        "data": _values(quality),
        "mark": "line",
        "encoding": {
            "x": x,
            "y": _q("quality", title="ranking score"),
            "color": _n("where", scale={"domain": ["GPU", "CPU"], "range": ["#4c78a8", "#f58518"]}),
            "tooltip": [_n("where"), _q("bits", format=".1f"), _q("quality", format=".2f")],
        },
    }
    chosen = {
        "data": _values([m for m in marks if m.get("chosen")]),
        "mark": {"type": "rule", "color": MISFIT, "strokeWidth": 2},
        "encoding": {"x": _q("bits", scale=x_scale), "tooltip": mark_tip},
    }
    ppl = {
        "x": x,
        "y": _q("dppl", scale={"type": "symlog", "constant": 0.01}, title="perplexity increase (symlog)"),
        "tooltip": [
            _n("mix"),
            _q("bits", format=".2f"),
            _q("dppl", format="+.4f", title="Δ perplexity"),
            _n("model", title="measured on"),
        ],
    }
    points = {"mark": {"type": "point", "filled": True, "size": 60, "color": "#54a24b"}, "encoding": ppl}
    labels = {
        "transform": [{"filter": {"field": "mix", "oneOf": list(LABELLED_MIXES)}}],
        "mark": {"type": "text", "dy": -9, "fontSize": 10},
        "encoding": {**ppl, "text": _n("mix")},
    }
    top = {
        "title": "How the ranking scores a precision (dashed: this model's ladder)",
        "width": width,
        "height": 200,
        "layer": [ticks, score, chosen],
    }
    bottom = {
        "title": "llama-quantize's perplexity increase (Llama-3-8B; 16-bit rows: Mistral-7B)",
        "data": _values(perplexity),
        "width": width,
        "height": 200,
        "layer": [points, labels],
    }
    return _concat("vconcat", [top, bottom])


def frontier_spec(rows: Rows, *, user_tokens_per_s: float | None, capacity: int, width: int = 420) -> Spec:
    """Left: the frontier serving benchmarks publish, the card's tokens/s against a user's tokens/s, one point a
    batch (labelled), grey past what the KV cache holds, green where the targets are met, the user-speed target
    as a dashed rule. Right: a user's time per output token against the batch, the KV cache's capacity as a rule."""
    colour = {
        "condition": [{"test": "!datum.fits", "value": "#bab0ac"}, {"test": "datum.meets", "value": "#54a24b"}],
        "value": MISFIT,
    }
    x_user = _q("user_tokens_per_s", title="tokens/s a user (1 / TPOT)")
    y_gpu = _q("gpu_tokens_per_s", title="tokens/s the card serves (all users)")
    points = {
        "mark": {"type": "line", "point": {"filled": True, "size": 50}, "color": "#4c78a8"},
        "encoding": {
            "x": x_user,
            "y": y_gpu,
            "order": _q("batch"),
            "tooltip": [
                _q("batch"),
                _q("user_tokens_per_s", format=",.1f"),
                _q("gpu_tokens_per_s", format=",.0f"),
                _q("tpot_ms", format=",.2f"),
                _q("ttft_ms", format=",.0f"),
                _n("bound_by"),
            ],
        },
    }
    dots = {
        "mark": {"type": "point", "filled": True, "size": 70},
        "encoding": {"x": x_user, "y": y_gpu, "color": colour},
    }
    labels = {
        "mark": {"type": "text", "dx": 6, "dy": -8, "fontSize": 10, "align": "left"},
        "encoding": {"x": x_user, "y": y_gpu, "text": _q("batch")},
    }
    layers: list[Spec] = [points, dots, labels]
    if user_tokens_per_s:
        layers.append({
            "data": _values([{"user_tokens_per_s": user_tokens_per_s}]),
            "mark": {"type": "rule", "strokeDash": [4, 3], "color": "black"},
            "encoding": {"x": _q("user_tokens_per_s")},
        })  # fmt: skip
    x_batch = _q("batch", scale={"type": "log", "base": 2}, title="sequences decoding together (log scale)",
                 axis={"values": _BATCH_TICKS})  # fmt: skip
    tpot = {
        "mark": {"type": "line", "point": True, "color": "#4c78a8"},
        "encoding": {
            "x": x_batch,
            "y": _q("tpot_ms", title="a user's time per output token (ms)"),
            "tooltip": [_q("batch"), _q("tpot_ms", format=",.2f")],
        },
    }
    kv = {
        "data": _values([{"batch": max(1, int(capacity))}]),
        "mark": {"type": "rule", "color": "#f58518", "strokeWidth": 2},
        "encoding": {"x": _q("batch")},
    }
    right_layers: list[Spec] = [tpot, kv]
    if user_tokens_per_s:
        right_layers.append({
            "data": _values([{"tpot_ms": 1e3 / user_tokens_per_s}]),
            "mark": {"type": "rule", "strokeDash": [4, 3], "color": "black"},
            "encoding": {"y": _q("tpot_ms")},
        })  # fmt: skip
    left = {"title": "Throughput against speed a user", "width": width, "height": 300, "layer": layers}
    right = {"title": "Speed a user against the batch (orange: the KV cache's limit)", "width": width - 60,
             "height": 300, "layer": right_layers}  # fmt: skip
    return _concat("hconcat", [left, right], rows)
