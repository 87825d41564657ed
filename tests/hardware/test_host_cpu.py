"""Host CPUs: feature levels, the shipped CPU table, and the llama.cpp build each one is sized as."""

from __future__ import annotations

import pytest

from explorer.hardware.host_cpu import DEFAULT_CPU, FEATURE_LEVELS, cpu_from_label
from explorer.sources.shipped import shipped_cpus


@pytest.mark.parametrize(
    ("label", "build"),
    [
        ("avx2", "avx2"),
        ("amx", "amx"),
        ("epyc-9654", "avx512"),  # data/cpus.csv: avx512
        ("xeon-8480", "amx"),  # Sapphire Rapids: amx
        ("i5-12400", "avx2"),
        ("apple-m2-max", "avx2"),  # ARM (neon) offers no x86 level: sized as the reference build
        ("rpi5", "avx2"),
    ],
)
def test_a_named_cpu_is_built_for_its_highest_feature_level(label, build):
    assert cpu_from_label(label, shipped_cpus()).build == build


def test_every_shipped_cpu_has_a_build_llama_cpp_is_modelled_for():
    """Issue 24: ``cpu=NAME`` handed the name itself to llama.cpp's memory model, which knows only the levels."""
    table = shipped_cpus()
    assert len(table) >= 20
    assert {table.get(name).build for name in table.names} <= set(FEATURE_LEVELS)
    assert DEFAULT_CPU.build == "avx2"
