"""GGUF header → :class:`~explorer.model.shapes.ModelShape`, from the real tensor infos.

:func:`shape_from_gguf` gives the same record config.json gives, so the rest
of explorer (weights, KV, placement) works on a GGUF file unchanged:

- Every GGUF tensor becomes one :class:`~explorer.model.tensors.Tensor` with its
  exact module name (``blk.3.attn_q`` / ``weight``), ``cols = ne0`` (the row
  length), ``rows = ne1 × ne2 …`` (routed experts: ``rows = ne1``,
  ``count = ne2``) and a role guessed from the name (``attn_*`` attention,
  ``ffn_*_exps`` experts, ``ffn_*_shexp`` shared experts, ``ffn_gate_inp``
  router, ``ssm_*`` ssm, ``*_norm`` norm, ``token_embd`` embedding,
  ``output`` lm_head).
- The precision is a :class:`GGUFPrecision`: a :class:`Precision` whose
  ``format_for`` looks each tensor up by its exact name and returns its ggml
  type as a ``ggml`` :class:`WeightFormat` (Q4_K: 144 bytes per 256). So
  ``shape.weight_bytes()`` is exactly the sum of the tensors' ``n_bytes`` and
  ``shape.params`` exactly their elements. (Chosen over one ``SchemeGroup``
  per type because ``Precision.format_for`` leaves routers, norms and
  embeddings to ``base``, and a GGUF stores each of those in its own type.)
- Per-layer caches are vLLM-style specs (as config.json gives them);
  llama.cpp's own cache rows (MLA without V, padded cells, f32 recurrent
  state) are :mod:`explorer.engines.llamacpp.model`'s business.

Every tensor, NextN/MTP blocks included, is counted in the served weights,
because llama.cpp loads every tensor of the file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from explorer.gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from explorer.gguf.header import GGUFHeader, TensorInfo
from explorer.gguf.hparams import GGUFHParams, read_hparams
from explorer.model.architectures.common import Layer, MoESpec
from explorer.model.dtypes import element_type
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLAAttention,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.model.precision import Precision, SchemeGroup, WeightFormat
from explorer.model.shapes import ModelShape, typical_attention
from explorer.model.tensors import Role, Split, Tensor

__all__ = ["GGUFPrecision", "ggml_format", "shape_from_gguf", "tensor_from_info"]

#: general.architecture → the Hugging Face model_type it was converted from (for display)
MODEL_TYPES: dict[str, str] = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "qwen3next": "qwen3_next",
    "gemma3": "gemma3_text",
    "deepseek2": "deepseek_v2",
    "command-r": "cohere",
    "granitehybrid": "granitemoehybrid",
    "gpt-oss": "gpt_oss",
    "glm4moe": "glm4_moe",
    "falcon-h1": "falcon_h1",
    "qwen2vl": "qwen2_vl",
    "qwen3vl": "qwen3_vl",
    "qwen3vlmoe": "qwen3_vl_moe",
    "ernie4_5-moe": "ernie4_5_moe",
    "hunyuan-moe": "hunyuan_v1_moe",
}


def ggml_format(ggml_type: int) -> WeightFormat:
    """The exact storage of one ggml type: Q4_K → 256 weights in 144 bytes (GGML_QUANT_SIZES)."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    return WeightFormat(kind="ggml", bits=size * 8 / block, ggml_block=(block, size))


@dataclass(frozen=True, kw_only=True)
class GGUFPrecision(Precision):
    """A GGUF file's precision: each tensor's own ggml type, looked up by its exact name.

    Attributes:
        formats: (full tensor name, its format) for every tensor of the file.
    """

    formats: tuple[tuple[str, WeightFormat], ...] = ()

    @cached_property
    def _by_name(self) -> dict[str, WeightFormat]:
        return dict(self.formats)

    @cached_property
    def _hash(self) -> int:
        return hash((self.name, self.formats))

    def __hash__(self) -> int:
        return self._hash

    def format_for(self, tensor: Tensor, layer: int | None) -> WeightFormat | None:
        """The tensor's ggml type; None (``base``) only for a tensor the file does not hold."""
        return self._by_name.get(tensor.name(layer))


