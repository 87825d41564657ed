"""Multi-head latent attention models: DeepSeek-V2/V3/V3.2, Kimi K2, GLM-5.

MLA compresses K and V into one latent of ``kv_lora_rank`` values plus a
decoupled rotary key of ``qk_rope_head_dim``; that latent is all the cache
keeps (DeepSeek-V3: 512 + 64 = 576 values a token a layer), and every
tensor-parallel card keeps all of it. The down-projections
(``q_a_proj``, ``kv_a_proj_with_mqa``) are replicated on every card.

DeepSeek-V3.2 and GLM-5 add a sparse-attention indexer whose own key cache
(128 fp8 values + a 4-byte scale = 132 bytes a token a layer) sits beside
the latent. Multi-token-prediction layers (``num_nextn_predict_layers``)
are stored in the checkpoint with their own copy of the embeddings and
head; they count in ``params`` but not in served weights.
"""

from __future__ import annotations

from explorer.model.architectures.common import (
    ArchParts,
    Dims,
    Layer,
    as_mtp,
    final_head,
    gated_mlp,
    read_dims,
    token_embeddings,
)
from explorer.model.architectures.llama import EXPERT_KEYS, moe_block, moe_layer_mask, moe_spec
from explorer.model.config_reader import ConfigView
from explorer.model.kv_cache import MLAAttention
from explorer.model.tensors import Tensor, embedding, linear, norm, vector

#: the indexer's key cache: index_head_dim fp8 values + one fp32 scale per 128 (vLLM's DeepseekV32IndexerCache)
INDEXER_SCALE_BLOCK = 128


def mla_attention(prefix: str, view: ConfigView, d: Dims) -> tuple[Tensor, ...]:
    """The MLA projections of one layer (and the sparse indexer, when configured)."""
    q_lora = view.get_int("q_lora_rank", default=0) or 0
    kv_lora = view.get_int("kv_lora_rank", minimum=1) or 512
    rope = view.get_int("qk_rope_head_dim", default=64) or 64
    nope = view.get_int("qk_nope_head_dim", default=128) or 128
    v_dim = view.get_int("v_head_dim", default=nope) or nope
    qk_dim = nope + rope
    out: list[Tensor] = []
    if q_lora:
        out += linear(f"{prefix}.q_a_proj", q_lora, d.hidden, role="attention", split="replicated")
        out += norm(f"{prefix}.q_a_layernorm", q_lora)
        out += linear(f"{prefix}.q_b_proj", d.heads * qk_dim, q_lora, role="attention", split="column")
    else:
        out += linear(f"{prefix}.q_proj", d.heads * qk_dim, d.hidden, role="attention", split="column")
    out += linear(f"{prefix}.kv_a_proj_with_mqa", kv_lora + rope, d.hidden, role="attention", split="replicated")
    out += norm(f"{prefix}.kv_a_layernorm", kv_lora)
    out += linear(f"{prefix}.kv_b_proj", d.heads * (nope + v_dim), kv_lora, role="attention", split="column")
    out += linear(f"{prefix}.o_proj", d.hidden, d.heads * v_dim, role="attention", split="row")
    index_heads = view.get_int("index_n_heads", default=0) or 0
    index_dim = view.get_int("index_head_dim", default=0) or 0
    if index_heads and index_dim:
        ip = f"{prefix}.indexer"
        out += linear(f"{ip}.wq_b", index_heads * index_dim, q_lora or d.hidden, role="attention", split="replicated")
        out += linear(f"{ip}.wk", index_dim, d.hidden, role="attention", split="replicated")
        out += norm(f"{ip}.k_norm", index_dim, bias=True)
        out += linear(f"{ip}.weights_proj", index_heads, d.hidden, role="attention", split="replicated")
    return tuple(out)


