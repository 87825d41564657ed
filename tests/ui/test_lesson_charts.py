"""explorer.ui.lesson_charts: every lesson chart builds a valid vega-lite v6 spec (a plain dict, no altair)
from the lessons' rows."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.engines.request import PlanRequest
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui import lesson_charts as lc
from explorer.ui import parallel_lesson as pl
from explorer.ui import quant_lesson as ql
from explorer.ui import serving_lesson as vl
from explorer.ui import speed_lesson as sl
from explorer.ui import vega


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema")
    from altair.vegalite.v6.schema import core

    return jsonschema.Draft7Validator(core.load_schema())


@pytest.fixture
def valid(validator):
    """Checks a spec against the vega-lite v6 schema and returns it."""

    def check(spec: dict) -> dict:
        assert [e.message[:200] for e in validator.iter_errors(spec)] == []
        assert spec["$schema"] == vega.SCHEMA
        return spec

    return check


def values(spec: dict) -> list[dict]:
    """The rows of every inline data set in a spec (top level, layers, concatenated views)."""
    found = []
    if isinstance(spec, dict):
        found += spec.get("data", {}).get("values", []) if isinstance(spec.get("data"), dict) else []
        for key in ("layer", "hconcat", "vconcat"):
            for view in spec.get(key, []):
                found += values(view)
    return found


def test_split_chart(valid):
    qwen = load_snapshot().shape("Qwen/Qwen2.5-7B")
    rows = pl.card_rows(pl.split_model(qwen, "h100-80g", 4, "pipeline", PlanRequest(context_tokens=8192)))
    d = valid(lc.split_spec(rows, title="four stages"))
    assert len(values(d)) == 4 * 6 and d["encoding"]["y"]["title"] == "GiB (1024³ bytes)"  # 4 cards × 6 parts
    # a card that does not hold its parts is outlined red; the chart fills its column
    assert d["encoding"]["stroke"] == {"condition": {"test": "datum.fits", "value": None}, "value": "#d62728"}
    assert d["width"] == "container" and d["title"]["text"] == "four stages"


def test_speed_charts(valid):
    snap = load_snapshot()
    llama = snap.shape("meta-llama/Meta-Llama-3.1-8B")
    sweep = sl.batch_sweep(llama, "bf16", "h100-80g", 1024)
    step = sl.decode_step(llama, "bf16", "h100-80g", 8, 1024)
    roof = valid(lc.roofline_spec(sl.roofline_rows(step), sweep, batch=8))
    assert "batch == 8" in str(roof) and roof["layer"][0]["encoding"]["x"]["scale"] == {"type": "log"}
    batch = valid(lc.batch_spec(sweep, batch=8))
    left, right = batch["hconcat"]
    assert len(batch["data"]["values"]) == 11  # eleven batches, 1 … 1,024
    assert left["layer"][1]["data"]["values"] == right["layer"][1]["data"]["values"] == [{"batch": 8}]  # the rule
    assert left["layer"][0]["encoding"]["x"]["scale"] == {"type": "log", "base": 2}
    offload = valid(lc.offload_spec(sl.offload_rows(llama, "rtx4090-24g", 1024)))
    assert offload["width"] == "container"
    published = valid(lc.published_spec(sl.published_rows(snap.shape)))
    assert len(values(published)) == 83 + 2  # 83 measurements and the diagonal's two ends


def test_serving_frontier_chart(valid):
    """The frontier (card tokens/s against a user's), a point a batch, the target user speed a dashed rule at
    1000 / 50 ms = 20 tokens/s, the KV cache's capacity a rule on the TPOT chart."""
    from explorer.speed.workload import Workload

    llama = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    served = vl.replica(llama, "h100-80g", "bf16", Workload(users=200, tpot_s=0.050))
    rows = vl.frontier_rows(served.load)
    spec = valid(lc.frontier_spec(rows, user_tokens_per_s=20.0, capacity=served.load.capacity))
    left, right = spec["hconcat"]
    assert len(spec["data"]["values"]) == len(vl.BATCH_STEPS)
    assert left["layer"][-1]["data"]["values"] == [{"user_tokens_per_s": 20.0}]
    assert right["layer"][1]["data"]["values"] == [{"batch": served.load.capacity}]
    assert right["layer"][2]["data"]["values"] == [{"tpot_ms": 50.0}]


def test_quant_charts(valid):
    llama = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    ladder = ql.ladder_rows(llama)
    d = valid(lc.ladder_spec(ladder, chosen="Q4_K_M"))
    chosen = [v for v in values(d) if v["chosen"]]
    assert {v["label"] for v in chosen} == {"Q4_K_M"} and len(values(d)) == 2 * len(ladder)
    mix = valid(lc.mix_spec(ql.mix_layer_rows(llama, "Q4_K_M"), title="mix"))
    assert mix["encoding"]["color"]["scale"]["domain"] == ["F32", "Q6_K", "Q4_K"]
    marks = [{"label": r["label"], "bits": r["bits"], "chosen": r["name"] == "fp8"} for r in ladder]
    quality = valid(lc.quality_spec(ql.quality_rows(), ql.perplexity_rows(), marks=marks))
    top, bottom = quality["vconcat"]
    assert top["layer"][2]["data"]["values"] == [m for m in marks if m["chosen"]]  # the red line: fp8
    assert bottom["layer"][0]["encoding"]["y"]["scale"] == {"type": "symlog", "constant": 0.01}
    assert "Δ perplexity" in json.dumps(quality, ensure_ascii=False)


def test_no_altair_is_imported():
    code = "import sys, explorer.ui.lesson_charts; print('altair' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
