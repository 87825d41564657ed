"""Invariants of shapes, checked with hypothesis on the real corpus."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corpus import CONFIGS, all_config_names, load_config, shape_of

from explorer.errors import ExplorerError
from explorer.model.config_reader import parse_config_text
from explorer.model.shapes import shape_from_config

NAMES = all_config_names()
KV_TYPES = ["auto", "bf16", "fp8", "q8_0", "q4_0"]


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    a=st.integers(0, 2_000_000),
    b=st.integers(0, 2_000_000),
    seqs=st.integers(1, 64),
    kv=st.sampled_from(KV_TYPES),
)
def test_kv_bytes_never_shrink_as_context_grows(name, a, b, seqs, kv):
    s = shape_of(name)
    lo, hi = sorted((a, b))
    small, large = s.kv_bytes(lo, kv, seqs), s.kv_bytes(hi, kv, seqs)
    assert isinstance(small, int) and isinstance(large, int)
    assert 0 <= small <= large


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(NAMES), precision=st.sampled_from([None, "bf16", "fp8", "int8", "int4-awq", "nf4", "Q4_K_M"])
)
def test_sizes_are_non_negative_ints(name, precision):
    s = shape_of(name)
    for value in (s.params, s.active_params, s.weight_bytes(precision), s.kv_bytes_per_token()):
        assert isinstance(value, int) and value >= 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)


def _mutate(config: dict, data) -> dict:
    keys = sorted(config)
    for _ in range(data.draw(st.integers(1, 6))):
        action = data.draw(st.sampled_from(["delete", "replace", "nested"]))
        key = data.draw(st.sampled_from(keys))
        if action == "delete":
            config.pop(key, None)
        elif action == "replace":
            config[key] = data.draw(JSON_VALUES)
        else:
            inner = config.get("text_config")
            if isinstance(inner, dict) and inner:
                inner[data.draw(st.sampled_from(sorted(inner)))] = data.draw(JSON_VALUES)
            else:
                config["text_config"] = data.draw(JSON_VALUES)
    return config


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), data=st.data())
def test_mutated_configs_give_typed_errors_only(name, data):
    config = _mutate(load_config(name), data)
    try:
        s = shape_from_config(config, name=name)
        s.params, s.active_params, s.kv_bytes(1000), s.weight_bytes()
    except ExplorerError:
        pass


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), cut=st.floats(0.0, 1.0))
def test_truncated_config_text_gives_typed_errors_only(name, cut):
    text = (CONFIGS / f"{name}.json").read_text()
    prefix = text[: int(len(text) * cut)]
    try:
        shape_from_config(parse_config_text(prefix), name=name)
    except ExplorerError:
        pass


def test_a_valid_config_still_parses_after_a_round_trip():
    config = load_config("Qwen__Qwen3-8B")
    assert shape_from_config(json.loads(json.dumps(config))).params == 8_190_735_360
