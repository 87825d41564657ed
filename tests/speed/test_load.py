"""Speed under load (explorer/speed/load.py): the continuous-batching mix, the largest batch within the targets
and the KV cache, replicas, cost and disaggregation, worked by hand on a replica whose decode step is a straight
line, then on a real dense model on one H100."""

from __future__ import annotations

import math

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.speed.load import ReplicaLoad, replica_load, size_option
from explorer.speed.workload import Workload


def line_step(batch: int) -> tuple[float, float, str]:
    """A decode step of 10 ms + 0.1 ms a sequence (the bound: 60 % of it)."""
    d = 0.010 + 0.0001 * batch
    return d, 0.6 * d, "memory bandwidth"


def replica(workload: Workload, *, capacity=400, prefill_s=0.050, chunk=8192, transfer=0.010, apart=True):
    return ReplicaLoad(workload=workload, capacity=capacity, prefill_s=prefill_s, prefill_bound_s=0.6 * prefill_s,
                       chunk_tokens=chunk, kv_transfer_s=transfer, disaggregates=apart, step=line_step)  # fmt: skip


CHAT = Workload(users=1000, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050)


def test_batch_sweep_mixes_the_new_prompts_prefill_into_each_step():
    """TPOT(B) = d(B) + (B / A) × p = 10 + 0.1 B + (B / 500) × 50 ms = 10 + 0.2 B ms;
    TTFT(B) = (⌈2000 / 8192⌉ × d(B) + p) × (1 + ρ / (2(1 − ρ))), ρ = (B / 500) × 2000 / 8192."""
    load = replica(CHAT)
    for batch, tpot_ms in ((1, 10.2), (50, 20.0), (100, 30.0), (200, 50.0), (400, 90.0)):
        assert load.at(batch).tpot_s == pytest.approx(tpot_ms / 1e3)
    # B = 200: service 30 + 50 = 80 ms; ρ = 0.4 × 0.244140625 = 0.09765625; × (1 + 0.09765625 / 1.8046875)
    assert load.at(200).ttft_s == pytest.approx(0.080 * (1 + 0.09765625 / 1.8046875))
    assert load.at(200).ttft_s == pytest.approx(0.08433, abs=1e-5)
    assert load.at(200).decode_step_bound_s == pytest.approx(0.6 * 0.030)


def test_the_tpot_target_binds_at_200_and_the_kv_cache_at_150():
    """10 + 0.2 B ≤ 50 ms: B ≤ 200 (TTFT 84 ms is within 1 s); a KV cache of 150 sequences stops it first."""
    assert replica(CHAT).largest_batch() == 200
    assert size_option(replica(CHAT), 1).binding == "tpot target"
    kv_bound = replica(CHAT, capacity=150)
    assert kv_bound.largest_batch() == 150
    assert size_option(kv_bound, 1).binding == "memory"


def test_a_workload_that_needs_replicas_and_its_cost():
    """1,000 users over replicas of at most 200: 5 replicas of 200, each TPOT 50 ms and TTFT 84.33 ms, so
    1,000 / (0.08433 + 500 × 0.050) = 39.866 requests a second; at $2 a card-hour: $10 an hour for
    39.866 × 500 = 19,933 tokens a second, 10 / (19,933 × 3,600) × 10⁶ = $0.1394 per million tokens."""
    sized = size_option(replica(CHAT, apart=False), 1, usd_per_gpu_hour=2.0)
    assert (sized.mode, sized.replicas, sized.cards, sized.point.batch) == ("aggregated", 5, 5, 200)
    ttft = 0.080 * (1 + 0.09765625 / 1.8046875)
    assert sized.requests_per_s == pytest.approx(1000 / (ttft + 500 * 0.050))
    assert sized.usd_per_hour == 10.0
    assert sized.usd_per_million_tokens(500) == pytest.approx(10 / (sized.requests_per_s * 500 * 3600) * 1e6)
    assert sized.usd_per_million_tokens(500) == pytest.approx(0.1394, abs=1e-4)


def test_a_request_rate_spreads_over_replicas_at_the_least_batch_that_holds_it():
    """10 requests a second; a replica at B = 200 holds 200 / (0.08433 + 25) = 7.973: 2 replicas of 5 each.
    B = 51: TTFT (15.1 + 50) × (1 + ρ/(2(1 − ρ))), ρ = 0.102 × 0.244 = 0.0249 → 65.93 ms; TPOT 20.2 ms;
    51 / (0.06593 + 10.1) = 5.017 ≥ 5, while B = 50 gives 50 / (0.06581 + 10) = 4.967."""
    workload = Workload(rate=10.0, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050)
    sized = size_option(replica(workload, apart=False), 1)
    assert (sized.replicas, sized.point.batch) == (2, 51)
    assert sized.requests_per_s == 10.0


