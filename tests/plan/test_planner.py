"""plan(): the seed rules on real models and clusters."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.errors import ClusterSpecError, PlanError
from explorer.plan.planner import plan, recheck
from explorer.plan.ranking import at_the_brim, cards_spent
from explorer.sources.shipped import parse_cluster

GPU_ENGINES = ("vllm", "sglang")


def _plan(name, spec, **req):
    req.setdefault("engines", GPU_ENGINES)
    return plan(shape_of(name), parse_cluster(spec), PlanRequest(**req))


def test_qwen3_235b_runs_on_eight_cards_past_its_four_kv_heads():
    result = _plan("Qwen__Qwen3-235B-A22B", "1x8xh100-80g", context_tokens=8192)
    eight = [o for o in result.options if o.engine == "vllm" and o.layout.tp == 8]
    assert eight, "tp 8 must be allowed: 8 % 4 KV heads == 0"
    opt = eight[0]
    assert opt.layout.ep == 8 and "--enable-expert-parallel" in opt.evaluation.command
    assert "--tensor-parallel-size 8" in opt.evaluation.command
    assert not any(x.rule == "kv-heads" and x.layout and x.layout.tp == 8 for x in result.rejected)


def test_llama_405b_needs_three_a100_40g_nodes_and_a_fourth_leaves_headroom():
    """405B bf16 fits 3 nodes × 8 A100-40G (tp 8 × pp 3) at 35.3 of 36.0 GiB a card, at the brim: the walk offers
    the fourth node too (tp 8 × pp 4, 27.2 GiB), which ranks first; 2 nodes hold no layout."""
    result = _plan("meta-llama__Meta-Llama-3.1-405B", "4x8xa100-40g@ib0", context_tokens=4096, engines=("vllm",))
    three = next(o for o in result.options if (o.layout.nodes, o.layout.gpus_per_node, o.layout.pp) == (3, 8, 3))
    assert three.layout.tp == 8 and "--pipeline-parallel-size 3" in three.evaluation.command and at_the_brim(three)
    best = result.options[0]
    assert (best.layout.nodes, best.layout.gpus_per_node, best.layout.tp, best.layout.pp) == (4, 8, 8, 4)
    assert "--pipeline-parallel-size 4" in best.evaluation.command and not at_the_brim(best)
    two = [x for x in result.rejected if x.layout and x.layout.nodes == 2 and x.layout.gpus_per_node == 8]
    assert two and all(x.rule in ("memory", "memory-lower-bound") for x in two)
    assert all(o.layout.nodes <= 4 for o in result.options)


def test_mig_slices_are_never_joined():
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1x7xa100-80g-mig-1g.10gb", context_tokens=2048)
    assert all(o.layout.cards == 1 for o in result.options)
    assert result.pruned.get("mig-single-slice", 0) >= 6
    small = _plan("Qwen__Qwen3-0.6B", "1x7xa100-80g-mig-1g.10gb", context_tokens=2048)
    assert small.options and all(o.layout.cards == 1 for o in small.options)


def test_qwen25_7b_refuses_tp8_with_the_reason():
    result = _plan("Qwen__Qwen2.5-7B", "1x8xh100-80g")
    refusal = next(x for x in result.rejected if x.layout and x.layout.tp == 8 and x.engine == "vllm")
    assert refusal.rule == "attention-heads"
    assert refusal.reason == "Total attention heads (28) must be divisible by tensor parallel size (8)"
    assert not any(o.layout.tp == 8 for o in result.options)


def test_memory_refusals_say_need_and_room():
    result = _plan("meta-llama__Meta-Llama-3.1-70B", "1x1xl40s-48g", engines=("vllm",))
    assert not result.options
    x = next(x for x in result.rejected if x.rule in ("memory", "memory-lower-bound"))
    assert "GiB" in x.reason


def test_longer_context_recheck_keeps_weights_and_grows_kv():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    result = plan(shape, parse_cluster("1x1xh100-80g"), PlanRequest(context_tokens=4096, engines=("vllm",)))
    opt = result.options[0]
    longer = recheck(shape, opt, PlanRequest(context_tokens=65536))
    assert longer.per_card.weights == opt.per_card.weights
    assert longer.per_card.overhead == opt.per_card.overhead
    assert longer.per_card.kv_cache == 16 * opt.per_card.kv_cache


def test_ranking_prefers_fewer_cards_then_precision():
    result = _plan("meta-llama__Meta-Llama-3.1-70B", "1x8xh100-80g", context_tokens=8192)
    # among launches that run as printed, layouts at the brim come after those with headroom (vLLM pp 2: 70.0 of
    # 71.3 GiB a card is 98 %)
    printed = [o for o in result.options if o.tier == 1 and o.runs_as_printed]
    brim = [at_the_brim(o) for o in printed]
    assert brim == sorted(brim) and any(brim)
    spent = [cards_spent(o) for o in printed if not at_the_brim(o)]
    assert spent == sorted(spent)
    # 3 of the node's 8 cards leave 5, room for one more copy: the copy spends 8 / 2 = 4, as a 4-card one does
    three = next(o for o in result.options if o.layout.cards == 3)
    assert cards_spent(three) == 4


def test_free_now_only_breaks_ties():
    busy = _plan("meta-llama__Meta-Llama-3.1-8B", "1x8xh100-80g,free=0 + 1x8xh100-80g@x,free=8", engines=("vllm",))
    first = busy.options[0]
    assert first.layout.cards == 1 and first.free_now


def test_bad_requests_raise_typed_errors():
    with pytest.raises(PlanError):
        _plan("meta-llama__Meta-Llama-3.1-8B", "1x1xh100-80g", context_tokens=0)
    with pytest.raises(ClusterSpecError):
        parse_cluster("2x8xnot-a-gpu")
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1x1xh100-80g", context_tokens=10**7)
    assert not result.options and result.rejected[0].rule == "context-limit"


def test_counts_add_up():
    result = _plan("meta-llama__Meta-Llama-3.1-70B", "2x8xh100-80g@ib0 + 1x4xl40s-48g", context_tokens=8192)
    assert result.considered == len(result.options) + sum(result.pruned.values())
    assert result.to_dict()["options"][0]["per_card"]["total"] > 0


def test_sglang_lower_bound_follows_a_static_share_above_its_default():
    """The early weights-only refusal bounds SGLang's share at 0.95, or the user's mem_fraction_static if higher.

    DeepSeek-R1-Distill-Qwen-32B's bf16 weights (61.03 GiB) take 0.954 of a 64 GiB card: at 0.97 the
    static share of the 63.5 GiB free after the CUDA context (61.60 GiB) holds them and 1,024 tokens of
    KV (0.25 GiB); a 0.95 bound refused it unevaluated.
    """
    spec = "1x1xh100:64GiB"
    model = "deepseek-ai__DeepSeek-R1-Distill-Qwen-32B"
    roomy = _plan(model, spec, context_tokens=1024, engines=("sglang",), mem_fraction_static=0.97)
    assert roomy.options and "--mem-fraction-static 0.97" in roomy.options[0].evaluation.command
    default = _plan(model, spec, context_tokens=1024, engines=("sglang",))
    assert not default.options and default.pruned == {"memory-lower-bound": 1}


def test_kimi_on_two_h200_nodes_at_long_context_runs_tp8_with_dcp8():
    """Kimi-K2.5 at 64 × 65,536 tokens: tp 8 alone keeps the whole latent on every card (274.5 GiB, refused);
    vLLM's ``-dcp 8`` keeps 34.3 GiB a card (Moonshot's and vLLM's TP8 on one H200 node), two copies on the two
    nodes, decoding faster than the pipeline of eight it replaces (main ranked vLLM pp8 first)."""
    result = _plan("moonshotai__Kimi-K2.5", "2x8xh200-141g", context_tokens=65_536, concurrency=64)
    best = result.options[0]
    assert (best.engine, best.layout.parallel, best.layout.cards) == ("vllm", "tp8 dcp8 ep8", 8)
    assert best.replicas == 2
    assert "--tensor-parallel-size 8 --decode-context-parallel-size 8" in best.evaluation.command
    assert best.evaluation.cards[0].kv_cache == 64 * 8_192 * 70_272
    piped = [o for o in result.options if o.layout.pp == 8 and o.layout.tp == 1]
    assert piped and best.speed.decode_estimate_tokens_per_s > max(o.speed.decode_estimate_tokens_per_s for o in piped)
    # tp 8 without dcp is offered by none of the options
    assert not any(o.engine == "vllm" and o.layout.tp == 8 and o.layout.dcp == 1 for o in result.options)
