"""vLLM's decode context parallelism: the sizes it accepts and refuses (explorer.engines.vllm_dcp)."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.layouts import Layout
from explorer.engines.vllm_dcp import dcp_layouts, dcp_refusals, whole_split_widths
from explorer.engines.vllm_release import vllm_release
from explorer.sources.shipped import shipped_catalogue

CAT = shipped_catalogue()
CURRENT = vllm_release(None)
KIMI = "moonshotai__Kimi-K2.5"
QWEN_235B = "Qwen__Qwen3-235B-A22B"


def _sizes(name, tp, gpu="h200-141g", release=CURRENT):
    layout = Layout(engine="vllm", gpu_class=gpu, gpus_per_node=tp, tp=tp, ep=tp)
    return [x.dcp for x in dcp_layouts(shape_of(name), layout, CAT.resolve(gpu), release)]


def _rules(name, tp, dcp, gpu="h200-141g", release=CURRENT):
    return dcp_refusals(shape_of(name), tp, dcp, CAT.resolve(gpu), release)


def test_mla_splits_its_latent_over_any_divisor_of_tp():
    # one latent a token: no KV-head bound, dcp up to tp as long as it divides tp
    assert _sizes(KIMI, 8) == [2, 4, 8]
    assert _sizes("deepseek-ai__DeepSeek-V3", 4, "h100-80g") == [2, 4]
    assert _rules(KIMI, 8, 3) == [("dcp-size", "tp_size=8 must be divisible by dcp_size=3.")]


def test_gqa_splits_only_the_duplicated_heads():
    # Qwen3-235B: 4 KV heads, 64 query heads; at tp 8 each head sits on 8 // 4 = 2 cards: dcp 2 only
    assert _sizes(QWEN_235B, 8) == [2]
    assert _rules(QWEN_235B, 8, 4) == [
        (
            "dcp-kv-heads",
            "decode context parallel size must less than or equal to (tensor parallel size 8 // total num kv "
            "heads 4) = 2, but got 4",
        )
    ]
    # at tp 4 nothing is duplicated
    assert _sizes(QWEN_235B, 4) == []
    (rule,) = _rules(QWEN_235B, 4, 2)
    assert rule[1].startswith("tensor parallel size 4 must be greater than total num kv heads 4")


@pytest.mark.parametrize(
    ("name", "tp", "gpu", "release", "rule"),
    [
        (KIMI, 8, "v100-32g", CURRENT, "dcp-gpu"),  # no decode kernel returning the LSE on Volta
        (KIMI, 8, "mi300x-192g", CURRENT, "dcp-gpu"),
        (KIMI, 8, "h200-141g", vllm_release("0.10.1"), "dcp-release"),
        ("deepseek-ai__DeepSeek-V3.2", 8, "h200-141g", CURRENT, "dcp-attention"),  # sparse MLA
        ("google__gemma-2-9b-it", 8, "h100-80g", CURRENT, "dcp-attention"),  # sliding-window layers
    ],
)
def test_refused_where_vllm_has_no_dcp(name, tp, gpu, release, rule):
    assert [r for r, _ in _rules(name, tp, 2, gpu, release)] == [rule]
    assert _sizes(name, tp, gpu, release) == []


def test_no_sizes_without_tensor_parallelism_or_twice():
    shape, gpu = shape_of(KIMI), CAT.resolve("h200-141g")
    assert dcp_layouts(shape, Layout(engine="vllm", gpu_class=gpu.name), gpu, CURRENT) == ()
    sharded = Layout(engine="vllm", gpu_class=gpu.name, gpus_per_node=8, tp=8, ep=8, dcp=8)
    assert dcp_layouts(shape, sharded, gpu, CURRENT) == ()
    assert sharded.parallel == "tp8 dcp8 ep8"


def test_the_widths_a_fleet_split_keeps_its_latent_split_at():
    # an even split charges each card 1/tp of the KV cache: vLLM does so with -dcp tp, legal for MLA at every tp
    gpu = CAT.resolve("h100-80g")
    assert whole_split_widths(shape_of("deepseek-ai__DeepSeek-V3"), (1, 2, 4, 8, 16), gpu, CURRENT) == (2, 4, 8, 16)
    # GQA with 4 KV heads: dcp = tp is never within tp // 4
    assert whole_split_widths(shape_of(QWEN_235B), (1, 2, 4, 8), gpu, CURRENT) == ()
