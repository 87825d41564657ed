"""Reading weight-file headers from the Hub without downloading the weights.

- safetensors: huggingface_hub's ``HfApi.parse_safetensors_file_metadata``
  per weight file (one ranged GET of the first 100 kB, a second one only for
  headers longer than that), the shards named by ``model.safetensors.index.json``.
- GGUF: ranged GETs of the file's first bytes, grown geometrically until the
  caller's parser stops raising :class:`~explorer.errors.GGUFNeedMoreBytes`.

Both check ``cancel`` between requests and report ``progress(stage, done, total)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import TypeVar

from explorer.errors import GGUFError, GGUFNeedMoreBytes, HubError
from explorer.sources.hub.client import (
    SAFETENSORS_INDEX,
    SAFETENSORS_SINGLE,
    FetchStats,
    HubSettings,
    Progress,
    RepoListing,
    SafetensorsParams,
    _headers,
    check_cancel,
    fetch_repo_listing,
    file_url,
    frozen,
    get_file,
    hub_errors,
    parse_json_file,
)
from explorer.units import MiB

T = TypeVar("T")

#: first GGUF read; most headers fit (a 128k-token vocabulary takes 2 to 8 MiB)
GGUF_FIRST_RANGE_BYTES = 2 * MiB
#: parallel header reads for a sharded safetensors checkpoint
SHARD_WORKERS = 8


def safetensors_files(listing: RepoListing, *, settings: HubSettings) -> list[str]:
    """The weight files huggingface_hub's ``get_safetensors_metadata`` would read, in order.

    The index's shards when ``model.safetensors.index.json`` is listed, else
    ``model.safetensors``, else none.
    """
    if listing.has(SAFETENSORS_INDEX):
        data = get_file(settings, listing.repo_id, listing.sha, SAFETENSORS_INDEX)
        index = parse_json_file(data, where=f"{SAFETENSORS_INDEX} of {listing.repo_id}@{listing.sha[:12]}")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise HubError(f"{SAFETENSORS_INDEX} of {listing.repo_id} has no weight_map")
        return sorted({str(v) for v in weight_map.values()})
    return [SAFETENSORS_SINGLE] if listing.has(SAFETENSORS_SINGLE) else []


def fetch_safetensors_params(
    repo_id: str,
    sha: str,
    *,
    listing: RepoListing | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    timeout_s: float | None = None,
    settings: HubSettings | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> SafetensorsParams | None:
    """Parameter counts per dtype from every safetensors header of the checkpoint; None if it has none.

    ``listing`` (of the same sha) saves one request and supplies file sizes.
    """
    from huggingface_hub import HfApi

    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    listing = listing or fetch_repo_listing(repo_id, sha, settings=s)
    files = safetensors_files(listing, settings=s)
    if not files:
        return None
    api = HfApi(endpoint=s.endpoint, library_name="explorer")

    def one(name: str):
        with hub_errors(s, repo_id, name, sha):
            return api.parse_safetensors_file_metadata(repo_id, name, revision=sha, token=s.token, timeout=s.timeout_s)

    by_dtype: dict[str, int] = {}
    done = 0
    with ThreadPoolExecutor(max_workers=min(SHARD_WORKERS, len(files)), thread_name_prefix="safetensors") as pool:
        pending = {pool.submit(one, name) for name in files}
        try:
            while pending:
                finished, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
                check_cancel(cancel, f"the safetensors headers of {repo_id}")
                for fut in finished:
                    for dtype, n in fut.result().parameter_count.items():
                        by_dtype[dtype] = by_dtype.get(dtype, 0) + n
                    done += 1
                    if progress:
                        progress("safetensors headers", done, len(files))
        finally:
            for fut in pending:
                fut.cancel()
    sizes = {name: (f.size_bytes if (f := listing.file(name)) else 0) for name in files}
    return SafetensorsParams(
        total_params=sum(by_dtype.values()), params_by_dtype=frozen(dict(sorted(by_dtype.items()))), files=frozen(sizes)
    )


def read_range(s: HubSettings, repo_id: str, sha: str, filename: str, start: int, end: int) -> bytes:
    """Bytes ``start..end`` (inclusive) of a file, streamed so that a server ignoring Range costs no more."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    want = end - start + 1
    url = file_url(s, repo_id, sha, filename)
    with hub_errors(s, repo_id, filename, sha):
        headers = _headers(s, {"Range": f"bytes={start}-{end}"})
        with get_session().stream("GET", url, headers=headers, timeout=s.timeout_s) as r:
            hf_raise_for_status(r)
            skip = start if r.status_code == 200 else 0  # Range ignored: the body starts at byte 0
            out = bytearray()
            for chunk in r.iter_bytes():
                out += chunk
                if len(out) >= skip + want:
                    break
    return bytes(out[skip : skip + want])


def fetch_gguf_header_bytes(
    repo_id: str,
    sha: str,
    filename: str,
    *,
    size_bytes: int,
    parse: Callable[[bytes], T],
    first_range: int = GGUF_FIRST_RANGE_BYTES,
    token: str | None = None,
    endpoint: str | None = None,
    timeout_s: float | None = None,
    settings: HubSettings | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> tuple[T, FetchStats]:
    """Parse a GGUF header from the start of the file, reading only as much as the header needs.

    Reads ``first_range`` bytes (or the whole file when smaller) and calls
    ``parse(prefix)``. On ``GGUFNeedMoreBytes(have, needed_total)`` it reads
    on to at least ``needed_total`` and at least double the prefix, capped
    at ``size_bytes``, and parses again. Only the new bytes are requested.
    Returns the parser's result and what the reads moved.
    """
    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    if size_bytes <= 0:
        raise GGUFError(f"{filename} in {repo_id} is empty ({size_bytes} bytes)")
    prefix, requests = b"", 0
    want = min(max(first_range, 1), size_bytes)
    while True:
        check_cancel(cancel, f"the GGUF header of {filename}")
        if want > len(prefix):
            got = read_range(s, repo_id, sha, filename, len(prefix), want - 1)
            requests += 1
            if not got:
                raise HubError(f"the Hub sent no bytes of {filename} from offset {len(prefix):,}")
            prefix += got
        if progress:
            progress(f"GGUF header {filename}", len(prefix), want)
        try:
            return parse(prefix), FetchStats(bytes_read=len(prefix), requests=requests)
        except GGUFNeedMoreBytes as e:
            if len(prefix) >= size_bytes:
                raise GGUFError(
                    f"{filename} ends at {size_bytes:,} bytes but its header needs at least {e.needed_total:,}",
                    hint="the file is truncated or not GGUF",
                ) from e
            want = min(size_bytes, max(e.needed_total, 2 * len(prefix)))