def mla_cache(view: ConfigView) -> MLAAttention:
    """The per-layer latent cache (and indexer keys)."""
    index_dim = view.get_int("index_head_dim", default=0) or 0
    indexer = index_dim + (index_dim // INDEXER_SCALE_BLOCK) * 4 if view.get_int("index_n_heads", default=0) else 0
    return MLAAttention(
        kv_lora_rank=view.get_int("kv_lora_rank", minimum=1) or 512,
        rope_dim=view.get_int("qk_rope_head_dim", default=64) or 64,
        indexer_bytes_per_token=indexer,
    )


def _decoder_layer(
    prefix: str, view: ConfigView, d: Dims, moe: bool, experts: int, moe_inter: int
) -> tuple[tuple[Tensor, ...], int]:
    tensors = list(mla_attention(f"{prefix}.self_attn", view, d))
    tensors += norm(f"{prefix}.input_layernorm", d.hidden) + norm(f"{prefix}.post_attention_layernorm", d.hidden)
    shared = 0
    if moe:
        block, shared = moe_block(f"{prefix}.mlp", view, d, experts, moe_inter)
        tensors += block
    else:
        tensors += gated_mlp(f"{prefix}.mlp", d.hidden, d.intermediate)
    return tuple(tensors), shared


def _mtp_layers(view: ConfigView, d: Dims, experts: int, moe_inter: int) -> tuple[Tensor, ...]:
    count = view.get_int("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0) or 0
    out: list[Tensor] = []
    for n in range(count):
        p = f"model.layers.{d.layers + n}"
        layer, _ = _decoder_layer(p, view, d, bool(experts), experts, moe_inter)
        out += list(layer)
        out += [vector(f"{p}.enorm", d.hidden), vector(f"{p}.hnorm", d.hidden)]
        # vLLM deepseek_mtp.py: eh_proj is a plain nn.Linear, never quantised; the layer itself takes the
        # checkpoint's quant_config (DeepSeek-V3 stores layer 61 in fp8 like the others)
        out += [Tensor(module=f"{p}.eh_proj", rows=d.hidden, cols=2 * d.hidden, role="mtp", split="replicated")]
        out += [vector(f"{p}.shared_head.norm", d.hidden)]
        out += [
            embedding(f"{p}.embed_tokens", d.vocab, d.hidden),
            embedding(f"{p}.shared_head.head", d.vocab, d.hidden),
        ]
    return as_mtp(out)


def build_mla(view: ConfigView) -> ArchParts:
    """Build a DeepSeek-style MLA decoder (dense-first layers, then MoE)."""
    d = read_dims(view)
    experts = view.get_int(*EXPERT_KEYS, default=0) or 0
    moe_inter = view.get_int("moe_intermediate_size", default=d.intermediate) or d.intermediate
    mask, first_dense = moe_layer_mask(view, d.layers) if experts else ([False] * d.layers, 0)
    cache = mla_cache(view)
    memo: dict[bool, tuple[Tensor, ...]] = {}
    shared = 0
    layers = []
    for i in range(d.layers):
        if mask[i] not in memo:
            memo[mask[i]], width = _decoder_layer("model.layers.{i}", view, d, mask[i], experts, moe_inter)
            shared = max(shared, width)
        layers.append(Layer(cache=cache, tensors=memo[mask[i]], moe=mask[i]))
    moe = moe_spec(view, experts, mask, moe_inter, shared, first_dense, default_topk=8) if experts else None
    notes = list(d.notes)
    mtp = _mtp_layers(view, d, experts, moe_inter)
    if mtp:
        notes.append("multi-token-prediction layers counted in params, not loaded for plain serving")
    if cache.indexer_bytes_per_token:
        notes.append(
            f"sparse-attention indexer keys: {cache.indexer_bytes_per_token} bytes a token a layer (fp8 + scale)"
        )
    return ArchParts(
        family="mla",
        layers=tuple(layers),
        embeddings=token_embeddings(d),
        head=final_head(d),
        mtp=mtp,
        moe=moe,
        notes=tuple(notes),
    )


BUILDERS = {
    "deepseek_v2": build_mla,
    "deepseek_v3": build_mla,
    "deepseek_v32": build_mla,
    "kimi_k2": build_mla,
    "glm_moe_dsa": build_mla,
}
