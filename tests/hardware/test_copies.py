"""Counting copies of a layout from card counts: slots a node, nodes a fabric, free cards, MIG."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.hardware.cluster import default_host_ram_bytes
from explorer.hardware.copies import Census, class_runs, host_kinds, spanning_copies
from explorer.sources.shipped import parse_cluster
from explorer.units import GiB


def test_spanning_copies_worked_example():
    # 3 nodes with 2, 2 and 1 slots; copies span 2 nodes: k = 2 needs 4 and gets 2 + 2 + 1 = 5; k = 3 needs 6, gets 5
    assert spanning_copies([(2, 2), (1, 1)], 2) == 2
    assert spanning_copies([(1, 4)], 2) == 2  # 4 whole nodes, 2 a copy
    assert spanning_copies([(1, 3)], 2) == 1  # the third node alone is no copy
    assert spanning_copies([(5, 1)], 2) == 0  # one node never spans two
    assert spanning_copies([(4, 3)], 1) == 12


def _brute(slots: list[int], nodes: int) -> int:
    """Greedy: each copy takes a slot from the nodes with the most left (optimal for this problem)."""
    left, made = sorted(slots, reverse=True), 0
    while True:
        left.sort(reverse=True)
        if len(left) < nodes or left[nodes - 1] < 1:
            return made
        for i in range(nodes):
            left[i] -= 1
        made += 1


@settings(max_examples=200, deadline=None)
@given(slots=st.lists(st.integers(0, 6), min_size=1, max_size=8), nodes=st.integers(1, 4))
def test_spanning_copies_agrees_with_a_greedy_count(slots, nodes):
    assert spanning_copies([(s, 1) for s in slots], nodes) == _brute(slots, nodes)


def test_census_counts_one_node_layouts_on_every_node_of_the_class():
    cluster = parse_cluster("2x8xh100-80g@ib0 + 1x4xh100-80g + 1x8xa100-80g")
    census = Census(cluster)
    # tp2: 4 + 4 on the fabric's nodes, 2 on the stand-alone node; the A100s are another class
    assert census.copies("h100-80g", 1, 2) == 10
    assert census.copies("h100-80g", 1, 8) == 2
    assert census.copies("h100-80g", 2, 8) == 1  # only the two ib0 nodes may form a copy
    assert census.copies("h100-80g", 2, 4) == 2  # each ib0 node gives two halves: two copies of 2 × 4
    assert census.copies("a100-80g", 2, 8) == 0  # a node without a fabric never spans


def test_census_counts_free_cards_and_mig_slices():
    busy = Census(parse_cluster("1x8xh100-80g,free=3"))
    assert busy.copies("h100-80g", 1, 2) == 4
    assert busy.copies("h100-80g", 1, 2, needed_bytes=1) == 1  # 3 free cards hold one tp2 copy now
    half = Census(parse_cluster("1x8xh100-80g,free=0.5"))
    card = 85_520_809_984
    assert half.copies("h100-80g", 1, 1, needed_bytes=card // 2) == 8
    assert half.copies("h100-80g", 1, 1, needed_bytes=card // 2 + 1) == 0
    mig = Census(parse_cluster("2x7xa100-80g-mig-1g.10gb@ib0"))
    assert mig.copies("a100-80g-mig-1g.10gb", 1, 1) == 14
    assert mig.copies("a100-80g-mig-1g.10gb", 2, 1) == 0  # slices never span nodes


def test_census_caps_copies_by_host_ram():
    cluster = parse_cluster("1x8xl40s-48g,ram=256g")
    census = Census(cluster)
    assert census.copies("l40s-48g", 1, 1) == 8
    # a copy keeping 100 GiB on the host: 256 GiB hold two
    assert census.copies("l40s-48g", 1, 1, host_cap=lambda ram: ram // (100 * 2**30)) == 2


def test_a_census_of_a_huge_cluster_has_one_entry_a_make():
    census = Census(parse_cluster("12500x8xh100-80g@ib0"))
    assert len(census.kinds["h100-80g"]) == 1
    assert census.copies("h100-80g", 1, 2) == 50_000
    assert census.copies("h100-80g", 2, 8) == 6_250


def test_host_kinds_count_alike_nodes_together_first_node_of_each_kind():
    cluster = parse_cluster("2xcpu-512g + 2x8xh100-80g + 1xcpu-1024g")
    gpu_host = default_host_ram_bytes(cluster.nodes[2].gpu_memory_bytes)  # assumed: 2 x the node's 8 cards
    kinds = [(n.name, n.host_ram_bytes, many) for n, many in host_kinds(cluster)]
    assert kinds == [
        (cluster.nodes[0].name, 512 * GiB, 2),
        (cluster.nodes[2].name, gpu_host, 2),
        (cluster.nodes[4].name, 1024 * GiB, 1),
    ]
    # kept with the cluster: the second call is the same object, not a recount
    assert host_kinds(cluster) is host_kinds(cluster)


def test_class_runs_join_consecutive_alike_nodes_once_per_cluster():
    """12,500 alike nodes are one run; a node of other RAM, or holding the class at other positions (two L40S
    first), breaks the run, and the class's nodes after it start another."""
    big = parse_cluster("12500x8xh100-80g@ib0")
    (run,) = class_runs(big, "h100-80g")
    assert len(run.nodes) == 12_500 and run.nodes[-1].name == "h100-80g@ib0#12499"
    assert run.slots(2) == 4 and run.slots(8) == 1 and run.fabric == "ib0"
    assert class_runs(big, "h100-80g") is class_runs(big, "h100-80g")  # kept with the cluster
    assert class_runs(big, "a100-80g") == ()
    cluster = parse_cluster("2x8xh100-80g + 1x8xh100-80g,ram=256g + 3x8xh100-80g")
    assert [len(r.nodes) for r in class_runs(cluster, "h100-80g")] == [2, 1, 3]
    # a copy keeping 100 GiB on the host: the 256 GiB node takes 2 copies of one card, the others 8
    assert [r.slots(1, host_cap=lambda ram: ram // (100 * GiB)) for r in class_runs(cluster, "h100-80g")] == [8, 2, 8]
