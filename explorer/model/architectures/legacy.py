"""Older decoder layouts with fused projections and LayerNorm biases.

GPT-2 and StarCoder (GPTBigCode), Falcon (old RefinedWeb and the new
decoder), ChatGLM2/3, Qwen v1, Phi-2, GPT-NeoX and Persimmon/Fuyu. Counts
are exact for the language model: GPT-2 large gives 774,030,080 and Phi-2
2,779,683,840, as published.
"""

from __future__ import annotations

from dataclasses import replace

from explorer.model.architectures.common import (
    ArchParts,
    Dims,
    Layer,
    attention,
    full_attention_cache,
    gated_mlp,
    plain_mlp,
    read_dims,
)
from explorer.model.config_reader import ConfigView
from explorer.model.tensors import Tensor, embedding, linear, norm


def _fused_qkv(module: str, d: Dims, bias: bool) -> tuple[Tensor, ...]:
    """A fused q/k/v projection, counted as its q, k and v parts (one module name)."""
    return (
        linear(module, d.heads * d.head_dim, d.hidden, role="attention", split="column", bias=bias)
        + linear(module, d.kv_heads * d.head_dim, d.hidden, role="attention", split="kv", bias=bias, heads=d.kv_heads)
        + linear(module, d.kv_heads * d.head_dim, d.hidden, role="attention", split="kv", bias=bias, heads=d.kv_heads)
    )


def _assemble(
    d: Dims,
    layer: tuple[Tensor, ...],
    *,
    embed: tuple[Tensor, ...],
    head: tuple[Tensor, ...],
    family: str,
    notes: tuple[str, ...] = (),
) -> ArchParts:
    cache = full_attention_cache(d)
    return ArchParts(
        family=family,
        layers=tuple(Layer(cache=cache, tensors=layer) for _ in range(d.layers)),
        embeddings=embed,
        head=head,
        notes=tuple(d.notes) + notes,
    )


def _lm_head(d: Dims, module: str = "lm_head", *, bias: bool = False) -> tuple[Tensor, ...]:
    if d.tied:
        return ()
    head = (embedding(module, d.vocab, d.hidden, role="lm_head"),)
    if bias:
        head += (Tensor(module=module, param="bias", rows=d.vocab, role="lm_head", split="vocab"),)
    return head


def build_gpt2(view: ConfigView) -> ArchParts:
    """GPT-2 and GPTBigCode: learned positions, fused ``c_attn``, LayerNorms with bias, tied head."""
    d = read_dims(view, tied_default=True)
    inner = d.intermediate or 4 * d.hidden
    positions = view.alias_int("max_positions") or 1024
    p = "transformer.h.{i}"
    layer = (
        norm(f"{p}.ln_1", d.hidden, bias=True)
        + _fused_qkv(f"{p}.attn.c_attn", d, bias=True)
        + linear(f"{p}.attn.c_proj", d.hidden, d.hidden, role="attention", split="row", bias=True)
        + norm(f"{p}.ln_2", d.hidden, bias=True)
        + plain_mlp(f"{p}.mlp", d.hidden, inner, bias=True, names=("c_fc", "c_proj"))
    )
    embed = (
        embedding("transformer.wte", d.vocab, d.hidden),
        Tensor(module="transformer.wpe", rows=positions, cols=d.hidden, role="position"),
    )
    head = norm("transformer.ln_f", d.hidden, bias=True) + _lm_head(d)
    return _assemble(d, layer, embed=embed, head=head, family="gpt2")


def build_falcon(view: ConfigView) -> ArchParts:
    """Falcon: fused query_key_value, parallel attention and MLP, tied head.

    The new decoder (40B, 180B) has two LayerNorms a layer and grouped KV
    heads; the old one (7B) one LayerNorm and a single KV head.
    """
    d = read_dims(view, tied_default=True)
    new = view.get_bool("new_decoder_architecture") or view.raw("n_head_kv") is not None
    bias = view.get_bool("bias")
    p = "transformer.h.{i}"
    norms = (
        norm(f"{p}.ln_attn", d.hidden, bias=True) + norm(f"{p}.ln_mlp", d.hidden, bias=True)
        if new
        else norm(f"{p}.input_layernorm", d.hidden, bias=True)
    )
    layer = (
        norms
        + _fused_qkv(f"{p}.self_attention.query_key_value", d, bias=bias)
        + linear(f"{p}.self_attention.dense", d.hidden, d.hidden, role="attention", split="row", bias=bias)
        + plain_mlp(
            f"{p}.mlp", d.hidden, d.intermediate or 4 * d.hidden, bias=bias, names=("dense_h_to_4h", "dense_4h_to_h")
        )
    )
    embed = (embedding("transformer.word_embeddings", d.vocab, d.hidden),)
    head = norm("transformer.ln_f", d.hidden, bias=True) + _lm_head(d)
    return _assemble(d, layer, embed=embed, head=head, family="falcon")


def build_chatglm(view: ConfigView) -> ArchParts:
    """ChatGLM2/3: grouped KV (``multi_query_group_num``), fused SwiGLU ``dense_h_to_4h``."""
    d = read_dims(view)
    p = "transformer.encoder.layers.{i}"
    bias = view.get_bool("add_bias_linear")
    layer = (
        norm(f"{p}.input_layernorm", d.hidden)
        + _fused_qkv(f"{p}.self_attention.query_key_value", d, bias=view.get_bool("add_qkv_bias") or bias)
        + linear(f"{p}.self_attention.dense", d.hidden, d.hidden, role="attention", split="row", bias=bias)
        + norm(f"{p}.post_attention_layernorm", d.hidden)
        + linear(f"{p}.mlp.dense_h_to_4h", 2 * d.intermediate, d.hidden, role="mlp", split="column", bias=bias)
        + linear(f"{p}.mlp.dense_4h_to_h", d.hidden, d.intermediate, role="mlp", split="row", bias=bias)
    )
    embed = (embedding("transformer.embedding.word_embeddings", d.vocab, d.hidden),)
    head = norm("transformer.encoder.final_layernorm", d.hidden) + _lm_head(d, "transformer.output_layer")
    return _assemble(
        d,
        layer,
        embed=embed,
        head=head,
        family="chatglm",
        notes=("the rotary inv_freq buffer some checkpoints store (64 values) is not counted",),
    )


