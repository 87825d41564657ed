"""Manual pinning: overcommit detected and measured."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.errors import ManualSelectionError
from explorer.fleet.footprints import fleet_cards
from explorer.hardware.cluster import Cluster
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.plan.pinning import check_pinned, pinned_launch
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


# --- item 4: llama.cpp pins through its own rules -------------------------------------------------

L70 = "meta-llama__Meta-Llama-3.1-70B"


def _q4(shape):
    from explorer.artifacts.offer import what_if_artifact

    return [what_if_artifact(shape, "Q4_K_M")]


def test_llamacpp_pins_one_card():
    """One L40S holds the 70B at Q4_K_M (41.1 GiB of 44.5 usable): a llama-server line, not vllm serve."""
    shape = shape_of(L70)
    r = check_pinned(shape, parse_cluster("1x2xl40s-48g"), ["1"], engine="llamacpp", artifacts=_q4(shape))
    assert not r.overcommitted and r.option.engine == "llamacpp"
    assert r.option.layout.gpus_per_node == 1 and r.option.evaluation.layers_on_host == 0
    assert (
        r.option.evaluation.command.startswith("llama-server") and "--tensor-split" not in r.option.evaluation.command
    )


def test_llamacpp_pins_cards_of_two_classes_on_one_node():
    """vLLM refuses a 4090 beside a 3090; llama.cpp splits layers over them by memory."""
    shape = shape_of("Qwen__Qwen3-32B")
    box = cluster_from_dict(
        {"nodes": [{"name": "box", "gpus": [{"class": "rtx4090-24g"}, {"class": "rtx3090-24g"}], "host_ram": "128g"}]},
        shipped_catalogue(),
    )
    with pytest.raises(ManualSelectionError, match="one class"):
        check_pinned(shape, box, ["0", "1"], engine="vllm")
    r = check_pinned(shape, box, ["0", "1"], engine="llamacpp", artifacts=_q4(shape))
    assert r.option.layout.gpu_class == "rtx4090-24g+rtx3090-24g" and r.option.layout.cards == 2
    assert [c.role for c in r.option.evaluation.cards] == ["box:0", "box:1"]
    assert "--tensor-split" in r.option.evaluation.command


def test_llamacpp_pins_across_nodes_through_rpc():
    """The node with the most pinned cards keeps them; each pinned card elsewhere is an rpc-server of its own."""
    shape = shape_of(L70)
    cluster = parse_cluster("2x2xrtx4090-24g@lan,ram=256g")
    a, b = (n.name for n in cluster.nodes)
    r = check_pinned(shape, cluster, [f"{b}:0", f"{a}:0", f"{a}:1"], engine="llamacpp", artifacts=_q4(shape))
    lay = r.option.layout
    assert lay.rpc and (lay.gpus_per_node, lay.rpc_servers, lay.nodes) == (2, 1, 2)
    assert f"--rpc <{b}>:50052" in r.option.evaluation.command
    assert [c.role for c in r.option.evaluation.cards] == [f"{a}:0", f"{a}:1", f"RPC <{b}>:50052 (rtx4090-24g)"]


def test_llamacpp_pin_names_the_card_that_cannot_hold_one_layer():
    """The seed's "Selected GPU lacks enough VRAM": -ngl 1 puts 405B's bf16 output layer on the card (128,256 ×
    16,384 × 2 bytes = 3.9 GiB) with its compute buffer and the CUDA context, 10.7 GiB in all: more than a 4.75 GiB
    MIG slice has. The error names the card and the figure."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-405B")
    cluster = parse_cluster("1x7xa100-40g-mig-1g.5gb")
    with pytest.raises(
        ManualSelectionError, match=r"a100-40g-mig-1g\.5gb#0:0 .* lacks memory for one layer: .* 10\.7 GiB"
    ):
        check_pinned(shape, cluster, ["0"], engine="llamacpp")


