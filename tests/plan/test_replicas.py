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


def test_70b_on_eight_h100_tp2_runs_four_replicas_in_one_launch_each_engine():
    """70B bf16 at 4,096 tokens fits 2 H100s (tp 2): 8 // 2 = 4 copies; vLLM starts them with --data-parallel-size,
    SGLang with --dp-size; llama.cpp runs four servers on GPUs 0,1 / 2,3 / 4,5 / 6,7."""
    result = _plan(LLAMA_70B, "1x8xh100-80g")
    vllm, sglang, llama = (_option(result, e, 2) for e in ("vllm", "sglang", "llamacpp"))
    assert (vllm.replicas, sglang.replicas, llama.replicas) == (4, 4, 4)
    assert _option(result, "vllm", 4).replicas == 2 and _option(result, "vllm", 8).replicas == 1
    launch = result.replica_launch(vllm)
    assert launch.method == "data-parallel" and launch.lines[0].endswith("--tensor-parallel-size 2 "
                                                                       "--max-model-len 4096 --data-parallel-size 4")  # fmt: skip
    assert result.replica_launch(sglang).lines[0].endswith("--dp-size 4")
    servers = result.replica_launch(llama)
    assert servers.method == "instances" and len(servers.lines) == 4
    assert servers.lines[3].startswith("h100-80g#0: CUDA_VISIBLE_DEVICES=6,7 llama-server")
    assert servers.lines[3].endswith("--port 8003")


def test_json_carries_replicas_aggregate_and_launch():
    out = _plan(LLAMA_70B, "1x8xh100-80g", engines=("vllm",), concurrency=4).to_dict()
    opt = next(o for o in out["options"] if o["tp"] == 2)
    assert opt["replicas"] == 4 and opt["replicas_now"] == 4 and opt["tier"] == 1
    agg = opt["aggregate_decode_tokens_per_s"]
    # four replicas × four sequences × one sequence's rate
    assert agg["estimate"] == pytest.approx(16 * opt["decode_tokens_per_s"]["estimate"], rel=1e-3)
    assert agg["replicas"] == 4 and agg["concurrency"] == 4
    assert opt["replica_launch"]["method"] == "data-parallel"
    assert out["best_per_engine"] == {"vllm": 1}


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
