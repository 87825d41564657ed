"""The Engine protocol and the registry: every engine is one object, found by name, called the same way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.corpus import ROOT, shape_of

from explorer.engines.interface import Engine, SplitEngine
from explorer.engines.names import ENGINES
from explorer.engines.registry import CPU_ENGINE, ENGINES_BY_NAME, SPLIT_ENGINES, engine_named, engines_named
from explorer.engines.request import PlanRequest
from explorer.errors import PlanError
from explorer.hardware.pools import gpu_pools
from explorer.sources.shipped import parse_cluster

PACKAGE = ROOT / "explorer"


def _members(protocol: type) -> set[str]:
    return {n for n in vars(protocol) if not n.startswith("_")}


def test_every_engine_name_has_one_engine_in_order():
    assert tuple(ENGINES_BY_NAME) == ENGINES
    assert all(engine_named(name).name == name for name in ENGINES)
    assert [e.name for e in engines_named(("llamacpp", "vllm"))] == ["llamacpp", "vllm"]
    assert CPU_ENGINE is ENGINES_BY_NAME["llamacpp"]


@pytest.mark.parametrize("name", ENGINES)
def test_engines_implement_the_protocol(name):
    engine = engine_named(name)
    wanted = _members(Engine) | (_members(SplitEngine) if name in SPLIT_ENGINES else set())
    assert {m for m in wanted if not hasattr(engine, m)} == set()


def test_an_unknown_engine_is_a_typed_error():
    with pytest.raises(PlanError, match="unknown engine 'tgi'.*vllm, sglang, llamacpp"):
        engine_named("tgi")


@pytest.mark.parametrize("name", tuple(SPLIT_ENGINES))
def test_split_engines_lay_out_what_they_decompose(name):
    engine = SPLIT_ENGINES[name]
    shape = shape_of("Qwen__Qwen3-30B-A3B")
    pool = gpu_pools(parse_cluster("2x8xh100-80g@ib0"))[0]
    request = PlanRequest(dp_attention=True)
    splits = list(engine.decompositions(2, 8, request))
    assert all(tp * pp == 16 for tp, pp in splits) and splits[-1] == (1, 16)
    layouts = [engine.make_layout(pool, 2, 8, tp, pp, shape, request) for tp, pp in splits]
    assert all(lay.engine == name and lay.cards == 16 and lay.fabric == "ib0" for lay in layouts)
    assert 0 < engine.usable_share(request) <= 1


def test_sglang_spans_nodes_with_tensor_parallelism_and_vllm_with_a_pipeline():
    request = PlanRequest()
    assert next(SPLIT_ENGINES["sglang"].decompositions(2, 8, request)) == (16, 1)
    assert next(SPLIT_ENGINES["vllm"].decompositions(2, 8, request)) == (8, 2)


def _name_comparisons(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            consts = [c for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in ENGINES]
            out += [f"line {node.lineno}: {c.value!r}" for c in consts]
    return out


@pytest.mark.parametrize(
    "path",
    sorted(path for room in ("plan", "fleet", "speed", "ui") for path in (PACKAGE / room).rglob("*.py")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_plan_fleet_speed_and_ui_never_compare_an_engine_name(path):
    assert _name_comparisons(path) == []
