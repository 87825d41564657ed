"""explorer.sources.resolve: local files, then the cache, the Hub and the snapshot, against a real HTTP server.

The Hub is ``tests/support/hubserver.py`` on 127.0.0.1; nothing of explorer is mocked.
Every test gets its own cache file (``EXPLORER_CACHE``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.gguf_factory import VT, Typed, llama_like, llama_metadata
from support.hub_fixtures import (
    GATED,
    GATED_TOKEN,
    GGUF,
    GGUF_FILES,
    NOTHING,
    SHARDED,
    SINGLE,
    TINY,
    config_fixture,
    llama_tensors,
    make_repo,
    write_gguf,
    write_safetensors,
)

from explorer.errors import (
    ConfigError,
    GatedRepoError,
    GGUFLimitError,
    GGUFSplitError,
    HubError,
    HubTimeoutError,
    NothingToPlanError,
    OfflineMissError,
    RepoNotFoundError,
)
from explorer.sources.cache.store import Cache
from explorer.sources.facts import facts_from_cache
from explorer.sources.gguf_files import (
    header_from_record,
    header_record,
    read_header_file,
    read_local_set,
)
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolve import load_model, load_shape, resolve_model

QUIET = {"progress": lambda *a: None}
SPLIT_REPO = "tmp-org/split-GGUF"
SPLIT_NAMES = ("m-Q4_K_M-00001-of-00002.gguf", "m-Q4_K_M-00002-of-00002.gguf")
#: the tiny config the standard tree serves for SINGLE
TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
    "torch_dtype": "bfloat16",
}  # fmt: skip


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch) -> Path:
    """A fresh cache file per test, and the shipped snapshot."""
    path = tmp_path / "cache.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(path))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return path


def write_split_set(folder: Path, *, file_size: int = 64 << 20) -> list[int]:
    """A real 2-part split set (distinct tensors per part) and a projector; returns the header sizes."""
    tensors = llama_like()
    sizes = []
    for i, (name, chunk) in enumerate(zip(SPLIT_NAMES, (tensors[:10], tensors[10:]), strict=True)):
        keys = {"split.no": Typed(i, VT.UINT16), "split.count": Typed(2, VT.UINT16)}
        md = llama_metadata(**keys) if i == 0 else {"general.architecture": "llama", **keys}
        sizes.append(write_gguf(folder / name, md, chunk, file_size=file_size)[0])
    write_gguf(folder / "mmproj-m-f16.gguf", {"general.architecture": "clip"}, [("v.w", (32, 32), 1)])
    return sizes


# --- local files ------------------------------------------------------------------------------


def test_local_config_folder_offers_its_weight_files(tmp_path):
    folder = make_repo(tmp_path, "tiny", {"config.json": config_fixture("meta-llama__Llama-3.2-1B")})
    size = write_safetensors(folder / "model.safetensors", llama_tensors(**TINY))
    got = resolve_model(str(folder))
    assert got.origin == "file" and got.repo is None and got.shape.params == 1_235_814_400
    (original,) = got.artifacts
    assert (original.size_bytes, original.size_source, original.files) == (size, "fetched", ("model.safetensors",))
    assert load_shape(str(folder)).params == got.shape.params  # the plain path still works


def test_local_gguf_reads_only_the_header(tmp_path):
    header_bytes, size = write_gguf(
        tmp_path / "tiny-Q4_K_M.gguf", llama_metadata(vocab=200_000), llama_like(), file_size=1 << 30
    )
    header, read = read_header_file(tmp_path / "tiny-Q4_K_M.gguf", first_read=64 * 1024)
    assert header.header_bytes == header_bytes and header_bytes < read < size / 100  # grown, not the whole file
    got = load_model(str(tmp_path / "tiny-Q4_K_M.gguf"))
    assert got.origin == "file" and got.selected.quant == "Q4_K_M" and got.selected.size_bytes == size
    assert got.selected.gguf_header is not None and got.shape.params == header.parameter_count


def test_local_split_set_is_found_from_any_part_and_merged(tmp_path):
    write_split_set(tmp_path)
    header, parts, _ = read_local_set(tmp_path / SPLIT_NAMES[1])
    assert [p.name for p in parts] == list(SPLIT_NAMES) and len(header.tensors) == len(llama_like())
    got = resolve_model(str(tmp_path / SPLIT_NAMES[1]))
    (a,) = got.artifacts
    assert a.files == SPLIT_NAMES and a.size_bytes == 2 * (64 << 20) and a.projector == "mmproj-m-f16.gguf"
    (tmp_path / SPLIT_NAMES[1]).unlink()
    with pytest.raises(GGUFSplitError, match=SPLIT_NAMES[1]):
        resolve_model(str(tmp_path / SPLIT_NAMES[0]))


def test_gguf_header_survives_the_cache_record(tmp_path):
    write_split_set(tmp_path)
    header, _ = read_header_file(tmp_path / SPLIT_NAMES[0])
    with Cache.open(tmp_path / "c.duckdb") as cache:
        cache.put_gguf_header("o/r", "f" * 40, "x.gguf", header_record(header, file_size_bytes=64 << 20))
        back = header_from_record(cache.get_gguf_header("o/r", "f" * 40, "x.gguf"), name=header.name)
    assert back == header  # token arrays (summaries), long int arrays, tensors: all round-trip


# --- the Hub and the cache ----------------------------------------------------------------------


def test_hub_then_cache_with_the_server_stopped(new_hub_server, own_cache):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint, timeout_s=2)
    first = resolve_model(SHARDED, settings=settings, **QUIET)
    assert first.origin == "hub" and first.shape.params == 106_816 and len(first.sha) == 40
    (original,) = first.artifacts
    assert (
        original.size_source == "fetched"
        and len(original.files) == 3
        and dict(original.params_by_dtype) == {"BF16": 106_816}
    )
    server.stop()
    asked = server.stats.total_requests()
    again = resolve_model(SHARDED, settings=settings, **QUIET)
    assert server.stats.total_requests() == asked  # not a single request
    assert again.origin == "cache" and again.sha == first.sha and again.artifacts == first.artifacts
    assert resolve_model(f"{SHARDED}@{first.sha}", settings=settings, **QUIET).origin == "cache"


def test_branch_mapping_expires_but_a_pinned_sha_does_not(new_hub_server, own_cache):
    server = new_hub_server()
    sha = resolve_model(SINGLE, settings=HubSettings.resolve(endpoint=server.endpoint), **QUIET).sha
    server.set_slow(3)  # the Hub stops answering in time
    settings = HubSettings.resolve(endpoint=server.endpoint, timeout_s=1)
    with Cache.open(own_cache, ttl_s=0, clock=lambda: time.time() + 7200, endpoint=server.endpoint) as old:
        # main's mapping is past its TTL and the Hub cannot answer: the entry answers, marked stale
        stale = resolve_model(SINGLE, settings=settings, cache=old, **QUIET)
        assert stale.origin == "cache" and stale.stale and stale.sha == sha
        assert any(n.startswith("stale: the Hub failed (HubTimeoutError") and "2.0 h ago" in n for n in stale.notes)
        pinned = resolve_model(SINGLE, revision=sha, settings=settings, cache=old, **QUIET)
        assert pinned.origin == "cache" and not pinned.stale
    with pytest.raises(HubTimeoutError):  # another endpoint's rows are not this one's: a miss, then no snapshot
        resolve_model(
            SINGLE,
            settings=HubSettings.resolve(endpoint=server.endpoint.replace("127.0.0.1", "localhost"), timeout_s=1),
            **QUIET,
        )
    # offline, with the cache opened by the resolver: a mapping of any age answers
    offline = resolve_model(SINGLE, offline=True, settings=settings, **QUIET)
    assert offline.origin == "cache" and not offline.stale


def test_gguf_repo_reads_under_one_percent_and_caches_headers(new_hub_server):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint, timeout_s=5)
    got = resolve_model(GGUF, settings=settings, **QUIET)
    assert got.origin == "hub" and got.shape.params > 0
    names = {a.name for a in got.artifacts}
    assert names == {"tiny-Q4_K_M.gguf", "big-vocab-Q8_0.gguf", "split-00001-of-00002.gguf"}
    for name in names:  # only the header bytes moved
        moved, size = server.stats.total_bytes(name), GGUF_FILES[name][1]
        assert 0 < moved < size / 100, f"{name}: {moved:,} of {size:,} bytes"
    split = next(a for a in got.artifacts if a.name.startswith("split"))
    assert split.size_bytes == 2 * GGUF_FILES["split-00001-of-00002.gguf"][1] and split.gguf_header is None
    assert server.stats.total_requests("split-00002") == 0  # only first parts when no file is named
    server.stop()
    assert resolve_model(f"{GGUF}:tiny-Q4_K_M.gguf", settings=settings, **QUIET).origin == "cache"


def test_named_split_file_reads_every_part(tmp_path, new_hub_server):
    write_split_set(tmp_path / SPLIT_REPO)
    server = new_hub_server(tmp_path)
    got = load_model(f"{SPLIT_REPO}:{SPLIT_NAMES[0]}", settings=HubSettings.resolve(endpoint=server.endpoint), **QUIET)
    chosen = got.selected
    assert chosen is got.artifacts[0] and chosen.files == SPLIT_NAMES and chosen.projector == "mmproj-m-f16.gguf"
    assert len(chosen.gguf_header.tensors) == len(llama_like())
    assert got.shape.params == chosen.gguf_header.parameter_count
    assert all(server.stats.total_requests(n) == 1 for n in SPLIT_NAMES)
    with pytest.raises(HubError, match="no GGUF model file nope.gguf") as e:
        load_model(f"{SPLIT_REPO}:nope.gguf", settings=HubSettings.resolve(endpoint=server.endpoint), **QUIET)
    assert SPLIT_NAMES[0] in str(e.value)


def test_gated_repo_needs_the_token_which_goes_nowhere(hub_endpoint, own_cache, tmp_path):
    with pytest.raises(GatedRepoError, match="--token") as e:
        resolve_model(GATED, **QUIET)
    assert "HF_TOKEN" in str(e.value)
    got = resolve_model(GATED, token=GATED_TOKEN, **QUIET)
    assert got.origin == "hub" and got.shape.params == 8_030_261_248
    assert got.artifacts[0].size_source == "fetched" and got.artifacts[0].params_by_dtype["BF16"] == 8_030_261_248
    with Cache.open(own_cache) as cache:
        export = cache.export(tmp_path / "export.json").read_text()
    texts = [repr(got), str(got.notes), json.dumps(got.summary()), export, str(e.value)]
    assert not [t for t in texts if GATED_TOKEN in t]
    assert GATED_TOKEN.encode() not in own_cache.read_bytes()


def test_slow_hub_times_out_cleanly_and_a_snapshot_entry_answers(new_hub_server):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint, timeout_s=0.5)
    with server.slow(3, "/api/"):
        t0 = time.monotonic()
        with pytest.raises(HubTimeoutError, match="0.5 s"):
            resolve_model(SINGLE, settings=settings, **QUIET)  # in no snapshot: the error itself
        fallback = resolve_model(GATED, settings=settings, **QUIET)  # Meta-Llama-3.1-8B is in the snapshot
        assert time.monotonic() - t0 < 3
    assert fallback.origin == "snapshot" and "HubTimeoutError" in fallback.notes[0]
    assert fallback.shape.params == 8_030_261_248


def test_offline_answers_from_the_snapshot_or_says_it_cannot(new_hub_server):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint, offline=True)
    got = resolve_model("Qwen/Qwen3-8B", settings=settings, **QUIET)
    assert got.origin == "snapshot" and got.sha is None and got.artifacts[0].size_source == "computed"
    gguf = resolve_model("Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q4_K_M.gguf", offline=True, **QUIET)
    assert gguf.selected.quant == "Q4_K_M" and gguf.shape.params == got.shape.params
    for text in (SINGLE, "Qwen/Qwen3-8B@v2", "Qwen/Qwen3-8B-GGUF:nope.gguf"):
        with pytest.raises(OfflineMissError, match="neither"):
            resolve_model(text, settings=settings, **QUIET)
    assert server.stats.total_requests() == 0


def test_definite_hub_answers_are_not_hidden_by_the_snapshot(hub_endpoint):
    with pytest.raises(NothingToPlanError, match="README.md"):
        resolve_model(NOTHING, **QUIET)
    with pytest.raises(RepoNotFoundError):
        resolve_model("nobody/Qwen3-8B", **QUIET)


def test_a_listing_stored_last_means_a_half_written_repo_is_a_miss(hub_endpoint, own_cache):
    got = resolve_model(SINGLE, **QUIET)
    with Cache.open(own_cache, endpoint=hub_endpoint) as cache:
        assert facts_from_cache(cache, SINGLE, got.sha, None, None) is not None
        cache.put_config("o/half", "a" * 40, "config.json", {"model_type": "llama"})  # killed before the listing
        assert cache.resolve_revision("o/half") is None
        assert facts_from_cache(cache, "o/half", "a" * 40, None, None) is None


# --- hostile headers, poisoned entries, mirrors, folders --------------------------------------


def test_a_hostile_header_from_the_hub_is_refused_before_it_is_cached(new_hub_server, own_cache, tmp_path):
    root = tmp_path / "hub"
    md = llama_metadata(**{"llama.block_count": Typed(2**32 - 1, VT.UINT32)})
    write_gguf(root / "tmp-org/poison-GGUF/p-Q4_K_M.gguf", md, llama_like(), file_size=64 << 20)
    server = new_hub_server(root)
    settings = HubSettings.resolve(endpoint=server.endpoint)
    with pytest.raises(GGUFLimitError, match="block_count is 4,294,967,295, past the plausible maximum of 1,024"):
        resolve_model("tmp-org/poison-GGUF", settings=settings, **QUIET)
    with Cache.open(own_cache, endpoint=server.endpoint) as cache:  # nothing of it was written
        assert cache.info()["counts"]["gguf_headers"] == 0 and cache.info()["counts"]["repos"] == 0
    with pytest.raises(OfflineMissError):  # offline: a miss, not a crash on a poisoned entry
        resolve_model("tmp-org/poison-GGUF", offline=True, settings=settings, **QUIET)


def test_a_cached_entry_that_fails_its_checks_is_dropped_with_a_note(new_hub_server, own_cache):
    server = new_hub_server()
    settings = HubSettings.resolve(endpoint=server.endpoint)
    first = resolve_model(SINGLE, settings=settings, **QUIET)
    with Cache.open(own_cache, endpoint=server.endpoint) as cache:  # as an older explorer might have cached it
        cache.put_config(SINGLE, first.sha, "config.json", {"model_type": "llama", "num_hidden_layers": 10**7})
    again = resolve_model(SINGLE, settings=settings, **QUIET)
    assert again.origin == "hub" and again.shape.params == first.shape.params
    assert any(n.startswith(f"the cached entry of {SINGLE}@{first.sha[:12]} failed its checks") and "dropped" in n
               for n in again.notes)  # fmt: skip
    assert resolve_model(SINGLE, settings=settings, **QUIET).origin == "cache"  # read again, and sound


def test_a_mirror_and_the_hub_never_mix(new_hub_server, tmp_path):
    other = tmp_path / "mirror"
    make_repo(other, SINGLE, {"config.json": {**json.loads(json.dumps(TINY_CONFIG)), "num_hidden_layers": 7}})
    hub, mirror = new_hub_server(), new_hub_server(other)
    from_hub = resolve_model(SINGLE, settings=HubSettings.resolve(endpoint=hub.endpoint), **QUIET)
    from_mirror = resolve_model(SINGLE, settings=HubSettings.resolve(endpoint=mirror.endpoint), **QUIET)
    assert from_hub.shape.layers == 2 and from_mirror.origin == "hub" and from_mirror.shape.layers == 7
    again = resolve_model(SINGLE, settings=HubSettings.resolve(endpoint=hub.endpoint), **QUIET)
    assert again.origin == "cache" and again.shape.layers == 2


def test_a_gguf_in_a_folder_of_the_repo(new_hub_server, tmp_path):
    root = tmp_path / "hub"
    write_gguf(root / "tmp-org/folders-GGUF/sub/x-Q4_K_M.gguf", llama_metadata(), llama_like(), file_size=64 << 20)
    q8 = llama_metadata(**{"general.file_type": 7})  # MOSTLY_Q8_0
    write_gguf(root / "tmp-org/folders-GGUF/sub/x-Q8_0.gguf", q8, llama_like(), file_size=96 << 20)
    server = new_hub_server(root)
    got = resolve_model(
        "tmp-org/folders-GGUF:sub/x-Q4_K_M.gguf", settings=HubSettings.resolve(endpoint=server.endpoint), **QUIET
    )
    assert got.origin == "hub" and got.selected.files == ("sub/x-Q4_K_M.gguf",) and got.selected.quant == "Q4_K_M"
    assert {a.quant for a in got.artifacts} >= {"Q4_K_M", "Q8_0"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("o/" + "x" * 5000, "at most 4,096 are read"),
        ("org/name:../x.gguf", "is not a path inside the repo"),
        ("org/name:/etc/x.gguf", "is not a path inside the repo"),
    ],
)
def test_ids_too_long_or_climbing_out_of_the_repo_are_typed(text, says):
    with pytest.raises(ConfigError, match=says):
        resolve_model(text, offline=True, **QUIET)


def test_a_repo_id_past_the_hubs_length_is_not_an_os_error(hub_endpoint):
    with pytest.raises(RepoNotFoundError, match="not a valid repo id"):
        resolve_model("org/" + "n" * 300, **QUIET)


def test_a_safetensors_index_nested_too_deep_is_a_typed_error(new_hub_server, tmp_path):
    root = tmp_path / "hub"
    make_repo(root, "tmp-org/deep-index", {"config.json": TINY_CONFIG,
              "model.safetensors.index.json": '{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}"})  # fmt: skip
    server = new_hub_server(root)
    with pytest.raises(ConfigError, match="nests deeper than 64 levels"):
        resolve_model("tmp-org/deep-index", settings=HubSettings.resolve(endpoint=server.endpoint), **QUIET)
