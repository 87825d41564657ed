"""Ranking: tiers first, then the goal; the seed's order inside a tier, independent of input order."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.corpus import shape_of

from explorer.artifacts.offer import fallback_artifacts, native_gguf, original_artifact, what_if_artifact
from explorer.engines.options import PLACEMENTS
from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.plan.ranking import (
    CPU_QUALITY_CAP_BITS,
    GOALS,
    PUBLISHED_PERPLEXITY,
    QUALITY_CAP_BITS,
    at_the_brim,
    cards_spent,
    outserves,
    precision_score,
    quality,
    queue_or_hold,
    rank,
    whole_bits,
)
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.shipped import parse_cluster


def test_quality_rises_to_the_cap_then_falls():
    assert quality(4.5, cpu=False) < quality(8.5, cpu=False)
    assert quality(16, cpu=False) == 8.6 - (16 - 8.6) * 0.25
    assert quality(8.5, cpu=False) > quality(16, cpu=False)
    assert quality(8.5, cpu=True) < quality(5.8, cpu=True)  # past 5.8 on the CPU
    assert quality(16, cpu=True) == 5.8 - (16 - 5.8) * 0.25 < quality(5.0, cpu=True)


def test_the_caps_sit_where_the_published_perplexity_stops_moving():
    """llama-quantize's figures on Llama-3-8B (8,030,261,248 weights): bits = GiB × 2³⁰ × 8 / weights."""
    llama3 = {
        name: (gib * 2**30 * 8 / 8_030_261_248, dppl)
        for name, gib, dppl, on in PUBLISHED_PERPLEXITY
        if on == "Llama-3-8B"
    }
    bits, dppl = llama3["Q8_0"]  # 7.96 GiB → 8.51 bits, +0.0026: as good as 16 bits (F16 is +0.0020 over F32)
    assert round(bits, 2) == 8.51 and bits < QUALITY_CAP_BITS < 16 and dppl < 0.01
    assert all(b < QUALITY_CAP_BITS for b, _ in llama3.values())  # every mix counts its bits up to the cap
    below_cpu = [n for n, (b, _) in llama3.items() if b <= CPU_QUALITY_CAP_BITS]
    assert max(below_cpu, key=lambda n: llama3[n][0]) == "Q5_K_M"  # 5.70 bits, +0.0569: the best a CPU ranks up
    assert llama3["Q4_K_M"] == (4.58 * 2**30 * 8 / 8_030_261_248, 0.1754)


OPTIONS = plan(
    shape_of("meta-llama__Meta-Llama-3.1-70B"),
    parse_cluster("2x8xh100-80g@ib0 + 1x4xl40s-48g + 1x8xa100-80g"),
    PlanRequest(context_tokens=8192, engines=("vllm", "sglang")),
).options


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_ranking_ignores_input_order(seed):
    shuffled = list(OPTIONS)
    random.Random(seed).shuffle(shuffled)
    assert [o.label for o in rank(shuffled)] == [o.label for o in OPTIONS]


# --- tiers and goals (issue 13 §1, issue 15 item 1) ---------------------------------------------------------------


def test_whole_bits_counts_the_nominal_bits():
    # Q8_0 8.5 and fp8 with 128 × 128 block scales 8.03 are both eight bits; Q4_K_M 4.89 and AWQ 4.25 are four
    assert [whole_bits(b) for b in (8.5, 8.03, 16.0, 4.89, 4.25, 6.5625)] == [8, 8, 16, 4, 4, 6]


def _llama70b(spec, quants, goal):
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    artifacts = [what_if_artifact(shape, q) for q in quants]
    return plan(shape, parse_cluster(spec), PlanRequest(), artifacts=artifacts, goal=goal)


@pytest.mark.parametrize("goal", GOALS)
def test_full_rpc_offload_ranks_above_a_one_card_partial_offload(goal):
    """70B at Q4_K_M is 42.5 GB (39.6 GiB): one RTX 4090 (23.5 GiB usable) keeps 37 of 80 layers on the CPU
    (2.7 tok/s); two of them over RPC hold every layer (13.8 tok/s). gpustack's order: RPC › partial › CPU."""
    result = _llama70b("2x1xrtx4090-24g@eth", ("Q4_K_M",), goal)
    places = [o.placement for o in result.options]
    assert places == ["rpc", "host-offload", "cpu"]
    assert result.options[0].layout.rpc and result.options[0].evaluation.layers_on_host == 0
    assert result.options[1].evaluation.layers_on_host >= 30


