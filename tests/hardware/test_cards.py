"""Single cards of a node, and the roomiest ones counted rather than sorted where every free card is alike."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.hardware.cards import class_cards, node_cards, roomiest_cards, roomiest_class_cards
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.sources.shipped import parse_cluster, shipped_catalogue

GiB = 2**30


def _mixed_node():
    """Two RTX 4090s (positions 0, 1) then three RTX 3090s (2, 3, 4), one of each busy."""
    node = {
        "name": "box",
        "gpus": [
            {"class": "rtx4090-24g", "count": 2, "free_count": 1},
            {"class": "rtx3090-24g", "count": 3, "free_count": 2},
        ],
    }
    return cluster_from_dict({"nodes": [node]}, shipped_catalogue()).nodes[0]


def test_class_cards_are_numbered_across_the_nodes_groups():
    node = _mixed_node()
    assert [c.name for c in class_cards(node, "rtx3090-24g")] == ["box:2", "box:3", "box:4"]
    assert [c.index for c in class_cards(node, "rtx3090-24g", 2)] == [0, 1]
    assert class_cards(node, "h100-80g") == []
    assert class_cards(node, "rtx4090-24g") == [c for c in node_cards(node) if c.gpu.name == "rtx4090-24g"]


def test_the_roomiest_of_a_wide_node_are_its_first_free_cards():
    """100,000 H100s, 99,998 free: the roomiest two are positions 0 and 1 (free cards come first by index)."""
    node = parse_cluster("1x100000xh100-80g,free=99998").nodes[0]
    picked = roomiest_class_cards(node, "h100-80g", 2)
    assert [c.position for c in picked] == [0, 1] and all(not c.busy for c in picked)


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 12), free=st.integers(0, 12), width=st.integers(1, 12), share=st.sampled_from([None, 0.5]))
def test_counted_roomiest_cards_are_the_sorted_ones(count, free, width, share):
    """Without per-card figures, counting the roomiest agrees with sorting every card."""
    free = min(free, count)
    spec = f"1x{count}xh100-80g,free={free}" + (f",free={share}" if share is not None else "")
    node = parse_cluster(spec).nodes[0]
    counted = roomiest_class_cards(node, "h100-80g", width)
    assert counted == roomiest_cards(class_cards(node, "h100-80g"), width)


def test_per_card_figures_are_sorted():
    node = {
        "name": "box",
        "gpus": [{"class": "h100-80g", "count": 4, "card_free_bytes": [10 * GiB, 70 * GiB, 30 * GiB, 70 * GiB]}],
    }
    box = cluster_from_dict({"nodes": [node]}, shipped_catalogue()).nodes[0]
    assert [c.position for c in roomiest_class_cards(box, "h100-80g", 3)] == [1, 3, 2]  # 70, 70 (by position), 30
