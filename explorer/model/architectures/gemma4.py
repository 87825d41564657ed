"""Gemma 4 (``gemma4``, ``gemma4_text``): every tensor and cache as transformers, vLLM and llama.cpp hold them.

Read from transformers' ``models/gemma4`` (``Gemma4TextConfig``, ``Gemma4TextDecoderLayer``,
``Gemma4TextAttention``, ``Gemma4TextRouter``, ``Gemma4VisionModel``, ``Gemma4MultimodalEmbedder``),
vLLM's ``model_executor/models/gemma4.py`` and llama.cpp's ``src/models/gemma4.cpp``:

- layers: ``layer_types`` (default five sliding to one full, the last forced full), a window of
  ``sliding_window`` tokens (default 512). Sliding layers have ``num_key_value_heads`` heads of
  ``head_dim``; full layers heads of ``global_head_dim`` (default 512), and ``num_global_key_value_heads``
  of them when ``attention_k_eq_v`` (K reused as V: no ``v_proj`` in the checkpoint or the GGUF);
- KV: every layer that owns its K/V caches K and V, a K-as-V layer too (vLLM loads K into the V slot of
  its QKV projection, llama.cpp stores V = K); the last ``num_kv_shared_layers`` layers reuse an earlier
  layer's cache and hold none (no ``k_proj``/``v_proj``/``k_norm`` either), and with
  ``use_double_wide_mlp`` their MLP is twice ``intermediate_size``;
- per layer: four norms, a one-value ``layer_scalar``, q/k norms of one head; per-layer embeddings
  (``hidden_size_per_layer_input``, default 256; 0 in the 26B-A4B) add a gate, a projection and a norm to
  every layer and a ``vocab_size_per_layer_input × layers·ple`` table with its projection and norm;
- MoE (``enable_moe_block``): the dense MLP stays beside ``num_experts`` routed experts (fused gate+up),
  with a router (``proj``, ``scale``, ``per_expert_scale``) and three more norms;
- the vision tower (``vision_config``): patch projection, a 2 × ``position_embedding_size`` position
  table, gated-MLP encoder layers with q/k norms, ``std_bias``/``std_scale`` when ``standardize``, and
  the embedder's projection to the text width. An audio tower (E2B/E4B) is not sized: approximate.
"""

from __future__ import annotations

from explorer.errors import InvalidConfigValueError
from explorer.model.architectures.common import (
    ArchParts,
    Dims,
    Layer,
    MoESpec,
    VisionSpec,
    attention,
    final_head,
    gated_mlp,
    read_dims,
    router,
    token_embeddings,
)
from explorer.model.architectures.llama import TOPK_KEYS
from explorer.model.architectures.patterns import FULL, SLIDING, attention_layout
from explorer.model.config_reader import ConfigView
from explorer.model.kv_cache import FullAttention, LayerCache, NoCache, SlidingWindowAttention
from explorer.model.tensors import Tensor, embedding, linear, norm, vector

#: transformers' Gemma4TextConfig defaults for the keys a sparse config may leave out
GLOBAL_HEAD_DIM = 512
PLE_WIDTH = 256
SLIDING_WINDOW = 512
#: one full-attention layer in every six (``sliding_window_pattern``)
PATTERN = 6
#: the four norms of every decoder layer
LAYER_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")
#: the language model's module prefix in the published (multimodal) checkpoints
PREFIX = "model.language_model"


def _layer_kinds(view: ConfigView, layers: int) -> tuple[tuple[str, ...], int]:
    """Each layer's attention kind and the window, as ``Gemma4TextConfig.__post_init__`` settles them."""
    window = view.get_int("sliding_window", default=SLIDING_WINDOW) or SLIDING_WINDOW
    if view.get_list("layer_types"):
        kinds = list(attention_layout(view, layers).kinds)
    else:
        kinds = [SLIDING if (i + 1) % PATTERN else FULL for i in range(layers)]
    kinds[-1] = FULL  # transformers forces the last layer to full attention
    bad = sorted({k for k in kinds if k not in (FULL, SLIDING)})
    if bad:
        raise InvalidConfigValueError(f"{view.where}: Gemma 4 layers are sliding or full, not {', '.join(bad)}")
    return tuple(kinds), window


def _attention(p: str, d: Dims, kind: str, shared: bool, g: tuple[int, int], k_eq_v: bool) -> tuple[Tensor, ...]:
    """A layer's projections and q/k norms; a KV-shared layer keeps only q and o."""
    kv, hd = g if kind == FULL else (d.kv_heads, d.head_dim)
    tensors = attention(f"{p}.self_attn", d, kv_heads=kv, head_dim=hd, qk_norm="head")
    drop = {".k_proj", ".v_proj", ".k_norm"} if shared else ({".v_proj"} if kind == FULL and k_eq_v else set())
    return tuple(t for t in tensors if not any(t.module.endswith(s) for s in drop))


