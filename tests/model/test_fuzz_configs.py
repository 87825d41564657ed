"""Fuzz: mutants of the real config.json corpus, from their text to a ranked plan.

Each case takes a real config from ``tests/data/configs`` and changes one to
three things: a number anywhere in it (nested ``text_config`` and
``rope_scaling`` included) to a boundary integer, NaN, an infinity, a
fraction, a string, a list, an object or null; a key deleted; a count that
drives allocation set (layers, experts, heads, vocabulary, context,
``layer_types``); ``rope_scaling`` with a NaN or giant factor; a value nested
thousands of levels deep. The mutant is written out as JSON text and goes
through ``parse_config_text``, ``shape_from_config``, the shape's summary and,
on every twentieth case, a plan with all three engines and speed. Each case
must end in a typed error or figures that are all finite and ≥ 0, quickly.
"""

from __future__ import annotations

import json
import math
import time
import tracemalloc
from functools import partial

import pytest
from support.corpus import all_config_names, load_config
from support.fuzz import FLOATS, INTS, STRINGS, Tally, bad_figures, bounded_memory, cases, rng

from explorer.engines.request import PlanRequest
from explorer.errors import ConfigError
from explorer.model.config_reader import parse_config_text
from explorer.model.shapes import shape_from_config
from explorer.model.summary import shape_summary
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster

NAMES = all_config_names()
CLUSTER = parse_cluster("1x2xh100-80g")
#: counts that size lists and loops, set on the config or its text_config
DRIVERS = (
    "num_hidden_layers", "num_experts", "n_routed_experts", "num_local_experts", "num_experts_per_tok",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size", "intermediate_size", "vocab_size",
    "max_position_embeddings", "sliding_window", "moe_intermediate_size", "kv_lora_rank", "q_lora_rank",
    "first_k_dense_replace", "num_nextn_predict_layers", "full_attention_interval", "sliding_window_pattern",
)  # fmt: skip
DEEP = "__DEEP__"


def numeric_paths(value, path=()) -> list[tuple]:
    """Every path to a number (bools excluded) inside a config."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += numeric_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:16]):
            out += numeric_paths(v, (*path, i))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out.append(path)
    return out


def set_path(config, path, value) -> None:
    node = config
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value


def mutant(r):
    kind = r.choice(("int", "int", "int", "float", "float", "str", "list", "dict", "null", "whole-float"))
    return {
        "int": lambda: r.choice(INTS),
        "float": lambda: r.choice(FLOATS),
        "str": lambda: r.choice(STRINGS),
        "list": lambda: [r.choice(INTS)] * r.choice((0, 1, 3, 5000)),
        "dict": lambda: {"a": r.choice(INTS)},
        "null": lambda: None,
        "whole-float": lambda: float(r.choice((32, 4096, 1e20, -8))),
    }[kind]()


def mutate(r) -> tuple[str, str]:
    """(what was changed, the mutant's JSON text)."""
    name = r.choice(NAMES)
    config = load_config(name)
    target = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    changes, deep = [], 0
    for _ in range(r.choice((1, 1, 2, 3))):
        what = r.random()
        paths = numeric_paths(config)
        if what < 0.45 and paths:
            path = r.choice(paths)
            value = mutant(r)
            set_path(config, path, value)
            changes.append(f"{'.'.join(map(str, path))}={str(value)[:30]}")
        elif what < 0.75:
            key, value = r.choice(DRIVERS), mutant(r)
            target[key] = value
            changes.append(f"{key}={str(value)[:30]}")
        elif what < 0.82:
            factor = r.choice(FLOATS + (40.0, 1e30))
            target["rope_scaling"] = {
                "rope_type": "yarn",
                "factor": factor,
                "original_max_position_embeddings": r.choice(INTS),
            }
            changes.append(f"yarn ×{factor}")
        elif what < 0.88:
            layers = r.choice((0, 1, 7, 5000))
            target["layer_types"] = [
                r.choice(("full_attention", "sliding_attention", "linear_attention", "x"))
            ] * layers
            changes.append(f"{layers} layer_types")
        elif what < 0.94 and target:
            key = r.choice(sorted(target))
            del target[key]
            changes.append(f"del {key}")
        else:
            target[r.choice(DRIVERS)] = DEEP
            deep = r.choice((65, 1000, 100_000))
            changes.append(f"nested {deep} deep")
    text = json.dumps(config, allow_nan=True)
    if deep:
        text = text.replace(json.dumps(DEEP), "[" * deep + "]" * deep)
    return f"{name}: {', '.join(changes)}", text


def run_case(text: str, with_plan: bool) -> dict:
    config = parse_config_text(text, where="fuzz config.json")
    shape = shape_from_config(config, name="fuzz")
    out = {"summary": shape_summary(shape, context_tokens=4096)}
    if with_plan:
        out["plan"] = plan(shape, CLUSTER, PlanRequest(context_tokens=4096)).to_dict()
    return out


def test_every_corpus_config_still_plans():
    for name in NAMES:
        out = run_case(json.dumps(load_config(name), allow_nan=True), with_plan=False)
        assert not bad_figures(out), name


def test_config_mutants_end_in_typed_errors_or_sane_figures():
    r, tally = rng("config-mutants"), Tally("config.json mutants")
    with bounded_memory():
        for i in range(cases(600)):
            describe, text = mutate(r)
            tally.run(f"case {i}: {describe}", partial(run_case, text, with_plan=i % 20 == 0), bad_figures)
    print(tally.report())
    assert not tally.failures, tally.report()
    assert tally.results > tally.runs // 10 and sum(tally.typed.values()) > tally.runs // 10


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("num_hidden_layers", 10**7, "plausible maximum of 1,024"),
        ("num_hidden_layers", 2**40, "plausible maximum"),
        ("num_local_experts", 10**9, "plausible maximum of 16,384"),
        ("vocab_size", 2**40, "plausible maximum"),
        ("num_key_value_heads", -8, "must be ≥"),
        ("rope_scaling", {"rope_type": "yarn", "factor": math.nan, "original_max_position_embeddings": 8192},
         "finite number"),
        ("rope_scaling", {"rope_type": "yarn", "factor": 1e30, "original_max_position_embeddings": 8192},
         "plausible maximum"),
    ],
)  # fmt: skip
def test_giant_counts_and_nan_factors_are_refused_before_anything_is_built(key, value, says):
    config = load_config("mistralai__Mixtral-8x7B-v0.1")
    config[key] = value
    text = json.dumps(config, allow_nan=True)
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=says):
        run_case(text, with_plan=True)
    elapsed, peak = time.perf_counter() - t0, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 2 and peak < 8 * 2**20, (elapsed, peak)  # was 62 s and 954 MiB for 10^7 layers


