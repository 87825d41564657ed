"""The placement chart (altair) for notebooks/placement.py: plain rows in
(:func:`explorer.ui.fleet_rows.card_segments`), an altair chart out. An edge module: it imports altair.

The app's and the KV lesson's charts are plain vega-lite dicts (:mod:`explorer.ui.vega`), which need no
altair and so run in a browser page too. Every size axis says GiB (1024³ bytes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

__all__ = ["MISFIT", "MODEL_COLOURS", "VegaLite", "placement_chart"]

MISFIT = "#d62728"


class VegaLite:
    """A chart marimo shows as vega-lite without validating it against the schema again.

    marimo's altair formatter validates every chart (tens of ms); the builder here is fixed and
    tested, so the notebook wraps it: ``VegaLite(chart)``.

    Attributes:
        spec: the vega-lite spec (a dict).
    """

    def __init__(self, chart: alt.TopLevelMixin) -> None:
        self.spec = chart.to_dict(validate=False)

    def _mime_(self) -> tuple[str, str]:
        # marimo reads the version the same way (marimo._plugins.ui._impl.altair_chart.get_chart_mimetype)
        return f"application/vnd.vegalite.v{alt.VEGA_VERSION}+json", json.dumps(self.spec, default=str)


def _data(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    # Note: data is a plain dict (alt.Data validates every row) on the top chart only, and encodings are
    # channel objects, never shorthand strings: altair deep-copies data on every chained call.
    return {"values": [dict(r) for r in rows]}


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
