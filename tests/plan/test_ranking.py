"""Ranking: the seed's order, independent of input order."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from support.corpus import shape_of

from explorer.engines.common import PlanRequest
from explorer.plan.planner import plan
from explorer.plan.ranking import quality, rank
from explorer.sources.shipped import parse_cluster


def test_quality_rises_to_the_cap_then_falls():
    assert quality(4.5, cpu=False) < quality(8.5, cpu=False)
    assert quality(16, cpu=False) == 8.6 - (16 - 8.6) * 0.25
    assert quality(8.5, cpu=False) > quality(16, cpu=False)
    assert quality(8.5, cpu=True) < quality(5.8, cpu=True)  # past 5.8 on the CPU
    assert quality(16, cpu=True) == 5.8 - (16 - 5.8) * 0.25 < quality(5.0, cpu=True)


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
