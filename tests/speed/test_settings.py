"""explorer.speed.settings: the share of a CPU's nominal memory bandwidth its threads reach (issue 26)."""

from __future__ import annotations

import pytest

from explorer.sources.shipped import parse_cluster
from explorer.speed.settings import HOST_REACH, host_family, host_reach, host_reach_note, node_host_bandwidth


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("apple-m2-max", "apple-max"),  # a CPU of data/cpus.csv
        ("m2-ultra-192g", "apple-ultra"),  # a unified-memory class of data/gpus.csv
        ("apple-m4-max", "apple-max"),
        ("apple-m2", "apple-m2"),  # the base and Pro chips' CPUs are not a wide-bus family
        ("m4-pro-48g", "m4-pro-48g"),
        ("epyc-9175f-2s", "epyc-9175f-2s"),
    ],
)
def test_the_family_of_a_cpu_or_a_chip(name, family):
    assert host_family(name) == family


def test_apple_max_and_ultra_cpus_reach_half_their_bus_and_others_all():
    # fitted on the 24-core M2 Ultra CPU row (27 tok/s of Mistral-7B Q8_0, 2.13 × fast at 800 GB/s × 0.6)
    assert HOST_REACH == {"apple-max": 0.5, "apple-ultra": 0.5}
    assert host_reach("apple-m2-ultra") == host_reach("m1-max-64g") == 0.5
    assert host_reach("epyc-9654") == host_reach("epyc-9175f-2s") == host_reach("rpi5") == 1.0


@pytest.mark.parametrize(
    ("spec", "bytes_per_s"),
    [
        ("1x1xm2-max-64g", 200_000_000_000),  # the chip's 400 GB/s × 0.5
        ("1xcpu-192g,cpu=apple-m2-ultra", 400_000_000_000),  # 800 × 0.5
        ("1xcpu-192g,cpu=apple-m2-ultra,bw=300", 300_000_000_000),  # stated: taken as measured
        ("1xcpu-64g,cpu=epyc-9654", 460_800_000_000),  # 12 × DDR5-4800 × 8 B, all of it
        ("1xcpu-64g", None),  # unnamed: the settings' default
    ],
)
def test_the_node_host_bandwidth_is_the_nominal_figure_times_the_reach(spec, bytes_per_s):
    assert node_host_bandwidth(parse_cluster(spec).nodes[0]) == bytes_per_s


def test_a_plan_read_below_the_nominal_says_so():
    note = host_reach_note(parse_cluster("1xcpu-192g,cpu=apple-m2-ultra").nodes[0])
    assert note is not None and "50% of its nominal 800 GB/s (400 GB/s)" in note and "bw=" in note
    assert host_reach_note(parse_cluster("1xcpu-64g,cpu=epyc-9654").nodes[0]) is None
    assert host_reach_note(parse_cluster("1xcpu-64g,cpu=apple-m2-ultra,bw=300").nodes[0]) is None
    assert host_reach_note(parse_cluster("1xcpu-64g").nodes[0]) is None
