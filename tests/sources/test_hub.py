"""explorer.sources.hub.client against a real HTTP server speaking the Hub's protocol.

Nothing of explorer is mocked: huggingface_hub makes real requests to
``hubserver``, which counts them. Timeouts are kept near 1 s.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from support.hub_fixtures import (
    BAD_CONFIG,
    FP8,
    GATED,
    GATED_TOKEN,
    GGUF,
    GGUF_FILES,
    NAN_CONFIG,
    NOTHING,
    PRIVATE,
    PRIVATE_TOKEN,
    SHARDED,
    SINGLE,
)

from explorer.errors import (
    ConfigError,
    FetchCancelled,
    GatedRepoError,
    GGUFError,
    GGUFNeedMoreBytes,
    HubConnectionError,
    HubTimeoutError,
    NothingToPlanError,
    OfflineMissError,
    RepoNotFoundError,
    RevisionNotFoundError,
)
from explorer.sources.cache.store import Cache
from explorer.sources.hub.client import fetch_config, fetch_repo_listing
from explorer.sources.hub.many import default_gguf_files, fetch_many, fetch_model
from explorer.sources.hub.settings import HubSettings
from explorer.sources.hub.weights import fetch_gguf_header_bytes, fetch_safetensors_params
from explorer.units import MiB

LLAMA_8B_PARAMS = 8_030_261_248  # Meta-Llama-3.1-8B, as published


def needs(n: int):
    """A toy GGUF parser: more bytes please, until it has ``n``; then the prefix length."""

    def parse(prefix: bytes) -> int:
        if len(prefix) < n:
            raise GGUFNeedMoreBytes(len(prefix), n)
        assert prefix[:4] == b"GGUF"
        return len(prefix)

    return parse


def always_more(prefix: bytes) -> int:
    raise GGUFNeedMoreBytes(len(prefix), len(prefix) + 1)


# --- listings, configs, safetensors ------------------------------------------------------


def test_listing_has_sizes_lfs_flags_and_the_sha(hub_endpoint):
    listing = fetch_repo_listing(GATED)
    assert listing.gated and not listing.private and listing.revision == "main"
    shard = listing.file("model-00001-of-00004.safetensors")
    assert shard.lfs and shard.size_bytes > 5 * 10**9
    assert listing.file("config.json").lfs is False
    assert fetch_repo_listing(GATED, listing.sha).sha == listing.sha


def test_endpoint_argument_wins_over_the_environment(hub_server, monkeypatch, closed_port_endpoint):
    monkeypatch.setenv("HF_ENDPOINT", closed_port_endpoint)
    assert fetch_repo_listing(SINGLE, endpoint=hub_server.endpoint).repo_id == SINGLE
    with pytest.raises(HubConnectionError):
        fetch_repo_listing(SINGLE)


def test_config_and_companions(hub_endpoint):
    listing = fetch_repo_listing(FP8)
    assert fetch_config(FP8, listing.sha)["architectures"] == ["LlamaForCausalLM"]
    fetched = fetch_model(FP8)
    assert fetched.configs["hf_quant_config.json"]["quantization"]["quant_algo"] == "FP8"
    assert fetch_config(FP8, listing.sha, filename="quantization_config.json") is None


def test_config_parsing_is_lenient_but_typed(hub_endpoint):
    cfg = fetch_config(NAN_CONFIG, "main")
    assert cfg["rope_theta"] != cfg["rope_theta"] and cfg["max"] == float("inf")
    with pytest.raises(ConfigError, match="not valid JSON"):
        fetch_config(BAD_CONFIG, "main")


def test_safetensors_params_single_sharded_and_8b(hub_endpoint):
    for repo in (SINGLE, SHARDED):
        params = fetch_safetensors_params(repo, "main")
        assert params.total_params == 106_816 and dict(params.params_by_dtype) == {"BF16": 106_816}
    listing = fetch_repo_listing(GATED)
    params = fetch_safetensors_params(GATED, listing.sha, listing=listing, token=GATED_TOKEN)
    assert params.total_params == LLAMA_8B_PARAMS
    assert set(params.files) == {f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)}
    assert sum(params.files.values()) > 2 * LLAMA_8B_PARAMS  # BF16: 2 bytes a parameter, plus headers
    assert fetch_safetensors_params(GGUF, "main") is None


# --- GGUF headers -------------------------------------------------------------------------


def test_gguf_header_read_moves_under_one_percent(hub_endpoint, new_hub_server):
    server = new_hub_server()
    listing = fetch_repo_listing(GGUF, endpoint=server.endpoint)
    for name in ("tiny-Q4_K_M.gguf", "big-vocab-Q8_0.gguf"):
        header_bytes, size = GGUF_FILES[name]
        server.reset_stats()
        got, stats = fetch_gguf_header_bytes(
            GGUF, listing.sha, name, size_bytes=size, parse=needs(header_bytes), endpoint=server.endpoint
        )
        moved = server.stats.total_bytes(name)
        assert moved == stats.bytes_read == got
        assert moved < size / 100, f"{name}: {moved:,} of {size:,} bytes"
        assert stats.requests == server.stats.total_requests(name)
    # the 5.3 MB header: 2 MiB, then straight to what the parser asked for
    assert stats.requests == 2 and stats.bytes_read == GGUF_FILES["big-vocab-Q8_0.gguf"][0]


def test_gguf_reads_grow_geometrically_and_stop_at_the_file_end(hub_endpoint):
    size = GGUF_FILES["split-00001-of-00002.gguf"][1]  # 256 MiB
    with pytest.raises(GGUFError, match="ends at"):
        fetch_gguf_header_bytes(
            GGUF, "main", "split-00001-of-00002.gguf", size_bytes=1 * MiB, parse=always_more, first_range=64 * 1024
        )
    got, stats = fetch_gguf_header_bytes(
        GGUF, "main", "split-00001-of-00002.gguf", size_bytes=size, parse=needs(3 * MiB), first_range=256 * 1024
    )
    # 256 KiB -> 3 MiB (the parser's bound beats doubling): 2 requests
    assert (got, stats.requests) == (3 * MiB, 2)


def test_small_gguf_file_is_read_whole_in_one_request(tmp_path, new_hub_server):
    from support.gguf_factory import llama_like, llama_metadata
    from support.hub_fixtures import write_gguf

    header, size = write_gguf(tmp_path / "tmp-org/small-gguf/s.gguf", llama_metadata(), llama_like(blocks=1, hidden=32))
    server = new_hub_server(tmp_path)
    assert size < 2 * MiB
    _got, stats = fetch_gguf_header_bytes(
        "tmp-org/small-gguf", "main", "s.gguf", size_bytes=size, parse=needs(header), endpoint=server.endpoint
    )
    assert (stats.requests, stats.bytes_read) == (1, size)


# --- failures map to typed errors ---------------------------------------------------------


def test_gated_repo_needs_a_token_and_says_how(hub_endpoint, monkeypatch):
    sha = fetch_repo_listing(GATED).sha
    with pytest.raises(GatedRepoError, match="401") as e:
        fetch_config(GATED, sha)
    assert "--token" in str(e.value) and "HF_TOKEN" in str(e.value)
    with pytest.raises(GatedRepoError, match="403"):
        fetch_config(GATED, sha, token="hf_wrong")
    assert fetch_config(GATED, sha, token=GATED_TOKEN)["num_hidden_layers"] == 32
    monkeypatch.setenv("HF_TOKEN", GATED_TOKEN)
    assert fetch_config(GATED, sha)["num_hidden_layers"] == 32


def test_missing_or_private_repo_and_missing_revision(hub_endpoint):
    with pytest.raises(RepoNotFoundError, match="nobody/nothing") as e:
        fetch_repo_listing("nobody/nothing")
    assert "HF_TOKEN" in str(e.value)
    with pytest.raises(RepoNotFoundError):
        fetch_repo_listing(PRIVATE)
    assert fetch_repo_listing(PRIVATE, token=PRIVATE_TOKEN).private
    with pytest.raises(RevisionNotFoundError, match="'v9'"):
        fetch_repo_listing(SINGLE, "v9")
    with pytest.raises(RepoNotFoundError, match="not a valid repo id"):
        fetch_repo_listing("not a repo!")


def test_no_config_and_no_gguf_is_nothing_to_plan(hub_endpoint):
    with pytest.raises(NothingToPlanError, match="README.md"):
        fetch_model(NOTHING)


def test_slow_hub_times_out_within_the_timeout(new_hub_server):
    server = new_hub_server()
    with server.slow(5, "/api/"):
        t0 = time.monotonic()
        with pytest.raises(HubTimeoutError, match="1 s"):
            fetch_repo_listing(SINGLE, endpoint=server.endpoint, timeout_s=1)
        assert time.monotonic() - t0 < 2.5
    with server.slow(5, "/resolve/"):
        t0 = time.monotonic()
        with pytest.raises(HubTimeoutError):
            fetch_safetensors_params(SHARDED, "main", endpoint=server.endpoint, timeout_s=0.5)
        assert time.monotonic() - t0 < 2.5


def test_connection_refused(closed_port_endpoint):
    with pytest.raises(HubConnectionError, match="Connection refused|ConnectError"):
        fetch_repo_listing(SINGLE, endpoint=closed_port_endpoint, timeout_s=1)


def test_offline_makes_no_request(new_hub_server, monkeypatch):
    server = new_hub_server()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineMissError):
        fetch_repo_listing(SINGLE, endpoint=server.endpoint)
    assert server.stats.total_requests() == 0


# --- progress and cancel ------------------------------------------------------------------


def test_cancel_between_gguf_reads(hub_endpoint, new_hub_server):
    server = new_hub_server()
    cancel = threading.Event()
    seen = []

    def progress(stage: str, done: int, total: int) -> None:
        seen.append((stage, done, total))
        cancel.set()  # the user clicks "stop" after the first read

    header, size = GGUF_FILES["big-vocab-Q8_0.gguf"]
    with pytest.raises(FetchCancelled):
        fetch_gguf_header_bytes(
            GGUF,
            "main",
            "big-vocab-Q8_0.gguf",
            size_bytes=size,
            parse=needs(header),
            endpoint=server.endpoint,
            progress=progress,
            cancel=cancel,
        )
    assert server.stats.total_requests("big-vocab") == 1
    assert seen == [("GGUF header big-vocab-Q8_0.gguf", 2 * MiB, 2 * MiB)]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(FetchCancelled):
        fetch_model(GGUF, endpoint=server.endpoint, gguf_parse=needs(10), cancel=cancel)


def test_fetch_model_reads_gguf_headers_of_first_split_parts_only(hub_endpoint):
    got = fetch_model(GGUF, gguf_parse=needs(100), progress=lambda *a: None)
    assert sorted(got.gguf_headers) == ["big-vocab-Q8_0.gguf", "split-00001-of-00002.gguf", "tiny-Q4_K_M.gguf"]
    assert got.config is None and got.safetensors is None
    assert [f.path for f in default_gguf_files(got.listing)] == sorted(got.gguf_headers)


# --- many repos at once -------------------------------------------------------------------


def test_fetch_many_is_bounded_and_collects_errors(new_hub_server):
    server = new_hub_server()
    ok = [SINGLE, FP8, NAN_CONFIG, SHARDED, GGUF]
    bad = ["nobody/nothing", NOTHING, BAD_CONFIG]
    with server.slow(0.2, "/api/models/"):
        t0 = time.monotonic()
        result = fetch_many(
            ok + bad, max_workers=2, endpoint=server.endpoint, gguf_parse=needs(100), progress=lambda *a: None
        )
        elapsed = time.monotonic() - t0
    assert sorted(result.results) == sorted(ok)
    assert {k: type(v) for k, v in result.errors.items()} == {
        "nobody/nothing": RepoNotFoundError,
        NOTHING: NothingToPlanError,
        BAD_CONFIG: ConfigError,
    }
    assert result.results[SHARDED].safetensors.total_params == 106_816
    assert not result.cancelled
    # 8 listings at 0.2 s each, two at a time: about 0.8 s, never more than two listings in flight
    assert elapsed >= 0.8
    api_requests = [e for e in server.stats.log if e[1].startswith("/api/models/")]
    assert len(api_requests) == 8


def test_fetch_many_pool_bounds_concurrency(new_hub_server):
    server = new_hub_server()
    repos = [FP8, NAN_CONFIG, SINGLE, NOTHING, BAD_CONFIG, "nobody/a", "nobody/b", "nobody/c"]
    with server.slow(0.25, "/api/models/"):
        fetch_many(repos, max_workers=3, endpoint=server.endpoint, progress=lambda *a: None)
    assert server.stats.max_in_flight <= 3
    server.reset_stats()
    with server.slow(0.25, "/api/models/"):
        fetch_many(repos, max_workers=8, endpoint=server.endpoint, progress=lambda *a: None)
    assert server.stats.max_in_flight > 3


def test_fetch_many_cancel(new_hub_server):
    server = new_hub_server()
    cancel = threading.Event()
    repos = [FP8, NAN_CONFIG, SINGLE, SHARDED, "nobody/a", "nobody/b"]
    with server.slow(0.3, "/api/models/"):
        threading.Timer(0.1, cancel.set).start()
        result = fetch_many(repos, max_workers=1, endpoint=server.endpoint, cancel=cancel, progress=lambda *a: None)
    assert result.cancelled
    assert len(result.results) <= 1 and any(isinstance(e, FetchCancelled) for e in result.errors.values())
    assert len(result.results) + len(result.errors) == len(repos)


# --- secrets ------------------------------------------------------------------------------


def test_token_never_appears_in_messages_reprs_logs_or_the_cache(
    hub_server, new_hub_server, closed_port_endpoint, monkeypatch, caplog, tmp_path
):
    canary = "hf_CANARYtoken5f3a9c1e7b2d4f6a8c0e"
    monkeypatch.setenv("HF_TOKEN", canary)
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)
    caplog.set_level(logging.DEBUG)
    slow = new_hub_server()
    texts: list[str] = [repr(HubSettings.resolve())]
    failing = [
        lambda: fetch_config(GATED, "main"),  # 403: the canary is not on the list
        lambda: fetch_repo_listing("nobody/nothing"),
        lambda: fetch_repo_listing(SINGLE, "v9"),
        lambda: fetch_config(BAD_CONFIG, "main"),
        lambda: fetch_repo_listing(SINGLE, endpoint=closed_port_endpoint),
        lambda: fetch_model(NOTHING),
    ]
    with slow.slow(3, "/api/"):
        failing.append(lambda: fetch_repo_listing(SINGLE, endpoint=slow.endpoint, timeout_s=0.5))
        for call in failing:
            with pytest.raises(Exception) as e:
                call()
            err = e.value
            texts += [str(err), repr(err), repr(err.args), getattr(err, "hint", ""), str(err.__cause__)]
    many = fetch_many([SINGLE, GATED, "nobody/nothing"], progress=lambda *a: None)
    texts += [repr(many)] + [str(e) for e in many.errors.values()]
    texts += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    with Cache.open(tmp_path / "c.duckdb") as cache:
        fetched = many.results[SINGLE]
        cache.put_listing(fetched.listing)
        cache.put_config(SINGLE, fetched.listing.sha, "config.json", fetched.config)
        cache.put_safetensors(SINGLE, fetched.listing.sha, fetched.safetensors)
        texts.append(cache.export(tmp_path / "export.json").read_text())
    raw = (tmp_path / "c.duckdb").read_bytes()
    assert canary.encode() not in raw
    leaks = [t for t in texts if canary in t]
    assert not leaks
    assert any("403" in t for t in texts) and len(caplog.records) > 0


def test_real_gguf_parser_reads_little_and_its_header_caches(hub_endpoint, new_hub_server, tmp_path):
    gguf_header = pytest.importorskip("explorer.gguf.header")
    server = new_hub_server()
    header_bytes, size = GGUF_FILES["big-vocab-Q8_0.gguf"]
    name = "big-vocab-Q8_0.gguf"
    header, stats = fetch_gguf_header_bytes(
        GGUF,
        "main",
        name,
        size_bytes=size,
        endpoint=server.endpoint,
        parse=lambda b: gguf_header.parse_gguf_header(b, file_size=size, name=name),
    )
    assert header.header_bytes == header_bytes and header.architecture == "llama"
    assert server.stats.total_bytes(name) == stats.bytes_read < size / 100
    with Cache.open(tmp_path / "c.duckdb") as cache:
        record = {
            "metadata": header.metadata,
            "tensors": header.tensors,
            "header_bytes": header.header_bytes,
            "file_size": size,
        }
        cache.put_gguf_header(GGUF, "f" * 40, name, record)
        got = cache.get_gguf_header(GGUF, "f" * 40, name)
    assert got["metadata"]["general.architecture"] == "llama" and len(got["tensors"]) == len(header.tensors)
    assert got["header_bytes"] == header_bytes


def test_progress_defaults_to_tqdm_on_a_terminal(monkeypatch):
    import io

    from explorer.sources.hub.many import TqdmProgress, default_progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    bars = default_progress(None)
    assert isinstance(bars, TqdmProgress)
    bars("safetensors headers", 1, 4)
    bars("safetensors headers", 4, 4)
    assert "safetensors headers" in __import__("sys").stderr.getvalue()
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert default_progress(None) is None
    mine = lambda *a: None  # noqa: E731
    assert default_progress(mine) is mine
