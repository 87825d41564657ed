"""Manual pinning: overcommit detected and measured."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.common import PlanRequest
from explorer.errors import ManualSelectionError
from explorer.fleet.footprints import fleet_cards
from explorer.hardware.cluster import Cluster
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.plan.pinning import check_pinned
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue


def test_two_l40s_overcommit_for_a_70b():
    r = check_pinned(shape_of("meta-llama__Meta-Llama-3.1-70B"), parse_cluster("1x8xl40s-48g"), ["0", "1"])
    assert r.overcommitted
    card = r.option.per_card
    assert r.overcommit_bytes == card.total - card.usable > 0
    assert "overcommits" in r.message and "GiB" in r.message


def test_four_l40s_hold_it():
    r = check_pinned(shape_of("meta-llama__Meta-Llama-3.1-70B"), parse_cluster("1x8xl40s-48g"), ["0", "1", "2", "3"])
    assert not r.overcommitted and r.option.layout.tp == 4


def test_busy_pinned_card_is_reported():
    r = check_pinned(shape_of("meta-llama__Meta-Llama-3.1-8B"), parse_cluster("1x2xh100-80g,free=20GiB"), ["0"])
    assert not r.overcommitted and r.short_now_bytes > 0 and "free now" in r.message


def test_bad_pins_are_typed_errors():
    c = parse_cluster("2x8xh100-80g@ib0")
    s = shape_of("meta-llama__Meta-Llama-3.1-8B")
    with pytest.raises(ManualSelectionError, match="NODE:INDEX"):
        check_pinned(s, c, ["0"])
    with pytest.raises(ManualSelectionError, match="no node"):
        check_pinned(s, c, ["nope:0"])
    with pytest.raises(ManualSelectionError, match="twice"):
        check_pinned(s, c, ["h100-80g@ib0#0:1", "h100-80g@ib0#0:1"])


# --- what is free now: one figure for the planner, pinning and the fleet ------------------


def _one_node(**group) -> Cluster:
    return cluster_from_dict(
        {"nodes": [{"name": "box", "gpus": [{"class": "h100-80g", **group}]}]}, shipped_catalogue()
    )


def test_a_card_with_no_free_bytes_does_not_hold_it_now():
    """``free_bytes: 0`` is nothing free (it was read as "unknown", so the whole card: "54.4 GiB to spare")."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    cluster = _one_node(count=2, free_bytes=0)
    r = check_pinned(shape, cluster, ["0"])
    needed = r.option.evaluation.free_needed_bytes
    assert not r.overcommitted and r.short_now_bytes == needed > 0
    assert "free now" in r.message and "to spare" not in r.message
    # the planner and the fleet read the same figure
    assert not any(o.free_now for o in plan(shape, cluster, PlanRequest(engines=("vllm",)), speed=False).options)
    assert [c.usable_bytes for c in fleet_cards(cluster).cards] == [0, 0]


def test_pinning_a_busy_card_says_so():
    """``free_count: 1`` of 2: card 0 is free, card 1 is busy (a workload holds it)."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    cluster = _one_node(count=2, free_count=1)
    busy = check_pinned(shape, cluster, ["1"])
    assert not busy.overcommitted and busy.short_now_bytes == busy.option.evaluation.free_needed_bytes
    assert "box:1 is busy" in busy.message
    free = check_pinned(shape, cluster, ["0"])
    assert free.short_now_bytes == 0 and "to spare" in free.message
    both = check_pinned(shape, cluster, ["0", "1"])
    assert both.short_now_bytes > 0 and "box:1 is busy" in both.message
    assert [c.usable_bytes > 0 for c in fleet_cards(cluster).cards] == [True, False]
