"""The shipped snapshot: coverage, honest size labels, search, and refreshing it from a (test) Hub."""

from __future__ import annotations

import json
import shutil

import pytest
from support.corpus import CONFIGS, DATA, ROOT, all_config_names, shape_of
from support.hub_fixtures import FP8, GGUF, SINGLE

from explorer.artifacts.offer import computed_disk_bytes
from explorer.cli import main
from explorer.errors import OfflineMissError, SnapshotError
from explorer.sources.hub.settings import HubSettings
from explorer.sources.resolve import resolve_model
from explorer.sources.snapshot.build import refresh, seed
from explorer.sources.snapshot.read import default_snapshot_path, load_snapshot, parse_snapshot

SHIPPED = ROOT / "data" / "snapshot.json"


@pytest.fixture(autouse=True)
def shipped(monkeypatch, tmp_path):
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))


@pytest.fixture(scope="module")
def snap():
    return load_snapshot()


def test_the_shipped_file_is_small_and_read_once(snap):
    assert default_snapshot_path() == SHIPPED and SHIPPED.stat().st_size < 400_000
    assert load_snapshot() is snap and len(snap) >= 40


def test_it_covers_every_family_of_the_config_corpus_and_every_shape_builds(snap):
    corpus = {shape_of(n).family for n in all_config_names()}  # the left-out configs too
    assert corpus <= {e.family for e in snap.entries.values()}
    for repo in snap.repos:
        shape = snap.shape(repo)
        assert shape.params == snap.get(repo).params > 0, repo


def test_sizes_say_where_they_came_from(snap):
    fetched = {e.repo: e.artifacts[0] for e in snap.entries.values() if e.artifacts[0]["size_source"] == "fetched"}
    # exactly the models whose model.safetensors.index.json is in the corpus: metadata.total_size
    assert set(fetched) == {
        "mistralai/Devstral-Small-2507",
        "tiiuae/falcon-180B-chat",
        "ibm-granite/granite-3.1-1b-a400m-instruct",
    }
    assert fetched["mistralai/Devstral-Small-2507"]["size_bytes"] == 47_144_806_400
    assert all(a["how"].startswith("fetched: metadata.total_size") for a in fetched.values())
    for e in snap.entries.values():
        shape = snap.shape(e.repo)
        for a in e.artifacts:
            assert isinstance(a["size_bytes"], int) and a["size_source"] in ("fetched", "computed"), e.repo
            if a["size_source"] != "computed":
                continue
            want = shape.weight_bytes(a["quant"]) if a["format"] == "gguf" else computed_disk_bytes(shape)
            # within 2%: a larger drift means the shape code changed; re-run `explorer snapshot seed` (data/snapshot.md)
            assert abs(a["size_bytes"] - want) <= want // 50, (e.repo, a["name"], a["size_bytes"], want)
    ggufs = [e for e in snap.entries.values() if e.base_model]
    assert len(ggufs) >= 5 and all(snap.get(e.base_model) is not None for e in ggufs)
    assert {a["quant"] for e in ggufs for a in e.artifacts} >= {"Q4_K_M", "Q5_K_M", "Q8_0"}


def test_the_shipped_file_is_what_seed_builds(snap):
    doc = seed(CONFIGS, DATA / "provenance.csv", indexes=DATA / "safetensors_index")
    built = parse_snapshot(doc)
    assert built.repos == snap.repos
    assert all(built.get(r).config == snap.get(r).config for r in snap.repos)
    assert all(built.get(r).companions == snap.get(r).companions for r in snap.repos)
    assert snap.get("nvidia/Llama-3.1-70B-Instruct-FP8").companions  # ModelOpt FP8 needs its hf_quant_config.json
    assert snap.shape("nvidia/Llama-3.1-70B-Instruct-FP8").precision.name != "bf16"


