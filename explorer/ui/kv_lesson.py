"""KV cache figures for the teaching notebook (``notebooks/kv_cache.py``): per layer kind, formulas in numbers.

Pure: a :class:`~explorer.model.shapes.ModelShape` in, rows and strings out. Every
figure is the shape's own (``explorer.model.kv_cache``); this module only groups
layers that keep the same cache and writes the arithmetic out, e.g. for
Llama-3.1-8B at bf16: ``2 × 32 × 8 × 128 × 2 = 131,072 bytes a token``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from explorer.model.dtypes import ElementType
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    CompressedAttention,
    FullAttention,
    LayerCache,
    MLAAttention,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.units import GiB

__all__ = ["LESSON_MODELS", "cache_groups", "group_formula", "kv_curve", "kv_table", "total_formula"]

#: (what it shows, snapshot repo): one model per attention design
LESSON_MODELS: tuple[tuple[str, str], ...] = (
    ("MHA", "meta-llama/Llama-2-7b-hf"),
    ("GQA", "meta-llama/Meta-Llama-3.1-8B"),
    ("MQA", "tiiuae/falcon-7b"),
    ("MLA", "deepseek-ai/DeepSeek-V3"),
    ("sliding + full", "google/gemma-2-9b-it"),
    ("sliding + full", "openai/gpt-oss-20b"),
    ("hybrid linear", "Qwen/Qwen3-Next-80B-A3B-Thinking"),
    ("hybrid Mamba", "nvidia/Nemotron-H-56B-Base-8K"),
)


def cache_groups(shape: Any) -> list[tuple[LayerCache, int]]:
    """The distinct cache specs of the decoder, each with how many layers keep it, in layer order."""
    counts: dict[LayerCache, int] = {}
    for cache in shape.caches:
        counts[cache] = counts.get(cache, 0) + 1
    return list(counts.items())


def _plain_bytes(kv: ElementType) -> int | None:
    return kv.block_bytes if kv.block_elements == 1 else None


def _held(cache: LayerCache) -> str:
    if isinstance(cache, SlidingWindowAttention):
        return f"; keeps only the last {cache.window:,} tokens"
    if isinstance(cache, ChunkedLocalAttention):
        return f"; keeps at most one chunk of {cache.chunk:,} tokens"
    if isinstance(cache, CompressedAttention):
        extra = f" plus one entry per {cache.ratio} older tokens" if cache.ratio else ""
        return f"; keeps the last {cache.window:,} tokens{extra}"
    return ""


def group_formula(cache: LayerCache, layers: int, kv: ElementType) -> str:
    """The bytes one token adds to ``layers`` layers of ``cache``, written out with its numbers.

    Full attention at 16-bit: ``2 × 32 × 8 × 128 × 2 = 131,072 bytes a token``
    (K and V × layers × KV heads × head dim × bytes a value).
    """
    per_token = layers * cache.bytes_per_token(kv)
    b = _plain_bytes(kv)
    if isinstance(cache, FullAttention):
        h, d, v = cache.kv_heads, cache.head_dim, cache.v_head_dim
        if b is not None and v == d:
            text = f"2 × {layers} × {h} × {d} × {b} = {per_token:,} bytes a token"
        elif b is not None and v == 0:
            text = f"{layers} × {h} × {d} × {b} = {per_token:,} bytes a token (one row serves as K and V)"
        elif b is not None:
            text = f"{layers} × {h} × ({d} + {v}) × {b} = {per_token:,} bytes a token"
        else:
            row = kv.row_bytes(h * d)
            text = (
                f"{layers} × (K {row:,} + V {kv.row_bytes(h * v) if v else 0:,}) bytes = {per_token:,} bytes a token "
                f"({kv.name}: {kv.block_elements} values in {kv.block_bytes} bytes)"
            )
        return text + _held(cache)
    if isinstance(cache, MLAAttention):
        width = cache.kv_lora_rank + cache.rope_dim
        lat = f"{width} values at {kv.name}" if b is None else f"({cache.kv_lora_rank} + {cache.rope_dim}) × {b}"
        idx = f" + {cache.indexer_bytes_per_token} indexer bytes" if cache.indexer_bytes_per_token else ""
        return f"{layers} × {lat}{idx} = {per_token:,} bytes a token (one latent, not K and V)"
    if isinstance(cache, RecurrentState):
        state = cache.state_bytes()
        return (
            f"{layers} × (conv {cache.conv_elements:,} × {cache.conv_bytes} + state {cache.ssm_elements:,} × "
            f"{cache.ssm_bytes}) = {layers * state:,} bytes a sequence, whatever the context"
        )
    return f"{layers} layers keep nothing"


def total_formula(shape: Any, kv_dtype: str = "auto") -> str:
    """All layers' bytes a token, summed: ``131,072 bytes a token`` or ``a + b = c bytes a token``."""
    kv = shape.kv_type(kv_dtype)
    parts = [n * c.bytes_per_token(kv) for c, n in cache_groups(shape) if c.bytes_per_token(kv)]
    total = shape.kv_bytes_per_token(kv_dtype)
    if len(parts) <= 1:
        return f"{total:,} bytes a token"
    return " + ".join(f"{p:,}" for p in parts) + f" = {total:,} bytes a token (before windows cap it)"


def kv_table(
    shape: Any, kv_dtype: str = "auto", context_tokens: int = 8192, sequences: int = 1
) -> list[dict[str, Any]]:
    """One row per group of layers: kind, layers, bytes a token, tokens kept, GiB at the context, the formula."""
    kv = shape.kv_type(kv_dtype)
    rows = []
    for cache, n in cache_groups(shape):
        held = cache.tokens_held(context_tokens)
        rows.append(
            {
                "kind": cache.kind,
                "layers": n,
                "bytes a token": n * cache.bytes_per_token(kv),
                "tokens kept": held,
                "bytes": n * cache.bytes_for(context_tokens, kv, sequences),
                "GiB": round(n * cache.bytes_for(context_tokens, kv, sequences) / GiB, 3),
                "formula": group_formula(cache, n, kv),
            }
        )
    return rows


def kv_curve(
    shapes: Mapping[str, Any], contexts: Sequence[int], kv_dtype: str = "auto", sequences: int = 1
) -> list[dict[str, Any]]:
    """Long-form rows for a chart: model, context, layer kind, GiB the kind holds (stackable per model),
    and ``beyond``: the context is past the model's own limit (a what-if)."""
    rows = []
    for name, shape in shapes.items():
        kv = shape.kv_type(kv_dtype)
        for c in contexts:
            by_kind: dict[str, int] = {}
            for cache, n in cache_groups(shape):
                by_kind[cache.kind] = by_kind.get(cache.kind, 0) + n * cache.bytes_for(int(c), kv, sequences)
            for kind, b in by_kind.items():
                rows.append(
                    {
                        "model": name,
                        "context": int(c),
                        "kind": kind,
                        "gib": b / GiB,
                        "beyond": int(c) > shape.max_context_tokens,
                    }
                )
    return rows
