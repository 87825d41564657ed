"""The edge that talks to the Hugging Face Hub, through huggingface_hub only.

Each fetcher takes a repo id and a revision (a resolved commit sha where it
has one) and returns a small frozen record; every failure becomes one of the
typed errors of :mod:`explorer.errors`. Requests go through huggingface_hub's
shared HTTP session with an explicit timeout and no retries, so a dead or
slow Hub fails within ``timeout_s`` (``hf_hub_download`` retries a timed-out
metadata call for up to a minute, which is why it is not used here).

Settings come from the arguments first, then the environment: ``HF_ENDPOINT``,
``HF_TOKEN``, ``HF_HUB_OFFLINE``. A token only ever travels in the
``Authorization`` header: it is kept out of messages, reprs, logs and the cache.

huggingface_hub (0.3 s to import) is imported on first use, so the records
here are cheap to import. Weight headers (safetensors, GGUF) are read in
:mod:`explorer.sources.hub.weights`; whole repos, one or many at once, in
:mod:`explorer.sources.hub.many`. Their public names are importable from here too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from explorer.errors import ConfigError, HubError
from explorer.sources.hub.errors import check_cancel, hub_errors

__all__ = [  # noqa: F822  (the fetchers of hub_weights and hub_many load on first use: see __getattr__)
    "HubSettings", "RepoFile", "RepoListing", "SafetensorsParams", "FetchStats", "fetch_repo_listing",
    "fetch_config", "fetch_companions", "fetch_safetensors_params", "fetch_gguf_header_bytes", "fetch_model",
    "fetch_many", "RepoFetch", "ManyResult", "check_cancel", "hub_errors",
]  # fmt: skip

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0
CONFIG_FILE = "config.json"
#: the most read of a JSON file (a 405B model's safetensors index is about 2 MB)
MAX_SMALL_FILE_BYTES = 64 * 1024 * 1024
#: quantisation companions read next to config.json when the repo lists them
COMPANION_FILES = ("hf_quant_config.json", "quantization_config.json")
SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"

#: progress callback: (stage, done, total)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class HubSettings:
    """Where and how to reach the Hub.

    Attributes:
        endpoint: base URL, e.g. ``https://huggingface.co`` (no trailing slash).
        timeout_s: seconds to wait for each answer before giving up.
        offline: when true, no request is made and fetchers raise OfflineMissError.
        token: the access token, or None to let huggingface_hub use a saved login.
            Never shown: excluded from the repr.
    """

    endpoint: str = DEFAULT_ENDPOINT
    timeout_s: float = DEFAULT_TIMEOUT_S
    offline: bool = False
    token: str | None = field(default=None, repr=False)

    @classmethod
    def resolve(
        cls,
        *,
        token: str | None = None,
        endpoint: str | None = None,
        timeout_s: float | None = None,
        offline: bool | None = None,
    ) -> HubSettings:
        """Arguments first, then ``HF_TOKEN``, ``HF_ENDPOINT``, ``HF_HUB_OFFLINE``, then defaults."""
        env = os.environ
        if offline is None:
            offline = env.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
        return cls(
            endpoint=(endpoint or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s),
            offline=offline,
            token=token or env.get("HF_TOKEN") or None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoFile:
    """One file of a repo at a commit.

    Attributes:
        path: path inside the repo, ``/``-separated.
        size_bytes: file size in bytes (for LFS files, the real size, not the pointer's).
        lfs: whether the Hub stores it in LFS (weights usually are).
    """

    path: str
    size_bytes: int
    lfs: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoListing:
    """A repo's files at one resolved commit.

    Attributes:
        repo_id: ``org/name``.
        revision: the revision asked for (``main`` when none was given).
        sha: the 40-hex commit it resolved to.
        gated: whether downloads need an accepted licence and a token.
        private: whether the repo is private.
        files: every file, in the Hub's order.
    """

    repo_id: str
    revision: str
    sha: str
    gated: bool = False
    private: bool = False
    files: tuple[RepoFile, ...] = ()

    def file(self, path: str) -> RepoFile | None:
        """The file at ``path``, or None."""
        return next((f for f in self.files if f.path == path), None)

    def has(self, path: str) -> bool:
        return self.file(path) is not None

    @property
    def gguf_files(self) -> tuple[RepoFile, ...]:
        return tuple(f for f in self.files if f.path.lower().endswith(".gguf"))

    @property
    def total_size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)


@dataclass(frozen=True, slots=True, kw_only=True)
class SafetensorsParams:
    """Parameter counts read from the safetensors headers of a checkpoint.

    Attributes:
        total_params: parameters over all tensors (a count, not bytes).
        params_by_dtype: parameters per safetensors dtype name (``BF16``, ``F8_E4M3``...).
        files: each weight file read -> its size in bytes.
    """

    total_params: int
    params_by_dtype: Mapping[str, int]
    files: Mapping[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchStats:
    """What one read moved over the network.

    Attributes:
        bytes_read: body bytes received.
        requests: HTTP requests made.
    """

    bytes_read: int
    requests: int


def _headers(s: HubSettings, extra: dict[str, str] | None = None) -> dict[str, str]:
    from huggingface_hub.utils import build_hf_headers

    return {**build_hf_headers(token=s.token, library_name="explorer"), **(extra or {})}


def file_url(s: HubSettings, repo_id: str, revision: str, filename: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, filename, revision=revision, endpoint=s.endpoint)


def get_file(s: HubSettings, repo_id: str, revision: str, filename: str) -> bytes:
    """A small file (config, index) whole, through the shared session; over MAX_SMALL_FILE_BYTES is a HubError."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    out = bytearray()
    with hub_errors(s, repo_id, filename, revision):
        url = file_url(s, repo_id, revision, filename)
        with get_session().stream("GET", url, headers=_headers(s), timeout=s.timeout_s) as r:
            hf_raise_for_status(r)
            for chunk in r.iter_bytes():
                out += chunk
                if len(out) > MAX_SMALL_FILE_BYTES:
                    raise HubError(f"{filename} of {repo_id} is over {MAX_SMALL_FILE_BYTES:,} bytes; not a config")
    return bytes(out)


# --- fetchers --------------------------------------------------------------------------------


def fetch_repo_listing(
    repo_id: str,
    revision: str | None = None,
    *,
    token: str | None = None,
    endpoint: str | None = None,
    timeout_s: float | None = None,
    settings: HubSettings | None = None,
) -> RepoListing:
    """The files (with sizes), resolved commit sha and gated/private flags of a repo.

    One ``HfApi.model_info(files_metadata=True)`` call.
    """
    from huggingface_hub import HfApi

    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    with hub_errors(s, repo_id, "the file listing", revision):
        info = HfApi(endpoint=s.endpoint, library_name="explorer").model_info(
            repo_id, revision=revision, files_metadata=True, timeout=s.timeout_s, token=s.token
        )
    files = tuple(
        RepoFile(path=x.rfilename, size_bytes=int(x.size or 0), lfs=x.lfs is not None) for x in info.siblings or ()
    )
    return RepoListing(
        repo_id=repo_id,
        revision=revision or "main",
        sha=info.sha,
        gated=bool(info.gated),
        private=bool(info.private),
        files=files,
    )


def parse_json_file(data: bytes, *, where: str) -> dict:
    """Parse a JSON object leniently (NaN and Infinity allowed, as Python's json does); else ConfigError."""
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError(
            f"{where} is not JSON ({e})", hint="the repo's file is malformed; pass a local config.json instead"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where} holds a JSON {type(value).__name__}, not an object")
    return value


def fetch_config(
    repo_id: str,
    sha: str,
    *,
    filename: str = CONFIG_FILE,
    token: str | None = None,
    endpoint: str | None = None,
    timeout_s: float | None = None,
    settings: HubSettings | None = None,
) -> dict | None:
    """A JSON file of the repo at ``sha`` (``config.json`` by default), parsed; None when absent."""
    from huggingface_hub import errors as hfe

    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    try:
        data = get_file(s, repo_id, sha, filename)
    except HubError as e:
        if isinstance(e.__cause__, hfe.RemoteEntryNotFoundError):
            return None
        raise
    return parse_json_file(data, where=f"{filename} of {repo_id}@{sha[:12]}")


def fetch_companions(listing: RepoListing, *, settings: HubSettings) -> dict[str, dict]:
    """The quantisation companions (``hf_quant_config.json``...) the listing shows, parsed, by file name."""
    out = {}
    for name in COMPANION_FILES:
        if listing.has(name):
            data = get_file(settings, listing.repo_id, listing.sha, name)
            out[name] = parse_json_file(data, where=f"{name} of {listing.repo_id}@{listing.sha[:12]}")
    return out


def frozen(d: dict) -> Mapping:
    """A read-only view, for records."""
    return MappingProxyType(dict(d))


_ELSEWHERE = {
    "fetch_safetensors_params": "explorer.sources.hub.weights",
    "fetch_gguf_header_bytes": "explorer.sources.hub.weights",
    "fetch_model": "explorer.sources.hub.many",
    "fetch_many": "explorer.sources.hub.many",
    "RepoFetch": "explorer.sources.hub.many",
    "ManyResult": "explorer.sources.hub.many",
}


def __getattr__(name: str):
    """``from explorer.sources.hub.client import fetch_many`` works without a circular import."""
    if name in _ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