def test_search(snap):
    assert snap.search("qwen3 8b", 3)[0].repo == "Qwen/Qwen3-8B"
    assert snap.search("QWEN/QWEN3-8B")[0].repo == "Qwen/Qwen3-8B"  # case-insensitive, exact id first
    assert {e.repo for e in snap.search("gguf", 50)} >= {"Qwen/Qwen3-8B-GGUF", "bartowski/gemma-2-9b-it-GGUF"}
    mla = snap.search("mla", 50)
    assert "deepseek-ai/DeepSeek-V3" in {e.repo for e in mla} and all(e.family == "mla" for e in mla)
    assert snap.search("llama 70b", 5)[0].repo.lower().startswith(("meta-llama", "nvidia"))
    assert snap.search("no such model anywhere") == [] and len(snap.search("", 7)) == 7
    assert snap.get("qwen/qwen3-8b").repo == "Qwen/Qwen3-8B" and snap.get("nobody/x") is None


def test_a_broken_snapshot_is_a_typed_error_and_offline_misses(tmp_path, monkeypatch):
    bad = tmp_path / "snapshot.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(SnapshotError, match="not an explorer snapshot"):
        load_snapshot(bad)
    monkeypatch.setenv("EXPLORER_SNAPSHOT", str(bad))
    with pytest.raises(OfflineMissError):
        resolve_model("Qwen/Qwen3-8B", offline=True)


def test_refresh_from_the_hub_keeps_old_entries_and_reports_errors(hub_server, tmp_path, monkeypatch):
    base = tmp_path / "base.json"
    shutil.copy(SHIPPED, base)
    out = tmp_path / "fresh.json.gz"
    settings = HubSettings.resolve(endpoint=hub_server.endpoint, timeout_s=5)
    report = refresh(
        [SINGLE, FP8, GGUF, "nobody/nothing"],
        settings=settings,
        max_workers=2,
        out=out,
        base=base,
        progress=lambda *a: None,
    )
    assert report["refreshed"] == sorted([SINGLE, FP8, GGUF]) and list(report["errors"]) == ["nobody/nothing"]
    fresh = load_snapshot(out)
    old = load_snapshot(base)
    assert len(fresh) == len(old) + 2 == report["entries"]  # FP8 was in the snapshot: replaced where it was
    assert fresh.repos.index(FP8) == old.repos.index(FP8) and fresh.get(FP8).source == "hub"
    single = fresh.get(SINGLE)
    assert single.source == "hub" and len(single.sha) == 40 and single.files["model.safetensors"] > 0
    (original,) = single.offered()
    assert original.size_source == "fetched" and original.size_bytes == single.files["model.safetensors"]
    assert fresh.get(FP8).companions and fresh.get(GGUF).gguf_header is not None
    assert {a.quant for a in fresh.get(GGUF).offered()} == {"Q4_K_M"}
    monkeypatch.setenv("EXPLORER_SNAPSHOT", str(out))
    got = resolve_model(SINGLE, offline=True)
    assert got.origin == "snapshot" and got.sha == single.sha and got.shape.params == 106_816
    assert resolve_model(GGUF, offline=True).shape.params > 0  # shaped from the stored header


def test_snapshot_cli(hub_server, tmp_path, capsys, monkeypatch):
    assert main(["snapshot", "list", "--search", "qwen3 8b", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["entries"][0]["repo"] == "Qwen/Qwen3-8B" and listed["count"] >= 2
    assert main(["snapshot", "list"]) == 0
    out = capsys.readouterr().out
    assert "GiB" in out and f"of {len(load_snapshot())} entries" in out
    repos = tmp_path / "repos.txt"
    repos.write_text(f"# test repos\n{SINGLE}\nnobody/nothing  # missing\n")
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)
    monkeypatch.setenv("EXPLORER_SNAPSHOT", str(tmp_path / "none-yet.json"))  # refresh starts from nothing
    code = main(["snapshot", "refresh", "--repos", str(repos), "--out", str(tmp_path / "s.json"), "--workers", "2"])
    out = capsys.readouterr().out
    assert code == 1 and "refreshed 1 of 2" in out and "nobody/nothing: kept the old entry" in out
    assert load_snapshot(tmp_path / "s.json").repos == (SINGLE,)
    assert (
        main(
            [
                "snapshot",
                "seed",
                "--configs",
                str(CONFIGS),
                "--provenance",
                str(DATA / "provenance.csv"),
                "--out",
                str(tmp_path / "seed.json"),
            ]
        )
        == 0
    )
    assert len(load_snapshot(tmp_path / "seed.json")) == len(load_snapshot(SHIPPED))
