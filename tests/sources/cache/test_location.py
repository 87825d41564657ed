"""What is known of the default cache without opening it (explorer.sources.cache.location)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from explorer.errors import OfflineMissError
from explorer.sources.cache import journal, store
from explorer.sources.cache.location import absent_cache_path, default_cache_path, indexed_miss
from explorer.sources.cache.store import Cache
from explorer.sources.resolve import resolve_model

HUB = "https://huggingface.co"


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "folder" / "cache.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(path))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return path


def _refuse(*args, **kwargs):
    raise AssertionError("the cache file was opened")


def test_the_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("EXPLORER_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == str(tmp_path / "xdg" / "explorer" / "cache.duckdb")
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "mine.duckdb"))
    assert default_cache_path() == str(tmp_path / "mine.duckdb")


def test_a_cache_is_absent_until_its_file_or_its_journal_exists(own_cache):
    assert absent_cache_path() == str(own_cache)
    own_cache.parent.mkdir()
    Path(journal.journal_path(str(own_cache))).write_text("")  # a first read's writes wait beside it
    assert absent_cache_path() is None
    os.unlink(journal.journal_path(str(own_cache)))
    Cache.open(own_cache).close()
    assert absent_cache_path() is None


def test_a_cache_in_memory_is_never_absent(monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", ":memory:")
    assert absent_cache_path() is None
    assert indexed_miss(HUB, "org/name", "main") is None


def test_an_indexed_miss_needs_a_current_index_and_a_branch_or_tag(own_cache):
    own_cache.parent.mkdir()
    with Cache.open(own_cache) as cache:
        cache.put_revision("org/kept", "main", "a" * 40)
    assert indexed_miss(HUB, "org/other", "main") is None  # no index yet: it cannot say
    past = time.time() - 60  # past the index's settling time
    os.utime(own_cache, (past, past))
    Cache.open(own_cache, read_only=True).close()  # writes the index
    assert indexed_miss(HUB + "/", "org/other", None) == str(own_cache)  # None is main; the endpoint's slash
    assert indexed_miss(HUB, "org/kept", "main") is None  # mapped: the cache may answer
    assert indexed_miss(HUB, "org/other", "b" * 40) is None  # a sha: its rows, which the index does not list


def test_offline_with_no_cache_the_resolver_opens_none_and_a_miss_names_its_path(own_cache, monkeypatch):
    monkeypatch.setattr(store, "open_default_cache", _refuse)
    got = resolve_model("Qwen/Qwen3-8B", offline=True)
    assert got.origin == "snapshot" and got.repo == "Qwen/Qwen3-8B"
    with pytest.raises(OfflineMissError, match=re.escape(f"neither the cache ({own_cache}) nor the shipped snapshot")):
        resolve_model("no-such/model-xyz", offline=True)
    assert not own_cache.parent.exists()  # nothing made on the way
