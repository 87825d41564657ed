"""explorer.ui.presets: every preset parses, and the ones the app names are what they say."""

from __future__ import annotations

import pytest

from explorer.sources.shipped import parse_cluster
from explorer.ui.cluster_form import first_gpu_term
from explorer.ui.presets import DEFAULT_PRESET, PRESETS, preset_by_name


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_every_preset_parses(preset):
    cluster = parse_cluster(preset.spec)
    assert cluster.total_gpus >= 1
    assert preset.description.endswith(".")


def test_the_presets_the_issue_names():
    specs = {p.name: parse_cluster(p.spec) for p in PRESETS}
    assert specs["One RTX 4090"].total_gpus == 1
    assert specs["Two 8×H100 nodes over InfiniBand"].pools()  # one fabric: a replica may span both
    assert {n.fabric for n in specs["Two 8×H100 nodes over InfiniBand"].nodes} == {"ib0"}
    assert all(g.gpu.is_mig for n in specs["A100 MIG box"].nodes for g in n.gpus)
    assert specs["Mac with 128 GB unified memory"].unified_nodes
    assert specs["Eight 8×H100 nodes (64 GPUs)"].total_gpus == 64
    assert specs["1,000 H100 (125 nodes)"].total_gpus == 125 * 8 == 1000
    mixed = specs["A mixed fleet"]
    assert len(mixed.gpu_classes) >= 3 and mixed.cpu_nodes


def test_lookup_by_name():
    assert preset_by_name("A mixed fleet").spec.startswith("2x8xh100-80g@ib0 + ")
    assert preset_by_name("no such preset") is DEFAULT_PRESET
    assert first_gpu_term(DEFAULT_PRESET.spec).gpus_per_node == 8  # the controls read the spec itself
