"""explorer.ui.advice: the best way of each engine, and the suggestions as changes."""

from __future__ import annotations

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.advice import best_per_engine_strip, suggestion_rows
from explorer.units import gib


def test_the_strip_names_each_engines_best_with_its_rank():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    result = plan(shape, parse_cluster("1x8xh100-80g"), PlanRequest(context_tokens=32768), goal="throughput")
    strip = best_per_engine_strip(result)
    parts = strip.split(" · ")
    assert len(parts) == 3 and parts[0].startswith("<strong>vLLM</strong> #1: ")  # the table's first is vLLM's
    for part, (engine, o) in zip(parts, result.best_per_engine().items(), strict=True):
        rank = result.options.index(o) + 1
        assert f"#{rank}: {o.layout.label}, {gib(o.per_card.total)} of {gib(o.per_card.usable)}" in part
        assert engine != "llamacpp" or part.startswith("<strong>llama.cpp</strong>")


def test_suggestions_become_rows_with_their_change():
    # 8B at 128k beside its 15 GiB of weights on one 24 GB card: nothing fits; a shorter context does
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    request = PlanRequest(context_tokens=131072, engines=("vllm",))
    result = plan(shape, parse_cluster("1x1xrtx4090-24g"), request)
    assert result.options == () and result.suggestions
    rows = suggestion_rows(result)
    assert [r["change"] for r in rows] == [dict(s.change) for s in result.suggestions]
    context = next(r for r in rows if "context" in r["change"])
    assert context["fits"] and context["outcome"].startswith("fits (tier 1): ")
    short = [r for r in rows if not r["fits"]]
    assert all(r["outcome"].startswith("still short: longest context ") for r in short)
    assert best_per_engine_strip(result) == ""
