"""Every model explorer knows offline: the snapshot's, and the cache's others, read-only."""

from __future__ import annotations

import os

import pytest
from support.hub_fixtures import SHARDED, SINGLE

from explorer.sources.hub.settings import HubSettings
from explorer.sources.known_models import known_models
from explorer.sources.resolve import resolve_model
from explorer.sources.snapshot.read import load_snapshot


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    path = tmp_path / "cache.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(path))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return path


def test_without_a_cache_file_only_the_snapshot_and_no_file_is_made(own_cache):
    known = known_models()
    assert [m.ref for m in known.models] == list(load_snapshot().repos)
    assert known.cache_path is None and not os.path.exists(own_cache)
    assert all(m.origin == "snapshot" and m.artifacts for m in known.models)


def test_a_model_fetched_once_is_listed_from_the_cache(new_hub_server, own_cache, monkeypatch):
    server = new_hub_server()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)  # the cache is keyed by endpoint: listed under the same one
    resolve_model(SHARDED, settings=HubSettings.resolve(), progress=lambda *a: None)  # a first read: the journal
    server.stop()
    assert [m.ref for m in known_models().models if m.origin == "cache"] == [SHARDED]  # replays it into the file
    before = os.path.getmtime(own_cache)
    known = known_models()
    cached = [m for m in known.models if m.origin == "cache"]
    assert [m.ref for m in cached] == [SHARDED] and cached[0].shape.params == 106_816
    assert known.cache_path == str(own_cache) and os.path.getmtime(own_cache) == before  # read, never written
    assert [m.ref for m in known_models(use_cache=False).models] == list(load_snapshot().repos)


def test_another_endpoints_rows_are_not_listed(new_hub_server, own_cache, monkeypatch):
    """A model fetched from a mirror is not a model of the Hub: ``fit`` under another HF_ENDPOINT lists none."""
    server = new_hub_server()
    resolve_model(SHARDED, settings=HubSettings.resolve(endpoint=server.endpoint), progress=lambda *a: None)
    server.stop()
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example.org")
    known = known_models()
    assert known.cache_path == str(own_cache) and not [m for m in known.models if m.origin == "cache"]
    assert not known.skipped


def test_visitors_list_the_operators_chosen_models_and_nothing_else_of_the_cache(
    new_hub_server, own_cache, monkeypatch
):
    # the published app's list (issue 25): the snapshot, then the operator's EXPLORER_PUBLISHED_MODELS found in
    # the cache; what any visitor fetched into the same cache (SINGLE here) stays out of it
    server = new_hub_server()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    for repo in (SHARDED, SINGLE):
        resolve_model(repo, settings=HubSettings.resolve(), progress=lambda *a: None)
    server.stop()
    snapshot_first = load_snapshot().repos[0]
    known = known_models(use_cache=False, chosen=[SHARDED, "org/never-fetched", snapshot_first])
    chosen = [m for m in known.models if m.origin == "chosen"]
    assert [m.ref for m in chosen] == [SHARDED] and chosen[0].shape.params == 106_816
    assert SINGLE not in {m.ref for m in known.models}
    assert len(known.models) == len(load_snapshot().repos) + 1  # the snapshot's own repo is not listed twice
    assert [s.split(":")[0] for s in known.skipped] == ["org/never-fetched"]


def test_chosen_models_without_a_cache_file_are_skipped_with_a_note(own_cache):
    known = known_models(use_cache=False, chosen=["org/a"])
    assert known.skipped == ("org/a: not in the cache (fetch it once on this machine)",)
    assert not os.path.exists(own_cache)  # listing never creates the cache
