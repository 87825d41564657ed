"""explorer.ui.fit_view: hardware first, the snapshot's models that run on a cluster and the best way for each."""

from __future__ import annotations

from explorer.engines.common import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.ui.fit_view import FIT_COLUMNS, fit_rows
from explorer.ui.model_pick import pick_model

REPOS = ("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-405B", "Qwen/Qwen3-0.6B")


def test_what_runs_on_one_4090_with_vllm(offline):
    cluster, request = parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=8192, engines=("vllm",))
    rows = fit_rows(cluster, request, ((r, lambda r=r: pick_model(r)) for r in REPOS))
    assert [r["model"] for r in rows] == ["meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-0.6B"]  # biggest first
    assert set(FIT_COLUMNS) <= set(rows[0])
    eight = pick_model(REPOS[0])
    best = plan(eight.shape, cluster, request, artifacts=eight.artifacts, model_ref=REPOS[0]).options[0]
    assert rows[0]["best way"] == "vLLM · " + best.label.split(" · ", 1)[1]
    assert rows[0]["max context"] == f"{best.evaluation.max_context_tokens:,}"
    every = fit_rows(cluster, request, ((r, lambda r=r: pick_model(r)) for r in REPOS), fits_only=False)
    assert [r["fits"] for r in every] == ["✗", "✓", "✓"]  # 405B first, and it does not fit
