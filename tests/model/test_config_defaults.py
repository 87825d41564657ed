"""Class defaults for sparse nested configs (explorer/model/config_defaults.py)."""

from __future__ import annotations

import json

from support.engine_logs import LOG_CONFIGS

from explorer.model.config_defaults import with_class_defaults
from explorer.model.kv_cache import FullAttention, SlidingWindowAttention
from explorer.model.shapes import shape_from_config
from explorer.units import MiB


def test_an_absent_key_takes_the_class_default():
    # llava-1.5's text_config names only model_type and a vocabulary: MistralConfig's window fills in
    config, filled = with_class_defaults({"model_type": "mistral", "vocab_size": 32064}, "mistral")
    assert config["sliding_window"] == 4096 and config["vocab_size"] == 32064
    assert "sliding_window" in filled and "vocab_size" not in filled


def test_an_explicit_null_is_kept_as_transformers_keeps_it():
    config, filled = with_class_defaults({"model_type": "mistral", "sliding_window": None}, "mistral")
    assert config["sliding_window"] is None and "sliding_window" not in filled


def test_mistral_small_3_1_has_no_sliding_window():
    # Its text_config states "sliding_window": null; llama.cpp's KV buffer for 90,880 cells × 40 layers
    # × 8 KV heads × 128 × 2 (K, V) × 2 bytes is 14,200 MiB: every cell, no 4,096-token window.
    raw = json.loads((LOG_CONFIGS / "mistralai__Mistral-Small-3.1-24B-Instruct-2503.json").read_text())
    shape = shape_from_config(raw, name="Mistral-Small-3.1")
    caches = {type(layer.cache) for layer in shape.decoder}
    assert caches == {FullAttention}
    assert not any(isinstance(layer.cache, SlidingWindowAttention) for layer in shape.decoder)
    assert shape.kv_bytes(90_880) == 14_200 * MiB  # 90,880 × 40 × 8 × 128 × 2 × 2 B
