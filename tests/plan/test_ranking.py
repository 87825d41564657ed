"""Ranking: the seed's order, independent of input order."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from support.corpus import shape_of

from explorer.engines.common import PlanRequest
from explorer.plan.planner import plan
from explorer.plan.ranking import CPU_QUALITY_CAP_BITS, PUBLISHED_PERPLEXITY, QUALITY_CAP_BITS, quality, rank
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
