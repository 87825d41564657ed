"""``explorer shape`` on Hub ids and GGUF files, end to end against the test Hub.

In-process through ``explorer.cli.main`` (stdout and stderr captured), and
once as a real process for the token check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.corpus import ROOT
from support.gguf_factory import llama_like, llama_metadata
from support.hub_fixtures import GATED, GATED_TOKEN, GGUF, GGUF_FILES, SINGLE, write_gguf

from explorer.cli import main


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return tmp_path / "cache.duckdb"


def shape_json(capsys, *argv: str) -> dict:
    assert main(["shape", *argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_shape_of_a_hub_id_then_from_the_cache(new_hub_server, monkeypatch, capsys):
    server = new_hub_server()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    out = shape_json(capsys, SINGLE)
    assert out["params"] == 106_816 and out["layers"] == 2 and out["kv_heads"] == 2  # the served tiny config
    assert out["source"]["origin"] == "hub" and out["source"]["repo"] == SINGLE and len(out["source"]["sha"]) == 40
    (original,) = out["artifacts"]
    assert original["size_source"] == "fetched" and original["files"] == ["model.safetensors"]
    server.stop()
    again = shape_json(capsys, SINGLE)
    assert again["source"]["origin"] == "cache" and again["params"] == 106_816
    assert shape_json(capsys, SINGLE, "--revision", out["source"]["sha"])["source"]["origin"] == "cache"


def test_gated_repo_and_a_token_that_is_never_shown(hub_server, own_cache, tmp_path):
    env = {**os.environ, "HF_ENDPOINT": hub_server.endpoint, "EXPLORER_CACHE": str(own_cache)}
    env.pop("HF_TOKEN", None)

    def explorer(*argv: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "explorer", *argv]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)

    denied = explorer("shape", GATED)
    assert denied.returncode == 2 and "gated" in denied.stderr and "--token" in denied.stderr
    assert "HF_TOKEN" in denied.stderr and "Traceback" not in denied.stderr
    ok = explorer("shape", GATED, "--token", GATED_TOKEN)
    assert ok.returncode == 0 and "8.03B" in ok.stdout and "hub: meta-llama/Meta-Llama-3.1-8B@" in ok.stdout
    as_json = explorer("shape", GATED, "--json", "--token", GATED_TOKEN)  # now from the cache
    assert json.loads(as_json.stdout)["source"]["origin"] == "cache"
    exported = explorer("cache", "export", str(tmp_path / "export.json"))
    texts = [
        denied.stdout,
        denied.stderr,
        ok.stdout,
        ok.stderr,
        as_json.stdout,
        as_json.stderr,
        exported.stdout,
        (tmp_path / "export.json").read_text(),
    ]
    assert exported.returncode == 0 and not [t for t in texts if GATED_TOKEN in t]
    assert GATED_TOKEN.encode() not in own_cache.read_bytes()


def test_slow_hub_times_out_cleanly(new_hub_server, monkeypatch, capsys):
    server = new_hub_server()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    with server.slow(3, "/api/"):
        assert main(["shape", SINGLE, "--timeout", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "did not answer within 0.5 s" in err and "--offline" in err and "Traceback" not in err


def test_offline_uses_the_snapshot_or_says_what_is_missing(new_hub_server, monkeypatch, capsys):
    server = new_hub_server()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    out = shape_json(capsys, "Qwen/Qwen3-8B", "--offline")
    assert out["source"]["origin"] == "snapshot" and out["params"] == 8_190_735_360
    assert out["artifacts"][0]["size_source"] == "computed"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["shape", "nobody/unknown-model"]) == 2
    assert "neither" in capsys.readouterr().err and server.stats.total_requests() == 0
    assert main(["shape", "Qwen/Qwen3-8B@v1", "--revision", "v2"]) == 2
    assert "give the revision once" in capsys.readouterr().err


def test_gguf_file_and_a_file_in_a_hub_repo(hub_endpoint, tmp_path, capsys):
    _, size = write_gguf(tmp_path / "local-Q4_K_M.gguf", llama_metadata(), llama_like(), file_size=64 << 20)
    out = shape_json(capsys, str(tmp_path / "local-Q4_K_M.gguf"))
    assert out["source"]["origin"] == "file" and out["artifacts"][0]["size_bytes"] == size
    assert out["artifacts"][0]["quant"] == "Q4_K_M" and out["params"] > 0
    assert main(["shape", f"{GGUF}:tiny-Q4_K_M.gguf"]) == 0
    table = capsys.readouterr().out
    assert f"offers         Q4_K_M: 1.00 GiB ({GGUF_FILES['tiny-Q4_K_M.gguf'][1]:,} bytes, fetched)" in table
    assert f"hub: {GGUF}@" in table


def test_a_cold_shape_as_a_process_asks_each_thing_once_and_ends_complete(new_hub_server, own_cache, tmp_path):
    # the program as users run it: the Hub read started before the model code loads (explorer.sources.hub.early),
    # the process ended by explorer.cli.console without the interpreter's teardown
    server = new_hub_server()
    env = {
        **os.environ,
        "HF_ENDPOINT": server.endpoint,
        "EXPLORER_CACHE": str(own_cache),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        # the explorer under test, not an installed copy
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    env.pop("HF_TOKEN", None)

    def explorer(*argv: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "explorer", *argv]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)

    cold = explorer("shape", SINGLE, "--json")
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout)["params"] == 106_816  # the whole JSON arrived: the output was flushed
    # the listing, config.json, the one safetensors header: each once
    assert sorted(path.rsplit("/", 1)[-1] for _, path, _, _ in server.stats.log) == [
        "config.json",
        "llama-tiny-single",
        "model.safetensors",
    ]
    assert own_cache.with_name("cache.duckdb.journal").is_file()  # the cache's first write, kept
    server.reset_stats()
    warm = explorer("shape", SINGLE, "--json")
    assert json.loads(warm.stdout)["source"]["origin"] == "cache" and server.stats.log == []
    missing = explorer("shape", "fake-org/no-such-model")
    assert missing.returncode == 2 and "not found" in missing.stderr.lower() and "Traceback" not in missing.stderr