@pytest.mark.parametrize("goal", GOALS)
def test_a_partial_offload_ranks_below_a_full_offload_under_every_goal(goal):
    """On one RTX 4090, Q4_K_M (39.6 GiB) leaves layers on the CPU; IQ2_XS (2.31 bits, about 19 GiB) holds every
    layer. The fewest-cards goal would prefer four bits to two, but the tier comes first."""
    result = _llama70b("1x1xrtx4090-24g", ("Q4_K_M", "IQ2_XS"), goal)
    first, second = result.options[0], result.options[1]
    assert first.precision == "IQ2_XS" and first.tier == 1
    assert second.precision == "Q4_K_M" and second.placement == "host-offload"


PLANS = [
    plan(shape_of(name), parse_cluster(spec), PlanRequest(context_tokens=ctx), artifacts=arts)
    for name, spec, ctx, arts in (
        ("meta-llama__Meta-Llama-3.1-70B", "2x8xh100-80g@ib0 + 1x2xl40s-48g + 1x1xrtx4090-24g", 32768, None),
        (
            "meta-llama__Meta-Llama-3.1-70B",
            "1x2xl40s-48g",
            32768,
            [original_artifact(shape_of("meta-llama__Meta-Llama-3.1-70B"))]
            + [what_if_artifact(shape_of("meta-llama__Meta-Llama-3.1-70B"), q) for q in ("int4-awq", "Q4_K_M")],
        ),
        ("meta-llama__Meta-Llama-3.1-405B", "2x8xh100-80g@ib0", 4096, None),
    )
]


def _figure(goal, o):
    sp = o.speed
    return {
        "fastest": sp.decode_estimate_tokens_per_s,
        "throughput": o.aggregate_decode_tokens_per_s[1],
        "cost": -(sp.cost_per_million_tokens or 0.0),
        "longest-context": o.evaluation.max_context_tokens,
    }.get(goal)


@pytest.mark.parametrize("goal", GOALS)
@pytest.mark.parametrize("index", range(len(PLANS)))
def test_goals_reorder_within_tiers_but_never_across(goal, index):
    ranked = rank(PLANS[index].options, goal)
    order = [PLACEMENTS.index(o.placement) for o in ranked]
    assert order == sorted(order), "a lower tier above a higher one"
    for tier in set(order):
        inside = [o for o in ranked if PLACEMENTS.index(o.placement) == tier]
        figures = [_figure(goal, o) for o in inside]
        if goal == "fewest-cards":
            keys = [(not o.runs_as_printed, cards_spent(o)) for o in inside]
            assert keys == sorted(keys)
        elif goal != "cost":
            assert figures == sorted(figures, reverse=True)


def test_cost_ranks_priced_options_cheapest_first_and_unpriced_last():
    ranked = [o for o in rank(PLANS[0].options, "cost") if o.tier == 1]
    costs = [o.speed.cost_per_million_tokens for o in ranked]
    priced = [c for c in costs if c is not None]
    assert priced == sorted(priced) and costs[: len(priced)] == priced


def test_same_cards_and_speed_prefer_the_serving_engines():
    """Qwen3-32B bf16 (65.5 GB) on one H100: vLLM and llama.cpp both decode at about 31 tok/s (the same bytes
    read a token); the serving engines come first, then llama.cpp (headroom no longer decides it)."""
    result = plan(shape_of("Qwen__Qwen3-32B"), parse_cluster("1x1xh100-80g"), PlanRequest())
    assert [o.engine for o in result.options if o.tier == 1][:3] == ["vllm", "sglang", "llamacpp"]


# --- issue 24: the CPU's precision order, near-equal precisions ------------------------------------------------------


