"""Whether an engine has attention kernels for a model's attention on a card.

Sparse MLA (DeepSeek-V3.2's and GLM-5's "DSA": a lightning indexer picks each query's top-k cached tokens,
then MLA attends to those alone) needs kernels of its own, and the engines ship them for different cards.
Read from the engines' sources:

- **vLLM** (``vllm-project/vllm`` at 0033bf03): ``vllm/platforms/cuda.py`` ``_get_backend_priorities`` lists
  ``TRITON_MLA_SPARSE`` for every CUDA card that is not SM100 (SM80 A100, SM89 Ada, SM90, SM120), before
  ``FLASHMLA_SPARSE``; ``vllm/v1/attention/backends/mla/triton_mla_sparse.py`` ("Pure-Triton sparse MLA
  backend for GPUs without FlashMLA Sparse (SM90+) or FlashInfer MLA Sparse (SM100+), e.g. SM80") accepts any
  compute capability with a 16-bit cache only (``supported_kv_cache_dtypes``: auto, float16, bfloat16), and its
  indexer runs Triton MQA-logits kernels (``vllm/v1/attention/ops/mqa_logits_triton.py``: fp8 decoded in software
  "since SM80 Triton can't compile tl.float8e4nv", then a bf16 ``tl.dot``). So vLLM serves these models from
  Ampere on, with a bf16 cache below Hopper (:func:`explorer.engines.vllm.kv_cache_refusal` refuses fp8 there);
  **[inferred]** not on Volta or Turing, which have no bf16 tensor-core tiles for those kernels (the backend itself
  claims every compute capability).
- **SGLang** (``sgl-project/sglang`` at 005e8bf8): ``python/sglang/srt/layers/attention/nsa/nsa_indexer.py``
  computes the indexer's logits with DeepGEMM (``deep_gemm.fp8_paged_mqa_logits``, ``get_num_sms``) on every
  CUDA card, and DeepGEMM builds for SM90 and SM100 only; ``server_args.py`` ``_set_default_nsa_backends``
  picks FlashMLA-sparse prefill with FA3 decode below SM100 (bf16 cache) and FlashMLA (``flashmla_auto`` /
  ``flashmla_kv``) from SM100 on (fp8 cache), kernels built for SM90/SM100. No Triton or SM80 path exists on
  CUDA, so SGLang does not serve these models on Volta, Turing, Ampere, Ada or the SM120 Blackwell cards
  (RTX 50xx, RTX PRO 6000, GB10); on ROCm its indexer runs aiter's kernels.
- **llama.cpp** runs them as the ``deepseek32`` and ``glm-dsa`` architectures (``src/llama-arch.cpp``) on its
  own kernels, on any card.

A model whose attention an engine has no kernel for on a card is a refusal (:data:`RULE`) before any layout is
tried, beside :mod:`explorer.engines.weight_kernels`'s. The engine asks with its own name.
"""

from __future__ import annotations

from explorer.hardware.catalogue import GPUClass
from explorer.model.kv_cache import MLAAttention
from explorer.model.shapes import ModelShape

#: the refusal rule of a model whose attention an engine has no kernel for on a card
RULE = "attention-unsupported"

#: architectures each engine has no sparse-MLA (DSA) kernels for, and why (the module's docstring cites the sources)
NO_SPARSE_MLA: dict[str, tuple[frozenset[str], str]] = {
    "sglang": (
        frozenset({"volta", "turing", "ampere", "ada", "blackwell-rtx"}),
        "its indexer runs on DeepGEMM and its sparse attention on FlashMLA, built for Hopper and Blackwell "
        "(SM90/SM100) only (sglang nsa_indexer.py, server_args.py); vLLM (from Ampere on, its Triton sparse-MLA "
        "backend) or llama.cpp runs this model, or use Hopper or Blackwell cards",
    ),
    "vllm": (
        frozenset({"volta", "turing"}),
        "its Triton sparse-MLA backend and indexer multiply bf16 tiles (triton_mla_sparse.py, mqa_logits_triton.py: "
        "written and tuned for SM80 and later), which cards before Ampere lack; llama.cpp runs this model here",
    ),
}


def sparse_mla(shape: ModelShape) -> bool:
    """Whether ``shape`` attends through sparse MLA: an MLA cache with a lightning indexer's keys beside it."""
    return any(isinstance(c, MLAAttention) and c.indexer_bytes_per_token for c in shape.caches)


def attention_refusal(engine: str, shape: ModelShape, gpu: GPUClass) -> str | None:
    """Why ``engine`` cannot run ``shape``'s attention on ``gpu``, or None when it can."""
    architectures, why = NO_SPARSE_MLA.get(engine, (frozenset(), ""))
    if sparse_mla(shape) and gpu.architecture in architectures:
        return f"{engine} has no sparse-MLA (DSA) attention kernels for {gpu.architecture} cards ({gpu.name}): {why}"
    return None


#: what runs a sparse-MLA model when an engine refuses it on a card: the other engines, or the cards it has
#: kernels for (a refusal's hint; the walk's reason says the same in words)
INSTEAD: dict[str, str] = {
    "sglang": "use --engine vllm (Ampere or newer) or --engine llamacpp, or Hopper or Blackwell (SM90/SM100) cards",
    "vllm": "use --engine llamacpp, or Ampere or newer cards",
}


def attention_hint(engine: str) -> str:
    """What to do when :func:`attention_refusal` refuses ``engine``: never the engine that refused."""
    return INSTEAD.get(engine, "use another engine or other cards")
