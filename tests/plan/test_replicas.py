"""Replicas: how many copies of an option the cluster holds, their aggregate speed and their launch lines."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.plan.planner import plan
from explorer.plan.replicas import MAX_LINES, replica_launch
from explorer.sources.shipped import parse_cluster, shipped_catalogue

LLAMA_8B, LLAMA_70B, LLAMA_405B = (
    "meta-llama__Meta-Llama-3.1-8B",
    "meta-llama__Meta-Llama-3.1-70B",
    "meta-llama__Meta-Llama-3.1-405B",
)


def _plan(name, spec, **request):
    return plan(shape_of(name), parse_cluster(spec), PlanRequest(**request))


def _option(result, engine, cards):
    return next(o for o in result.options if o.engine == engine and o.layout.cards == cards and not o.layout.cpu)


def test_70b_on_eight_h100_runs_its_replicas_in_one_launch_each_engine():
    """70B bf16 at 4,096 tokens fits 2 H100s on vLLM (tp 2: 71.1 of 71.3 GiB usable, torch's 79.19 × 0.9):
    8 // 2 = 4 copies, started with --data-parallel-size. SGLang's static share needs 82.0 GiB a card on 2,
    so its fewest is tp 4: 8 // 4 = 2 copies with --dp-size. llama.cpp runs four servers on GPUs 0,1 / 2,3 /
    4,5 / 6,7."""
    result = _plan(LLAMA_70B, "1x8xh100-80g")
    vllm, sglang, llama = _option(result, "vllm", 2), _option(result, "sglang", 4), _option(result, "llamacpp", 2)
    assert (vllm.layout.tp, sglang.layout.tp) == (2, 4)
    assert (vllm.replicas, sglang.replicas, llama.replicas) == (4, 2, 4)
    assert _option(result, "vllm", 4).replicas == 2 and _option(result, "vllm", 8).replicas == 1
    launch = result.replica_launch(vllm)
    # one launch on all 8 cards: 4 engines of tp 2, one API server on port 8000
    assert launch.method == "data-parallel"
    assert launch.lines[0].startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 vllm serve")
    assert " --tensor-parallel-size 2 " in launch.lines[0]
    assert launch.lines[0].endswith("--data-parallel-size 4 --port 8000")
    sglang_line = result.replica_launch(sglang).lines[0]
    assert sglang_line.startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m sglang.launch_server")
    assert " --tp-size 4 " in sglang_line and sglang_line.endswith("--dp-size 2 --port 8000")
    servers = result.replica_launch(llama)
    assert servers.method == "instances" and len(servers.lines) == 4
    assert servers.lines[3].startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=6,7 llama-server")
    assert servers.lines[3].endswith("--port 8003")


def test_json_carries_replicas_aggregate_and_launch():
    """Four sequences on vLLM tp 4 (tp 2 needs 73.0 GiB a card at four, of 71.3): two copies on 8 H100s."""
    out = _plan(LLAMA_70B, "1x8xh100-80g", engines=("vllm",), concurrency=4).to_dict()
    opt = next(o for o in out["options"] if o["tp"] == 4)
    assert opt["replicas"] == 2 and opt["replicas_now"] == 2 and opt["tier"] == 1
    agg = opt["aggregate_decode_tokens_per_s"]
    # two replicas × four sequences × one sequence's rate
    assert agg["estimate"] == pytest.approx(8 * opt["decode_tokens_per_s"]["estimate"], rel=1e-3)
    assert agg["replicas"] == 2 and agg["concurrency"] == 4
    assert opt["replica_launch"]["method"] == "data-parallel"
    assert out["best_per_engine"] == {"vllm": 1}


def test_host_ram_claims_cap_the_copies_on_a_node():
    """vLLM --swap-space 4 on a 40 GiB node: tp 2 claims 2 × 4 = 8 GiB of host RAM a copy, and vLLM lets its claims
    take 70 % of the RAM, 28 GiB: 3 copies (not 8 // 2 = 4), started with --data-parallel-size 3."""
    result = _plan(LLAMA_70B, "1x8xh100-80g,ram=40g", engines=("vllm",), swap_space_gib=4, vllm_version="0.17.1")
    tp2 = _option(result, "vllm", 2)
    line = result.replica_launch(tp2).lines[0]
    assert tp2.replicas == 3 and line.endswith("--data-parallel-size 3 --port 8000")
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 " in line  # 3 copies × 2 cards
    assert _option(result, "vllm", 4).replicas == 1  # 16 GiB a copy: one in 28


def test_a_launch_with_the_users_dp_is_one_copy():
    """--tp 2 --dp 2: the walk lays out one launch of 4 cards (two tp-2 engines in it); 8 H100s hold 2 of them,
    each its own launch on 4 GPUs."""
    result = _plan(LLAMA_70B, "1x8xh100-80g", engines=("vllm",), tensor_parallel_size=2, data_parallel_size=2,
                   concurrency=2)  # fmt: skip
    (option,) = result.options
    assert option.layout.cards == 4 and option.replicas == 2
    launch = result.replica_launch(option)
    assert launch.method == "instances" and launch.lines[1].startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=4,5,6,7 vllm")


def test_multi_node_replicas_pair_nodes_of_one_fabric():
    """405B on 4 × 8 H100 over ib0: tp 8 × pp 2 takes two whole nodes, so two copies; the stand-alone node
    beside them never joins one. Each copy is a line a node: rank 0 (the API server, port 8000) on one node,
    rank 1 (--headless) on the other, both naming the head node as the master's address."""
    result = _plan(LLAMA_405B, "4x8xh100-80g@ib0 + 1x8xh100-80g", engines=("vllm",))
    whole = next(o for o in result.options if (o.layout.tp, o.layout.pp) == (8, 2))
    assert whole.replicas == 2
    launch = replica_launch(whole, parse_cluster("4x8xh100-80g@ib0 + 1x8xh100-80g"))
    assert launch.method == "instances" and len(launch.lines) == 4 and launch.more == 0
    # each copy meets at its own master port: 29501, then 29501 + 100 (launch_lines.COPY_PORT_STEP)
    for first, head, master in ((0, "h100-80g@ib0#0", 29501), (2, "h100-80g@ib0#2", 29601)):
        rank0, rank1 = launch.lines[first : first + 2]
        assert rank0.startswith(f"{head}: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 vllm serve")
        assert rank0.endswith(f"--nnodes 2 --node-rank 0 --master-addr <{head}> --master-port {master} --port 8000")
        assert rank1.endswith(f"--nnodes 2 --node-rank 1 --master-addr <{head}> --master-port {master} --headless")
        assert not rank1.startswith(head)
    assert not any("h100-80g#0" in line for line in launch.lines)  # the node off the fabric


def test_free_cards_bound_the_replicas_that_fit_now():
    result = _plan(LLAMA_8B, "1x8xh100-80g,free=3", engines=("vllm",))
    one = _option(result, "vllm", 1)
    assert one.replicas == 8 and one.replicas_now == 3


def test_mig_slices_are_one_replica_each():
    result = _plan("Qwen__Qwen3-0.6B", "1x7xa100-80g-mig-1g.10gb", engines=("vllm",), context_tokens=2048)
    assert result.options[0].replicas == 7


def test_cpu_replicas_are_hosts_that_hold_it():
    result = _plan(LLAMA_8B, "3xcpu-64g + 1xcpu-8g", engines=("llamacpp",))
    cpu = next(o for o in result.options if o.layout.cpu)
    assert cpu.replicas == 3  # 16 GB of bf16 weights fit 0.85 × 64 GiB, not 0.85 × 8 GiB


def test_launch_lines_are_capped_on_a_huge_node():
    cluster = parse_cluster("1x100000xh100-80g")
    result = plan(shape_of(LLAMA_8B), cluster, PlanRequest(engines=("llamacpp",)))
    one = next(o for o in result.options if o.layout.cards == 1)
    launch = replica_launch(one, cluster)
    assert one.replicas == 100_000 and len(launch.lines) == MAX_LINES and launch.more == 100_000 - MAX_LINES


# --- issue 24: launch lines name their devices and port ------------------------------------------------------


def test_one_copy_names_its_card_and_port():
    """One H100 holds one copy of the 8B: the line says which card (0) and which port (8000)."""
    result = _plan(LLAMA_8B, "1x1xh100-80g", engines=("vllm",))
    launch = result.replica_launch(result.options[0])
    assert launch.method == "one" and launch.lines == (
        "h100-80g#0: CUDA_VISIBLE_DEVICES=0 " + result.options[0].evaluation.command + " --port 8000",
    )


def test_a_mixed_node_fixes_the_device_order_its_tensor_split_assumes():
    """A node whose card 0 is an RTX 4090 (24 GiB) and card 1 an L40S (48 GiB): llama.cpp's walk orders them
    largest first and splits 70B Q8_0 0.654465 : 0.345535, in proportion to what each offers (44.5 and 23.5 GiB
    after the CUDA context: 44.5 / 68.0 = 0.6545). The line puts the L40S first (CUDA_VISIBLE_DEVICES=1,0) and
    numbers the cards as the node does (PCI bus order, not CUDA's fastest-first), so the 24 GiB card gets 35 %."""
    cluster = cluster_from_dict(
        {"nodes": [{"name": "mix", "gpus": [{"class": "rtx4090-24g"}, {"class": "l40s-48g"}]}]}, shipped_catalogue()
    )
    shape = shape_of(LLAMA_70B)
    result = plan(shape, cluster, PlanRequest(engines=("llamacpp",), precision="Q8_0"))
    mixed = next(o for o in result.options if "+" in o.layout.gpu_class)
    assert mixed.layout.gpu_class == "l40s-48g+rtx4090-24g" and mixed.evaluation.devices == (1, 0)
    (line,) = result.replica_launch(mixed).lines
    assert line.startswith("mix: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1,0 llama-server ")
    assert "--tensor-split 0.654465,0.345535" in line and line.endswith(" --port 8000")


def test_copies_on_a_node_of_two_classes_take_their_own_class_cards():
    """Two L40S after two RTX 4090s: the L40S copies of the 8B run on cards 2 and 3, not 0 and 1."""
    cluster = cluster_from_dict(
        {"nodes": [{"name": "box", "gpus": [{"class": "rtx4090-24g", "count": 2}, {"class": "l40s-48g", "count": 2}]}]},
        shipped_catalogue(),
    )
    result = plan(shape_of(LLAMA_8B), cluster, PlanRequest(engines=("llamacpp",)))
    l40s = next(o for o in result.options if o.layout.gpu_class == "l40s-48g" and o.layout.cards == 1)
    lines = result.replica_launch(l40s).lines
    assert [line.split(" llama-server")[0] for line in lines] == [
        "box: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2",
        "box: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3",
    ]
    assert lines[0].endswith("--port 8000") and lines[1].endswith("--port 8001")


def test_a_launch_with_a_line_a_node_names_each_node():
    """DeepSeek-V3 dp 16 × ep 16 over two of four H100 nodes: two copies, each the head's line on one node (the API
    server, port 8000) and the --headless line on the other, both naming the head node's address."""
    cluster = "4x8xh100-80g@ib0"
    result = _plan("deepseek-ai__DeepSeek-V3", cluster, engines=("vllm",), data_parallel_size=16)
    (option,) = result.options
    assert option.replicas == 2
    launch = replica_launch(option, parse_cluster(cluster))
    assert len(launch.lines) == 4  # two copies, a line a node
    head, other = launch.lines[:2]
    node = head.split(": ")[0]
    assert head.endswith("--data-parallel-rpc-port 13345 --port 8000") and "--headless" not in head
    assert other.endswith("--data-parallel-start-rank 8 --headless")
    assert f"--data-parallel-address <{node}> " in head and f"--data-parallel-address <{node}> " in other
    assert other.split(": ")[0] != node  # two nodes


def test_copies_over_rpc_are_each_written_on_nodes_of_their_own():
    """Llama-3.1-8B in bf16 (16 GB) on six T4 nodes over eth0: one T4 holds 15 GiB, so a copy is the main server
    on one node and an rpc-server on another; the six nodes hold three copies, and each is written: its main
    server's --rpc names its own rpc-server's node (the engine's <node1> placed), and each copy's RPC port is
    its own (50052, 50152, 50252: launch_lines.COPY_PORT_STEP apart)."""
    result = _plan(LLAMA_8B, "6x1xt4-16g@eth0", engines=("llamacpp",))
    rpc = next(o for o in result.options if o.layout.rpc)
    assert rpc.replicas == 3 and rpc.layout.nodes == 2
    launch = result.replica_launch(rpc)
    assert (launch.method, len(launch.lines), launch.more) == ("instances", 6, 0)
    for k in range(3):
        server, rpc_server = launch.lines[2 * k : 2 * k + 2]
        head, worker, port = f"t4-16g@eth0#{2 * k}", f"t4-16g@eth0#{2 * k + 1}", 50052 + 100 * k
        assert server.startswith(f"{head}: CUDA_VISIBLE_DEVICES=0 llama-server ")
        assert f" --rpc <{worker}>:{port} " in server and server.endswith(" --port 8000")
        assert rpc_server == f"{worker}: CUDA_VISIBLE_DEVICES=0 rpc-server -H 0.0.0.0 -p {port}"


# --- issue 27: launch lines cost an option, not a node -------------------------------------------------------


def test_launch_lines_on_twelve_thousand_nodes_are_the_few_nodes_lines():
    """The lines name runs of alike nodes (found once per cluster), so 12,500 nodes write what 3 do, bar the
    count: vLLM's 8B on 1 H100 is one --data-parallel-size 8 launch a node; 405B at tp 8 × pp 2 spans two nodes
    a copy, and the first four copies (eight lines, MAX_LINES) are the same on 8 nodes as on 12,500."""
    few, many = parse_cluster("3x8xh100-80g@ib0"), parse_cluster("12500x8xh100-80g@ib0")
    small = plan(shape_of(LLAMA_8B), few, PlanRequest(engines=("vllm",)))
    large = plan(shape_of(LLAMA_8B), many, PlanRequest(engines=("vllm",)))
    one, one_of_many = _option(small, "vllm", 1), _option(large, "vllm", 1)
    (line,) = replica_launch(one, few).lines
    (line_of_many,) = replica_launch(one_of_many, many).lines
    assert line.startswith("each of 3 nodes (h100-80g@ib0#0 … h100-80g@ib0#2): CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ")
    assert line.endswith(" --data-parallel-size 8 --port 8000")
    assert line_of_many == line.replace("each of 3 nodes", "each of 12,500 nodes").replace("#2)", "#12499)")
    request = PlanRequest(engines=("vllm",), tensor_parallel_size=8, pipeline_parallel_size=2)
    eight = parse_cluster("8x8xh100-80g@ib0")
    spanning = [
        replica_launch(next(o for o in plan(shape_of(LLAMA_405B), c, request).options if o.layout.nodes == 2), c)
        for c in (eight, many)
    ]
    assert spanning[0].lines == spanning[1].lines and len(spanning[0].lines) == MAX_LINES
    assert (spanning[0].more, spanning[1].more) == (4 - 4, 6_250 - 4)  # 4 copies on 8 nodes, 6,250 on 12,500


def test_alike_nodes_share_a_line_only_when_their_cards_sit_alike():
    """Two H100s on node a, and on node b after two L40S: b's H100s are its cards 2 and 3, so b gets lines of
    its own (not "each of 2 nodes (a … b)" on cards 0 and 1); node c, made like a, shares a's lines."""
    h100 = {"class": "h100-80g", "count": 2}
    nodes = [
        {"name": "a", "gpus": [h100]},
        {"name": "c", "gpus": [h100]},
        {"name": "b", "gpus": [{"class": "l40s-48g", "count": 2}, h100]},
    ]
    cluster = cluster_from_dict({"nodes": nodes}, shipped_catalogue())
    result = plan(shape_of(LLAMA_8B), cluster, PlanRequest(engines=("llamacpp",)))
    option = next(o for o in result.options if o.layout.gpu_class == "h100-80g" and o.layout.cards == 1)
    lines = replica_launch(option, cluster).lines
    assert [line.split(" llama-server")[0] for line in lines] == [
        "each of 2 nodes (a … c): CUDA_VISIBLE_DEVICES=0",
        "each of 2 nodes (a … c): CUDA_VISIBLE_DEVICES=1",
        "b: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2",
        "b: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3",
    ]


def test_a_mixture_of_experts_starts_each_vllm_copy_on_its_own():
    """Mixtral-8x7B bf16 (8 experts) at 4,096 tokens: vLLM holds it on 2 H100s (tp 2 × ep 2, 48.9 GiB a card of
    71.3), 8 // 2 = 4 copies. ``--tensor-parallel-size 2 --data-parallel-size 4`` would not start them: vLLM
    spreads a mixture of experts over dp × tp = 8 ranks (one model of ep 8, every rank stepping with the others),
    so each copy is its own launch on its 2 GPUs and port. SGLang's --dp-size 4 starts 4 tp-2 workers that share
    nothing, one launch as for a dense model."""
    result = _plan("mistralai__Mixtral-8x7B-v0.1", "1x8xh100-80g", engines=("vllm", "sglang"))
    vllm, sglang = _option(result, "vllm", 2), _option(result, "sglang", 2)
    assert (vllm.layout.tp, vllm.layout.ep, vllm.replicas) == (2, 2, 4)
    launch = result.replica_launch(vllm)
    assert launch.method == "instances" and len(launch.lines) == 4
    assert not any("--data-parallel-size" in line for line in launch.lines)
    assert launch.lines[0].startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=0,1 vllm serve")
    assert launch.lines[3].startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=6,7 vllm serve")
    assert launch.lines[3].endswith(
        "--enable-expert-parallel --max-num-seqs 1024 --max-num-batched-tokens 8192 --port 8003"
    )
    assert sglang.replicas == 4
    sglang_launch = result.replica_launch(sglang)
    assert sglang_launch.method == "data-parallel"
    assert sglang_launch.lines[0].endswith("--dp-size 4 --port 8000")
