"""explorer.ui.vega: every builder's spec is valid vega-lite (checked here, once), labelled, and needs no altair."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui import plan_rows as nd
from explorer.ui import vega
from explorer.ui.kv_lesson import kv_curve


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema")
    from altair.vegalite.v6.schema import core

    return jsonschema.Draft7Validator(core.load_schema())


def _errors(validator, spec) -> list[str]:
    return [e.message[:200] for e in validator.iter_errors(spec)]


@pytest.fixture(scope="module")
def planned():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    request = PlanRequest(context_tokens=32768)
    return shape, request, plan(shape, parse_cluster("1x8xh100-80g"), request)


def test_plan_charts_are_valid_and_labelled(validator, planned):
    shape, request, result = planned
    drawn = nd.sweep_options(result)
    sweep = nd.context_sweep(shape, drawn, request, [4096, 32768, 131072], names=nd.option_names(result, drawn))
    card = vega.card_memory_spec(nd.card_parts(result.options[0]), title="x")
    memory = vega.memory_context_spec(sweep, context=32768)
    speed = vega.speed_context_spec(sweep, context=32768)
    for spec in (card, memory, speed):
        assert _errors(validator, spec) == []
        assert spec["width"] == "container"  # the chart takes its column's width, never more
    text = json.dumps(memory, ensure_ascii=False)
    # the usable line is labelled in the legend, the axes carry their units, the asked context is marked
    assert "what the engine may use" in text and "GiB a card (1024³ bytes)" in text and "asked: 32,768" in text
    assert "tokens, log scale" in text
    assert "usable " in json.dumps(card) and "GiB (1024³ bytes)" in json.dumps(card, ensure_ascii=False)


def test_the_memory_chart_draws_the_options_the_table_ranks_first(planned):
    shape, request, result = planned
    drawn = nd.sweep_options(result, best=4, misses=2)
    assert drawn[:4] == list(result.options[:4])
    names = nd.option_names(result, drawn)
    sweep = nd.context_sweep(shape, drawn, request, [32768], names=names)
    assert [r["option"] for r in sweep][:4] == [f"#{i} {o.label}" for i, o in enumerate(result.options[:4], 1)]
    assert all(r["option"].startswith("✗ ") for r in sweep[4:])  # then the nearest misses


def test_kv_charts_are_valid(validator):
    shapes = {r: load_snapshot().shape(r) for r in ("meta-llama/Meta-Llama-3.1-8B", "deepseek-ai/DeepSeek-V3")}
    curve = vega.kv_context_spec(kv_curve(shapes, [1024, 8192, 262144]), context=8192)
    assert _errors(validator, curve) == [] and "past the model's limit" in json.dumps(curve)
    assert _errors(validator, vega.kv_stack_spec(kv_curve(shapes, [8192]))) == []


def test_the_wrapper_carries_the_spec():
    spec = vega.kv_stack_spec([{"model": "m", "kind": "full", "gib": 1.5}])
    mime, text = vega.VegaLiteSpec(spec)._mime_()
    assert mime == vega.MIME == "application/vnd.vegalite.v6+json" and json.loads(text) == spec
    assert vega.VegaLiteSpec(spec)._repr_mimebundle_()[vega.MIME] == spec


def test_no_altair_is_imported():
    code = "import sys, explorer.ui.vega, explorer.ui.plan_rows; print('altair' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_sweep_charts_carry_their_own_columns_once_by_name(planned):
    shape, request, result = planned
    drawn = nd.sweep_options(result)
    sweep = nd.context_sweep(shape, drawn, request, [4096, 32768], names=nd.option_names(result, drawn))
    memory = vega.memory_context_spec(sweep, context=32768)
    speed = vega.speed_context_spec(sweep, context=32768)
    # the rows sit once, in the named data set the layers read; each chart keeps only the columns it draws,
    # and names its option by number: each option's name is sent once, in `options`
    assert memory["data"] == speed["data"] == {"name": "sweep"}
    assert set(memory["datasets"]["sweep"][0]) == {"o", "context", "total_gib", "usable_gib", "fits"}
    assert set(speed["datasets"]["sweep"][0]) == {"o", "context", "tokens_per_s", "fits"}
    names = list(dict.fromkeys(r["option"] for r in sweep))
    assert memory["datasets"]["options"] == [{"o": i, "option": n} for i, n in enumerate(names)]
    first, last = sweep[0], sweep[-1]
    assert memory["datasets"]["sweep"][0]["total_gib"] == round(first["total_gib"], 3) != first["total_gib"]
    assert memory["datasets"]["sweep"][-1]["o"] == names.index(last["option"]) == len(names) - 1
    assert len(memory["datasets"]["sweep"]) == len(sweep)  # every row drawn, none dropped
    # every layer that draws the sweep looks the name up; the asked-context marker keeps its own data
    for layer in memory["layer"] + speed["layer"]:
        assert ("data" in layer) != (layer.get("transform", [{}])[0].get("lookup") == "o")
