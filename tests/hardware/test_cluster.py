"""Tests for explorer/hardware/cluster.py: records, the text form, the file form."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corpus import DATA

from explorer.errors import ClusterSpecError, UnknownGPUClassError
from explorer.hardware.cluster import MAX_GPUS, Cluster, GPUGroup, Node, default_host_ram_bytes
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.hardware.cluster_text import format_cluster_spec
from explorer.hardware.host_cpu import DEFAULT_CPU
from explorer.sources.shipped import load_cluster_file, parse_cluster, shipped_catalogue, shipped_cpus
from explorer.units import GiB, MiB, TiB

CLUSTERS = DATA / "clusters"
H100 = 85_520_809_984  # 81,559 MiB


# --- the text form ---------------------------------------------------------------------


def test_two_fabrics_example():
    c = parse_cluster("2x8xh100-80g@ib0 + 1x4xl40s-48g")
    assert len(c.nodes) == 3 and c.total_gpus == 20 == c.free_gpus
    assert [g.name for g in c.gpu_classes] == ["h100-80g", "l40s-48g"]
    a, b, l40s = c.nodes
    assert a.fabric == b.fabric == "ib0" and l40s.fabric is None
    assert [n.name for n in c.nodes] == ["h100-80g@ib0#0", "h100-80g@ib0#1", "l40s-48g#0"]
    assert a.gpus[0].gpu.memory_bytes == H100 and a.gpu_memory_bytes == 8 * H100
    assert c.pools() == {("h100-80g", "ib0"): (a, b), ("l40s-48g", None): (l40s,)}
    assert c.span_groups("h100-80g") == ((a, b),)
    assert c.span_groups("l40s-48g") == ((l40s,),)
    assert c.nodes_with("l40s-48g") == (l40s,) and c.node("h100-80g@ib0#1") is b
    assert c.cpu_nodes == () and c.unified_nodes == () and c.gpu_nodes == c.nodes


def test_host_ram_default():
    # 8 × 85,520,809,984 × 2 = 1,368,332,959,744 bytes (1,274 GiB) for an H100 node;
    # a single L4 node gets the 64 GiB floor.
    c = parse_cluster("1x8xh100-80g + 1x1xl4")
    assert c.nodes[0].host_ram_bytes == 2 * 8 * H100 == default_host_ram_bytes(8 * H100)
    assert c.nodes[1].host_ram_bytes == 64 * GiB
    assert all(n.host_ram_assumed and n.host_free_bytes == n.host_ram_bytes for n in c.nodes)
    stated = parse_cluster("1x8xh100-80g,ram=2t").nodes[0]
    assert stated.host_ram_bytes == 2 * TiB and not stated.host_ram_assumed


def test_mig_node_has_slices_of_their_own_class():
    c = parse_cluster("1x7xa100-80g-mig-1g.10gb")
    (g,) = c.nodes[0].gpus
    assert g.count == 7 and g.gpu.name == "a100-80g-mig-1g.10gb" and g.gpu.is_mig
    assert g.gpu.memory_bytes == 9_728 * MiB and g.max_replica_width == 1
    assert c.total_gpus == 7
    fabric = parse_cluster("2x7xa100-80g-mig-1g.10gb@ib")
    assert len(fabric.span_groups("a100-80g-mig-1g.10gb")) == 2  # slices never span nodes


def test_stated_and_unknown_classes():
    exact = parse_cluster("1x1xx:81559MiB").nodes[0].gpus[0].gpu
    assert exact.memory_bytes == H100 and not exact.known
    assert parse_cluster("1x1xh100:81559MiB").nodes[0].gpus[0].gpu is shipped_catalogue().get("h100-80g")
    foo = parse_cluster("1x2xfoo-80g").nodes[0].gpus[0].gpu
    assert foo.memory_bytes == 80 * GiB and not foo.known


def test_cpu_node():
    c = parse_cluster("1x8xh100-80g + 2xcpu-256g,free=0.5")
    cpu = c.cpu_nodes
    assert len(cpu) == 2 and cpu[0].is_cpu_only and cpu[0].gpus == () and cpu[0].gpu_count == 0
    assert cpu[0].host_ram_bytes == 256 * GiB and cpu[0].host_free_bytes == 128 * GiB
    assert not cpu[0].host_ram_assumed and c.total_gpus == 8 and c.gpu_nodes == c.nodes[:1]


def test_uma_node():
    c = parse_cluster("1xuma-128g")
    (n,) = c.nodes
    assert n.unified and n.host_ram_bytes == 128 * GiB and n.name == "uma-128g#0"
    assert n.gpus[0].gpu.name == "uma-128g" and n.gpus[0].gpu.memory_bytes == 128 * GiB
    assert n.gpu_usable_limit_bytes == 96 * GiB  # three quarters above 36 GiB
    assert c.unified_nodes == (n,) and c.total_gpus == 1
    small = parse_cluster("1xuma-24g").nodes[0]
    assert small.gpu_usable_limit_bytes == 16 * GiB  # two thirds up to 36 GiB


def test_apple_class_node_is_unified():
    n = parse_cluster("1x1xm2-ultra-192g").nodes[0]
    assert n.unified and n.host_ram_bytes == 192 * GiB and not n.host_ram_assumed
    assert n.gpu_usable_limit_bytes == 144 * GiB


def test_free_options():
    c = parse_cluster("1x8xh100-80g,free=6 + 1x8xh100-80g,free=0.75 + 1x8xh100-80g,free=60GiB,free=2")
    a, b, d = (n.gpus[0] for n in c.nodes)
    assert (a.free_count, a.free_bytes) == (6, None)
    assert (b.free_count, b.free_bytes) == (8, H100 * 3 // 4)  # 64,140,607,488
    assert (d.free_count, d.free_bytes) == (2, 60 * GiB)
    assert c.free_gpus == 16


def test_names_are_unique_across_terms_and_spelling_is_forgiving():
    c = parse_cluster(" 1X8xH100@ib0+1×8×h100-80g@ib0 ")
    assert [n.name for n in c.nodes] == ["h100-80g@ib0#0", "h100-80g@ib0#1"]
    assert c.span_groups("h100-80g") == (c.nodes,)


@pytest.mark.parametrize(
    ("spec", "term", "message"),
    [
        ("", None, "empty cluster spec"),
        ("2xh100", 1, "after the node count comes GPUSxCLASS"),
        ("1x8h100", 1, "missing 'x' between the GPU count and the class"),
        ("h100", 1, "must start with the node count"),
        ("8", 1, "must start with the node count and 'x'"),
        ("0x8xh100-80g", 1, "node count must be at least 1"),
        ("1x0xh100-80g", 1, "GPU count must be at least 1"),
        ("1x8xh100-80g + 1x8xfoo", 2, "'foo' is not in the catalogue"),
        ("1x100001xh100-80g", 1, "more than 100,000 GPUs"),
        ("50000x2xh100-80g + 1x1xl4", 2, "more than 100,000 GPUs"),
        ("1x8xh100,free=9", 1, "free=9 but each node has 8 GPUs"),
        ("1x8xh100,free=1.5", 1, "a fraction of each card's memory is at most 1.0"),
        ("1x8xh100,free=lots", 1, "is not a GPU count, a fraction"),
        ("1x8xh100,free=6,free=5", 1, "one free GPU count per term"),
        ("1x8xh100,ram=big", 1, "ram=big is not a size"),
        ("1x8xh100,bogus=1", 1, "option 'bogus=1' is not"),
        ("1x8xh100@bad fabric", 1, "fabric 'bad fabric' must be"),
        ("1x8xh100@", 1, "fabric '' must be"),
        ("1xcpu-256g,free=2", 1, "a cpu node has none"),
        ("1xcpu-256g,ram=1t", 1, "states its RAM in the term"),
        ("1xcpu-lots", 1, "is not a RAM size"),
        ("1x2xm2-ultra-192g", 1, "one device per node"),
        ("1x8xh100 + + 1x1xl4", 2, "empty term"),
        ("1x8xh100 +", 2, "empty term"),
        ("1x8xa100", 1, "ambiguous: a100-40g, a100-80g"),
    ],
)
def test_errors_name_the_term(spec, term, message):
    with pytest.raises(ClusterSpecError) as info:
        parse_cluster(spec)
    text = str(info.value)
    assert message in text and "grammar:" in text
    if term is not None:
        assert f"cluster spec term {term} " in text


def test_unknown_class_error_keeps_its_type():
    with pytest.raises(UnknownGPUClassError, match=r"term 1 '1x8xfoo'"):
        parse_cluster("1x8xfoo")


_PIECES = st.sampled_from(
    list("0123456789xX×@,+=.:-_ gtGTcpuma")
    + [
        "h100-80g",
        "cpu-",
        "uma-",
        "free=",
        "ram=",
        "mig-1g.10gb",
        "MiB",
        "0.5",
        "a100",
        "1e9",
        "\u0663",
        "\u00b2",
        "\x00",
        "+me",
        "ib0",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.text(max_size=60), st.lists(_PIECES, max_size=24).map("".join)))
def test_fuzz_only_typed_errors(text):
    try:
        cluster = parse_cluster(text)
    except ClusterSpecError:
        return
    assert cluster.total_gpus <= MAX_GPUS and cluster.nodes
    again = format_cluster_spec(cluster)
    assert format_cluster_spec(parse_cluster(again)) == again


@pytest.mark.parametrize(
    "spec",
    [
        "2x8xh100-80g@ib0 + 1x4xl40s-48g",
        "1x7xa100-80g-mig-1g.10gb",
        "1x1xx:81559MiB",
        "1xcpu-256g + 1xuma-128g",
        "2x8xh100-80g@ib0,ram=2048g,free=6 + 1x8xh100-80g@ib0,free=0.75",
        "1xcpu-1024g,free=0.5 + 1x1xm2-ultra-192g + 3x2xfoo-24g@lan,free=1",
    ],
)
def test_format_round_trips(spec):
    c = parse_cluster(spec)
    assert format_cluster_spec(c) == spec
    assert parse_cluster(format_cluster_spec(c)) == c


def test_format_merges_and_canonicalizes():
    c = parse_cluster("1x8xh100@ib0 + 1x8xH100_80G@ib0 + 1x1xh100:80GiB")
    assert format_cluster_spec(c) == "2x8xh100-80g@ib0 + 1x1xh100-80g:81920MiB"


def test_format_refuses_mixed_nodes():
    with pytest.raises(ClusterSpecError, match="several GPU classes"):
        format_cluster_spec(load_cluster_file(CLUSTERS / "lab.json"))


# --- records ---------------------------------------------------------------------------


def test_records_are_frozen_and_validated():
    n = parse_cluster("1x8xh100-80g").nodes[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        n.fabric = "x"  # type: ignore[misc]
    gpu = shipped_catalogue().get("l4-24g")
    with pytest.raises(ClusterSpecError, match="impossible"):
        GPUGroup(gpu=gpu, count=2, free_count=3)
    with pytest.raises(ClusterSpecError, match="bytes free on a card"):
        GPUGroup(gpu=gpu, count=1, free_count=1, free_bytes=gpu.memory_bytes + 1)
    with pytest.raises(ClusterSpecError, match="names repeat"):
        Cluster(nodes=(n, n))
    with pytest.raises(ClusterSpecError, match="host RAM"):
        Node(name="n", host_ram_bytes=GiB, host_free_bytes=2 * GiB)


def test_free_bytes_for_width():
    g = load_cluster_file(CLUSTERS / "lab.json").node("gpu-a").gpus[0]
    assert g.free_bytes == 0  # the least free card
    # free_count 6: cards 6 and 7 are busy, so a 7-card replica cannot have its cards now
    assert g.free_bytes_for(6) == H100 and g.free_bytes_for(7) == 0 and g.free_bytes_for(8) == 0
    assert g.free_bytes_for(9) == 0 and g.free_bytes_for(0) == 0
    idle = parse_cluster("1x8xh100-80g").nodes[0].gpus[0]
    assert idle.free_bytes_for(8) == H100


def test_free_bytes_on_a_card():
    g = load_cluster_file(CLUSTERS / "lab.json").node("gpu-a").gpus[0]
    assert [g.free_bytes_on(k) for k in (0, 5, 6, 7, 8, -1)] == [H100, H100, 0, 0, 0, 0]  # 6, 7: busy
    none_free = cluster_from_dict(
        {"nodes": [{"gpus": [{"class": "h100-80g", "count": 2, "free_bytes": 0}]}]}, shipped_catalogue()
    )
    assert [none_free.nodes[0].gpus[0].free_bytes_on(k) for k in (0, 1)] == [0, 0]  # 0 bytes, not "unknown"
    half = parse_cluster("1x4xh100-80g,free=2,free=0.5").nodes[0].gpus[0]
    assert [half.free_bytes_on(k) for k in range(4)] == [H100 // 2, H100 // 2, 0, 0]
    assert half.free_bytes_for(2) == H100 // 2 and half.free_bytes_for(3) == 0


# --- the file form ----------------------------------------------------------------------


def test_json_file():
    c = load_cluster_file(CLUSTERS / "lab.json")
    assert [n.name for n in c.nodes] == ["gpu-a", "gpu-b", "mixed", "cpu-box", "studio"]
    a, b, mixed, cpu, studio = c.nodes
    assert a.host_ram_bytes == 2 * TiB and a.host_free_bytes == 3 * TiB // 2 and not a.host_ram_assumed
    assert (a.gpus[0].count, a.gpus[0].free_count, len(a.gpus[0].card_free_bytes)) == (8, 6, 8)
    assert b.host_ram_bytes == 2 * TiB and b.gpus[0].free_bytes is None
    assert [g.gpu.name for g in mixed.gpus] == ["a100-80g", "a100-80g-mig-1g.10gb"]
    assert mixed.gpus[0].free_bytes == 60 * GiB and mixed.host_ram_assumed and mixed.gpu_count == 10
    assert cpu.is_cpu_only and cpu.host_free_bytes == 400 * GiB
    assert studio.unified and studio.gpu_usable_limit_bytes == 144 * GiB
    assert c.span_groups("h100-80g") == ((a, b),) and c.total_gpus == 27
    assert c.cpu_nodes == (cpu,) and c.unified_nodes == (studio,)


def test_toml_file():
    c = load_cluster_file(CLUSTERS / "edge.toml")
    e1, e2, mac = c.nodes
    assert e1.gpus[0].gpu.name == "l4-24g" and e1.gpus[0].free_count == 1 and e1.host_ram_bytes == 256 * GiB
    assert [g.gpu.name for g in e2.gpus] == ["l4-24g", "rtx4090-24g"] and e2.fabric is None
    assert e2.gpus[1].free_bytes == 20 * GiB and e2.host_ram_assumed
    assert mac.unified and mac.gpus[0].gpu.name == "uma-64g" and mac.host_free_bytes == 48 * GiB
    assert c.span_groups("l4-24g") == ((e1,), (e2,))


def test_dict_equals_text_form():
    d = {"nodes": [{"name": "h100-80g@ib0#0", "fabric": "ib0", "gpus": [{"class": "h100-80g", "count": 8}]}]}
    assert cluster_from_dict(d, shipped_catalogue()) == parse_cluster("1x8xh100-80g@ib0")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "non-empty list 'nodes'"),
        ({"nodes": []}, "non-empty list 'nodes'"),
        ({"nodes": [{}], "extra": 1}, "unknown keys extra"),
        ({"nodes": [{"nme": "x"}]}, "unknown keys nme"),
        ({"nodes": ["x"]}, "expected a table/object"),
        ({"nodes": [{"name": "c"}]}, "without GPUs needs host_ram"),
        ({"nodes": [{"unified": True}]}, "unified node needs host_ram"),
        ({"nodes": [{"unified": "yes", "host_ram": 1}]}, "not true or false"),
        ({"nodes": [{"name": "", "host_ram": "1g"}]}, "not a non-empty string"),
        ({"nodes": [{"fabric": "a b", "host_ram": "1g"}]}, "fabric 'a b'"),
        ({"nodes": [{"host_ram": "lots"}]}, "'lots' is not a size"),
        ({"nodes": [{"host_ram": True}]}, "True is not a size"),
        ({"nodes": [{"host_ram": 1, "host_ram_bytes": 1}]}, "not both"),
        ({"nodes": [{"host_ram": "1g", "host_free": "2g"}]}, "is impossible"),
        ({"nodes": [{"gpus": {"class": "l4"}}]}, "gpus must be a list"),
        ({"nodes": [{"gpus": [{"count": 1}]}]}, "'class' must name a GPU class"),
        ({"nodes": [{"gpus": [{"class": "l4", "count": True}]}]}, "is not a count"),
        ({"nodes": [{"gpus": [{"class": "l4", "count": "8"}]}]}, "is not a count"),
        ({"nodes": [{"gpus": [{"class": "l4", "count": 2, "free_count": 3}]}]}, "impossible"),
        ({"nodes": [{"gpus": [{"class": "l4", "count": 2, "card_free_bytes": [1]}]}]}, "1 per-card free figures"),
        ({"nodes": [{"gpus": [{"class": "l4", "free_bytes": "30GiB"}]}]}, "bytes free on a card"),
        ({"nodes": [{"gpus": [{"class": "l4"}, {"class": "l4-24g"}]}]}, "appears twice"),
        ({"nodes": [{"gpus": [{"class": "nope"}]}]}, "nodes[0].gpus[0]: GPU class 'nope'"),
        ({"nodes": [{"name": "a", "host_ram": "1g"}, {"name": "a", "host_ram": "1g"}]}, "names repeat: a"),
    ],
)
def test_dict_errors(data, message):
    with pytest.raises(ClusterSpecError) as info:
        cluster_from_dict(data, shipped_catalogue())
    assert message in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(ClusterSpecError, match="cannot read cluster file"):
        load_cluster_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nodes: [")
    with pytest.raises(ClusterSpecError, match="neither JSON nor TOML"):
        load_cluster_file(bad)
    raw = tmp_path / "cluster.txt"  # no suffix hint: JSON is tried, then TOML
    raw.write_text(json.dumps({"nodes": [{"host_ram": "8g"}]}))
    assert load_cluster_file(raw).nodes[0].host_ram_bytes == 8 * GiB
    binary = tmp_path / "x.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ClusterSpecError, match=r"x.toml is not UTF-8 text \(byte 0 is 0xff\)"):
        load_cluster_file(binary)
    with pytest.raises(ClusterSpecError, match="is a folder, not a regular file"):
        load_cluster_file(tmp_path)


def test_host_cpu_from_the_spec_and_the_file():
    # unstated: AVX2, as llama.cpp's reference builds assume; amx implies avx512 implies avx2
    plain, amx = parse_cluster("1x8xh100-80g + 1xcpu-256g,cpu=AMX").nodes
    assert plain.cpu == DEFAULT_CPU and not plain.cpu.has_amx
    assert amx.cpu.name == "amx" and amx.cpu.features == {"avx2", "avx512", "amx"} and amx.cpu.has_amx
    again = parse_cluster(format_cluster_spec(parse_cluster("2x4xl40s-48g,cpu=avx512 + 1xcpu-64g")))
    assert [n.cpu.name for n in again.nodes] == ["avx512", "avx512", "avx2"]
    node = cluster_from_dict({"nodes": [{"host_ram": "512g", "cpu": "amx"}]}, shipped_catalogue()).nodes[0]
    assert node.cpu.has_amx
    with pytest.raises(ClusterSpecError, match="cpu='zen9' is not a CPU"):
        parse_cluster("1x1xh100-80g,cpu=zen9")
    with pytest.raises(ClusterSpecError, match="cpu 7 is not a CPU name"):
        cluster_from_dict({"nodes": [{"host_ram": "64g", "cpu": 7}]}, shipped_catalogue())


def test_named_cpus_bring_their_bandwidth_and_bw_overrides_it():
    # data/cpus.csv: a Raspberry Pi 5 reads LPDDR4X-4267 over 32 bits, 4,267 MT/s × 4 B = 17.064 GB/s
    pi, epyc, stated = parse_cluster("1xcpu-16g,cpu=rpi5 + 1x8xh100-80g,cpu=epyc-9654 + 1xcpu-64g,bw=1.2t").nodes
    assert pi.cpu.name == "rpi5" and pi.cpu.memory_bandwidth_bytes_per_s == 17_064_000_000
    assert epyc.cpu.features == {"avx512"} and epyc.cpu.memory_bandwidth_bytes_per_s == 12 * 4800 * 8 * 10**6
    assert stated.cpu.name == "avx2" and stated.cpu.memory_bandwidth_bytes_per_s == 1_200_000_000_000
    assert stated.cpu.bandwidth_stated and not pi.cpu.bandwidth_stated
    text = format_cluster_spec(parse_cluster("1xcpu-16g,cpu=rpi5,bw=20 + 1xcpu-64g"))
    assert text == "1xcpu-16g,cpu=rpi5,bw=20 + 1xcpu-64g"
    assert parse_cluster(text).nodes[0].cpu.memory_bandwidth_bytes_per_s == 20 * 10**9
    node = cluster_from_dict(
        {"nodes": [{"host_ram": "512g", "cpu": "xeon-8480", "bw": 250}]}, shipped_catalogue(), cpus=shipped_cpus()
    ).nodes[0]
    assert node.cpu.has_amx and node.cpu.memory_bandwidth_bytes_per_s == 250 * 10**9
    with pytest.raises(ClusterSpecError, match="near: rpi5"):
        parse_cluster("1xcpu-16g,cpu=rpi6")
    with pytest.raises(ClusterSpecError, match="bw='fast' is not a memory bandwidth"):
        parse_cluster("1xcpu-16g,bw=fast")
    with pytest.raises(ClusterSpecError, match="is not a memory bandwidth"):
        parse_cluster("1xcpu-16g,bw=0.5")  # below 1 GB/s: a typing mistake
    with pytest.raises(ClusterSpecError, match="bw True is not a bandwidth"):
        cluster_from_dict({"nodes": [{"host_ram": "64g", "bw": True}]}, shipped_catalogue())
    # without the table, only feature levels are CPUs (the core reads no file)
    with pytest.raises(ClusterSpecError, match="is not a CPU explorer knows"):
        cluster_from_dict({"nodes": [{"host_ram": "64g", "cpu": "rpi5"}]}, shipped_catalogue())


def test_the_cpu_table_is_checked():
    from explorer.errors import CatalogueError
    from explorer.hardware.host_cpu import CPUTable

    header = "name,features,memory_bandwidth_bytes_per_s,memory,source\n"
    assert len(CPUTable.from_csv_text(header + "x1,avx2,100,ddr,test\n")) == 1
    for bad, message in (
        ("name,features\nx,avx2\n", "lacks columns"),
        (header + "X Y,avx2,100,,\n", "not a lowercase label"),
        (header + "x1,,100,,\n", "lists no features"),
        (header + "x1,avx2,fast,,\n", "is not a positive int"),
        (header + "x1,avx2,1,,\nx1,avx2,1,,\n", "appears twice"),
        (header + "amx,amx,1,,\n", "is a feature level"),
    ):
        with pytest.raises(CatalogueError, match=message):
            CPUTable.from_csv_text(bad)
    assert len(shipped_cpus()) >= 20


def test_a_unified_chip_alone_after_the_node_count_is_one_device_a_node():
    """``1xm4-max-128g`` reads as ``1x1xm4-max-128g``: a Mac is one unified-memory device a node."""
    short, full = parse_cluster("1xm4-max-128g"), parse_cluster("1x1xm4-max-128g")
    assert short.nodes == full.nodes and short.nodes[0].gpus[0].gpu.unified
    with pytest.raises(ClusterSpecError, match="after the node count comes GPUSxCLASS"):
        parse_cluster("1xh100-80g")  # a discrete card still needs its count


def test_a_derived_figure_is_built_once_per_cluster_and_left_out_of_equality():
    calls = []

    def count_nodes(cluster: Cluster) -> int:
        calls.append(cluster)
        return len(cluster.nodes)

    cluster = parse_cluster("2x8xh100-80g@ib0 + 1xcpu-256g")
    assert cluster.derived(count_nodes) == 3
    assert cluster.derived(count_nodes) == 3
    assert len(calls) == 1
    # a cluster with a figure kept equals one without, and a changed copy starts with none
    assert cluster == parse_cluster("2x8xh100-80g@ib0 + 1xcpu-256g")
    smaller = dataclasses.replace(cluster, nodes=cluster.nodes[:1])
    assert smaller.derived(count_nodes) == 1
    assert len(calls) == 2


def test_a_gb10_node_shares_its_ram_but_is_planned_as_a_cuda_card():
    """A DGX Spark (GB10) is one device a node whose memory is the host's 128 GiB, like a Mac; but its engines
    are CUDA ones that budget from torch's total, so it is not a Metal host: no working-set cap, and vLLM/SGLang
    see it as a card (its pool exists)."""
    short = parse_cluster("1xgb10-128g")
    n = short.nodes[0]
    assert short.nodes == parse_cluster("1x1xgb10-128g").nodes
    assert n.gpus[0].gpu.unified and not n.unified and short.unified_nodes == ()
    assert n.host_ram_bytes == 128 * GiB and not n.host_ram_assumed
    assert n.gpu_usable_limit_bytes == 128 * GiB  # a Mac of 128 GiB: 96 GiB (Metal's three quarters)
    spark = cluster_from_dict({"nodes": [{"gpus": [{"class": "gb10-128g"}]}]}, shipped_catalogue()).nodes[0]
    assert not spark.unified and spark.host_ram_bytes == 128 * GiB and not spark.host_ram_assumed
