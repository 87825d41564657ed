"""Vision towers: their heads (for the engines' tensor-parallel rules) and size.

Towers differ in detail (SigLIP, CLIP, Qwen's windowed ViT, InternViT,
MoonViT), so their parameter count is an estimate from the standard ViT
layout: per layer a fused q/k/v and an output projection with biases, an
MLP (gated when the config's activation is SiLU, as in Qwen2.5-VL), two
norms; plus the patch embedding and a projector into the language model.
The heads, which tensor-parallel divisibility needs, are exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from explorer.errors import InvalidConfigValueError
from explorer.limits import check_count
from explorer.model.architectures.common import VisionSpec
from explorer.model.tensors import Tensor

HEAD_KEYS = ("num_attention_heads", "num_heads", "heads", "vt_num_attention_heads", "n_heads")
LAYER_KEYS = ("num_hidden_layers", "depth", "layers", "vt_num_hidden_layers", "n_layers")
HIDDEN_KEYS = (
    "embed_dim",
    "width",
    "vt_hidden_size",
    "hidden_size",
    "d_model",
)  # Qwen2-VL: hidden_size is the merger output
INTER_KEYS = ("intermediate_size", "vt_intermediate_size", "mlp_dim")


#: where messages say a vision value was read
_WHERE = "vision_config"


def _first_int(cfg: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    """The first of ``keys`` holding a positive whole number, within its plausible maximum; 0 when none does."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return check_count(value, key, where=_WHERE, error=InvalidConfigValueError)
    return 0


def _mlp_width(cfg: Mapping[str, Any], hidden: int) -> int:
    """The MLP's width: ``hidden × mlp_ratio`` (finite and positive, the product within the plausible width),
    else 4 × hidden, the standard ViT's."""
    ratio = cfg.get("mlp_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0:
        return 4 * hidden
    width = hidden * ratio
    if not math.isfinite(width):  # mlp_ratio: inf was an OverflowError (issue 25)
        raise InvalidConfigValueError(f"{_WHERE}: mlp_ratio is {ratio!r}; it must be a finite number")
    return check_count(int(width), "intermediate_size", where=_WHERE, error=InvalidConfigValueError)


def vision_tower(cfg: Mapping[str, Any] | None, text_hidden: int) -> tuple[tuple[Tensor, ...], VisionSpec | None]:
    """Tensors and spec of a vision tower config; ``((), None)`` when there is none."""
    if not cfg:
        return (), None
    heads = _first_int(cfg, HEAD_KEYS)
    layers = _first_int(cfg, LAYER_KEYS)
    hidden = _first_int(cfg, HIDDEN_KEYS)
    if not (heads and layers and hidden):
        return (), None
    inter = _first_int(cfg, INTER_KEYS)
    if not inter:
        inter = _mlp_width(cfg, hidden)
    gated = str(cfg.get("hidden_act", "")) == "silu"
    patch = _first_int(cfg, ("patch_size", "spatial_patch_size")) or 14
    channels = _first_int(cfg, ("num_channels", "in_channels", "in_chans")) or 3
    temporal = _first_int(cfg, ("temporal_patch_size",)) or 1
    out_hidden = _first_int(cfg, ("out_hidden_size", "projector_output_dim", "output_dim")) or text_hidden
    p = "vision.layers.{i}"
    per_layer = (
        Tensor(
            module=f"{p}.qkv", rows=3 * hidden, cols=hidden, count=layers, role="vision", split="column", linear=True
        ),
        Tensor(module=f"{p}.qkv", param="bias", rows=3 * hidden, count=layers, role="vision", split="column"),
        Tensor(module=f"{p}.proj", rows=hidden, cols=hidden, count=layers, role="vision", split="row", linear=True),
        Tensor(
            module=f"{p}.mlp",
            rows=inter * (3 if gated else 2),
            cols=hidden,
            count=layers,
            role="vision",
            split="column",
            linear=True,
        ),
        Tensor(module=f"{p}.norms", rows=6 * hidden + inter * (2 if gated else 1), count=layers, role="vision"),
    )
    stem = (
        Tensor(module="vision.patch_embed", rows=hidden, cols=channels * patch * patch * temporal, role="vision"),
        Tensor(module="vision.projector", rows=out_hidden, cols=hidden, role="vision", split="column", linear=True),
    )
    tensors = per_layer + stem
    params = sum(t.elements for t in tensors)
    model_type = str(cfg.get("model_type") or "")
    return tensors, VisionSpec(model_type=model_type, heads=heads, layers=layers, hidden_size=hidden, params=params)
