"""The KV cache arithmetic of one pipeline stage: one sequence's KV bytes on one card, and the longest context.

Context is counted in whole blocks of the engine's block size; K/V heads split by tensor parallelism, and under
vLLM's decode context parallelism (dcp) the full-attention and MLA tokens split too: each of dcp cards keeps
every dcp-th token (``max_model_len' = cdiv(max_model_len, dcp)``, docs/notes/vllm_memory.md §3.1 and §3.5).
"""

from __future__ import annotations

from functools import lru_cache

from explorer.engines.fit_search import largest_fitting
from explorer.memo import memo
from explorer.model.dtypes import ElementType
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLAAttention,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.units import cdiv


def card_kv_bytes(
    cache: LayerCache, kv: ElementType, tp: int, context: int, block: int, window_extra: int = 0, dcp: int = 1
) -> int:
    """One sequence's KV bytes for one layer on one tensor-parallel card.

    Context is counted in whole blocks of ``block`` tokens. K/V heads are
    split by tp down to one head a card; an MLA latent is whole on every
    card; a recurrent state splits by tp. A window holds ``window +
    window_extra`` tokens at most (vLLM keeps a prefill chunk beyond it).
    Under decode context parallelism a card holds ``cdiv(context, dcp)`` of
    a full-attention or MLA layer's tokens (Kimi-K2.5, 65,536 tokens at dcp
    8: 8,192 a card, 512 blocks of 16).
    """
    if isinstance(cache, RecurrentState):
        return cdiv(cache.state_bytes(), tp)
    if isinstance(cache, MLAAttention):
        tokens = cdiv(cdiv(context, dcp), block) * block
        return tokens * cache.bytes_per_token(kv)
    if isinstance(cache, FullAttention):
        heads = max(1, cache.kv_heads // tp)
        per_token = kv.row_bytes(heads * cache.head_dim) + (
            kv.row_bytes(heads * cache.v_head_dim) if cache.v_head_dim else 0
        )
        if isinstance(cache, (SlidingWindowAttention, ChunkedLocalAttention)):
            span = cache.window if isinstance(cache, SlidingWindowAttention) else cache.chunk
            held = min(context, span + window_extra)
        else:
            held = cdiv(cache.tokens_held(context), dcp)
        return cdiv(held, block) * block * per_token
    return 0


@lru_cache(maxsize=4096)
def stage_caches(shape, first: int, end: int) -> tuple[tuple[LayerCache, int], ...]:
    """The distinct cache specs of layers ``first``..``end - 1`` with how many layers use each."""
    counts: dict[int, list] = {}
    for layer in shape.decoder[first:end]:
        entry = counts.setdefault(id(layer.cache), [layer.cache, 0])
        entry[1] += 1
    return tuple((cache, n) for cache, n in counts.values())


def stage_kv_bytes(
    shape, first: int, end: int, kv: ElementType, tp: int, context: int, block: int, window_extra: int = 0, dcp: int = 1
) -> int:
    """One sequence's KV bytes on one card of the pipeline stage holding layers ``first``..``end - 1`` (its
    tokens split over ``dcp`` cards)."""
    return sum(
        n * card_kv_bytes(cache, kv, tp, context, block, window_extra, dcp)
        for cache, n in stage_caches(shape, first, end)
    )


def largest_context(slack, upper: int, step: int = 1) -> int:
    """The largest context in [0, upper], in multiples of ``step``, whose ``slack(context)`` (bytes to
    spare) is not negative; 0 when not even one step fits. ``upper`` itself counts even off the step grid.

    KV bytes never shrink as context grows, so the slack never grows: see
    :func:`explorer.engines.fit_search.largest_fitting` (a few probes, the answer exact).
    """
    if slack(upper) >= 0:
        return upper
    best = largest_fitting(lambda k: slack(k * step), 1, upper // step)
    return 0 if best is None else best * step


@memo(1024, keyed_on="shape identity, KV type, tp, each stage's layers and room, upper bound, block, window extra, dcp")
def longest_stage_context(
    shape,
    kv: ElementType,
    tp: int,
    rooms: tuple[tuple[int, int, int], ...],
    upper: int,
    block: int,
    window_extra: int,
    dcp: int = 1,
) -> int:
    """The longest context (:func:`largest_context`, in multiples of ``block``, at most ``upper``) of which one
    sequence's KV fits every stage: ``rooms`` holds each stage's layers ``first``..``end - 1`` and the bytes one of
    its cards has for KV (``(first, end, room)``); 0 when a stage has no room.

    It depends on no request's context: a context move finds it remembered.
    """
    if not rooms or min(room for _, _, room in rooms) <= 0:
        return 0
    return largest_context(
        lambda ctx: min(
            room - stage_kv_bytes(shape, a, b, kv, tp, ctx, block, window_extra, dcp) for a, b, room in rooms
        ),
        upper,
        step=block,
    )
