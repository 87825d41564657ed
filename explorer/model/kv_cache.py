"""What each decoder layer keeps per token of context, the way vLLM's KV spec counts it.

Every layer has one cache spec. The variants override one method each
instead of branching everywhere:

- :class:`FullAttention`: K and V rows for every token: per token
  ``row(kv_heads × head_dim) + row(kv_heads × v_head_dim)``; at 16-bit and
  equal K/V dims that is 2 × kv_heads × head_dim × 2 bytes.
- :class:`SlidingWindowAttention` and :class:`ChunkedLocalAttention`: the same
  rows, for at most ``window`` tokens.
- :class:`MLAAttention`: one compressed latent of ``kv_lora_rank +
  qk_rope_head_dim`` values per token, not doubled (DeepSeek: 576 values).
- :class:`RecurrentState`: linear attention (gated delta nets) and Mamba keep a
  fixed state per sequence, whatever the context.
- :class:`NoCache`: layers without attention (an MLP-only block).

Worked examples (16-bit): Llama-3.1-8B holds 32 × 2 × 8 × 128 × 2 = 131,072
bytes a token; DeepSeek-V3 61 × 576 × 2 = 70,272.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from explorer.model.dtypes import ElementType
from explorer.units import cdiv

#: values sharing one fp32 scale in a sparse-attention model's fp8 latent cache (FlashMLA's sparse layout)
NSA_FP8_SCALE_BLOCK = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCache:
    """Base of the per-layer cache specs: holds nothing."""

    kind: ClassVar[str] = "none"

    def bytes_per_token(self, kv: ElementType) -> int:
        """Bytes one more token of context adds to this layer (before any window caps it)."""
        return 0

    def tokens_held(self, context_tokens: int) -> int:
        """How many tokens of a ``context_tokens``-long sequence this layer keeps."""
        return context_tokens

    def state_bytes(self) -> int:
        """Fixed bytes per sequence, independent of context (recurrent state)."""
        return 0

    def bytes_for(self, context_tokens: int, kv: ElementType, sequences: int = 1) -> int:
        """Bytes this layer holds for ``sequences`` sequences of ``context_tokens`` tokens."""
        per_seq = self.bytes_per_token(kv) * self.tokens_held(context_tokens) + self.state_bytes()
        return per_seq * sequences


@dataclass(frozen=True, slots=True, kw_only=True)
class NoCache(LayerCache):
    """A layer with no attention and no state (an MLP-only or no-op block)."""

    kind: ClassVar[str] = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class FullAttention(LayerCache):
    """Global attention: keeps K and V for every token.

    Attributes:
        kv_heads: key/value heads of this layer.
        head_dim: values per key head.
        v_head_dim: values per value head (0: no separate V, as when K is V).
    """

    kind: ClassVar[str] = "full"
    kv_heads: int
    head_dim: int
    v_head_dim: int

    def bytes_per_token(self, kv: ElementType) -> int:
        k = kv.row_bytes(self.kv_heads * self.head_dim)
        v = kv.row_bytes(self.kv_heads * self.v_head_dim) if self.v_head_dim else 0
        return k + v


@dataclass(frozen=True, slots=True, kw_only=True)
class SlidingWindowAttention(FullAttention):
    """Attention over the last ``window`` tokens only.

    Attributes:
        window: tokens attended to (and kept).
    """

    kind: ClassVar[str] = "sliding"
    window: int

    def tokens_held(self, context_tokens: int) -> int:
        return min(context_tokens, self.window)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkedLocalAttention(FullAttention):
    """Attention within fixed chunks (Llama 4): at most ``chunk`` tokens are kept.

    Attributes:
        chunk: tokens per attention chunk.
    """

    kind: ClassVar[str] = "chunked"
    chunk: int

    def tokens_held(self, context_tokens: int) -> int:
        return min(context_tokens, self.chunk)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressedAttention(FullAttention):
    """Attention over a recent window plus a compressed history (DeepSeek-V4).

    The last ``window`` tokens are kept as they are; older ones are kept one
    entry per ``ratio`` tokens (``ratio == 0``: the window only).

    Attributes:
        window: recent tokens kept uncompressed.
        ratio: tokens folded into one compressed entry (0: none kept).
    """

    kind: ClassVar[str] = "compressed"
    window: int
    ratio: int

    def tokens_held(self, context_tokens: int) -> int:
        compressed = context_tokens // self.ratio if self.ratio else 0
        return min(context_tokens, self.window) + compressed


@dataclass(frozen=True, slots=True, kw_only=True)
class MLAAttention(LayerCache):
    """Multi-head latent attention: one latent per token shared by all heads.

    Attributes:
        kv_lora_rank: width of the compressed KV latent.
        rope_dim: the decoupled rotary key width kept beside it.
        indexer_bytes_per_token: a sparse-attention indexer's own key cache
            (DeepSeek-V3.2 keeps 128 fp8 values + one fp32 scale = 132 bytes),
            stored in its fixed format whatever the KV dtype.
    """

    kind: ClassVar[str] = "mla"
    kv_lora_rank: int
    rope_dim: int
    indexer_bytes_per_token: int = 0

    def bytes_per_token(self, kv: ElementType) -> int:
        if self.indexer_bytes_per_token and kv.name == "fp8":
            return self._sparse_fp8_bytes() + self.indexer_bytes_per_token
        return kv.row_bytes(self.kv_lora_rank + self.rope_dim) + self.indexer_bytes_per_token

    def _sparse_fp8_bytes(self) -> int:
        """The fp8 latent of a sparse-attention (NSA) model as FlashMLA's sparse kernels store it: the latent in
        fp8 with one fp32 scale per 128 values, the rotary part kept in bf16 (SGLang's NSA pool with
        ``nsa_kv_cache_store_fp8``, vLLM's ``fp8_ds_mla``). DeepSeek-V3.2: 512 + 4 × 4 + 64 × 2 = 656 bytes,
        where bf16 takes (512 + 64) × 2 = 1,152."""
        return self.kv_lora_rank + cdiv(self.kv_lora_rank, NSA_FP8_SCALE_BLOCK) * 4 + self.rope_dim * 2


@dataclass(frozen=True, slots=True, kw_only=True)
class RecurrentState(LayerCache):
    """A fixed per-sequence state: linear attention (gated delta net) or Mamba.

    Attributes:
        family: ``"linear"`` or ``"mamba"``.
        conv_elements: values of the short-convolution state.
        conv_bytes: bytes per conv value (the model dtype).
        ssm_elements: values of the recurrent (SSM / delta-rule) state.
        ssm_bytes: bytes per state value (often fp32, from ``mamba_ssm_cache_dtype``).
        heads: value heads (delta net) or Mamba heads, which tensor parallelism must divide.
        groups: key heads (delta net) or Mamba groups, which tensor parallelism must divide.
    """

    kind: ClassVar[str] = "recurrent"
    family: str
    conv_elements: int
    conv_bytes: int
    ssm_elements: int
    ssm_bytes: int
    heads: int = 0
    groups: int = 0

    def tokens_held(self, context_tokens: int) -> int:
        return 0

    def state_bytes(self) -> int:
        return self.conv_elements * self.conv_bytes + self.ssm_elements * self.ssm_bytes


def kv_bytes_per_token(caches: Iterable[LayerCache], kv: ElementType) -> int:
    """Bytes one token of context costs across all layers (windows not applied)."""
    return sum(c.bytes_per_token(kv) for c in caches)


def kv_bytes(caches: Iterable[LayerCache], context_tokens: int, kv: ElementType, sequences: int = 1) -> int:
    """Bytes all layers hold for ``sequences`` sequences of ``context_tokens`` tokens."""
    return sum(c.bytes_for(context_tokens, kv, sequences) for c in caches)


def attention_summary(caches: Iterable[LayerCache], attention_heads: int) -> str:
    """A one-word description: MHA, GQA, MQA, MLA, SWA, hybrid..."""
    caches = list(caches)
    kinds = {c.kind for c in caches}
    if "recurrent" in kinds:
        return "hybrid"
    if kinds == {"mla"}:
        return "MLA"
    attn = [c for c in caches if isinstance(c, FullAttention)]
    if not attn:
        return "none"
    kv = max(c.kv_heads for c in attn)
    base = "MQA" if kv == 1 else "MHA" if kv == attention_heads else "GQA"
    if "sliding" in kinds or "chunked" in kinds:
        return f"{base}+SWA" if "full" in kinds else f"{base} (sliding window)"
    return base
