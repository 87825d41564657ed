"""Hybrid models: linear attention (gated delta nets) or Mamba beside a few attention layers.

Qwen3-Next and Qwen3.5 put one full-attention layer after every three
gated-delta-net layers (``full_attention_interval`` or ``layer_types``).
Nemotron-H spells each layer in ``hybrid_override_pattern``: ``M`` a Mamba-2
mixer, ``*`` attention, ``-`` an MLP, ``E`` a mixture of experts. Only the
attention layers grow with context; the others keep a fixed state per
sequence: a short-convolution window and a recurrent state, sized here as
vLLM sizes its Mamba cache (``conv_kernel - 1`` columns of the conv input;
``heads × head_k_dim × head_v_dim`` for a delta net, ``heads × head_dim ×
state_size`` for Mamba-2).
"""

from __future__ import annotations

from explorer.model.architectures.common import (
    ArchParts,
    Dims,
    Layer,
    MoESpec,
    as_mtp,
    attention,
    final_head,
    gated_mlp,
    plain_mlp,
    read_dims,
    router,
    token_embeddings,
)
from explorer.model.architectures.llama import EXPERT_KEYS, TOPK_KEYS, moe_block, moe_layer_mask
from explorer.model.architectures.patterns import FULL, LINEAR, attention_layout
from explorer.model.config_reader import ConfigView
from explorer.model.dtypes import element_type, model_dtype_name
from explorer.model.kv_cache import FullAttention, LayerCache, NoCache, RecurrentState
from explorer.model.tensors import Tensor, linear, norm, vector


def _state_bytes(view: ConfigView) -> tuple[int, int]:
    """(conv dtype bytes, recurrent-state dtype bytes): model dtype, and ``mamba_ssm_*dtype`` when set."""
    model = element_type(model_dtype_name(view.raw("torch_dtype", "dtype"))).block_bytes
    ssm_name = view.get_str("mamba_ssm_cache_dtype", "mamba_ssm_dtype")
    ssm = element_type(model_dtype_name(ssm_name, "bf16")).block_bytes if ssm_name else model
    return model, ssm


def _in_projections(
    prefix: str, view: ConfigView, hidden: int, qkv_rows: int, z_rows: int, v_heads: int
) -> tuple[Tensor, ...]:
    """A delta net's input projections, named as the checkpoint stores them, so that a quantisation config's
    skip list (which names the checkpoint's modules) matches them.

    Qwen3-Next stores ``in_proj_qkvz`` and ``in_proj_ba`` fused; Qwen3.5 stores ``in_proj_qkv``, ``in_proj_z``,
    ``in_proj_b`` and ``in_proj_a`` apart, which vLLM fuses at load (``qwen3_5.py`` ``packed_modules_mapping``:
    ``in_proj_qkvz: [in_proj_qkv, in_proj_z]``, ``in_proj_ba: [in_proj_b, in_proj_a]``) and quantises as its
    shards are named: an AutoRound Qwen3.6-27B AWQ lists ``linear_attn.in_proj_b`` and ``in_proj_a`` in
    ``modules_to_not_convert`` and stores them in fp16.
    """
    role, split = "linear_attention", "column"
    if not view.text_model_type().startswith("qwen3_5"):
        return linear(f"{prefix}.in_proj_qkvz", qkv_rows + z_rows, hidden, role=role, split=split) + linear(
            f"{prefix}.in_proj_ba", 2 * v_heads, hidden, role=role, split=split
        )
    return (
        linear(f"{prefix}.in_proj_qkv", qkv_rows, hidden, role=role, split=split)
        + linear(f"{prefix}.in_proj_z", z_rows, hidden, role=role, split=split)
        + linear(f"{prefix}.in_proj_b", v_heads, hidden, role=role, split=split)
        + linear(f"{prefix}.in_proj_a", v_heads, hidden, role=role, split=split)
    )


def delta_net(prefix: str, view: ConfigView, d: Dims) -> tuple[tuple[Tensor, ...], RecurrentState]:
    """A gated delta net (Qwen3-Next/Qwen3.5 linear attention) and its per-sequence state."""
    k_heads = view.get_int("linear_num_key_heads", minimum=1) or 16
    v_heads = view.get_int("linear_num_value_heads", minimum=1) or 32
    k_dim = view.get_int("linear_key_head_dim", minimum=1) or 128
    v_dim = view.get_int("linear_value_head_dim", minimum=1) or 128
    kernel = view.get_int("linear_conv_kernel_dim", minimum=1) or 4
    key_dim, value_dim = k_heads * k_dim, v_heads * v_dim
    conv_dim = 2 * key_dim + value_dim
    tensors = (
        _in_projections(prefix, view, d.hidden, conv_dim, value_dim, v_heads)
        + (
            Tensor(module=f"{prefix}.conv1d", rows=conv_dim, cols=kernel, role="linear_attention", split="column"),
            vector(f"{prefix}", v_heads, role="linear_attention", param="dt_bias", split="column"),
            vector(f"{prefix}", v_heads, role="linear_attention", param="A_log", split="column"),
            vector(f"{prefix}.norm", v_dim, role="linear_attention"),
        )
        + linear(f"{prefix}.out_proj", d.hidden, value_dim, role="linear_attention", split="row")
    )
    conv_bytes, ssm_bytes = _state_bytes(view)
    state = RecurrentState(
        family="linear",
        conv_elements=conv_dim * (kernel - 1),
        conv_bytes=conv_bytes,
        ssm_elements=v_heads * k_dim * v_dim,
        ssm_bytes=ssm_bytes,
        heads=v_heads,
        groups=k_heads,
    )
    return tensors, state


