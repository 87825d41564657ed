"""Speed under load (explorer/speed/load.py): the continuous-batching mix, the largest batch within the targets
and the KV cache, replicas, cost and disaggregation, worked by hand on a replica whose decode step is a straight
line, then on a real dense model on one H100."""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.speed.load import ReplicaLoad, carrying_share, replica_load, size_option
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
    assert size_option(kv_bound, 1).binding == "KV capacity"


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


def test_tpot_p50_is_the_mean_and_p90_counts_the_prefill_chunks_a_user_meets():
    """Prompts of 2,000 tokens are one chunk of 8,192 (n = 1). At B = 200: s = (200 / 500) × 1 = 0.4 of the steps
    carry a prompt, each e = 0.4 × 50 / 0.4 = 50 ms longer than d = 30 ms; the mean 30 + 0.4 × 50 = 50 ms.
    A user's 500 steps meet X ~ Binomial(500, 0.4): p90 X = 200 + 1.2816 × √(500 × 0.4 × 0.6) = 214.039, so
    TPOT p90 = 30 + 50 × 214.039 / 500 = 51.404 ms. At B = 50: s = 0.1, d = 15, X = 50 + 1.2816 × √45 = 58.597:
    15 + 50 × 58.597 / 500 = 20.860 ms (mean 20.0)."""
    load = replica(CHAT)
    assert load.at(200).tpot_s == pytest.approx(0.050)
    assert load.at(200).tpot_p90_s == pytest.approx(0.051404, abs=1e-6)
    assert load.at(50).tpot_p90_s == pytest.approx(0.020860, abs=1e-6)
    assert load.at(50, disaggregated=True).tpot_p90_s == load.at(50, disaggregated=True).tpot_s  # no prefill mixed


def test_when_every_step_carries_a_chunk_the_tpot_does_not_spread():
    """Prompts of 20,000 tokens are n = ⌈20000 / 8192⌉ = 3 chunks; at B = 400, (400 / 500) × 3 = 2.4 ≥ 1: every
    step carries prefill, e = 0.8 × 50 = 40 ms, so p90 = mean = d + 40 = 50 + 40 = 90 ms. At B = 100:
    s = 0.2 × 3 = 0.6, e = 0.2 × 50 / 0.6 = 16.667 ms, mean 20 + 10 = 30 ms; p90 X = 300 + 1.2816 × √120
    = 314.039: 20 + 16.667 × 314.039 / 500 = 30.468 ms."""
    long = Workload(users=100, prompt_tokens=20_000, answer_tokens=500)
    load = replica(long)
    assert load.at(400).tpot_p90_s == pytest.approx(load.at(400).tpot_s) == pytest.approx(0.090)
    assert load.at(100).tpot_s == pytest.approx(0.030)
    assert load.at(100).tpot_p90_s == pytest.approx(0.030468, abs=1e-6)


def test_a_p90_tpot_target_binds_at_a_smaller_batch():
    """TPOT p90 ≤ 50 ms: 10 + 0.2 B + 50 × 1.2816 × √(s (1 − s) / 500) with s = B / 500; B = 193 gives
    48.6 + 64.08 × √(0.386 × 0.614 / 500) = 48.6 + 1.395 = 49.995 ms, B = 194 gives 48.8 + 1.397 = 50.197 ms:
    the largest batch is 193 (200 at the mean), and the TPOT target binds."""
    p90 = replace(CHAT, tpot_percentile="p90")
    load = replica(p90)
    assert load.largest_batch() == 193
    assert load.at(193).tpot_p90_s == pytest.approx(0.049995, abs=2e-6)
    assert size_option(load, 1).binding == "tpot target"
    assert replica(CHAT).largest_batch() == 200


