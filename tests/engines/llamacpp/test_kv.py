"""llama.cpp's KV caches (explorer.engines.llamacpp.kv): the rows a context move keeps, the cells it changes."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines.llamacpp.kv import _cache_rows
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.settings import LlamaCppSettings
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.memo import clear_memos

#: Llama-3.1-8B as llama.cpp loads it: 32 layers, each K and V row 8 KV heads × 128 values = 1,024 values
MODEL = "meta-llama__Meta-Llama-3.1-8B"


def _caches(model, n_ctx: int, type_kv: str = "f16"):
    settings = LlamaCppSettings(n_ctx=n_ctx, type_k=type_kv, type_v=type_kv)
    return llamacpp_memory(model, settings).caches


def test_kv_bytes_follow_the_cells():
    model = llama_model_from_shape(shape_of(MODEL), "Q4_K_M")
    (kv,) = _caches(model, 8192)
    # f16: a row of 1,024 values is 2,048 B; 32 layers × 8,192 cells × 2,048 B = 536,870,912 B for K, as much for V
    assert (kv.cells, kv.streams, kv.k_bytes, kv.v_bytes) == (8192, 1, 536_870_912, 536_870_912)
    assert kv.layer_bytes == (8192 * 4096,) * 32
    (half,) = _caches(model, 4096)
    assert (half.k_bytes, half.v_bytes) == (268_435_456, 268_435_456)
    # q8_0: 1,024 values are 32 blocks of 34 B = 1,088 B a row; 32 × 8,192 × 1,088 = 285,212,672 B
    (q8,) = _caches(model, 8192, "q8_0")
    assert (q8.k_bytes, q8.v_bytes) == (285_212_672, 285_212_672)


def test_a_context_move_reuses_the_rows():
    clear_memos()
    model = llama_model_from_shape(shape_of(MODEL), "Q4_K_M")
    _caches(model, 8192)
    before = _cache_rows.cache_info()
    (kv,) = _caches(model, 12288)
    after = _cache_rows.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + 1)
    assert kv.k_bytes == 32 * 12288 * 2048 == 805_306_368
