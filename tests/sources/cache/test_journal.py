"""The journal of a first read (explorer.sources.cache.journal): kept without duckdb, replayed by the next open."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from support.hub_fixtures import SINGLE

from explorer.sources.cache import journal
from explorer.sources.cache.store import Cache, CacheWarning
from explorer.sources.resolve import resolve_model

QUIET = {"progress": lambda *a: None}
REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(path))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    return path


def _journal_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(journal.journal_path(str(path))).read_text().splitlines()]


def test_a_first_read_writes_a_journal_and_no_file_without_importing_duckdb(hub_endpoint, own_cache):
    """A fresh process reads SINGLE from the fake Hub with no cache file: the answers go to the journal, one line a
    transaction (config.json, safetensors, the listing last), and duckdb is never imported."""
    script = (
        "import sys\n"
        "from explorer.sources.resolve import resolve_model\n"
        f"got = resolve_model({SINGLE!r}, progress=lambda *a: None)\n"
        "print(got.origin, 'duckdb' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_DISABLE_TELEMETRY": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hub", "False"]
    assert not own_cache.exists()
    whats = [line["what"] for line in _journal_lines(own_cache)]
    assert whats[-1] == f"the listing of {SINGLE}" and len(whats) == 3


def test_the_next_open_replays_the_journal_and_the_cache_answers(hub_endpoint, own_cache):
    online = resolve_model(SINGLE, **QUIET)
    assert online.origin == "hub" and journal.exists(str(own_cache)) and not own_cache.exists()
    again = resolve_model(SINGLE, **QUIET)  # opens the cache: the journal is replayed into the new file
    assert again.origin == "cache" and again.sha == online.sha and again.shape.params == online.shape.params
    assert own_cache.exists() and not journal.exists(str(own_cache))
    with Cache.open(own_cache, read_only=True, endpoint=hub_endpoint) as cache:
        assert cache.resolve_revision(SINGLE) == online.sha


def test_a_torn_last_line_is_a_miss_and_the_whole_lines_are_replayed(own_cache):
    with Cache.journal(own_cache) as first_read:
        assert first_read.put_revision("org/kept", "main", "a" * 40)
        assert first_read.put_revision("org/torn", "main", "b" * 40)
    path = Path(journal.journal_path(str(own_cache)))
    path.write_bytes(path.read_bytes()[:-20])  # a process killed mid-line
    with Cache.open(own_cache, read_only=True) as cache:
        assert cache.resolve_revision("org/kept") == "a" * 40
        assert cache.resolve_revision("org/torn") is None
    assert not path.exists()


@pytest.mark.parametrize(
    "planted",
    [
        "COPY repos TO '/tmp/out.csv'",
        "DROP TABLE repos",
        "INSERT INTO meta VALUES (?, ?)",  # not a data table
        "DELETE FROM repos WHERE repo = ? AND endpoint = ?; DROP TABLE files",
    ],
)
def test_a_line_with_sql_the_cache_does_not_write_is_dropped_whole(own_cache, planted):
    with Cache.journal(own_cache) as first_read:
        first_read.put_revision("org/kept", "main", "a" * 40)
    line = {"what": "a planted line", "statements": [["DELETE FROM revisions WHERE repo = ? AND endpoint = ?",
                                                      ["org/kept", "https://huggingface.co"]], [planted, []]]}  # fmt: skip
    with open(journal.journal_path(str(own_cache)), "a") as f:
        f.write(json.dumps(line) + "\n")
    with Cache.open(own_cache) as cache:
        assert cache.resolve_revision("org/kept") == "a" * 40  # the planted line's DELETE did not run either
        assert {t for (t,) in cache._rows("SELECT table_name FROM information_schema.tables", [])} >= {"repos"}


def test_a_claim_returns_the_transactions_in_order_once(tmp_path):
    """The first claim renames the journal away: a second (another process opening at once) finds none."""
    db = str(tmp_path / "cache.duckdb")
    statements = [("DELETE FROM revisions WHERE repo = ? AND endpoint = ?", ["org/a", "e"])]
    assert journal.append(db, "first", statements) and journal.append(db, "second", statements)
    assert [what for what, _ in journal.claim(db)] == ["first", "second"]
    assert journal.claim(db) == [] and not journal.exists(db)


def test_a_journal_the_file_refuses_leaves_that_line_out_with_a_warning(own_cache):
    with Cache.journal(own_cache) as first_read:
        first_read.put_revision("org/kept", "main", "a" * 40)
    bad = {"what": "a wrong row", "statements": [["INSERT INTO revisions VALUES (?, ?)", ["too", "few"]]]}
    with open(journal.journal_path(str(own_cache)), "a") as f:
        f.write(json.dumps(bad) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Cache.open(own_cache, read_only=True) as cache:
            assert cache.resolve_revision("org/kept") == "a" * 40
    assert any(issubclass(w.category, CacheWarning) and "a wrong row" in str(w.message) for w in caught)
