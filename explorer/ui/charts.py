"""Altair charts for the notebooks: plain rows in (from :mod:`explorer.ui.plan_rows` or
:mod:`explorer.ui.kv_lesson`), altair charts out. An edge module: it imports altair.

Every size axis says GiB (1024³ bytes); context axes are log-scale token counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

__all__ = [
    "VegaLite",
    "card_memory_chart",
    "kv_context_chart",
    "kv_stack_chart",
    "memory_context_chart",
    "placement_chart",
    "speed_context_chart",
]

#: the parts of a card, bottom to top, and their colours
PARTS = ("weights", "kv cache", "activations", "overhead")
PART_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#9d755d")
MISFIT = "#d62728"


class VegaLite:
    """A chart marimo shows as vega-lite without validating it against the schema again.

    marimo's altair formatter validates every chart (tens of ms for the memory chart); the
    builders here are fixed and tested, so the notebook wraps them: ``VegaLite(chart)``.

    Attributes:
        spec: the vega-lite spec (a dict).
    """

    def __init__(self, chart: alt.TopLevelMixin) -> None:
        self.spec = chart.to_dict(validate=False)

    def _mime_(self) -> tuple[str, str]:
        # marimo reads the version the same way (marimo._plugins.ui._impl.altair_chart.get_chart_mimetype)
        return f"application/vnd.vegalite.v{alt.VEGA_VERSION}+json", json.dumps(self.spec, default=str)


def _data(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    # Note: data is a plain dict (alt.Data validates every row), it goes on the top chart only, and
    # encodings are channel objects, never shorthand strings: altair deep-copies data on every
    # chained call and parses shorthand slowly (~7 ms each). A slider move redraws three charts.
    return {"values": [dict(r) for r in rows]}


#: token counts as people say them: 512, 4k, 128k, 1M (k = 1,024 tokens)
_TOKENS = (
    "datum.value >= 1048576 ? datum.value / 1048576 + 'M' : "
    "datum.value >= 1024 ? datum.value / 1024 + 'k' : datum.value"
)


def _context_x() -> alt.X:
    """A log-2 context axis labelled at powers of two."""
    ticks = [2**i for i in range(9, 24)]
    return alt.X(
        "context:Q",
        scale=alt.Scale(type="log", base=2),
        title="context (tokens, log scale; k = 1,024)",
        axis=alt.Axis(values=ticks, labelExpr=_TOKENS),
    )


def _context_rule(context: int) -> alt.Chart:
    """A grey vertical rule at the asked context."""
    return alt.Chart({"values": [{"context": context}]}).mark_rule(color="grey").encode(x=alt.X("context:Q"))


def card_memory_chart(rows: Sequence[Mapping[str, Any]], *, title: str = "", width: int = 560) -> alt.FacetChart:
    """What each card role holds, stacked part by part, with a black tick at what the engine may use.

    One row per role (a pipeline stage's card, the host…), each on its own GiB
    scale, so a host's terabyte does not flatten a card's 80 GiB.
    ``rows``: :func:`explorer.ui.plan_rows.card_parts` (role, part, gib, usable_gib…).
    """
    roles = [r for _, r in sorted({(row["order"], row["role"]) for row in rows})]
    y = alt.Y("role:N", title=None, axis=None)
    bars = (
        alt.Chart()
        .mark_bar(height=26)
        .encode(
            x=alt.X("gib:Q", title="GiB (1024³ bytes)", stack="zero"),
            y=y,
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=list(PARTS), range=list(PART_COLOURS)),
                legend=alt.Legend(title="part", orient="bottom"),
            ),
            order=alt.Order("part_order:Q"),
            tooltip=[alt.Tooltip("role:N"), alt.Tooltip("part:N"), alt.Tooltip("gib:Q", format=",.2f", title="GiB")],
        )
    )
    usable = (
        alt.Chart()
        .mark_tick(color="black", thickness=3, size=34)
        .encode(
            x=alt.X("max(usable_gib):Q"),
            y=y,
            tooltip=[alt.Tooltip("max(usable_gib):Q", format=",.1f", title="usable GiB")],
        )
    )
    row = alt.Row("role:N", sort=roles, title=None, header=alt.Header(labelAngle=0, labelAlign="left"))
    return (
        alt.layer(bars, usable)
        .properties(width=width, height=34)
        .facet(row=row, data=_data(rows), title=title)
        .resolve_scale(x="independent")
    )


def memory_context_chart(
    rows: Sequence[Mapping[str, Any]], *, context: int | None = None, width: int = 560, height: int = 300
) -> alt.LayerChart:
    """Per-card total against context for a few options, each with its usable line (dashed);
    points past an option's limit are red crosses. A grey rule marks the asked context.

    ``rows``: :func:`explorer.ui.plan_rows.context_sweep`.
    """
    data = _data(rows)
    x = _context_x()
    colour = alt.Color("option:N", legend=alt.Legend(orient="bottom", columns=1, labelLimit=520))
    tip = [
        alt.Tooltip("option:N"),
        alt.Tooltip("context:Q", format=","),
        alt.Tooltip("total_gib:Q", format=",.2f", title="GiB a card"),
        alt.Tooltip("usable_gib:Q", format=",.1f", title="usable GiB"),
        alt.Tooltip("fits:N"),
    ]
    line = (
        alt.Chart()
        .mark_line()
        .encode(x=x, y=alt.Y("total_gib:Q", title="GiB a card (1024³ bytes)"), color=colour, tooltip=tip)
    )
    points = (
        alt.Chart()
        .mark_point(filled=True, size=50)
        .encode(
            x=x,
            y=alt.Y("total_gib:Q"),
            color=colour,
            tooltip=tip,
            shape=alt.Shape("fits:N", scale=alt.Scale(domain=[True, False], range=["circle", "cross"]), legend=None),
        )
    )
    misfit = (
        alt.Chart()
        .transform_filter("datum.fits == false")
        .mark_point(shape="cross", size=90, color=MISFIT, filled=True)
        .encode(x=x, y=alt.Y("total_gib:Q"), tooltip=tip)
    )
    usable = alt.Chart().mark_rule(strokeDash=[5, 4]).encode(y=alt.Y("max(usable_gib):Q"), color=colour)
    layers = [line, points, misfit, usable]
    if context:
        layers.append(_context_rule(context))
    return alt.layer(*layers, data=data).properties(
        width=width, height=height, title="Memory a card needs as the context grows (dashed: usable)"
    )


def speed_context_chart(
    rows: Sequence[Mapping[str, Any]], *, context: int | None = None, width: int = 560, height: int = 260
) -> alt.LayerChart:
    """Decode tokens/s (one sequence, estimate) against context, for the options that have a speed."""
    data = _data([r for r in rows if r.get("tokens_per_s") is not None])
    x = _context_x()
    line = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("tokens_per_s:Q", title="decode tokens/s (estimate)"),
            color=alt.Color("option:N", legend=alt.Legend(orient="bottom", columns=1, labelLimit=520)),
            strokeDash=alt.StrokeDash(
                "fits:N", scale=alt.Scale(domain=[True, False], range=[[1, 0], [3, 3]]), legend=None
            ),
            tooltip=[
                alt.Tooltip("option:N"),
                alt.Tooltip("context:Q", format=","),
                alt.Tooltip("tokens_per_s:Q", format=",.1f"),
                alt.Tooltip("fits:N"),
            ],
        )
    )
    layers = [line]
    if context:
        layers.append(_context_rule(context))
    return alt.layer(*layers, data=data).properties(
        width=width, height=height, title="Decode speed as the context grows (dotted: no longer fits)"
    )


def kv_context_chart(
    rows: Sequence[Mapping[str, Any]], *, context: int | None = None, width: int = 560, height: int = 320
) -> alt.LayerChart:
    """KV cache GiB against context, one line per model (all layer kinds summed), log-log;
    dashed past the model's own context limit."""
    data = _data(rows)
    x = _context_x()
    line = (
        alt.Chart()
        .transform_aggregate(gib="sum(gib)", groupby=["model", "context", "beyond"])
        .mark_line(point=True)
        .encode(
            strokeDash=alt.StrokeDash(
                "beyond:N",
                scale=alt.Scale(domain=[False, True], range=[[1, 0], [4, 3]]),
                legend=alt.Legend(title="past the model's limit"),
            ),
            x=x,
            y=alt.Y("gib:Q", scale=alt.Scale(type="log"), title="KV cache (GiB, log scale)"),
            color=alt.Color("model:N", legend=alt.Legend(orient="bottom", columns=2, labelLimit=300)),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("context:Q", format=","),
                alt.Tooltip("gib:Q", format=",.3f", title="GiB"),
            ],
        )
    )
    layers = [line]
    if context:
        layers.append(_context_rule(context))
    return alt.layer(*layers, data=data).properties(width=width, height=height, title="KV cache as the context grows")


