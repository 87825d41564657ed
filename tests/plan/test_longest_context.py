"""The longest context a memory refusal would hold: the engine's own figure, at the asked concurrency."""

from __future__ import annotations

from dataclasses import replace

from support.corpus import shape_of

from explorer.engines.common import PlanRequest
from explorer.engines.registry import engine_named
from explorer.plan.longest_context import full_offload_context, refusal_context
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster

LLAMA_8B = "meta-llama__Meta-Llama-3.1-8B"
KVPLAN = PlanRequest(context_tokens=131072, gpu_memory_utilization=0.92)


def _refusal(result, engine):
    return next(x for x in result.rejected if x.engine == engine and x.rule == "memory")


def test_one_sequence_is_vllms_own_estimate():
    """4,936.8 MiB of KV room at 128 KiB a token: 39,494 tokens, 39,488 in blocks of 16 (see the module docstring)."""
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x1xl4-24g"), KVPLAN, suggest=False)
    refusal = _refusal(result, "vllm")
    assert refusal.max_context == refusal.option.evaluation.max_context_tokens == 39_488


def test_two_sequences_halve_it_block_by_block():
    """Two sequences share the 4,936.8 MiB: each may hold 19,747 tokens, 19,744 in whole blocks of 16
    (19,745 tokens take 1,235 blocks each: 2 × 19,760 × 128 KiB = 4,940 MiB, too much)."""
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x1xl4-24g"), replace(KVPLAN, concurrency=2), suggest=False)
    refusal = _refusal(result, "vllm")
    assert refusal.max_context == 19_744
    assert refusal_context(shape_of(LLAMA_8B), refusal, replace(KVPLAN, concurrency=2)) == 19_744


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