_ROLE_RULES: tuple[tuple[re.Pattern[str], Role, Split], ...] = tuple(
    (re.compile(p), role, split)
    for p, role, split in (
        (r"(^|\.)nextn\.", "mtp", "replicated"),
        (r"_norm(\.|_|$)|^output_norm|norm\.weight$", "norm", "replicated"),
        (r"^token_embd|^pos_embd|^token_types", "embedding", "vocab"),
        (r"^output\.", "lm_head", "vocab"),
        (r"ffn_(gate|up)_exps", "expert", "expert_column"),
        (r"ffn_(down)_exps|ffn_\w+_exps", "expert", "expert_row"),
        (r"ffn_(gate|up)_shexp", "shared_expert", "column"),
        (r"ffn_\w+_shexp|ffn_\w+_chexps", "shared_expert", "row"),
        (r"ffn_gate_inp|exp_probs_b", "router", "replicated"),
        (r"attn_(k|v)\.", "attention", "kv"),
        (r"attn_(q|qkv|q_b|gate)\.", "attention", "column"),
        (r"attn_output", "attention", "row"),
        (r"attn_", "attention", "replicated"),
        (r"ssm_out", "ssm", "row"),
        (r"ssm_", "ssm", "column"),
        (r"time_mix|channel_mix|shortconv", "linear_attention", "replicated"),
        (r"ffn_(gate|up)\.", "mlp", "column"),
        (r"ffn_down\.", "mlp", "row"),
        (r"ffn_", "mlp", "replicated"),
    )
)


def tensor_from_info(info: TensorInfo) -> Tensor:
    """One GGUF tensor as a :class:`Tensor`: ``cols = ne0``, ``rows = ne1 × …`` (experts: ``count = ne2``)."""
    module, _, param = info.name.rpartition(".")
    if not module:
        module, param = info.name, ""
    role: Role = "other"
    split: Split = "replicated"
    for pattern, rule_role, rule_split in _ROLE_RULES:
        if pattern.search(info.name):
            role, split = rule_role, rule_split
            break
    shape = info.shape or (1,)
    cols = shape[0]
    count = 1
    if role == "expert" and len(shape) >= 3:
        rows, count = shape[1], math.prod(shape[2:])
    else:
        rows = math.prod(shape[1:]) if len(shape) > 1 else 1
    if len(shape) == 1:  # a vector: its length is `rows`, as Tensor stores vectors
        rows, cols = shape[0], 1
    linear = len(shape) > 1 and role not in ("norm", "embedding")
    return Tensor(module=module, param=param, rows=rows, cols=cols, count=count, role=role, split=split, linear=linear)


def _cache(hp: GGUFHParams, il: int) -> LayerCache:
    """The vLLM-style cache spec of one layer."""
    kv, hk, hv = hp.n_head_kv[il], hp.head_k(il), hp.head_v(il)
    if hp.recurrent_layers[il] and not hp.has_kv(il):
        family = (
            "rwkv"
            if hp.arch.startswith(("rwkv", "arwkv"))
            else "linear"
            if hp.arch.startswith(("qwen3next", "qwen35", "kimi"))
            else "mamba"
        )
        return RecurrentState(
            family=family,
            conv_elements=hp.n_embd_r,
            conv_bytes=4,
            ssm_elements=hp.n_embd_s,
            ssm_bytes=4,
            heads=hp.ssm_dt_rank,
            groups=hp.ssm_n_group,
        )
    if not hp.has_kv(il):
        return NoCache()
    if hp.is_mla:
        return MLAAttention(kv_lora_rank=hp.kv_lora_rank or hk - hp.n_rot, rope_dim=hp.n_rot)
    if hp.swa_layers[il] and hp.n_swa:
        if hp.swa_type == "chunked":
            return ChunkedLocalAttention(kv_heads=kv, head_dim=hk, v_head_dim=hv, chunk=hp.n_swa)
        return SlidingWindowAttention(kv_heads=kv, head_dim=hk, v_head_dim=hv, window=hp.n_swa)
    return FullAttention(kv_heads=kv, head_dim=hk, v_head_dim=hv)


