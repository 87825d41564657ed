"""explorer.ui.lesson_charts: every lesson chart builds a valid vega-lite spec from the lessons' rows."""

from __future__ import annotations

from explorer.engines.common import PlanRequest
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui import lesson_charts as lc
from explorer.ui import parallel_lesson as pl
from explorer.ui import quant_lesson as ql
from explorer.ui import speed_lesson as sl


def spec(chart) -> dict:
    return chart.to_dict()  # validates against the vega-lite schema


def values(d: dict) -> list[dict]:
    """The rows of a spec's datasets (altair moves inline data to ``datasets``, one entry per distinct set)."""
    return [row for rows in d.get("datasets", {}).values() for row in rows]


def test_split_chart():
    qwen = load_snapshot().shape("Qwen/Qwen2.5-7B")
    rows = pl.card_rows(pl.split_model(qwen, "h100-80g", 4, "pipeline", PlanRequest(context_tokens=8192)))
    d = spec(lc.split_chart(rows, title="four stages"))
    assert len(values(d)) == 4 * 5 and d["encoding"]["y"]["title"] == "GiB (1024³ bytes)"


def test_speed_charts():
    snap = load_snapshot()
    llama = snap.shape("meta-llama/Meta-Llama-3.1-8B")
    sweep = sl.batch_sweep(llama, "bf16", "h100-80g", 1024)
    step = sl.decode_step(llama, "bf16", "h100-80g", 8, 1024)
    roof = spec(lc.roofline_chart(sl.roofline_rows(step), sweep, batch=8))
    assert "batch == 8" in str(roof)
    batch = spec(lc.batch_chart(sweep, batch=8))
    assert len(batch["hconcat"]) == 2 and len(values(batch)) == 11 + 1  # eleven batches and the rule at 8
    spec(lc.offload_chart(sl.offload_rows(llama, "rtx4090-24g", 1024)))
    published = spec(lc.published_chart(sl.published_rows(snap.shape)))
    assert len(values(published)) == 45 + 2  # 45 measurements and the diagonal's two ends


def test_quant_charts():
    llama = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    ladder = ql.ladder_rows(llama)
    d = spec(lc.ladder_chart(ladder, chosen="Q4_K_M"))
    chosen = [v for v in values(d) if v["chosen"]]
    assert {v["label"] for v in chosen} == {"Q4_K_M"} and len(values(d)) == 2 * len(ladder)
    mix = spec(lc.mix_chart(ql.mix_layer_rows(llama, "Q4_K_M"), title="mix"))
    assert mix["encoding"]["color"]["scale"]["domain"] == ["F32", "Q6_K", "Q4_K"]
    marks = [{"label": r["label"], "bits": r["bits"], "chosen": r["name"] == "fp8"} for r in ladder]
    quality = spec(lc.quality_chart(ql.quality_rows(), ql.perplexity_rows(), marks=marks))
    assert len(quality["vconcat"]) == 2