def test_a_config_nested_past_the_limit_is_a_typed_error():
    with pytest.raises(ConfigError, match="nests deeper than 64"):
        parse_config_text('{"hidden_size": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match="nests deeper than 64"):
        parse_config_text('{"a": ' + "[" * 65 + "]" * 65 + "}")
    assert parse_config_text('{"a": ' + "[" * 60 + "]" * 60 + "}")["a"]  # deep, but within the limit


@pytest.mark.parametrize("block", [[128, "granitehybrid"], [{"a": 2**31}, 128], [1e-300, 128], [0, 128], [2**62, 1]])
def test_a_quantisation_block_that_is_not_two_whole_numbers_is_a_typed_error(config, block):
    # issue 25: quantization_config bypassed the typed getters: int("granitehybrid") was a ValueError, int({…})
    # a TypeError, a block of 1e-300 (int 0) a ZeroDivisionError
    raw = config("RedHatAI__DeepSeek-V4-Flash-NVFP4-FP8")
    raw["quantization_config"]["config_groups"]["group_0"]["weights"]["block_structure"] = block
    with pytest.raises(ConfigError, match=r"block_structure\[[01]\]"):
        run_case(json.dumps(raw), with_plan=False)


@pytest.mark.parametrize(("value", "says"), [(math.inf, "mlp_ratio is inf"), (1e300, "past the plausible maximum")])
def test_a_vision_mlp_ratio_past_any_width_is_a_typed_error(config, value, says):
    # issue 25: vision_config.mlp_ratio = inf was an OverflowError (int(hidden * inf)), seed 28 case 9670
    raw = config("allenai__olmOCR-7B-0225-preview")
    raw["vision_config"]["mlp_ratio"] = value
    raw["vision_config"].pop("intermediate_size", None)
    with pytest.raises(ConfigError, match=says):
        run_case(json.dumps(raw, allow_nan=True), with_plan=False)


@pytest.mark.parametrize(
    ("value", "says"), [(math.inf, "group_size must be a whole number"), ("128", "must be a number")]
)
def test_a_gptq_group_size_that_is_no_whole_number_is_a_typed_error(config, value, says):
    # config fuzz seed 30 case 14426: quantization_config.group_size = inf was an OverflowError
    raw = config("TheBloke__Llama-2-13B-chat-GPTQ")
    raw["quantization_config"]["group_size"] = value
    with pytest.raises(ConfigError, match=says):
        run_case(json.dumps(raw, allow_nan=True), with_plan=False)
