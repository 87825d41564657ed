"""ModelShape: what a model is made of and what a token of context costs.

:func:`shape_from_config` turns any config.json (a dict) into a
:class:`ModelShape`. Every figure derives from the shape's tensors and
per-layer cache specs:

- :attr:`ModelShape.params` counts every parameter the checkpoint stores;
  :attr:`ModelShape.active_params` counts what one token uses (routed experts
  at ``experts_per_token`` of ``experts``).
- :meth:`ModelShape.weight_bytes` sizes the served weights at a precision,
  scales included (multi-token-prediction layers are not loaded for plain
  serving, so they are left out there but counted in ``params``).
- :meth:`ModelShape.kv_bytes_per_token` and :meth:`ModelShape.kv_bytes` size the
  KV cache the way vLLM's KV spec counts it.

An architecture explorer does not know still gets a best-effort shape
marked ``approximate``, with the reasons in ``notes``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from explorer.memo import memo
from explorer.model.architectures import build_parts
from explorer.model.architectures.common import ArchParts, Layer, MoESpec, VisionSpec
from explorer.model.architectures.patterns import context_limit
from explorer.model.artifacts import ORIGINAL, Artifact
from explorer.model.config_reader import require_model_config
from explorer.model.dtypes import ElementType, element_type
from explorer.model.kv_cache import (
    FullAttention,
    LayerCache,
    MLAAttention,
    attention_summary,
    kv_bytes,
    kv_bytes_per_token,
)
from explorer.model.precision import Precision
from explorer.model.quant_config import precision_from_config, precision_from_label
from explorer.model.tensors import Tensor


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """A model's structure, as the planner needs it.

    Attributes:
        name: where it came from (a repo id, a file name).
        model_type: the config's ``model_type`` (the wrapper's, for multimodal models).
        text_model_type: the language model's own ``model_type``.
        architecture: the first of ``architectures``.
        family: which builder read it (``llama-like``, ``mla``, ``hybrid``…).
        hidden_size: model width.
        layers: decoder layers (multi-token-prediction layers excluded).
        attention_heads: query heads.
        kv_heads: key/value heads of a typical attention layer (the most any layer has);
            1 for MLA, whose one latent serves every head (as vLLM counts it).
        head_dim: per-head width of that layer (MLA: kv_lora_rank + qk_rope_head_dim).
        vocab_size: vocabulary size.
        tied_embeddings: whether the LM head reuses the token embeddings.
        max_position_embeddings: the config's own context figure.
        max_context_tokens: the longest context explorer plans with (vLLM's derivation from the RoPE scaling).
        rope_scaling: a short description of RoPE scaling, ``""`` if none.
        rope_names_original: the RoPE scaling names an ``original_max_position_embeddings`` (or is Llama 3's):
            an engine that then keeps the stated length (SGLang) accepts no more than ``max_position_embeddings``.
        dtype: the activation / unquantised dtype (``bf16``).
        precision: the checkpoint's weight precision.
        decoder: the decoder layers, each with its cache spec and tensors.
        embeddings: token (and position) embedding tensors.
        head: final norm and LM head tensors.
        vision: vision tower tensors.
        mtp: multi-token-prediction tensors stored in the checkpoint.
        moe: routing of a mixture of experts, or None.
        vision_tower: the vision tower's heads and size, or None.
        approximate: whether any figure is a best effort.
        notes: what was assumed or approximated, and why.
        remote_code: the config names its repository's own code (``auto_map``): vLLM and SGLang load the
            model only with ``--trust-remote-code`` (its config class or its tokenizer is that code).
        cast_from: the checkpoint's own dtype when this shape is the model as an engine loads it at another
            (``dtype``: :meth:`at_dtype`), else ``""``.
    """

    name: str
    model_type: str
    text_model_type: str
    architecture: str
    family: str
    hidden_size: int
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    max_position_embeddings: int
    max_context_tokens: int
    rope_scaling: str
    dtype: str
    precision: Precision
    decoder: tuple[Layer, ...]
    embeddings: tuple[Tensor, ...]
    head: tuple[Tensor, ...]
    vision: tuple[Tensor, ...] = ()
    mtp: tuple[Tensor, ...] = ()
    moe: MoESpec | None = None
    vision_tower: VisionSpec | None = None
    approximate: bool = False
    notes: tuple[str, ...] = ()
    rope_names_original: bool = False
    remote_code: bool = False
    cast_from: str = ""

    # --- parameters -----------------------------------------------------------------

    @cached_property
    def params(self) -> int:
        """Every parameter the checkpoint stores (MTP layers and the vision tower included)."""
        return self.decoder_params + sum(t.elements for t in self.embeddings + self.head + self.vision + self.mtp)

    @cached_property
    def decoder_params(self) -> int:
        """Parameters of the decoder layers alone."""
        memo: dict[int, int] = {}
        total = 0
        for layer in self.decoder:
            key = id(layer.tensors)
            if key not in memo:
                memo[key] = sum(t.elements for t in layer.tensors)
            total += memo[key]
        return total

    @cached_property
    def active_params(self) -> int:
        """Parameters one token uses: routed experts count ``experts_per_token`` of ``experts``.

        Embeddings and the LM head count, as model cards count them; the
        vision tower and MTP layers do not.
        """
        if self.moe is None:
            return self.params - sum(t.elements for t in self.vision + self.mtp)
        inactive = 0
        for layer in self.decoder:
            for t in layer.tensors:
                if t.role == "expert":
                    inactive += t.rows * t.cols * (t.count - min(t.count, self.moe.experts_per_token))
        return self.params - sum(t.elements for t in self.vision + self.mtp) - inactive

    # --- attention and KV cache ---------------------------------------------------------

    @property
    def caches(self) -> tuple[LayerCache, ...]:
        """Each decoder layer's cache spec."""
        return tuple(layer.cache for layer in self.decoder)

    @property
    def attention(self) -> str:
        """MHA, GQA, MQA, MLA, GQA+SWA, hybrid…"""
        return attention_summary(self.caches, self.attention_heads)

    def kv_type(self, kv_dtype: str = "auto") -> ElementType:
        """The KV cache element type; ``auto`` is the model's own dtype."""
        return element_type(self.dtype if kv_dtype in ("auto", "", None) else kv_dtype)

    def kv_bytes_per_token(self, kv_dtype: str = "auto") -> int:
        """Bytes one token of context costs across every layer (before windows cap it)."""
        return kv_bytes_per_token(self.caches, self.kv_type(kv_dtype))

    def kv_bytes(self, context_tokens: int, kv_dtype: str = "auto", sequences: int = 1) -> int:
        """Bytes the cache holds for ``sequences`` sequences of ``context_tokens`` tokens.

        Sliding-window layers hold min(context, window) tokens; linear-attention
        and Mamba layers hold a fixed state per sequence.
        """
        if context_tokens < 0 or sequences < 0:
            raise ValueError("context and sequences must be non-negative")
        kv = self.kv_type(kv_dtype)
        return sum(count * kv_bytes((cache,), context_tokens, kv, sequences) for cache, count in self.alike_caches)

    @cached_property
    def alike_caches(self) -> tuple[tuple[LayerCache, int], ...]:
        """Each distinct layer cache spec with the number of decoder layers that have it, in layer order: a
        KV sum over a 126-layer model is one product a kind of layer (a planner's walk asks it on every move)."""
        return tuple(Counter(self.caches).items())

    def context_limit(self, *, keeps_stated_length: bool = False) -> int:
        """The longest context an engine accepts: vLLM's derivation (:attr:`max_context_tokens`); with
        ``keeps_stated_length``, an engine that keeps ``max_position_embeddings`` when the RoPE scaling names an
        original length (SGLang's ``get_context_length``: a YaRN ×4 from 32,768 over a stated 40,960 accepts
        40,960, where vLLM accepts 131,072)."""
        if keeps_stated_length and self.rope_names_original:
            return min(self.max_context_tokens, self.max_position_embeddings)
        return self.max_context_tokens

    def clamp_context(self, tokens: int, *, keeps_stated_length: bool = False) -> int:
        """``tokens`` held to the limit an engine accepts (:meth:`context_limit`): the one place a context is clamped."""
        return min(tokens, self.context_limit(keeps_stated_length=keeps_stated_length))

    # --- weights --------------------------------------------------------------------------

    def resolve_precision(self, precision: Precision | str | None) -> Precision:
        """The checkpoint's own precision for None, else a what-if by name or object.

        This is the one place a precision label becomes a :class:`Precision`: a
        what-if name (``fp8``, ``int4-awq``, ``Q4_K_M``) or the label one shows
        (``int4 AWQ g128``), through :func:`explorer.model.quant_config.precision_from_label`.
        """
        if precision is None or precision == "checkpoint":
            return self.precision
        if isinstance(precision, str):
            return (
                self.precision if precision == self.precision.name else precision_from_label(precision, base=self.dtype)
            )
        return precision

    def precision_of(self, artifact: Artifact) -> Precision:
        """The precision an artifact loads at: the checkpoint's own for the original weights, else its label's
        (``source="published"`` for another repository's checkpoint, which an engine loads as its config says)."""
        if artifact.name == ORIGINAL and not artifact.what_if:
            return self.precision
        precision = self.resolve_precision(artifact.quant)
        if artifact.repo and precision.method != "gguf":
            return dataclasses.replace(precision, source="published")
        return precision

    def at_dtype(self, dtype: str) -> ModelShape:
        """The model as an engine loads it at ``dtype`` (``--dtype bfloat16`` over a float32 checkpoint): the
        activations, the KV cache at ``auto`` and every tensor the checkpoint's scheme leaves alone in ``dtype``
        (a dense precision renamed for it), :attr:`cast_from` the checkpoint's own dtype. The same object for the
        same ``dtype`` (:func:`_cast`), so the planner's memos keyed on a shape keep answering for it."""
        return _cast(self, element_type(dtype).name)

    def weight_bytes(self, precision: Precision | str | None = None) -> int:
        """Bytes of the weights an engine loads (MTP layers excluded), scales included."""
        from explorer.model.weights import weight_breakdown

        return weight_breakdown(self, self.resolve_precision(precision)).total_bytes

    def bits_per_weight(self, precision: Precision | str | None = None) -> float:
        """Average bits a served parameter takes at a precision: bytes × 8 / params."""
        served = self.params - sum(t.elements for t in self.mtp)
        return self.weight_bytes(precision) * 8 / served if served else 0.0

    @property
    def experts(self) -> int:
        """Routed experts per MoE layer (0 for a dense model)."""
        return self.moe.experts if self.moe else 0

    # A shape hashes and compares by identity. It is built once per model and then
    # planned many times, and the planner's memos (explorer.memo) key on it: hashing
    # its hundreds of layer records on every call would cost more than the memo saves,
    # and two shapes read from one config give the same figures anyway, so a memo
    # keyed on the object never answers for the wrong model.
    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


@memo(64, keyed_on="shape identity, dtype")
def _cast(shape: ModelShape, dtype: str) -> ModelShape:
    """``shape`` loaded at ``dtype`` (:meth:`ModelShape.at_dtype`)."""
    base = element_type(dtype)
    own = shape.precision
    precision = dataclasses.replace(own, base=base, name=base.name if own.method == "none" else own.name)
    return dataclasses.replace(shape, dtype=base.name, precision=precision, cast_from=shape.cast_from or shape.dtype)


def typical_attention(caches: tuple[LayerCache, ...], fallback: tuple[int, int]) -> tuple[int, int]:
    """(KV heads, head dim) of the layer with the most KV heads; MLA is one latent "head"."""
    attn = [c for c in caches if isinstance(c, FullAttention)]
    if attn:
        best = max(attn, key=lambda c: c.kv_heads)
        return best.kv_heads, best.head_dim
    mla = [c for c in caches if isinstance(c, MLAAttention)]
    if mla:
        return 1, mla[0].kv_lora_rank + mla[0].rope_dim
    return fallback


def shape_from_config(
    config: Mapping[str, Any],
    *,
    name: str = "",
    companions: Mapping[str, Mapping[str, Any]] | None = None,
) -> ModelShape:
    """Build a :class:`ModelShape` from a parsed config.json.

    Raises:
        NotAModelConfigError: the dict is not a model config at all.
        MissingConfigKeysError: it lacks sizes a shape needs (all are named).
        InvalidConfigValueError: a value has the wrong type or an absurd size.
    """
    view = require_model_config(config, where=name or "config.json")
    parts: ArchParts = build_parts(view)
    precision, precision_notes = precision_from_config(view, companions)
    limit = context_limit(view)
    heads = view.alias_int("heads", minimum=1) or 0
    hidden = view.alias_int("hidden_size", minimum=1) or 0
    caches = tuple(layer.cache for layer in parts.layers)
    kv_heads, head_dim = typical_attention(
        caches, (view.alias_int("kv_heads") or heads, view.alias_int("head_dim") or (hidden // heads if heads else 0))
    )
    notes = list(parts.notes) + precision_notes
    if view.defaults_filled:
        notes.append(
            f"{view.text_model_type()} text_config filled from transformers defaults: {', '.join(view.defaults_filled)}"
        )
    if limit.note:
        notes.append(limit.note)
    return ModelShape(
        name=name,
        model_type=view.model_type(),
        text_model_type=view.text_model_type(),
        architecture=view.architecture(),
        family=parts.family,
        hidden_size=hidden,
        layers=len(parts.layers),
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=view.alias_int("vocab") or 0,
        tied_embeddings=not any(t.role == "lm_head" for t in parts.head),
        max_position_embeddings=limit.max_position_embeddings,
        max_context_tokens=limit.max_context_tokens,
        rope_scaling=limit.rope,
        rope_names_original=limit.names_original,
        dtype=precision.base.name,
        precision=precision,
        decoder=parts.layers,
        embeddings=parts.embeddings,
        head=parts.head,
        vision=parts.vision,
        mtp=parts.mtp,
        moe=parts.moe,
        vision_tower=parts.vision_spec,
        approximate=not parts.exact,
        notes=tuple(notes),
        remote_code=view.remote_code(),
    )
