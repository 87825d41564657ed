"""The cache file's dead ends (issue 25): truncated, newer schema, full disk, and a clear that always works."""

from __future__ import annotations

import os
import warnings

import pytest
from support.tmpfs import mounted_tmpfs

from explorer.cli import main
from explorer.sources.cache.schema import SCHEMA_VERSION
from explorer.sources.cache.store import Cache, CacheWarning

SHA = "a" * 40


def _filled(path, models: int = 200) -> None:
    """A cache holding ``models`` configs of 2 kB each (about 1.3 MB: five 256 KiB blocks)."""
    with Cache.open(path) as cache:
        for i in range(models):
            cache.put_config(f"org/m{i}", SHA, "config.json", {"hidden_size": i, "pad": "x" * 2000})


def _truncated(tmp_path):
    path = tmp_path / "cache.duckdb"
    _filled(path)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    return path


def test_a_truncated_cache_is_found_on_open_moved_aside_and_rebuilt(tmp_path):
    # before: reported healthy; every lookup past the cut missed or raised "run explorer cache clear"
    path = _truncated(tmp_path)
    with pytest.warns(CacheWarning, match="it was cut short"), Cache.open(path, read_only=True) as cache:
        assert (cache.mode, cache.why) == ("disabled", "damaged")  # read-only: not used, not moved
    assert sorted(os.listdir(tmp_path)) == ["cache.duckdb"]
    with pytest.warns(CacheWarning, match="moved it to .*corrupt-"), Cache.open(path) as cache:
        assert cache.mode == "read-write" and cache.get_config("org/m5", SHA) is None
        cache.put_config("org/new", SHA, "config.json", {"hidden_size": 8})
    assert any(name.startswith("cache.duckdb.corrupt-") for name in os.listdir(tmp_path))
    with Cache.open(path, read_only=True) as cache:
        assert cache.get_config("org/new", SHA) == {"hidden_size": 8}


def _newer(tmp_path):
    import duckdb

    path = tmp_path / "cache.duckdb"
    _filled(path, models=3)
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    return path


def test_a_cache_of_a_newer_schema_is_left_alone_and_unused(tmp_path):
    # before: opened for writing, it was dropped and rebuilt empty without a word
    path = _newer(tmp_path)
    before = path.read_bytes()
    for read_only in (True, False):
        with (
            pytest.warns(CacheWarning, match="written by a newer explorer"),
            Cache.open(path, read_only=read_only) as c,
        ):
            assert c.mode == "disabled" and c.get_config("org/m1", SHA) is None
            assert not c.put_config("org/x", SHA, "config.json", {"hidden_size": 1})
    assert path.read_bytes() == before


@pytest.mark.parametrize("make", [_newer, _truncated], ids=["newer-schema", "truncated"])
def test_cache_clear_always_succeeds(tmp_path, make, capsys):
    path = make(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        assert main(["cache", "clear", "--cache", str(path)]) == 0
    assert "removed 0 rows" in capsys.readouterr().out
    kept = [n for n in os.listdir(tmp_path) if n != "cache.duckdb"]
    assert len(kept) == 1 and kept[0].startswith(("cache.duckdb.newer-", "cache.duckdb.corrupt-"))
    with Cache.open(path, read_only=True) as cache:
        assert cache.mode == "read-only" and cache.info()["counts"]["configs"] == 0


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs (root only, else skip): room for an empty cache, not for much more."""
    with mounted_tmpfs(tmp_path / "small", "3m") as mnt:
        yield mnt


def test_a_full_disk_degrades_to_answering_without_caching_with_one_warning(small_disk):
    # before: every new fetch was a traceback once the disk was full, although the Hub had answered
    path = small_disk / "cache.duckdb"
    with warnings.catch_warnings(record=True) as seen, Cache.open(path) as cache:
        warnings.simplefilter("always")
        written = [cache.put_config(f"org/m{i}", SHA, "config.json", {"pad": "x" * 200_000}) for i in range(40)]
        assert written[0] and not written[-1]  # the first fitted; the last found no room
        assert (cache.mode, cache.why) == ("read-only", "disk full")
        assert cache.get_config("org/m0", SHA) is not None  # what was cached is still read
    full = [w for w in seen if issubclass(w.category, CacheWarning) and "cannot grow" in str(w.message)]
    assert len(full) == 1


def test_the_cache_is_capped_and_drops_the_least_recently_fetched_first(tmp_path):
    # before: nothing bounded the file (one repo with a 10^6-key config added 4.3 MiB)
    ticks = iter(range(10_000))
    cap = 1 << 20  # the least cap: 1 MiB of stored text
    with Cache.open(tmp_path / "cache.duckdb", clock=lambda: float(next(ticks)), max_bytes=cap) as cache:
        for i in range(120):  # 120 × 20 kB = 2.4 MB written, twice the cap
            cache.put_config(f"org/m{i:03d}", SHA, "config.json", {"hidden_size": i, "pad": "x" * 20_000})
        kept = [i for i in range(120) if cache.get_config(f"org/m{i:03d}", SHA) is not None]
    # eviction starts past 90 % of 1 MiB (47 configs of 20 kB) and ends below 75 % (39): the newest stay
    assert kept == list(range(kept[0], 120)) and 39 <= len(kept) <= 48
    assert sum(os.path.getsize(tmp_path / n) for n in os.listdir(tmp_path)) < 3 * cap


def test_the_cap_comes_from_the_environment_and_is_checked(monkeypatch):
    from explorer.errors import CacheError
    from explorer.sources.cache.store import DEFAULT_MAX_BYTES, default_max_bytes

    assert default_max_bytes() == DEFAULT_MAX_BYTES
    monkeypatch.setenv("EXPLORER_CACHE_MAX_BYTES", "2097152")
    assert default_max_bytes() == 2 * 1024 * 1024
    for bad in ("-1", "1e9", "1024", "x" * 100):
        monkeypatch.setenv("EXPLORER_CACHE_MAX_BYTES", bad)
        with pytest.raises(CacheError, match="EXPLORER_CACHE_MAX_BYTES is"):
            default_max_bytes()
