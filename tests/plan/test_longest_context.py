"""The longest context a memory refusal would hold: the engine's own figure, at the asked concurrency."""

from __future__ import annotations

from dataclasses import replace

from support.corpus import shape_of

from explorer.engines.registry import engine_named
from explorer.engines.request import PlanRequest
from explorer.plan.longest_context import full_offload_context, refusal_context
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster

LLAMA_8B = "meta-llama__Meta-Llama-3.1-8B"
KVPLAN = PlanRequest(context_tokens=131072, gpu_memory_utilization=0.92)


def _refusal(result, engine):
    return next(x for x in result.rejected if x.engine == engine and x.rule == "memory")


def test_one_sequence_is_vllms_own_estimate():
    """The current release (0.26): 0.92 × torch's 22.05 GiB = 21,781,926,641 B, less the weights 16,060,522,496
    and their RoPE cache 33,554,432, the sampler's peak 15.5 × 256 × 128,256 = 508,919,808 and 0.1 GiB + 7 MiB × 2
    × 51 graphs + 0.25 GiB non-torch = 1,124,492,902: 4,054,437,003 B of KV room at 128 KiB a token, 30,933
    tokens, 30,928 in blocks of 16 (see the module docstring)."""
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x1xl4-24g"), KVPLAN, suggest=False)
    refusal = _refusal(result, "vllm")
    assert refusal.max_context == refusal.option.evaluation.max_context_tokens == 30_928


def test_two_sequences_halve_it_block_by_block():
    """Two sequences share the 4,054,437,003 B: 1,933 whole blocks of 16 × 128 KiB (2 MiB), 966 each, 15,456
    tokens (15,457 tokens take 967 blocks each: 1,934 blocks, one too many)."""
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x1xl4-24g"), replace(KVPLAN, concurrency=2), suggest=False)
    refusal = _refusal(result, "vllm")
    assert refusal.max_context == 15_456
    assert refusal_context(shape_of(LLAMA_8B), refusal, replace(KVPLAN, concurrency=2)) == 15_456


def test_the_published_l4_release_holds_near_forty_thousand():
    """vLLM 0.11 on an L4 at 0.92 with --max-num-seqs 128 logged 38,944 tokens (tests/data/engine_logs,
    vllm__llama-3.1-8b__L4__1); the same refusal under that release carries a figure within 5 % of it."""
    request = replace(KVPLAN, vllm_version="0.11.0", max_num_seqs=128)
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x1xl4-24g"), request, suggest=False)
    longest = _refusal(result, "vllm").max_context
    assert abs(longest - 38_944) <= 0.05 * 38_944 and longest % 16 == 0


def test_a_lower_bound_refusal_holds_nothing():
    result = plan(shape_of("meta-llama__Meta-Llama-3.1-70B"), parse_cluster("1x1xl4-24g"), PlanRequest(), suggest=False)
    lower = next(x for x in result.rejected if x.rule == "memory-lower-bound")
    assert lower.max_context == 0 and "GiB" in lower.reason


def test_a_partial_offload_says_where_every_layer_would_fit():
    shape = shape_of(LLAMA_8B)
    result = plan(shape, parse_cluster("1x1xl4-24g"), KVPLAN, suggest=False)
    offload = next(o for o in result.options if o.placement == "host-offload")
    longest = full_offload_context(shape, offload, KVPLAN)
    everything = offload.with_evaluation(replace(offload.evaluation, n_gpu_layers=-1))
    engine = engine_named("llamacpp")

    def fits(context):
        return engine.recheck(shape, everything, replace(KVPLAN, context_tokens=context), model_ref="m").fits

    assert 32_768 < longest < 131_072 and fits(longest) and not fits(longest + 1)
