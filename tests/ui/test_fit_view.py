"""explorer.ui.fit_view: hardware first, the core's fit rows as the app's table."""

from __future__ import annotations

from explorer.artifacts.known_model import KnownModel
from explorer.engines.request import PlanRequest
from explorer.plan.fit_view import fit_rows
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.ui.fit_view import FIT_COLUMNS, fit_table
from explorer.ui.model_pick import pick_model

REPOS = ("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-405B", "Qwen/Qwen3-0.6B")


def test_what_runs_on_one_4090_with_vllm(offline):
    cluster, request = parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=8192, engines=("vllm",))
    models = []
    for r in REPOS:
        m = pick_model(r)
        models.append(KnownModel(ref=r, shape=m.shape, artifacts=tuple(m.artifacts)))
    rows = fit_table(fit_rows(models, cluster, request))
    # fitting first, biggest first (fewest-cards); the 405B fits nowhere and comes last
    assert [r["model"] for r in rows] == [REPOS[0], REPOS[2], REPOS[1]]
    assert list(rows[0]) == list(FIT_COLUMNS)
    eight = models[0]
    best = plan(eight.shape, cluster, request, artifacts=list(eight.artifacts), model_ref=REPOS[0]).options[0]
    assert rows[0]["best way"] == "vLLM · " + best.label.split(" · ", 1)[1]
    assert rows[0]["max context"] == f"{best.evaluation.max_context_tokens:,}" and rows[0]["tier"] == "1"
    assert rows[2]["tier"] == "✗" and rows[2]["per card (GiB)"] == "—"
    assert rows[2]["params (B)"] == f"{models[1].shape.params / 1e9:,.1f}"


def test_a_widened_row_says_it_is_quantised(offline):
    """Qwen3-32B's bf16 (65.5 GB) keeps no vLLM layout on one 4090; with the fallback its row is the int4 AWQ
    checkpoint, and the table says why it is not the model's own weights."""
    from explorer.artifacts.offer import fallback_artifacts
    from explorer.sources.checkpoints import shipped_checkpoints

    m = pick_model("Qwen/Qwen3-32B")
    fallback = fallback_artifacts(m.shape, m.artifacts, shipped_checkpoints("Qwen/Qwen3-32B"))
    model = KnownModel(ref="Qwen/Qwen3-32B", shape=m.shape, artifacts=tuple(m.artifacts), fallback=fallback)
    (row,) = fit_table(fit_rows([model], parse_cluster("1x1xrtx4090-24g"), PlanRequest(engines=("vllm",))))
    assert row["tier"] == "1" and "int4 AWQ" in row["best way"]
    assert row["to fit"] == "quantised: its own weights keep no GPU-only layout here"
