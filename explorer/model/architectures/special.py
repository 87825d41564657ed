"""Models whose layers follow rules of their own.

- gpt-oss: attention with biases and per-head sinks, experts with biases
  (gate and up fused), sliding and full layers alternating (exact).
- Llama 4: routed experts plus a shared expert every ``interleave_moe_layer_step``
  layers, a dense MLP of ``intermediate_size_mlp`` in the others, chunked
  local attention with a global layer every fourth (exact for the text model).
- Nemotron-NAS (DeciLM, Llama-3.3-Nemotron-Super): each layer's attention and
  MLP come from ``block_configs``: grouped heads, a no-op, or a single linear;
  MLP width from ``ffn_mult`` (exact).
- DeepSeek-V4: a new layout read from its config as far as the keys describe
  it (approximate, with notes). Gemma 4 has its own module (``gemma4``).
- Molmo: a Qwen2-style decoder with a fused MLP (approximate: its vision
  backbone is not described in config.json).
"""

from __future__ import annotations

from explorer.errors import InvalidConfigValueError
from explorer.limits import check_count
from explorer.model.architectures.common import (
    ArchParts,
    Dims,
    Layer,
    MoESpec,
    attention,
    final_head,
    gated_mlp,
    read_dims,
    router,
    token_embeddings,
)
from explorer.model.architectures.llama import TOPK_KEYS, build_llama_like, layer_cache, moe_layer_mask
from explorer.model.architectures.patterns import SLIDING, attention_layout
from explorer.model.config_reader import ConfigView
from explorer.model.kv_cache import CompressedAttention, FullAttention, LayerCache, NoCache, SlidingWindowAttention
from explorer.model.tensors import Tensor, linear, norm, vector
from explorer.units import round_up


def _two_norms(p: str, hidden: int) -> tuple[Tensor, ...]:
    return norm(f"{p}.input_layernorm", hidden) + norm(f"{p}.post_attention_layernorm", hidden)


def build_gpt_oss(view: ConfigView) -> ArchParts:
    """gpt-oss: biased attention with sinks, biased fused experts, alternating windows."""
    d = read_dims(view)
    experts = view.get_int("num_local_experts", "num_experts", minimum=1) or 32
    layout = attention_layout(view, d.layers)
    p = "model.layers.{i}"
    layer = (
        attention(f"{p}.self_attn", d, qkv_bias=True, o_bias=True)
        + (vector(f"{p}.self_attn", d.heads, role="attention", param="sinks", split="column"),)
        + _two_norms(p, d.hidden)
        + router(f"{p}.mlp.router", d.hidden, experts, bias=True)
        + linear(
            f"{p}.mlp.experts.gate_up_proj",
            2 * d.intermediate,
            d.hidden,
            role="expert",
            split="expert_column",
            bias=True,
            count=experts,
        )
        + linear(
            f"{p}.mlp.experts.down_proj",
            d.hidden,
            d.intermediate,
            role="expert",
            split="expert_row",
            bias=True,
            count=experts,
        )
    )
    memo: dict[str, LayerCache] = {}
    layers = tuple(
        Layer(cache=memo.setdefault(k, layer_cache(k, d, layout.window)), tensors=layer, moe=True) for k in layout.kinds
    )
    moe = MoESpec(
        experts=experts,
        shared_experts=0,
        experts_per_token=view.get_int(*TOPK_KEYS, default=4) or 4,
        moe_intermediate_size=d.intermediate,
        shared_intermediate_size=0,
        moe_layers=d.layers,
        dense_layers=0,
    )
    return ArchParts(
        family="gpt-oss",
        layers=layers,
        embeddings=token_embeddings(d),
        head=final_head(d),
        moe=moe,
        notes=tuple(d.notes) + (f"sliding window of {layout.window} tokens on {layout.kinds.count(SLIDING)} layers",),
    )


