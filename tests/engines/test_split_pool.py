"""explorer/engines/split_pool.py: the node counts a walk across nodes offers, one more past a fit at the brim."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.plan.ranking import at_the_brim
from explorer.sources.shipped import parse_cluster

A100_NODES = "4x8xa100-80g@ib0"


def _options(engine: str, context: int, spec: str = A100_NODES):
    """The bf16 KV cache named, so that the planner's fp8 variant (its own test) stays out of the walk's."""
    shape, cluster = shape_of("zai-org__GLM-5"), parse_cluster(spec)
    request = PlanRequest(context_tokens=context, engines=(engine,), kv_dtype="bf16")
    result = plan(shape, cluster, request, suggest=False)
    return {(o.layout.nodes, o.layout.gpus_per_node, o.layout.tp, o.layout.pp): o for o in result.options}, result


def test_a_whole_node_fit_at_the_brim_also_offers_one_more_node():
    """GLM-5 (bf16, 1,385.6 GiB of weights) at 131,072 tokens, vLLM on 4 × 8 × A100: the fewest whole nodes, 3 × 8
    (tp 8 × pp 3), need 74,119,163,084 of 76,584,635,596 usable bytes a card (96.8 %) and hold one sequence; the
    walk stopped there (its 4 × 6, tp 2 × pp 12, is at the brim too). Now it offers 4 × 8 (tp 8 × pp 4) as well:
    57,275,985,100 bytes (74.8 %), 6 sequences, and the ranking puts the layout with headroom first (before: the
    fallback's FP8 checkpoint was planned instead)."""
    options, result = _options("vllm", 131_072)
    three, four = options[(3, 8, 8, 3)], options[(4, 8, 8, 4)]
    assert (three.per_card.total, three.per_card.usable, three.evaluation.max_concurrency) == (
        74_119_163_084,
        76_584_635_596,
        1,
    )
    assert at_the_brim(three)
    assert (four.per_card.total, four.evaluation.max_concurrency) == (57_275_985_100, 6)
    assert not at_the_brim(four) and four.beside_brim and not three.beside_brim
    assert result.options[0] is four


def test_the_fewest_cards_at_the_brim_offer_the_next_node_count_and_its_whole_nodes():
    """SGLang's GLM-5 at 1,024 tokens on 4 × 8 × H100 (SGLang has no sparse-MLA kernels on A100s): 3 × 8 (tp 4 ×
    pp 6) is the fewest cards, at 85,497,043,253 of 85,520,809,984 bytes (99.97 %). The next node count is walked
    past the "more than needed" bound: its narrowest fit, 4 × 7 (pp 28, 79,541,295,413 bytes) and beside it 4 whole
    nodes, tp 8 × pp 4 at 71,704,591,480 bytes (83.8 %), which ranks first: a tensor-parallel layout of the same 32
    cards a copy spends as pp 28's. (tp 32 is not among them: SGLang runs GLM-5's sparse attention with DP attention
    at dp = tp, each card holding the attention weights whole, and that does not fit.)"""
    options, result = _options("sglang", 1024, "4x8xh100-80g@ib0")
    brim = options[(3, 8, 4, 6)]
    assert brim.per_card.total == 85_497_043_253 and at_the_brim(brim)
    assert options[(4, 7, 1, 28)].per_card.total == 79_541_295_413
    assert (4, 8, 32, 1) not in options
    whole = options[(4, 8, 8, 4)]
    assert whole.per_card.total == 71_704_591_480 and not at_the_brim(whole)
    assert result.options[0] is whole


def test_a_roomy_fit_offers_no_further_node():
    """At 4,096 tokens vLLM's 3 × 8 needs 65.1 of 71.3 GiB (91 %, not at the brim): no 4-node layout is planned."""
    options, _ = _options("vllm", 4096)
    assert not at_the_brim(options[(3, 8, 8, 3)])
    assert all(nodes <= 3 for nodes, *_ in options)
