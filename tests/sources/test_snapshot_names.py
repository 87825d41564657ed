"""explorer.sources.snapshot.names: Hub renames and the nearest snapshot ids to an unknown one."""

from __future__ import annotations

import json

import pytest

from explorer.sources.resolve import resolve_config_text, resolve_model
from explorer.sources.snapshot.names import HUB_RENAMES, nearest_ids, snapshot_name
from explorer.sources.snapshot.read import load_snapshot


@pytest.fixture(autouse=True)
def shipped(monkeypatch, tmp_path):
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))


def test_a_rename_is_followed_either_way():
    known = load_snapshot().repos
    assert snapshot_name("meta-llama/Llama-3.1-8B", known) == "meta-llama/Meta-Llama-3.1-8B"
    assert snapshot_name("META-LLAMA/llama-3.1-70b", known) == "meta-llama/Meta-Llama-3.1-70B"  # ids ignore case
    assert snapshot_name("meta-llama/Meta-Llama-3.1-8B", ["meta-llama/Llama-3.1-8B"]) == "meta-llama/Llama-3.1-8B"
    assert snapshot_name("meta-llama/Llama-3.1-8B-Instruct", known) is None  # renamed, but not in the snapshot
    assert all(new != old for new, old in HUB_RENAMES)


def test_offline_the_hubs_new_name_answers_from_the_snapshot():
    m = resolve_model("meta-llama/Llama-3.1-8B", offline=True)
    assert m.origin == "snapshot" and m.repo == "meta-llama/Meta-Llama-3.1-8B"
    assert "the snapshot knows meta-llama/Llama-3.1-8B by another name" in m.notes[0]
    assert m.shape.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2  # the same model: 131,072 bytes a token


def test_nearest_ids():
    known = load_snapshot().repos
    assert nearest_ids("meta-llama/Llama-3.1-8B", known)[0] == "meta-llama/Meta-Llama-3.1-8B"  # the rename first
    assert nearest_ids("Qwen/Qwen3-14B", known, limit=3) == ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B"]
    assert nearest_ids("deepseek-v3", known)[0] == "deepseek-ai/DeepSeek-V3"
    assert nearest_ids("zzzz/qqqq", known) == [] and nearest_ids("  ", known) == []


def test_a_pasted_config_is_planned_like_a_file():
    config = dict(load_snapshot().get("Qwen/Qwen3-8B").config)
    m = resolve_config_text(json.dumps(config))
    assert m.origin == "pasted" and m.shape.params == load_snapshot().shape("Qwen/Qwen3-8B").params
    assert [a.label for a in m.artifacts] == ["original (bf16)"]
    assert m.artifacts[0].size_source == "computed"
