"""Reading weight-file headers from the Hub without downloading the weights.

- safetensors: per weight file, one ranged GET of the first 100 kB and a
  second one only for headers longer than that (as huggingface_hub's
  ``HfApi.parse_safetensors_file_metadata`` reads them, with its checks and
  messages), the shards named by ``model.safetensors.index.json``, read in
  parallel.
- GGUF: ranged GETs of the file's first bytes, grown geometrically until the
  caller's parser stops raising :class:`~explorer.errors.GGUFNeedMoreBytes`.

Both check ``cancel`` between requests and report ``progress(stage, done, total)``.
"""

from __future__ import annotations

import json
import math
import struct
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import TypeVar

from explorer.errors import GGUFError, GGUFNeedMoreBytes, HubError
from explorer.sources.hub.client import fetch_repo_listing, get_file, parse_json_file
from explorer.sources.hub.errors import check_cancel, hub_errors
from explorer.sources.hub.http import client, file_url, headers, raise_for_status, validate_repo_id
from explorer.sources.hub.records import (
    SAFETENSORS_INDEX,
    SAFETENSORS_SINGLE,
    FetchStats,
    Progress,
    RepoListing,
    SafetensorsParams,
    frozen,
)
from explorer.sources.hub.settings import HubSettings
from explorer.units import MiB

T = TypeVar("T")

#: first GGUF read; most headers fit (a 128k-token vocabulary takes 2 to 8 MiB)
GGUF_FIRST_RANGE_BYTES = 2 * MiB
#: parallel header reads for a sharded safetensors checkpoint
SHARD_WORKERS = 8
#: first safetensors read, bytes 0 to 100,000 (huggingface_hub's choice: 97 % of headers fit)
SAFETENSORS_FIRST_RANGE_BYTES = 100_000
#: the longest safetensors header accepted (huggingface_hub's SAFETENSORS_MAX_HEADER_LENGTH)
SAFETENSORS_MAX_HEADER_BYTES = 25_000_000


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
    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    listing = listing or fetch_repo_listing(repo_id, sha, settings=s)
    files = safetensors_files(listing, settings=s)
    if not files:
        return None

    def one(name: str) -> dict[str, int]:
        with hub_errors(s, repo_id, name, sha):
            return read_safetensors_counts(s, repo_id, sha, name)

    by_dtype: dict[str, int] = {}
    done = 0
    with ThreadPoolExecutor(max_workers=min(SHARD_WORKERS, len(files)), thread_name_prefix="safetensors") as pool:
        pending = {pool.submit(one, name) for name in files}
        try:
            while pending:
                finished, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
                check_cancel(cancel, f"the safetensors headers of {repo_id}")
                for fut in finished:
                    for dtype, n in fut.result().items():
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


def read_safetensors_counts(s: HubSettings, repo_id: str, sha: str, filename: str) -> dict[str, int]:
    """Parameters per dtype in one safetensors file's header: a ranged GET of its first 100 kB, a second if longer."""
    validate_repo_id(repo_id)
    url = file_url(s, repo_id, sha, filename)
    r = client().get(
        url, headers=headers(s, {"range": f"bytes=0-{SAFETENSORS_FIRST_RANGE_BYTES}"}), timeout=s.timeout_s
    )
    raise_for_status(r)
    context = f"repo '{repo_id}', revision '{sha}'"
    length = safetensors_header_length(r.content[:8], repo_id, filename, context)
    if length <= len(r.content) - 8:
        header = r.content[8 : 8 + length]
    else:
        r = client().get(url, headers=headers(s, {"range": f"bytes=8-{length + 7}"}), timeout=s.timeout_s)
        raise_for_status(r)
        header = r.content
    return parameter_counts(header, repo_id, filename, context)


def _unreadable(repo_id: str, filename: str, context: str, why: str) -> HubError:
    # huggingface_hub's SafetensorsParsingError text, inside the message hub_errors gave it
    return HubError(
        f"the safetensors headers of {repo_id} could not be read: "
        f"Failed to parse safetensors header for '{filename}' ({context}): {why}"
    )


def safetensors_header_length(first: bytes, repo_id: str, filename: str, context: str) -> int:
    """The header length a safetensors file's first 8 bytes give (little-endian u64), checked against the cap."""
    if len(first) < 8:
        raise _unreadable(repo_id, filename, context, "file is too small to be a valid safetensors file.")
    length = struct.unpack("<Q", first[:8])[0]
    if length > SAFETENSORS_MAX_HEADER_BYTES:
        raise _unreadable(
            repo_id,
            filename,
            context,
            "safetensors header is too big. Maximum supported size is "
            f"{SAFETENSORS_MAX_HEADER_BYTES} bytes (got {length}).",
        )
    return length


def parameter_counts(header: bytes, repo_id: str, filename: str, context: str) -> dict[str, int]:
    """Parameters per dtype of a safetensors JSON header (each tensor: the product of its shape, 1 for a scalar)."""
    try:
        doc = json.loads(header.decode(errors="ignore"))
    except json.JSONDecodeError:
        raise _unreadable(
            repo_id,
            filename,
            context,
            "header is not json-encoded string. Please make sure this is a correctly formatted safetensors file.",
        ) from None
    counts: dict[str, int] = {}
    try:
        for key, tensor in doc.items():
            if key == "__metadata__":
                continue
            dtype, shape = tensor["dtype"], tensor["shape"]
            tuple(tensor["data_offsets"])  # required, as huggingface_hub requires it
            counts[dtype] = counts.get(dtype, 0) + (math.prod(shape) if shape else 1)
    except (KeyError, IndexError, TypeError, AttributeError):
        raise _unreadable(
            repo_id,
            filename,
            context,
            "header format not recognized. Please make sure this is a correctly formatted safetensors file.",
        ) from None
    return counts


def read_range(s: HubSettings, repo_id: str, sha: str, filename: str, start: int, end: int) -> bytes:
    """Bytes ``start..end`` (inclusive) of a file, streamed so that a server ignoring Range costs no more."""
    want = end - start + 1
    url = file_url(s, repo_id, sha, filename)
    with hub_errors(s, repo_id, filename, sha):
        asked = headers(s, {"Range": f"bytes={start}-{end}"})
        with client().stream("GET", url, headers=asked, timeout=s.timeout_s) as r:
            raise_for_status(r)
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
