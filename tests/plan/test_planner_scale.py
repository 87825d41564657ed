"""Scale: equal cards are counted, not enumerated (issue 14 item 13).

A node of 100,000 H100s offers the layouts an 8-card node does (the fewest cards, then 4 and 8: scale-ups
stop at :data:`explorer.engines.split_pool.SCALE_UP_CARDS`), with 100,000 // cards replicas each. How fast
that is, is a benchmark (``python -m explorer.bench.plan``), not a test.
"""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.engines.split_pool import scale_up_widths
from explorer.plan.planner import plan
from explorer.plan.ranking import cards_spent
from explorer.sources.shipped import parse_cluster

LLAMA_70B = "meta-llama__Meta-Llama-3.1-70B"


def test_scale_up_widths():
    assert scale_up_widths(2, 8) == [4, 8]
    assert scale_up_widths(2, 100_000) == [4, 8]
    assert scale_up_widths(3, 8) == [4, 8]
    assert scale_up_widths(2, 6) == [4, 6]  # the node's whole width within 8
    assert scale_up_widths(12, 16) == []  # past 8 cards the fewest is the only one-node layout
    assert scale_up_widths(8, 8) == []


@pytest.mark.parametrize("width", [10_000, 100_000])
def test_a_wide_node_plans_like_an_eight_card_node_with_more_replicas(width):
    shape, request = shape_of(LLAMA_70B), PlanRequest(context_tokens=32768)
    small = plan(shape, parse_cluster("1x8xh100-80g"), request)
    wide = plan(shape, parse_cluster(f"1x{width}xh100-80g"), request)
    # the same options and the same first; the order below it may differ, as a wide node leaves no card idle
    # (3 of 8 cards spend 4, 3 of 10,000 spend 4: ceil(10,000 / 3,333))
    assert wide.options[0].label == small.options[0].label
    by_label = {o.label: o for o in wide.options}
    assert sorted(by_label) == sorted(o.label for o in small.options)
    for a in small.options:
        b = by_label[a.label]
        if not a.layout.cpu:
            assert (a.replicas, b.replicas) == (8 // a.layout.cards, width // b.layout.cards)
        assert b.speed.decode_estimate_tokens_per_s == a.speed.decode_estimate_tokens_per_s


def test_twelve_thousand_nodes_count_replicas_of_whole_node_pairs():
    """405B bf16 (756 GiB) needs two 8-card nodes: 12,500 nodes on one fabric hold 6,250 copies of tp 8 × pp 2."""
    result = plan(
        shape_of("meta-llama__Meta-Llama-3.1-405B"),
        parse_cluster("12500x8xh100-80g@ib0"),
        PlanRequest(engines=("vllm",)),
    )
    whole = next(o for o in result.options if (o.layout.tp, o.layout.pp) == (8, 2))
    assert whole.replicas == 6_250
    # 2 nodes × 6 cards: a node has one slot of 6 (its other 2 cards hold none), so 6,250 copies as well;
    # it spends the 16 cards tp 8 × pp 2 does, so the whole-node layout (tensor-parallel in a node) ranks first
    six = next(o for o in result.options if o.layout.cards == 12)
    assert six.replicas == 6_250 and cards_spent(six) == cards_spent(whole) == 16
    assert result.options[0] is whole
