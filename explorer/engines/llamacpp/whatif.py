"""A llama.cpp model from a :class:`~explorer.model.shapes.ModelShape` at a GGUF quant: a what-if, not a file.

Per-layer bytes come from :func:`explorer.model.weights.weight_breakdown` at
``shape.resolve_precision(quant)``: every matrix at the quant mix's average
bits (Q4_K_M ≈ 4.8), 1-D tensors at the model dtype; llama.cpp's real mix
(Q6_K for some ``attn_v``/``ffn_down`` and the output) differs by a few
percent in a dense model. A mixture of experts at a mix with per-tensor rules
(:data:`explorer.gguf.mix.MIX_BASE_TYPES`) takes every tensor's bytes from
:func:`explorer.gguf.mix.gguf_mix` instead: its bytes are its experts', whose
types follow the ``ffn_down`` rule and the fallback of rows that are not whole
blocks, which no average captures (Gemma 4 26B-A4B at Q4_K_M: 15.63 GiB by the
mix, 15.27 at the average's 4.89 bits, 15.90 the published file with its
Q8_0 embedding). Gemma's per-layer token table sits with the output, as
llama.cpp places it (``LLM_TENSOR_LAYER_OUTPUT``), not on the host. Caches
are the shape's per-layer specs laid out as llama.cpp does: MLA keeps
``kv_lora_rank + rope`` K values and no V; recurrent state in f32.
Host buffers are shares of each block's matrices: CPU_REPACK takes the
quant's share of repack types (:data:`REPACK_SHARE`); on an AMX host AMX
takes the non-expert matrices of a quant whose types it packs
(:data:`AMX_WHATIF`, grown by the packed layout's extra bytes) and
CPU_REPACK the routed experts. MLA's ``attn_k_b``/``attn_v_b`` are taken to
be stored at the quant's main type, with llama-quant.cpp's fallback when
``attn_k_b``'s rows of ``qk_nope`` values do not fill 256-value blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.llamacpp.host_buffers import AMX_ROW_ALIGN, AMX_ROWS, NOWHERE, HostPlacement, HostWeights
from explorer.engines.llamacpp.model import REPACK_SHARE, AttnKind, LlamaLayer, LlamaModel
from explorer.gguf.mix import MIX_BASE_TYPES, MixTensor, gguf_mix
from explorer.model.conversion import converted_precision
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    FullAttention,
    MLAAttention,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.model.weights import weight_breakdown

#: what-if quants whose matrices AMX packs: (the main ggml type, AMX's allocation / file bytes), mixes
#: weighted by their main type's share (Q4_K_M: 0.8 Q4_K at 148/144, the rest Q6_K at 1); others stay out
AMX_WHATIF = {
    "Q4_0": ("Q4_0", 1.0),
    "Q4_1": ("Q4_1", 1.0),
    "Q8_0": ("Q8_0", 38 / 34),
    "Q4_K_S": ("Q4_K", 148 / 144),
    "Q4_K_M": ("Q4_K", 1 + 0.8 * 4 / 144),
    "Q5_K_S": ("Q5_K", 180 / 176),
    "Q5_K_M": ("Q5_K", 1 + 0.8 * 4 / 176),
    "Q6_K": ("Q6_K", 1.0),
    "IQ4_XS": ("IQ4_XS", 138 / 136),
    "F16": ("F16", 1.0),
}
#: Gemma's per-layer token table and its projection: llama.cpp loads them with the output layer, not the host
PER_LAYER_TABLES = "per_layer"
#: llama-quant.cpp tensor_type_fallback: the type a 256-block type becomes when a row does not fill its blocks
QUANT_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL"}


def llama_model_from_shape(shape, quant: str) -> LlamaModel:
    """An estimated :class:`LlamaModel`: ``shape`` stored as GGUF ``quant`` (``"Q4_K_M"``, ``"Q8_0"``…).

    Per-layer bytes come from :func:`explorer.model.weights.weight_breakdown` at
    :func:`~explorer.model.conversion.converted_precision` (a quant mix at its average bits; an MXFP4
    checkpoint's experts kept at the converter's own types);
    caches from the shape's per-layer specs, as llama.cpp lays them out.

    Raises:
        UnknownPrecisionError: ``quant`` is not a precision explorer knows.
    """
    precision = converted_precision(shape, quant)
    wb = weight_breakdown(shape, precision)
    key = str(quant).upper().replace("-", "_")
    mix = _expert_mix(shape, key) if precision.kept is None else None  # a converted GGUF keeps its MXFP4 experts
    share = REPACK_SHARE.get(key, 0.0)
    amx = AMX_WHATIF.get(key, ("", 0.0))
    mla_in_amx = _mla_in_amx(shape, amx[0])
    hidden = shape.hidden_size
    layers = []
    with_output = sum(precision.tensor_bytes(t) for t in shape.embeddings if PER_LAYER_TABLES in t.module)
    token_embd = mix.token_embd if mix else wb.embedding_bytes - with_output
    offset = token_embd
    matrix_bytes: dict[int, tuple[int, int]] = {}  # (matrices, experts); layers sharing tensors share them
    how = "llama-quantize's per-tensor types (explorer.gguf.mix)" if mix else "average bits per weight"
    notes = [f"what-if: {shape.name or 'model'} at {precision.name}, bytes from {how}"]
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
        size = mix.layer_bytes[i] if mix else wb.layer_bytes[i]
        key = id(layer.tensors) if precision.all_matrices and not mix else -1 - i
        if mix:
            matrix_bytes[key] = (mix.matrix_bytes[i], mix.expert_bytes[i])
        elif key not in matrix_bytes:  # layers of one tensor group at an every-matrix precision weigh the same
            matrix_bytes[key] = (
                sum(precision.tensor_bytes(t, i) for t in layer.tensors if t.cols > 1),
                sum(precision.tensor_bytes(t, i) for t in layer.tensors if t.cols > 1 and t.role == "expert"),
            )
        matrices, experts = matrix_bytes[key]
        block = (offset, offset + size)
        amx_src = matrices - experts if amx[0] else 0
        host = HostPlacement(
            plain=HostWeights(cpu_bytes=size, span=block),
            avx2=_shares(size, block, repack=int(matrices * share)),
            avx512=_shares(size, block, repack=int(matrices * share)),
            amx=_shares(
                size,
                block,
                repack=int(experts * share),
                amx_src=amx_src,
                amx=int(amx_src * amx[1]),
                mla=mla_in_amx if isinstance(c, MLAAttention) else (),
            ),
        )
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
                host=host,
                n_ff=mlp,
                moe=layer.moe,
            )
        )
        offset += size
    head = {t.role: precision.tensor_bytes(t) for t in shape.head}
    output = mix.output if mix else head.get("lm_head", 0)
    output_rest = mix.output_rest if mix else wb.head_bytes - output + with_output
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
        token_embd_bytes=token_embd,
        output_bytes=output,
        output_norm_bytes=output_rest,
        tied_output=shape.tied_embeddings,
        token_embd_span=(0, token_embd),
        output_host=_output_group(offset, output_rest, output, share, amx),
        tied_copy=_tied_copy(token_embd, share, amx) if shape.tied_embeddings else NOWHERE,
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpertMix:
    """A mixture of experts' tensors as llama-quantize stores them at a mix, grouped as llama.cpp loads them.

    Attributes:
        token_embd: ``token_embd`` (on the host), bytes.
        layer_bytes: each block's tensors, bytes.
        matrix_bytes: each block's matrices (what CPU_REPACK may take), bytes.
        expert_bytes: each block's routed experts, bytes.
        output: the output matrix (0 when tied), bytes.
        output_rest: the output norm and the tensors llama.cpp loads with the output layer (Gemma's
            per-layer token table and its projection), bytes.
    """

    token_embd: int
    layer_bytes: tuple[int, ...]
    matrix_bytes: tuple[int, ...]
    expert_bytes: tuple[int, ...]
    output: int
    output_rest: int


def _expert_mix(shape, quant: str) -> ExpertMix | None:
    """The mixture of experts' per-tensor mix at ``quant``; None for a dense model or a mix without rules."""
    if shape.moe is None or quant not in MIX_BASE_TYPES:
        return None
    tensors = gguf_mix(shape, quant)
    blocks: list[list[MixTensor]] = [[] for _ in shape.decoder]
    for t in tensors:
        if t.layer is not None:
            blocks[t.layer].append(t)
    outside = [t for t in tensors if t.layer is None]
    return ExpertMix(
        token_embd=sum(t.bytes for t in outside if t.name == "token_embd.weight"),
        layer_bytes=tuple(sum(t.bytes for t in b) for b in blocks),
        matrix_bytes=tuple(sum(t.bytes for t in b if t.type_name != "F32") for b in blocks),
        expert_bytes=tuple(sum(t.bytes for t in b if t.name.endswith("_exps.weight")) for b in blocks),
        output=sum(t.bytes for t in outside if t.name == "output.weight"),
        output_rest=sum(t.bytes for t in outside if t.name not in ("token_embd.weight", "output.weight")),
    )


