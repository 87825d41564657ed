"""explorer.sources.cache.store: round trips, expiry, and surviving kill -9, a second process and garbage.

Other processes are real subprocesses running small scripts against the
same file; nothing of the cache is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import warnings

import pytest
from support.cache_checks import check_consistent, run_script
from support.corpus import ROOT

from explorer.errors import CacheError
from explorer.sources.cache.schema import json_safe
from explorer.sources.cache.store import Cache, CacheWarning, default_cache_path
from explorer.sources.hub.records import RepoFile, RepoListing, SafetensorsParams

SHA = "0123456789abcdef0123456789abcdef01234567"
SHA2 = "89abcdef0123456789abcdef0123456789abcdef"


def make_listing(repo: str = "org/model", sha: str = SHA, n: int = 3, **kw) -> RepoListing:
    files = tuple(RepoFile(path=f"model-{i:05d}.safetensors", size_bytes=10**9 + i, lfs=True) for i in range(n))
    return RepoListing(
        repo_id=repo,
        revision=kw.pop("revision", "main"),
        sha=sha,
        files=(RepoFile(path="config.json", size_bytes=700, lfs=False), *files),
        **kw,
    )


class Clock:
    """An injected clock: seconds since the epoch, moved by hand."""

    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def cache(tmp_path):
    with Cache.open(tmp_path / "cache.duckdb") as c:
        yield c


# --- round trips --------------------------------------------------------------------------


def test_listing_round_trip_keeps_order_flags_and_revision(cache):
    listing = make_listing(gated=True, private=True, n=40)
    assert cache.put_listing(listing)
    got = cache.get_listing("org/model", SHA, revision="main")
    assert got == listing
    assert cache.resolve_revision("org/model") == SHA == cache.resolve_revision("org/model", "main")
    assert cache.get_listing("org/model", SHA2) is None
    empty = make_listing(sha=SHA2, n=0)
    empty = RepoListing(repo_id=empty.repo_id, revision="v1", sha=SHA2, files=())
    cache.put_listing(empty)
    assert cache.get_listing("org/model", SHA2, revision="v1") == empty


def test_config_safetensors_and_gguf_round_trips(cache):
    cache.put_config("org/model", SHA, "config.json", '{"rope_theta": NaN, "max": Infinity, "n": 1}')
    cfg = cache.get_config("org/model", SHA)
    assert cfg["rope_theta"] != cfg["rope_theta"] and cfg["max"] == float("inf")
    cache.put_config("org/model", SHA, "hf_quant_config.json", {"quantization": {"quant_algo": "FP8"}})
    assert cache.get_config("org/model", SHA, "hf_quant_config.json")["quantization"]["quant_algo"] == "FP8"
    assert cache.get_config("org/model", SHA, "nope.json") is None

    params = SafetensorsParams(
        total_params=8_030_261_248,
        params_by_dtype={"BF16": 8_030_261_248},
        files={"model-00001-of-00004.safetensors": 4_976_698_672},
    )
    cache.put_safetensors("org/model", SHA, params)
    assert cache.get_safetensors("org/model", SHA) == params

    record = {
        "metadata": {"general.architecture": "llama", "tokenizer.ggml.tokens": [f"t{i}" for i in range(128_256)]},
        "tensors": [{"name": "token_embd.weight", "type": "Q4_K", "shape": [4096, 128256]}],
        "header_bytes": 7_800_000,
        "file_size": 4_920_000_000,
    }
    cache.put_gguf_header("org/model", SHA, "m.gguf", record)
    got = cache.get_gguf_header("org/model", SHA, "m.gguf")
    assert got["metadata"]["general.architecture"] == "llama"
    assert got["metadata"]["tokenizer.ggml.tokens"]["length"] == 128_256  # stored as a summary
    assert got["tensors"] == record["tensors"]
    assert (got["header_bytes"], got["file_size_bytes"]) == (7_800_000, 4_920_000_000)


def test_json_safe_summarises_and_converts():
    import enum
    from dataclasses import dataclass

    class Kind(enum.Enum):
        A = 1

    @dataclass
    class Rec:
        kind: Kind
        data: bytes

    out = json_safe({"r": Rec(Kind.A, b"\x01\x02"), "big": list(range(1000)), "t": (1, 2), "f": float("nan")})
    assert out["r"] == {"kind": "A", "data": "0102"}
    assert out["big"]["__array__"] and out["big"]["length"] == 1000 and out["big"]["head"][:3] == [0, 1, 2]
    assert out["t"] == [1, 2]
    json.dumps(out)


def test_info_clear_and_export(cache, tmp_path):
    cache.put_listing(make_listing())
    cache.put_config("org/model", SHA, "config.json", {"a": 1})
    info = cache.info()
    assert info["counts"]["files"] == 4 and info["counts"]["repos"] == 1 and info["size_bytes"] > 0
    assert info["mode"] == "read-write" and info["path"].endswith("cache.duckdb")
    doc = json.loads(cache.export(tmp_path / "out.json").read_text())
    assert doc["format"] == "explorer-cache" and doc["tables"]["configs"][0]["text"] == {"a": 1}
    assert len(doc["tables"]["files"]) == 4
    cache.clear()
    assert all(n == 0 for n in cache.info()["counts"].values())


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("EXPLORER_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == str(tmp_path / "xdg" / "explorer" / "cache.duckdb")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_path() == str(tmp_path / "home" / ".cache" / "explorer" / "cache.duckdb")
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "mine.duckdb"))
    with Cache.open() as c:
        c.put_listing(make_listing())
    assert (tmp_path / "mine.duckdb").exists()
    with Cache.open(":memory:") as c:
        assert c.put_listing(make_listing()) and c.get_listing("org/model", SHA) is not None


# --- expiry -------------------------------------------------------------------------------


def test_branch_mapping_expires_but_a_sha_never_does(tmp_path):
    clock = Clock()
    with Cache.open(tmp_path / "c.duckdb", clock=clock, ttl_s=3600) as c:
        c.put_listing(make_listing())
        clock.t += 3599
        assert c.resolve_revision("org/model", "main") == SHA
        clock.t += 2
        assert c.resolve_revision("org/model", "main") is None
        clock.t += 10 * 365 * 86400
        assert c.resolve_revision("org/model", SHA.upper()) == SHA
        assert c.get_listing("org/model", SHA) is not None  # rows keyed by sha never go stale
        c.put_revision("org/model", "main", SHA2)
        assert c.resolve_revision("org/model") == SHA2


# --- safety -------------------------------------------------------------------------------


def test_a_failing_write_leaves_nothing_behind(cache):
    dup = RepoFile(path="same.bin", size_bytes=1, lfs=False)
    bad = RepoListing(repo_id="org/model", revision="main", sha=SHA, files=(dup, dup))
    with pytest.raises(CacheError, match="listing"):
        cache.put_listing(bad)  # the second file row breaks the primary key: the whole put rolls back
    assert cache.get_listing("org/model", SHA) is None
    assert cache.info()["counts"] == dict.fromkeys(cache.info()["counts"], 0)
    assert cache.put_listing(make_listing())  # the connection is usable after the rollback


WRITER = """
    import sys, random
    from explorer.sources.cache.store import Cache
    from explorer.sources.hub.records import RepoFile, RepoListing, SafetensorsParams
    cache = Cache.open(sys.argv[1])
    i = 0
    while True:
        sha = f"{i:040x}"
        n = random.randint(1, 400)
        files = tuple(RepoFile(path=f"f{j}", size_bytes=j, lfs=True) for j in range(n))
        cache.put_listing(RepoListing(repo_id=f"org/m{i % 50}", revision="main", sha=sha, files=files))
        cache.put_safetensors(f"org/m{i % 50}", sha, SafetensorsParams(
            total_params=3 * n, params_by_dtype={"BF16": n, "F32": 2 * n}, files={"a": n}))
        if i == 20:
            print("writing", flush=True)
        i += 1
