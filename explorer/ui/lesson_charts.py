"""Altair charts for the lessons (parallelism, quantisation, speed): rows from the ``*_lesson`` modules in, charts out.

An edge module like :mod:`explorer.ui.charts`, whose conventions it keeps: data as a
plain dict on the top chart, encodings as channel objects, the unit on every axis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

from explorer.ui.charts import MISFIT, _data

__all__ = [
    "batch_chart",
    "ladder_chart",
    "mix_chart",
    "offload_chart",
    "published_chart",
    "quality_chart",
    "roofline_chart",
    "split_chart",
]

Rows = Sequence[Mapping[str, Any]]

#: a card's parts, bottom to top
SPLIT_PARTS = ("embeddings", "decoder layers", "LM head", "KV cache", "activations + overhead")
SPLIT_COLOURS = ("#72b7b2", "#4c78a8", "#b279a2", "#f58518", "#9d755d")
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
#: the perplexity points labelled by name (the rest are close neighbours)
LABELLED_MIXES = ("Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16")


def split_chart(rows: Rows, *, title: str, width: int = 560, height: int = 240) -> alt.Chart:
    """Cards side by side, each a stack of its parts (GiB); outlined red where the card does not hold them."""
    cards = [c for _, c in sorted({(r["card_order"], r["card"]) for r in rows})]
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=alt.X("card:N", sort=cards, title=None, axis=alt.Axis(labelAngle=0 if len(cards) <= 12 else -45)),
            y=alt.Y("gib:Q", title="GiB (1024³ bytes)", stack="zero"),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=list(SPLIT_PARTS), range=list(SPLIT_COLOURS)),
                legend=alt.Legend(title=None, orient="right"),
            ),
            order=alt.Order("part_order:Q"),
            stroke=alt.condition("datum.fits", alt.value(None), alt.value(MISFIT)),
            strokeWidth=alt.value(2),
            tooltip=[
                alt.Tooltip("card:N"),
                alt.Tooltip("layers:N", title="layers"),
                alt.Tooltip("part:N"),
                alt.Tooltip("gib:Q", format=",.2f", title="GiB"),
                alt.Tooltip("usable_gib:Q", format=",.1f", title="usable GiB"),
            ],
        )
        .properties(width=width, height=height, title=title)
    )


def batch_chart(rows: Rows, *, batch: int, width: int = 520, height: int = 260) -> alt.HConcatChart:
    """Left: one step's milliseconds against the batch (reading weights, reading KV, both, computing);
    right: tokens/s of all sequences together. A grey rule marks the chosen batch."""
    x = alt.X(
        "batch:Q",
        scale=alt.Scale(type="log", base=2),
        title="sequences decoding together (log scale)",
        axis=alt.Axis(values=_BATCH_TICKS),
    )
    names = {
        "weights_ms": "read weights",
        "kv_ms": "read KV cache",
        "memory_ms": "read both (memory)",
        "compute_ms": "compute",
    }
    rule = alt.Chart({"values": [{"batch": batch}]}).mark_rule(color="grey").encode(x=alt.X("batch:Q"))
    lines = (
        alt.Chart()
        .transform_fold(list(names), as_=["what", "ms"])
        .transform_calculate(label=_lookup(names))
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("ms:Q", scale=alt.Scale(type="log"), title="ms a step (log scale)"),
            color=alt.Color(
                "label:N",
                sort=list(names.values()),
                scale=alt.Scale(domain=list(names.values()), range=["#4c78a8", "#f58518", "#000000", "#d62728"]),
                legend=alt.Legend(title=None, orient="bottom", columns=2),
            ),
            tooltip=[alt.Tooltip("batch:Q"), alt.Tooltip("label:N"), alt.Tooltip("ms:Q", format=",.3f")],
        )
    )
    speed = (
        alt.Chart()
        .mark_line(point=True, color="black")
        .encode(
            x=x,
            y=alt.Y("tokens_per_s:Q", title="tokens/s, all sequences (bound)"),
            tooltip=[
                alt.Tooltip("batch:Q"),
                alt.Tooltip("tokens_per_s:Q", format=",.0f"),
                alt.Tooltip("bound_by:N"),
            ],
        )
    )
    data = _data(rows)
    left = alt.layer(lines, rule, data=data).properties(width=width, height=height, title="One decode step")
    right = alt.layer(speed, rule, data=data).properties(width=width // 2 + 60, height=height, title="Throughput")
    return alt.hconcat(left, right)


def _lookup(names: Mapping[str, str]) -> str:
    """A vega expression mapping a folded key to its label."""
    expr = "''"
    for key, label in reversed(list(names.items())):
        expr = f"datum.what == '{key}' ? '{label}' : {expr}"
    return expr


def roofline_chart(ceiling: Rows, points: Rows, *, batch: int, width: int = 520, height: int = 300) -> alt.LayerChart:
    """The card's roofline (log-log): attainable TFLOP/s against FLOPs per byte read, each batch's step a point,
    the chosen batch in red. Left of the ridge a step waits on memory; right of it, on compute."""
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="FLOPs per byte read (arithmetic intensity, log)")
    y = alt.Y("tflops:Q", scale=alt.Scale(type="log"), title="TFLOP/s (10¹² a second, log)")
    roof = alt.Chart(_data(ceiling)).mark_line(color="black").encode(x=x, y=y)
    tip = [
        alt.Tooltip("batch:Q"),
        alt.Tooltip("intensity:Q", format=",.1f", title="FLOPs a byte"),
        alt.Tooltip("tflops:Q", format=",.1f", title="TFLOP/s"),
        alt.Tooltip("bound_by:N"),
    ]
    steps = (
        alt.Chart(_data(points))
        .mark_point(filled=True, size=50)
        .encode(
            x=x,
            y=y,
            color=alt.condition(f"datum.batch == {int(batch)}", alt.value(MISFIT), alt.value("#4c78a8")),
            size=alt.condition(f"datum.batch == {int(batch)}", alt.value(160), alt.value(50)),
            tooltip=tip,
        )
    )
    labels = (
        alt.Chart(_data([p for p in points if p["batch"] == batch]))
        .mark_text(dy=-14, fontSize=12, color=MISFIT)
        .encode(x=x, y=y, text=alt.Text("label:N"))
        .transform_calculate(label="'batch ' + datum.batch")
    )
    return alt.layer(roof, steps, labels).properties(
        width=width,
        height=height,
        title=alt.Title("The roofline of one card", subtitle="points: one decode step at each batch 1 … 1,024"),
    )


def offload_chart(rows: Rows, *, width: int = 520, height: int = 220) -> alt.Chart:
    """One sequence's decode bound against the layers llama.cpp leaves on the host."""
    return (
        alt.Chart(_data(rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("layers_on_host:Q", title="layers on the host (of the model's decoder layers)"),
            y=alt.Y("tokens_per_s:Q", title="tokens/s (bound, one sequence)"),
            tooltip=[alt.Tooltip("layers_on_host:Q"), alt.Tooltip("tokens_per_s:Q", format=",.1f")],
        )
        .properties(width=width, height=height, title="Layers left on the host run at the host's bandwidth")
    )


def published_chart(rows: Rows, *, width: int = 460, height: int = 400) -> alt.LayerChart:
    """Each published measurement (x) against the model's bound and estimate (y), log-log, with y = x."""
    scale = alt.Scale(type="log")
    points = (
        alt.Chart()
        .transform_fold(["bound", "estimate"], as_=["figure", "model_tokens_per_s"])
        .mark_point(filled=True, size=60)
        .encode(
            x=alt.X("measured:Q", scale=scale, title="measured tokens/s (published)"),
            y=alt.Y("model_tokens_per_s:Q", scale=scale, title="explorer's tokens/s"),
            color=alt.Color("figure:N", scale=alt.Scale(domain=["bound", "estimate"], range=["#d62728", "#4c78a8"])),
            shape=alt.Shape("engine:N", legend=alt.Legend(title="engine")),
            tooltip=[
                alt.Tooltip("source:N"),
                alt.Tooltip("setup:N"),
                alt.Tooltip("metric:N"),
                alt.Tooltip("measured:Q", format=",.1f"),
                alt.Tooltip("figure:N"),
                alt.Tooltip("model_tokens_per_s:Q", format=",.1f"),
            ],
        )
    )
    low = min(r["measured"] for r in rows) * 0.8
    high = max(max(r["bound"], r["measured"]) for r in rows) * 1.2
    diagonal = (
        alt.Chart({"values": [{"measured": low, "y": low}, {"measured": high, "y": high}]})
        .mark_line(color="grey", strokeDash=[4, 3])
        .encode(x=alt.X("measured:Q", scale=scale), y=alt.Y("y:Q", scale=scale))
    )
    return alt.layer(diagonal, points, data=_data(rows)).properties(
        width=width,
        height=height,
        title=alt.Title("Published measurements", subtitle="dashed: explorer = measured; a bound sits above it"),
    )


def ladder_chart(rows: Rows, *, chosen: str, width: int = 520) -> alt.Chart:
    """Weight GiB per precision, split into what is quantised and what stays at 16 bits; the chosen one opaque."""
    long = []
    for r in rows:
        for part, nbytes in (("quantised", r["bytes"] - r["kept_bytes"]), ("kept at 16 bits", r["kept_bytes"])):
            long.append({**r, "part": part, "part_gib": nbytes / 2**30, "chosen": r["name"] == chosen})
    order = [r["label"] for r in rows]
    return (
        alt.Chart(_data(long))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=order, title=None),
            x=alt.X("part_gib:Q", stack="zero", title="weights (GiB, 1024³ bytes)"),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=["quantised", "kept at 16 bits"], range=["#4c78a8", "#bab0ac"]),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
            opacity=alt.condition("datum.chosen", alt.value(1.0), alt.value(0.35)),
            stroke=alt.condition("datum.chosen", alt.value("black"), alt.value(None)),
            tooltip=[
                alt.Tooltip("label:N"),
                alt.Tooltip("part:N"),
                alt.Tooltip("part_gib:Q", format=",.2f", title="GiB"),
                alt.Tooltip("bits:Q", format=".2f", title="bits a weight"),
            ],
        )
        .properties(width=width, height=24 * len(rows), title="The same weights at each precision")
    )


