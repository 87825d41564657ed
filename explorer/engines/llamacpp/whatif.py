"""A llama.cpp model from a :class:`~explorer.model.shapes.ModelShape` at a GGUF quant: a what-if, not a file.

Per-layer bytes come from :func:`explorer.model.weights.weight_breakdown` at
``shape.resolve_precision(quant)``: every matrix at the quant mix's average
bits (Q4_K_M ≈ 4.8), 1-D tensors at the model dtype; llama.cpp's real mix
(Q6_K for some ``attn_v``/``ffn_down`` and the output) differs by a few
percent. Caches are the shape's per-layer specs laid out as llama.cpp does:
MLA keeps ``kv_lora_rank + rope`` K values and no V; recurrent state in f32.
Repackable bytes are the quant's share of repack types (:data:`REPACK_SHARE`).
"""

from __future__ import annotations

from explorer.engines.llamacpp.model import REPACK_SHARE, AttnKind, LlamaLayer, LlamaModel
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    FullAttention,
    MLAAttention,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.model.weights import weight_breakdown


def llama_model_from_shape(shape, quant: str) -> LlamaModel:
    """An estimated :class:`LlamaModel`: ``shape`` stored as GGUF ``quant`` (``"Q4_K_M"``, ``"Q8_0"``…).

    Per-layer bytes come from :func:`explorer.model.weights.weight_breakdown` at
    ``shape.resolve_precision(quant)`` (a quant mix at its average bits);
    caches from the shape's per-layer specs, as llama.cpp lays them out.

    Raises:
        UnknownPrecisionError: ``quant`` is not a precision explorer knows.
    """
    precision = shape.resolve_precision(quant)
    wb = weight_breakdown(shape, precision)
    share = REPACK_SHARE.get(str(quant).upper().replace("-", "_"), 0.0)
    hidden = shape.hidden_size
    layers = []
    offset = wb.embedding_bytes
    matrix_bytes: dict[int, int] = {}  # a quant mix stores every matrix alike: layers sharing tensors share this
    notes = [f"what-if: {shape.name or 'model'} at {precision.name}, bytes from average bits per weight"]
    for i, layer in enumerate(shape.decoder):
        c = layer.cache
        attn: AttnKind = "none"
        kv = k_row = v_row = window = r_row = s_row = 0
        if isinstance(c, MLAAttention):
            attn, kv, k_row = "mla", 1, c.kv_lora_rank + c.rope_dim
        elif isinstance(c, FullAttention):
            kv, k_row, v_row = c.kv_heads, c.kv_heads * c.head_dim, c.kv_heads * c.v_head_dim
            if isinstance(c, SlidingWindowAttention):
                attn, window = "swa", c.window
            elif isinstance(c, ChunkedLocalAttention):
                attn, window = "chunked", c.chunk
            else:
                attn = "full"
        elif isinstance(c, RecurrentState):
            r_row, s_row = c.conv_elements, c.ssm_elements  # llama.cpp keeps both in f32
        size = wb.layer_bytes[i]
        key = id(layer.tensors) if precision.all_matrices else -1 - i
        if key not in matrix_bytes:
            matrix_bytes[key] = sum(precision.tensor_bytes(t, i) for t in layer.tensors if t.cols > 1)
        matrices = matrix_bytes[key]
        mlp = next((t.rows for t in layer.tensors if t.role == "mlp" and t.cols == hidden), 0)
        layers.append(
            LlamaLayer(
                attn=attn,
                n_head=shape.attention_heads,
                n_head_kv=kv,
                k_row=k_row,
                v_row=v_row,
                window=window,
                r_row=r_row,
                s_row=s_row,
                weight_bytes=size,
                repack_bytes=int(matrices * share),
                n_ff=mlp,
                moe=layer.moe,
                span=(offset, offset + size),
            )
        )
        offset += size
    head = {t.role: precision.tensor_bytes(t) for t in shape.head}
    output = head.get("lm_head", 0)
    mla = next((layer.cache for layer in shape.decoder if isinstance(layer.cache, MLAAttention)), None)
    moe = shape.moe
    ssm = _ssm_dims(shape)
    return LlamaModel(
        name=shape.name,
        arch=shape.model_type,
        exact=False,
        n_embd=hidden,
        n_vocab=shape.vocab_size,
        n_head=shape.attention_heads,
        n_embd_head_k=shape.head_dim if mla is None else _mla_qk(shape, mla),
        n_ctx_train=shape.max_context_tokens,
        layers=tuple(layers),
        token_embd_bytes=wb.embedding_bytes,
        output_bytes=output,
        output_repack_bytes=int(output * share),
        output_norm_bytes=wb.head_bytes - output,
        tied_output=shape.tied_embeddings,
        token_embd_repackable=share >= 1.0,
        token_embd_span=(0, wb.embedding_bytes),
        output_span=(offset, offset + wb.head_bytes),
        n_expert=moe.experts if moe else 0,
        n_expert_used=moe.experts_per_token if moe else 0,
        n_ff_exp=moe.moe_intermediate_size if moe else 0,
        n_ff_shexp=moe.shared_intermediate_size if moe else 0,
        kv_lora_rank=mla.kv_lora_rank if mla else 0,
        q_lora_rank=_rows(shape, "q_a_proj"),
        n_rot=mla.rope_dim if mla else shape.head_dim,
        n_embd_head_v_mla=_mla_v(shape),
        ssm_d_inner=ssm[0],
        ssm_d_state=ssm[1],
        ssm_d_conv=ssm[2],
        ssm_n_group=ssm[3],
        ssm_dt_rank=ssm[4],
        n_tensors=sum(len(la.tensors) for la in shape.decoder) + len(shape.embeddings) + len(shape.head),
        notes=tuple(notes) + tuple(shape.notes),
    )


def _rows(shape, suffix: str) -> int:
    """Rows of the first decoder tensor whose module ends with ``suffix`` (0 if none)."""
    for layer in shape.decoder:
        for t in layer.tensors:
            if t.module.endswith(suffix):
                return t.rows
    return 0


def _mla_qk(shape, mla: MLAAttention) -> int:
    q = _rows(shape, "q_b_proj") or _rows(shape, "q_proj")
    return q // shape.attention_heads if q and shape.attention_heads else mla.kv_lora_rank + mla.rope_dim


def _mla_v(shape) -> int:
    o = next((t.cols for layer in shape.decoder for t in layer.tensors if t.module.endswith("o_proj")), 0)
    return o // shape.attention_heads if o and shape.attention_heads else 0


def _ssm_dims(shape) -> tuple[int, int, int, int, int]:
    """(d_inner, d_state, d_conv, n_group, heads) of the first recurrent layer, from its tensors (0s if none)."""
    for layer in shape.decoder:
        c = layer.cache
        if isinstance(c, RecurrentState):
            out = next((t.cols for t in layer.tensors if t.module.endswith("out_proj")), 0)
            conv = next((t for t in layer.tensors if t.module.endswith("conv1d") and t.param == "weight"), None)
            d_conv = conv.cols if conv is not None else 4
            d_state = c.ssm_elements // out if out else 0
            groups = ((conv.rows - out) // (2 * d_state)) if conv is not None and d_state else 0
            return out, d_state, d_conv, max(groups, 0), c.heads
    return 0, 0, 0, 0, 0