def kv_stack_chart(rows: Sequence[Mapping[str, Any]], *, width: int = 560) -> alt.Chart:
    """KV cache GiB per model at one context, stacked by layer kind (full, sliding, mla, recurrent…)."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=alt.X("sum(gib):Q", title="KV cache (GiB, 1024³ bytes)"),
            y=alt.Y("model:N", sort=models, title=None),
            color=alt.Color("kind:N", legend=alt.Legend(title="layer kind", orient="bottom")),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("kind:N"),
                alt.Tooltip("sum(gib):Q", format=",.3f", title="GiB"),
            ],
        )
        .properties(width=width, height=max(80, 30 * len(models)), title="What each kind of layer keeps")
    )


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


def placement_chart(
    rows: Sequence[Mapping[str, Any]], *, title: str = "What each card holds", height: int = 320
) -> alt.LayerChart:
    """Cards side by side, each a stack of its models' charges (one colour a model), in GiB.

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
    axis = alt.Axis(
        values=list(range(len(names))),
        labelExpr=f"{json.dumps(names)}[datum.value]",
        grid=False,
        ticks=False,
        labelAngle=0 if len(names) <= 8 else -45,
        labelBound=False,
    )
    x = alt.X("x0:Q", title=None, axis=axis, scale=alt.Scale(domain=[-0.5, len(names) - 0.5], nice=False, zero=False))
    x2, y, y2 = alt.X2("x1:Q"), alt.Y("y0:Q", title="GiB (1024³ bytes)"), alt.Y2("y1:Q")
    colour = alt.Color(
        "model:N",
        scale=alt.Scale(domain=models, range=list(MODEL_COLOURS)),
        legend=alt.Legend(title="model", orient="right"),
    )
    tight = {
        "stroke": alt.condition("datum.tight", alt.value(MISFIT), alt.value("white")),
        "strokeWidth": alt.condition("datum.tight", alt.value(3), alt.value(0.5)),
    }
    tip = [
        alt.Tooltip("card:N"),
        alt.Tooltip("model:N"),
        alt.Tooltip("replica:Q"),
        alt.Tooltip("gib:Q", format=",.2f", title="GiB"),
        alt.Tooltip("context:Q", format=",", title="context"),
        alt.Tooltip("status:N"),
        alt.Tooltip("group:N", title="swap group"),
    ]
    # a segment's share of its card's width: the whole bar, or 1/n of it for one of a swap group's n members
    seg = (
        alt.Chart()
        .transform_filter("datum.row == 'segment'")
        .transform_calculate(
            x0="datum.card_order - 0.4 + datum.member * 0.8 / datum.members",
            x1="datum.card_order - 0.4 + (datum.member + 1) * 0.8 / datum.members",
            mid="(datum.y0 + datum.y1) / 2",
        )
    )
    bars = seg.mark_bar().encode(x=x, x2=x2, y=y, y2=y2, color=colour, tooltip=tip, **tight)
    labels = (
        seg.transform_filter("datum.label != ''")
        .transform_calculate(xm="(datum.x0 + datum.x1) / 2")
        .mark_text(fontSize=11)
        .encode(x=alt.X("xm:Q"), y=alt.Y("mid:Q"), text=alt.Text("label:N"))
    )
    slot = (
        alt.Chart()
        .transform_filter("datum.row == 'slot'")
        .transform_calculate(x0="datum.card_order - 0.44", x1="datum.card_order + 0.44", xm="datum.card_order")
    )
    box = slot.mark_bar(filled=False, stroke="black", strokeDash=[5, 3], strokeWidth=1.5).encode(
        x=x,
        x2=x2,
        y=y,
        y2=y2,
        tooltip=[
            alt.Tooltip("card:N"),
            alt.Tooltip("group:N", title="swap group"),
            alt.Tooltip("gib:Q", format=",.2f", title="charged GiB (largest member)"),
        ],
    )
    mark = slot.mark_text(fontWeight="bold", fontSize=11, baseline="top", dy=3).encode(
        x=alt.X("xm:Q"), y=alt.Y("y1:Q"), text=alt.value("⇄ swap")
    )
    card = (
        alt.Chart()
        .transform_filter("datum.row == 'card'")
        .transform_calculate(x0="datum.card_order - 0.46", x1="datum.card_order + 0.46")
    )
    card_tip = [
        alt.Tooltip("card:N"),
        alt.Tooltip("gpu:N", title="GPU"),
        alt.Tooltip("usable_gib:Q", format=",.1f", title="usable GiB"),
        alt.Tooltip("charged_gib:Q", format=",.1f", title="charged GiB"),
    ]
    over = (
        card.transform_filter("datum.over")
        .mark_bar(color=MISFIT, opacity=0.3)
        .encode(x=x, x2=x2, y=alt.Y("usable_gib:Q"), y2=alt.Y2("charged_gib:Q"), tooltip=card_tip)
    )
    usable = card.mark_rule(color="black", strokeWidth=3).encode(x=x, x2=x2, y=alt.Y("usable_gib:Q"), tooltip=card_tip)
    return alt.layer(bars, over, box, labels, mark, usable, data=_data(rows)).properties(
        width=max(360, step * len(names)),
        height=height,
        title=alt.Title(
            title,
            subtitle="black line: usable room · dashed box ⇄: a swap group, one member resident "
            "at a time · red: tight (short of room)",
        ),
    )
