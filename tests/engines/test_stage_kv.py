"""One pipeline stage's KV bytes and the longest context every stage holds (explorer.engines.stage_kv)."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.stage_kv import largest_context, longest_stage_context, stage_kv_bytes
from explorer.units import GiB, MiB

LLAMA_8B = "meta-llama__Meta-Llama-3.1-8B"
#: Llama-3.1-8B's KV cache: 32 layers × 8 KV heads × 128 values × 2 (K and V) × 2 bytes (bf16) = 131,072 B a token
KV_PER_TOKEN = 131_072


def test_one_stage_holds_its_room_in_whole_blocks():
    shape = shape_of(LLAMA_8B)
    kv = shape.kv_type("auto")
    assert stage_kv_bytes(shape, 0, 32, kv, 1, 1, 1) == KV_PER_TOKEN
    # 1 GiB / 131,072 B = 8,192 tokens exactly, 512 blocks of 16
    assert longest_stage_context(shape, kv, 1, ((0, 32, GiB),), 131_072, 16, 0) == 8192
    # a byte short: one block less, 8,176 tokens
    assert longest_stage_context(shape, kv, 1, ((0, 32, GiB - 1),), 131_072, 16, 0) == 8176
    # the upper bound counts even off the block grid (the model's own limit)
    assert longest_stage_context(shape, kv, 1, ((0, 32, GiB),), 5000, 16, 0) == 5000


def test_the_tightest_stage_sets_the_context():
    shape = shape_of(LLAMA_8B)
    kv = shape.kv_type("auto")
    # 16 layers a stage: 65,536 B a token; 256 MiB holds 4,096 tokens, 512 MiB 8,192: the stage of 256 MiB binds
    assert longest_stage_context(shape, kv, 1, ((0, 16, 512 * MiB), (16, 32, 256 * MiB)), 131_072, 1, 0) == 4096
    assert longest_stage_context(shape, kv, 1, ((0, 16, 512 * MiB), (16, 32, 0)), 131_072, 1, 0) == 0
    assert longest_stage_context(shape, kv, 1, (), 131_072, 1, 0) == 0


def test_the_remembered_context_is_the_search_it_replaces():
    """The engines searched with :func:`largest_context` on every evaluation; the memo answers what it did."""
    shape = shape_of(LLAMA_8B)
    kv = shape.kv_type("fp8")
    for tp, room, extra in ((1, 3 * GiB + 12_345, 0), (2, 700 * MiB, 2048), (4, 5 * GiB, 512)):
        rooms = ((0, 20, room), (20, 32, room + MiB))
        searched = largest_context(
            lambda ctx, tp=tp, rooms=rooms, extra=extra: min(
                r - stage_kv_bytes(shape, a, b, kv, tp, ctx, 16, extra) for a, b, r in rooms
            ),
            131_072,
            step=16,
        )
        assert longest_stage_context(shape, kv, tp, rooms, 131_072, 16, extra) == searched > 0


def test_decode_context_parallelism_splits_the_mla_latent_by_token():
    """Kimi-K2.5: 61 MLA layers × (512 latent + 64 rope) × 2 bytes = 70,272 B a token, whole on every tp card."""
    shape = shape_of("moonshotai__Kimi-K2.5")
    kv = shape.kv_type("auto")
    assert stage_kv_bytes(shape, 0, 61, kv, 8, 1, 1) == 70_272
    # 65,536 tokens on tp 8: 65,536 × 70,272 B = 4.29 GiB a sequence on each card, 274.5 GiB for 64 of them
    whole = stage_kv_bytes(shape, 0, 61, kv, 8, 65_536, 16)
    assert whole == 65_536 * 70_272 and 64 * whole / GiB == pytest.approx(274.5, abs=0.05)
    # dcp 8: 8,192 tokens (512 blocks of 16) a card: 575,668,224 B; 64 sequences 34.3 GiB
    split = stage_kv_bytes(shape, 0, 61, kv, 8, 65_536, 16, dcp=8)
    assert split == 8_192 * 70_272 == 575_668_224 and 64 * split / GiB == pytest.approx(34.3, abs=0.05)
    # 1,000 tokens at dcp 8: cdiv(1,000, 8) = 125 a card, one more block of 16 = 128 tokens: 8,994,816 B
    assert stage_kv_bytes(shape, 0, 61, kv, 8, 1_000, 16, dcp=8) == 128 * 70_272 == 8_994_816


def test_decode_context_parallelism_splits_duplicated_gqa_heads_by_token():
    """Qwen3-235B: 94 layers, 4 KV heads of 128; at tp 8 one head a card: 94 × 128 × 2 (K, V) × 2 B = 48,128 B a
    token; dcp 2 keeps half of the tokens."""
    shape = shape_of("Qwen__Qwen3-235B-A22B")
    kv = shape.kv_type("auto")
    assert stage_kv_bytes(shape, 0, 94, kv, 8, 32_768, 16) == 32_768 * 48_128
    assert stage_kv_bytes(shape, 0, 94, kv, 8, 32_768, 16, dcp=2) == 16_384 * 48_128


def test_the_longest_context_grows_with_dcp():
    shape = shape_of("moonshotai__Kimi-K2.5")
    kv = shape.kv_type("auto")
    # 1 GiB of room: 1,073,741,824 // (70,272 × 16) = 954 whole blocks, 15,264 tokens; at dcp 8 each card keeps
    # 1 in 8 of them: 8 × 15,264 = 122,112 tokens
    assert longest_stage_context(shape, kv, 8, ((0, 61, GiB),), 262_144, 16, 0) == 15_264
    assert longest_stage_context(shape, kv, 8, ((0, 61, GiB),), 262_144, 16, 0, 8) == 122_112
