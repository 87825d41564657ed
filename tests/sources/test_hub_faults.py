"""A faulty Hub: each way a Hub, a proxy or a CDN has failed, against the test server's fault layer.

``server.fault(mode, routes, ...)`` (``tests/support/hubfaults.py``) answers
matching requests as a broken server would: an HTML page, bytes that are not
UTF-8, a redirect loop, a body dripped a byte at a time, ranges answered a
few bytes short, 429/503 with ``Retry-After``, 401/403/404. Every case ends
in a typed error, or in an answer from the cache or the snapshot that says
why; none runs past its deadline. Nothing of explorer is mocked.
"""

from __future__ import annotations

import email.utils
import time

import pytest
from support.fuzz import peak_rss_bytes
from support.hub_fixtures import GATED, GATED_TOKEN, GGUF, GGUF_FILES, SINGLE
from support.hubfaults import BOMB_DECODED_BYTES

from explorer.errors import (
    GatedRepoError,
    HubError,
    HubFileNotFoundError,
    HubRateLimitError,
    HubResponseError,
    HubTimeoutError,
    RepoNotFoundError,
    TokenError,
)
from explorer.sources.hub.client import fetch_repo_listing
from explorer.sources.hub.http import MAX_RETRIES, retry_after_s
from explorer.sources.hub.settings import HubSettings
from explorer.sources.hub.weights import MAX_GGUF_REQUESTS
from explorer.sources.resolve import resolve_model

QUIET = {"progress": lambda *a: None}
LISTING = r"^/api/models/"
#: a repo the shipped snapshot knows, and the test Hub does not
IN_SNAPSHOT = "Qwen/Qwen3-8B"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return tmp_path / "cache.duckdb"


@pytest.fixture
def server(new_hub_server):
    return new_hub_server()


def settings_for(server, timeout_s: float = 10.0, **kw) -> HubSettings:
    return HubSettings.resolve(endpoint=server.endpoint, timeout_s=timeout_s, **kw)


# --- bodies that are not the Hub's JSON ------------------------------------------------------


@pytest.mark.parametrize("mode", ["html", "not-utf8", "redirect-loop"])
def test_a_listing_that_is_not_the_hubs_is_a_typed_error(server, mode):
    with server.fault(mode, LISTING) as fault, pytest.raises(HubResponseError) as e:
        fetch_repo_listing(SINGLE, settings=settings_for(server))
    assert fault.hits >= 1
    said = {"html": "not valid JSON", "not-utf8": "not UTF-8", "redirect-loop": "in a loop"}[mode]
    assert said in str(e.value) and "HF_ENDPOINT" in str(e.value)  # the hint: a proxy or a captive portal


@pytest.mark.parametrize("mode", ["html", "not-utf8", "redirect-loop"])
def test_the_snapshot_answers_when_the_hub_sends_garbage_and_says_so(server, mode):
    with server.fault(mode, LISTING):
        got = resolve_model(IN_SNAPSHOT, settings=settings_for(server), **QUIET)
    assert got.origin == "snapshot" and got.shape.params == 8_190_735_360
    assert any(n.startswith("the Hub failed (HubResponseError") and "shipped snapshot" in n for n in got.notes)


def test_a_model_info_without_a_sha_or_files_is_refused(server):
    # an HTML-free answer that is JSON but not a model's info (a proxy's JSON error page)
    refused = pytest.raises(HubResponseError, match="not a model's info")
    with server.fault("status", LISTING, status=200), refused:  # {"error": "fault 200"} with status 200
        fetch_repo_listing(SINGLE, settings=settings_for(server))


# --- time: a drip is cut off at the deadline ----------------------------------------------------


def test_a_dripping_server_is_cut_off_at_the_deadline(server):
    t0 = time.monotonic()
    with server.fault("drip", LISTING, drip_s=0.5), pytest.raises(HubTimeoutError, match="within 2 s"):
        fetch_repo_listing(SINGLE, settings=settings_for(server, timeout_s=2))
    assert time.monotonic() - t0 < 2 + 1.5  # the deadline, plus at most one byte's wait and the teardown


def test_the_deadline_is_for_the_whole_resolution_and_the_snapshot_answers(server):
    t0 = time.monotonic()
    with server.fault("drip", LISTING, drip_s=0.5):
        got = resolve_model(IN_SNAPSHOT, settings=settings_for(server, timeout_s=1.5), **QUIET)
    assert time.monotonic() - t0 < 1.5 + 1.5
    assert got.origin == "snapshot" and any("HubTimeoutError" in n for n in got.notes)


# --- short ranges: bounded requests per header ----------------------------------------------


