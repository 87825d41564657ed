"""llama.cpp's walk as gpustack's GGUF selector takes a request: -ngl, --no-cpu-offload, free memory, mixed
classes in one node, RPC as a main node plus single-card servers."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES
from explorer.engines.request import PlanRequest
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.units import GiB

LLAMA = ("llamacpp",)
L70 = "meta-llama__Meta-Llama-3.1-70B"  # 80 blocks: -ngl counts 81 layers, the output included
RTX4090 = 25_757_220_864
RTX3090 = 25_769_803_776


def _plan(spec, name=L70, **req):
    req.setdefault("engines", LLAMA)
    req.setdefault("precision", "Q4_K_M")
    cluster = parse_cluster(spec) if isinstance(spec, str) else spec
    return plan(shape_of(name), cluster, PlanRequest(**req), speed=False)


# --- item 2: -ngl as the seed's _should_skip_for_params reads it ---------------------------------


def test_ngl_zero_is_the_cpu_only():
    """-ngl 0: only the CPU option; no "2 × l40s (80 layers on CPU)" above it."""
    result = _plan("1x2xl40s-48g", n_gpu_layers=0)
    (only,) = result.options
    assert only.layout.cpu and only.evaluation.n_gpu_layers == 0


def test_ngl_between_takes_the_fewest_cards_that_hold_n_layers():
    """-ngl 10 of 81: one L40S holds 10 layers (the output and 9 blocks), so the second card is not used; the
    other 71 blocks stay on the CPU, and no CPU-only option is offered (the user asked for offload)."""
    result = _plan("1x2xl40s-48g", n_gpu_layers=10)
    (gpu,) = result.options
    assert gpu.layout.gpus_per_node == 1 and gpu.evaluation.n_gpu_layers == 10
    assert gpu.evaluation.layers_on_host == 80 - 9
    assert "-ngl 10" in gpu.evaluation.command
    assert any(x.rule == "more-than-needed" and x.layout.gpus_per_node == 2 for x in result.rejected)
    assert any(x.rule == "cpu-offload" and x.layout.cpu for x in result.rejected)


@pytest.mark.parametrize("ngl", [81, 99, -1])
def test_ngl_at_or_above_every_layer_is_full_offload_only(ngl):
    """-ngl ≥ 81 (or llama.cpp's -1): full offload only. The 40 GiB Q4_K_M needs two RTX 4090s; one card or the
    CPU is not offered."""
    result = _plan("1x2xrtx4090-24g,ram=128g", n_gpu_layers=ngl)
    (gpu,) = result.options
    assert gpu.layout.gpus_per_node == 2 and gpu.evaluation.layers_on_host == 0
    assert gpu.evaluation.n_gpu_layers == 81
    assert not any(o.layout.cpu for o in result.options)
    assert any(x.rule == "memory" and x.layout.gpus_per_node == 1 for x in result.rejected)


# --- issue 13: widths counted from a lower bound, narrow ones checked in one allocation -----------------------


def test_widths_start_at_the_lower_bound_and_narrow_ones_are_checked_at_once():
    """70B bf16 on 8 L4s: the offloaded weights (129.5 GiB; token_embd stays on the host) over an L4's room
    (23,034 MiB less the 512 MiB CUDA context = 21.99 GiB) need ⌈5.89⌉ = 6 cards, so widths 1–5 are one refusal
    counted 5. Six hold 21.6 GiB of weights each, with the KV and compute buffers past 21.99: one allocation with
    every layer says so (partial offload below the node's width is never offered); seven hold it."""
    result = _plan("1x8xl4-24g", precision="bf16")
    assert result.pruned == {"memory-lower-bound": 5, "partial-offload": 1, "more-than-needed": 1}
    lower = next(x for x in result.rejected if x.rule == "memory-lower-bound")
    assert lower.layout.gpus_per_node == 5 and "129.5 GiB" in lower.reason
    partial = next(x for x in result.rejected if x.rule == "partial-offload")
    assert partial.layout.gpus_per_node == 6 and partial.reason.startswith("not every layer fits on 6 × l4-24g")
    gpu = next(o for o in result.options if not o.layout.cpu)
    assert gpu.layout.gpus_per_node == 7 and gpu.evaluation.layers_on_host == 0


# --- item 15: --no-cpu-offload --------------------------------------------------------------------


def test_no_cpu_offload_forbids_partial_and_cpu():
    """70B at bf16 (141 GB) on 2 × L40S: with CPU offload, a partial offload and the CPU; without, nothing."""
    allowed = _plan("1x2xl40s-48g", precision="bf16")
    assert any(o.evaluation.layers_on_host for o in allowed.options) and any(o.layout.cpu for o in allowed.options)
    forbidden = _plan("1x2xl40s-48g", precision="bf16", cpu_offload=False)
    assert not forbidden.options
    rules = {x.rule for x in forbidden.rejected}
    assert {"memory", "cpu-offload"} <= rules


def test_no_cpu_offload_keeps_full_offloads():
    result = _plan("1x2xl40s-48g", cpu_offload=False)
    (gpu,) = result.options
    assert gpu.evaluation.layers_on_host == 0 and not gpu.layout.cpu


@pytest.mark.parametrize("ngl", [0, 10])
def test_an_ngl_that_needs_the_cpu_conflicts_with_no_cpu_offload(ngl):
    """The seed's "--gpu-layers N requires CPU offloading": refused with the reason, nothing offered."""
    result = _plan("1x2xl40s-48g", n_gpu_layers=ngl, cpu_offload=False)
    assert not result.options
    (refusal,) = result.rejected
    assert refusal.rule == "cpu-offload" and "--no-cpu-offload forbids" in refusal.reason


def test_the_cpu_launch_carries_no_tensor_split():
    result = _plan("1xcpu-256g", tensor_split=(1.0, 1.0))
    (cpu,) = result.options
    # no split, and -ngl 0 said: llama.cpp 0c1e57098 offloads "auto" to any GPU it finds unless told none
    assert "--tensor-split" not in cpu.evaluation.command and " -ngl 0" in cpu.evaluation.command


# --- item 3: free memory -----------------------------------------------------------------------


@pytest.mark.parametrize(("free", "now"), [(0.1, False), (0.95, True)])
def test_llamacpp_honours_a_cards_free_memory(free, now):
    """The 70B Q4_K_M needs 41.1 GiB on an L40S (44.5 GiB usable): with 10 % free (4.5 GiB) it is not free now,
    as vLLM and SGLang say of their layouts; with 95 % free (42.5 GiB) it is. The CPU option uses the host."""
    result = _plan(f"1x1xl40s-48g,free={free}", engines=("llamacpp", "vllm"))
    gpu = next(o for o in result.options if o.engine == "llamacpp" and not o.layout.cpu)
    assert gpu.per_card.total + CUDA_CONTEXT_BYTES < 0.95 * shape_card_bytes("l40s-48g")
    assert gpu.free_now is now
    assert all(o.free_now is now for o in result.options if o.engine == "vllm")


def shape_card_bytes(name: str) -> int:
    return shipped_catalogue().resolve(name).memory_bytes


# --- item 13: a node of several card classes ------------------------------------------------------


def _box(free_4090: str | None = None):
    group = {"class": "rtx4090-24g", "count": 1}
    if free_4090:
        group["free_bytes"] = free_4090
    node = {"name": "box", "gpus": [group, {"class": "rtx3090-24g", "count": 1}], "host_ram": "128g"}
    return cluster_from_dict({"nodes": [node]}, shipped_catalogue())


def test_a_4090_and_a_3090_are_one_pool():
    """Neither 24 GB card holds Qwen3-32B at Q8_0 (about 33 GiB); together they do, split by memory:
    (25,769,803,776 − 512 MiB) / (25,769,803,776 + 25,757,220,864 − 1 GiB) = 0.500125 for the 3090."""
    result = _plan(_box(), name="Qwen__Qwen3-32B", precision="Q8_0")
    mixed = next(o for o in result.options if "+" in o.layout.gpu_class)
    assert mixed.layout.gpus_per_node == 2 and mixed.evaluation.layers_on_host == 0
    assert set(mixed.layout.gpu_class.split("+")) == {"rtx4090-24g", "rtx3090-24g"}
    share = (RTX3090 - CUDA_CONTEXT_BYTES) / (RTX3090 + RTX4090 - 2 * CUDA_CONTEXT_BYTES)
    assert f"--tensor-split {share:g},{1 - share:g}" in mixed.evaluation.command
    assert mixed.free_now


def test_the_split_follows_free_memory_now():
    """With 14 GiB free on the 4090, a split by capacity puts 16.6 GiB there (not free now); llama.cpp started now
    splits by free memory, 23.5 : 13.5 GiB, and fits. With 10 GiB free it does not."""
    roomy = next(
        o for o in _plan(_box("14GiB"), name="Qwen__Qwen3-32B", precision="Q8_0").options if "+" in o.layout.gpu_class
    )
    on_4090 = next(c for c in roomy.evaluation.cards if c.capacity == RTX4090)
    assert on_4090.total + CUDA_CONTEXT_BYTES > 14 * GiB  # the planned split would not start now
    assert roomy.free_now
    note = next(n for n in roomy.evaluation.notes if "splits by free memory" in n)
    assert "--tensor-split 0.635,0.365" in note  # (24 − 0.5) : (14 − 0.5) GiB
    tight = next(
        o for o in _plan(_box("10GiB"), name="Qwen__Qwen3-32B", precision="Q8_0").options if "+" in o.layout.gpu_class
    )
    assert not tight.free_now


def test_a_mixed_layout_is_not_offered_when_one_class_holds_it():
    result = _plan(_box(), name="meta-llama__Meta-Llama-3.1-8B", precision="Q4_K_M")
    assert not any("+" in o.layout.gpu_class for o in result.options)


# --- item 14: RPC ----------------------------------------------------------------------------------


def test_rpc_is_the_main_nodes_cards_plus_single_card_servers():
    """2 nodes × 2 RTX 4090 at 70B Q6_K (55.1 GiB on the cards): the main node's 2 cards (47 GiB usable) leave 15
    layers on the CPU; with one single-card RPC server from the other node, 2 + 1 = 3 cards (70.5 GiB) hold every
    layer, so the 4th card is not needed."""
    result = _plan("2x2xrtx4090-24g@lan,ram=256g", precision="Q6_K")
    rpc = next(o for o in result.options if o.layout.rpc)
    assert (rpc.layout.gpus_per_node, rpc.layout.rpc_servers, rpc.layout.cards) == (2, 1, 3)
    assert rpc.evaluation.layers_on_host == 0
    assert "--rpc <node1>:50052" in rpc.evaluation.command and "50053" not in rpc.evaluation.command
    assert any(x.rule == "more-than-needed" and x.layout.rpc_servers == 2 for x in result.rejected)


def test_rpc_past_the_brim_also_offers_the_fewest_servers_with_headroom():
    """70B Q4_K_M at 16,384 tokens on 4 single-RTX 4090 nodes: one RPC server (2 cards) holds every layer at
    24,447,835,780 of 25,220,349,952 usable bytes (96.9 %) and one sequence; the walk stopped there. Now it also
    offers two servers (16,290,763,397 bytes, 64.6 %, 5 sequences), which ranks first; the third is more than
    needed."""
    result = _plan("4x1xrtx4090-24g@eth", context_tokens=16_384)
    rpc = {o.layout.rpc_servers: o for o in result.options if o.layout.rpc}
    assert (rpc[1].per_card.total, rpc[1].per_card.usable, rpc[1].evaluation.max_concurrency) == (
        24_447_835_780,
        25_220_349_952,
        1,
    )
    assert (rpc[2].per_card.total, rpc[2].evaluation.max_concurrency) == (16_290_763_397, 5)
    assert result.options[0] is rpc[2]
    assert any(x.rule == "more-than-needed" and x.layout.rpc_servers == 3 for x in result.rejected)


def test_rpc_partial_offload_only_with_cpu_offload():
    """70B at bf16 does not fit 4 RTX 4090s: RPC then offloads as many layers as the cards take, only when CPU
    offload is allowed."""
    allowed = _plan("2x2xrtx4090-24g@lan,ram=512g", precision="bf16")
    partial = [o for o in allowed.options if o.layout.rpc]
    assert partial and partial[0].evaluation.layers_on_host > 0 and partial[0].layout.rpc_servers == 2
    node_only = next(o for o in allowed.options if not o.layout.rpc and not o.layout.cpu)
    assert partial[0].evaluation.layers_on_host < node_only.evaluation.layers_on_host
    forbidden = _plan("2x2xrtx4090-24g@lan,ram=512g", precision="bf16", cpu_offload=False)
    assert not forbidden.options


@pytest.mark.parametrize("cpu", ["epyc-9654", "xeon-8480", "apple-m2-max", "rpi5", "i9-14900k"])
def test_a_cpu_of_the_table_in_the_cluster_spec_keeps_every_llamacpp_option(cpu):
    """Issue 24: ``cpu=NAME`` with any CPU of data/cpus.csv made every llama.cpp option fail ("not a CPU build")."""
    named = _plan(f"1x1xrtx4090-24g,cpu={cpu}", name="meta-llama__Meta-Llama-3.1-8B", engines=("llamacpp",))
    plain = _plan("1x1xrtx4090-24g", name="meta-llama__Meta-Llama-3.1-8B", engines=("llamacpp",))
    assert "llamacpp-config" not in named.pruned
    assert [o.label for o in named.options] == [o.label for o in plain.options] != []
