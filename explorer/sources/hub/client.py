"""Reading a repo's listing and its small files (config.json and companions) from the Hub.

Each fetcher takes a repo id and a revision (a resolved commit sha where it
has one) and returns a small frozen record (:mod:`explorer.sources.hub.records`);
every failure becomes one of the typed errors of :mod:`explorer.errors`
(:func:`explorer.sources.hub.errors.hub_errors`). Requests go through
:func:`explorer.sources.hub.http.get`, bounded in time (the resolution's
deadline), size and retries. An answer that is not the JSON the Hub sends
(an HTML page, bytes that are not UTF-8, a listing without its fields) is a
:class:`~explorer.errors.HubResponseError`, which the resolver answers from
the cache or the snapshot.

Settings (:class:`explorer.sources.hub.settings.HubSettings`) come from the
arguments first, then the environment: ``HF_ENDPOINT``, ``HF_TOKEN``,
``HF_HUB_OFFLINE``. A token only ever travels in the ``Authorization``
header: it is kept out of messages, reprs, logs and the cache.

Weight headers (safetensors, GGUF) are read in :mod:`explorer.sources.hub.weights`;
whole repos, one or many at once, in :mod:`explorer.sources.hub.many`.
"""

from __future__ import annotations

import re
from typing import Any

from explorer.errors import ConfigError, HubFileNotFoundError, HubResponseError
from explorer.limits import load_json
from explorer.sources.hub.errors import hub_errors
from explorer.sources.hub.http import file_url, get, model_info_url, validate_repo_id
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
#: the most read of a listing (a repo of 10,000 files answers about 2 MB)
MAX_LISTING_BYTES = 64 * 1024 * 1024
#: files a listing may hold (the Hub's largest model repos have a few thousand)
MAX_LISTING_FILES = 100_000
_SHA = re.compile(r"[0-9a-f]{40}")


def get_file(s: HubSettings, repo_id: str, revision: str, filename: str) -> bytes:
    """A small file (config, index) whole, streamed; over MAX_SMALL_FILE_BYTES is a HubResponseError."""
    s = s.started()
    with hub_errors(s, repo_id, filename, revision):
        url = file_url(s, repo_id, revision, filename)
        return get(
            s, url, what=f"{filename} of {repo_id}", max_bytes=MAX_SMALL_FILE_BYTES, too_long="not a config"
        ).body


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
    s = (settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)).started()
    what = f"the file listing of {repo_id}"
    with hub_errors(s, repo_id, "the file listing", revision):
        validate_repo_id(repo_id)
        url = model_info_url(s, repo_id, revision) + "?blobs=true"
        body = get(s, url, what=what, max_bytes=MAX_LISTING_BYTES, too_long="too long for a listing").body
    info = load_json(body, where=f"{what} from {s.endpoint}", error=HubResponseError)
    return listing_from_info(info, repo_id, revision, where=f"{what} from {s.endpoint}")


def listing_from_info(info: Any, repo_id: str, revision: str | None, *, where: str) -> RepoListing:
    """The listing in a model-info answer, every field checked; HubResponseError when it is not one."""
    siblings = info.get("siblings") if isinstance(info, dict) else None
    sha = info.get("sha") if isinstance(info, dict) else None
    if not isinstance(siblings, list) or not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise HubResponseError(f"{where} is not a model's info (no commit sha or no file list)")
    if len(siblings) > MAX_LISTING_FILES:
        raise HubResponseError(f"{where} lists {len(siblings):,} files; the most accepted is {MAX_LISTING_FILES:,}")
    files = []
    for x in siblings:
        path = x.get("rfilename") if isinstance(x, dict) else None
        size = x.get("size") or 0 if isinstance(x, dict) else None
        if not isinstance(path, str) or not path or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise HubResponseError(f"{where} holds a file entry without a name or a size ≥ 0")
        files.append(RepoFile(path=path, size_bytes=size, lfs=bool(x.get("lfs"))))
    return RepoListing(
        repo_id=repo_id,
        revision=revision or "main",
        sha=sha,
        gated=bool(info.get("gated")),
        private=bool(info.get("private")),
        files=tuple(files),
    )


def parse_json_file(data: bytes, *, where: str) -> dict:
    """Parse a JSON object leniently (NaN and Infinity allowed, as Python's json does); else ConfigError.

    Text that is not UTF-8, not JSON or nested deeper than ``explorer.limits.MAX_JSON_DEPTH`` is a ConfigError.
    """
    value = load_json(
        data, where=where, error=ConfigError, hint="the repo's file is malformed; pass a local config.json instead"
    )
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
    except HubFileNotFoundError:
        return None
    return parse_json_file(data, where=f"{filename} of {repo_id}@{sha[:12]}")


def fetch_companions(listing: RepoListing, *, settings: HubSettings) -> dict[str, dict]:
    """The quantisation companions (``hf_quant_config.json``...) the listing shows, parsed, by file name."""
    out = {}
    for name in COMPANION_FILES:
        if listing.has(name):
            data = get_file(settings, listing.repo_id, listing.sha, name)
            out[name] = parse_json_file(data, where=f"{name} of {listing.repo_id}@{listing.sha[:12]}")
    return out
