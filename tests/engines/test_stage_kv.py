"""One pipeline stage's KV bytes and the longest context every stage holds (explorer.engines.stage_kv)."""

from __future__ import annotations

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
