"""The Hub client's contract: explorer's client and huggingface_hub's ``HfApi`` read the same local test Hub the
same way: the same files, sizes and commits, the same safetensors counts and config.json, the same token found
the same places, the same endpoint and offline switch from the environment, and the same failures as each
library's error class. explorer keeps its own client for its deadline, byte caps and start-up time (it reads a
GGUF header's prefix in ranges and imports no huggingface_hub to plan offline); this test holds it to the
reference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub import errors as hfe
from support.hub_fixtures import GATED, GATED_TOKEN, PRIVATE, PRIVATE_TOKEN, SHARDED, SINGLE

from explorer import errors as ee
from explorer.sources.hub.client import fetch_config, fetch_repo_listing, get_file
from explorer.sources.hub.http import headers
from explorer.sources.hub.settings import HubSettings, env_true
from explorer.sources.hub.weights import fetch_safetensors_params


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """huggingface_hub's cache and saved-login paths in tmp_path (it reads them at import: set the constants)."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "token"))
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "token"))
    return tmp_path


@pytest.mark.parametrize("repo", [SINGLE, SHARDED, GATED])
def test_the_same_files_sizes_commit_and_flags(hub_endpoint, hf_cache, repo):
    ours = fetch_repo_listing(repo)
    theirs = HfApi(endpoint=hub_endpoint).model_info(repo, files_metadata=True)
    assert ours.sha == theirs.sha
    assert {f.path: (f.size_bytes, f.lfs) for f in ours.files} == {
        s.rfilename: (s.size, s.lfs is not None) for s in theirs.siblings
    }
    assert ours.gated == bool(theirs.gated) and ours.private == bool(theirs.private)
    # a resolved commit answers as a revision in both
    assert (
        fetch_repo_listing(repo, ours.sha).sha == HfApi(endpoint=hub_endpoint).model_info(repo, revision=ours.sha).sha
    )


@pytest.mark.parametrize("repo", [SINGLE, SHARDED])
def test_the_same_safetensors_counts_and_config(hub_endpoint, hf_cache, repo):
    sha = fetch_repo_listing(repo).sha
    ours = fetch_safetensors_params(repo, sha)
    theirs = HfApi(endpoint=hub_endpoint).get_safetensors_metadata(repo, revision=sha)
    assert dict(ours.params_by_dtype) == theirs.parameter_count == {"BF16": 106_816}
    assert set(ours.files) == set(theirs.files_metadata)
    path = hf_hub_download(repo, "config.json", revision=sha, cache_dir=hf_cache / "hub", endpoint=hub_endpoint)
    assert fetch_config(repo, sha) == json.loads(Path(path).read_text())


def test_the_same_token_from_the_environment_and_the_saved_login(hub_endpoint, hf_cache, monkeypatch):
    # HF_TOKEN: both send it and read the gated config
    monkeypatch.setenv("HF_TOKEN", GATED_TOKEN)
    sha = fetch_repo_listing(GATED).sha
    assert fetch_config(GATED, sha)["model_type"] == "llama"
    hf_hub_download(GATED, "config.json", revision=sha, cache_dir=hf_cache / "a", endpoint=hub_endpoint)
    # a saved login (huggingface-cli login's token file), no HF_TOKEN: both find it
    monkeypatch.delenv("HF_TOKEN")
    (hf_cache / "token").write_text(PRIVATE_TOKEN + "\n")
    assert fetch_repo_listing(PRIVATE).private and HfApi(endpoint=hub_endpoint).model_info(PRIVATE).private
    assert headers(HubSettings.resolve())["authorization"] == f"Bearer {PRIVATE_TOKEN}"
    # HF_HUB_DISABLE_IMPLICIT_TOKEN: neither sends the saved one
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_DISABLE_IMPLICIT_TOKEN", True)
    with pytest.raises(ee.RepoNotFoundError):
        fetch_repo_listing(PRIVATE)
    with pytest.raises(hfe.RepositoryNotFoundError):
        HfApi(endpoint=hub_endpoint).model_info(PRIVATE)


#: (what fails, explorer's call, huggingface_hub's call, explorer's error class, huggingface_hub's)
FAILURES = [
    ("no such repo", lambda: fetch_repo_listing("nobody/nothing"),
     lambda e: HfApi(endpoint=e).model_info("nobody/nothing", token=False),
     ee.RepoNotFoundError, hfe.RepositoryNotFoundError),
    ("no such revision", lambda: fetch_repo_listing(SINGLE, "v9"),
     lambda e: HfApi(endpoint=e).model_info(SINGLE, revision="v9"),
     ee.RevisionNotFoundError, hfe.RevisionNotFoundError),
    ("no such file", lambda: get_file(HubSettings.resolve(), SINGLE, "main", "missing.json"),
     lambda e: HfApi(endpoint=e).hf_hub_download(SINGLE, "missing.json"),
     ee.HubFileNotFoundError, hfe.EntryNotFoundError),
    ("gated, no token", lambda: fetch_config(GATED, "main"),
     lambda e: HfApi(endpoint=e).hf_hub_download(GATED, "config.json", token=False),
     ee.GatedRepoError, hfe.GatedRepoError),
]  # fmt: skip


@pytest.mark.parametrize(("what", "ours", "theirs", "our_error", "their_error"), FAILURES, ids=[f[0] for f in FAILURES])
def test_the_same_failures_as_each_librarys_error(hub_endpoint, hf_cache, what, ours, theirs, our_error, their_error):
    with pytest.raises(our_error):
        ours()
    with pytest.raises(their_error):
        theirs(hub_endpoint)


def test_offline_neither_asks(hub_endpoint, hf_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ee.OfflineMissError):
        fetch_repo_listing(SINGLE)
    with pytest.raises(hfe.OfflineModeIsEnabled):
        HfApi(endpoint=hub_endpoint).model_info(SINGLE)


def test_the_environment_reads_the_same(monkeypatch):
    """HF_ENDPOINT and HF_HUB_OFFLINE as huggingface_hub reads them at import (a fresh interpreter each)."""
    cases = [("HF_HUB_OFFLINE", v) for v in ("1", "true", "YES", "on", "0", "false", "", "maybe")]
    cases += [("HF_ENDPOINT", "http://127.0.0.1:9/"), ("HF_ENDPOINT", "https://hf-mirror.example")]
    probe = (
        "import importlib, json, os, sys\n"
        "from huggingface_hub import constants\n"
        "out = []\n"
        "for name, value in json.loads(sys.argv[1]):\n"
        "    os.environ[name] = value\n"
        "    importlib.reload(constants)\n"
        "    out.append(constants.HF_HUB_OFFLINE if name == 'HF_HUB_OFFLINE' else constants.ENDPOINT)\n"
        "    del os.environ[name]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(cases)], capture_output=True, text=True, timeout=60)
    theirs = json.loads(done.stdout)
    ours = []
    for name, value in cases:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_ENDPOINT", raising=False)
        monkeypatch.setenv(name, value)
        ours.append(env_true(name) if name == "HF_HUB_OFFLINE" else HubSettings.resolve().endpoint)
    assert ours == theirs
