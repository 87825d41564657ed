"""Vision towers: their heads (for the engines' tensor-parallel rules) and size.

Towers differ in detail (SigLIP, CLIP, Qwen's windowed ViT, InternViT,
MoonViT), so their parameter count is an estimate from the standard ViT
layout: per layer a fused q/k/v and an output projection with biases, an
MLP (gated when the config's activation is SiLU, as in Qwen2.5-VL), two
norms; plus the patch embedding and a projector into the language model
(the Qwen-VL patch merger and Qwen3-VL's learned positions as vLLM builds
them: the Qwen3.5 tower comes to the parameters its checkpoint stores).
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


def _learned_positions(cfg: Mapping[str, Any], hidden: int) -> tuple[Tensor, ...]:
    """Qwen3-VL's (and Qwen3.5's) learned position embedding, ``num_position_embeddings × hidden``, and its patch
    embedding's bias (vLLM ``qwen3_vl.py``: ``pos_embed = nn.Embedding(num_position_embeddings, hidden_size)``,
    ``Qwen3_VisionPatchEmbed`` a ``Conv3d`` with ``bias=True``); towers without the key have neither."""
    positions = _first_int(cfg, ("num_position_embeddings",))
    if not positions:
        return ()
    return (
        Tensor(module="vision.pos_embed", rows=positions, cols=hidden, role="vision"),
        Tensor(module="vision.patch_embed", param="bias", rows=hidden, role="vision"),
    )


def _merger(name: str, merged: int, out_hidden: int, norm_width: int, count: int) -> tuple[Tensor, ...]:
    """One kind of patch merger, ``count`` of them: a norm of ``norm_width``, then ``merged → merged → out_hidden``
    linears with biases."""
    return (
        Tensor(
            module=f"{name}.linear_fc1",
            rows=merged,
            cols=merged,
            count=count,
            role="vision",
            split="column",
            linear=True,
        ),
        Tensor(
            module=f"{name}.linear_fc2",
            rows=out_hidden,
            cols=merged,
            count=count,
            role="vision",
            split="row",
            linear=True,
        ),
        Tensor(module=f"{name}.biases", rows=merged + out_hidden + 2 * norm_width, count=count, role="vision"),
    )


def _projector(cfg: Mapping[str, Any], hidden: int, out_hidden: int) -> tuple[Tensor, ...]:
    """The projector into the language model.

    Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5 (a ``spatial_merge_size`` m) merge m² patches: a norm over the
    tower's width, then two linears with biases, ``hidden·m² → hidden·m² → out_hidden`` (vLLM ``qwen2_vl.py``
    ``Qwen2VisionPatchMerger``, ``qwen2_5_vl.py``, ``qwen3_vl.py`` ``Qwen3_VisionPatchMerger``); Qwen3-VL adds
    one more per ``deepstack_visual_indexes`` entry, its norm over ``hidden·m²`` (``use_postshuffle_norm``).
    Other towers: one ``out_hidden × hidden`` linear, an estimate.
    """
    merge = _first_int(cfg, ("spatial_merge_size",))
    if not merge:
        return (
            Tensor(module="vision.projector", rows=out_hidden, cols=hidden, role="vision", split="column", linear=True),
        )
    merged = hidden * merge * merge
    deepstack = cfg.get("deepstack_visual_indexes")
    extra = len(deepstack) if isinstance(deepstack, list) else 0
    mergers = _merger("vision.merger", merged, out_hidden, hidden, 1)
    return mergers + (_merger("vision.deepstack_merger", merged, out_hidden, merged, extra) if extra else ())


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
        *_learned_positions(cfg, hidden),
        *_projector(cfg, hidden, out_hidden),
    )
    tensors = per_layer + stem
    params = sum(t.elements for t in tensors)
    model_type = str(cfg.get("model_type") or "")
    return tensors, VisionSpec(model_type=model_type, heads=heads, layers=layers, hidden_size=hidden, params=params)
