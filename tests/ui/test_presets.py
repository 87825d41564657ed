"""explorer.ui.presets: every preset parses, and the controls compose specs the parser reads."""

from __future__ import annotations

import pytest

from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.ui.presets import (
    DEFAULT_PRESET,
    PRESETS,
    AppDefaults,
    app_defaults,
    compose_spec,
    preset_by_name,
    preset_from_spec,
    spec_for,
)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_every_preset_parses_and_its_controls_match(preset):
    cluster = parse_cluster(preset.spec)
    assert cluster.total_gpus >= 1
    assert preset.gpu_class in shipped_catalogue()
    assert spec_for(preset, *preset.controls) == preset.spec  # untouched controls keep the preset's spec


def test_the_presets_the_issue_names():
    specs = {p.name: parse_cluster(p.spec) for p in PRESETS}
    assert specs["One RTX 4090"].total_gpus == 1
    assert specs["Two 8×H100 nodes over InfiniBand"].pools()  # one fabric: a replica may span both
    assert {n.fabric for n in specs["Two 8×H100 nodes over InfiniBand"].nodes} == {"ib0"}
    assert all(g.gpu.is_mig for n in specs["A100 MIG box"].nodes for g in n.gpus)
    assert specs["Mac with 128 GB unified memory"].unified_nodes
    assert specs["Eight 8×H100 nodes (64 GPUs)"].total_gpus == 64
    mixed = specs["A mixed fleet"]
    assert len(mixed.gpu_classes) >= 3 and mixed.cpu_nodes


def test_compose_spec():
    assert compose_spec(1, 8, "h100-80g") == "1x8xh100-80g"
    assert compose_spec(2, 8, "h100-80g") == "2x8xh100-80g@ib0"
    assert compose_spec(2, 4, "l40s-48g", 0.75, fabric=None) == "2x4xl40s-48g,free=0.75"
    assert parse_cluster(compose_spec(3, 4, "a100-80g", 0.5)).total_gpus == 12


def test_moving_a_control_composes_a_new_spec():
    mixed = preset_by_name("A mixed fleet")
    assert spec_for(mixed, 3, 8, "h100-80g") == "3x8xh100-80g@ib0"
    assert preset_by_name("no such preset") is DEFAULT_PRESET


def test_preset_from_a_linked_spec():
    p = preset_from_spec("2x8xh100-80g@ib0 + 1x4xl40s-48g")
    assert (p.nodes, p.gpus_per_node, p.gpu_class, p.fabric) == (2, 8, "h100-80g", "ib0")
    assert spec_for(p, *p.controls) == "2x8xh100-80g@ib0 + 1x4xl40s-48g"
    assert preset_from_spec("1xcpu-256g").spec == "1xcpu-256g"


def test_defaults_from_a_link():
    d = app_defaults(
        {"model": "Qwen/Qwen3-8B", "context": "16384"},
        {"cluster": ["2x8xh100-80g@ib0"], "engine": "vllm", "concurrency": "x"},
    )
    assert (d.model, d.context_tokens, d.spec, d.engine, d.concurrency) == (
        "Qwen/Qwen3-8B",
        16384,
        "2x8xh100-80g@ib0",
        "vLLM",
        1,
    )
    assert app_defaults({}) == AppDefaults()
