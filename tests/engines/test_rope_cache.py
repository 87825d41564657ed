"""explorer.engines.rope_cache: the RoPE cos/sin cache vLLM and SGLang build on every card with the model."""

from __future__ import annotations

from support.corpus import shape_of
from support.engine_logs import shape_for

from explorer.engines import sglang, vllm
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.engines.rope_cache import rope_cache_bytes, sglang_rope_dtype, vllm_rope_dtype
from explorer.model.weights import weight_breakdown
from explorer.sources.shipped import shipped_catalogue
from explorer.units import GiB, MiB

CAT = shipped_catalogue()


def _vllm(name: str) -> int:
    shape = shape_of(name)
    return rope_cache_bytes(shape, vllm_rope_dtype(shape))


def test_vllms_cache_is_positions_by_rotary_width_in_the_model_dtype():
    # Llama 3.1: 131,072 positions (Llama 3 rope keeps the stated length) × 128 × 2 bytes (bf16) = 32 MiB
    assert _vllm("meta-llama__Meta-Llama-3.1-8B") == 131_072 * 128 * 2 == 32 * MiB
    # Llama 4 Scout states 10,485,760 positions: 10,485,760 × 128 × 2 = 2.5 GiB on every rank
    assert _vllm("meta-llama__Llama-4-Scout-17B-16E-Instruct") == 10_485_760 * 256 == 5 * GiB // 2
    # gpt-oss builds its YaRN cache (4,096 × 32 = 131,072 positions, head 64) in float32: 32 MiB
    assert _vllm("openai__gpt-oss-20b") == 131_072 * 64 * 4
    # DeepSeek-V3's MLA rotates its 64-wide rope key over YaRN's 4,096 × 40 = 163,840 positions, in bf16
    assert _vllm("deepseek-ai__DeepSeek-V3") == 163_840 * 64 * 2


def test_learned_positions_have_no_cache():
    assert _vllm("openai-community__gpt2-large") == 0


def test_no_cache_is_counted_where_the_shape_lacks_the_rotary_width():
    # DeepSeek-V4's compressed attention: the shape holds its 512-wide heads, not the rotary part of them
    assert rope_cache_bytes(shape_for("sgl-project__DeepSeek-V4-Pro-FP8"), "fp32") == 0


def test_sglang_keeps_its_cache_in_fp32_on_cuda_and_in_the_model_dtype_on_rocm():
    shape = shape_of("meta-llama__Llama-3.2-3B")
    assert sglang_rope_dtype(shape, CAT.get("l40s-48g")) == "fp32"
    assert sglang_rope_dtype(shape, CAT.get("mi300x-192g")) == "bf16"
    # 131,072 × 128 × 4 bytes = 64 MiB on an L40S
    assert rope_cache_bytes(shape, "fp32") == 64 * MiB


def test_every_rank_holds_the_cache_llama_4_scout_at_tp_4():
    """vllm__llama-4-scout__H100__1 (0.19.0, tp 4): 53.12 GiB of weights a card logged; the tp-4 share of the
    checkpoint is 50.57 GiB, and the cache's 2.5 GiB is not split."""
    shape = shape_of("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    g = CAT.get("h100-80g")
    layout = Layout(engine="vllm", gpu_class=g.name, tp=4)
    ev = vllm.evaluate(shape, shape.precision, layout, g, PlanRequest(context_tokens=8192, vllm_version="0.19.0"), "m")
    share = weight_breakdown(shape, shape.precision, 4, 1).total_bytes
    assert ev.cards[0].weights == share + 5 * GiB // 2
    assert abs(ev.cards[0].weights - 53.12 * GiB) < 0.005 * 53.12 * GiB


def test_sglang_llama_3_2_3b_weights_with_the_fp32_cache():
    """sglang__llama-3.2-3b__48GB__1 (0.5.7): 'mem usage=6.13 GB' after loading; 3,212,749,824 bf16 weights
    (5.98 GiB, the head tied to the embedding) and the 64 MiB fp32 cache: 6.05 GiB."""
    shape = shape_of("meta-llama__Llama-3.2-3B")
    g = CAT.get("l40s-48g")
    ev = sglang.evaluate(shape, shape.precision, Layout(engine="sglang", gpu_class=g.name), g, PlanRequest(), "m")
    assert ev.cards[0].weights == 3_212_749_824 * 2 + 64 * MiB
    assert abs(ev.cards[0].weights - 6.13 * GiB) < 0.02 * 6.13 * GiB
