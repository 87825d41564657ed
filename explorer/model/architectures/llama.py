"""Llama-like decoders, dense or mixture-of-experts.

Most open models are a Llama with variations: biases on q/k/v (Qwen2), a
norm on each query/key head (Qwen3, Gemma 3, EXAONE 4), four norms a layer
(Gemma 2/3), sliding windows, and routed experts replacing the MLP in some
or all layers (Mixtral, Qwen2/3-MoE, Granite-MoE). This builder counts
them exactly: Llama-3.1-8B gives 8,030,261,248 parameters and
Qwen3-30B-A3B 30,532,122,624, as the Hub reports.
"""

from __future__ import annotations

from explorer.model.architectures.common import (
    ArchParts,
    Dims,
    Layer,
    MoESpec,
    attention,
    final_head,
    full_attention_cache,
    gated_mlp,
    read_dims,
    router,
    token_embeddings,
)
from explorer.model.architectures.patterns import CHUNKED, SLIDING, attention_layout
from explorer.model.config_reader import ConfigView
from explorer.model.kv_cache import ChunkedLocalAttention, LayerCache, SlidingWindowAttention
from explorer.model.tensors import Tensor, linear, norm

#: model types whose q/k/v projections carry a bias (o_proj does not)
QKV_BIAS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl_text"}
#: model types with a norm over each query and key head
QK_HEAD_NORM = {
    "qwen3",
    "qwen3_moe",
    "qwen3_vl_text",
    "qwen3_vl_moe_text",
    "gemma3_text",
    "gemma3",
    "exaone4",
}
#: model types with four norms a layer (pre/post attention, pre/post feed-forward)
FOUR_NORMS = {"gemma2", "gemma3", "gemma3_text"}
#: model types whose embeddings are tied unless the config says otherwise
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "granitemoe", "granite", "smollm3"}

EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_top_k", "top_k_experts")


def layer_cache(
    kind: str, d: Dims, window: int, *, kv_heads: int | None = None, head_dim: int | None = None
) -> LayerCache:
    """The cache spec of one attention layer of a given kind."""
    full = full_attention_cache(d, kv_heads=kv_heads, head_dim=head_dim)
    if kind == SLIDING:
        return SlidingWindowAttention(
            kv_heads=full.kv_heads, head_dim=full.head_dim, v_head_dim=full.v_head_dim, window=window
        )
    if kind == CHUNKED:
        return ChunkedLocalAttention(
            kv_heads=full.kv_heads, head_dim=full.head_dim, v_head_dim=full.v_head_dim, chunk=window
        )
    return full


def moe_layer_mask(view: ConfigView, layers: int) -> tuple[list[bool], int]:
    """Which layers route to experts, and how many lead densely (``first_k_dense_replace``)."""
    dense_only = {int(i) for i in (view.get_list("mlp_only_layers") or []) if isinstance(i, int)}
    first_dense = view.get_int("first_k_dense_replace", default=0) or 0
    freq = view.get_int("moe_layer_freq", default=1, minimum=1) or 1
    step = view.get_int("decoder_sparse_step", "interleave_moe_layer_step", default=1, minimum=1) or 1
    mask = []
    for i in range(layers):
        is_moe = i not in dense_only and i >= first_dense and (i - first_dense) % freq == 0 and (i + 1) % step == 0
        mask.append(is_moe)
    return mask, first_dense


def moe_block(prefix: str, view: ConfigView, d: Dims, experts: int, moe_inter: int) -> tuple[tuple[Tensor, ...], int]:
    """A router, the routed experts and any shared experts; returns (tensors, shared width)."""
    names = ("w1", "w3", "w2") if view.text_model_type() == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    gate = f"{prefix}.gate"
    out = list(router(gate, d.hidden, experts, score_bias=view.get_str("topk_method") == "noaux_tc"))
    out += gated_mlp(f"{prefix}.experts.*", d.hidden, moe_inter, role="expert", count=experts, names=names)
    shared_width = (
        view.get_int("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size", default=0) or 0
    )
    n_shared = view.get_int("n_shared_experts", "num_shared_experts", default=0) or 0
    if shared_width and not view.raw("n_shared_experts", "num_shared_experts"):
        # Qwen-style: one shared expert of its own width, scaled by a sigmoid gate.
        out += gated_mlp(f"{prefix}.shared_expert", d.hidden, shared_width, role="shared_expert")
        out += linear(f"{prefix}.shared_expert_gate", 1, d.hidden, role="router", split="replicated")
        return tuple(out), shared_width
    if n_shared:
        width = shared_width or n_shared * moe_inter
        out += gated_mlp(f"{prefix}.shared_experts", d.hidden, width, role="shared_expert")
        return tuple(out), width
    return tuple(out), 0


