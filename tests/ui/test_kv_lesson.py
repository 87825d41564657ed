"""explorer.ui.kv_lesson: the teaching figures are the shapes' own, with the arithmetic written out."""

from __future__ import annotations

import pytest

from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.kv_lesson import (
    LESSON_MODELS,
    cache_groups,
    kv_curve,
    kv_table,
    total_formula,
)


@pytest.mark.parametrize("kv", ["auto", "fp8", "q8_0"])
@pytest.mark.parametrize("repo", [r for _d, r in LESSON_MODELS])
def test_rows_sum_to_the_shape(repo, kv):
    shape = load_snapshot().shape(repo)
    rows = kv_table(shape, kv, 65536, 3)
    assert sum(r["layers"] for r in rows) == shape.layers
    assert sum(r["bytes a token"] for r in rows) == shape.kv_bytes_per_token(kv)
    assert sum(r["bytes"] for r in rows) == shape.kv_bytes(65536, kv, 3)


def test_formulas_in_numbers():
    snap = load_snapshot()
    llama = snap.shape("meta-llama/Meta-Llama-3.1-8B")
    assert kv_table(llama)[0]["formula"] == "2 × 32 × 8 × 128 × 2 = 131,072 bytes a token"
    assert total_formula(llama) == "131,072 bytes a token"
    assert kv_table(llama, "q8_0")[0]["formula"].startswith("32 × (K 1,088 + V 1,088) bytes = 69,632")
    gemma = snap.shape("google/gemma-2-9b-it")
    assert "keeps only the last 4,096 tokens" in kv_table(gemma)[0]["formula"]
    assert total_formula(gemma) == "172,032 + 172,032 = 344,064 bytes a token (before windows cap it)"
    assert "whatever the context" in kv_table(snap.shape("Qwen/Qwen3-Next-80B-A3B-Thinking"))[0]["formula"]


def test_groups_and_curve():
    nemotron = load_snapshot().shape("nvidia/Nemotron-H-56B-Base-8K")
    assert sorted(c.kind for c, _n in cache_groups(nemotron)) == ["full", "none", "recurrent"]
    rows = kv_curve({"n": nemotron}, [1024, 16384])
    recurrent = [r["gib"] for r in rows if r["kind"] == "recurrent"]
    assert recurrent[0] == recurrent[1]  # a fixed state: flat in context
    assert [r["beyond"] for r in rows if r["kind"] == "full"] == [False, True]  # its limit is 8,192