def build_llama4(view: ConfigView) -> ArchParts:
    """Llama 4 text: interleaved MoE (routed + shared expert) and dense layers, chunked attention."""
    d = read_dims(view)
    experts = view.get_int("num_local_experts", minimum=1) or 16
    dense_width = view.get_int("intermediate_size_mlp", default=d.intermediate) or d.intermediate
    mask, _ = moe_layer_mask(view, d.layers)
    layout = attention_layout(view, d.layers)
    p = "language_model.model.layers.{i}"
    base = attention(f"{p}.self_attn", d) + _two_norms(p, d.hidden)
    moe_layer = (
        base
        + router(f"{p}.feed_forward.router", d.hidden, experts)
        + linear(
            f"{p}.feed_forward.experts.gate_up_proj",
            2 * d.intermediate,
            d.hidden,
            role="expert",
            split="expert_column",
            count=experts,
        )
        + linear(
            f"{p}.feed_forward.experts.down_proj",
            d.hidden,
            d.intermediate,
            role="expert",
            split="expert_row",
            count=experts,
        )
        + gated_mlp(f"{p}.feed_forward.shared_expert", d.hidden, d.intermediate, role="shared_expert")
    )
    dense_layer = base + gated_mlp(f"{p}.feed_forward", d.hidden, dense_width)
    memo: dict[str, LayerCache] = {}
    layers = tuple(
        Layer(
            cache=memo.setdefault(k, layer_cache(k, d, layout.window)), tensors=moe_layer if m else dense_layer, moe=m
        )
        for k, m in zip(layout.kinds, mask, strict=True)
    )
    moe = MoESpec(
        experts=experts,
        shared_experts=1,
        experts_per_token=view.get_int(*TOPK_KEYS, default=1) or 1,
        moe_intermediate_size=d.intermediate,
        shared_intermediate_size=d.intermediate,
        moe_layers=sum(mask),
        dense_layers=d.layers - sum(mask),
    )
    head = final_head(d, norm_module="language_model.model.norm", head_module="language_model.lm_head")
    return ArchParts(
        family="llama4",
        layers=layers,
        embeddings=token_embeddings(d, "language_model.model.embed_tokens"),
        head=head,
        moe=moe,
        notes=tuple(d.notes) + (f"chunked attention of {layout.window:,} tokens, a global layer every 4th",),
    )


def ffn_mult_to_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's MLP width: int(2 × ffn_mult × hidden / 3), rounded up to a multiple of 256."""
    return round_up(int(2 * ffn_mult * hidden / 3), 256)


