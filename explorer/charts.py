"""Altair charts for the notebooks: plain rows in (from :mod:`explorer.notebook_data` or
:mod:`explorer.notebook_kv`), altair charts out. An edge module: it imports altair.

Every size axis says GiB (1024³ bytes); context axes are log-scale token counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

__all__ = ["VegaLite", "card_memory_chart", "kv_context_chart", "kv_stack_chart", "memory_context_chart",
           "speed_context_chart"]

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
_TOKENS = ("datum.value >= 1048576 ? datum.value / 1048576 + 'M' : "
           "datum.value >= 1024 ? datum.value / 1024 + 'k' : datum.value")


def _context_x() -> alt.X:
    """A log-2 context axis labelled at powers of two."""
    ticks = [2**i for i in range(9, 24)]
    return alt.X("context:Q", scale=alt.Scale(type="log", base=2), title="context (tokens, log scale; k = 1,024)",
                 axis=alt.Axis(values=ticks, labelExpr=_TOKENS))


def _context_rule(context: int) -> alt.Chart:
    """A grey vertical rule at the asked context."""
    return alt.Chart({"values": [{"context": context}]}).mark_rule(color="grey").encode(x=alt.X("context:Q"))


def card_memory_chart(rows: Sequence[Mapping[str, Any]], *, title: str = "", width: int = 560) -> alt.FacetChart:
    """What each card role holds, stacked part by part, with a black tick at what the engine may use.

    One row per role (a pipeline stage's card, the host…), each on its own GiB
    scale, so a host's terabyte does not flatten a card's 80 GiB.
    ``rows``: :func:`explorer.notebook_data.card_parts` (role, part, gib, usable_gib…).
    """
    roles = [r for _, r in sorted({(row["order"], row["role"]) for row in rows})]
    y = alt.Y("role:N", title=None, axis=None)
    bars = alt.Chart().mark_bar(height=26).encode(
        x=alt.X("gib:Q", title="GiB (1024³ bytes)", stack="zero"), y=y,
        color=alt.Color("part:N", scale=alt.Scale(domain=list(PARTS), range=list(PART_COLOURS)),
                        legend=alt.Legend(title="part", orient="bottom")),
        order=alt.Order("part_order:Q"),
        tooltip=[alt.Tooltip("role:N"), alt.Tooltip("part:N"), alt.Tooltip("gib:Q", format=",.2f", title="GiB")],
    )
    usable = alt.Chart().mark_tick(color="black", thickness=3, size=34).encode(
        x=alt.X("max(usable_gib):Q"), y=y,
        tooltip=[alt.Tooltip("max(usable_gib):Q", format=",.1f", title="usable GiB")])
    row = alt.Row("role:N", sort=roles, title=None, header=alt.Header(labelAngle=0, labelAlign="left"))
    return alt.layer(bars, usable).properties(width=width, height=34).facet(
        row=row, data=_data(rows), title=title).resolve_scale(x="independent")


def memory_context_chart(rows: Sequence[Mapping[str, Any]], *, context: int | None = None,
                         width: int = 560, height: int = 300) -> alt.LayerChart:
    """Per-card total against context for a few options, each with its usable line (dashed);
    points past an option's limit are red crosses. A grey rule marks the asked context.

    ``rows``: :func:`explorer.notebook_data.context_sweep`.
    """
    data = _data(rows)
    x = _context_x()
    colour = alt.Color("option:N", legend=alt.Legend(orient="bottom", columns=1, labelLimit=520))
    tip = [alt.Tooltip("option:N"), alt.Tooltip("context:Q", format=","),
           alt.Tooltip("total_gib:Q", format=",.2f", title="GiB a card"),
           alt.Tooltip("usable_gib:Q", format=",.1f", title="usable GiB"), alt.Tooltip("fits:N")]
    line = alt.Chart().mark_line().encode(x=x, y=alt.Y("total_gib:Q", title="GiB a card (1024³ bytes)"),
                                              color=colour, tooltip=tip)
    points = alt.Chart().mark_point(filled=True, size=50).encode(
        x=x, y=alt.Y("total_gib:Q"), color=colour, tooltip=tip,
        shape=alt.Shape("fits:N", scale=alt.Scale(domain=[True, False], range=["circle", "cross"]), legend=None),
    )
    misfit = alt.Chart().transform_filter("datum.fits == false").mark_point(
        shape="cross", size=90, color=MISFIT, filled=True).encode(x=x, y=alt.Y("total_gib:Q"), tooltip=tip)
    usable = alt.Chart().mark_rule(strokeDash=[5, 4]).encode(y=alt.Y("max(usable_gib):Q"), color=colour)
    layers = [line, points, misfit, usable]
    if context:
        layers.append(_context_rule(context))
    return alt.layer(*layers, data=data).properties(width=width, height=height,
                                         title="Memory a card needs as the context grows (dashed: usable)")


def speed_context_chart(rows: Sequence[Mapping[str, Any]], *, context: int | None = None,
                        width: int = 560, height: int = 260) -> alt.LayerChart:
    """Decode tokens/s (one sequence, estimate) against context, for the options that have a speed."""
    data = _data([r for r in rows if r.get("tokens_per_s") is not None])
    x = _context_x()
    line = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("tokens_per_s:Q", title="decode tokens/s (estimate)"),
        color=alt.Color("option:N", legend=alt.Legend(orient="bottom", columns=1, labelLimit=520)),
        strokeDash=alt.StrokeDash("fits:N", scale=alt.Scale(domain=[True, False], range=[[1, 0], [3, 3]]), legend=None),
        tooltip=[alt.Tooltip("option:N"), alt.Tooltip("context:Q", format=","),
                 alt.Tooltip("tokens_per_s:Q", format=",.1f"), alt.Tooltip("fits:N")],
    )
    layers = [line]
    if context:
        layers.append(_context_rule(context))
    return alt.layer(*layers, data=data).properties(width=width, height=height,
                                                    title="Decode speed as the context grows (dotted: no longer fits)")


def kv_context_chart(rows: Sequence[Mapping[str, Any]], *, context: int | None = None,
                     width: int = 560, height: int = 320) -> alt.LayerChart:
    """KV cache GiB against context, one line per model (all layer kinds summed), log-log;
    dashed past the model's own context limit."""
    data = _data(rows)
    x = _context_x()
    line = alt.Chart().transform_aggregate(gib="sum(gib)", groupby=["model", "context", "beyond"]).mark_line(
        point=True).encode(
        strokeDash=alt.StrokeDash("beyond:N", scale=alt.Scale(domain=[False, True], range=[[1, 0], [4, 3]]),
                                  legend=alt.Legend(title="past the model's limit")),
        x=x, y=alt.Y("gib:Q", scale=alt.Scale(type="log"), title="KV cache (GiB, log scale)"),
        color=alt.Color("model:N", legend=alt.Legend(orient="bottom", columns=2, labelLimit=300)),
        tooltip=[alt.Tooltip("model:N"), alt.Tooltip("context:Q", format=","),
                 alt.Tooltip("gib:Q", format=",.3f", title="GiB")],
    )
    layers = [line]
    if context:
        layers.append(_context_rule(context))
    return alt.layer(*layers, data=data).properties(width=width, height=height, title="KV cache as the context grows")


def kv_stack_chart(rows: Sequence[Mapping[str, Any]], *, width: int = 560) -> alt.Chart:
    """KV cache GiB per model at one context, stacked by layer kind (full, sliding, mla, recurrent…)."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    return alt.Chart(_data(rows)).mark_bar().encode(
        x=alt.X("sum(gib):Q", title="KV cache (GiB, 1024³ bytes)"),
        y=alt.Y("model:N", sort=models, title=None),
        color=alt.Color("kind:N", legend=alt.Legend(title="layer kind", orient="bottom")),
        tooltip=[alt.Tooltip("model:N"), alt.Tooltip("kind:N"), alt.Tooltip("sum(gib):Q", format=",.3f", title="GiB")],
    ).properties(width=width, height=max(80, 30 * len(models)), title="What each kind of layer keeps")