def _precision(header: GGUFHeader, name: str) -> GGUFPrecision:
    by_type: dict[int, list[str]] = {}
    weight: dict[int, int] = {}
    formats = []
    for t in header.tensors:
        formats.append((t.name, ggml_format(t.ggml_type)))
        by_type.setdefault(t.ggml_type, []).append(t.name)
        weight[t.ggml_type] = weight.get(t.ggml_type, 0) + t.n_bytes
    order = sorted(by_type, key=lambda k: -weight[k])  # the dominant type first: its bits are nominal_bits
    groups = tuple(SchemeGroup(targets=tuple(by_type[k]), fmt=ggml_format(k)) for k in order)
    return GGUFPrecision(
        name=name, method="gguf", base=element_type("fp16"), groups=groups, source="gguf", formats=tuple(formats)
    )


def shape_from_gguf(header: GGUFHeader, *, name: str = "") -> ModelShape:
    """The :class:`ModelShape` of a parsed GGUF header (exact tensors, llama.cpp's per-layer hparams).

    Raises:
        GGUFShapeError: the header has no architecture, layers or width, or a
            per-layer array does not match ``block_count``.
    """
    from explorer.gguf.quant import (
        quant_name,  # here: gguf_quant imports gguf_header too
    )

    hp = read_hparams(header)
    name = name or header.name
    notes = list(hp.notes)
    blocks: list[list[Tensor]] = [[] for _ in range(hp.n_layer)]
    embeddings: list[Tensor] = []
    head: list[Tensor] = []
    extra_blocks = 0
    for info in header.tensors:
        t = tensor_from_info(info)
        block = info.block
        if block is not None:
            if block >= hp.n_layer:  # NextN/MTP blocks past block_count: loaded, so counted with the last layer
                extra_blocks = max(extra_blocks, block - hp.n_layer + 1)
                blocks[-1].append(t)
            else:
                blocks[block].append(t)
        elif t.role == "embedding" or info.name.startswith("token_embd"):
            embeddings.append(t)
        else:
            head.append(t)
    if extra_blocks:
        notes.append(f"{extra_blocks} block(s) past block_count (NextN/MTP) counted with the last layer")
    caches = [_cache(hp, il) for il in range(hp.n_layer)]
    layers = tuple(
        Layer(cache=caches[il], tensors=tuple(blocks[il]), moe=any(t.role == "expert" for t in blocks[il]))
        for il in range(hp.n_layer)
    )
    moe = None
    moe_layers = sum(layer.moe for layer in layers)
    if hp.n_expert and moe_layers:
        moe = MoESpec(
            experts=hp.n_expert,
            shared_experts=hp.n_expert_shared,
            experts_per_token=hp.n_expert_used,
            moe_intermediate_size=hp.n_ff_exp,
            shared_intermediate_size=hp.n_ff_shexp,
            moe_layers=moe_layers,
            dense_layers=hp.n_layer - moe_layers,
            first_dense_layers=hp.n_layer_dense_lead,
        )
    kv_heads, head_dim = typical_attention(tuple(caches), (max(hp.n_head_kv), hp.n_embd_head_k))
    quant = quant_name(header, name or None).name
    family = (
        "mla"
        if hp.is_mla
        else "hybrid"
        if any(hp.recurrent_layers) and any(map(hp.has_kv, range(hp.n_layer)))
        else ("recurrent" if any(hp.recurrent_layers) else "moe" if moe else "llama-like")
    )
    model_type = MODEL_TYPES.get(hp.arch, hp.arch.replace("-", "_"))
    return ModelShape(
        name=name,
        model_type=model_type,
        text_model_type=model_type,
        architecture=hp.arch,
        family=family,
        hidden_size=hp.n_embd,
        layers=hp.n_layer,
        attention_heads=max(hp.n_head),
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=hp.n_vocab,
        tied_embeddings=not any(t.role == "lm_head" for t in head),
        max_position_embeddings=hp.n_ctx_train,
        max_context_tokens=hp.n_ctx_train,
        rope_scaling=hp.rope_scaling,
        dtype="fp16",
        precision=_precision(header, quant),
        decoder=layers,
        embeddings=tuple(embeddings),
        head=tuple(head),
        moe=moe,
        approximate=hp.approximate,
        notes=tuple(notes),
    )
