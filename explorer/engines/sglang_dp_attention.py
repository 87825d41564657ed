"""SGLang's DP attention (``--enable-dp-attention --dp-size N``) where an MLA latent duplicated over the tp cards
keeps a tensor-parallel launch from holding the request.

Under plain tensor parallelism SGLang keeps an MLA model's one latent KV vector a token whole on every tp rank,
so each card holds every sequence's cache. DP attention carves dp attention groups of ``tp / dp`` cards out of the
same tp ranks (``attn_tp_size``), each serving its own sequences: a card holds ``cdiv(concurrency, dp)``
sequences' latents, at the price of attention weights split only ``tp / dp`` ways and a larger reserve outside
``mem_fraction_static`` (:func:`explorer.engines.sglang.reserved_mib`). SGLang's own rules
(docs/notes/sglang_memory.md §3.2 has the sources):

- dp > 1 (at dp 1 SGLang turns DP attention off) and tp a multiple of dp (``assert self.tp_size % self.dp_size
  == 0`` in ``ServerArgs._handle_data_parallelism``);
- offered unasked for MLA models only (DeepSeek-V2/V3/R1/V3.2, Kimi-K2, the guide's "DeepSeek/MLA models"): a
  standard-attention model's KV heads are split by tp already (SGLang's guide keeps tp or plain dp for them);
- a sparse-MLA (NSA) model runs it at dp = tp only: SGLang turns DP attention on for DeepSeek's NSA models itself,
  with ``dp_size = tp_size`` (``_handle_model_specific_adjustments``);
- neither standalone nor n-gram speculative decoding runs with it (``_handle_speculative_decoding``).
"""

from __future__ import annotations

from dataclasses import replace

from explorer.engines.attention_kernels import sparse_mla
from explorer.engines.layouts import Layout
from explorer.engines.parallel_rules import Refusal
from explorer.engines.request import PlanRequest
from explorer.model.kv_cache import MLAAttention, NoCache
from explorer.model.shapes import ModelShape

#: speculative algorithms SGLang refuses beside DP attention, with its messages (``server_args.py``)
SPECULATIVE_REFUSED = {
    "STANDALONE": "Currently standalone speculative decoding does not support dp attention.",
    "NGRAM": "Currently ngram speculative decoding does not support dp attention.",
}


#: SGLang's ``_handle_model_specific_adjustments`` for DeepSeek's sparse attention (NSA) on GPUs
NSA_RULE = "it sets dp_size = tp_size itself ('DP attention is enabled for DeepSeek NSA.')"


def dp_attention_refusals(shape: ModelShape, tp: int, dp: int, request: PlanRequest) -> list[Refusal]:
    """Why SGLang's ``--tp-size tp --dp-size dp --enable-dp-attention`` is not planned for this model (empty: it
    is), in SGLang's words where it has them."""
    if dp <= 1:
        return [("dp-attention-size", "SGLang turns DP attention off at --dp-size 1 (it needs 1 < dp <= tp)")]
    if tp % dp:
        return [("dp-attention-size", f"SGLang asserts tp_size % dp_size == 0 under DP attention: {tp} % {dp}")]
    caches = {type(layer.cache) for layer in shape.decoder} - {NoCache}
    if caches != {MLAAttention}:
        return [
            (
                "dp-attention-model",
                "SGLang's DP attention is offered unasked for MLA models only (their latent is whole on every tp "
                f"card); this model has {', '.join(sorted(c.kind for c in caches)) or 'no attention'}",
            )
        ]
    if sparse_mla(shape) and dp != tp:
        return [
            ("dp-attention-size", f"SGLang runs a sparse-MLA (NSA) model's DP attention at dp = tp ({tp}): {NSA_RULE}")
        ]
    refused = SPECULATIVE_REFUSED.get((request.speculative or "").upper())
    return [("dp-attention-speculative", refused)] if refused else []


def dp_attention_layouts(shape: ModelShape, layout: Layout, request: PlanRequest) -> tuple[Layout, ...]:
    """``layout`` with each DP attention size SGLang accepts beyond 1, smallest first: the ways to give each of
    its tp cards only its own sequences' latents (DeepSeek-V3 at tp 8: dp 2, 4, 8). None where the user asked for
    DP attention (the walk plans it already), for plain dp replicas, for one card, and under pipeline parallelism
    (SGLang's recipe is ``--tp N --dp N``; a pp stage keeps only its own layers' latents already)."""
    if request.dp_attention or layout.tp <= 1 or layout.pp > 1 or layout.dp > 1 or layout.dcp > 1:
        return ()
    return tuple(
        replace(layout, dp=dp)
        for dp in range(2, layout.tp + 1)
        if not dp_attention_refusals(shape, layout.tp, dp, request)
    )