def moe_spec(
    view: ConfigView,
    experts: int,
    mask: list[bool],
    moe_inter: int,
    shared_width: int,
    first_dense: int,
    *,
    default_topk: int,
) -> MoESpec:
    """The routing record of a model whose layers ``mask`` says route to experts."""
    return MoESpec(
        experts=experts,
        shared_experts=view.get_int("n_shared_experts", "num_shared_experts", default=1 if shared_width else 0) or 0,
        experts_per_token=view.get_int(*TOPK_KEYS, default=default_topk) or default_topk,
        moe_intermediate_size=moe_inter,
        shared_intermediate_size=shared_width,
        moe_layers=sum(mask),
        dense_layers=len(mask) - sum(mask),
        first_dense_layers=first_dense,
    )


def build_llama_like(view: ConfigView, *, family: str | None = None) -> ArchParts:
    """Build a Llama-like decoder (dense or MoE) exactly from its config."""
    mt = family or view.text_model_type()
    d = read_dims(view, tied_default=mt in TIED_BY_DEFAULT)
    notes = list(d.notes)
    bias_all = view.get_bool("attention_bias", "bias")
    qkv_bias = bias_all or mt in QKV_BIAS or view.get_bool("qkv_bias")
    qk_norm = "head" if (mt in QK_HEAD_NORM and view.get_bool("use_qk_norm", default=True)) else None
    mlp_bias = view.get_bool("mlp_bias")
    layout = attention_layout(view, d.layers, family=mt)
    experts = view.get_int(*EXPERT_KEYS, default=0) or 0
    moe_inter = view.get_int("moe_intermediate_size", default=d.intermediate) or d.intermediate
    mask, first_dense = moe_layer_mask(view, d.layers) if experts else ([False] * d.layers, 0)
    if not d.intermediate and not all(mask):
        view.require("intermediate")
        view.raise_if_missing()
    norms_per_layer = 4 if mt in FOUR_NORMS else 2
    layers: list[Layer] = []
    shared_width = 0
    cache_memo: dict[str, LayerCache] = {}
    block_memo: dict[bool, tuple[Tensor, ...]] = {}
    for i in range(d.layers):
        kind = layout.kinds[i]
        cache = cache_memo.setdefault(kind, layer_cache(kind, d, layout.window))
        if mask[i] not in block_memo:
            p = "model.layers.{i}"
            tensors = list(attention(f"{p}.self_attn", d, qkv_bias=qkv_bias, o_bias=bias_all, qk_norm=qk_norm))
            for n in range(norms_per_layer):
                tensors += norm(f"{p}.norm{n}", d.hidden)
            if mask[i]:
                block, shared_width = moe_block(f"{p}.mlp", view, d, experts, moe_inter)
                tensors += block
            else:
                tensors += gated_mlp(f"{p}.mlp", d.hidden, d.intermediate, bias=mlp_bias)
            block_memo[mask[i]] = tuple(tensors)
        layers.append(Layer(cache=cache, tensors=block_memo[mask[i]], moe=mask[i]))
    moe = moe_spec(view, experts, mask, moe_inter, shared_width, first_dense, default_topk=2) if experts else None
    if layout.source and layout.window:
        notes.append(f"sliding window of {layout.window:,} tokens ({layout.source})")
    return ArchParts(
        family="llama-like",
        layers=tuple(layers),
        embeddings=token_embeddings(d),
        head=final_head(d),
        moe=moe,
        notes=tuple(notes),
    )
