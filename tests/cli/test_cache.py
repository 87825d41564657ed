"""``explorer cache info | clear | export`` and a cache surviving kill -9 mid-resolution.

The kill test reuses ``check_consistent`` from test_cache.py (whole listings,
no orphan rows) and adds the resolver's own promise: a repo's listing row is
written last, so a listed repo always has its config and weight counts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
from support.cache_checks import check_consistent, run_script
from support.hub_fixtures import SINGLE, TINY, llama_tensors, make_repo, write_safetensors

from explorer.cli import main
from explorer.sources.cache.journal import journal_path


def test_info_clear_export_and_where_the_file_is(hub_endpoint, tmp_path, monkeypatch, capsys):
    env_path, flag_path = tmp_path / "env.duckdb", tmp_path / "flag.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(env_path))
    assert main(["cache", "info"]) == 0
    assert "absent" in capsys.readouterr().out and not env_path.exists()  # info creates nothing
    # a first read writes the journal beside the file (no duckdb); the next open replays it into the file
    assert main(["shape", SINGLE, "--json"]) == 0 and not env_path.exists()
    assert os.path.exists(journal_path(str(env_path)))
    capsys.readouterr()
    assert main(["cache", "info"]) == 0 and env_path.exists() and not os.path.exists(journal_path(str(env_path)))
    out = capsys.readouterr().out
    assert str(env_path) in out and "read-only" in out and "MiB" in out and " bytes)" in out
    assert "repos         1 rows" in out and "configs       1 rows" in out and "safetensors   1 rows" in out
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["files"] == 2 and info["size_bytes"] > 0
    assert main(["cache", "export", str(tmp_path / "out.json")]) == 0
    assert "exported 6 rows" in capsys.readouterr().out
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["format"] == "explorer-cache" and doc["tables"]["configs"][0]["repo"] == SINGLE
    # --cache wins over EXPLORER_CACHE, before or after the action
    assert main(["cache", "--cache", str(flag_path), "info"]) == 0 and "absent" in capsys.readouterr().out
    assert main(["cache", "export", str(tmp_path / "x.json"), "--cache", str(flag_path)]) == 2
    assert "no cache at" in capsys.readouterr().err
    assert main(["cache", "clear"]) == 0
    assert "removed 6 rows (repos 1, revisions 1, files 2, configs 1, safetensors 1" in capsys.readouterr().out
    assert main(["cache", "info", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["counts"].values()) == {0}


RESOLVER = """
    import itertools, sys
    from explorer.sources.hub.settings import HubSettings
    from explorer.sources.resolve import resolve_model
    settings = HubSettings.resolve(endpoint=sys.argv[1])
    repos = [f"kill-org/m{i}" for i in range(int(sys.argv[2]))]
    for n, (k, repo) in enumerate(itertools.product(range(10), repos)):
        resolve_model(repo, revision=f"b{k}", settings=settings, progress=lambda *a: None)
        if n == 5:
            print("resolving", flush=True)
"""


def test_kill_9_while_resolving_leaves_a_readable_cache(tmp_path, new_hub_server):
    root = tmp_path / "hub"
    for i in range(12):
        config = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 256 + i,
        }
        d = make_repo(root, f"kill-org/m{i}", {"config.json": config}, branches=[f"b{k}" for k in range(10)])
        write_safetensors(d / "model.safetensors", llama_tensors(**TINY))
    server = new_hub_server(root)
    path = tmp_path / "cache.duckdb"
    env = {**os.environ, "EXPLORER_CACHE": str(path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RESOLVER), server.endpoint, "12"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "resolving", proc.stderr.read() if proc.poll() is not None else ""
    time.sleep(0.3)  # in the middle of resolving (and writing) more repos
    assert proc.poll() is None, "the resolver finished before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    explorer = [sys.executable, "-m", "explorer"]
    info = subprocess.run(
        [*explorer, "cache", "info", "--json"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert info.returncode == 0, info.stderr
    counts = json.loads(info.stdout)["counts"]
    assert counts["repos"] >= 6 and counts["revisions"] >= 6
    assert check_consistent(path) == counts["repos"]  # whole listings, no orphans, counts add up
    con = duckdb.connect(str(path), read_only=True)
    half = con.execute(
        "SELECT r.repo FROM repos r ANTI JOIN configs c ON r.repo = c.repo AND r.sha = c.sha"
        " UNION ALL SELECT r.repo FROM repos r ANTI JOIN safetensors s"
        " ON r.repo = s.repo AND r.sha = s.sha"
    ).fetchall()
    con.close()
    assert half == []  # the listing is written last: a listed repo has everything


def test_cache_info_reads_a_file_another_process_holds(tmp_path):
    path = tmp_path / "cache.duckdb"
    holder = run_script(
        tmp_path,
        """
        import sys
        from explorer.sources.cache.store import Cache
        from explorer.sources.hub.records import RepoFile, RepoListing
        cache = Cache.open(sys.argv[1])
        cache.put_listing(RepoListing(repo_id="org/held", revision="main", sha="f" * 40,
                                      files=(RepoFile(path="config.json", size_bytes=1, lfs=False),)))
        print("ready", flush=True)
        sys.stdin.read()
    """,
        str(path),
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        argv = [sys.executable, "-m", "explorer", "cache", "--cache", str(path), "info"]
        got = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert got.returncode == 0 and "repos         1 rows" in got.stdout
        assert "snapshot" in got.stdout or "read-only" in got.stdout
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert Path(path).exists()
