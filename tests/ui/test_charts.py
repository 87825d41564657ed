"""explorer.ui.charts: the placement chart turns plain rows into a plain vega-lite dict (validated here against
the vega-lite schema, through altair, once)."""

from __future__ import annotations

import json

import altair as alt

from explorer.sources.shipped import parse_cluster
from explorer.ui import charts
from explorer.ui.vega import VegaLiteSpec


def _placement_rows(spec: str):
    from explorer.fleet.footprints import fleet_cards
    from explorer.fleet.place import place
    from explorer.ui import fleet_rows as nf
    from explorer.ui.model_pick import pick_model

    offer = fleet_cards(parse_cluster(spec))
    terms = [(r.name, nf.row_term(r.repo, r.context_tokens, r.replicas, r.phases)) for r in nf.DEFAULT_FLEET]
    models, _notes, _errors = nf.fleet_demands(terms, lambda repo: pick_model(repo), gpu=offer.gpu)
    return nf.card_segments(place(models, offer.cards, unified_budget_bytes=offer.unified_budget_bytes), offer.labels)


def test_placement_chart_validates():
    for spec in ("1x3xl40s-48g", "1x1xrtx4090-24g", "1x1xm4-max-128g"):  # a swap group; tight; a unified pool
        rows = _placement_rows(spec)
        spec = charts.placement_chart(rows)
        alt.Chart.from_dict(spec)  # validates against the vega-lite schema
        assert json.loads(json.dumps(spec)) == spec  # plain data: what a browser page can draw
        text = json.dumps(spec, ensure_ascii=False)
        assert "GiB (1024³ bytes)" in text and "usable room" in text
        cards = [r["card"] for r in rows if r["row"] == "card"]
        axis = spec["layer"][0]["encoding"]["x"]["axis"]
        assert axis["labelExpr"] == f"{json.dumps(cards)}[datum.value]"  # the x axis labels the cards by name
        colours = spec["layer"][0]["encoding"]["color"]["scale"]["range"]
        assert charts.MISFIT not in colours  # red is kept for tight models and overfull cards


def test_the_one_display_wrapper_carries_the_spec():
    spec = charts.placement_chart(_placement_rows("1x3xl40s-48g"))
    mime, text = VegaLiteSpec(spec)._mime_()
    assert mime.startswith("application/vnd.vegalite.v") and json.loads(text) == spec
