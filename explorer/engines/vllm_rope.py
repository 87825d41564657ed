"""vLLM's RoPE cos/sin cache: built on the card with the model, so "Model loading took" counts it.

``get_rope`` (vllm/model_executor/layers/rotary_embedding) builds one
``RotaryEmbedding`` per distinct rope configuration (``_ROPE_DICT``: every
layer shares it) and registers ``cos_sin_cache``, a ``[positions,
rotary_dim]`` tensor (cos and sin halves side by side) in the dtype it is
given: the model dtype, which ``get_rope`` takes from
``torch.get_default_dtype()``; gpt-oss asks for float32
(``OAIAttention``: ``get_rope(..., dtype=torch.float32)``). Every
tensor-parallel rank and pipeline stage holds its own. The positions are
the length vLLM derives from the rope scaling
(:attr:`~explorer.model.shapes.ModelShape.max_context_tokens`):
``max_position_embeddings`` for plain and Llama 3 rope, ``original ×
factor`` for YaRN, ``max_position_embeddings × factor`` for linear and
dynamic scaling.

Llama-4-Scout states 10,485,760 positions: its cache is 10,485,760 × 128 ×
2 bytes = 2.5 GiB on every rank (vLLM 0.19 at tp 4 logged 53.12 GiB of
weights a card against the 50.57 GiB tp-4 share of the checkpoint).
Llama-3.1-8B's is 131,072 × 128 × 2 = 32 MiB.

Not modelled: a partial rotary width (phi-2 rotates 32 of its 80 head
dims: the cache is counted at the whole head) and a second cache for a
second rope configuration (Gemma 3's local layers).
"""

from __future__ import annotations

from explorer.model.dtypes import element_type
from explorer.model.kv_cache import FullAttention, MLAAttention
from explorer.model.shapes import ModelShape

#: model types whose vLLM model builds its rope cache in float32 (vllm/model_executor/models/gpt_oss.py)
FP32_ROPE_MODELS = frozenset({"gpt_oss"})


def rope_cache_bytes(shape: ModelShape) -> int:
    """Bytes of vLLM's ``cos_sin_cache`` on one card: positions × rotary width × the cache dtype's bytes.

    0 for a model without rotary attention: no attention layer, or learned position embeddings.
    """
    if any(t.role == "position" for t in shape.embeddings):
        return 0
    caches = [layer.cache for layer in shape.decoder]
    mla = next((c for c in caches if isinstance(c, MLAAttention)), None)
    if mla is None and not any(isinstance(c, FullAttention) for c in caches):
        return 0
    rotary = mla.rope_dim if mla is not None else shape.head_dim
    dtype = element_type("fp32" if shape.text_model_type in FP32_ROPE_MODELS else shape.dtype)
    return dtype.row_bytes(shape.max_context_tokens * rotary)
