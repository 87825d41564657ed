"""Manual pinning: overcommit detected and measured."""

from __future__ import annotations

import pytest

from conftest import shape_of

from explorer.errors import ManualSelectionError
from explorer.plan.pinning import check_pinned
from explorer.sources.shipped import parse_cluster


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
