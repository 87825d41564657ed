"""Reading a repo's listing and its small files (config.json and companions) from the Hub.

Each fetcher takes a repo id and a revision (a resolved commit sha where it
has one) and returns a small frozen record (:mod:`explorer.sources.hub.records`);
every failure becomes one of the typed errors of :mod:`explorer.errors`
(:func:`explorer.sources.hub.errors.hub_errors`). Requests go through the one
HTTP client of :mod:`explorer.sources.hub.http`, with an explicit timeout and
no retries, so a dead or slow Hub fails within ``timeout_s``.

Settings (:class:`explorer.sources.hub.settings.HubSettings`) come from the
arguments first, then the environment: ``HF_ENDPOINT``, ``HF_TOKEN``,
``HF_HUB_OFFLINE``. A token only ever travels in the ``Authorization``
header: it is kept out of messages, reprs, logs and the cache.

Weight headers (safetensors, GGUF) are read in :mod:`explorer.sources.hub.weights`;
whole repos, one or many at once, in :mod:`explorer.sources.hub.many`.
"""

from __future__ import annotations

import json

from explorer.errors import ConfigError, HubError
from explorer.sources.hub.errors import hub_errors
from explorer.sources.hub.http import client, file_url, headers, model_info_url, raise_for_status, validate_repo_id
from explorer.sources.hub.records import COMPANION_FILES, CONFIG_FILE, RepoFile, RepoListing
from explorer.sources.hub.settings import HubSettings

__all__ = [
    "MAX_SMALL_FILE_BYTES",
    "fetch_companions",
    "fetch_config",
    "fetch_repo_listing",
    "get_file",
    "parse_json_file",
]

#: the most read of a JSON file (a 405B model's safetensors index is about 2 MB)
MAX_SMALL_FILE_BYTES = 64 * 1024 * 1024


def get_file(s: HubSettings, repo_id: str, revision: str, filename: str) -> bytes:
    """A small file (config, index) whole, streamed; over MAX_SMALL_FILE_BYTES is a HubError."""
    out = bytearray()
    with hub_errors(s, repo_id, filename, revision):
        url = file_url(s, repo_id, revision, filename)
        with client().stream("GET", url, headers=headers(s), timeout=s.timeout_s) as r:
            raise_for_status(r)
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

    One request: the model's info with file metadata (``?blobs=true``), as
    ``HfApi.model_info(files_metadata=True)`` asks for it.
    """
    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    with hub_errors(s, repo_id, "the file listing", revision):
        validate_repo_id(repo_id)
        r = client().get(
            model_info_url(s, repo_id, revision), params={"blobs": True}, headers=headers(s), timeout=s.timeout_s
        )
        raise_for_status(r)
        info = r.json()
    files = tuple(
        RepoFile(path=x["rfilename"], size_bytes=int(x.get("size") or 0), lfs=bool(x.get("lfs")))
        for x in info.get("siblings") or ()
    )
    return RepoListing(
        repo_id=repo_id,
        revision=revision or "main",
        sha=info.get("sha"),
        gated=bool(info.get("gated")),
        private=bool(info.get("private")),
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
    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    try:
        data = get_file(s, repo_id, sha, filename)
    except HubError as e:
        from huggingface_hub import errors as hfe  # loaded already: the failure was classified with it

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