def mix_chart(rows: Rows, *, title: str, width: int = 560, height: int = 220) -> alt.Chart:
    """Each decoder layer's MiB by the ggml type llama.cpp stores it in."""
    present = [t for t in MIX_TYPES if any(r["type"] == t for r in rows)]
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=alt.X("layer:O", title="decoder layer", axis=alt.Axis(labelAngle=0, values=_every(rows))),
            y=alt.Y("mib:Q", stack="zero", title="MiB (1024² bytes)"),
            color=alt.Color(
                "type:N",
                sort=present,
                scale=alt.Scale(domain=present, range=[MIX_COLOURS[MIX_TYPES.index(t)] for t in present]),
                legend=alt.Legend(title="ggml type", orient="right"),
            ),
            tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("type:N"), alt.Tooltip("mib:Q", format=",.1f", title="MiB")],
        )
        .properties(width=width, height=height, title=title)
    )


def _every(rows: Rows) -> list[int]:
    """Layer labels every 4th (every 8th past 40 layers)."""
    layers = sorted({int(r["layer"]) for r in rows})
    step = 4 if len(layers) <= 40 else 8
    return [n for n in layers if n % step == 0]


def quality_chart(quality: Rows, perplexity: Rows, *, marks: Rows, width: int = 520) -> alt.VConcatChart:
    """Top: the ranking's precision score against bits a weight (GPU, CPU), the ladder's precisions as ticks;
    bottom: llama-quantize's perplexity increase at the same bits (symlog scale)."""
    x_scale = alt.Scale(domain=[2, 16.5])
    x = alt.X("bits:Q", scale=x_scale, title="bits a weight (scales counted)")
    score = (
        alt.Chart(_data(quality))
        .mark_line()
        .encode(
            x=x,
            y=alt.Y("quality:Q", title="ranking score"),
            color=alt.Color("where:N", scale=alt.Scale(domain=["GPU", "CPU"], range=["#4c78a8", "#f58518"])),
            tooltip=[
                alt.Tooltip("where:N"),
                alt.Tooltip("bits:Q", format=".1f"),
                alt.Tooltip("quality:Q", format=".2f"),
            ],
        )
    )
    ticks = (
        alt.Chart(_data(marks))
        .mark_rule(strokeDash=[2, 2], color="grey")
        .encode(x=alt.X("bits:Q", scale=x_scale), tooltip=[alt.Tooltip("label:N"), alt.Tooltip("bits:Q", format=".2f")])
    )
    chosen = (
        alt.Chart(_data([m for m in marks if m.get("chosen")]))
        .mark_rule(color=MISFIT, strokeWidth=2)
        .encode(x=alt.X("bits:Q", scale=x_scale), tooltip=[alt.Tooltip("label:N"), alt.Tooltip("bits:Q", format=".2f")])
    )
    top = alt.layer(ticks, score, chosen).properties(
        width=width, height=200, title="How the ranking scores a precision (dashed: this model's ladder)"
    )
    ppl = (
        alt.Chart(_data(perplexity))
        .mark_point(filled=True, size=60, color="#54a24b")
        .encode(
            x=x,
            y=alt.Y("dppl:Q", scale=alt.Scale(type="symlog", constant=0.01), title="perplexity increase (symlog)"),
            tooltip=[
                alt.Tooltip("mix:N"),
                alt.Tooltip("bits:Q", format=".2f"),
                alt.Tooltip("dppl:Q", format="+.4f", title="Δ perplexity"),
                alt.Tooltip("model:N", title="measured on"),
            ],
        )
    )
    labels = (
        ppl.transform_filter(alt.FieldOneOfPredicate(field="mix", oneOf=list(LABELLED_MIXES)))
        .mark_text(dy=-9, fontSize=10)
        .encode(text=alt.Text("mix:N"))
    )
    bottom = alt.layer(ppl, labels).properties(
        width=width, height=200, title="llama-quantize's perplexity increase (Llama-3-8B; 16-bit rows: Mistral-7B)"
    )
    return alt.vconcat(top, bottom)