def _cache(d: Dims, kind: str, shared: bool, g: tuple[int, int], window: int) -> LayerCache:
    if shared:
        return NoCache()
    if kind == FULL:
        return FullAttention(kv_heads=g[0], head_dim=g[1], v_head_dim=g[1])
    return SlidingWindowAttention(kv_heads=d.kv_heads, head_dim=d.head_dim, v_head_dim=d.head_dim, window=window)


def _moe(p: str, d: Dims, experts: int, width: int) -> tuple[Tensor, ...]:
    """Router (projection, input scale, per-expert scale), fused gate+up and down experts, three norms."""
    return (
        router(f"{p}.router.proj", d.hidden, experts)
        + (vector(f"{p}.router", d.hidden, role="router", param="scale"),)
        + (vector(f"{p}.router", experts, role="router", param="per_expert_scale"),)
        + linear(f"{p}.experts.gate_up_proj", 2 * width, d.hidden, role="expert", split="expert_column", count=experts)
        + linear(f"{p}.experts.down_proj", d.hidden, width, role="expert", split="expert_row", count=experts)
        + tuple(
            t
            for n in ("pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2")
            for t in norm(f"{p}.{n}", d.hidden)
        )
    )


def _per_layer_input(p: str, d: Dims, ple: int) -> tuple[Tensor, ...]:
    return (
        linear(f"{p}.per_layer_input_gate", ple, d.hidden, role="mlp", split="replicated")
        + linear(f"{p}.per_layer_projection", d.hidden, ple, role="mlp", split="replicated")
        + norm(f"{p}.post_per_layer_input_norm", d.hidden)
    )


def _embeddings(view: ConfigView, d: Dims, ple: int) -> tuple[Tensor, ...]:
    """The token table and, with per-layer embeddings, their table, projection and norm."""
    out = token_embeddings(d, f"{PREFIX}.embed_tokens")
    if ple:
        vocab = view.get_int("vocab_size_per_layer_input", default=d.vocab, minimum=1) or d.vocab
        out += (
            embedding(f"{PREFIX}.embed_tokens_per_layer", vocab, d.layers * ple),
            Tensor(module=f"{PREFIX}.per_layer_model_projection", rows=d.layers * ple, cols=d.hidden, role="other"),
            vector(f"{PREFIX}.per_layer_projection_norm", ple),
        )
    return out


def vision_tensors(cfg: ConfigView, text_hidden: int) -> tuple[tuple[Tensor, ...], VisionSpec]:
    """``Gemma4VisionModel`` and ``embed_vision``'s projection, every tensor."""
    hidden = cfg.get_int("hidden_size", default=768, minimum=1) or 768
    layers = cfg.get_int("num_hidden_layers", default=16, minimum=1) or 16
    heads = cfg.get_int("num_attention_heads", default=12, minimum=1) or 12
    kv = cfg.get_int("num_key_value_heads", default=heads, minimum=1) or heads
    hd = cfg.get_int("head_dim", default=64, minimum=1) or 64
    inter = cfg.get_int("intermediate_size", default=3072, minimum=1) or 3072
    patch = cfg.get_int("patch_size", default=16, minimum=1) or 16
    positions = cfg.get_int("position_embedding_size", default=10240, minimum=1) or 10240
    clipped = 4 if cfg.get_bool("use_clipped_linears") else 0  # input/output min/max buffers a linear
    p = "model.vision_tower.encoder.layers.{i}"

    def proj(name: str, out: int, inp: int, split: str) -> Tensor:
        return Tensor(module=f"{p}.{name}", rows=out, cols=inp, count=layers, role="vision", split=split)  # type: ignore[arg-type]

    per_layer = (
        proj("self_attn.q_proj", heads * hd, hidden, "column"),
        proj("self_attn.k_proj", kv * hd, hidden, "column"),
        proj("self_attn.v_proj", kv * hd, hidden, "column"),
        proj("self_attn.o_proj", hidden, heads * hd, "row"),
        proj("mlp.gate_proj", inter, hidden, "column"),
        proj("mlp.up_proj", inter, hidden, "column"),
        proj("mlp.down_proj", hidden, inter, "row"),
        Tensor(module=f"{p}.norms", rows=4 * hidden + 2 * hd + 7 * clipped, count=layers, role="vision"),
    )
    stem = (
        Tensor(
            module="model.vision_tower.patch_embedder.input_proj", rows=hidden, cols=3 * patch * patch, role="vision"
        ),
        Tensor(
            module="model.vision_tower.patch_embedder",
            param="position_embedding_table",
            rows=2 * positions,
            cols=hidden,
            role="vision",
        ),
        Tensor(module="model.embed_vision.embedding_projection", rows=text_hidden, cols=hidden, role="vision"),
    )
    if cfg.get_bool("standardize"):
        stem += (Tensor(module="model.vision_tower", param="std_bias_scale", rows=2 * hidden, role="vision"),)
    tensors = per_layer + stem
    spec = VisionSpec(
        model_type=str(cfg.raw("model_type") or "gemma4_vision"),
        heads=heads,
        layers=layers,
        hidden_size=hidden,
        params=sum(t.elements for t in tensors),
    )
    return tensors, spec


