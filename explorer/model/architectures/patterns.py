"""Which layers attend how far, and how long a context the model supports.

Sliding-window layouts come in several spellings: an explicit
``layer_types`` list (Gemma 3, gpt-oss, Qwen3.5), a ``sliding_window`` that
applies to every layer (Mistral 7B v0.1), Qwen2's ``use_sliding_window`` with
``max_window_layers``, Gemma 2's alternation, Gemma 3's
``sliding_window_pattern``, and Llama 4's chunked attention with a global
(no-RoPE) layer every fourth.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import InvalidConfigValueError
from explorer.limits import check_count, check_finite
from explorer.model.config_reader import ConfigView

FULL = "full"
SLIDING = "sliding"
CHUNKED = "chunked"
LINEAR = "linear"

_LAYER_TYPE_NAMES = {
    "full_attention": FULL,
    "global_attention": FULL,
    "attention": FULL,
    "sliding_attention": SLIDING,
    "sliding_window_attention": SLIDING,
    "local_attention": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": LINEAR,
}


@dataclass(frozen=True, slots=True)
class AttentionLayout:
    """Per-layer attention kinds and the window they share.

    Attributes:
        kinds: one of ``full``/``sliding``/``chunked``/``linear`` per layer.
        window: tokens kept by sliding or chunked layers (0 when none).
        source: which config keys decided it, for notes.
    """

    kinds: tuple[str, ...]
    window: int
    source: str


def _from_layer_types(view: ConfigView, layers: int, window: int) -> AttentionLayout | None:
    types = view.get_list("layer_types")
    if not types:
        return None
    if len(types) < layers:
        raise InvalidConfigValueError(f"{view.where}: layer_types has {len(types)} entries for {layers} layers")
    kinds = []
    for t in types[:layers]:
        kind = _LAYER_TYPE_NAMES.get(str(t))
        if kind is None:
            raise InvalidConfigValueError(f"{view.where}: unknown layer type {t!r} in layer_types")
        kinds.append(kind)
    if SLIDING in kinds and not window:
        kinds = [FULL if k == SLIDING else k for k in kinds]
    return AttentionLayout(tuple(kinds), window if SLIDING in kinds else 0, "layer_types")


def attention_layout(view: ConfigView, layers: int, *, family: str = "") -> AttentionLayout:
    """Decide each layer's attention kind from whichever keys the config uses."""
    window = view.get_int("sliding_window", "sliding_window_size", default=0) or 0
    explicit = _from_layer_types(view, layers, window)
    if explicit is not None:
        return explicit
    chunk = view.get_int("attention_chunk_size", default=0) or 0
    if chunk:
        # Llama 4: every 4th layer is global without RoPE; the rest attend within chunks.
        step = view.get_int("no_rope_layer_interval", default=4) or 4
        kinds = tuple(FULL if (i + 1) % step == 0 else CHUNKED for i in range(layers))
        return AttentionLayout(kinds, chunk, "attention_chunk_size")
    interval = view.get_int("full_attention_interval", default=0) or 0
    if interval:
        kinds = tuple(FULL if (i + 1) % interval == 0 else LINEAR for i in range(layers))
        return AttentionLayout(kinds, 0, "full_attention_interval")
    if not window:
        return AttentionLayout((FULL,) * layers, 0, "")
    if family in ("gemma2",):
        kinds = tuple(SLIDING if i % 2 == 0 else FULL for i in range(layers))
        return AttentionLayout(kinds, window, "gemma2 alternation")
    pattern = view.get_int("sliding_window_pattern", default=0) or 0
    if pattern:
        kinds = tuple(FULL if (i + 1) % pattern == 0 else SLIDING for i in range(layers))
        return AttentionLayout(kinds, window, "sliding_window_pattern")
    if view.raw("use_sliding_window") is not None:
        if not view.get_bool("use_sliding_window"):
            return AttentionLayout((FULL,) * layers, 0, "use_sliding_window=false")
        start = view.get_int("max_window_layers", default=0) or 0
        kinds = tuple(SLIDING if i >= start else FULL for i in range(layers))
        return AttentionLayout(kinds, window, "use_sliding_window")
    return AttentionLayout((SLIDING,) * layers, window, "sliding_window")


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """How long a context the model supports.

    Attributes:
        max_position_embeddings: the config's own figure.
        max_context_tokens: the limit explorer plans with.
        rope: a short description of any RoPE scaling.
        note: how the limit was derived, when not simply the config's figure.
        names_original: the scaling names ``original_max_position_embeddings`` or is Llama 3's (SGLang then keeps
            the stated length: its ``get_context_length`` applies no factor).
    """

    max_position_embeddings: int
    max_context_tokens: int
    rope: str
    note: str
    names_original: bool = False


#: rope types whose config already states the extended length (vLLM leaves the length alone)
_STATED_LENGTH_ROPES = ("su", "longrope", "llama3")


def context_limit(view: ConfigView, default: int = 2048) -> ContextLimit:
    """The context limit from ``max_position_embeddings`` and ``rope_scaling``, as vLLM derives it.

    vLLM ``ModelConfig`` ``_get_and_verify_max_len`` (vllm/config/model.py at the pinned ~0.11): Llama 3's,
    LongRoPE's (``su``) configs already state the extended length; YaRN scales its
    ``original_max_position_embeddings`` by ``factor`` (DeepSeek-V3: 4096 × 40 = 163,840); every other type
    with a factor (linear, dynamic) scales the stated length by it (a linear ×2 config of 32,768 accepts
    65,536 tokens); Gemma 3's stated length is already scaled. SGLang's ``get_context_length`` scales the stated
    length by the factor too, but applies none when the scaling names an original length or is Llama 3's
    (``names_original``: :meth:`explorer.model.shapes.ModelShape.context_limit` then keeps the stated length).
    """
    stated = view.alias_int("max_positions", minimum=1)
    note = ""
    if stated is None:
        stated = default
        note = f"no max_position_embeddings: assumed {default}"
    rope = view.get_dict("rope_scaling")
    if rope is None:
        params = view.get_dict("rope_parameters")
        rope = params if params and "factor" in params else None
    if not rope:
        return ContextLimit(stated, stated, "", note)
    rope_type = str(rope.get("rope_type") or rope.get("type") or "")
    factor = rope.get("factor")
    original = rope.get("original_max_position_embeddings")
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor <= 0:
        return ContextLimit(stated, stated, rope_type, note)
    check_finite(factor, "rope_scaling.factor", where=view.where, error=InvalidConfigValueError)
    if isinstance(original, int) and not isinstance(original, bool):
        check_count(original, "original_max_position_embeddings", where=view.where, error=InvalidConfigValueError)
    label = f"{rope_type} ×{factor:g}" + (f" from {original:,}" if isinstance(original, int) else "")
    names_original = "original_max_position_embeddings" in rope or rope_type == "llama3"
    if rope_type in _STATED_LENGTH_ROPES or "gemma3" in view.text_model_type() or factor == 1:
        return ContextLimit(stated, stated, label, note, names_original)
    from_original = rope_type == "yarn" and isinstance(original, int) and original > 0
    base = original if from_original else stated
    derived = check_count(
        int(min(base * factor, 2.0**62)),
        "rope_scaling context (length × factor)",
        where=view.where,
        error=InvalidConfigValueError,
    )
    if derived == stated:
        return ContextLimit(stated, stated, label, note, names_original)
    source = "original_max_position_embeddings" if from_original else "max_position_embeddings"
    return ContextLimit(
        stated, derived, label, f"{rope_type} rope scaling: {source} {base:,} × {factor:g}", names_original
    )
