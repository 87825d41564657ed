"""Defaults of transformers' config classes, for sparse nested configs.

Multimodal wrappers sometimes store only the overrides of their language
model (llava-1.5's ``text_config`` names just ``model_type: llama`` and a
vocabulary); transformers fills the rest from the config class's defaults.
explorer does the same for those nested configs, and says so in the notes.
Top-level configs get no defaults: a missing size there is an error.

Source: the ``__init__`` defaults of transformers' LlamaConfig,
MistralConfig, Qwen2Config, GemmaConfig and GPT2Config.
"""

from __future__ import annotations

CLASS_DEFAULTS: dict[str, dict[str, object]] = {
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "mistral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
    },
    "qwen2": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
    },
    "gemma": {
        "vocab_size": 256000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "gpt2": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12},
}


def with_class_defaults(config: dict, model_type: str) -> tuple[dict, list[str]]:
    """``config`` with its class's defaults under it, and the keys that were filled.

    Only absent keys take the default: an explicit ``null`` is the value, as transformers keeps it
    (Mistral-Small-3.1's ``text_config`` says ``"sliding_window": null``: no window, not MistralConfig's 4096).
    """
    defaults = CLASS_DEFAULTS.get(model_type)
    if not defaults:
        return config, []
    filled = [k for k in defaults if k not in config]
    if not filled:
        return config, []
    return {**defaults, **config}, filled
