"""explorer.engines.vllm_rope: the RoPE cos/sin cache vLLM builds on every card with the model."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines import vllm
from explorer.engines.common import Layout, PlanRequest
from explorer.engines.vllm_rope import rope_cache_bytes
from explorer.model.weights import weight_breakdown
from explorer.sources.shipped import shipped_catalogue
from explorer.units import GiB, MiB

CAT = shipped_catalogue()


def test_the_cache_is_positions_by_rotary_width_in_the_cache_dtype():
    # Llama 3.1: 131,072 positions (Llama 3 rope keeps the stated length) × 128 × 2 bytes (bf16) = 32 MiB
    assert rope_cache_bytes(shape_of("meta-llama__Meta-Llama-3.1-8B")) == 131_072 * 128 * 2 == 32 * MiB
    # Llama 4 Scout states 10,485,760 positions: 10,485,760 × 128 × 2 = 2.5 GiB on every rank
    assert rope_cache_bytes(shape_of("meta-llama__Llama-4-Scout-17B-16E-Instruct")) == 10_485_760 * 256 == 5 * GiB // 2
    # gpt-oss builds its YaRN cache (4,096 × 32 = 131,072 positions, head 64) in float32: 32 MiB
    assert rope_cache_bytes(shape_of("openai__gpt-oss-20b")) == 131_072 * 64 * 4
    # DeepSeek-V3's MLA rotates its 64-wide rope key over YaRN's 4,096 × 40 = 163,840 positions, in bf16
    assert rope_cache_bytes(shape_of("deepseek-ai__DeepSeek-V3")) == 163_840 * 64 * 2


def test_learned_positions_have_no_cache():
    assert rope_cache_bytes(shape_of("openai-community__gpt2-large")) == 0


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