def test_precision_score_compares_real_bits_under_the_cap_and_whole_bits_only_between_near_equal_ones():
    # CPU, cap 5.8: Q5_K_M 5.70 is in the cap's whole bit: 5.8; Q6_K 6.57 is past it: 5.8 - 0.77 × 0.25 = 5.6075;
    # Q8_0 8.5: 5.8 - 2.7 × 0.25 = 5.125; Q4_K_M 4.85: the middle of its whole bit, 4.5
    cpu = {name: precision_score(bits, cpu=True) for name, bits in (("Q5_K_M", 5.7), ("Q6_K", 6.57), ("Q8_0", 8.5),
                                                                      ("Q4_K_M", 4.85))}  # fmt: skip
    assert cpu == pytest.approx({"Q5_K_M": 5.8, "Q6_K": 5.6075, "Q8_0": 5.125, "Q4_K_M": 4.5})
    # GPU, cap 8.6: fp8 8.03 and Q8_0 8.5 are near-equal (both 8.6); AWQ 4.25 and Q4_K_M 4.85 too (both 4.5)
    assert precision_score(8.03, cpu=False) == precision_score(8.5, cpu=False) == 8.6
    assert precision_score(4.25, cpu=False) == precision_score(4.85, cpu=False) == 4.5
    # F16 past the cap: 8.6 - 7.4 × 0.25 = 6.75, above Q6_K's 6.5 (the seed: 6.75 › 6.6)
    assert precision_score(8.5, cpu=False) > precision_score(16, cpu=False) == 6.75 > precision_score(6.57, cpu=False)
    assert precision_score(6.57, cpu=False) > precision_score(4.85, cpu=False)
    assert precision_score(0.0, cpu=True) == 0.0