def _shares(size: int, block: tuple[int, int], *, repack: int, amx_src: int = 0, amx: int = 0, mla=()) -> HostWeights:
    """A block whose ``repack`` and ``amx_src`` bytes move out of CPU (``amx``: their AMX size)."""
    cpu = size - repack - amx_src
    return HostWeights(cpu_bytes=cpu, repack_bytes=repack, amx_bytes=amx, span=block if cpu else (0, 0), amx_mla=mla)


def _output_group(start: int, norm: int, output: int, share: float, amx: tuple[str, float]) -> HostPlacement:
    """The output group as converters write it, the final norm then the output matrix (a MUL_MAT weight)."""
    end = start + norm + output
    repack = int(output * share)
    in_repack = HostWeights(cpu_bytes=norm + output - repack, repack_bytes=repack, span=(start, end))
    in_amx = HostWeights(cpu_bytes=norm, amx_bytes=int(output * amx[1]), span=(start, start + norm) if norm else (0, 0))
    return HostPlacement(
        plain=HostWeights(cpu_bytes=norm + output, span=(start, end)),
        avx2=in_repack,
        avx512=in_repack,
        amx=in_amx if amx[0] else in_repack,
    )


def _tied_copy(embedding: int, share: float, amx: tuple[str, float]) -> HostPlacement:
    """A tied output's copy of ``token_embd``: repacked when the quant is all repack types, else the same tensor."""
    in_repack = HostWeights(repack_bytes=embedding if share >= 1.0 else 0)
    in_amx = HostWeights(amx_bytes=int(embedding * amx[1]))
    return HostPlacement(plain=HostWeights(), avx2=in_repack, avx512=in_repack, amx=in_amx if amx[0] else in_repack)


def _mla_in_amx(shape, amx_type: str) -> tuple[str, ...]:
    """MLA's absorbed matrices AMX would hold, their types taken as the quant's (with llama-quant.cpp's fallback).

    ``attn_k_b`` is {qk_nope, kv_lora_rank, heads}, ``attn_v_b`` {kv_lora_rank, v_head, heads}; AMX needs rows
    (``ne1``) in multiples of 32 and ``ne0`` in multiples of the type's alignment.
    """
    mla = next((la.cache for la in shape.decoder if isinstance(la.cache, MLAAttention)), None)
    if mla is None or not amx_type or not shape.attention_heads:
        return ()
    nope = _mla_qk(shape, mla) - mla.rope_dim
    k_type = QUANT_FALLBACK.get(amx_type, amx_type) if nope % 256 else amx_type
    held = []
    for name, ty, ne0, ne1 in (
        ("attn_k_b", k_type, nope, mla.kv_lora_rank),
        ("attn_v_b", amx_type, mla.kv_lora_rank, _mla_v(shape)),
    ):
        align = AMX_ROW_ALIGN.get(ty)
        if align and ne1 and ne1 % AMX_ROWS == 0 and ne0 % align == 0:
            held.append(name)
    return tuple(held)


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
