"""llama.cpp's KV caches and recurrent state, per layer (src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp,
llama-memory-recurrent.cpp, commit 0c1e57098).

Per attention layer ``il`` and stream:

    K[il] = kv_size × row(type_k, n_embd_k_gqa(il))
    V[il] = kv_size × row(type_v, FA ? n_embd_v_gqa(il) : max_il n_embd_v_gqa)   # absent for MLA

(without flash attention V is stored transposed and every layer's V is
padded to the widest one). A model with sliding-window layers gets two
caches: the global layers with ``n_ctx_seq`` cells and the SWA layers with

    size_swa = swa_full ? n_ctx_seq : PAD(min(n_ctx_seq, n_swa × (unified ? n_seq : 1) + n_ubatch), 256)

Layers without attention (recurrent layers of a hybrid, MLP-only blocks,
NextN blocks) get no KV at all: a hybrid is not charged KV for every layer
(gguf-parser issue #28). Recurrent layers hold, in f32,
``max(1, n_seq) × (n_embd_r + n_embd_s)`` values whatever the context.

Worked example (gemma3_swa: window 300, 7 SWA + 1 global layers, 1 KV head of
256, f16, n_ctx 8192, n_ubatch 512, swa_full false): SWA cells =
PAD(min(8192, 300 + 512), 256) = 1024, so the SWA cache is
7 × 1024 × (512 + 512) = 7.00 MiB; the global one 1 × 8192 × 1024 = 8.00 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.llamacpp.model import LlamaModel
from explorer.engines.llamacpp.settings import CTX_PAD, ContextSizes
from explorer.memo import memo
from explorer.model.dtypes import ElementType
from explorer.units import round_up

#: recurrent state element size: llama.cpp keeps r and s in f32 (type_r, type_s)
STATE_BYTES = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheAlloc:
    """One of llama.cpp's memory modules: a KV cache or the recurrent state.

    Attributes:
        name: ``kv`` (global layers), ``kv_swa`` (sliding-window layers) or ``rs`` (recurrent state).
        cells: cells per stream (``rs``: sequences, ``max(1, n_seq)``).
        streams: KV streams (1 for ``rs``).
        layers: the layer indices it holds.
        layer_bytes: bytes of each of those layers, in the same order.
        k_bytes: the K (``rs``: conv/shift state r) part, bytes.
        v_bytes: the V (``rs``: ssm/wkv state s) part, bytes.
        v_row_max: the widest V row of its layers (values; the compute graph pads V to it).
        layer_set: ``layers`` as a set, for quick membership tests.
    """

    name: str
    cells: int
    streams: int
    layers: tuple[int, ...]
    layer_bytes: tuple[int, ...]
    k_bytes: int
    v_bytes: int
    v_row_max: int = 0
    layer_set: frozenset[int] = frozenset()

    @property
    def total_bytes(self) -> int:
        """The whole module, bytes."""
        return self.k_bytes + self.v_bytes


def swa_cells(ctx: ContextSizes, window: int, *, swa_full: bool, unified: bool) -> int:
    """Cells of the sliding-window cache per stream (``llama_kv_cache_iswa``)."""
    if swa_full:
        return ctx.n_ctx_seq
    return round_up(min(ctx.n_ctx_seq, window * (ctx.n_seq if unified else 1) + ctx.n_ubatch), CTX_PAD)


@dataclass(frozen=True, slots=True, kw_only=True)
class _CacheRows:
    """One cache's layers and each layer's bytes per cell and stream: what :func:`cache_layout` multiplies by the
    cells, the same whatever the context (``swa``: its cells are the sliding window's); with each layer's K + V and
    the sums, so that a context's cache is one product a layer (integers: ``cells × (k + v) = cells × k + cells ×
    v``, and the sums likewise)."""

    name: str
    swa: bool
    layers: tuple[int, ...]
    k_rows: tuple[int, ...]
    v_rows: tuple[int, ...]
    v_row_max: int
    layer_set: frozenset[int]
    kv_rows: tuple[int, ...]  # each layer's K + V row bytes
    k_row_sum: int
    v_row_sum: int


@memo(256, keyed_on="llama.cpp model identity, K and V cache types, flash attention")
def _cache_rows(
    model: LlamaModel, type_k: ElementType, type_v: ElementType, flash_attn: bool
) -> tuple[_CacheRows, ...]:
    """The KV caches' layers and row bytes (global, SWA): the part of :func:`cache_layout` a context move keeps."""
    attn = [il for il, la in enumerate(model.layers) if la.has_kv]
    v_max = max((model.layers[il].v_row for il in attn), default=0)
    swa = [il for il in attn if model.layers[il].attn in ("swa", "chunked")]
    if swa:
        groups = [("kv", [il for il in attn if il not in swa], False), ("kv_swa", swa, True)]
    else:
        groups = [("kv", attn, False)] if attn else []
    out = []
    for name, layers, is_swa in groups:
        k_rows, v_rows = [], []
        for il in layers:
            la = model.layers[il]
            v_width = la.v_row if (flash_attn or la.attn == "mla") else (v_max if la.v_row else 0)
            k_rows.append(type_k.row_bytes(la.k_row))
            v_rows.append(type_v.row_bytes(v_width) if v_width else 0)
        out.append(
            _CacheRows(
                name=name,
                swa=is_swa,
                layers=tuple(layers),
                k_rows=tuple(k_rows),
                v_rows=tuple(v_rows),
                v_row_max=max((model.layers[il].v_row for il in layers), default=0),
                layer_set=frozenset(layers),
                kv_rows=tuple(k + v for k, v in zip(k_rows, v_rows, strict=True)),
                k_row_sum=sum(k_rows),
                v_row_sum=sum(v_rows),
            )
        )
    return tuple(out)