def _deci_block(p: str, block: dict, d: Dims, where: str) -> tuple[tuple[Tensor, ...], LayerCache]:
    attn_cfg = block.get("attention") if isinstance(block.get("attention"), dict) else {}
    ffn_cfg = block.get("ffn") if isinstance(block.get("ffn"), dict) else {}
    attn = ConfigView.of(attn_cfg, where=f"{where}.attention")  # typed getters: counts capped, floats finite
    ffn = ConfigView.of(ffn_cfg, where=f"{where}.ffn")
    tensors: tuple[Tensor, ...] = ()
    cache: LayerCache = NoCache()
    if attn_cfg.get("replace_with_linear"):
        tensors += norm(f"{p}.input_layernorm", d.hidden) + linear(
            f"{p}.self_attn.linear_attn", d.hidden, d.hidden, role="attention", split="column"
        )
    elif not attn_cfg.get("no_op"):
        group = attn.get_int("n_heads_in_group") or 1
        kv = max(1, d.heads // group)
        tensors += norm(f"{p}.input_layernorm", d.hidden) + attention(f"{p}.self_attn", d, kv_heads=kv)
        window = attn.get_int("window_length")
        full = FullAttention(kv_heads=kv, head_dim=d.head_dim, v_head_dim=d.head_dim)
        cache = (
            SlidingWindowAttention(kv_heads=kv, head_dim=d.head_dim, v_head_dim=d.head_dim, window=int(window))
            if window
            else full
        )
    if ffn_cfg.get("replace_with_linear"):
        tensors += norm(f"{p}.post_attention_layernorm", d.hidden) + linear(
            f"{p}.mlp.linear_mlp", d.hidden, d.hidden, role="mlp", split="column"
        )
    elif not ffn_cfg.get("no_op"):
        mult = ffn.get_float("ffn_mult") or 1.0
        width = check_count(
            ffn_mult_to_width(min(abs(mult), 2.0**40), d.hidden), "intermediate_size (ffn_mult)", where=ffn.where,
            error=InvalidConfigValueError,
        )  # fmt: skip
        tensors += norm(f"{p}.post_attention_layernorm", d.hidden) + gated_mlp(f"{p}.mlp", d.hidden, width)
    return tensors, cache


def build_deci(view: ConfigView) -> ArchParts:
    """Nemotron-NAS / DeciLM: per-layer block configs."""
    d = read_dims(view)
    blocks = view.get_list("block_configs") or []
    layers = []
    memo: dict[str, tuple[tuple[Tensor, ...], LayerCache]] = {}
    for i in range(d.layers):
        block = blocks[i] if i < len(blocks) and isinstance(blocks[i], dict) else {}
        key = repr(sorted((k, sorted(v.items()) if isinstance(v, dict) else v) for k, v in block.items()))
        if key not in memo:
            memo[key] = _deci_block("model.layers.{i}", block, d, f"{view.where}: block_configs[{i}]")
        tensors, cache = memo[key]
        layers.append(Layer(cache=cache, tensors=tensors))
    no_attention = sum(1 for layer in layers if isinstance(layer.cache, NoCache))
    return ArchParts(
        family="deci",
        layers=tuple(layers),
        embeddings=token_embeddings(d),
        head=final_head(d),
        notes=tuple(d.notes) + (f"{no_attention} of {d.layers} layers have no attention (no KV cache)",),
    )


def _v4_compressor(p: str, d: Dims, width: int, ratio: int, overlap: bool) -> tuple[Tensor, ...]:
    """A compressor (bf16, not a quantised Linear): KV and gate projections to ``width`` (twice it when windows
    overlap, ratio 4), a position bias a window slot, the pooled entry's norm (transformers' DeepseekV4*Compressor)."""
    out = 2 * width if overlap else width
    return (
        Tensor(module=f"{p}.wkv", rows=out, cols=d.hidden, role="attention", split="replicated"),
        Tensor(module=f"{p}.wgate", rows=out, cols=d.hidden, role="attention", split="replicated"),
        Tensor(module=f"{p}.ape", rows=ratio, cols=out, role="attention", split="replicated"),
    ) + norm(f"{p}.norm", width)


def _v4_hyper_connection(p: str, name: str, hidden: int, hc: int, outputs: int) -> tuple[Tensor, ...]:
    """Hyper-connection mixing weights (``fn``), their bias (``base``) and scales, over ``hc`` residual streams."""
    return (
        Tensor(module=p, param=f"hc_{name}_fn", rows=outputs, cols=hc * hidden, role="other"),
        vector(p, outputs, role="other", param=f"hc_{name}_base"),
        vector(p, 3 if name != "head" else 1, role="other", param=f"hc_{name}_scale"),
    )


def _v4_layer(view: ConfigView, d: Dims, ratio: int, hashed: bool) -> tuple[Tensor, ...]:
    """One DeepSeek-V4 block: MQA with low-rank q and grouped output, its compressor (and CSA's indexer), hash or
    learned routing, routed and shared experts, two hyper-connections (transformers' DeepseekV4DecoderLayer)."""
    q_lora = view.get_int("q_lora_rank", default=1024) or 1024
    o_lora = view.get_int("o_lora_rank", default=1024) or 1024
    o_groups = view.get_int("o_groups", default=1, minimum=1) or 1
    experts = view.get_int("n_routed_experts", default=0) or 0
    moe_inter = view.get_int("moe_intermediate_size", default=2048) or 2048
    hc = view.get_int("hc_mult", default=4, minimum=1) or 4
    p = "model.layers.{i}"
    tensors = (
        linear(f"{p}.attn.wq_a", q_lora, d.hidden, role="attention", split="replicated")
        + norm(f"{p}.attn.q_norm", q_lora)
        + linear(f"{p}.attn.wq_b", d.heads * d.head_dim, q_lora, role="attention", split="column")
        + linear(f"{p}.attn.wkv", d.kv_heads * d.head_dim, d.hidden, role="attention", split="replicated")
        + norm(f"{p}.attn.kv_norm", d.head_dim)
        + linear(
            f"{p}.attn.wo_a", o_groups * o_lora, d.heads * d.head_dim // o_groups, role="attention", split="column"
        )
        + linear(f"{p}.attn.wo_b", d.hidden, o_groups * o_lora, role="attention", split="row")
        + (vector(f"{p}.attn", d.heads, role="attention", param="attn_sink", split="column"),)
    )
    if ratio:
        tensors += _v4_compressor(f"{p}.attn.compressor", d, d.head_dim, ratio, overlap=ratio == 4)
    if ratio == 4:
        heads = view.get_int("index_n_heads", default=64, minimum=1) or 64
        width = view.get_int("index_head_dim", default=128, minimum=1) or 128
        tensors += (
            linear(f"{p}.attn.indexer.wq_b", heads * width, q_lora, role="attention", split="replicated")
            + (Tensor(module=f"{p}.attn.indexer.weights_proj", rows=heads, cols=d.hidden, role="attention"),)
            + _v4_compressor(f"{p}.attn.indexer.compressor", d, width, ratio, overlap=True)
        )
    topk = view.get_int(*TOPK_KEYS, default=6) or 6
    gate = router(f"{p}.ffn.gate", d.hidden, experts, score_bias=not hashed)
    if hashed:  # a frozen token-id → expert-id table picks the experts (hash routing)
        gate += (Tensor(module=f"{p}.ffn.gate", param="tid2eid", rows=d.vocab, cols=topk, role="router"),)
    tensors += (
        gate
        + gated_mlp(f"{p}.ffn.experts.*", d.hidden, moe_inter, role="expert", count=experts)
        + gated_mlp(
            f"{p}.ffn.shared_experts",
            d.hidden,
            moe_inter * (view.get_int("n_shared_experts", default=1) or 1),
            role="shared_expert",
        )
        + _two_norms(p, d.hidden)
        + _v4_hyper_connection(p, "attn", d.hidden, hc, (2 + hc) * hc)
        + _v4_hyper_connection(p, "ffn", d.hidden, hc, (2 + hc) * hc)
    )
    return tensors


def build_deepseek_v4(view: ConfigView) -> ArchParts:
    """DeepSeek-V4: one latent KV head per layer, windowed plus compressed history; MTP layer not sized."""
    d = read_dims(view)
    ratios = [r if isinstance(r, int) and r >= 0 else 0 for r in (view.get_list("compress_ratios") or [])]
    window = view.get_int("sliding_window", default=128) or 128
    hashed = view.get_int("num_hash_layers", default=0) or 0
    memo: dict[tuple[int, bool], tuple[Tensor, ...]] = {}
    layers = []
    for i in range(d.layers):
        ratio = ratios[i] if i < len(ratios) else 0
        key = (ratio, i < hashed)
        if key not in memo:
            memo[key] = _v4_layer(view, d, *key)
        cache = CompressedAttention(kv_heads=d.kv_heads, head_dim=d.head_dim, v_head_dim=0, window=window, ratio=ratio)
        layers.append(Layer(cache=cache, tensors=memo[key], moe=True))
    moe_inter = view.get_int("moe_intermediate_size", default=2048) or 2048
    moe = MoESpec(
        experts=view.get_int("n_routed_experts", default=0) or 0,
        shared_experts=1,
        experts_per_token=view.get_int(*TOPK_KEYS, default=6) or 6,
        moe_intermediate_size=moe_inter,
        shared_intermediate_size=moe_inter,
        moe_layers=d.layers,
        dense_layers=0,
    )
    hc = view.get_int("hc_mult", default=4, minimum=1) or 4
    notes = tuple(d.notes) + (
        "DeepSeek-V4 layout read from transformers' DeepseekV4 classes (compressors, indexer, hyper-connections, "
        "hash routing, attention sinks); its multi-token-prediction layer is not sized: approximate",
        f"KV per layer: the last {window} tokens plus one entry per compress ratio (compress_ratios)",
    )
    return ArchParts(
        family="deepseek-v4",
        layers=tuple(layers),
        embeddings=token_embeddings(d),
        head=final_head(d) + _v4_hyper_connection("model", "head", d.hidden, hc, hc),
        moe=moe,
        exact=False,
        notes=notes,
    )


def build_molmo(view: ConfigView) -> ArchParts:
    """Molmo: a Qwen2-like decoder whose fused MLP width is ``intermediate_size`` (approximate)."""
    fused = dict(view.text)
    fused["intermediate_size"] = (view.alias_int("intermediate") or 0) // 2
    parts = build_llama_like(ConfigView.of(fused, view.where), family="qwen2")
    return ArchParts(
        family="molmo",
        layers=parts.layers,
        embeddings=parts.embeddings,
        head=parts.head,
        exact=False,
        notes=parts.notes + ("Molmo's vision backbone is not described in config.json: not counted",),
    )


BUILDERS = {
    "gpt_oss": build_gpt_oss,
    "llama4": build_llama4,
    "llama4_text": build_llama4,
    "nemotron-nas": build_deci,
    "deci": build_deci,
    "deepseek_v4": build_deepseek_v4,
    "molmo": build_molmo,
}