def test_the_cpu_ranks_q5_k_m_above_q6_k_above_q8_0_as_the_seed_did():
    """Issue 24: under the CPU's cap Q6_K and Q8_0 ranked above Q5_K_M; on an EPYC 9654 (cpu=NAME) they rank
    Q5_K_M › Q6_K › Q8_0 › Q4_K_M (the seed's quality: 5.7 › 5.61 › 5.13 › 4.85)."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    quants = ("Q8_0", "Q4_K_M", "Q6_K", "Q5_K_M")
    artifacts = [what_if_artifact(shape, q) for q in quants]
    result = plan(shape, parse_cluster("1xcpu-64g,cpu=epyc-9654"), PlanRequest(), artifacts=artifacts)
    assert [o.precision for o in result.options] == ["Q5_K_M", "Q6_K", "Q8_0", "Q4_K_M"]
    assert all(o.layout.cpu for o in result.options)


def test_a_partial_offload_is_not_at_the_brim_for_filling_its_card():
    """Gemma-4-26B, 64 sequences of 4,096 on one 4090: no layout keeps every layer on the card, and llama.cpp's
    -ngl takes the most layers that fit, so each precision fills the card as far as its layers pack: Q4_K_M with
    14 of 30 layers on the CPU needs 22.5 of 23.5 GiB (96 %), BF16 with 22 of them 22.1 (94 %). Held to 95 %, the
    BF16 conversion (1.2 tok/s a sequence) ranked first; held to the sequences alone, Q4_K_M (3.4) does."""
    shape = shape_of("google__gemma-4-26B-A4B")
    artifacts = [original_artifact(shape), what_if_artifact(shape, "Q4_K_M")]
    request = PlanRequest(context_tokens=4096, concurrency=64, engines=("llamacpp",))
    result = plan(shape, parse_cluster("1x1xrtx4090-24g"), request, artifacts=artifacts)
    first, bf16 = result.options[0], next(o for o in result.options if o.precision == "BF16")
    assert (first.precision, first.placement, first.evaluation.layers_on_host) == ("Q4_K_M", "host-offload", 14)
    assert first.per_card.total * 100 > 95 * first.per_card.usable and not at_the_brim(first)
    assert bf16.evaluation.layers_on_host == 22 and result.options.index(bf16) == 1
    assert first.speed.decode_estimate_tokens_per_s > 2.5 * bf16.speed.decode_estimate_tokens_per_s


def test_an_eight_bit_checkpoint_with_16_bit_embeddings_is_near_equal_to_q8_0():
    """Llama-3.1-8B's fp8 checkpoint keeps embed_tokens and lm_head (2 × 128,256 × 4,096 = 1.05 B of 8.03 B
    weights) in bf16: (6.98 × 8 + 1.05 × 16) / 8.03 = 9.05 bits a weight, past the cap. Scored by its average,
    8.6 - 0.45 / 4 = 8.49, it ranked below Q8_0 (8.5 bits, 8.6), and llama.cpp (45.9 tok/s) came first on a 4090
    at 32k; classed by its nominal 8 bits it is the cap, and the faster vLLM (47.3) does. On the CPU, Q6_K's
    nominal 6.5625 bits are past the cap: its real 6.57 score 5.6075."""
    assert precision_score(9.05, cpu=False) == 8.6 - 0.45 * 0.25  # the average alone
    assert precision_score(9.05, cpu=False, nominal_bits=8) == precision_score(8.5, cpu=False, nominal_bits=8.5) == 8.6
    assert precision_score(6.57, cpu=True, nominal_bits=6.5625) == pytest.approx(5.6075)
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    artifacts = [what_if_artifact(shape, "fp8"), what_if_artifact(shape, "Q8_0")]
    request = PlanRequest(context_tokens=32768, engines=("vllm", "llamacpp"))
    result = plan(shape, parse_cluster("1x1xrtx4090-24g"), request, artifacts=artifacts)
    first = result.options[0]
    assert first.engine == "vllm" and first.bits_per_weight == pytest.approx(9.05, abs=0.01)
    llama = next(o for o in result.options if o.engine == "llamacpp")
    assert first.speed.decode_estimate_tokens_per_s > llama.speed.decode_estimate_tokens_per_s


def test_q4_k_m_is_a_four_bit_precision_whatever_a_large_vocabulary_adds():
    """Qwen2.5-72B's Q4_K_M (bartowski's file: 47.4 GB) averages 5.16 bits a weight, its 152,064-token embeddings
    and half its V and down projections in Q6_K; Qwen's int4 AWQ 4.56. Classed by the average (whole 5: 5.5
    against 4.5) llama.cpp Q4_K_M (39.8 tok/s) ranked before vLLM int4 AWQ (48.1) on one H100 at 4k; classed by
    the nominal bits (4.89 and 4) both score 4.5, and the faster vLLM comes first."""
    shape = shape_of("Qwen__Qwen2.5-72B")
    assert precision_score(5.157, cpu=False, nominal_bits=4.89) == precision_score(4.562, cpu=False, nominal_bits=4)
    artifacts = [what_if_artifact(shape, "int4-awq"), what_if_artifact(shape, "Q4_K_M")]
    request = PlanRequest(context_tokens=4096, engines=("vllm", "llamacpp"))
    result = plan(shape, parse_cluster("1x1xh100-80g"), request, artifacts=artifacts)
    first = result.options[0]
    llama = next(o for o in result.options if o.engine == "llamacpp")
    assert (first.engine, first.precision, first.nominal_bits) == ("vllm", "int4 AWQ g128", 4)
    assert llama.bits_per_weight > 5 and llama.nominal_bits == pytest.approx(4.89)
    assert first.speed.decode_estimate_tokens_per_s > 1.15 * llama.speed.decode_estimate_tokens_per_s


def _queued_and_holding():
    """Llama-3.1-8B at 32,768 × 64 on 2 × H100 with bartowski's Q4_K_M: llama.cpp holds all 64 (886.8 tokens/s over
    the cluster); vLLM bf16 with an fp8 KV cache holds 27 a card, two replicas at 1,456.9 (728.5 each)."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    fallback = fallback_artifacts(
        shape, [original_artifact(shape)], shipped_checkpoints("meta-llama/Meta-Llama-3.1-8B")
    )
    request = PlanRequest(context_tokens=32768, concurrency=64)
    result = plan(shape, parse_cluster("1x2xh100-80g"), request, fallback=fallback, suggest=False)
    holding = next(o for o in result.options if not o.asked_sequences)
    queued = next(o for o in result.options if o.asked_sequences and o.engine == "vllm" and o.precision == "bf16")
    assert (holding.engine, queued.resident_sequences, queued.replicas) == ("llamacpp", 27, 2)
    return holding, queued


