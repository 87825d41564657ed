"""Divisibility rules tensor and pipeline parallelism must satisfy (vLLM and SGLang).

Each rule returns ``(rule, reason)`` with the numbers in the reason, so a
refused layout says why in words a user can act on:

- query heads divide by tp, and so do a vision tower's heads;
- K/V heads: when tp is at least the KV heads, tp is a multiple of them
  (each card keeps a replica of one head: Qwen3-235B's 4 KV heads run on 8
  cards); otherwise the KV heads divide by tp. MLA's latent has no heads to split;
- linear-attention and Mamba heads (and groups) divide by tp;
- a pipeline has at most one stage per layer.

vLLM pads the vocabulary to a multiple of 64 before splitting it, so the
vocabulary is not a constraint (gpustack checks it; vLLM does not need it).
"""

from __future__ import annotations

from functools import lru_cache

from explorer.model.kv_cache import FullAttention, RecurrentState
from explorer.model.shapes import ModelShape

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


def pp_refusals(shape: ModelShape, pp: int) -> list[Refusal]:
    """Why a pipeline-parallel size cannot serve this model."""
    if pp > shape.layers:
        return [("pipeline-layers", f"Pipeline parallel size ({pp}) exceeds the model's {shape.layers} layers")]
    return []
