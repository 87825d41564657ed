"""explorer.ui.cluster_form: the typed spec and the simple controls as one source of truth."""

from __future__ import annotations

import json

import pytest

from explorer.errors import ClusterSpecError
from explorer.hardware.cluster_dict import cluster_from_text
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.ui.cluster_form import (
    cluster_file_json,
    controls_refusal,
    describe_cluster,
    edit_first_gpu_term,
    first_gpu_term,
    host_ram_note,
)


def test_the_controls_read_the_first_gpu_term():
    t = first_gpu_term("1xcpu-512g + 2 x 8 x h100-80g@ib0,free=0.50,ram=2t + 1x4xl40s-48g")
    assert (t.index, t.nodes, t.gpus_per_node, t.gpu_class, t.fabric) == (1, 2, 8, "h100-80g", "ib0")
    assert t.free_fraction == 0.5 and t.ram_text == "2t" and t.ram_gib == 2048  # 2 TiB = 2,048 GiB
    assert first_gpu_term("1xcpu-256g + 1xuma-128g") is None


def test_a_control_edits_only_its_part_of_the_typed_spec():
    # the case: a typed 1x4xl40s-48g with Nodes set to 2 is 2x4xl40s-48g, never a preset's spec
    assert edit_first_gpu_term("1x4xl40s-48g", nodes=2) == "2x4xl40s-48g"
    typed = "1xcpu-512g + 2 x 8 x h100-80g@ib0,free=6,cpu=amx + 1x4xl40s-48g"
    assert (
        edit_first_gpu_term(typed, gpus_per_node=4) == "1xcpu-512g + 2 x 4 x h100-80g@ib0,free=6,cpu=amx + 1x4xl40s-48g"
    )
    assert edit_first_gpu_term(typed, free_fraction=0.75, ram_gib=1024) == (
        "1xcpu-512g + 2 x 8 x h100-80g@ib0,free=6,cpu=amx,free=0.75,ram=1024g + 1x4xl40s-48g"
    )
    assert edit_first_gpu_term("2x8xh100-80g@ib0,free=0.75,ram=512g", free_fraction=1.0, ram_gib=None) == (
        "2x8xh100-80g@ib0"
    )
    assert edit_first_gpu_term("2x8xh100-80g@ib0", fabric="") == "2x8xh100-80g"
    assert edit_first_gpu_term("2x8xh100-80g", fabric="roce") == "2x8xh100-80g@roce"
    assert edit_first_gpu_term("1xcpu-256g", gpu_class="l40s-48g") == "1x1xl40s-48g + 1xcpu-256g"


@pytest.mark.parametrize(
    "spec", ["1x4xl40s-48g", "2x8xh100-80g@ib0 + 1x4xl40s-48g", "1xcpu-512g + 3x2xa100-80g@roce,free=0.5,ram=1t"]
)
def test_edited_specs_parse_to_what_the_controls_say(spec):
    edited = edit_first_gpu_term(spec, nodes=3, gpus_per_node=2, free_fraction=0.25, ram_gib=768)
    t = first_gpu_term(edited)
    node = next(n for n in parse_cluster(edited).nodes if n.gpus)
    assert (t.nodes, t.gpus_per_node, t.free_fraction, t.ram_gib) == (3, 2, 0.25, 768)
    assert node.gpus[0].count == 2 and node.host_ram_bytes == 768 * 1024**3 and not node.host_ram_assumed


def test_the_description_is_computed_from_the_cluster():
    c = parse_cluster("2x8xh100-80g@ib0 + 1x4xl40s-48g + 1xcpu-512g")
    # h100-80g: 81,559 MiB = 79.6 GiB; l40s-48g: 46,068 MiB = 45.0 GiB; 16 × 79.6 + 4 × 45.0 = 1,454.3 GiB
    assert describe_cluster(c) == [
        "2 nodes: 8 × h100-80g (79.6 GiB) on ib0",
        "1 node: 4 × l40s-48g (45.0 GiB)",
        "1 node: a CPU server (512 GiB RAM)",
        "20 GPUs, 1,454.3 GiB of GPU memory in all",
    ]
    assert describe_cluster(parse_cluster("1x1xm4-max-128g")) == ["1 node: a unified-memory host (128 GiB shared)"]


def test_host_ram_says_assumed_until_given():
    # one 8 × H100 node states no RAM: max(64 GiB, 2 × 637.2 GiB) = 1,274 GiB, assumed
    assert host_ram_note(parse_cluster("1x8xh100-80g")).startswith("host RAM assumed: 1,274 GiB a node")
    assert host_ram_note(parse_cluster("1x8xh100-80g,ram=2t")) == "host RAM 2,048 GiB a node, as given"
    assert "assumed on 1 of 2 GPU nodes" in host_ram_note(parse_cluster("1x8xh100-80g,ram=2t + 1x4xl40s-48g"))
    assert host_ram_note(parse_cluster("1xcpu-512g")) is None


def test_a_cluster_file_travels_as_compact_json():
    toml = '[[nodes]]\nname = "a"\nhost_ram = "512GiB"\n[[nodes.gpus]]\nclass = "h100-80g"\ncount = 2\n'
    text = cluster_file_json(toml, "lab.toml")
    assert json.loads(text) == {
        "nodes": [{"name": "a", "host_ram": "512GiB", "gpus": [{"class": "h100-80g", "count": 2}]}]
    }
    cluster = cluster_from_text(text, shipped_catalogue())
    assert cluster.total_gpus == 2 and cluster.nodes[0].host_ram_bytes == 512 * 1024**3
    with pytest.raises(ClusterSpecError, match="neither JSON nor TOML"):
        cluster_file_json("{nodes: [", "bad.json")


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("999999999x8xh100-80g", "node count is 999,999,999; the controls show 1 to 100,000"),
        ("0x8xh100-80g", "node count is 0; the controls show 1 to 100,000"),
        ("1x99999xh100-80g", "GPUs a node is 99,999; the controls show 1 to 4,096"),
        ("1x0xh100-80g", "GPUs a node is 0; the controls show 1 to 4,096"),
    ],
)
def test_a_count_the_controls_cannot_show_is_refused_with_the_reason(spec, said):
    # issue 25: a ?cluster= link with such a count raised in the controls' cell and the sidebar vanished
    refusal = controls_refusal(first_gpu_term(spec))
    assert refusal is not None and said in refusal and "Edit the spec text" in refusal


@pytest.mark.parametrize("spec", ["1x1xh100-80g", "100000x4096xh100-80g", "1x8xfoo-bar", "1x8xh100:0MiB"])
def test_counts_within_the_controls_ranges_are_shown(spec):
    # the edges of both ranges, and classes the parser refuses (the controls still show them; the parser says why)
    assert controls_refusal(first_gpu_term(spec)) is None
