"""Tied embeddings when a config does not say: transformers' config-class default by architecture."""

from __future__ import annotations

from explorer.model.shapes import shape_from_config
from explorer.model.tie_defaults import TIED_BY_DEFAULT, UNTIED_BY_DEFAULT, default_tied

# MiniCPM3-4B's config.json (openbmb/MiniCPM3-4B) has no tie_word_embeddings; MiniCPM3Config defaults to True.
MINICPM3 = {
    "architectures": ["MiniCPM3ForCausalLM"],
    "model_type": "minicpm3",
    "hidden_size": 2560,
    "num_hidden_layers": 62,
    "num_attention_heads": 40,
    "num_key_value_heads": 40,
    "intermediate_size": 6400,
    "vocab_size": 73448,
    "q_lora_rank": 768,
    "kv_lora_rank": 256,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def test_minicpm3_without_the_key_is_tied():
    tied = shape_from_config(MINICPM3, name="openbmb/MiniCPM3-4B")
    untied = shape_from_config({**MINICPM3, "tie_word_embeddings": False}, name="untied")
    assert tied.tied_embeddings and not untied.tied_embeddings
    # the untied count has a second 73,448 × 2,560 matrix: 188,026,880 parameters, +4.6 %
    assert untied.params - tied.params == 73_448 * 2_560
    assert tied.params == 4_073_875_968  # the model card's "4B" (4.07 B)
    assert round((untied.params / tied.params - 1) * 100, 1) == 4.6


def test_the_key_when_present_wins():
    assert not shape_from_config({**MINICPM3, "tie_word_embeddings": False}, name="x").tied_embeddings


def test_defaults_by_architecture_follow_transformers():
    assert {"minicpm3", "gemma3_text", "gemma2", "smollm3", "gpt2", "falcon"} <= TIED_BY_DEFAULT
    assert {"llama", "qwen2", "qwen3", "qwen3_moe", "mistral", "deepseek_v3", "llama4_text"} <= UNTIED_BY_DEFAULT
    assert not TIED_BY_DEFAULT & UNTIED_BY_DEFAULT
    # the text model's class first, then the wrapper's, then the builder's own fallback
    assert default_tied(("gemma3_text", "gemma3"), False) is True
    assert default_tied(("qwen3",), True) is False
    assert default_tied(("never-seen",), True) is True
