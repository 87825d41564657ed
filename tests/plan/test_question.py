"""Whole plans remembered by their question (explorer.plan.question, planner._remembered), and the memos under a
context move: a plan made after other plans equals one made from empty memos."""

from __future__ import annotations

import pytest
from support.corpus import load_config, shape_of

from explorer.artifacts.offer import original_artifact
from explorer.engines.request import PlanRequest
from explorer.memo import MEMOS, clear_memos
from explorer.model.shapes import shape_from_config
from explorer.plan import planner
from explorer.plan.planner import PLANS_KEPT, plan
from explorer.sources.shipped import parse_cluster, shipped_prices
from explorer.speed.estimate import SpeedSettings

LLAMA_70B = "meta-llama__Meta-Llama-3.1-70B"
#: Llama-3.1-70B's KV cache: 80 layers × 8 KV heads × 128 values × 2 (K and V) × 2 bytes (bf16) = 327,680 B a
#: token; tensor parallel 8 puts one KV head on each card: 40,960 B a token a card
KV_PER_TOKEN_TP8 = 40_960
#: h100-80g as torch sees it (the catalogue's torch_memory_bytes), vLLM's budget is a share of it
H100_VISIBLE_BYTES = 85_029_615_043


@pytest.fixture(autouse=True)
def _empty_memos():
    clear_memos()
    yield
    clear_memos()


def _plan(shape, cluster, **asked):
    """As the app asks: the model's own weights, speed with the shipped prices, no suggestions."""
    return plan(
        shape,
        cluster,
        PlanRequest(**asked),
        artifacts=[original_artifact(shape)],
        speed=SpeedSettings(prices=shipped_prices()),
        suggest=False,
    )


def _uncached(shape, cluster, **asked):
    clear_memos()
    return _plan(shape, cluster, **asked)


def _vllm_tp8(result):
    return next(o for o in result.options if o.engine == "vllm" and o.layout.tp == 8 and o.layout.pp == 1)


def test_a_context_move_plans_what_empty_memos_plan():
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g")
    _plan(shape, cluster, context_tokens=32768)  # the open: every memo filled at 32k
    moved = _plan(shape, cluster, context_tokens=8192)
    fresh = _uncached(shape, cluster, context_tokens=8192)
    assert moved is not fresh and moved.to_dict() == fresh.to_dict()
    # 8,192 tokens (a whole number of vLLM's 16-token blocks) × 40,960 B = 335,544,320 B a card
    assert _vllm_tp8(moved).evaluation.cards[0].kv_cache == 8192 * KV_PER_TOKEN_TP8 == 335_544_320


def test_a_concurrency_move_plans_what_empty_memos_plan():
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g")
    _plan(shape, cluster, context_tokens=8192)
    moved = _plan(shape, cluster, context_tokens=8192, concurrency=4)
    assert moved.to_dict() == _uncached(shape, cluster, context_tokens=8192, concurrency=4).to_dict()
    assert _vllm_tp8(moved).evaluation.cards[0].kv_cache == 4 * 8192 * KV_PER_TOKEN_TP8 == 1_342_177_280


def test_another_cluster_plans_what_empty_memos_plan():
    shape = shape_of(LLAMA_70B)
    _plan(shape, parse_cluster("1x8xh100-80g"), context_tokens=8192)
    two = parse_cluster("2x8xh100-80g@ib0")
    moved = _plan(shape, two, context_tokens=8192)
    assert moved.to_dict() == _uncached(shape, two, context_tokens=8192).to_dict()
    one_node = next(o for o in moved.options if o.engine == "vllm" and o.layout.tp == 8 and o.layout.nodes == 1)
    assert one_node.replicas == 2  # one copy a node


def test_another_setting_plans_what_empty_memos_plan():
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g")
    first = _plan(shape, cluster, context_tokens=8192)
    moved = _plan(shape, cluster, context_tokens=8192, gpu_memory_utilization=0.8)
    assert moved.to_dict() == _uncached(shape, cluster, context_tokens=8192, gpu_memory_utilization=0.8).to_dict()
    # vLLM's budget: the share of what torch sees, int(85,029,615,043 × 0.9) and int(… × 0.8)
    assert _vllm_tp8(first).evaluation.cards[0].usable == 76_526_653_538 == int(H100_VISIBLE_BYTES * 0.9)
    assert _vllm_tp8(moved).evaluation.cards[0].usable == 68_023_692_034 == int(H100_VISIBLE_BYTES * 0.8)


def test_the_same_question_asked_afresh_is_answered_from_the_memo():
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g")
    first = _plan(shape, cluster, context_tokens=8192)
    _plan(shape, cluster, context_tokens=16384)
    # the request, the artifact list and the speed settings are built anew, equal: the very same plan
    assert _plan(shape, cluster, context_tokens=8192) is first


def test_a_shape_built_again_is_another_question():
    cluster = parse_cluster("1x8xh100-80g")
    first = _plan(shape_of(LLAMA_70B), cluster, context_tokens=8192)
    again = shape_from_config(load_config(LLAMA_70B), name=LLAMA_70B)
    other = _plan(again, cluster, context_tokens=8192)
    assert other is not first and other.to_dict() == first.to_dict()


def test_a_callable_fallback_is_planned_afresh():
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g")
    request = PlanRequest(context_tokens=8192, engines=("vllm",))
    one = plan(shape, cluster, request, suggest=False, fallback=lambda: ())
    two = plan(shape, cluster, request, suggest=False, fallback=lambda: ())
    assert one is not two and one.to_dict() == two.to_dict()


def test_the_plan_memo_is_bounded_and_listed():
    shape, cluster = shape_of("meta-llama__Meta-Llama-3.1-8B"), parse_cluster("1x1xh100-80g")
    contexts = [1024 * (i + 1) for i in range(PLANS_KEPT + 4)]
    first = plan(shape, cluster, PlanRequest(context_tokens=contexts[0], engines=("vllm",)), suggest=False)
    for context in contexts[1:]:
        last = plan(shape, cluster, PlanRequest(context_tokens=context, engines=("vllm",)), suggest=False)
    remembered = planner._remembered
    assert remembered.cache_info().currsize == PLANS_KEPT
    assert plan(shape, cluster, PlanRequest(context_tokens=contexts[-1], engines=("vllm",)), suggest=False) is last
    again = plan(shape, cluster, PlanRequest(context_tokens=contexts[0], engines=("vllm",)), suggest=False)
    assert again is not first and again.to_dict() == first.to_dict()  # the oldest was dropped
    info, _ = MEMOS["explorer.plan.planner._remembered"]
    assert info.maxsize == PLANS_KEPT == 32
