"""Files the user names, and the cache file, through the CLI: every failure a one-line typed message.

``place --plan`` that is missing, a folder, not UTF-8 or nested too deep;
``cache export`` to a missing folder, a folder, a path under a file; ``snapshot
refresh --repos`` and ``snapshot seed`` with bad inputs; an ``EXPLORER_CACHE``
that holds someone else's file; a cache on a read-only file system (mounted
for the test when the tests run as root, else skipped); names with control
characters in a GGUF file.
"""

from __future__ import annotations

import subprocess

import pytest
from support.corpus import CONFIGS, DATA
from support.gguf_factory import llama_like, llama_metadata
from support.hub_fixtures import write_gguf
from support.tmpfs import mounted_tmpfs

from explorer.cli import main


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    return tmp_path / "cache.duckdb"


def refused(capsys, *argv: str) -> str:
    """Run a command that must be refused with status 2 and a message (no traceback); the message."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"explorer {argv[0]}: ") and "Traceback" not in err
    return err


PLACE = ("place", "--cluster", "1x1xh100-80g", "--model", "Qwen/Qwen3-8B", "--offline", "--plan")


def test_place_plan_files_that_cannot_be_read(capsys, tmp_path):
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "deep.toml").write_text("a = " + "[" * 5_000 + "]" * 5_000)
    assert "cannot read the placement plan nope.json: No such file" in refused(capsys, *PLACE, "nope.json")
    assert f"the placement plan {tmp_path} is a folder" in refused(capsys, *PLACE, str(tmp_path))
    assert "is not UTF-8 text (byte 0 is 0xff)" in refused(capsys, *PLACE, str(tmp_path / "binary.json"))
    assert "the placement plan nests deeper than 64 levels" in refused(capsys, *PLACE, str(tmp_path / "deep.json"))
    assert "nests deeper than 64 levels" in refused(capsys, *PLACE, str(tmp_path / "deep.toml"))


def test_cache_export_to_a_place_it_cannot_write(capsys, tmp_path, own_cache):
    from explorer.sources.cache.store import Cache

    Cache.open(own_cache).close()  # a cache to export
    (tmp_path / "a-file").write_text("x")
    for target, why in [
        (tmp_path / "missing" / "x.json", "No such file or directory"),
        (tmp_path, "Is a directory"),
        (tmp_path / "a-file" / "x.json", "Not a directory"),
    ]:
        err = refused(capsys, "cache", "export", str(target))
        assert f"cannot write the export to {target}: {why}" in err and "a folder that exists" in err
    assert main(["cache", "export", str(tmp_path / "ok.json")]) == 0


def test_snapshot_refresh_and_seed_with_bad_inputs(capsys, tmp_path):
    (tmp_path / "bad.csv").write_bytes(b"\xff\xfe")
    (tmp_path / "cols.csv").write_text("file,source\nconfigs/x.json,y\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "o__m.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "prov.csv").write_text("file,hf_model_id,source_repo,source_path,commit\nconfigs/o__m.json,o/m,r,p,c\n")
    assert "cannot read the list of repos /nonexistent-14: No such file" in refused(
        capsys, "snapshot", "refresh", "--repos", "/nonexistent-14", "--offline"
    )
    seed = ("snapshot", "seed", "--out", str(tmp_path / "s.json"))
    assert "--configs /nonexistent-14 is not a folder" in refused(
        capsys, *seed, "--configs", "/nonexistent-14", "--provenance", str(tmp_path / "bad.csv")
    )
    assert "the provenance CSV" in refused(
        capsys, *seed, "--configs", str(CONFIGS), "--provenance", str(tmp_path / "bad.csv")
    )
    assert "lacks the column(s) hf_model_id, source_repo, source_path, commit" in refused(
        capsys, *seed, "--configs", str(CONFIGS), "--provenance", str(tmp_path / "cols.csv")
    )
    assert "nests deeper than 64 levels" in refused(
        capsys, *seed, "--configs", str(tmp_path / "configs"), "--provenance", str(tmp_path / "prov.csv")
    )
    assert "cannot write the snapshot" in refused(
        capsys, "snapshot", "seed", "--configs", str(CONFIGS), "--provenance", str(DATA / "provenance.csv"),
        "--out", str(tmp_path / "bad.csv" / "s.json"),
    )  # fmt: skip


def test_a_cache_path_holding_someone_elses_file_is_left_alone(capsys, tmp_path, monkeypatch):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a cache\n")
    monkeypatch.setenv("EXPLORER_CACHE", str(notes))
    err = refused(capsys, "cache", "clear")
    assert "holds a file that is not a DuckDB database, so explorer did not make it" in err
    assert notes.read_text() == "my notes, not a cache\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt"
    ]
    # a model still resolves (from the snapshot), saying the cache was not used
    assert main(["shape", "Qwen/Qwen3-8B", "--offline"]) == 0
    assert "note: the cache was not used" in capsys.readouterr().out


def test_control_characters_from_a_gguf_are_escaped_on_the_terminal(capsys, tmp_path):
    path = tmp_path / "evil-Q4_K_M.gguf"
    write_gguf(path, llama_metadata(**{"general.architecture": "\x1b[2J\x1b[31mllama\u202e"}), llama_like())
    assert main(["shape", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[2J\\x1b[31mllama\\u202e" in out


# --- a read-only file system ------------------------------------------------------------------


@pytest.fixture
def read_only_cache(tmp_path):
    """A cache file with one cached model, on a tmpfs remounted read-only (root only, else skip)."""
    with mounted_tmpfs(tmp_path / "ro", "64m") as mnt:
        yield mnt / "cache.duckdb"


def test_a_cache_on_a_read_only_file_system_is_read_and_clear_says_why(capsys, monkeypatch, read_only_cache, hub_root):
    from support.hub_fixtures import SINGLE
    from support.hubserver import HubServer

    monkeypatch.setenv("EXPLORER_CACHE", str(read_only_cache))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with HubServer(hub_root) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        assert main(["shape", SINGLE]) == 0  # cached while the file system is writable
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_cache.parent)], check=True)
    capsys.readouterr()
    assert main(["shape", SINGLE, "--offline"]) == 0
    assert f"cache: {SINGLE}@" in capsys.readouterr().out  # read from the cache, not the snapshot
    assert main(["shape", SINGLE, "--timeout", "2"]) == 0  # online too: the cache answers first
    err = refused(capsys, "cache", "clear")
    assert "read-only file system" in err and "EXPLORER_CACHE" in err and "other explorer process" not in err
