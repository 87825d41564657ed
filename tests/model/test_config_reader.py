"""ConfigView: aliases, nesting, typed getters."""

from __future__ import annotations

import pytest
from support.corpus import load_config

from explorer.errors import ConfigError, InvalidConfigValueError, NotAModelConfigError
from explorer.model.config_reader import ConfigView, parse_config_text, require_model_config


def test_aliases_of_legacy_configs():
    gpt2 = ConfigView.of(load_config("openai-community__gpt2-large"))
    assert gpt2.alias_int("hidden_size") == 1280 and gpt2.alias_int("layers") == 36 and gpt2.alias_int("heads") == 20
    glm = ConfigView.of(load_config("THUDM__chatglm2-6b"))
    assert glm.alias_int("layers") == 28 and glm.alias_int("vocab") == 65024 and glm.alias_int("head_dim") == 128


def test_nested_text_config_reads_inner_first_then_wrapper():
    view = ConfigView.of(load_config("google__medgemma-27b-it"))
    assert view.nested and view.text_model_type() == "gemma3_text" and view.model_type() == "gemma3"
    assert view.alias_int("hidden_size") == 5376
    assert view.raw("torch_dtype") == "bfloat16"
    assert view.vision()["model_type"] == "siglip_vision_model"


def test_internvl_llm_config_is_the_text_model():
    view = ConfigView.of(load_config("OpenGVLab__InternVL2-2B"))
    assert view.text_model_type() == "internlm2" and view.alias_int("layers") == 24


def test_typed_getters_reject_wrong_types():
    view = ConfigView.of({"hidden_size": "big", "num_hidden_layers": -3, "x": 1.5, "flag": "yes"})
    with pytest.raises(InvalidConfigValueError, match="hidden_size"):
        view.alias_int("hidden_size")
    with pytest.raises(InvalidConfigValueError, match="≥ 0"):
        view.alias_int("layers")
    with pytest.raises(InvalidConfigValueError, match="whole number"):
        view.get_int("x")
    with pytest.raises(InvalidConfigValueError):
        view.get_bool("flag")
    assert view.get_int("absent", default=7) == 7


def test_parse_config_text_errors():
    assert parse_config_text('{"a": Infinity}')["a"] == float("inf")
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_config_text("{not json")
    with pytest.raises(NotAModelConfigError):
        parse_config_text("[1, 2]")
    with pytest.raises(NotAModelConfigError, match="not a model config"):
        require_model_config({"foo": 1})


def test_remote_code_is_a_non_empty_auto_map_of_the_whole_config():
    """Kimi-K2.5 names configuration_kimi_k25.KimiK25Config (transformers has no kimi_k25), Nemotron-3-Nano its
    configuration_nemotron_h; Qwen3.5's config names no code of its own. A malformed auto_map is no code."""
    assert ConfigView.of(load_config("moonshotai__Kimi-K2.5")).remote_code()
    assert ConfigView.of(load_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")).remote_code()
    assert not ConfigView.of(load_config("Qwen__Qwen3.5-397B-A17B")).remote_code()
    base = load_config("Qwen__Qwen3-8B")
    for auto_map in ({}, "configuration_x.XConfig", ["x"], None):
        assert not ConfigView.of({**base, "auto_map": auto_map}).remote_code()
