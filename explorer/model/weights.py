"""Weight bytes: the whole model, and one card's share under tensor/expert parallelism.

A card's share follows how vLLM and SGLang shard each tensor:

- column-parallel layers (q, gate/up) hold ⌈rows / tp⌉ rows;
- row-parallel layers (o, down) hold ⌈cols / tp⌉ columns; their bias is whole;
- vocabulary-parallel embeddings and heads hold ⌈round_up(vocab, 64) / tp⌉ rows;
- K/V projections hold max(1, kv_heads // tp) heads: once tp exceeds the KV
  heads each card keeps a replica of one head;
- routed experts are spread over ``ep`` groups (``--enable-expert-parallel``, SGLang's
  ``--ep-size``), each expert split by ``tp / ep`` within its group (whole at ep ≥ tp);
  without expert parallelism each expert is split by tp;
- everything else (norms, routers, MLA's down-projections) is replicated;
- under SGLang's DP attention the attention is split by its own, smaller
  tensor-parallel size (tp / dp), the rest by tp.

Quantised formats are sized on the shard's own shape, so block scales are
counted per card, as the engines allocate them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from explorer.memo import memo
from explorer.model.precision import Precision
from explorer.model.tensors import Tensor
from explorer.units import cdiv, round_up

#: vLLM pads the vocabulary to a multiple of 64 before splitting it (DEFAULT_VOCAB_PADDING_SIZE)
VOCAB_PADDING = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightBreakdown:
    """Weight bytes by part, for the whole model or one card's share.

    Attributes:
        embedding_bytes: token (and position) embeddings.
        head_bytes: final norm and LM head.
        layer_bytes: each decoder layer.
        vision_bytes: the vision tower and projector.
        mtp_bytes: multi-token-prediction layers (stored, not loaded for plain serving).
    """

    embedding_bytes: int
    head_bytes: int
    layer_bytes: tuple[int, ...]
    vision_bytes: int
    mtp_bytes: int

    @property
    def decoder_bytes(self) -> int:
        """All decoder layers together."""
        return sum(self.layer_bytes)

    @property
    def total_bytes(self) -> int:
        """What an engine loads: embeddings, layers, head and vision tower (no MTP)."""
        return self.embedding_bytes + self.decoder_bytes + self.head_bytes + self.vision_bytes

    def stage_bytes(self, first_layer: int, end_layer: int, *, first: bool, last: bool) -> int:
        """A pipeline stage's bytes: its layers, plus embeddings (and vision) first, head last."""
        total = sum(self.layer_bytes[first_layer:end_layer])
        if first:
            total += self.embedding_bytes + self.vision_bytes
        if last:
            total += self.head_bytes
        return total


def shard_shape(t: Tensor, tp: int, ep: int) -> tuple[int, int, int]:
    """(rows, cols, copies) of one card's share of a tensor group."""
    rows, cols, count = t.rows, t.cols, t.count
    if tp == 1 and ep == 1:
        return rows, cols, count
    split = t.split
    if split == "column":
        return cdiv(rows, tp), cols, count
    if split == "row":
        return rows, cdiv(cols, tp), count
    if split == "vocab":
        return cdiv(round_up(rows, VOCAB_PADDING), tp), cols, count
    if split == "kv":
        if not t.heads:
            return cdiv(rows, tp), cols, count
        per_head = rows // t.heads
        return per_head * max(1, t.heads // tp), cols, count
    if split in ("expert_column", "expert_row"):
        moe_tp = max(1, tp // ep)  # SGLang's moe_tp_size: each expert split by tp / ep (whole at ep ≥ tp)
        count = cdiv(count, ep)
        if split == "expert_column":
            return cdiv(rows, moe_tp), cols, count
        return rows, cdiv(cols, moe_tp), count
    return rows, cols, count


def _shard_bytes(t: Tensor, precision: Precision, layer: int | None, tp: int, ep: int, attn_tp: int) -> int:
    rows, cols, count = shard_shape(t, attn_tp if t.role == "attention" else tp, ep)
    fmt = precision.format_for(t, layer)
    if fmt is None:
        return rows * cols * count * precision.base.block_bytes // precision.base.block_elements
    return fmt.matrix_bytes(rows, cols) * count


def _group_bytes(
    tensors: tuple[Tensor, ...], precision: Precision, layer: int | None, tp: int, ep: int, attn_tp: int
) -> int:
    return sum(_shard_bytes(t, precision, layer, tp, ep, attn_tp) for t in tensors)


def _layer_specific(precision: Precision) -> bool:
    """Whether a skip list names individual layers (then each layer is sized on its own)."""
    return any(re.search(r"layers\.\d", p) for p in precision.skip)


@memo(256, keyed_on="shape identity, precision, tp, ep, attn_tp")
def weight_breakdown(
    shape, precision: Precision, tp: int = 1, ep: int = 1, attn_tp: int | None = None
) -> WeightBreakdown:
    """Weight bytes of ``shape`` at ``precision``, for one card at tensor parallel ``tp`` and expert parallel ``ep``;
    the attention split by ``attn_tp`` when it differs (SGLang's DP attention: tp / dp; None: tp)."""
    attn_tp = tp if attn_tp is None else attn_tp
    per_layer = _layer_specific(precision)
    memo: dict[int, int] = {}
    layer_bytes = []
    for i, layer in enumerate(shape.decoder):
        if per_layer:
            layer_bytes.append(_group_bytes(layer.tensors, precision, i, tp, ep, attn_tp))
            continue
        key = id(layer.tensors)
        if key not in memo:
            memo[key] = _group_bytes(layer.tensors, precision, i, tp, ep, attn_tp)
        layer_bytes.append(memo[key])
    return WeightBreakdown(
        embedding_bytes=_group_bytes(shape.embeddings, precision, None, tp, ep, attn_tp),
        head_bytes=_group_bytes(shape.head, precision, None, tp, ep, attn_tp),
        layer_bytes=tuple(layer_bytes),
        vision_bytes=_group_bytes(shape.vision, precision, None, tp, ep, attn_tp),
        mtp_bytes=_group_bytes(shape.mtp, precision, None, tp, ep, attn_tp),
    )