def test_a_queueing_candidate_ranks_above_holding_everyone_only_at_one_and_a_half_times_its_throughput():
    """1,456.9 / 886.8 = 1.64 ×: the candidate (27 a card, two replicas) ranks above llama.cpp holding all 64. At
    1,300 tokens/s (1.47 ×) holding everyone stays first; one replica (728.5) ranks below. The rule never lifts a
    candidate at one asked sequence, nor one without a speed estimate."""
    holding, queued = _queued_and_holding()
    assert holding.aggregate_decode_tokens_per_s[1] == pytest.approx(886.8, abs=0.05)
    assert queued.aggregate_decode_tokens_per_s[1] == pytest.approx(1456.9, abs=0.05)
    assert queue_or_hold(queued, holding) and rank([holding, queued]) == [queued, holding]
    one_replica = replace(queued, replicas=1)
    assert not queue_or_hold(one_replica, holding) and rank([one_replica, holding])[0] is holding
    slower = replace(queued, speed=replace(queued.speed, decode_aggregate_estimate_tokens_per_s=650.0))  # 2 × 650
    assert slower.aggregate_decode_tokens_per_s[1] / holding.aggregate_decode_tokens_per_s[1] == pytest.approx(
        1.466, abs=0.001
    )
    assert not queue_or_hold(slower, holding) and rank([slower, holding]) == [holding, slower]
    assert not queue_or_hold(replace(queued, asked_sequences=1), holding)
    assert not queue_or_hold(replace(queued, speed=None), holding)


def test_queueing_candidates_keep_their_tier_and_order_by_cluster_throughput():
    """A candidate that beats an option holding everyone goes just above it, one that beats none after them all, never
    into a lower tier (a layout with layers on the host stays in tier 2, under both)."""
    holding, queued = _queued_and_holding()
    offload = replace(holding, evaluation=replace(holding.evaluation, layers_on_host=15))
    assert offload.tier == 2
    one_replica = replace(queued, replicas=1)
    assert rank([offload, one_replica, holding, queued]) == [queued, holding, one_replica, offload]


def _gpt_oss_120b_on_8_h100(concurrency: int):
    shape = shape_of("openai__gpt-oss-120b")
    artifacts = [original_artifact(shape), native_gguf(shape, shipped_checkpoints("openai/gpt-oss-120b"))]
    request = PlanRequest(context_tokens=32768, concurrency=concurrency)
    return plan(shape, parse_cluster("1x8xh100-80g"), request, artifacts=artifacts, suggest=False).options


def test_many_users_lift_one_and_a_half_times_the_clusters_throughput_over_fewer_cards_a_copy():
    """gpt-oss-120b at 32,768 × 64 on 8 × H100: llama.cpp's published MXFP4 GGUF fits on 2 cards (pp 2), four
    copies decoding 3,803.6 tokens/s together; vLLM tp 4 ep 4 takes 4 cards, two copies at 6,639.4 (1.75 ×): the
    same eight cards serve the users 1.75 × faster, so vLLM ranks first. At one user fewest cards a copy rules
    again: llama.cpp on one card, eight copies."""
    options = _gpt_oss_120b_on_8_h100(64)
    first = options[0]
    llama = next(o for o in options if o.engine == "llamacpp")
    assert (first.engine, first.layout.tp, first.layout.ep, first.replicas) == ("vllm", 4, 4, 2)
    assert (llama.layout.pp, llama.replicas, llama.runs_as_printed) == (2, 4, True)
    assert first.aggregate_decode_tokens_per_s[1] == pytest.approx(6639.4, abs=0.05)
    assert llama.aggregate_decode_tokens_per_s[1] == pytest.approx(3803.6, abs=0.05)
    assert outserves(first, llama) and not outserves(llama, first)
    assert not outserves(
        replace(first, speed=replace(first.speed, decode_aggregate_estimate_tokens_per_s=2800.0)), llama
    )
    assert rank([llama, first]) == [first, llama]
    assert rank([llama, first], goal="fastest") == [first, llama]  # the goal's own order: 51.9 against 14.9
    one = _gpt_oss_120b_on_8_h100(1)[0]
    assert (one.engine, one.layout.cards, one.replicas) == ("llamacpp", 1, 8)
