"""The user's --tp/--pp/--dp in the walk, and every option's figures over all its cards."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines.launches import evaluate_sharded
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.engines.vllm import ENGINE
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.units import GiB

L70 = "meta-llama__Meta-Llama-3.1-70B"


def _plan(spec, **req):
    req.setdefault("engines", ("vllm",))
    return plan(shape_of(L70), parse_cluster(spec), PlanRequest(**req), speed=False)


def test_tp_and_pp_given_are_the_only_split():
    result = _plan("1x8xh100-80g", tensor_parallel_size=2, pipeline_parallel_size=2)
    assert result.options and {(o.layout.tp, o.layout.pp, o.layout.cards) for o in result.options} == {(2, 2, 4)}


def test_a_world_size_no_pool_offers_is_refused():
    result = _plan("1x8xh100-80g", tensor_parallel_size=16)
    assert not result.options
    (refused,) = result.rejected
    assert refused.rule == "world-size"
    assert refused.reason.startswith("tp 16 = 16 cards in one launch, but no pool offers them (the largest offers 8")


def test_whole_nodes_when_asked():
    """tp 8 × pp 2 on 2 × 8 H100s: the launch everyone runs for a model that spans nodes."""
    result = _plan("2x8xh100-80g@ib0", tensor_parallel_size=8, pipeline_parallel_size=2)
    (option,) = result.options
    assert (option.layout.nodes, option.layout.gpus_per_node) == (2, 8)


def test_vllm_data_parallel_replicas_in_one_launch():
    """--dp 2 --tp 2: two tp-2 replicas side by side on 4 cards; each holds half of the 2 sequences (70B bf16 at
    tp 2 holds one 4,096-token sequence in torch's 79.19 GiB × 0.9 of an H100: 71.1 of 71.3 GiB, not two)."""
    result = _plan("1x8xh100-80g", tensor_parallel_size=2, data_parallel_size=2, concurrency=2)
    (option,) = result.options
    assert (option.layout.tp, option.layout.dp, option.layout.cards) == (2, 2, 4)
    assert "--tensor-parallel-size 2 --data-parallel-size 2" in option.evaluation.command
    single = _plan("1x8xh100-80g", tensor_parallel_size=2, concurrency=1).options[0]
    assert option.per_card.kv_cache == single.per_card.kv_cache
    assert option.evaluation.max_concurrency == 2 * single.evaluation.max_concurrency


def test_every_option_says_what_all_its_cards_hold():
    """modelplan's MemoryText: a card's figure, and "Z GiB on N cards" (Z = each stage's card × its cards)."""
    result = _plan("1x8xh100-80g", tensor_parallel_size=4)
    (option,) = result.options
    card = option.per_card
    assert option.cards_total_bytes == 4 * card.total
    assert option.memory_text == (
        f"{card.total / GiB:,.1f} GiB a card of {card.usable / GiB:,.1f} GiB usable; "
        f"{4 * card.total / GiB:,.1f} GiB on 4 cards"
    )
    row = option.to_dict()
    assert row["total_on_cards"] == 4 * card.total and row["usable_on_cards"] == 4 * card.usable
    assert row["memory_text"] == option.memory_text
    pipeline = _plan("1x8xh100-80g", tensor_parallel_size=2, pipeline_parallel_size=2).options[0]
    assert pipeline.cards_total_bytes == sum(2 * c.total for c in pipeline.evaluation.cards)


def test_a_world_size_one_node_holds_is_not_spread_over_two():
    """tp 2 × pp 2 on 2 × 8 H100s: four cards of one node; the same four as 2 nodes × 2 are more than needed."""
    result = _plan("2x8xh100-80g@ib0", tensor_parallel_size=2, pipeline_parallel_size=2)
    (option,) = result.options
    assert (option.layout.nodes, option.layout.cards) == (1, 4)
    spread = next(x for x in result.rejected if x.rule == "more-than-needed")
    assert (spread.layout.nodes, spread.layout.gpus_per_node) == (2, 2)


def _kv_sharded(name, spec, **req):
    """The chosen layout of a vLLM tp 8 launch on ``spec``'s eight cards, and its evaluation."""
    shape, cluster, request = shape_of(name), parse_cluster(spec), PlanRequest(**req)
    gpu = cluster.gpu_classes[0]
    layout = Layout(engine="vllm", gpu_class=gpu.name, gpus_per_node=8, tp=8, ep=8)
    return evaluate_sharded(ENGINE, shape, shape.precision, layout, gpu, request, "m")


def test_the_least_dcp_that_holds_the_request_is_offered():
    # Kimi-K2.5 on 8 H200s, 64 × 65,536 tokens: 274.5 GiB of latent a card at tp 8; dcp 2 and 4 leave 137.3 and
    # 68.6 GiB beside 71.1 GiB of weights (over 126.4 usable); dcp 8 keeps 34.3 GiB and fits
    layout, ev = _kv_sharded("moonshotai__Kimi-K2.5", "1x8xh200-141g", context_tokens=65_536, concurrency=64)
    assert layout.dcp == 8 and ev.fits and ev.cards[0].kv_cache == 64 * 8_192 * 70_272
    # DeepSeek-V3 (fp8, 61 × 576 × 2 = 70,272 B a token too) at 32 × 65,536: dcp 2 keeps 73.7 GiB beside ~80 GiB
    # of weights (refused), dcp 4 36.8 GiB (fits)
    layout, ev = _kv_sharded("deepseek-ai__DeepSeek-V3", "1x8xh200-141g", context_tokens=65_536, concurrency=32)
    assert layout.dcp == 4 and ev.fits and ev.cards[0].kv_cache == 32 * 16_384 * 70_272


def test_a_layout_that_holds_the_request_keeps_its_whole_cache():
    layout, ev = _kv_sharded("moonshotai__Kimi-K2.5", "1x8xh200-141g", context_tokens=8_192, concurrency=4)
    assert layout.dcp == 1 and ev.fits


def test_the_largest_dcp_when_none_holds_all_and_it_holds_more():
    # 64 × 262,144 tokens: even dcp 8 needs 137.3 GiB a card; of ~49 GiB of room, tp 8 alone holds 2 sequences of
    # 17.2 GiB (262,144 × 70,272 B), dcp 8 holds 22 of 2.1 GiB
    layout, ev = _kv_sharded("moonshotai__Kimi-K2.5", "1x8xh200-141g", context_tokens=262_144, concurrency=64)
    assert layout.dcp == 8 and not ev.fits and ev.max_concurrency == 22
