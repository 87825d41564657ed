"""explorer.speed.estimate: the roofline bound and estimate, with worked numbers."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corpus import CONFIGS, shape_of

from explorer.artifacts.offer import original_artifact, what_if_artifact
from explorer.cli import main
from explorer.engines.evaluation import Evaluation
from explorer.engines.layouts import Layout
from explorer.engines.names import ENGINES
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.errors import CatalogueError, PlanError
from explorer.model.artifacts import Artifact
from explorer.model.weights import weight_breakdown
from explorer.plan.planner import plan, recheck
from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
from explorer.speed.estimate import SpeedSettings, speed_of, tokens_per_s_vs_context
from explorer.speed.floor import decode_floor_s, generation, pace_for, speed_facts, unified_reach
from explorer.speed.prices import PriceTable, parse_prices
from explorer.speed.profile import experts_touched
from explorer.speed.roofline import dcp_exchange_bytes, dispatch_bytes, part_step_cost, placement, prefill_s

GPU_ENGINES = ("vllm", "sglang")
SETTINGS = SpeedSettings()
#: vLLM's and SGLang's speed facts on a Hopper-class card (explorer/engines: one fit for both), and an NVLink
#: all-reduce in practice (explorer/speed/settings.py): docs/notes/speed_model.md
VLLM_TOKEN_S = 0.75e-3
DENSE_FLOOR_S, MOE_FLOOR_S = 0.025e-3, 0.0625e-3
NVLINK_S = 25e-6

H100_BW = 3.35e12
LLAMA8B = "meta-llama__Meta-Llama-3.1-8B"
LLAMA70B = "meta-llama__Meta-Llama-3.1-70B"
#: Llama-3.1-8B at bf16: 16,060,522,496 weight bytes, of which the input embedding
#: 128,256 × 4,096 × 2 = 1,050,673,152 is a row gather, not a read.
LLAMA8B_READ = 16_060_522_496 - 1_050_673_152  # 15,009,849,344
LLAMA8B_KV_PER_TOKEN = 131_072  # 32 layers × 2 × 8 heads × 128 × 2 bytes


def artifact_for(shape, quant: str | None) -> Artifact:
    """The original weights, or a what-if at ``quant`` (a GGUF file for a GGUF mix), as the planner offers them."""
    return what_if_artifact(shape, quant) if quant else original_artifact(shape)


def hand_option(
    name: str, layout: Layout, gpu_class: str | None, *, quant: str | None = None, layers_on_host: int = 0
) -> tuple:
    """An option built by hand (any engine, any layout), and its shape."""
    shape = shape_of(name)
    artifact = artifact_for(shape, quant)
    evaluation = Evaluation(
        cards=(), host=None, max_context_tokens=0, max_concurrency=0, command="", layers_on_host=layers_on_host
    )
    gpu = shipped_catalogue().get(gpu_class) if gpu_class else None
    option = Option(
        layout=layout,
        artifact=artifact,
        precision=artifact.quant,
        bits_per_weight=0.0,
        evaluation=evaluation,
        free_now=True,
        hosts=1,
        gpu=gpu,
    )
    return option, shape


def one_card(engine: str = "vllm", gpu: str = "h100-80g", **kw) -> Layout:
    return Layout(engine=engine, gpu_class=gpu, **kw)


# --- decode: worked numbers ---------------------------------------------------------


def test_llama_8b_on_one_h100_is_bandwidth_over_bytes_read():
    option, shape = hand_option(LLAMA8B, one_card(), "h100-80g")
    # Before KV: 3.35e12 / 15,009,849,344 = 223.2 tokens/s. Counting the embedding table
    # as read (16.06e9 bytes) would give 208.6, below what a perfect engine could do.
    alone = speed_of(option, shape, PlanRequest(context_tokens=1))
    assert alone.decode_bound_tokens_per_s == pytest.approx(H100_BW / (LLAMA8B_READ + LLAMA8B_KV_PER_TOKEN), rel=1e-9)
    assert 223.1 < alone.decode_bound_tokens_per_s < 223.3
    # At 8,192 tokens the KV read adds 8,192 × 131,072 = 1,073,741,824 bytes: 3.35e12 / 16,083,591,168 = 208.3.
    at_8k = speed_of(option, shape, PlanRequest(context_tokens=8192))
    assert at_8k.decode_bound_tokens_per_s == pytest.approx(H100_BW / (LLAMA8B_READ + 8192 * LLAMA8B_KV_PER_TOKEN))
    assert at_8k.bound_by == "memory bandwidth"
    # the estimate: the bound's step ÷ 0.6, plus vLLM's per-token overhead (0.75 ms on a Hopper card)
    step = 1 / at_8k.decode_bound_tokens_per_s / 0.6 + VLLM_TOKEN_S
    assert at_8k.decode_estimate_tokens_per_s == pytest.approx(1 / step)
    assert at_8k.decode_aggregate_bound_tokens_per_s == at_8k.decode_bound_tokens_per_s


def test_concurrency_shares_the_weight_read():
    option, shape = hand_option(LLAMA8B, one_card(), "h100-80g")
    eight = speed_of(option, shape, PlanRequest(context_tokens=4096, concurrency=8))
    # 8 sequences: the weights once, 8 KV caches: 15,009,849,344 + 8 × 4,096 × 131,072 bytes a step.
    step = (LLAMA8B_READ + 8 * 4096 * LLAMA8B_KV_PER_TOKEN) / H100_BW
    assert eight.decode_bound_tokens_per_s == pytest.approx(1 / step)
    assert eight.decode_aggregate_bound_tokens_per_s == pytest.approx(8 / step)


def test_a_memory_bound_moe_decodes_faster_than_a_dense_model_of_its_size():
    request = PlanRequest(context_tokens=4096, engines=("vllm",))
    moe = plan(shape_of("Qwen__Qwen3-30B-A3B"), parse_cluster("1x1xh100-80g"), request).options[0]
    dense = plan(shape_of("Qwen__Qwen3-32B"), parse_cluster("1x1xh100-80g"), request).options[0]
    # Qwen3-30B-A3B bf16: 61.06 GB, of which experts 48 layers × 128 × 3 × 768 × 2,048 × 2 = 57.98 GB and
    # the embedding 151,936 × 2,048 × 2 = 0.62 GB. One token reads the rest and 8/128 of the experts.
    experts = 48 * 128 * 3 * 768 * 2048 * 2
    read = 61_064_245_248 - experts - 151_936 * 2048 * 2 + experts // 16
    kv = 4096 * 48 * 2 * 4 * 128 * 2
    assert moe.speed.decode_bound_tokens_per_s == pytest.approx(H100_BW / (read + kv), rel=1e-6)
    assert moe.speed.decode_bound_tokens_per_s > 9 * dense.speed.decode_bound_tokens_per_s


def test_a_batch_touches_more_experts():
    assert experts_touched(1, 128, 8) == pytest.approx(1 / 16)
    assert experts_touched(8, 128, 8) == pytest.approx(1 - (15 / 16) ** 8)  # 40.3 %
    assert experts_touched(64, 128, 8) > 0.98
    option, shape = hand_option("Qwen__Qwen3-30B-A3B", one_card(), "h100-80g")
    one, many = (speed_of(option, shape, PlanRequest(context_tokens=1024, concurrency=n)) for n in (1, 64))
    assert many.decode_aggregate_bound_tokens_per_s < 64 * one.decode_bound_tokens_per_s


def test_sliding_windows_stop_the_kv_read_growing():
    option, shape = hand_option("mistralai__Mistral-7B-v0.1", one_card(), "h100-80g")
    at = {
        c: speed_of(option, shape, PlanRequest(context_tokens=c)).decode_bound_tokens_per_s for c in (2048, 4096, 8192)
    }
    assert at[2048] > at[4096] == at[8192]  # every layer keeps a 4,096-token window


# --- parallelism ---------------------------------------------------------------------


def test_tensor_parallel_adds_two_all_reduces_a_layer():
    option, shape = hand_option(LLAMA8B, one_card(gpus_per_node=2, tp=2), "h100-80g")
    got = speed_of(option, shape, PlanRequest(context_tokens=4096))
    wb = weight_breakdown(shape, shape.precision, 2, 1)
    read = wb.decoder_bytes + wb.head_bytes + 4096 * LLAMA8B_KV_PER_TOKEN // 2
    # ring all-reduce of 4,096 × 2 bytes over 450 GB/s one way (900 bidirectional), 5 µs each, 2 a layer
    comm = 2 * 32 * (5e-6 + 2 * (2 - 1) / 2 * 4096 * 2 / 450e9)
    assert got.decode_bound_tokens_per_s == pytest.approx(1 / (read / H100_BW + comm), rel=1e-9)
    single, _ = hand_option(LLAMA8B, one_card(), "h100-80g")
    alone = speed_of(single, shape, PlanRequest(context_tokens=4096)).decode_bound_tokens_per_s
    assert alone < got.decode_bound_tokens_per_s < 2 * alone


def test_pipeline_stages_add_up_for_one_sequence_and_overlap_for_many():
    shape = shape_of(LLAMA70B)
    pp2, _ = hand_option(LLAMA70B, one_card(gpus_per_node=2, pp=2), "h100-80g")
    tp2, _ = hand_option(LLAMA70B, one_card(gpus_per_node=2, tp=2), "h100-80g")
    one = speed_of(pp2, shape, PlanRequest(context_tokens=2048))
    assert (
        one.decode_bound_tokens_per_s < speed_of(tp2, shape, PlanRequest(context_tokens=2048)).decode_bound_tokens_per_s
    )
    # 16 sequences in two micro-batches of 8: the stages work at once, so nearly twice the one-batch rate
    many = speed_of(pp2, shape, PlanRequest(context_tokens=2048, concurrency=16))
    assert many.decode_aggregate_bound_tokens_per_s > 1.8 * 8 * one.decode_bound_tokens_per_s


def test_across_nodes_the_fabric_carries_the_hand_off():
    shape = shape_of(LLAMA70B)
    near, _ = hand_option(LLAMA70B, Layout(engine="vllm", gpu_class="h100-80g", gpus_per_node=2, pp=2), "h100-80g")
    far, _ = hand_option(
        LLAMA70B, Layout(engine="vllm", gpu_class="h100-80g", fabric="eth10g", nodes=2, pp=2), "h100-80g"
    )
    a, b = (speed_of(o, shape, PlanRequest(context_tokens=2048)).decode_bound_tokens_per_s for o in (near, far))
    # one hand-off of 8,192 × 2 bytes: 1.25 GB/s (10 Gb/s) + 10 µs against 450 GB/s + 5 µs
    assert 1 / b - 1 / a == pytest.approx((10e-6 + 16384 / 1.25e9) - (5e-6 + 16384 / 450e9), rel=1e-6)


# --- host and CPU ------------------------------------------------------------------


def _layer_bytes_q4_k_m(context: int) -> float:
    """One Llama-3.1-70B layer at the Q4_K_M what-if (4.89 bits a weight) plus its fp16 KV."""
    matrices = [8192 * 8192, 1024 * 8192, 1024 * 8192, 8192 * 8192, 28672 * 8192, 28672 * 8192, 8192 * 28672]
    return sum(math.ceil(n * 4.89 / 8) for n in matrices) + 2 * 8192 * 2 + context * 2 * 8 * 128 * 2


def test_partial_offload_slows_in_proportion_to_the_layers_on_the_host():
    shape = shape_of(LLAMA70B)
    layout = Layout(engine="llamacpp", gpu_class="rtx4090-24g")
    times = {}
    for k in (0, 8, 16, 32, 48):
        option, _ = hand_option(LLAMA70B, layout, "rtx4090-24g", quant="Q4_K_M", layers_on_host=k)
        times[k] = 1 / speed_of(option, shape, PlanRequest(context_tokens=4096)).decode_bound_tokens_per_s
    per_layer = _layer_bytes_q4_k_m(4096) * (1 / 100e9 - 1 / 1008e9)  # 5.26 − 0.52 ms: host DDR vs GDDR6X
    hop = 20e-6 + 8192 * 4 / 32e9  # one PCIe hand-off of f32 hidden states
    for k in (8, 16, 32, 48):
        assert times[k] - times[0] == pytest.approx(k * per_layer + hop, rel=1e-6)
    # 60 % of the layers on the CPU: at most 100 GB/s over their bytes, under 4 tokens/s
    option, _ = hand_option(LLAMA70B, layout, "rtx4090-24g", quant="Q4_K_M", layers_on_host=48)
    slow = speed_of(option, shape, PlanRequest(context_tokens=4096))
    assert slow.decode_bound_tokens_per_s < 100e9 / (48 * _layer_bytes_q4_k_m(4096)) < 4
    assert slow.bound_by == "host memory"
    faster = speed_of(
        option, shape, PlanRequest(context_tokens=4096), SpeedSettings(host_bandwidth_bytes_per_s=400 * 10**9)
    )
    assert faster.decode_bound_tokens_per_s > 3 * slow.decode_bound_tokens_per_s


def test_cpu_only_and_unified_memory_read_at_their_own_bandwidth():
    shape = shape_of(LLAMA8B)
    cpu, _ = hand_option(LLAMA8B, Layout(engine="llamacpp", gpu_class="cpu", gpus_per_node=0, cpu=True), None)
    got = speed_of(cpu, shape, PlanRequest(context_tokens=1024))
    assert got.decode_bound_tokens_per_s == pytest.approx(100e9 / (LLAMA8B_READ + 1024 * LLAMA8B_KV_PER_TOKEN))
    assert got.bound_by == "host memory" and got.cost_per_million_tokens is None
    mac, _ = hand_option(LLAMA8B, Layout(engine="llamacpp", gpu_class="m2-ultra-192g", unified=True), "m2-ultra-192g")
    got = speed_of(mac, shape, PlanRequest(context_tokens=1024))
    assert got.decode_bound_tokens_per_s == pytest.approx(800e9 / (LLAMA8B_READ + 1024 * LLAMA8B_KV_PER_TOKEN))


def test_the_nodes_cpu_sets_the_host_bandwidth():
    shape = shape_of(LLAMA8B)
    read = LLAMA8B_READ + 1024 * LLAMA8B_KV_PER_TOKEN
    layout = Layout(engine="llamacpp", gpu_class="cpu", gpus_per_node=0, cpu=True)
    option, _ = hand_option(LLAMA8B, layout, None)
    request = PlanRequest(context_tokens=1024)
    # a Raspberry Pi 5 (data/cpus.csv): 17.064 GB/s, where the default 100 GB/s made it 5.9 times faster
    pi = dataclasses.replace(option, node=parse_cluster("1xcpu-16g,cpu=rpi5").nodes[0])
    assert speed_of(pi, shape, request).decode_bound_tokens_per_s == pytest.approx(17.064e9 / read)
    stated = dataclasses.replace(option, node=parse_cluster("1xcpu-64g,bw=60").nodes[0])
    assert speed_of(stated, shape, request).decode_bound_tokens_per_s == pytest.approx(60e9 / read)
    # a CPU-only run on a Mac reads at the share of the chip's bandwidth its CPU threads reach (issue 26: an
    # M2 Max's 400 GB/s × 0.5 = 200 GB/s, HOST_REACH), not the default, and says so
    mac = dataclasses.replace(option, node=parse_cluster("1x1xm2-max-64g").nodes[0])
    assert speed_of(mac, shape, request).decode_bound_tokens_per_s == pytest.approx(200e9 / read)
    (reach,) = speed_of(mac, shape, request).assumptions
    assert "50% of its nominal 400 GB/s (200 GB/s)" in reach and "bw=" in reach
    # cpu=NAME of an Apple Ultra: 800 GB/s × 0.5; a stated bw= is taken as measured
    ultra = dataclasses.replace(option, node=parse_cluster("1xcpu-192g,cpu=apple-m2-ultra").nodes[0])
    assert speed_of(ultra, shape, request).decode_bound_tokens_per_s == pytest.approx(400e9 / read)
    told = dataclasses.replace(option, node=parse_cluster("1xcpu-192g,cpu=apple-m2-ultra,bw=300").nodes[0])
    assert speed_of(told, shape, request).decode_bound_tokens_per_s == pytest.approx(300e9 / read)
    assert speed_of(told, shape, request).assumptions == ()
    # issue 26: a plan that assumed the default host bandwidth says so; one that named its CPU does not
    unnamed = dataclasses.replace(option, node=parse_cluster("1xcpu-64g").nodes[0])
    (note,) = speed_of(unnamed, shape, request).assumptions
    assert "assumed 100 GB/s of host memory bandwidth" in note and "cpu=" in note
    assert speed_of(pi, shape, request).assumptions == speed_of(stated, shape, request).assumptions == ()


def test_kernel_floors_collectives_and_overhead_hold_the_estimate_not_the_bound():
    # DeepSeek-V3 on 8 × H200 at batch 1 with SGLang: its floors are 3 dense layers × 0.025 ms + 58 MoE layers
    # × 0.0625 ms = 3.7 ms; the collectives 2 × 61 all-reduces × (25 µs + 2 × 7/8 × 7,168 × 2 bytes / 450 GB/s);
    # the per-token overhead 0.75 ms. The roofline's share (about 2 ms at 0.6) is below the floors.
    shape = shape_of("deepseek-ai__DeepSeek-V3")
    pace = pace_for(speed_facts("sglang"), shipped_catalogue().get("h200-141g"), 0.6)
    assert decode_floor_s(shape, pace) == pytest.approx(3 * DENSE_FLOOR_S + 58 * MOE_FLOOR_S + VLLM_TOKEN_S)
    layout = Layout(engine="sglang", gpu_class="h200-141g", gpus_per_node=8, tp=8)
    option, _ = hand_option("deepseek-ai__DeepSeek-V3", layout, "h200-141g")
    got = speed_of(option, shape, PlanRequest(context_tokens=384))
    collectives = 2 * 61 * (NVLINK_S + 2 * 7 / 8 * 7168 * 2 / 450e9)
    floors = 3 * DENSE_FLOOR_S + 58 * MOE_FLOOR_S
    assert got.decode_estimate_tokens_per_s == pytest.approx(1 / (floors + collectives + VLLM_TOKEN_S))  # 133.2
    assert got.decode_bound_tokens_per_s > 4 * got.decode_estimate_tokens_per_s
    assert "kernel floors" in got.breakdown and "+ 0.75 ms a token" in got.breakdown
    # a 70B on two H100s is far from it: bound ÷ 0.6, its all-reduces at 25 µs in place of the bound's 5 µs,
    # and the per-token overhead
    big, big_shape = hand_option("meta-llama__Meta-Llama-3.1-70B", one_card(gpus_per_node=2, tp=2), "h100-80g")
    fast = speed_of(big, big_shape, PlanRequest(context_tokens=1024))
    per = 2 * 1 / 2 * 8192 * 2 / 450e9
    memory = 1 / fast.decode_bound_tokens_per_s - 160 * (5e-6 + per)
    assert 1 / fast.decode_estimate_tokens_per_s == pytest.approx(memory / 0.6 + 160 * (NVLINK_S + per) + VLLM_TOKEN_S)
    # llama.cpp's per-token overhead (1.5 ms: sampling, scheduling, the graph's launch) beside its layer floors
    assert decode_floor_s(shape_of(LLAMA8B), pace_for(speed_facts("llamacpp"), None, 0.6)) == pytest.approx(
        32 * 0.025e-3 + 1.5e-3
    )


def test_tensor_parallel_moe_layouts_no_longer_collapse_onto_one_floor():
    # issue 23: with a fixed 0.55 ms a MoE layer on several cards, gpt-oss-120b on H100 estimated 185 tok/s at
    # tp 1 and 50.5 at tp 2, 4 and 8. Now one card reads its 5 GB a token (1.5 ms, ÷ 0.6 = 2.5 ms, above the 36
    # MoE layers' floors, 36 × 0.0625 = 2.25 ms); from tp 2 on the floors rule and each layout adds its 72
    # all-reduces at 25 µs; every step adds vLLM's 0.75 ms a token.
    rates, bounds = {}, {}
    for tp in (1, 2, 4, 8):
        option, shape = hand_option("openai__gpt-oss-120b", one_card(gpus_per_node=tp, tp=tp), "h100-80g")
        got = speed_of(option, shape, PlanRequest(context_tokens=1024))
        rates[tp], bounds[tp] = got.decode_estimate_tokens_per_s, got.decode_bound_tokens_per_s
    assert 1 / rates[1] == pytest.approx(1 / bounds[1] / 0.6 + VLLM_TOKEN_S)  # 306.7
    for tp in (2, 4, 8):
        collectives = 72 * (NVLINK_S + 2 * (tp - 1) / tp * 2880 * 2 / 450e9)
        assert 1 / rates[tp] == pytest.approx(36 * MOE_FLOOR_S + collectives + VLLM_TOKEN_S)  # 208.3
    # InferenceX measured 269 tok/s a sequence at tp 8 (4 together): 0.77 × of it. No published tp 1 / tp 2 pair
    # on H100 was found, so whether tp 2 beats tp 1 there is left to the model: at batch 1 it does not.


def test_gpt_oss_120b_on_a100_nvlink_is_not_faster_at_tp2_as_published():
    # vllm#22331: gpt-oss-120b on NVLink A100s, one sequence: 90 tok/s at tp 1, 77-78 at tp 2 and 4. The kernel
    # floors rule there (36 MoE layers × 0.0625 ms × 2.5 on Ampere = 5.625 ms, and the per-token overhead 0.75
    # × 2.5 ms), so tp 2 adds its 72 all-reduces and buys nothing: the estimate keeps the published order, each
    # within 1.5 × of the measurement.
    got = {}
    for tp in (1, 2):
        option, shape = hand_option("openai__gpt-oss-120b", one_card(gpus_per_node=tp, tp=tp), "a100-80g")
        got[tp] = speed_of(option, shape, PlanRequest(context_tokens=1024)).decode_estimate_tokens_per_s
    assert got[2] < got[1]
    assert 90 / 1.5 < got[1] < 90 * 1.5 and 77.5 / 1.5 < got[2] < 77.5 * 1.5
    assert 1 / got[1] == pytest.approx(2.5 * (36 * MOE_FLOOR_S + VLLM_TOKEN_S))  # 133.3: the read is 2.5 ms ÷ 0.6


def test_llamacpp_does_not_outrun_vllm_on_a_multi_card_moe():
    # issue 23: llama.cpp estimated twice vLLM's speed on Qwen3-235B over 8 × H100 (40.6 vs 19.3 tok/s), so
    # --goal fastest put a llama.cpp GGUF first. A layer split reads every layer on one card after another;
    # tp 8 reads an eighth on each card at once.
    shape = shape_of("Qwen__Qwen3-235B-A22B")
    result = plan(shape, parse_cluster("1x8xh100-80g"), PlanRequest(), sort="speed")
    best = {}
    for o in result.options:
        if o.speed is not None and not o.layout.cpu:
            best.setdefault(o.layout.engine, o.speed.decode_estimate_tokens_per_s)
    assert result.options[0].layout.engine == "vllm" and best["vllm"] > best["llamacpp"], best


def test_data_and_expert_parallel_layouts_pay_dispatch_and_combine():
    # a DP 8 + EP 8 layout (tp 1 a rank): no all-reduce, but a dispatch and a combine a MoE layer, each
    # 2 × 25 µs + 8 × 7/8 × 7,168 × 2 bytes / 450 GB/s (DeepSeek-V3, k 8, one token)
    shape = shape_of("deepseek-ai__DeepSeek-V3")
    layout = Layout(engine="vllm", gpu_class="h200-141g", gpus_per_node=8, tp=1, dp=8, ep=8)
    option, _ = hand_option("deepseek-ai__DeepSeek-V3", layout, "h200-141g")
    got = speed_of(option, shape, PlanRequest(context_tokens=1024))
    assert dispatch_bytes(8, 1, 7168, 8) == 100_352
    floors = 3 * DENSE_FLOOR_S + 58 * MOE_FLOOR_S
    memory_bound = 1 / got.decode_bound_tokens_per_s - 2 * 58 * (2 * 5e-6 + 100_352 / 450e9)
    estimate = max(memory_bound / 0.6, floors) + 2 * 58 * (2 * NVLINK_S + 100_352 / 450e9) + VLLM_TOKEN_S
    assert 1 / got.decode_estimate_tokens_per_s == pytest.approx(estimate)
    # 64 sequences over 8 ranks: each rank reads the KV of its own 8, its whole attention once, and its 32
    # experts a layer as 64 tokens touch them (1 − (1 − 8/256)^64 = 86.9 % of them)
    where = placement(shape, shape.precision, layout, shipped_catalogue().get("h200-141g"), 0, False, 0, SETTINGS)
    part = where.parts[0]
    kv = shape.kv_type("auto")
    many, one = part_step_cost(shape, part, 64, 1024, kv), part_step_cost(shape, part, 1, 1024, kv)
    assert many.kv_bytes == 8 * one.kv_bytes
    touched = 1 - (1 - 8 / 256) ** 64
    assert many.weight_bytes == pytest.approx(part.profile.dense_bytes + part.profile.expert_bytes * touched)
    # tp 2 within each of 4 DP ranks: 8 sequences are 2 a rank, and a rank all-reduces and dispatches those 2
    # (the bound's latencies: 5 µs an all-reduce, 2 × 5 µs a dispatch or combine)
    split = Layout(engine="vllm", gpu_class="h200-141g", gpus_per_node=8, tp=2, dp=4, ep=8)
    part = placement(shape, shape.precision, split, shipped_catalogue().get("h200-141g"), 0, False, 0, SETTINGS).parts[
        0
    ]
    got = part_step_cost(shape, part, 8, 1024, kv).allreduce_s
    reduce = 2 * 61 * (5e-6 + 2 * 1 / 2 * 2 * 7168 * 2 / 450e9)
    exchange = 2 * 58 * (2 * 5e-6 + dispatch_bytes(8, 2, 7168, 8) / 450e9)
    assert got == pytest.approx(reduce + exchange)


def test_sglang_dp_attention_with_experts_spread_whole_is_priced_as_data_and_expert_parallelism():
    """SGLang's `--tp 8 --dp 8 --enable-dp-attention --ep-size 8` (DeepSeek's published layout): each DP rank's
    attention is whole on its card (tp / dp = 1), its own ⌈B / 8⌉ sequences, the experts 32 a card: the same parts
    as vLLM's DP 8 + EP 8, a dispatch and a combine a MoE layer and no all-reduce; without EP (ep 1) the layout is
    priced as tp 8 (two all-reduces a layer)."""
    shape = shape_of("deepseek-ai__DeepSeek-V3")
    h200 = shipped_catalogue().get("h200-141g")
    kv = shape.kv_type("auto")
    sglang = Layout(engine="sglang", gpu_class="h200-141g", gpus_per_node=8, tp=8, dp=8, ep=8)
    vllm = Layout(engine="vllm", gpu_class="h200-141g", gpus_per_node=8, tp=1, dp=8, ep=8)
    assert sglang.attention_dp and not sglang.expert_dp and vllm.expert_dp and not vllm.attention_dp
    ours = placement(shape, shape.precision, sglang, h200, 0, False, 0, SETTINGS).parts[0]
    theirs = placement(shape, shape.precision, vllm, h200, 0, False, 0, SETTINGS).parts[0]
    assert (ours.profile.tp, ours.dispatch_ranks, ours.data_parallel) == (1, 8, 8)
    assert part_step_cost(shape, ours, 64, 1024, kv) == part_step_cost(shape, theirs, 64, 1024, kv)
    # one token: 2 × 58 MoE layers × (2 × 5 µs + 100,352 bytes / 450 GB/s), nothing else on the wire
    assert part_step_cost(shape, ours, 1, 1024, kv).allreduce_s == pytest.approx(2 * 58 * (2 * 5e-6 + 100_352 / 450e9))
    no_ep = placement(shape, shape.precision, dataclasses.replace(sglang, ep=1), h200, 0, False, 0, SETTINGS).parts[0]
    assert (no_ep.profile.tp, no_ep.dispatch_ranks, no_ep.data_parallel) == (8, 0, 1)


def test_the_speed_facts_are_the_engines():
    assert speed_facts("llamacpp").host_layers and speed_facts("llamacpp").gguf
    assert not speed_facts("vllm").host_layers and not speed_facts("sglang").gguf
    with pytest.raises(PlanError, match="unknown engine"):
        speed_facts("tgi")
    # a card generation scales the layer floors and the per-token overhead: Ampere 2.5 ×, Hopper and unlisted 1 ×
    a100, h100 = shipped_catalogue().get("a100-80g"), shipped_catalogue().get("h100-80g")
    assert (generation(a100), generation(h100)) == ("ampere", "hopper")
    facts = speed_facts("vllm")
    assert facts == speed_facts("sglang")  # one fit for both: the published rows do not tell them apart
    assert (facts.dense_layer_floor_s, facts.moe_layer_floor_s, facts.token_overhead_s) == (
        DENSE_FLOOR_S,
        MOE_FLOOR_S,
        VLLM_TOKEN_S,
    )
    assert pace_for(facts, a100, 0.6).moe_layer_s == pytest.approx(2.5 * pace_for(facts, h100, 0.6).moe_layer_s)
    assert pace_for(facts, a100, 0.6).token_s == pytest.approx(2.5 * VLLM_TOKEN_S)
    # an M1 chip reaches 0.85 of the bandwidth an M2 or M3 of the same figure does (the published Apple rows)
    m1, m2 = shipped_catalogue().get("m1-ultra-128g"), shipped_catalogue().get("m2-ultra-192g")
    assert (unified_reach(m1), unified_reach(m2), unified_reach(h100)) == (0.85, 1.0, 1.0)
    assert pace_for(speed_facts("llamacpp"), m1, 0.6).efficiency == pytest.approx(0.51)


# --- prefill, efficiency, cost -----------------------------------------------------------


def test_time_to_first_token_is_compute_bound():
    option, shape = hand_option(LLAMA8B, one_card(), "h100-80g")
    got = speed_of(option, shape, PlanRequest(context_tokens=8192))
    # 2 × 8,192 × 7,504,924,672 (parameters but the embedding) + attention
    # 2 × 32 layers × 32 heads × 256 (key + value dims) × 8,192 × 8,193 / 2, over 989.4 TFLOPs
    flops = 2 * 8192 * (8_030_261_248 - 128_256 * 4096) + 2 * 32 * 32 * 256 * (8192 * 8193 // 2)
    assert got.time_to_first_token_bound_s == pytest.approx(flops / 989.4e12, rel=1e-9)  # 0.142 s
    assert got.time_to_first_token_estimate_s == pytest.approx(got.time_to_first_token_bound_s / 0.6)


def test_fp8_weights_prefill_at_the_fp8_peak_where_the_card_has_one():
    shape = shape_of(LLAMA8B)
    bf16, _ = hand_option(LLAMA8B, one_card(), "h100-80g")
    fp8, _ = hand_option(LLAMA8B, one_card(), "h100-80g", quant="fp8")
    a100, _ = hand_option(LLAMA8B, one_card(gpu="a100-80g"), "a100-80g", quant="fp8")  # no fp8: bf16 peak
    t = {
        k: speed_of(o, shape, PlanRequest(context_tokens=8192)).time_to_first_token_bound_s
        for k, o in (("bf16", bf16), ("fp8", fp8), ("a100", a100))
    }
    assert t["fp8"] == pytest.approx(t["bf16"] * 989.4 / 1978.9, rel=1e-6)
    assert t["a100"] == pytest.approx(t["bf16"] * 989.4 / 312.0, rel=1e-6)


def test_efficiency_scales_the_estimate_and_nothing_else():
    option, shape = hand_option(LLAMA8B, one_card(), "h100-80g")
    priced = SpeedSettings(prices=shipped_prices())
    base = speed_of(option, shape, PlanRequest(context_tokens=4096, concurrency=4), priced)
    low = speed_of(
        option,
        shape,
        PlanRequest(context_tokens=4096, concurrency=4),
        SpeedSettings(efficiency={"vllm": 0.3}, prices=shipped_prices()),
    )
    assert low.decode_bound_tokens_per_s == base.decode_bound_tokens_per_s
    # a step: the bound's ÷ the efficiency, plus vLLM's per-token overhead, which the efficiency does not scale
    cycle = 1 / base.decode_bound_tokens_per_s
    assert 1 / low.decode_estimate_tokens_per_s == pytest.approx(cycle / 0.3 + VLLM_TOKEN_S)
    assert 1 / base.decode_estimate_tokens_per_s == pytest.approx(cycle / 0.6 + VLLM_TOKEN_S)
    assert low.decode_aggregate_estimate_tokens_per_s == pytest.approx(4 * low.decode_estimate_tokens_per_s)
    assert low.time_to_first_token_estimate_s == pytest.approx(base.time_to_first_token_bound_s / 0.3)
    ratio = (cycle / 0.3 + VLLM_TOKEN_S) / (cycle / 0.6 + VLLM_TOKEN_S)
    assert low.cost_per_million_tokens == pytest.approx(ratio * base.cost_per_million_tokens)
    for bad in (0, 1.5, -1):
        with pytest.raises(PlanError, match="efficiency"):
            SpeedSettings(efficiency={"vllm": bad})


def test_cost_per_million_tokens_from_a_price():
    option, shape = hand_option(LLAMA8B, one_card(gpus_per_node=2, tp=2), "h100-80g")
    prices = PriceTable((parse_prices("gpu_class,usd_per_gpu_hour\nh100-80g,2.0\n").rows[0],))
    got = speed_of(option, shape, PlanRequest(context_tokens=4096, concurrency=8), SpeedSettings(prices=prices))
    # 2 cards × $2 / (aggregate estimate tokens/s × 3,600 s) × 10⁶
    assert got.cost_per_million_tokens == pytest.approx(
        2 * 2.0 / (got.decode_aggregate_estimate_tokens_per_s * 3600) * 1e6
    )
    assert got.usd_per_gpu_hour == 2.0
    assert speed_of(option, shape, PlanRequest(context_tokens=4096, concurrency=8)).cost_per_million_tokens is None
    shipped = speed_of(
        option, shape, PlanRequest(context_tokens=4096, concurrency=8), SpeedSettings(prices=shipped_prices())
    )
    assert shipped.usd_per_gpu_hour == shipped_prices().usd_per_gpu_hour("h100-80g") == 3.49
    unpriced, _ = hand_option(LLAMA8B, one_card(gpu="rtx3090-24g"), "rtx3090-24g")
    assert speed_of(unpriced, shape, settings=SpeedSettings(prices=shipped_prices())).cost_per_million_tokens is None


def test_price_tables_are_checked():
    with pytest.raises(CatalogueError, match="lacks columns"):
        parse_prices("gpu,usd\nh100-80g,2\n")
    with pytest.raises(CatalogueError, match="not a positive number"):
        parse_prices("gpu_class,usd_per_gpu_hour\nh100-80g,free\n")
    with pytest.raises(CatalogueError, match="appears twice"):
        parse_prices("gpu_class,usd_per_gpu_hour\nh100-80g,2\nH100-80G,3\n")
    table = shipped_prices()
    assert all(shipped_catalogue().get(p.gpu_class) for p in table.rows), "every priced class is in the catalogue"
    assert all(p.source and p.retrieved for p in table.rows), "every price says where it comes from"


def test_an_unknown_card_has_no_speed_and_sorts_last():
    result = plan(
        shape_of(LLAMA8B), parse_cluster("1x1xfoo-80g + 1x1xh100-80g"), PlanRequest(engines=("vllm",)), sort="speed"
    )
    assert result.options[0].gpu.name == "h100-80g" and result.options[0].speed is not None
    unknown = [o for o in result.options if o.gpu.name == "foo-80g"]
    assert unknown and all(o.speed is None for o in unknown) and result.options[-1] in unknown


# --- surfaces ------------------------------------------------------------------------------


def test_plan_attaches_speed_and_sorts_fastest_first():
    # Llama-3.1-70B: each card's share of the read shrinks with tp while the all-reduces and vLLM's per-token
    # overhead stay, so tp 8 ranks first
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    result = plan(
        shape,
        parse_cluster("1x8xh100-80g"),
        PlanRequest(engines=GPU_ENGINES),
        sort="speed",
        speed=SpeedSettings(prices=shipped_prices()),
    )
    rates = [o.speed.decode_estimate_tokens_per_s for o in result.options]
    assert rates == sorted(rates, reverse=True) and result.options[0].layout.tp == 8
    default = plan(shape, parse_cluster("1x8xh100-80g"), PlanRequest(engines=GPU_ENGINES))
    # the default ranking: fewest cards with headroom first; 2 cards hold the bf16 weights only at the brim
    # (vLLM tp 2: 71.1 of 71.3 GiB, one sequence; issue 24), so 4
    assert default.options[0].layout.cards == 4
    assert all(
        o.speed is None
        for o in plan(
            shape, parse_cluster("1x1xh100-80g"), speed=False, request=PlanRequest(engines=GPU_ENGINES)
        ).options
    )
    d = result.options[0].to_dict()
    assert set(d["decode_tokens_per_s"]) == {"bound", "estimate"}
    assert d["decode_aggregate_tokens_per_s"]["concurrency"] == 1
    assert d["time_to_first_token_s"]["bound"] > 0 and d["cost_per_million_tokens"] > 0
    assert d["speed"]["bound_by"] == "memory bandwidth"


def test_recheck_recomputes_the_speed():
    shape = shape_of(LLAMA8B)
    option = plan(shape, parse_cluster("1x1xh100-80g"), PlanRequest(engines=("vllm",))).options[0]
    longer = recheck(shape, option, PlanRequest(context_tokens=65536, engines=("vllm",)))
    assert longer.speed.context_tokens == 65536
    assert longer.speed.decode_bound_tokens_per_s < option.speed.decode_bound_tokens_per_s


def test_cli_prints_and_emits_speed(capsys, tmp_path):
    config = str(CONFIGS / f"{LLAMA8B}.json")
    prices = tmp_path / "prices.csv"
    prices.write_text("gpu_class,usd_per_gpu_hour\nh100-80g,1.0\n")
    args = ["plan", config, "--cluster", "1x2xh100-80g", "--engine", "vllm", "--concurrency", "4"]
    assert main(args + ["--json", "--efficiency", "0.5", "--price-table", str(prices), "--sort", "speed"]) == 0
    out = json.loads(capsys.readouterr().out)
    best = out["options"][0]
    assert best["tp"] == 2 and best["speed"]["efficiency"] == 0.5 and best["speed"]["usd_per_gpu_hour"] == 1.0
    # bound ÷ 0.5, never shorter than vLLM's floors (32 dense layers × 0.025 ms), plus the 64 all-reduces of
    # tp 2 at 25 µs (the bound's at 5 µs) of 4 tokens (2 × 1/2 × 4 × 4,096 × 2 bytes / 450 GB/s), plus vLLM's
    # 0.75 ms a token
    floors = 32 * DENSE_FLOOR_S
    assert decode_floor_s(shape_of(LLAMA8B), pace_for(speed_facts("vllm"), None, 0.5)) == pytest.approx(
        floors + VLLM_TOKEN_S
    )
    per = 2 * 1 / 2 * 4 * 4096 * 2 / 450e9
    memory = 1 / best["decode_tokens_per_s"]["bound"] - 64 * (5e-6 + per)
    assert best["decode_tokens_per_s"]["estimate"] == pytest.approx(
        1 / (max(memory / 0.5, floors) + 64 * (NVLINK_S + per) + VLLM_TOKEN_S), abs=0.01
    )
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "tok/s" in text and "tokens/s a sequence estimate (bound" in text and "per million output tokens" in text


# --- invariants ------------------------------------------------------------------------------

MODELS = [
    "meta-llama__Meta-Llama-3.1-8B",
    "Qwen__Qwen3-30B-A3B",
    "google__gemma-2-9b-it",
    "Qwen__Qwen3-0.6B",
    "mistralai__Mixtral-8x7B-v0.1",
    "Qwen__Qwen3-Next-80B-A3B-Thinking",
    "openai__gpt-oss-20b",
    "meta-llama__Llama-2-7b-hf",
]
CLUSTERS = [
    "1x8xh100-80g",
    "2x4xa100-40g@ib0",
    "1x2xrtx4090-24g,ram=128g + 1xcpu-256g",
    "1x1xm2-ultra-192g",
    "1x4xl40s-48g",
    "3x2xl4-24g@eth25g",
]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    spec=st.sampled_from(CLUSTERS),
    context=st.sampled_from([128, 1024, 4096, 16384]),
    concurrency=st.integers(1, 64),
    quant=st.sampled_from([None, "fp8", "int4-awq", "Q4_K_M"]),
)
def test_every_option_has_bound_at_least_estimate_above_zero(model, spec, context, concurrency, quant):
    shape = shape_of(model)
    request = PlanRequest(
        context_tokens=min(context, shape.max_context_tokens), concurrency=concurrency, engines=ENGINES, precision=quant
    )
    for o in plan(shape, parse_cluster(spec), request).options:
        sp = o.speed
        assert sp is not None, o.label
        assert sp.decode_bound_tokens_per_s >= sp.decode_estimate_tokens_per_s > 0
        # a queueing candidate decodes the batch its KV cache holds (the rest wait): its speed is at that batch
        assert sp.concurrency == (o.resident_sequences if o.asked_sequences else concurrency), o.label
        assert sp.decode_aggregate_bound_tokens_per_s == pytest.approx(sp.concurrency * sp.decode_bound_tokens_per_s)
        assert sp.time_to_first_token_estimate_s >= sp.time_to_first_token_bound_s > 0
        contexts = [1, 256, 2048, 8192, 32768, 131072]
        curve = tokens_per_s_vs_context(o, shape, [c for c in contexts if c <= shape.max_context_tokens], request)
        rates = [s.decode_bound_tokens_per_s for s in curve]
        assert all(a >= b for a, b in itertools.pairwise(rates)), f"{o.label}: {rates}"


# --- llama.cpp options from the engine itself ---------------------------------------------------


def test_llamacpp_partial_offload_options_are_slowed_by_their_host_layers():
    shape = shape_of(LLAMA70B)
    cluster = parse_cluster("1x1xrtx4090-24g,ram=256g")
    times = {}
    for ngl in (20, 40):
        request = PlanRequest(engines=("llamacpp",), precision="Q4_K_M", n_gpu_layers=ngl, context_tokens=4096)
        offloaded = [o for o in plan(shape, cluster, request).options if o.evaluation.layers_on_host]
        assert offloaded, f"no partial offload at -ngl {ngl}"
        o = offloaded[0]
        assert o.speed.bound_by == "host memory"
        times[o.evaluation.layers_on_host] = 1 / o.speed.decode_bound_tokens_per_s
    (k1, t1), (k2, t2) = sorted(times.items())
    assert t2 - t1 == pytest.approx((k2 - k1) * _layer_bytes_q4_k_m(4096) * (1 / 100e9 - 1 / 1008e9), rel=0.02)


def test_llamacpp_cpu_and_unified_options_carry_speed():
    shape = shape_of(LLAMA8B)
    for spec, kind in (("1xcpu-256g", "cpu"), ("1x1xm2-ultra-192g", "unified")):
        result = plan(shape, parse_cluster(spec), PlanRequest(engines=("llamacpp",), precision="Q4_K_M"))
        options = [o for o in result.options if getattr(o.layout, kind)]
        assert options, spec
        for o in options:
            assert o.speed.decode_bound_tokens_per_s >= o.speed.decode_estimate_tokens_per_s > 0
        bandwidth = 100e9 if kind == "cpu" else 800e9
        # the Q4_K_M what-if (4.89 bits) less the embedding gather, and 4,096 tokens of fp16 KV
        read = shape.weight_bytes("Q4_K_M") - math.ceil(128_256 * 4096 * 4.89 / 8) + 4096 * LLAMA8B_KV_PER_TOKEN
        assert options[0].speed.decode_bound_tokens_per_s == pytest.approx(bandwidth / read, rel=1e-6)


def test_llamacpp_rpc_options_cross_the_fabric():
    shape = shape_of(LLAMA70B)
    result = plan(
        shape, parse_cluster("2x1xrtx4090-24g@eth10g"), PlanRequest(engines=("llamacpp",), precision="Q4_K_M")
    )
    rpc = [o for o in result.options if o.layout.rpc]
    for o in rpc:
        assert o.speed is not None and o.speed.decode_bound_tokens_per_s > 0


def test_decode_context_parallelism_reads_an_eighth_of_the_latent_and_pays_its_exchange():
    """DeepSeek-V3 at tp 8 on H200s: each card keeps the whole latent (61 × 576 × 2 = 70,272 B a token); at dcp 8
    it reads 1/8 of it, and each of 61 MLA layers adds 3 collectives over the 8 ranks: 16 query heads a card,
    each gathered query (512 + 64) × 2 B, output 512 × 2 B and LSE 4 B, of which a card sends 7 shares:
    7 × 16 × 2,180 = 244,160 B a token (the bound's 5 µs latency, 450 GB/s NVLink one way)."""
    shape, h200 = shape_of("deepseek-ai__DeepSeek-V3"), shipped_catalogue().get("h200-141g")
    kv = shape.kv_type("auto")
    plain = Layout(engine="vllm", gpu_class="h200-141g", gpus_per_node=8, tp=8, ep=8)
    split = dataclasses.replace(plain, dcp=8)
    whole = part_step_cost(shape, placement(shape, shape.precision, plain, h200, 0, False, 0, SETTINGS).parts[0], 4,
                           8192, kv)  # fmt: skip
    part = placement(shape, shape.precision, split, h200, 0, False, 0, SETTINGS).parts[0]
    sharded = part_step_cost(shape, part, 4, 8192, kv)
    assert part.kv_shards == 8
    assert whole.kv_bytes == 4 * 8192 * 70_272 == 8 * sharded.kv_bytes
    assert dcp_exchange_bytes(shape.decoder[0].cache, 16, 8, 1) == 244_160
    assert dcp_exchange_bytes(shape.decoder[0].cache, 16, 1, 1) == 0
    added = 61 * (3 * 5e-6 + 4 * 244_160 / 450e9)
    assert sharded.allreduce_s - whole.allreduce_s == pytest.approx(added)
    # a fresh prompt attends on each card's own heads: prefill pays no exchange
    wheres = [placement(shape, shape.precision, x, h200, 0, False, 0, SETTINGS) for x in (plain, split)]
    assert prefill_s(shape, wheres[0], 8192) == prefill_s(shape, wheres[1], 8192)


def test_dp_attention_reads_only_its_own_ranks_latents():
    """SGLang's DP attention alone (tp 8 dp 8, experts split by tp): a card attends to its own rank's sequences, so
    it reads 1/8 of the latents tp 8 alone reads (DeepSeek-V3, 16 sequences of 8,192 tokens at 61 × 576 × 2 =
    70,272 B a token: 2 a card, 2 × 8,192 × 70,272 = 1,151,336,448 B), but the attention whole (q_b, kv_b and o
    unsplit: 61 × 150,507,392 = 9,180,950,912 B more, docs/notes/sglang_memory.md §3.1); the all-reduces still
    carry every token."""
    shape, h200 = shape_of("deepseek-ai__DeepSeek-V3"), shipped_catalogue().get("h200-141g")
    kv = shape.kv_type("auto")
    plain = Layout(engine="sglang", gpu_class="h200-141g", gpus_per_node=8, tp=8)
    ranks = dataclasses.replace(plain, dp=8)
    whole = part_step_cost(shape, placement(shape, shape.precision, plain, h200, 0, False, 0, SETTINGS).parts[0], 16,
                           8192, kv)  # fmt: skip
    part = placement(shape, shape.precision, ranks, h200, 0, False, 0, SETTINGS).parts[0]
    own = part_step_cost(shape, part, 16, 8192, kv)
    assert (part.attention_ranks, part.data_parallel) == (8, 1)
    assert whole.kv_bytes == 16 * 8192 * 70_272 == 8 * own.kv_bytes == 8 * 1_151_336_448
    assert own.weight_bytes - whole.weight_bytes == 9_180_950_912
    assert own.allreduce_s == whole.allreduce_s
    # with the experts spread whole (ep = tp) the ranks are data + expert parallel instead: attention_ranks 1
    ep = placement(shape, shape.precision, dataclasses.replace(ranks, ep=8), h200, 0, False, 0, SETTINGS).parts[0]
    assert (ep.attention_ranks, ep.data_parallel) == (1, 8)
