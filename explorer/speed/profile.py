"""What one card reads and computes per token: the inputs of the speed model.

A :class:`StageProfile` describes one card's share of a run of decoder
layers (a pipeline stage, llama.cpp's GPU layers, or the layers left on the
host), split the way the speed model needs it:

- ``dense_bytes``: weights every decode step reads whatever the batch: the
  layers' attention, norms, dense MLPs, routers and shared experts, plus the
  LM head on the last stage (the tied embedding table when the head reuses
  it). The input embedding is a gather of one row a token, so its table is
  *not* read: Llama-3.1-8B's 525 M embedding parameters (1.05 GB at bf16)
  are stored but not streamed.
- ``expert_bytes``: the routed experts the card holds for those layers. A
  step touches a fraction of them (see :func:`experts_touched`).
- ``dense_params`` / ``expert_params``: the same split in parameters, for
  FLOPs (2 a parameter a token).
- ``caches``: the distinct cache specs with their layer counts, for KV reads
  and attention FLOPs at a context.

Shards follow :func:`explorer.model.weights.shard_shape` (tensor parallel splits
columns/rows/heads, expert parallel spreads whole experts), so a card's
bytes match what the engines hold. Profiles are cached: building one walks
each distinct layer once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from explorer.engines.stage_kv import stage_caches
from explorer.memo import memo
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLAAttention,
    SlidingWindowAttention,
)
from explorer.model.precision import Precision
from explorer.model.tensors import Tensor
from explorer.model.weights import shard_shape
from explorer.units import cdiv


@dataclass(frozen=True, slots=True, kw_only=True)
class StageProfile:
    """One card's share of layers ``first_layer``..``end_layer - 1`` (and the head, if ``head``).

    Attributes:
        first_layer: the first decoder layer.
        end_layer: one past the last decoder layer.
        head: whether the LM head runs on this card.
        tp: the tensor-parallel size the shares are cut for.
        dense_bytes: weights read every step, whatever the batch.
        expert_bytes: routed-expert weights held; a step reads the touched fraction.
        dense_params: parameters a token uses from the dense part (this card's share).
        expert_params: routed-expert parameters held (all copies on this card).
        moe_layers: the stage's layers that route to experts.
        caches: (cache spec, layers using it) for the stage's layers.
    """

    first_layer: int
    end_layer: int
    head: bool
    tp: int
    dense_bytes: int
    expert_bytes: int
    dense_params: int
    expert_params: int
    moe_layers: int
    caches: tuple[tuple[LayerCache, int], ...]

    @property
    def layers(self) -> int:
        """Decoder layers in the stage."""
        return self.end_layer - self.first_layer


def experts_touched(batch: int, experts: int, experts_per_token: int) -> float:
    """Expected share of a layer's routed experts a step of ``batch`` tokens reads.

    Each token picks ``k`` of ``E`` experts; with routing taken as uniform and
    independent, an expert is missed by all ``B`` tokens with probability
    (1 − k/E)^B, so the share read is 1 − (1 − k/E)^B. Worked: Qwen3-30B-A3B
    (k 8, E 128): one token reads 6.25 %, 8 tokens 40.3 %, 64 tokens 98.4 %.
    Real routing is skewed, so fewer distinct experts are read: the uniform
    share is the larger, hence the slower, reading; a bound stays a bound
    only as long as the skew is mild, as it is for the load-balanced models
    this is for.
    """
    if experts <= 0 or batch <= 0:
        return 0.0
    k = min(experts_per_token, experts)
    return 1.0 - (1.0 - k / experts) ** batch


def _shard(t: Tensor, precision: Precision, layer: int | None, tp: int, ep: int) -> tuple[int, int]:
    """(bytes, parameters) of one card's share of a tensor group."""
    rows, cols, count = shard_shape(t, tp, ep)
    fmt = precision.format_for(t, layer)
    if fmt is None:
        nbytes = rows * cols * count * precision.base.block_bytes // precision.base.block_elements
    else:
        nbytes = fmt.matrix_bytes(rows, cols) * count
    return nbytes, rows * cols * count


def _layer_specific(precision: Precision) -> bool:
    """Whether a skip list names single layers (then each layer is sized on its own)."""
    return any(re.search(r"layers\.\d", p) for p in precision.skip)


@memo(2048, keyed_on="shape identity, precision, tp, ep, the stage's layer range, whether it holds the head, attn_tp")
def stage_profile(
    shape, precision: Precision, tp: int, ep: int, first: int, end: int, head: bool, attn_tp: int | None = None
) -> StageProfile:
    """The profile of one card holding layers ``first``..``end - 1`` at ``tp``/``ep`` (the LM head too if ``head``),
    the attention split by ``attn_tp`` where it differs (SGLang's DP attention alone: tp / dp; None: tp)."""
    attn_tp = tp if attn_tp is None else attn_tp
    per_layer = _layer_specific(precision)
    memo: dict[int, tuple[int, int, int, int]] = {}
    dense_b = expert_b = dense_p = expert_p = moe_layers = 0
    for i in range(first, end):
        layer = shape.decoder[i]
        key = i if per_layer else id(layer.tensors)
        if key not in memo:
            sums = [0, 0, 0, 0]
            for t in layer.tensors:
                nbytes, params = _shard(t, precision, i, attn_tp if t.role == "attention" else tp, ep)
                j = 1 if t.role == "expert" else 0
                sums[j] += nbytes
                sums[2 + j] += params
            memo[key] = (sums[0], sums[1], sums[2], sums[3])
        db, eb, dp, epar = memo[key]
        moe_layers += 1 if epar else 0
        dense_b, expert_b, dense_p, expert_p = dense_b + db, expert_b + eb, dense_p + dp, expert_p + epar
    if head:
        tensors = shape.head
        if shape.tied_embeddings:  # the LM head multiplies by the embedding table
            tensors = tensors + tuple(t for t in shape.embeddings if t.role == "embedding")
        for t in tensors:
            nbytes, params = _shard(t, precision, None, tp, ep)
            dense_b += nbytes
            dense_p += params
    return StageProfile(
        first_layer=first,
        end_layer=end,
        head=head,
        tp=tp,
        dense_bytes=dense_b,
        expert_bytes=expert_b,
        dense_params=dense_p,
        expert_params=expert_p,
        moe_layers=moe_layers,
        caches=stage_caches(shape, first, end),
    )


def attention_width(cache: LayerCache, q_heads: int) -> int:
    """Multiply-adds per query token per held token in one layer: q heads × (key dim + value dim).

    Full attention: QKᵀ is ``head_dim`` and AV ``v_head_dim`` multiply-adds a
    head a held token (Llama-3.1-8B: 32 × 256 = 8,192). MLA runs absorbed in
    decode: the scores span the latent and rope dims, the values the latent
    (DeepSeek-V3 on one card: 128 × (576 + 512) = 139,264). Recurrent layers
    cost a fixed state update instead, small beside their weights: 0 here.
    """
    if isinstance(cache, MLAAttention):
        return q_heads * (cache.kv_lora_rank + cache.rope_dim + cache.kv_lora_rank)
    if isinstance(cache, FullAttention):
        return q_heads * (cache.head_dim + (cache.v_head_dim or cache.head_dim))
    return 0


def held_sum(cache: LayerCache, prompt_tokens: int) -> int:
    """Σ over a prompt's positions of the tokens each attends to (causal): what prefill's attention multiplies.

    Full: P(P+1)/2. A window w: w(w+1)/2 + (P − w)·w past the window. Local
    chunks of c: each chunk is causal within itself. Anything else
    (compressed caches) is taken as P × held(P) / 2.
    """
    p = prompt_tokens
    if isinstance(cache, SlidingWindowAttention):
        w = cache.window
        return p * (p + 1) // 2 if p <= w else w * (w + 1) // 2 + (p - w) * w
    if isinstance(cache, ChunkedLocalAttention):
        c = cache.chunk
        full, rest = divmod(p, c)
        return full * c * (c + 1) // 2 + rest * (rest + 1) // 2
    if isinstance(cache, (FullAttention, MLAAttention)):
        held = cache.tokens_held(p)
        return p * (p + 1) // 2 if held >= p else p * held // 2
    return 0


def q_heads_per_card(shape, tp: int) -> int:
    """Query heads one card computes: the model's heads split by tp."""
    return cdiv(shape.attention_heads, tp) if shape.attention_heads else 0
