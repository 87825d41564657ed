"""Per-layer cache specs and KV dtypes, with worked numbers."""

from __future__ import annotations

import pytest

from explorer.errors import UnknownPrecisionError
from explorer.model.dtypes import element_type
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    CompressedAttention,
    FullAttention,
    MLAAttention,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
    attention_summary,
    kv_bytes,
    kv_bytes_per_token,
)

BF16 = element_type("bf16")


def test_full_attention_is_k_plus_v_rows():
    layer = FullAttention(kv_heads=8, head_dim=128, v_head_dim=128)
    assert layer.bytes_per_token(BF16) == 2 * 8 * 128 * 2 == 4096
    assert layer.bytes_for(1000, BF16, sequences=3) == 3 * 1000 * 4096


def test_block_quantised_cache_types_count_their_scales():
    layer = FullAttention(kv_heads=8, head_dim=128, v_head_dim=128)
    # q8_0: 34 bytes per 32 values; 1024 values a row → 32 blocks = 1,088 bytes, K and V
    assert layer.bytes_per_token(element_type("q8_0")) == 2 * 1024 // 32 * 34 == 2176
    # q4_0: 18 bytes per 32 values
    assert layer.bytes_per_token(element_type("q4_0")) == 2 * 1024 // 32 * 18 == 1152
    assert layer.bytes_per_token(element_type("fp8")) == 2048
    assert element_type("q8_0").bits_per_element == 8.5


def test_windows_cap_what_is_held():
    sliding = SlidingWindowAttention(kv_heads=4, head_dim=64, v_head_dim=64, window=512)
    assert sliding.tokens_held(100) == 100 and sliding.tokens_held(10_000) == 512
    chunked = ChunkedLocalAttention(kv_heads=8, head_dim=128, v_head_dim=128, chunk=8192)
    assert chunked.bytes_for(100_000, BF16) == 8192 * 4096
    compressed = CompressedAttention(kv_heads=1, head_dim=512, v_head_dim=0, window=128, ratio=4)
    assert compressed.tokens_held(1000) == 128 + 250


def test_mla_latent_is_not_doubled():
    mla = MLAAttention(kv_lora_rank=512, rope_dim=64)
    assert mla.bytes_per_token(BF16) == 576 * 2
    assert (
        MLAAttention(kv_lora_rank=512, rope_dim=64, indexer_bytes_per_token=132).bytes_per_token(element_type("fp8"))
        == 656 + 132  # the sparse (NSA) fp8 layout keeps scales and a bf16 rope: see the test below
    )


def test_recurrent_state_is_fixed_per_sequence():
    state = RecurrentState(family="mamba", conv_elements=300, conv_bytes=2, ssm_elements=1000, ssm_bytes=4)
    assert state.bytes_per_token(BF16) == 0
    assert state.bytes_for(0, BF16) == state.bytes_for(1_000_000, BF16) == 600 + 4000
    assert state.bytes_for(5, BF16, sequences=4) == 4 * 4600


def test_totals_and_summary():
    layers = [FullAttention(kv_heads=8, head_dim=128, v_head_dim=128)] * 2 + [NoCache()]
    assert kv_bytes_per_token(layers, BF16) == 8192
    assert kv_bytes(layers, 10, BF16, 2) == 2 * 10 * 8192
    assert attention_summary(layers, attention_heads=32) == "GQA"
    assert attention_summary([FullAttention(kv_heads=1, head_dim=64, v_head_dim=64)], 16) == "MQA"
    assert attention_summary([FullAttention(kv_heads=16, head_dim=64, v_head_dim=64)], 16) == "MHA"


def test_unknown_kv_dtype_is_a_typed_error():
    with pytest.raises(UnknownPrecisionError, match="q3_x"):
        element_type("q3_x")


def test_a_sparse_attention_latent_in_fp8_keeps_its_scales_and_a_bf16_rope():
    # DeepSeek-V3.2: kv_lora_rank 512, rope 64, indexer 128 fp8 + one fp32 scale = 132 bytes
    nsa = MLAAttention(kv_lora_rank=512, rope_dim=64, indexer_bytes_per_token=132)
    assert nsa.bytes_per_token(element_type("bf16")) == (512 + 64) * 2 + 132  # 1,152 + 132
    # fp8: 512 fp8 + 512 / 128 = 4 fp32 scales + 64 rope values in bf16 = 512 + 16 + 128 = 656
    assert nsa.bytes_per_token(element_type("fp8")) == 656 + 132
    # an MLA model without the sparse indexer stores the plain fp8 latent
    assert MLAAttention(kv_lora_rank=512, rope_dim=64).bytes_per_token(element_type("fp8")) == 576