def test_ranges_answered_short_are_followed_a_bounded_number_of_times(server):
    name = "tiny-Q4_K_M.gguf"
    header_bytes = GGUF_FILES[name][0]  # 390 kB: 16 bytes a request would take 24,000 requests
    assert header_bytes > 16 * MAX_GGUF_REQUESTS
    with server.fault("short-range", rf"/resolve/.*{name}$", short_bytes=16), pytest.raises(HubResponseError) as e:
        resolve_model(f"{GGUF}:{name}", settings=settings_for(server), **QUIET)
    assert f"took {MAX_GGUF_REQUESTS} range requests" in str(e.value)
    assert server.stats.total_requests(name) == MAX_GGUF_REQUESTS


def test_a_short_range_on_a_file_not_needed_leaves_a_note(server):
    name = "big-vocab-Q8_0.gguf"
    with server.fault("short-range", rf"/resolve/.*{name}$", short_bytes=16):
        got = resolve_model(f"{GGUF}:tiny-Q4_K_M.gguf", settings=settings_for(server), **QUIET)
    assert got.origin == "hub" and got.shape.params > 0
    assert any(n.startswith(f"{name}: header unreadable") for n in got.notes)
    assert server.stats.total_requests(name) == MAX_GGUF_REQUESTS


# --- 429 and 503: bounded retries honouring Retry-After ------------------------------------------


def test_429_is_retried_after_its_retry_after_then_answers(server):
    t0 = time.monotonic()
    with server.fault("status", LISTING, status=429, headers={"Retry-After": "1"}, times=2) as fault:
        listing = fetch_repo_listing(SINGLE, settings=settings_for(server))
    elapsed = time.monotonic() - t0
    assert fault.hits == 2 and listing.has("config.json")
    assert 2.0 <= elapsed < 5  # waited the 1 s it was asked to, twice


def test_503_without_retry_after_backs_off_and_gives_up_within_the_retries(server):
    with server.fault("status", LISTING, status=503) as fault, pytest.raises(HubRateLimitError) as e:
        fetch_repo_listing(SINGLE, settings=settings_for(server))
    assert fault.hits == MAX_RETRIES + 1  # one try and three retries (0.5 s, 1 s, 2 s apart)
    assert f"answered HTTP 503 for the file listing of {SINGLE} {MAX_RETRIES + 1} times" in str(e.value)


def test_a_retry_after_past_the_deadline_is_not_waited_for(server):
    t0 = time.monotonic()
    refused = pytest.raises(HubRateLimitError, match="asked to wait 3600 s")
    with server.fault("status", LISTING, status=429, headers={"Retry-After": "3600"}) as fault, refused:
        fetch_repo_listing(SINGLE, settings=settings_for(server, timeout_s=5))
    assert fault.hits == 1 and time.monotonic() - t0 < 2


def test_rate_limited_then_the_snapshot_answers_and_says_so(server):
    with server.fault("status", LISTING, status=429, headers={"Retry-After": "0"}):
        got = resolve_model(IN_SNAPSHOT, settings=settings_for(server), **QUIET)
    assert got.origin == "snapshot" and any("HubRateLimitError" in n and "429" in n for n in got.notes)


def test_rate_limited_then_a_stale_cache_entry_answers_marked_stale(server, own_cache):
    from explorer.sources.cache.store import Cache

    first = resolve_model(SINGLE, settings=settings_for(server), **QUIET)
    old = Cache.open(own_cache, endpoint=server.endpoint, ttl_s=0, clock=lambda: time.time() + 3 * 86400)
    with old, server.fault("status", LISTING, status=503, headers={"Retry-After": "0"}):
        got = resolve_model(SINGLE, settings=settings_for(server), cache=old, **QUIET)
    assert got.origin == "cache" and got.stale and got.sha == first.sha and got.shape.params == 106_816
    assert any(n.startswith("stale: the Hub failed (HubRateLimitError") and "72.0 h ago" in n for n in got.notes)
    assert got.summary()["stale"] is True


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_s("2") == 2.0 and retry_after_s(" 0 ") == 0.0 and retry_after_s("-5") == 0.0
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after_s(soon) <= 31
    assert retry_after_s(None) is None and retry_after_s("soon") is None and retry_after_s("nan") is None


# --- 404 on one file, 401/403 -------------------------------------------------------------------


def test_a_404_on_one_gguf_file_drops_that_artifact_with_a_note(server):
    name = "big-vocab-Q8_0.gguf"
    with server.fault("status", rf"/resolve/.*{name}$", status=404):
        got = resolve_model(GGUF, settings=settings_for(server), **QUIET)
    assert got.origin == "hub" and got.shape.params > 0
    assert not any(name in a.files for a in got.artifacts)
    assert any(a.quant == "Q4_K_M" for a in got.artifacts)
    assert f"{name}: the Hub answered 404 (not found) for it; dropped from the offer" in got.notes


def test_a_404_on_the_file_asked_for_is_a_typed_error(server):
    with server.fault("status", r"/resolve/.*tiny-Q4_K_M.gguf$", status=404), pytest.raises(HubFileNotFoundError):
        resolve_model(f"{GGUF}:tiny-Q4_K_M.gguf", settings=settings_for(server), **QUIET)


