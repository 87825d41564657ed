"""The test Hub answers huggingface_hub's own calls the way the Hub does.

Each test drives huggingface_hub 2.x itself (no explorer code) against
``hubserver``, so that explorer's tests exercise real client behaviour.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download
from huggingface_hub import errors as hfe
from support.corpus import TESTS
from support.hub_fixtures import GATED, GATED_TOKEN, GGUF, GGUF_FILES, PRIVATE, PRIVATE_TOKEN, SHARDED, SINGLE
from support.hubserver import HubServer


def _get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A raw request (urllib: no client logic in the way)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_model_info_lists_files_with_sizes_lfs_and_the_commit(hub_server):
    info = HfApi(endpoint=hub_server.endpoint).model_info(SINGLE, files_metadata=True)
    sizes = {s.rfilename: (s.size, s.lfs is not None) for s in info.siblings}
    assert sizes["config.json"][1] is False
    assert sizes["model.safetensors"] == (215_784, True)
    assert len(info.sha) == 40
    # the same sha answers as a revision, and downloads carry it
    assert HfApi(endpoint=hub_server.endpoint).model_info(SINGLE, revision=info.sha).sha == info.sha
    status, headers, _ = _get(f"{hub_server.endpoint}/{SINGLE}/resolve/main/config.json")
    assert status == 200 and headers["X-Repo-Commit"] == info.sha and headers["ETag"]


def test_sha_is_deterministic_and_follows_the_files(hub_root, new_hub_server):
    a, b = new_hub_server(), new_hub_server()
    sha = HfApi(endpoint=a.endpoint).model_info(SINGLE).sha
    assert HfApi(endpoint=b.endpoint).model_info(SINGLE).sha == sha
    c = new_hub_server(copy=True)
    assert HfApi(endpoint=c.endpoint).model_info(SINGLE).sha == sha
    (c.root / SINGLE / "README.md").write_text("changed\n")
    assert HfApi(endpoint=c.endpoint).model_info(SINGLE).sha != sha


def test_tree_and_paths_info(hub_server):
    api = HfApi(endpoint=hub_server.endpoint)
    tree = {e.path: e for e in api.list_repo_tree(SHARDED, recursive=True)}
    assert "model.safetensors.index.json" in tree and tree["model-00001-of-00003.safetensors"].lfs is not None
    infos = api.get_paths_info(SHARDED, ["config.json", "nope.txt"])
    assert [i.path for i in infos] == ["config.json"]


def test_hf_hub_download_and_file_system_work(hub_server, tmp_path):
    path = hf_hub_download(SINGLE, "config.json", cache_dir=tmp_path, endpoint=hub_server.endpoint)
    assert json.loads(Path(path).read_text())["model_type"] == "llama"
    fs = HfFileSystem(endpoint=hub_server.endpoint, skip_instance_cache=True)
    assert {Path(p).name for p in fs.ls(SINGLE, detail=False)} == {"config.json", "model.safetensors"}
    assert fs.info(f"{SINGLE}/model.safetensors")["size"] == 215_784
    with fs.open(f"{SINGLE}/model.safetensors", "rb", block_size=0) as f:
        assert len(f.read(8)) == 8


def test_get_safetensors_metadata_single_and_sharded(hub_server, tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))  # it downloads the index
    for repo in (SINGLE, SHARDED):
        meta = HfApi(endpoint=hub_server.endpoint).get_safetensors_metadata(repo)
        assert meta.parameter_count == {"BF16": 106_816}  # 2 layers of a 64-wide llama, vocab 256
    assert HfApi(endpoint=hub_server.endpoint).get_safetensors_metadata(SHARDED).sharded


def test_range_requests(hub_server):
    url = f"{hub_server.endpoint}/{GGUF}/resolve/main/tiny-Q4_K_M.gguf"
    size = GGUF_FILES["tiny-Q4_K_M.gguf"][1]
    status, headers, body = _get(url, {"Range": "bytes=0-9"})
    assert (status, headers["Content-Range"], body[:4]) == (206, f"bytes 0-9/{size}", b"GGUF")
    assert headers["X-Linked-Size"] == str(size) and headers["X-Linked-Etag"]
    status, headers, body = _get(url, {"Range": "bytes=-4"})
    assert status == 206 and len(body) == 4 and headers["Content-Range"] == f"bytes {size - 4}-{size - 1}/{size}"
    status, headers, _ = _get(url, {"Range": f"bytes={size}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{size}"


@pytest.mark.parametrize(
    ("path", "headers", "status", "code"),
    [
        ("/api/models/nobody/nothing", {}, 401, "RepoNotFound"),
        ("/api/models/nobody/nothing", {"Authorization": "Bearer x"}, 404, "RepoNotFound"),
        (f"/api/models/{SINGLE}/revision/v9", {}, 404, "RevisionNotFound"),
        (f"/{SINGLE}/resolve/main/missing.txt", {}, 404, "EntryNotFound"),
        (f"/{GATED}/resolve/main/config.json", {}, 401, "GatedRepo"),
        (f"/{GATED}/resolve/main/config.json", {"Authorization": "Bearer wrong"}, 403, "GatedRepo"),
        (f"/{GATED}/resolve/main/config.json", {"Authorization": f"Bearer {GATED_TOKEN}"}, 200, None),
        (f"/api/models/{GATED}", {}, 200, None),  # a gated repo's card and listing stay public, as on the Hub
        (f"/api/models/{PRIVATE}", {}, 401, "RepoNotFound"),
        (f"/api/models/{PRIVATE}", {"Authorization": f"Bearer {PRIVATE_TOKEN}"}, 200, None),
    ],
)
def test_errors_answer_like_the_hub(hub_server, path, headers, status, code):
    got, h, _ = _get(hub_server.endpoint + path, headers)
    assert got == status
    assert h.get("X-Error-Code") == code


def test_huggingface_hub_maps_the_error_codes(hub_server):
    api = HfApi(endpoint=hub_server.endpoint)
    with pytest.raises(hfe.RepositoryNotFoundError):
        api.model_info("nobody/nothing", token=False)
    with pytest.raises(hfe.RevisionNotFoundError):
        api.model_info(SINGLE, revision="v9")
    with pytest.raises(hfe.GatedRepoError):
        api.hf_hub_download(GATED, "config.json", token=False)
    assert api.model_info(GATED).gated == "manual"
    assert [b.name for b in api.list_repo_refs(SINGLE).branches] == ["main"]


def test_slow_mode_and_counters(new_hub_server):
    server = new_hub_server()
    url = f"{server.endpoint}/{GGUF}/resolve/main/tiny-Q4_K_M.gguf"
    with server.slow(0.3, "/resolve/"):
        t0 = time.monotonic()
        _get(url, {"Range": "bytes=0-999"})
        assert time.monotonic() - t0 >= 0.3
    t0 = time.monotonic()
    _get(f"{server.endpoint}/api/models/{SINGLE}")
    assert time.monotonic() - t0 < 0.3
    assert server.stats.total_bytes("tiny-Q4_K_M.gguf") == 1000
    assert server.stats.total_requests() == 2
    assert server.stats.log[0] == ("GET", f"/{GGUF}/resolve/main/tiny-Q4_K_M.gguf", "bytes=0-999", 206)


def test_script_mode(hub_root, tmp_path):
    port_file = tmp_path / "port"
    script = TESTS / "support" / "hubserver.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--root", str(hub_root), "--port", "0", "--port-file", str(port_file)],
        stdout=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        endpoint = f"http://127.0.0.1:{port_file.read_text()}"
        assert HfApi(endpoint=endpoint).model_info(SINGLE).id == SINGLE
        status, _, body = _get(f"{endpoint}/_hubserver/stats")
        assert status == 200 and json.loads(body)["requests"][f"/api/models/{SINGLE}"] == 1
    finally:
        proc.terminate()
        proc.wait(5)


def test_context_manager_frees_the_port(hub_root):
    with HubServer(hub_root) as server:
        assert _get(f"{server.endpoint}/api/models/{SINGLE}")[0] == 200
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{server.endpoint}/api/models/{SINGLE}", timeout=2)


def test_sparse_files_cost_no_disk(hub_root):
    gguf = hub_root / GGUF / "big-vocab-Q8_0.gguf"
    assert gguf.stat().st_size == 3 << 30
    assert os.stat(gguf).st_blocks * 512 < 64 << 20