"""


@pytest.mark.parametrize("delay_s", [0.05, 0.4])
def test_kill_9_mid_write_leaves_whole_rows(tmp_path, delay_s):
    path = tmp_path / "cache.duckdb"
    proc = run_script(tmp_path, WRITER, str(path))
    assert proc.stdout.readline().strip() == "writing", proc.stderr.read() if proc.poll() is not None else ""
    time.sleep(delay_s)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert check_consistent(path) >= 20
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        with Cache.open(path) as c:  # opens cleanly: no corruption warning
            assert c.mode == "read-write" and c.info()["counts"]["repos"] >= 20


HOLDER = """
    import sys
    from explorer.sources.cache.store import Cache
    from explorer.sources.hub.records import RepoFile, RepoListing
    cache = Cache.open(sys.argv[1])
    cache.put_listing(RepoListing(repo_id="org/held", revision="main", sha="f" * 40,
                                  files=(RepoFile(path="config.json", size_bytes=1, lfs=False),)))
    print("ready", flush=True)  # the first write is checkpointed: a copy of the file has it
    sys.stdin.read()  # hold the file until the test closes our stdin
    cache.close()
"""


def test_second_process_reads_a_snapshot_and_writes_once_the_first_lets_go(tmp_path):
    path = tmp_path / "cache.duckdb"
    holder = run_script(tmp_path, HOLDER, str(path))
    try:
        assert holder.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        with pytest.warns(CacheWarning, match="in use by another"):
            second = Cache.open(path, lock_wait_s=0.3)
        assert 0.25 <= time.monotonic() - t0 < 3  # retried with backoff for about lock_wait_s
        assert second.mode in ("snapshot", "read-only") and not second.writable
        assert second.get_listing("org/held", "f" * 40) is not None  # the holder's checkpointed rows
        assert second.put_listing(make_listing()) is False and second.pending == 1  # queued, not dropped
        assert second.get_listing("org/model", SHA) is None
        threading.Timer(0.5, holder.stdin.close).start()  # the holder lets go while close() waits
        second.close()
        assert second.pending == 0
    finally:
        holder.stdin.close() if not holder.stdin.closed else None
        holder.wait(10)
    with Cache.open(path) as third:
        assert third.mode == "read-write" and third.get_listing("org/held", "f" * 40) is not None
        assert third.get_listing("org/model", SHA) is not None  # the queued write landed


def test_queued_writes_are_given_up_with_a_warning_past_the_wait(tmp_path):
    path = tmp_path / "cache.duckdb"
    holder = run_script(tmp_path, HOLDER, str(path))
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.warns(CacheWarning, match="in use by another"):
            second = Cache.open(path, lock_wait_s=0.1, flush_wait_s=0.3)
        second.put_listing(make_listing())
        with pytest.warns(CacheWarning, match="1 fetched record"):
            second.close()
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_waits_for_a_short_lived_writer(tmp_path):
    path = tmp_path / "cache.duckdb"
    holder = run_script(tmp_path, HOLDER, str(path))
    assert holder.stdout.readline().strip() == "ready"
    threading.Timer(0.3, holder.stdin.close).start()  # the other process finishes soon
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        with Cache.open(path, lock_wait_s=5) as c:
            assert c.mode == "read-write" and c.put_listing(make_listing())
    holder.wait(10)


def test_corrupt_file_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "cache.duckdb"
    with Cache.open(path) as c:
        c.put_listing(make_listing())
    data = path.read_bytes()
    path.write_bytes(data[:4096] + os.urandom(len(data) - 4096))  # DuckDB's header kept: a damaged cache
    with pytest.warns(CacheWarning, match="unreadable"):
        c = Cache.open(path)
    with c:
        assert c.mode == "read-write" and c.get_listing("org/model", SHA) is None
        assert c.put_listing(make_listing()) and c.get_listing("org/model", SHA) is not None
    aside = [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].startswith("cache.duckdb.corrupt-")


def test_schema_version_mismatch_rebuilds(tmp_path):
    import duckdb

    path = tmp_path / "cache.duckdb"
    with Cache.open(path) as c:
        c.put_listing(make_listing())
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    with Cache.open(path, read_only=True) as c:
        assert c.mode == "disabled" and c.get_listing("org/model", SHA) is None
    with Cache.open(path) as c:
        assert c.info()["counts"]["repos"] == 0 and c.put_listing(make_listing())


def test_read_only_and_missing_file(tmp_path):
    with Cache.open(tmp_path / "none.duckdb", read_only=True) as c:
        assert c.mode == "disabled" and c.get_config("a/b", SHA) is None and not c.put_listing(make_listing())
    assert not (tmp_path / "none.duckdb").exists()
    with Cache.open(tmp_path / "c.duckdb") as c:
        c.put_listing(make_listing())
    with Cache.open(tmp_path / "c.duckdb", read_only=True) as c:
        assert c.mode == "read-only" and c.get_listing("org/model", SHA) and not c.put_listing(make_listing(sha=SHA2))


def test_threads_share_one_cache(cache):
    def work(k: int) -> None:
        for i in range(8):
            sha = f"{k:020x}{i:020x}"
            cache.put_listing(make_listing(repo=f"org/t{k}", sha=sha))
            assert cache.get_listing(f"org/t{k}", sha) is not None

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.info()["counts"]["repos"] == 48


def test_cache_hits_answer_every_key(cache):
    """Many reads of many keys come back right (their latency is a benchmark: ``python -m explorer.bench.hub``)."""
    for i in range(40):
        cache.put_config(f"org/m{i}", SHA, "config.json", {"hidden_size": 4096, "i": i})
    for k in range(200):
        assert cache.get_config(f"org/m{k % 40}", SHA)["i"] == k % 40


def test_same_process_other_settings_reads_a_copy(tmp_path):
    path = tmp_path / "cache.duckdb"
    with Cache.open(path) as writer:
        writer.put_listing(make_listing())
        with pytest.warns(CacheWarning, match="in use"):
            reader = Cache.open(path, read_only=True)
        with reader:
            assert reader.mode == "snapshot" and reader.get_listing("org/model", SHA) is not None


def test_damage_inside_the_file_is_caught_at_open(tmp_path):
    path = tmp_path / "cache.duckdb"
    with Cache.open(path) as c:
        for i in range(50):
            c.put_listing(make_listing(repo=f"org/m{i}", n=40))
    data = bytearray(path.read_bytes())
    data[16384:] = os.urandom(len(data) - 16384)  # the headers survive, the blocks do not
    path.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="unreadable"), Cache.open(path) as c:
        assert c.mode == "read-write" and c.info()["counts"]["repos"] == 0


@pytest.mark.parametrize("content", [b"my notes, not a cache\n", os.urandom(4096)])
def test_a_file_explorer_did_not_make_is_refused_and_left_alone(tmp_path, content):
    path = tmp_path / "cache.duckdb"
    path.write_bytes(content)
    with pytest.raises(CacheError, match="not a DuckDB database, so explorer did not make it"):
        Cache.open(path)
    assert path.read_bytes() == content and not list(tmp_path.glob("*.corrupt-*"))


def test_another_programs_duckdb_database_is_refused_and_left_alone(tmp_path):
    import duckdb

    path = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sales (id INTEGER)")
    con.close()
    with pytest.raises(CacheError, match="DuckDB database that explorer did not make"):
        Cache.open(path)
    con = duckdb.connect(str(path), read_only=True)
    assert {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()} == {"sales"}
    con.close()


def test_a_path_that_cannot_be_a_database_is_left_alone(tmp_path):
    (tmp_path / "dir.duckdb").mkdir()
    with pytest.warns(CacheWarning, match="cannot be opened"), Cache.open(tmp_path / "dir.duckdb") as c:
        assert c.mode == "disabled" and c.get_config("a/b", SHA) is None and not c.put_listing(make_listing())
    assert (tmp_path / "dir.duckdb").is_dir() and not list(tmp_path.glob("*.corrupt-*"))


def test_rewriting_a_key_is_seen_by_the_next_read(cache):
    cache.put_config("org/model", SHA, "config.json", {"v": 1})
    assert cache.get_config("org/model", SHA) == {"v": 1}
    cache.put_config("org/model", SHA, "config.json", {"v": 2})
    assert cache.get_config("org/model", SHA) == {"v": 2}
    got = cache.get_config("org/model", SHA)
    got["v"] = 3  # a caller mutating its copy does not change the cache
    assert cache.get_config("org/model", SHA) == {"v": 2}
    cache.clear()
    assert cache.get_config("org/model", SHA) is None


def test_concurrent_resolvers_keep_every_fetched_record():
    """Three processes resolving repos into one cache at once: every repo read from the Hub ends up cached.

    (Before the write queue, the processes that found the file locked ran read-only and dropped their
    records; ``python -m explorer.bench.cache_writers`` measures it at scale.)
    """
    from explorer.bench.cache_writers import run

    got = run(processes=3, repos_count=9, code_root=ROOT)
    assert not got["failed"] and got["fetched"] == 9 and got["kept"] == 9
