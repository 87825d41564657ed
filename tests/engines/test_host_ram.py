"""Host RAM a vLLM or SGLang launch claims: vLLM's swap space, SGLang's hierarchical-cache pool."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines import sglang
from explorer.engines.host_ram import sglang_claim, vllm_claim
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.units import GiB

L70 = "meta-llama__Meta-Llama-3.1-70B"
L8 = "meta-llama__Meta-Llama-3.1-8B"


def test_vllm_refuses_a_node_whose_ram_cannot_take_the_swap_space():
    """--swap-space 4 GiB (vLLM ≤ 0.11's default, given here at 0.17.1, the last release with the flag) × 8 GPUs = 32 GiB;
    vLLM allows 70 % of a 40 GiB node, 28 GiB: the 8 cards are refused with the numbers; the fewest (2) and the
    scale-up to 4 claim 8 and 16 GiB and run. With --swap-space 0 (vLLM without swap space) 8 cards run too."""
    swap = PlanRequest(engines=("vllm",), swap_space_gib=4, vllm_version="0.17.1")
    result = plan(shape_of(L70), parse_cluster("1x8xh100-80g,ram=40g"), swap, speed=False)
    assert {o.layout.cards for o in result.options} == {2, 4}
    assert all(o.evaluation.host.overhead == 4 * GiB * o.layout.cards for o in result.options)
    (refused,) = [x for x in result.rejected if x.rule == "host-ram"]
    assert refused.layout.tp == 8
    assert refused.reason == (
        "vllm claims 32.0 GiB of host RAM on each node (--swap-space 4 GiB × 8 GPUs); "
        "node h100-80g#0 has 40.0 GiB and vllm allows 70 % of it, 28.0 GiB"
    )
    tp4 = next(o for o in result.options if o.layout.tp == 4)
    host = tp4.evaluation.host
    assert (host.overhead, host.usable, host.capacity) == (16 * GiB, int(40 * GiB * 0.7), 40 * GiB)
    no_swap = plan(
        shape_of(L70),
        parse_cluster("1x8xh100-80g,ram=40g"),
        PlanRequest(engines=("vllm",), swap_space_gib=0),
        speed=False,
    )
    assert 8 in {o.layout.cards for o in no_swap.options}
    assert all(o.evaluation.host is None for o in no_swap.options)
    current = plan(shape_of(L70), parse_cluster("1x8xh100-80g,ram=40g"), PlanRequest(engines=("vllm",)), speed=False)
    assert 8 in {o.layout.cards for o in current.options}
    assert all(o.evaluation.host is None for o in current.options)
    eight = Layout(engine="vllm", gpu_class="h100-80g", gpus_per_node=8, tp=8)
    assert vllm_claim(eight, PlanRequest(vllm_version="0.11")).swap_bytes == 8 * 4 * GiB  # 0.11's default
    assert vllm_claim(eight, PlanRequest(vllm_version="0.12")).swap_bytes == 0
    # from 0.18.0 there is no --swap-space: nothing is charged (the planner refuses one asked: tests/plan/test_command_sweep)
    assert vllm_claim(eight, PlanRequest(vllm_version="0.18.0", swap_space_gib=4)).swap_bytes == 0


def test_vllm_claim_counts_the_gpus_on_the_node():
    layout = Layout(engine="vllm", gpu_class="h100-80g", nodes=2, gpus_per_node=8, tp=8, pp=2)
    claim = vllm_claim(layout, PlanRequest(swap_space_gib=2.5, vllm_version="0.17.1"))
    assert claim.bytes_per_node == int(2.5 * GiB) * 8 and claim.share == 0.7


def test_sglang_hierarchical_cache_claims_its_host_pool():
    """--hicache-size 100 GB per rank on one H100: 100e9 bytes = 93.1 GiB; SGLang leaves 10 GiB free, so a 64 GiB
    node (54 GiB left) refuses it and a 128 GiB node (118 GiB left) takes it. Off, SGLang claims nothing."""
    request = PlanRequest(engines=("sglang",), hierarchical_cache=True, hicache_size_gb=100)
    small = plan(shape_of(L8), parse_cluster("1x1xh100-80g,ram=64g"), request, speed=False)
    assert not small.options
    (refused,) = [x for x in small.rejected if x.rule == "host-ram"]
    assert "claims 93.1 GiB of host RAM" in refused.reason and "so 54.0 GiB is left for it" in refused.reason
    big = plan(shape_of(L8), parse_cluster("1x1xh100-80g,ram=128g"), request, speed=False)
    (option,) = big.options
    assert option.evaluation.host.kv_cache == 100 * 10**9
    assert "--enable-hierarchical-cache --hicache-size 100" in option.evaluation.command
    off = plan(shape_of(L8), parse_cluster("1x1xh100-80g,ram=64g"), PlanRequest(engines=("sglang",)), speed=False)
    assert off.options and off.options[0].evaluation.host is None


def test_sglang_ratio_is_twice_the_device_pool_per_rank():
    """The default --hicache-ratio 2: each rank's host pool is twice its device KV pool (static share − weights)."""
    g = shipped_catalogue().resolve("h100-80g")
    shape = shape_of(L70)
    layout = Layout(engine="sglang", gpu_class=g.name, gpus_per_node=4, tp=4)
    ev = sglang.evaluate(shape, shape.precision, layout, g, PlanRequest(), "m")
    claim = sglang_claim(layout, ev, PlanRequest(hierarchical_cache=True))
    pool = ev.free_needed_bytes - ev.cards[0].weights
    assert claim.kv_bytes == int(pool * 2.0) * 4


def test_host_ram_free_now():
    """A node with the RAM but not free now: the option stands and is not free now (--swap-space 4: 2 and 4 cards
    claim 8 and 16 GiB of the 20 GiB free, 8 cards 32 GiB)."""
    node = {
        "name": "box",
        "gpus": [{"class": "h100-80g", "count": 8}],
        "host_ram": "256g",
        "host_free": "20g",
    }
    cluster = cluster_from_dict({"nodes": [node]}, shipped_catalogue())
    result = plan(
        shape_of(L70), cluster, PlanRequest(engines=("vllm",), swap_space_gib=4, vllm_version="0.17.1"), speed=False
    )
    free = {o.layout.cards: o.free_now for o in result.options}
    assert free == {2: True, 4: True, 8: False}  # 4 GiB a card vs 20 GiB