@memo(64, keyed_on="llama.cpp model identity")
def _recurrent_layers(model: LlamaModel) -> tuple[int, ...]:
    """The layers that hold a recurrent state."""
    return tuple(il for il, la in enumerate(model.layers) if la.recurrent)


def cache_layout(model: LlamaModel, ctx: ContextSizes, *, swa_full: bool, unified: bool) -> tuple[CacheAlloc, ...]:
    """The KV caches (global, SWA) and the recurrent state llama.cpp allocates, in its order."""
    out: list[CacheAlloc] = []
    for rows in _cache_rows(model, ctx.type_k, ctx.type_v, ctx.flash_attn):
        if rows.swa:
            window = max(model.layers[il].window for il in rows.layers)
            cells = swa_cells(ctx, window, swa_full=swa_full, unified=unified)
        else:
            cells = ctx.n_ctx_seq
        per_layer = ctx.n_stream * cells  # cells of every stream: K[il] = streams × cells × row(type_k, k_row)
        out.append(
            CacheAlloc(
                name=rows.name,
                cells=cells,
                streams=ctx.n_stream,
                layers=rows.layers,
                layer_bytes=tuple(per_layer * kv for kv in rows.kv_rows),  # = per_layer × k + per_layer × v
                k_bytes=per_layer * rows.k_row_sum,
                v_bytes=per_layer * rows.v_row_sum,
                v_row_max=rows.v_row_max,
                layer_set=rows.layer_set,
            )
        )
    rec = _recurrent_layers(model)
    if rec:
        seqs = max(1, ctx.n_seq)
        rs = [seqs * model.layers[il].r_row * STATE_BYTES for il in rec]
        ss = [seqs * model.layers[il].s_row * STATE_BYTES for il in rec]
        out.append(
            CacheAlloc(
                name="rs",
                cells=seqs,
                streams=1,
                layers=rec,
                layer_bytes=tuple(r + s for r, s in zip(rs, ss, strict=True)),
                k_bytes=sum(rs),
                v_bytes=sum(ss),
                layer_set=frozenset(rec),
            )
        )
    return tuple(out)