def test_disaggregation_wins_for_long_prompts_and_short_answers():
    """Prompts of 8,000 tokens (p = 200 ms), answers of 100, 400 users, TPOT 50 ms, TTFT 1 s.

    Aggregated: TPOT = 10 + 0.1 B + (B / 100) × 200 = 10 + 2.1 B ms ≤ 50: B ≤ 19, so ⌈400 / 19⌉ = 22 cards.
    Apart: decode alone, 10 + 0.1 B ≤ 50: B = 400, one decode replica. A prefill replica may be loaded to
    ρ = 2w / (1 + 2w), w = (1 − 0.2 − 0.01) / 0.2 = 3.95: ρ = 0.88764, its TTFT 0.2 × (1 + 3.95) + 0.01 = 1.0 s;
    400 / (1.0 + 100 × 0.050) = 66.67 requests a second need ⌈66.67 × 0.2 / 0.88764⌉ = 16 prefill replicas:
    17 cards."""
    long = Workload(users=400, prompt_tokens=8000, answer_tokens=100, ttft_s=1.0, tpot_s=0.050)
    load = replica(long, prefill_s=0.200)
    assert load.largest_batch() == 19
    assert load.largest_batch(disaggregated=True) == 400
    assert load.prefill_load() == pytest.approx(7.9 / 8.9)
    sized = size_option(load, 1)
    assert (sized.mode, sized.replicas, sized.prefill_replicas, sized.cards) == ("disaggregated", 1, 16, 17)
    assert sized.ttft_s == pytest.approx(1.0)
    assert sized.requests_per_s == pytest.approx(400 / 6.0)
    assert size_option(replica(long, prefill_s=0.200, apart=False), 1).cards == 22  # an engine that cannot split


def test_an_unmet_target_says_by_how_much():
    """TPOT 5 ms: one sequence already takes 10 + 0.2 = 10.2 ms, 2.04 × the target."""
    strict = Workload(users=10, prompt_tokens=2000, answer_tokens=500, tpot_s=0.005)
    sized = size_option(replica(strict), 1)
    assert not sized.met and (sized.replicas, sized.cards, sized.requests_per_s) == (1, 1, 0.0)
    assert sized.shortfall["tpot"] == pytest.approx(2.04)


def test_prompts_faster_than_the_chunks_take_them_never_meet_ttft():
    """Answers of 1 token, prompts of 2,000, chunks of 512: at B = 1, ρ = (1 / 1) × 2000 / 512 > 1: the prompts
    queue without end, at any batch."""
    flood = Workload(users=10, prompt_tokens=2000, answer_tokens=1, ttft_s=1.0)
    load = replica(flood, chunk=512, apart=False)
    assert math.isinf(load.at(1).ttft_s)
    assert not size_option(load, 1).met


def test_llama_8b_on_one_h100_by_hand():
    """Llama-3.1-8B, bf16, vLLM on one H100 (3.35 TB/s, 989.4 TFLOPs), prompts 2,000 and answers 500.

    Decode bound at B = 1, mean context 2,250: weights read (8.03 B params − the 0.525 B input embedding, a row
    gather) × 2 bytes = 15.01 GB, plus KV 32 layers × 8 heads × 128 × 2 × 2 bytes = 131,072 bytes a token ×
    2,250 = 0.295 GB: 15.31 GB / 3.35 TB/s = 4.57 ms. Prefill bound: 2 × 7.505 B × 2,000 = 30.0 TFLOP plus
    attention 2 × 32 × 256 × 32 layers × 2,000 × 2,001 / 2 = 1.05 TFLOP over 989.4 TFLOPs: 31.4 ms.
    vLLM's chunk on an H100: 8,192 tokens; the KV cache holds what the plan says at 2,500 tokens."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    workload = Workload(users=200, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050)
    request = PlanRequest(context_tokens=workload.context_tokens, engines=("vllm",))
    option = plan(shape, parse_cluster("1x1xh100-80g"), request, model_ref="m", speed=False, suggest=False).options[0]
    load = replica_load(option, shape, workload, request)
    assert load is not None and load.capacity == option.evaluation.max_concurrency > 100
    assert load.chunk_tokens == 8192 and load.disaggregates
    assert load.at(1).decode_step_bound_s == pytest.approx(4.57e-3, rel=0.01)
    assert load.prefill_bound_s == pytest.approx(31.4e-3, rel=0.02)
    steps = [load.at(b).tpot_s for b in (1, 16, 64, 128)]
    assert steps == sorted(steps)  # a user's token slows as the batch grows
    rates = [load.at(b).batch / load.at(b).tpot_s for b in (1, 16, 64, 128)]
    assert rates == sorted(rates)  # while the replica's tokens a second rise
    best = load.largest_batch()
    assert load.at(best).tpot_s <= 0.050 < load.at(best + 1).tpot_s


def test_a_p90_ttft_target_is_checked_at_the_p90_prompts_prefill():
    """The p90 prompt (here 4,000 tokens, prefill 100 ms) rides ⌈4000 / 8192⌉ = 1 step and waits behind mean
    prompts: TTFT(200) = d(200) + 100 + (30 + 50) × ρ / (2(1 − ρ)) ms, ρ = 0.09765625 as before."""
    w = Workload(users=1000, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050,
                 prompt_p90_tokens=4000, ttft_percentile="p90")  # fmt: skip
    load = ReplicaLoad(workload=w, capacity=400, prefill_s=0.050, prefill_bound_s=0.030, chunk_tokens=8192,
                       kv_transfer_s=0.010, disaggregates=True, step=line_step, ttft_prefill_s=0.100)  # fmt: skip
    rho = 0.09765625
    assert load.at(200).ttft_s == pytest.approx(0.030 + 0.100 + 0.080 * rho / (2 * (1 - rho)))
    assert load.at(200).tpot_s == pytest.approx(0.050)  # the mean prompt still sets the TPOT
    # disaggregated: 1 s − 0.1 − 0.01 spare over the mean prefill 0.05: w = 17.8, ρ capped at 0.9
    assert load.prefill_load() == 0.9
    assert load.prefill_ttft_s(0.5) == pytest.approx(0.100 + 0.050 * 0.5 + 0.010)