def build_qwen_next(view: ConfigView) -> ArchParts:
    """Qwen3-Next / Qwen3.5: gated delta nets with a gated full-attention layer every few."""
    d = read_dims(view)
    layout = attention_layout(view, d.layers)
    if LINEAR not in layout.kinds:
        layout = type(layout)(
            tuple(FULL if (i + 1) % 4 == 0 else LINEAR for i in range(d.layers)), 0, "default interval 4"
        )
    experts = view.get_int(*EXPERT_KEYS, default=0) or 0
    moe_inter = view.get_int("moe_intermediate_size", default=d.intermediate) or d.intermediate
    mask, _ = moe_layer_mask(view, d.layers) if experts else ([False] * d.layers, 0)
    attn_cache = FullAttention(kv_heads=d.kv_heads, head_dim=d.head_dim, v_head_dim=d.head_dim)
    memo: dict[tuple[str, bool], tuple[tuple[Tensor, ...], LayerCache]] = {}
    shared = 0
    layers = []
    for i in range(d.layers):
        key = (layout.kinds[i], mask[i])
        if key not in memo:
            p = "model.layers.{i}"
            if key[0] == LINEAR:
                mixer, cache = delta_net(f"{p}.linear_attn", view, d)
            else:
                mixer, cache = attention(f"{p}.self_attn", d, qk_norm="head", q_gate=True), attn_cache
            tensors = mixer + norm(f"{p}.input_layernorm", d.hidden) + norm(f"{p}.post_attention_layernorm", d.hidden)
            if key[1]:
                block, shared = moe_block(f"{p}.mlp", view, d, experts, moe_inter)
            else:
                block = gated_mlp(f"{p}.mlp", d.hidden, d.intermediate)
            memo[key] = (tensors + block, cache)
        tensors, cache = memo[key]
        layers.append(Layer(cache=cache, tensors=tensors, moe=mask[i]))
    mtp = _qwen_mtp(view, d, memo.get((FULL, bool(experts))))
    moe = None
    if experts:
        moe = MoESpec(
            experts=experts,
            shared_experts=1 if shared else 0,
            experts_per_token=view.get_int(*TOPK_KEYS, default=10) or 10,
            moe_intermediate_size=moe_inter,
            shared_intermediate_size=shared,
            moe_layers=sum(mask),
            dense_layers=d.layers - sum(mask),
        )
    notes = list(d.notes) + [f"{layout.kinds.count(LINEAR)} gated-delta-net layers keep a fixed state per sequence"]
    if mtp:
        notes.append("multi-token-prediction layer counted in params, not loaded for plain serving")
    return ArchParts(
        family="hybrid",
        layers=tuple(layers),
        embeddings=token_embeddings(d),
        head=final_head(d),
        mtp=mtp,
        moe=moe,
        notes=tuple(notes),
    )


