"""vLLM's Marlin group scales for block-scaled fp8 on Ampere, worked by hand."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.engines.vllm import stage_weight_bytes
from explorer.engines.vllm_fp8_marlin import marlin_layer_extra_bytes
from explorer.engines.vllm_release import vllm_release
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue

QWEN3_32B_FP8 = "Qwen__Qwen3-32B-FP8"


def test_a_qwen3_32b_fp8_layer_on_an_a100_grows_by_its_group_scales():
    """Qwen3-32B-FP8: hidden 5120, 64 query and 8 KV heads of 128, MLP 25,600, 128 × 128 blocks. For an N × K
    matrix Marlin holds ⌈K/128⌉·N bf16 scales where the checkpoint held ⌈N/128⌉·⌈K/128⌉ fp32 ones:

    q  8192 × 5120:  40·8192·2 − 64·40·4   =   645,120
    k, v 1024 × 5120: 40·1024·2 − 8·40·4   =    80,640 each
    o  5120 × 8192:  64·5120·2 − 40·64·4   =   645,120
    gate, up 25600 × 5120: 40·25600·2 − 200·40·4 = 2,016,000 each
    down 5120 × 25600: 200·5120·2 − 40·200·4   = 2,016,000
    one layer: 7,499,520 bytes; 64 layers 479,969,280 (0.45 GiB)
    """
    cat = shipped_catalogue()
    shape = shape_of(QWEN3_32B_FP8)
    extra = marlin_layer_extra_bytes(shape, shape.precision, cat.get("a100-80g"), tp=1, ep=1)
    assert extra == (7_499_520,) * 64
    # Hopper runs the blocks natively: nothing is re-laid
    assert set(marlin_layer_extra_bytes(shape, shape.precision, cat.get("h100-80g"), tp=1, ep=1)) == {0}


def test_the_stage_weights_on_an_a100_carry_the_marlin_scales():
    cat = shipped_catalogue()
    shape = shape_of(QWEN3_32B_FP8)
    layout = Layout(engine="vllm", gpu_class="a100-80g")
    release = vllm_release(None)
    a100 = stage_weight_bytes(shape, shape.precision, layout, cat.get("a100-80g"), release)
    h100 = stage_weight_bytes(shape, shape.precision, layout, cat.get("h100-80g"), release)
    assert a100[0] - h100[0] == 479_969_280


def test_vllm_runs_deepseek_r1_fp8_on_a100s_weight_only():
    """vLLM at the pinned release runs block fp8 through Marlin on Ampere: DeepSeek-R1's own FP8 weights are
    offered on A100s, said to run weight-only, where SGLang refuses them (its docs convert to BF16 or INT8)."""
    shape = shape_of("deepseek-ai__DeepSeek-R1")
    result = plan(
        shape,
        parse_cluster("2x8xa100-80g@ib0"),
        PlanRequest(engines=("vllm",), context_tokens=4096),
        speed=False,
        suggest=False,
    )
    fp8 = [o for o in result.options if o.precision.startswith("fp8 block")]
    assert fp8, [r.reason for r in result.rejected][:5]
    assert any(n.startswith("fp8-block weights run weight-only on ampere (a100-80g)") for n in fp8[0].evaluation.notes)