def build_qwen_v1(view: ConfigView) -> ArchParts:
    """Qwen (v1): fused ``c_attn`` with bias, an MLP of two ``intermediate_size / 2`` halves."""
    d = read_dims(view)
    half = d.intermediate // 2
    p = "transformer.h.{i}"
    layer = (
        norm(f"{p}.ln_1", d.hidden)
        + _fused_qkv(f"{p}.attn.c_attn", d, bias=True)
        + linear(f"{p}.attn.c_proj", d.hidden, d.hidden, role="attention", split="row")
        + norm(f"{p}.ln_2", d.hidden)
        + gated_mlp(f"{p}.mlp", d.hidden, half, names=("w1", "w2", "c_proj"))
    )
    embed = (embedding("transformer.wte", d.vocab, d.hidden),)
    head = norm("transformer.ln_f", d.hidden) + _lm_head(d)
    return _assemble(d, layer, embed=embed, head=head, family="qwen")


def build_phi(view: ConfigView) -> ArchParts:
    """Phi-1/2: biased q/k/v/dense and fc1/fc2, one LayerNorm (parallel block), biased head."""
    d = read_dims(view)
    p = "model.layers.{i}"
    layer = (
        norm(f"{p}.input_layernorm", d.hidden, bias=True)
        + attention(f"{p}.self_attn", d, qkv_bias=True, o_bias=True, names=("q_proj", "k_proj", "v_proj", "dense"))
        + plain_mlp(f"{p}.mlp", d.hidden, d.intermediate, bias=True, names=("fc1", "fc2"))
    )
    embed = (embedding("model.embed_tokens", d.vocab, d.hidden),)
    head = norm("model.final_layernorm", d.hidden, bias=True) + _lm_head(d, bias=True)
    return _assemble(d, layer, embed=embed, head=head, family="phi")


def build_gpt_neox(view: ConfigView) -> ArchParts:
    """GPT-NeoX / Pythia / RedPajama: fused biased q/k/v, two LayerNorms, untied ``embed_out``."""
    d = read_dims(view)
    p = "gpt_neox.layers.{i}"
    layer = (
        norm(f"{p}.input_layernorm", d.hidden, bias=True)
        + norm(f"{p}.post_attention_layernorm", d.hidden, bias=True)
        + _fused_qkv(f"{p}.attention.query_key_value", d, bias=True)
        + linear(f"{p}.attention.dense", d.hidden, d.hidden, role="attention", split="row", bias=True)
        + plain_mlp(
            f"{p}.mlp", d.hidden, d.intermediate or 4 * d.hidden, bias=True, names=("dense_h_to_4h", "dense_4h_to_h")
        )
    )
    embed = (embedding("gpt_neox.embed_in", d.vocab, d.hidden),)
    head = norm("gpt_neox.final_layer_norm", d.hidden, bias=True) + _lm_head(d, "embed_out")
    return _assemble(d, layer, embed=embed, head=head, family="gpt_neox")


def build_persimmon(view: ConfigView) -> ArchParts:
    """Persimmon and Fuyu: biased fused q/k/v, LayerNorms on q and k, ReLU² MLP; Fuyu's patch projection."""
    d = read_dims(view)
    p = "language_model.model.layers.{i}"
    qk = norm(f"{p}.self_attn.q_layernorm", d.head_dim, bias=True) + norm(
        f"{p}.self_attn.k_layernorm", d.head_dim, bias=True
    )
    layer = (
        norm(f"{p}.input_layernorm", d.hidden, bias=True)
        + norm(f"{p}.post_attention_layernorm", d.hidden, bias=True)
        + _fused_qkv(f"{p}.self_attn.query_key_value", d, bias=True)
        + linear(f"{p}.self_attn.dense", d.hidden, d.hidden, role="attention", split="row", bias=True)
        + (qk if view.get_bool("qk_layernorm") else ())
        + plain_mlp(f"{p}.mlp", d.hidden, d.intermediate, bias=True, names=("dense_h_to_4h", "dense_4h_to_h"))
    )
    embed = (embedding("language_model.model.embed_tokens", d.vocab, d.hidden),)
    head = norm("language_model.model.final_layernorm", d.hidden, bias=True) + _lm_head(d, "language_model.lm_head")
    parts = _assemble(d, layer, embed=embed, head=head, family="persimmon")
    patch = view.get_int("patch_size", default=0) or 0
    if patch:
        channels = view.get_int("num_channels", default=3) or 3
        vision = linear(
            "vision_embed_tokens", d.hidden, patch * patch * channels, role="vision", split="replicated", bias=True
        )
        parts = replace(parts, vision=vision)
    return parts


BUILDERS = {
    "gpt2": build_gpt2,
    "gpt_bigcode": build_gpt2,
    "falcon": build_falcon,
    "RefinedWeb": build_falcon,
    "RefinedWebModel": build_falcon,
    "chatglm": build_chatglm,
    "qwen": build_qwen_v1,
    "phi": build_phi,
    "gpt_neox": build_gpt_neox,
    "persimmon": build_persimmon,
    "fuyu": build_persimmon,
}
