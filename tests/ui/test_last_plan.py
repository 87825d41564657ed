"""explorer.ui.last_plan: a plan is repeated only for the same model and cluster objects and an equal question."""

from __future__ import annotations

from dataclasses import replace

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.ui.last_plan import LastPlan
from explorer.ui.model_pick import pick_model


def test_only_the_same_question_repeats_the_last_plan():
    model = pick_model("meta-llama/Meta-Llama-3.1-8B")  # the app's own: the snapshot, offline
    shape, cluster, request = model.shape, parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=8192)
    chosen = list(model.artifacts)
    result = plan(shape, cluster, request, artifacts=chosen)
    last = LastPlan(shape=shape, cluster=cluster, request=request, chosen=tuple(chosen), goal="fewest-cards",
                    result=result, plan_ms=3.0)  # fmt: skip
    # more rows, other columns, another drawn option: the same objects, an equal (rebuilt) request
    assert last.same_question(shape, cluster, replace(request), chosen, "fewest-cards")
    # a context move, another goal, other weights
    assert not last.same_question(shape, cluster, replace(request, context_tokens=16384), chosen, "fewest-cards")
    assert not last.same_question(shape, cluster, request, chosen, "fastest")
    assert not last.same_question(shape, cluster, request, chosen[:0], "fewest-cards")
    # the cluster's cell ran again (an edit, even back to the same spec): a new object, planned again
    assert not last.same_question(shape, parse_cluster("1x1xrtx4090-24g"), request, chosen, "fewest-cards")


def test_a_context_move_keeps_the_fallback_precisions():
    model = pick_model("meta-llama/Meta-Llama-3.1-8B")
    shape, cluster, request = model.shape, parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=8192)
    chosen = list(model.artifacts)
    last = LastPlan(shape=shape, cluster=cluster, request=request, chosen=tuple(chosen), goal="fewest-cards",
                    result=plan(shape, cluster, request, artifacts=chosen), plan_ms=3.0)  # fmt: skip
    assert last.same_weights(shape, list(chosen))  # a context move, another goal: the same model and weights
    assert not last.same_weights(shape, chosen[:0])
    assert not last.same_weights(replace(shape), chosen)  # another model object (the model cell ran again)
