"""Replicas: how many copies of an option the cluster holds, their aggregate speed and their launch lines."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.common import PlanRequest
from explorer.plan.planner import plan
from explorer.plan.replicas import MAX_LINES, replica_launch
from explorer.sources.shipped import parse_cluster

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
    assert launch.method == "data-parallel" and launch.lines[0].endswith("--tensor-parallel-size 2 "
                                                                       "--max-model-len 4096 --data-parallel-size 4")  # fmt: skip
    assert result.replica_launch(sglang).lines[0].endswith("--tp-size 4 --context-length 4096 --dp-size 2")
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
    result = _plan(LLAMA_70B, "1x8xh100-80g,ram=40g", engines=("vllm",), swap_space_gib=4)
    tp2 = _option(result, "vllm", 2)
    assert tp2.replicas == 3 and result.replica_launch(tp2).lines[0].endswith("--data-parallel-size 3")
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
    beside them never joins one."""
    result = _plan(LLAMA_405B, "4x8xh100-80g@ib0 + 1x8xh100-80g", engines=("vllm",))
    whole = next(o for o in result.options if (o.layout.tp, o.layout.pp) == (8, 2))
    assert whole.replicas == 2
    launch = replica_launch(whole, parse_cluster("4x8xh100-80g@ib0 + 1x8xh100-80g"))
    assert launch.method == "instances" and len(launch.lines) == 2
    assert all(line.count("h100-80g@ib0#") == 2 for line in launch.lines)


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


def test_a_launch_with_a_line_a_node_names_each_node():
    """DeepSeek-V3 dp 16 × ep 16 over two of four H100 nodes: two copies, each the head's line on one node and the
    --headless line on the other."""
    cluster = "4x8xh100-80g@ib0"
    result = _plan("deepseek-ai__DeepSeek-V3", cluster, engines=("vllm",), data_parallel_size=16)
    (option,) = result.options
    assert option.replicas == 2
    launch = replica_launch(option, parse_cluster(cluster))
    assert len(launch.lines) == 2
    head, other = launch.lines[0].split("; ")
    assert head.endswith("--data-parallel-rpc-port 13345") and "--headless" not in head
    assert other.endswith("--data-parallel-start-rank 8 --headless")
    assert head.split(": ")[0] != other.split(": ")[0]  # two nodes