def test_pinning_an_unknown_node_says_so():
    with pytest.raises(ManualSelectionError, match="no node named 'worker9'"):
        check_pinned(shape_of(L70), parse_cluster("2x2xrtx4090-24g@lan"), ["worker9:0"], engine="llamacpp")


def test_ngl_zero_pins_nothing():
    with pytest.raises(ManualSelectionError, match="--ngl 0"):
        check_pinned(
            shape_of(L70), parse_cluster("1x2xl40s-48g"), ["0"], engine="llamacpp", request=PlanRequest(n_gpu_layers=0)
        )


# --- item 6: the overcommit message ---------------------------------------------------------------


def test_overcommit_and_short_now_together_with_the_counts():
    """70B bf16 on 2 L40S at half free: each card needs 69.7 GiB but vLLM may use 90 % of the 44.42 GiB torch
    sees (40.0 GiB): overcommit; and each has 22.5 GiB free where vLLM needs 40.0 GiB free to start: short now.
    0 of the 2 cards have that; together they offer 2 × int(47,695,611,822 × 0.9) = 85,852,101,278 bytes =
    80.0 GiB usable, 45.0 GiB free (half the driver's 48,305,799,168 each)."""
    r = check_pinned(shape_of(L70), parse_cluster("1x8xl40s-48g,free=0.5"), ["0", "1"])
    assert r.overcommitted and r.short_now_bytes > 0
    assert "overcommits" in r.message and "less free now" in r.message
    assert "0/2 of them have the free memory" in r.message and "80.0 GiB usable, 45.0 GiB free now" in r.message
    assert (r.cards_ready, r.usable_bytes, r.free_bytes) == (0, 85_852_101_278, 2 * (48_305_799_168 // 2))


# --- item 7: --tp/--pp/--dp --------------------------------------------------------------------------


def test_world_size_above_the_pinned_cards_is_refused():
    with pytest.raises(ManualSelectionError, match="takes 8 GPUs .* but 4 are pinned"):
        check_pinned(
            shape_of(L70),
            parse_cluster("1x8xh100-80g"),
            ["0", "1", "2", "3"],
            request=PlanRequest(tensor_parallel_size=8),
        )


def test_a_launch_smaller_than_the_pin_uses_some_of_the_cards():
    """tp 2 of 4 pinned: 2 are used, those with the most free memory (3 and 1: 80 and 60 GiB of the 80/40/60/80...)."""
    cluster = cluster_from_dict(
        {
            "nodes": [
                {
                    "name": "box",
                    "gpus": [
                        {"class": "h100-80g", "count": 4, "card_free_bytes": ["20GiB", "60GiB", "30GiB", "79GiB"]}
                    ],
                }
            ]
        },
        shipped_catalogue(),
    )
    r = check_pinned(shape_of(L70), cluster, ["0", "1", "2", "3"], request=PlanRequest(tensor_parallel_size=2))
    assert r.option.layout.tp == 2 and (r.cards_used, r.cards_pinned) == (2, 4)
    assert r.message.startswith("uses 2 of the 4 selected GPUs (box:3, box:1)")
    # the command says so: those two cards, in that order (issue 24: "uses n0:2, n0:3" said nowhere in it)
    (line,) = pinned_launch(r)
    assert line.startswith("box: CUDA_VISIBLE_DEVICES=3,1 vllm serve ") and line.endswith(" --port 8000")


def test_tp_and_pp_given_are_the_split():
    """4 pinned H100s with --tp 2 --pp 2: that split, not tp 4."""
    r = check_pinned(
        shape_of(L70),
        parse_cluster("1x8xh100-80g"),
        ["0", "1", "2", "3"],
        request=PlanRequest(tensor_parallel_size=2, pipeline_parallel_size=2),
    )
    assert (r.option.layout.tp, r.option.layout.pp) == (2, 2)
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 2" in r.option.evaluation.command


def test_sglang_plain_dp_is_replicas_in_one_launch():
    """--dp 2 --tp 2 on 4 pinned H100s: two tp-2 replicas in one SGLang launch (--dp-size 2, no DP attention);
    each holds half of 8 sequences, so the launch serves twice a replica's concurrency."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    cluster = parse_cluster("1x8xh100-80g")
    both = check_pinned(
        shape,
        cluster,
        ["0", "1", "2", "3"],
        engine="sglang",
        request=PlanRequest(tensor_parallel_size=2, data_parallel_size=2, concurrency=8),
    )
    one = check_pinned(shape, cluster, ["0", "1"], engine="sglang", request=PlanRequest(concurrency=4))
    lay = both.option.layout
    assert (lay.tp, lay.dp, lay.cards) == (2, 2, 4)
    assert (
        "--dp-size 2" in both.option.evaluation.command
        and "--enable-dp-attention" not in both.option.evaluation.command
    )
    assert both.option.per_card.kv_cache == one.option.per_card.kv_cache  # 4 sequences a replica
    assert both.option.evaluation.max_concurrency == 2 * one.option.evaluation.max_concurrency
    assert both.option.cards_total_bytes == 2 * one.option.cards_total_bytes


def test_sglang_dp_attention_dp_divides_tp():
    r = check_pinned(
        shape_of("meta-llama__Meta-Llama-3.1-8B"),
        parse_cluster("1x8xh100-80g"),
        ["0", "1", "2", "3"],
        engine="sglang",
        request=PlanRequest(dp_attention=True, data_parallel_size=2),
    )
    assert (r.option.layout.tp, r.option.layout.dp) == (4, 2)
    assert "--enable-dp-attention --dp-size 2" in r.option.evaluation.command


# --- items 8 and 9: replicas ---------------------------------------------------------------------------


def test_pinned_replicas_that_overcommit_are_refused():
    """One overcommitting replica is reported with its overcommit; two are refused (the seed: manual scheduling
    of several replicas allows no overcommit)."""
    shape, cluster = shape_of(L70), parse_cluster("1x8xl40s-48g")
    single = check_pinned(shape, cluster, ["0", "1"])
    assert single.overcommitted
    with pytest.raises(ManualSelectionError, match="2 replicas allows no overcommit.*replica 1: Manual GPU"):
        check_pinned(shape, cluster, ["0", "1", "2", "3"], replicas=2)


def test_pinned_replicas_that_fit_run_one_launch_each():
    shape, cluster = shape_of(L70), parse_cluster("1x8xl40s-48g")
    r = check_pinned(shape, cluster, [str(i) for i in range(8)], replicas=2)
    assert len(r.replicas) == 2 and all(o.layout.tp == 4 for o in r.replicas)
    assert r.message.startswith("2 replicas on 4 pinned GPUs each")


def test_one_distributed_instance_per_node():
    """2 replicas of tp 4 × pp 2 pinned as node A's 0-3 with node B's 0-3, then A's 4-7 with B's 4-7: both
    replicas span A and B, and a node runs one distributed vLLM instance. Pinned one node each, they fit."""
    shape = shape_of(L70)
    cluster = parse_cluster("2x8xh100-80g@ib0")
    a, b = (n.name for n in cluster.nodes)
    crossed = [f"{a}:{i}" for i in range(4)] + [f"{b}:{i}" for i in range(4)]
    crossed += [f"{a}:{i}" for i in range(4, 8)] + [f"{b}:{i}" for i in range(4, 8)]
    with pytest.raises(ManualSelectionError, match=f"only one distributed vllm instance: node {a} would hold"):
        check_pinned(shape, cluster, crossed, replicas=2)
    per_node = [f"{a}:{i}" for i in range(8)] + [f"{b}:{i}" for i in range(8)]
    r = check_pinned(shape, cluster, per_node, replicas=2)
    assert [o.layout.nodes for o in r.replicas] == [1, 1]


# --- issue 24: a pinned launch names its devices and its port -----------------------------------------------

QWEN_8B = "Qwen__Qwen3-8B"


def test_pinned_replicas_name_their_devices_and_ports():
    """``--gpus l40s-48g#0:2,l40s-48g#0:3 --replicas 2`` printed the same ``vllm serve`` twice (device 0 both
    times, one port): each replica runs on its own card with its own port."""
    r = check_pinned(shape_of(QWEN_8B), parse_cluster("1x4xl40s-48g"), ["l40s-48g#0:2", "l40s-48g#0:3"], replicas=2)
    first, second = pinned_launch(r)
    assert first.startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=2 vllm serve Qwen__Qwen3-8B ")
    assert second.startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=3 vllm serve Qwen__Qwen3-8B ")
    assert first.endswith(" --port 8000") and second.endswith(" --port 8001")


def test_a_single_llamacpp_card_pinned_at_index_one_is_device_one():
    """``llama-server … -ngl 41`` with no device: the pinned card 1 is ``CUDA_VISIBLE_DEVICES=1``."""
    shape = shape_of(L70)
    r = check_pinned(shape, parse_cluster("1x2xl40s-48g"), ["1"], engine="llamacpp", artifacts=_q4(shape))
    (line,) = pinned_launch(r)
    assert line.startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=1 llama-server ") and line.endswith(" --port 8000")


def test_pinned_llamacpp_rpc_names_the_remote_card_and_its_server():
    """The main node's two cards run llama-server; the pinned card on the other node runs an rpc-server on that
    card, listening where --rpc looks (``-H 0.0.0.0``: rpc-server binds 127.0.0.1 unless told)."""
    shape = shape_of(L70)
    cluster = parse_cluster("2x2xrtx4090-24g@lan,ram=256g")
    a, b = (n.name for n in cluster.nodes)
    r = check_pinned(shape, cluster, [f"{b}:1", f"{a}:0", f"{a}:1"], engine="llamacpp", artifacts=_q4(shape))
    head, server = pinned_launch(r)
    assert head.startswith(f"{a}: CUDA_VISIBLE_DEVICES=0,1 llama-server ") and f"--rpc <{b}>:50052" in head
    assert server == f"<{b}>: CUDA_VISIBLE_DEVICES=1 rpc-server -H 0.0.0.0 -p 50052"


def test_pinned_llamacpp_across_nodes_without_a_fabric_is_refused():
    """Two T4 nodes with no fabric: the automatic walk offers no RPC there, and neither does a pin (it printed
    ``--rpc <t4-16g#1>:50052``)."""
    shape = shape_of(L70)
    with pytest.raises(ManualSelectionError, match="share no fabric with t4-16g#0: llama.cpp's RPC servers need one"):
        check_pinned(shape, parse_cluster("2x2xt4-16g"), ["t4-16g#0:0", "t4-16g#1:0"], engine="llamacpp",
                     artifacts=_q4(shape))  # fmt: skip


def test_pinned_vllm_across_nodes_is_a_line_a_node_with_its_rank():
    """Two H100s on each of two nodes over ib0, tp 2 × pp 2: rank 0 serves on port 8000, rank 1 runs headless;
    both name the head node as the master's address."""
    cluster = parse_cluster("2x8xh100-80g@ib0")
    a, b = (n.name for n in cluster.nodes)
    r = check_pinned(shape_of(L70), cluster, [f"{a}:0", f"{a}:1", f"{b}:4", f"{b}:5"])
    head, worker = pinned_launch(r)
    assert head.startswith(f"{a}: CUDA_VISIBLE_DEVICES=0,1 vllm serve ")
    assert head.endswith(f"--nnodes 2 --node-rank 0 --master-addr <{a}> --master-port 29501 --port 8000")
    assert worker.startswith(f"{b}: CUDA_VISIBLE_DEVICES=4,5 vllm serve ")
    assert worker.endswith(f"--nnodes 2 --node-rank 1 --master-addr <{a}> --master-port 29501 --headless")
