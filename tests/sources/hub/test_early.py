"""explorer.sources.hub.early: a cold read started before the command's imports, against the test Hub.

Nothing of explorer is mocked: the reads go to ``hubserver``, which logs them; the cache is a real path.
"""

from __future__ import annotations

import pytest
from support.hub_fixtures import SHARDED, SINGLE

from explorer.errors import RepoNotFoundError
from explorer.sources.hub import early
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolve import resolve_model


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield tmp_path / "cache.duckdb"
    early._started.clear()  # a read a test left untaken must not answer another test


def _paths(server) -> list[str]:
    return [path for _, path, _, _ in server.stats.log]


@pytest.mark.parametrize(
    ("repo", "files"),
    [
        # the listing, config.json and the single file's header
        (SINGLE, ["config.json", "llama-tiny-single", "model.safetensors"]),
        # the listing, config.json, the index and each of the 3 shards' headers
        (
            SHARDED,
            [
                "config.json",
                "llama-tiny-sharded",
                "model-00001-of-00003.safetensors",
                "model-00002-of-00003.safetensors",
                "model-00003-of-00003.safetensors",
                "model.safetensors.index.json",
            ],
        ),
    ],
)
def test_a_cold_read_is_read_once_early_and_taken_by_the_resolver(new_hub_server, own_cache, repo, files):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint)
    assert early.start_cold_read(repo, settings=settings)
    model = resolve_model(repo, settings=settings)
    assert model.origin == "hub" and model.shape.layers == 2
    # each request once, as a read made in place
    assert sorted(p.rsplit("/", 1)[-1] for p in _paths(server)) == files
    assert early._started == {}  # taken
    # the cache's behaviour holds: the first read wrote the journal, and the next read is answered from it
    assert own_cache.with_name(own_cache.name + ".journal").is_file()
    server.stop()
    assert resolve_model(repo, settings=settings).origin == "cache"


@pytest.mark.parametrize(
    ("text", "offline", "revision"),
    [
        (SINGLE, True, None),  # offline: never ask
        ("./no/such/config.json", False, None),  # a path
        (f"{SINGLE}@main", False, "other"),  # two revisions: the resolver's error to give
        ("not a repo id!", False, None),  # the resolver's error to give
    ],
)
def test_no_read_starts_where_the_resolver_would_not_ask_the_hub(new_hub_server, text, offline, revision):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint, offline=offline)
    assert not early.start_cold_read(text, settings=settings, revision=revision)
    assert early._started == {} and server.stats.log == []


def test_no_read_starts_when_the_cache_may_answer(new_hub_server, own_cache):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint)
    resolve_model(SINGLE, settings=settings)  # a first read: the journal is there now
    server.reset_stats()
    assert not early.start_cold_read(SINGLE, settings=settings)
    assert resolve_model(SINGLE, settings=settings).origin == "cache" and server.stats.log == []


def test_the_early_error_is_the_resolvers_and_another_key_reads_in_place(new_hub_server):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint)
    assert early.start_cold_read("fake-org/no-such-model", settings=settings)
    with pytest.raises(RepoNotFoundError):
        resolve_model("fake-org/no-such-model", settings=settings)
    assert early.start_cold_read(SINGLE, settings=settings)
    assert early.take_basics(SINGLE, "main", settings) is None  # another revision: not this read
    listing, configs, params = early.take_basics(SINGLE, None, settings)
    assert listing.repo_id == SINGLE and "config.json" in configs and params.total_params == 106_816
    assert early.take_basics(SINGLE, None, settings) is None  # taken once
