"""The cache's revision index (explorer.sources.cache.index): an offline miss leaves the DuckDB file shut.

Every test gets its own cache file (``EXPLORER_CACHE``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support.hub_fixtures import SINGLE

from explorer.sources.cache import index, store
from explorer.sources.cache.store import Cache
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolve import resolve_model

QUIET = {"progress": lambda *a: None}
HUB = "https://huggingface.co"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(path))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return path


def _settle(path: Path, seconds_ago: float = 60) -> None:
    """Date the file's last write ``seconds_ago``: past the index's settling time."""
    past = time.time() - seconds_ago
    os.utime(path, (past, past))


def _cache_with(path: Path, repo: str, revision: str = "main", endpoint: str = HUB) -> None:
    with Cache.open(path, endpoint=endpoint) as cache:
        cache.put_revision(repo, revision, "a" * 40)


def test_a_read_only_open_of_a_settled_file_indexes_its_revisions(own_cache):
    _cache_with(own_cache, "org/kept", "v2")
    _settle(own_cache)
    Cache.open(own_cache, read_only=True).close()
    assert Path(index.index_path(str(own_cache))).is_file()
    assert index.known_absent(str(own_cache), HUB, "org/other", "main")
    assert index.known_absent(str(own_cache), HUB, "org/kept", "main")  # only its v2 is mapped
    assert not index.known_absent(str(own_cache), HUB, "org/kept", "v2")
    assert index.known_absent(str(own_cache), "https://mirror.example", "org/kept", "v2")  # another endpoint's rows


def test_a_file_written_moments_ago_is_not_indexed(own_cache):
    # a later write within the same clock tick could keep size and mtime: such a file is left unindexed
    _cache_with(own_cache, "org/kept")
    Cache.open(own_cache, read_only=True).close()
    assert not Path(index.index_path(str(own_cache))).exists()
    assert not index.known_absent(str(own_cache), HUB, "org/other", "main")


def test_any_later_write_makes_the_index_stale(own_cache):
    _cache_with(own_cache, "org/kept")
    _settle(own_cache)
    Cache.open(own_cache, read_only=True).close()
    assert index.known_absent(str(own_cache), HUB, "org/new", "main")
    _cache_with(own_cache, "org/new")
    assert not index.known_absent(str(own_cache), HUB, "org/new", "main")  # stale: the file changed
    assert not index.known_absent(str(own_cache), HUB, "org/other", "main")  # nor trusted for anything else


def test_an_unreadable_index_says_nothing(own_cache):
    _cache_with(own_cache, "org/kept")
    _settle(own_cache)
    Cache.open(own_cache, read_only=True).close()
    Path(index.index_path(str(own_cache))).write_text("{not json")
    assert not index.known_absent(str(own_cache), HUB, "org/other", "main")


def test_offline_a_miss_the_index_knows_does_not_open_the_cache(own_cache, monkeypatch):
    _cache_with(own_cache, "org/kept")
    _settle(own_cache)
    first = resolve_model("Qwen/Qwen3-8B", offline=True, **QUIET)  # opens the file and writes the index
    assert first.origin == "snapshot"

    def refuse(*args, **kwargs):
        raise AssertionError("the cache file was opened")

    monkeypatch.setattr(store, "open_default_cache", refuse)  # what the resolver opens the cache with
    again = resolve_model("Qwen/Qwen3-8B", offline=True, **QUIET)
    assert again.origin == "snapshot" and again.notes == first.notes and again.shape == first.shape


def test_offline_a_repo_the_cache_holds_is_still_answered_from_it(hub_endpoint, own_cache):
    online = resolve_model(SINGLE, **QUIET)  # a first read: the fake Hub's answers go to the journal
    Cache.open(own_cache, endpoint=hub_endpoint).close()  # replays them into the file
    _settle(own_cache)
    Cache.open(own_cache, read_only=True, endpoint=hub_endpoint).close()
    settings = HubSettings.resolve(endpoint=hub_endpoint, offline=True)
    offline = resolve_model(SINGLE, settings=settings, **QUIET)
    assert Path(index.index_path(str(own_cache))).is_file()
    assert (online.origin, offline.origin) == ("hub", "cache")
    assert offline.sha == online.sha and offline.shape.params == online.shape.params == 106_816


def test_a_journal_beside_the_file_makes_the_index_say_nothing(own_cache):
    """Writes waiting in the journal (explorer.sources.cache.journal) are not in the file the index describes."""
    _cache_with(own_cache, "org/kept")
    _settle(own_cache)
    Cache.open(own_cache, read_only=True).close()
    assert index.known_absent(str(own_cache), HUB, "org/new", "main")
    with Cache.journal(own_cache) as first_read:
        first_read.put_revision("org/new", "main", "b" * 40)
    assert not index.known_absent(str(own_cache), HUB, "org/new", "main")
