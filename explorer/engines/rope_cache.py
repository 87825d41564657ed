"""The RoPE cos/sin cache vLLM and SGLang build on the card with the model, so their weights line counts it.

Both engines' ``get_rope`` (vllm/model_executor/layers/rotary_embedding,
sglang/srt/layers/rotary_embedding, a port of it) build one
``RotaryEmbedding`` per distinct rope configuration (``_ROPE_DICT``: every
layer shares it) and register ``cos_sin_cache``, a ``[positions,
rotary_dim]`` tensor (cos and sin halves side by side). Every
tensor-parallel rank and pipeline stage holds its own. The positions are
the length vLLM derives from the rope scaling
(:attr:`~explorer.model.shapes.ModelShape.max_context_tokens`):
``max_position_embeddings`` for plain and Llama 3 rope, ``original ×
factor`` for YaRN, ``max_position_embeddings × factor`` for linear and
dynamic scaling. The dtype is each engine's (:func:`vllm_rope_dtype`,
:func:`sglang_rope_dtype`).

Llama-4-Scout states 10,485,760 positions: its cache is 10,485,760 × 128 ×
2 bytes = 2.5 GiB on every rank (vLLM 0.19 at tp 4 logged 53.12 GiB of
weights a card against the 50.57 GiB tp-4 share of the checkpoint).
Llama-3.1-8B's is 131,072 × 128 × 2 = 32 MiB in vLLM; Llama-3.2-3B's in
SGLang on CUDA 131,072 × 128 × 4 = 64 MiB.

Not modelled: a partial rotary width (phi-2 rotates 32 of its 80 head
dims: the cache is counted at the whole head), a second cache for a
second rope configuration (Gemma 3's local layers), and DeepSeek-V4's
compressed attention, whose rotary width the shape does not hold (it is
sized approximately): no cache is counted for it.
"""

from __future__ import annotations

from explorer.hardware.catalogue import GPUClass
from explorer.memo import memo
from explorer.model.dtypes import element_type
from explorer.model.kv_cache import CompressedAttention, FullAttention, MLAAttention
from explorer.model.shapes import ModelShape

#: model types whose vLLM model builds its rope cache in float32 (vllm/model_executor/models/gpt_oss.py
#: ``OAIAttention``: ``get_rope(..., dtype=torch.float32)``); vLLM's others take the model dtype
VLLM_FP32_ROPE_MODELS = frozenset({"gpt_oss"})


def vllm_rope_dtype(shape: ModelShape) -> str:
    """The dtype of vLLM's cache: the model dtype (``get_rope`` takes ``torch.get_default_dtype()``), float32
    where the model asks for it (:data:`VLLM_FP32_ROPE_MODELS`)."""
    return "fp32" if shape.text_model_type in VLLM_FP32_ROPE_MODELS else shape.dtype


def sglang_rope_dtype(shape: ModelShape, gpu: GPUClass) -> str:
    """The dtype of SGLang's cache: float32 on CUDA ("cache needs to be in FP32 for numerical stability":
    ``if not _is_cuda: cache = cache.to(dtype)``), the model dtype on AMD cards (ROCm)."""
    return shape.dtype if gpu.vendor == "amd" else "fp32"


@memo(256, keyed_on="shape identity, dtype")
def rope_cache_bytes(shape: ModelShape, dtype: str) -> int:
    """Bytes of the ``cos_sin_cache`` on one card: positions × rotary width × ``dtype``'s bytes.

    0 for a model without rotary attention (no attention layer, or learned position embeddings) and for
    DeepSeek-V4's compressed attention (its rotary width is not in the shape).
    """
    if any(t.role == "position" for t in shape.embeddings):
        return 0
    caches = [layer.cache for layer in shape.decoder]
    if any(isinstance(c, CompressedAttention) for c in caches):
        return 0
    mla = next((c for c in caches if isinstance(c, MLAAttention)), None)
    if mla is None and not any(isinstance(c, FullAttention) for c in caches):
        return 0
    rotary = mla.rope_dim if mla is not None else shape.head_dim
    return element_type(dtype).row_bytes(shape.max_context_tokens * rotary)
