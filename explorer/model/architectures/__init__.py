"""Architecture builders: config.json → decoder layers, tensors and cache specs.

:func:`build_parts` picks a builder by the language model's ``model_type``
(or the wrapper's, or the class name in ``architectures``). A model type
with no builder of its own is read as a Llama-like decoder and marked
approximate, with the reason, never refused: a new model still gets a
best-effort estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from explorer.model.architectures.common import ArchParts
from explorer.model.architectures.llama import build_llama_like
from explorer.model.architectures.vision import vision_tower
from explorer.model.config_reader import ConfigView

Builder = Callable[[ConfigView], ArchParts]

#: model types the Llama-like builder reads exactly
LLAMA_LIKE = {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen2_moe",
    "qwen3_moe",
    "internlm",
    "internlm2",
    "smollm3",
    "granite",
    "granitemoe",
    "exaone4",
    "phi3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen2_5_vl_text",
    "qwen2_vl_text",
    "qwen3_vl",
    "qwen3_vl_text",
    "olmo",
    "yi",
    "aquila",
    "starcoder2_llama",
    "ministral",
    "mistral3",
}


def _registry() -> dict[str, Builder]:
    from explorer.model.architectures import gemma4, hybrid, legacy, mla, special

    table: dict[str, Builder] = dict.fromkeys(LLAMA_LIKE, build_llama_like)
    table.update(mla.BUILDERS)
    table.update(hybrid.BUILDERS)
    table.update(legacy.BUILDERS)
    table.update(special.BUILDERS)
    table.update(gemma4.BUILDERS)
    return table


_REGISTRY: dict[str, Builder] | None = None


def builder_for(view: ConfigView) -> tuple[Builder | None, str]:
    """The builder for a config and the model type it was found by (``None`` if unknown)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _registry()
    for mt in (view.text_model_type(), view.model_type()):
        if mt in _REGISTRY:
            return _REGISTRY[mt], mt
    arch = view.architecture().lower()
    for mt, builder in _REGISTRY.items():
        if arch.startswith(mt.replace("_", "")):
            return builder, mt
    return None, view.text_model_type() or view.architecture() or "(none)"


#: config keys that say a decoder's attention is multi-head latent attention, whatever its model_type
MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim")


def _unknown_parts(view: ConfigView, found: str) -> ArchParts:
    """An unknown architecture, its attention read from the config's keys: MLA when it has the MLA keys
    (MiniCPM3 and other DeepSeek-style decoders), else Llama-like. Always approximate."""
    from explorer.model.architectures import mla

    if all(view.get_int(k, default=0) for k in MLA_KEYS):
        parts, family = mla.build_mla(view), "mla"
        how = f"an MLA decoder: its config has {' and '.join(MLA_KEYS)}"
    else:
        parts, family = build_llama_like(view, family="llama"), "generic"
        how = "a Llama-like decoder"
    note = f"unknown architecture {found!r}: read as {how} (best effort)"
    return replace(parts, family=family, exact=False, notes=(note,) + parts.notes)


def build_parts(view: ConfigView) -> ArchParts:
    """Build a config's parts, with its vision tower; unknown types are approximated (:func:`_unknown_parts`)."""
    builder, found = builder_for(view)
    parts = _unknown_parts(view, found) if builder is None else builder(view)
    if not parts.vision:
        tensors, spec = vision_tower(view.vision(), view.alias_int("hidden_size") or 0)
        if spec is not None:
            note = f"vision tower ({spec.layers} layers, {spec.heads} heads) sized as a standard ViT: approximate"
            parts = replace(parts, vision=tensors, vision_spec=spec, exact=False, notes=parts.notes + (note,))
    return parts