def _qwen_mtp(view: ConfigView, d: Dims, full_layer) -> tuple[Tensor, ...]:
    count = view.get_int("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0) or 0
    if not count or full_layer is None:
        return ()
    out: list[Tensor] = []
    for n in range(count):
        out += as_mtp(full_layer[0], rename=("model.layers.{i}.", f"mtp.layers.{n}."))
        out += linear("mtp.fc", d.hidden, 2 * d.hidden, role="mtp", split="replicated")
        out += [
            vector("mtp.pre_fc_norm_embedding", d.hidden),
            vector("mtp.pre_fc_norm_hidden", d.hidden),
            vector("mtp.norm", d.hidden),
        ]
    return as_mtp(out)


def mamba2(prefix: str, view: ConfigView, d: Dims) -> tuple[tuple[Tensor, ...], RecurrentState]:
    """A Mamba-2 mixer (Nemotron-H) and its per-sequence state."""
    heads = view.get_int("mamba_num_heads", minimum=1) or 128
    head_dim = view.get_int("mamba_head_dim", minimum=1) or 64
    groups = view.get_int("n_groups", minimum=1) or 8
    state = view.get_int("ssm_state_size", minimum=1) or 128
    kernel = view.get_int("conv_kernel", minimum=1) or 4
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    tensors = (
        linear(
            f"{prefix}.in_proj",
            inner + conv_dim + heads,
            d.hidden,
            role="ssm",
            split="column",
            bias=view.get_bool("use_bias"),
        )
        + (Tensor(module=f"{prefix}.conv1d", rows=conv_dim, cols=kernel, role="ssm", split="column"),)
        + (
            (vector(f"{prefix}.conv1d", conv_dim, role="ssm", param="bias", split="column"),)
            if view.get_bool("use_conv_bias", default=True)
            else ()
        )
        + tuple(vector(prefix, heads, role="ssm", param=p, split="column") for p in ("dt_bias", "A_log", "D"))
        + (vector(f"{prefix}.norm", inner, role="ssm", split="column"),)
        + linear(f"{prefix}.out_proj", d.hidden, inner, role="ssm", split="row", bias=view.get_bool("use_bias"))
    )
    conv_bytes, ssm_bytes = _state_bytes(view)
    cache = RecurrentState(
        family="mamba",
        conv_elements=conv_dim * (kernel - 1),
        conv_bytes=conv_bytes,
        ssm_elements=heads * head_dim * state,
        ssm_bytes=ssm_bytes,
        heads=heads,
        groups=groups,
    )
    return tensors, cache


def _nemotron_moe(prefix: str, view: ConfigView, d: Dims, experts: int) -> tuple[Tensor, ...]:
    moe_inter = view.get_int("moe_intermediate_size", minimum=1) or d.intermediate
    shared = view.get_int("moe_shared_expert_intermediate_size", default=0) or 0
    out = list(router(f"{prefix}.gate", d.hidden, experts, score_bias=True))
    out += linear(
        f"{prefix}.experts.*.up_proj", moe_inter, d.hidden, role="expert", split="expert_column", count=experts
    )
    out += linear(
        f"{prefix}.experts.*.down_proj", d.hidden, moe_inter, role="expert", split="expert_row", count=experts
    )
    if shared:
        out += plain_mlp(f"{prefix}.shared_experts", d.hidden, shared, role="shared_expert")
    return tuple(out)


def build_nemotron_h(view: ConfigView) -> ArchParts:
    """Nemotron-H: one mixer a layer, spelled by ``hybrid_override_pattern``."""
    d = read_dims(view)
    pattern = view.get_str("hybrid_override_pattern") or ""
    if len(pattern) != d.layers:
        pattern = (pattern * d.layers)[: d.layers] if pattern else "M" * d.layers
    head_dim = view.get_int("head_dim", "attention_head_dim", minimum=1) or d.head_dim
    experts = view.get_int(*EXPERT_KEYS, default=0) or 0
    memo: dict[str, tuple[tuple[Tensor, ...], LayerCache]] = {}
    layers = []
    for ch in pattern:
        if ch not in memo:
            p = "backbone.layers.{i}"
            if ch == "M":
                mixer, cache = mamba2(f"{p}.mixer", view, d)
            elif ch == "*":
                mixer = attention(f"{p}.mixer", d, head_dim=head_dim)
                cache = FullAttention(kv_heads=d.kv_heads, head_dim=head_dim, v_head_dim=head_dim)
            elif ch == "E":
                mixer, cache = _nemotron_moe(f"{p}.mixer", view, d, experts), NoCache()
            else:
                mixer, cache = (
                    plain_mlp(f"{p}.mixer", d.hidden, d.intermediate, bias=view.get_bool("mlp_bias")),
                    NoCache(),
                )
            memo[ch] = (mixer + norm(f"{p}.norm", d.hidden), cache)
        tensors, cache = memo[ch]
        layers.append(Layer(cache=cache, tensors=tensors, moe=ch == "E"))
    moe = None
    if experts and "E" in pattern:
        moe = MoESpec(
            experts=experts,
            shared_experts=view.get_int("n_shared_experts", default=0) or 0,
            experts_per_token=view.get_int(*TOPK_KEYS, default=6) or 6,
            moe_intermediate_size=view.get_int("moe_intermediate_size", default=0) or 0,
            shared_intermediate_size=view.get_int("moe_shared_expert_intermediate_size", default=0) or 0,
            moe_layers=pattern.count("E"),
            dense_layers=d.layers - pattern.count("E"),
        )
    counts = ", ".join(
        f"{pattern.count(c)} {n}"
        for c, n in (("M", "Mamba-2"), ("*", "attention"), ("-", "MLP"), ("E", "MoE"))
        if c in pattern
    )
    return ArchParts(
        family="hybrid",
        layers=tuple(layers),
        embeddings=token_embeddings(d, "backbone.embeddings"),
        head=final_head(d, norm_module="backbone.norm_f"),
        moe=moe,
        notes=tuple(d.notes) + (f"layers: {counts}",),
    )


BUILDERS = {
    "qwen3_next": build_qwen_next,
    "qwen3_5": build_qwen_next,
    "qwen3_5_text": build_qwen_next,
    "qwen3_5_moe": build_qwen_next,
    "qwen3_5_moe_text": build_qwen_next,
    "nemotron_h": build_nemotron_h,
}
