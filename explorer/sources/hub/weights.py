"""Reading weight-file headers from the Hub without downloading the weights.

- safetensors: per weight file, one ranged GET of its first bytes and a
  second one only for a header longer than that, the shards named by
  ``model.safetensors.index.json``, read in parallel, with huggingface_hub's
  checks and messages (``HfApi.parse_safetensors_file_metadata``). The first
  read of a shard is sized from the tensors the index gives it (a 70B shard's
  header is about 3 kB, not the 100 kB huggingface_hub asks for); of a single
  file it is 100 kB, as huggingface_hub reads it. Of each header only what the
  count needs is kept: every tensor's dtype and shape (checked, with its
  ``data_offsets``), the rest skipped after its nesting is checked.
- GGUF: ranged GETs of the file's first bytes, grown geometrically until the
  caller's parser stops raising :class:`~explorer.errors.GGUFNeedMoreBytes`,
  at most :data:`MAX_GGUF_REQUESTS` of them: a server that answers each range
  with a few bytes is refused, not followed for a hundred thousand requests.

Every request goes through :func:`explorer.sources.hub.http.get` (deadline,
retries, a cap on the bytes read).

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

from explorer.errors import GGUFError, GGUFNeedMoreBytes, HubError, HubResponseError
from explorer.limits import MAX_JSON_DEPTH, json_depth
from explorer.sources.hub.client import fetch_repo_listing, get_file, parse_json_file
from explorer.sources.hub.errors import check_cancel, hub_errors
from explorer.sources.hub.http import file_url, get, validate_repo_id
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
#: first safetensors read of a file no index describes: bytes 0 to 100,000, 100,001 bytes (huggingface_hub's
#: choice: 97 % of headers fit)
SAFETENSORS_FIRST_RANGE_BYTES = 100_001
#: the most a tensor's entry in a header takes besides its name: ``"":{"dtype":"","shape":[],"data_offsets":[]},``
#: is 44 characters, the longest dtype (F8_E4M3) 7, four dimensions of 6 digits 27, two offsets of 12 digits 25:
#: 103, rounded up
SAFETENSORS_ENTRY_BYTES = 128
#: what the rest of a header may take in a first read sized from the index: the 8-byte length, the braces,
#: ``"__metadata__":{"format":"pt"}`` (most files' only metadata) and the padding to 8 bytes, with room to spare
SAFETENSORS_HEADER_SLACK_BYTES = 4096
#: the longest safetensors header accepted (huggingface_hub's SAFETENSORS_MAX_HEADER_LENGTH)
SAFETENSORS_MAX_HEADER_BYTES = 25_000_000
#: range requests one GGUF header may take; doubling from 2 MiB reaches the 64 MiB header cap in 6
MAX_GGUF_REQUESTS = 24
#: shards an index may name (the largest real checkpoints have a few hundred)
MAX_SHARDS = 10_000


def safetensors_files(listing: RepoListing, *, settings: HubSettings) -> dict[str, int]:
    """The weight files huggingface_hub's ``get_safetensors_metadata`` would read, in order, each with the
    bytes of its first read (:func:`first_read_bytes`).

    The index's shards when ``model.safetensors.index.json`` is listed, else
    ``model.safetensors``, else none.
    """
    if listing.has(SAFETENSORS_INDEX):
        data = get_file(settings, listing.repo_id, listing.sha, SAFETENSORS_INDEX)
        index = parse_json_file(data, where=f"{SAFETENSORS_INDEX} of {listing.repo_id}@{listing.sha[:12]}")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise HubError(f"{SAFETENSORS_INDEX} of {listing.repo_id} has no weight_map")
        names: dict[str, list[str]] = {}
        for tensor, shard in weight_map.items():
            names.setdefault(str(shard), []).append(tensor)
        if len(names) > MAX_SHARDS:
            raise HubError(
                f"{SAFETENSORS_INDEX} of {listing.repo_id} names {len(names):,} shards; at most {MAX_SHARDS:,}"
            )
        return {shard: first_read_bytes(names[shard]) for shard in sorted(names)}
    return {SAFETENSORS_SINGLE: SAFETENSORS_FIRST_RANGE_BYTES} if listing.has(SAFETENSORS_SINGLE) else {}


def first_read_bytes(tensors: list[str]) -> int:
    """Bytes of a shard's first read that hold its whole header when the index named all its tensors.

    Worked example: shard 2 of 30 of Llama 3.1 70B holds 25 tensors whose names take 938 bytes: it reads
    938 + 25 × 128 + 4,096 = 8,234 bytes, where huggingface_hub reads 100,001; its header is 2,912 bytes
    (8 more for its length). A longer header (metadata, tensors the index left out) costs a second read,
    never a wrong count.
    """
    estimate = sum(len(name.encode()) + SAFETENSORS_ENTRY_BYTES for name in tensors) + SAFETENSORS_HEADER_SLACK_BYTES
    return min(estimate, SAFETENSORS_MAX_HEADER_BYTES + 8)


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
    s = (settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)).started()
    listing = listing or fetch_repo_listing(repo_id, sha, settings=s)
    files = safetensors_files(listing, settings=s)
    if not files:
        return None

    def one(name: str) -> dict[str, int]:
        with hub_errors(s, repo_id, name, sha):
            return read_safetensors_counts(s, repo_id, sha, name, first_read=files[name])

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


def read_safetensors_counts(
    s: HubSettings, repo_id: str, sha: str, filename: str, *, first_read: int = SAFETENSORS_FIRST_RANGE_BYTES
) -> dict[str, int]:
    """Parameters per dtype in one safetensors file's header: a ranged GET of its first ``first_read`` bytes
    (at least the 8 of the header's length), a second only when the header is longer."""
    validate_repo_id(repo_id)
    url, what = file_url(s, repo_id, sha, filename), f"the safetensors header of {filename}"
    last = max(first_read, 8) - 1
    first = get(s, url, what=what, max_bytes=last + 1, extra={"range": f"bytes=0-{last}"}).body
    context = f"repo '{repo_id}', revision '{sha}'"
    length = safetensors_header_length(first[:8], repo_id, filename, context)
    if length <= len(first) - 8:
        header = first[8 : 8 + length]
    else:
        header = get(s, url, what=what, max_bytes=length, extra={"range": f"bytes=8-{length + 7}"}).body
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
    """Parameters per dtype of a safetensors JSON header (each tensor: the product of its shape, 1 for a scalar).

    Only what the count needs is walked: each tensor's dtype (a name), shape (counts) and ``data_offsets``
    (numbers, required as huggingface_hub requires them). Nesting is bounded as :func:`explorer.limits.load_json`
    bounds it: a tensor's checked fields nest 3 deep, and anything else in the header (``__metadata__``,
    keys the format does not define) is measured with :func:`explorer.limits.json_depth`.
    """
    try:
        doc = json.loads(header.decode(errors="ignore"))
        if not isinstance(doc, dict):
            raise ValueError(f"the header is a JSON {type(doc).__name__}")
    except (ValueError, RecursionError):
        raise _unreadable(
            repo_id,
            filename,
            context,
            "header is not json-encoded string. Please make sure this is a correctly formatted safetensors file.",
        ) from None
    counts: dict[str, int] = {}
    try:
        for key, tensor in doc.items():
            if key == "__metadata__" or len(tensor) != 3:  # ...or a tensor with fields the format does not define
                if json_depth(tensor, MAX_JSON_DEPTH - 1) > MAX_JSON_DEPTH - 1:
                    raise _unreadable(repo_id, filename, context, f"nested deeper than {MAX_JSON_DEPTH} levels.")
                if key == "__metadata__":
                    continue
            dtype, shape, offsets = tensor["dtype"], tensor["shape"], tensor["data_offsets"]
            if not isinstance(dtype, str) or not all(type(d) is int and d >= 0 for d in shape):
                raise TypeError("a dtype that is not a name or a dimension that is not a count")
            if not all(type(o) is int for o in offsets):  # required, as huggingface_hub requires it
                raise TypeError("data offsets that are not numbers")
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
        # a server ignoring Range answers 200 from byte 0: read on to the range's end, then cut
        answer = get(s, url, what=f"the GGUF header of {filename}", max_bytes=end + 1,
                     extra={"Range": f"bytes={start}-{end}"})  # fmt: skip
    skip = start if answer.status == 200 else 0
    return answer.body[skip : skip + want]


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
    s = (settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)).started()
    if size_bytes <= 0:
        raise GGUFError(f"{filename} in {repo_id} is empty ({size_bytes} bytes)")
    prefix, requests = b"", 0
    want = min(max(first_range, 1), size_bytes)
    while True:
        while want > len(prefix):  # a short answer is followed by a request for the rest
            check_cancel(cancel, f"the GGUF header of {filename}")
            if requests >= MAX_GGUF_REQUESTS:
                raise HubResponseError(
                    f"the Hub at {s.endpoint} took {requests} range requests to send {len(prefix):,} bytes of the "
                    f"header of {filename} ({want:,} needed); a server answering ranges this short is not followed"
                )
            got = read_range(s, repo_id, sha, filename, len(prefix), want - 1)
            requests += 1
            if not got:
                raise HubResponseError(f"the Hub sent no bytes of {filename} from offset {len(prefix):,}")
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