def test_users_past_the_kv_cache_queue_and_their_ttft_grows_by_the_wait():
    """300 users on a replica that holds 150: 150 run, 150 wait. At B = 150: TPOT = 10 + 15 + 15 = 40 ms;
    ρ = (150 / 500) × 2000 / 8192 = 0.0732421875, TTFT = (25 + 50) × (1 + ρ / (2(1 − ρ))) = 77.963 ms; a running
    request takes S = 0.077963 + 500 × 0.040 = 20.0780 s, and the queue adds S × (300 − 150) / 150 = S:
    TTFT 20.1559 s. The sizing spreads the users over 2 replicas of 150 instead, and says what one alone does."""
    crowd = Workload(users=300, prompt_tokens=2000, answer_tokens=500)
    load = replica(crowd, capacity=150, apart=False)
    rho = 0.0732421875
    ttft = 0.075 * (1 + rho / (2 * (1 - rho)))
    alone = load.serve(300)
    assert (alone.batch, alone.queued) == (150, 150)
    assert alone.ttft_s == pytest.approx(ttft + (ttft + 20.0), rel=1e-9)
    assert alone.ttft_s == pytest.approx(20.1559, abs=1e-4)
    assert load.serve(100).queued == 0 and load.serve(100).ttft_s == load.at(100).ttft_s
    assert math.isinf(replica(crowd, capacity=0).serve(1).ttft_s)  # a KV cache that holds none: no end
    sized = size_option(load, 1)
    assert (sized.replicas, sized.binding) == (2, "KV capacity")
    assert sized.to_dict(500)["one_replica"] == {"batch": 150, "queued": 150, "ttft_s": 20.1559, "tpot_s": 0.04,
                                                 "binding": "KV capacity"}  # fmt: skip


def test_a_spread_of_answers_widens_the_p90_tpot():
    """Half the answers 100 tokens, half 900 (mean 500, as CHAT): at B = 200, s = 0.4, d = 30 ms, e = 50 ms. A
    100-step user meets a share of chunk steps with sd √(0.24 / 100) = 0.049, a 900-step one 0.0163; the p90 of
    their equal mix is the x where ½ Φ((x − 0.4) × 10 / √0.24) + ½ Φ((x − 0.4) × 30 / √0.24) = 0.9: x = 0.442106
    (bisected by hand to 6 places), so TPOT p90 = 30 + 50 × 0.442106 = 52.105 ms (51.404 with every answer 500)."""
    spread = replace(CHAT, answer_deciles=(100,) * 5 + (900,) * 5)
    x = carrying_share(0.4, spread.answer_deciles, 0.9)
    normal = NormalDist()
    assert (normal.cdf((x - 0.4) * 10 / 0.24**0.5) + normal.cdf((x - 0.4) * 30 / 0.24**0.5)) / 2 == pytest.approx(0.9)
    assert x == pytest.approx(0.442106, abs=1e-6)
    assert replica(spread).at(200).tpot_p90_s == pytest.approx(0.052105, abs=1e-6)
    assert replica(spread).at(200).tpot_s == replica(CHAT).at(200).tpot_s  # the mean does not move
    assert carrying_share(0.4, (500,) * 10, 0.9) == carrying_share(0.4, (500,), 0.9)


def test_prompt_deciles_set_the_chunks_a_prompt_is_prefilled_in():
    """Chunks of 2,048; half the prompts 1,000 tokens (1 chunk), half 3,000 (2): 1.5 chunks a prompt where the
    mean 2,000 alone is 1. At B = 100 (d = 20 ms, 0.2 prompts a step): s = 0.2 × 1.5 = 0.3 and e = 0.2 × 50 / 0.3
    = 33.33 ms, mean 20 + 10 = 30 ms either way; p90 x = 0.3 + 1.28155 × √(0.21 / 500) = 0.326264: 30.876 ms.
    With the mean prompt alone: s = 0.2, e = 50, x = 0.2 + 1.28155 × √(0.16 / 500) = 0.222925: 31.146 ms."""
    mixed = replace(CHAT, prompt_deciles=(1000,) * 5 + (3000,) * 5)
    load = replica(mixed, chunk=2048)
    assert load.at(100).tpot_s == pytest.approx(0.030)
    assert load.at(100).tpot_p90_s == pytest.approx(0.030876, abs=1e-6)
    assert replica(CHAT, chunk=2048).at(100).tpot_p90_s == pytest.approx(0.031146, abs=1e-6)


@given(
    share=st.floats(min_value=0.001, max_value=0.999),
    answers=st.lists(st.integers(min_value=1, max_value=100_000), min_size=2, max_size=10),
)
def test_the_mix_quantile_solves_its_equation(share, answers):
    """Whatever the answers, the share returned is the mix's 90th percentile (or 1, where even all the steps
    leave more than a tenth of the users above it), never below the share every user meets on average."""
    x = carrying_share(share, answers, 0.9)
    spread = (share * (1 - share)) ** 0.5
    mix = sum(NormalDist().cdf((x - share) * a**0.5 / spread) for a in answers) / len(answers)
    assert share <= x <= 1.0
    assert mix == pytest.approx(0.9, abs=1e-6) or (x == pytest.approx(1.0) and mix <= 0.9)