def build_gemma4(view: ConfigView) -> ArchParts:
    """Gemma 4: sliding and wider global layers, KV shared by the last layers, per-layer embeddings, MoE."""
    d = read_dims(view, tied_default=True)
    kinds, window = _layer_kinds(view, d.layers)
    k_eq_v = view.get_bool("attention_k_eq_v")
    g_dim = view.get_int("global_head_dim", default=GLOBAL_HEAD_DIM, minimum=1) or GLOBAL_HEAD_DIM
    g_heads = (view.get_int("num_global_key_value_heads", minimum=1) if k_eq_v else None) or d.kv_heads
    shared_layers = view.get_int("num_kv_shared_layers", default=0) or 0
    first_shared = max(0, d.layers - shared_layers)
    ple = view.get_int("hidden_size_per_layer_input", default=PLE_WIDTH) or 0
    experts = view.get_int("num_experts", default=0) or 0
    moe_on = view.get_bool("enable_moe_block", default=experts > 0) and experts > 0
    width = view.get_int("moe_intermediate_size", default=0) or 0
    double = view.get_bool("use_double_wide_mlp")
    p = f"{PREFIX}.layers.{{i}}"
    memo: dict[tuple[str, bool], Layer] = {}
    layers = []
    for i, kind in enumerate(kinds):
        shared = i >= first_shared
        if (kind, shared) not in memo:
            mlp_width = d.intermediate * (2 if double and shared and first_shared > 0 else 1)
            tensors = _attention(p, d, kind, shared, (g_heads, g_dim), k_eq_v)
            tensors += tuple(t for n in LAYER_NORMS for t in norm(f"{p}.{n}", d.hidden))
            tensors += (vector(p, 1, role="other", param="layer_scalar"),)
            tensors += gated_mlp(f"{p}.mlp", d.hidden, mlp_width)
            if moe_on:
                tensors += _moe(p, d, experts, width)
            if ple:
                tensors += _per_layer_input(p, d, ple)
            memo[kind, shared] = Layer(
                cache=_cache(d, kind, shared, (g_heads, g_dim), window), tensors=tensors, moe=moe_on
            )
        layers.append(memo[kind, shared])
    moe = None
    if moe_on:
        moe = MoESpec(
            experts=experts,
            shared_experts=0,
            experts_per_token=view.get_int(*TOPK_KEYS, default=8) or 8,
            moe_intermediate_size=width,
            shared_intermediate_size=d.intermediate,
            moe_layers=d.layers,
            dense_layers=0,
        )
    notes = [
        f"{kinds.count(SLIDING)} sliding layers ({d.kv_heads} KV heads of {d.head_dim}, window {window:,}) and "
        f"{kinds.count(FULL)} full layers ({g_heads} KV heads of {g_dim}" + (", K reused as V)" if k_eq_v else ")"),
    ]
    if shared_layers:
        notes.append(
            f"the last {d.layers - first_shared} layers reuse an earlier layer's KV cache: no cache of their own"
        )
    if ple:
        notes.append(f"per-layer embeddings of {ple} values a layer")
    vision: tuple[Tensor, ...] = ()
    spec = None
    if view.vision() is not None:
        vision, spec = vision_tensors(
            ConfigView.of(dict(view.vision() or {}), f"{view.where}: vision_config"), d.hidden
        )
    exact = not view.outer.get("audio_config")
    if not exact:
        notes.append("the audio tower (audio_config) is not sized: approximate")
    return ArchParts(
        family="gemma4",
        layers=tuple(layers),
        embeddings=_embeddings(view, d, ple),
        head=final_head(d, norm_module=f"{PREFIX}.norm"),
        vision=vision,
        vision_spec=spec,
        moe=moe,
        exact=exact,
        notes=tuple(d.notes) + tuple(notes),
    )


BUILDERS = {"gemma4": build_gemma4, "gemma4_text": build_gemma4}
