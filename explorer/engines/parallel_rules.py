"""Divisibility rules tensor and pipeline parallelism must satisfy (vLLM and SGLang).

Each rule returns ``(rule, reason)`` with the numbers in the reason, so a
refused layout says why in words a user can act on:

- query heads divide by tp, and so do a vision tower's heads;
- K/V heads: when tp is at least the KV heads, tp is a multiple of them
  (each card keeps a replica of one head: Qwen3-235B's 4 KV heads run on 8
  cards); otherwise the KV heads divide by tp. MLA's latent has no heads to split;
- linear-attention and Mamba heads (and groups) divide by tp;
- a pipeline has at most one stage per layer;
- block-quantised FP8 weights (``weight_block_size``, 128 × 128 for DeepSeek-style
  checkpoints): each card's share of a split weight is a whole number of blocks
  (:func:`block_refusals`, the engines' own messages).

vLLM pads the vocabulary to a multiple of 64 before splitting it, so the
vocabulary is not a constraint (gpustack checks it; vLLM does not need it).
"""

from __future__ import annotations

from functools import lru_cache

from explorer.engines.request import PlanRequest
from explorer.memo import memo
from explorer.model.kv_cache import FullAttention, RecurrentState
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.tensors import Tensor

Refusal = tuple[str, str]


def kv_head_counts(shape: ModelShape) -> set[int]:
    """The distinct KV-head counts of the model's attention layers (MLA excluded)."""
    return {
        layer.cache.kv_heads
        for layer in shape.decoder
        if isinstance(layer.cache, FullAttention) and layer.cache.kv_heads
    }


def tp_refusals(shape: ModelShape, tp: int, *, check_vision: bool = True) -> list[Refusal]:
    """Why a tensor-parallel size cannot serve this model (empty when it can)."""
    return list(_tp_refusals(shape, tp, check_vision))


@lru_cache(maxsize=1024)
def _tp_refusals(shape: ModelShape, tp: int, check_vision: bool) -> tuple[Refusal, ...]:
    if tp <= 1:
        return ()
    out: list[Refusal] = []
    if shape.attention_heads % tp:
        out.append(
            (
                "attention-heads",
                f"Total attention heads ({shape.attention_heads}) must be divisible by tensor parallel size ({tp})",
            )
        )
    vision = shape.vision_tower
    if check_vision and vision is not None and vision.heads % tp:
        out.append(
            (
                "vision-heads",
                f"Vision tower attention heads ({vision.heads}) must be divisible by tensor parallel size ({tp})",
            )
        )
    for kv in sorted(kv_head_counts(shape)):
        if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
            out.append(
                (
                    "kv-heads",
                    f"KV heads ({kv}) and tensor parallel size ({tp}) must divide one another: "
                    f"{kv} % {tp} or {tp} % {kv} must be 0",
                )
            )
            break
    states = {
        (c.family, c.heads, c.groups) for c in (layer.cache for layer in shape.decoder) if isinstance(c, RecurrentState)
    }
    for family, heads, groups in sorted(states):
        name = "linear-attention" if family == "linear" else "Mamba"
        for count, what in ((heads, "heads"), (groups, "key heads" if family == "linear" else "groups")):
            if count and count % tp:
                out.append(("ssm-heads", f"{name} {what} ({count}) must be divisible by tensor parallel size ({tp})"))
                return tuple(out)
    return tuple(out)


def expert_size_refusals(shape: ModelShape, request: PlanRequest) -> list[Refusal]:
    """An expert-parallel size asked of a model without experts (``--ep`` only applies to a mixture of experts)."""
    if request.expert_parallel_size and request.expert_parallel_size > 1 and shape.moe is None:
        return [
            ("ep-size", f"--ep {request.expert_parallel_size} applies to a mixture of experts; this model has none")
        ]
    return []


def pp_refusals(shape: ModelShape, pp: int) -> list[Refusal]:
    """Why a pipeline-parallel size cannot serve this model."""
    if pp > shape.layers:
        return [("pipeline-layers", f"Pipeline parallel size ({pp}) exceeds the model's {shape.layers} layers")]
    return []


@memo(256, keyed_on="shape identity, precision, tp, ep")
def block_refusals(shape: ModelShape, precision: Precision, tp: int, ep: int) -> tuple[Refusal, ...]:
    """Why tp (with ep) splits a block-FP8 weight off its blocks, in vLLM's and SGLang's own words (empty: it does not).

    Both engines check each card's partition when they create the weights (vLLM
    ``fp8_utils.validate_fp8_block_shape`` and ``Fp8MoEMethod.create_weights``; SGLang's ``fp8.py`` is the same
    code): a column-parallel weight's output rows and a row-parallel weight's input columns on one card must be
    multiples of the block's ``block_n`` and ``block_k``; a routed expert split by tp / ep (tp without expert
    parallelism) must keep its intermediate size a multiple of both. MiniMax-M2's experts (1536 wide) at tp 8: 192 a card,
    refused; at tp 4 (384 = 3 × 128), or spread whole by ep, kept.
    """
    if tp <= 1 or not any(group.fmt.block for group in precision.groups):
        return ()
    seen: set[int] = set()
    for index, layer in enumerate(shape.decoder):
        if id(layer.tensors) in seen:
            continue
        seen.add(id(layer.tensors))
        for tensor in layer.tensors:
            fmt = precision.format_for(tensor, index)
            if fmt is not None and fmt.block is not None:
                reason = _block_reason(tensor, fmt.block, tp, ep)
                if reason:
                    return (("fp8-block", f"{reason} (tp {tp}{f', ep {ep}' if ep > 1 else ''}: {tensor.module})"),)
    return ()


def _block_reason(tensor: Tensor, block: tuple[int, int], tp: int, ep: int) -> str | None:
    """The engine's message when one card's share of ``tensor`` is not whole blocks, else None."""
    block_n, block_k = block
    split = tensor.split
    if split in ("expert_column", "expert_row"):
        moe_tp = max(1, tp // ep)  # the experts' own tensor parallelism: whole experts at ep ≥ tp
        if moe_tp == 1:
            return None
        if split == "expert_column" and (tensor.rows % moe_tp or (tensor.rows // moe_tp) % block_n):
            return (
                f"The output_size of gate's and up's weight = {tensor.rows // moe_tp} is not divisible by "
                f"weight quantization block_n = {block_n}."
            )
        if split == "expert_row" and (tensor.cols % moe_tp or (tensor.cols // moe_tp) % block_k):
            return (
                f"The input_size of down's weight = {tensor.cols // moe_tp} is not divisible by "
                f"weight quantization block_k = {block_k}."
            )
        return None
    if split == "kv" and tensor.heads >= tp:  # K/V heads split, not replicated
        split = "column"
    if split == "column" and (tensor.rows % tp or (tensor.rows // tp) % block_n):
        return f"Weight output_partition_size = {tensor.rows // tp} is not divisible by weight quantization block_n = {block_n}."
    if split == "row" and (tensor.cols % tp or (tensor.cols // tp) % block_k):
        return (
            f"Weight input_size_per_partition = {tensor.cols // tp} is not divisible by "
            f"weight quantization block_k = {block_k}."
        )
    return None