@pytest.mark.parametrize(("status", "error"), [(401, GatedRepoError), (403, GatedRepoError)])
def test_401_and_403_are_definite_not_hidden_by_the_snapshot(server, status, error):
    with server.fault("status", LISTING, status=status), pytest.raises(error):
        resolve_model(IN_SNAPSHOT, settings=settings_for(server), **QUIET)


def test_a_plain_404_listing_is_repo_not_found(server):
    with pytest.raises(RepoNotFoundError):
        fetch_repo_listing("nobody/nothing", settings=settings_for(server))


# --- tokens with line ends -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "wrapped", [f"{GATED_TOKEN}\r", f"{GATED_TOKEN}\r\n", f"  {GATED_TOKEN}\n", f"\t{GATED_TOKEN} "]
)
def test_a_token_read_from_a_crlf_file_is_stripped_and_works(server, monkeypatch, wrapped):
    monkeypatch.setenv("HF_TOKEN", wrapped)
    got = resolve_model(GATED, settings=HubSettings.resolve(endpoint=server.endpoint), **QUIET)
    assert got.origin == "hub" and got.shape.params == 8_030_261_248
    assert set(server.stats.tokens) == {GATED_TOKEN}  # sent exactly, without the line end


@pytest.mark.parametrize("bad", ["hf_abc\rdef0123456789", "hf_abc def0123456789", "hf_abcé0123456789", "x" * 5000])
def test_a_token_that_is_not_token_shaped_is_refused_unseen(server, monkeypatch, bad):
    monkeypatch.setenv("HF_TOKEN", bad)
    with pytest.raises(TokenError) as e:
        HubSettings.resolve(endpoint=server.endpoint)
    text = str(e.value)
    assert "HF_TOKEN" in text and "not shown" in text
    assert bad not in text and bad.strip()[:12] not in text and server.stats.total_requests() == 0


def test_every_fault_ends_typed(server):
    """Each mode on every route: a typed error or an answer, never anything else."""
    outcomes = {}
    for mode, params in [
        ("html", {}),
        ("not-utf8", {}),
        ("redirect-loop", {}),
        ("status", {"status": 500}),
        ("status", {"status": 429, "headers": {"Retry-After": "0"}}),
    ]:
        with server.fault(mode, ".*", **params):
            try:
                got = resolve_model(SINGLE, settings=settings_for(server), **QUIET)
                outcomes[(mode, params.get("status"))] = got.origin
            except HubError as e:
                outcomes[(mode, params.get("status"))] = type(e).__name__
    assert outcomes == {
        ("html", None): "HubResponseError",
        ("not-utf8", None): "HubResponseError",
        ("redirect-loop", None): "HubResponseError",
        ("status", 500): "HubError",
        ("status", 429): "HubRateLimitError",
    }


# --- bodies past the caps, and status lines that drip (issue 25) --------------------------------


@pytest.mark.parametrize(("status", "error"), [(404, HubError), (500, HubError), (302, HubResponseError)])
def test_endless_error_and_redirect_bodies_are_read_up_to_the_cap(server, status, error):
    # before: an endless 404/500/302 body was read whole (MemoryError); now a 404/500 body is read up to
    # ERROR_BODY_BYTES and a redirect's body not at all (the loop ends after MAX_REDIRECTS)
    before = peak_rss_bytes()
    with server.fault("endless", LISTING, status=status), pytest.raises(error):
        fetch_repo_listing(SINGLE, settings=settings_for(server, timeout_s=20))
    assert peak_rss_bytes() - before < 64 * 2**20


def test_a_gzip_bomb_on_a_404_is_decoded_only_up_to_the_cap(server):
    # before: a 1 MB gzip body on a 404 decoded to 2.1 GiB; here 256 KiB decoding to 256 MiB
    before = peak_rss_bytes()
    with server.fault("gzip-bomb", LISTING, status=404), pytest.raises(HubError, match="HTTP 404"):
        fetch_repo_listing(SINGLE, settings=settings_for(server, timeout_s=20))
    assert peak_rss_bytes() - before < BOMB_DECODED_BYTES // 4


def test_headers_that_drip_are_cut_off_at_the_deadline(server):
    # before: a status line and headers sent a byte every 2 s ran past 240 s with --timeout 5 (each byte
    # came within the 10 s read timeout)
    t0 = time.monotonic()
    with server.fault("drip-headers", LISTING, drip_s=0.3), pytest.raises(HubTimeoutError):
        fetch_repo_listing(SINGLE, settings=settings_for(server, timeout_s=2))
    assert time.monotonic() - t0 < 2 + 1.5  # the deadline, plus the teardown


def test_a_listed_config_that_is_then_missing_is_a_typed_error(server):
    # before: a listing naming config.json whose download answered 404 was an IndexError
    with server.fault("status", r"/resolve/.*config\.json$", status=404), pytest.raises(HubFileNotFoundError):
        resolve_model(SINGLE, settings=settings_for(server), **QUIET)
