"""explorer.charts: each builder turns plain rows into a vega-lite spec (validated here, once)."""

from __future__ import annotations

import json

from explorer import charts
from explorer import notebook_data as nd
from explorer.cluster import parse_cluster_spec
from explorer.engines.common import PlanRequest
from explorer.notebook_kv import kv_curve
from explorer.planner import plan
from explorer.snapshot import load_snapshot


def _plan():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    request = PlanRequest(context_tokens=32768, engines=("vllm",))
    return shape, request, plan(shape, parse_cluster_spec("1x8xh100-80g"), request)


def test_plan_charts_validate():
    shape, request, result = _plan()
    sweep = nd.context_sweep(shape, nd.sweep_options(result), request, [4096, 32768, 131072])
    for chart in (charts.card_memory_chart(nd.card_parts(result.options[0]), title="x"),
                  charts.memory_context_chart(sweep, context=32768),
                  charts.speed_context_chart(sweep, context=32768)):
        spec = chart.to_dict()  # validates against the vega-lite schema
        assert "GiB" in json.dumps(spec) or "tokens" in json.dumps(spec)


def test_kv_charts_validate():
    shapes = {r: load_snapshot().shape(r) for r in ("meta-llama/Meta-Llama-3.1-8B", "deepseek-ai/DeepSeek-V3")}
    rows = kv_curve(shapes, [1024, 8192])
    charts.kv_context_chart(rows, context=8192).to_dict()
    charts.kv_stack_chart(kv_curve(shapes, [8192])).to_dict()


def test_vegalite_wrapper_carries_the_spec():
    _shape, _request, result = _plan()
    chart = charts.card_memory_chart(nd.card_parts(result.options[0]))
    mime, text = charts.VegaLite(chart)._mime_()
    assert mime.startswith("application/vnd.vegalite.v") and json.loads(text) == chart.to_dict(validate=False)
