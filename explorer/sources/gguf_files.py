"""GGUF files for the resolver: local header reads, split sets, cache records, shapes.

- :func:`read_header_file` reads only a file's header bytes: a first chunk,
  grown (at least doubled) while the parser raises ``GGUFNeedMoreBytes``.
- :func:`read_local_set` finds a split set's sibling parts and merges their headers.
- :func:`header_record` / :func:`header_from_record` turn a header into the
  cache's ``gguf_headers`` record and back, losslessly for what a shape needs
  (the cache summarises JSON lists longer than 64 items, so long lists travel
  as JSON text).
- :func:`shape_from_header` calls ``explorer.gguf.shape.shape_from_gguf``,
  imported on first use, with a typed error where that module is missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

from explorer.errors import (
    GGUFError,
    GGUFNeedMoreBytes,
    GGUFSplitError,
    GGUFTruncatedError,
    capped_list,
)
from explorer.gguf.constants import GGMLQuantizationType, GGUFValueType
from explorer.gguf.header import (
    ArraySummary,
    GGUFHeader,
    TensorInfo,
    merge_split_headers,
    parse_gguf_header,
    split_parts,
    suggested_fetch_bytes,
)
from explorer.model.shapes import ModelShape
from explorer.sources.regular_file import open_regular_file
from explorer.units import MiB

__all__ = [
    "FIRST_READ_BYTES",
    "header_from_record",
    "header_record",
    "read_header_file",
    "read_local_set",
    "shape_from_header",
    "split_siblings",
]

#: the first read of a local file; most headers fit (a 128k-token vocabulary takes 2 to 8 MiB)
FIRST_READ_BYTES = 2 * MiB
#: tag of a record written by :func:`header_record`
RECORD_FORMAT = "explorer-gguf-header/1"
#: lists up to this long are stored as JSON lists; longer ones as JSON text (the cache summarises > 64)
_INLINE_ITEMS = 64


def read_header_file(path: Path, *, first_read: int = FIRST_READ_BYTES) -> tuple[GGUFHeader, int]:
    """The header of a local GGUF file and the bytes read to get it; never reads the data section."""
    with open_regular_file(path, "the GGUF file", GGUFError) as f:
        return _read_header(f, path, first_read)


def _read_header(f: BinaryIO, path: Path, first_read: int) -> tuple[GGUFHeader, int]:
    """The header from an open file, read in as many steps as the parser asks for (never past the file)."""
    try:
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(min(first_read, size))
        while True:
            try:
                return parse_gguf_header(prefix, file_size=size, name=path.name), len(prefix)
            except GGUFNeedMoreBytes as e:
                if len(prefix) >= size:
                    raise GGUFTruncatedError(
                        f"{path} ends at {size:,} bytes but its header needs at least {e.needed_total:,}"
                    ) from e
                want = suggested_fetch_bytes(e, file_size=size)
                prefix += f.read(want - len(prefix))
    except OSError as e:
        raise GGUFError(f"cannot read {path}: {e.strerror or e}", hint="check the path") from None


def split_siblings(path: Path) -> list[Path]:
    """Every part of the split set ``path`` belongs to (itself alone when not split).

    Raises:
        GGUFSplitError: a part is missing from the folder.
    """
    parts = split_parts(path.name)
    if parts is None:
        return [path]
    stem, _, count = parts
    paths = [path.parent / f"{stem}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise GGUFSplitError(
            f"{path.name} is part of a {count}-part set; missing in {path.parent}: {capped_list(missing)}"
        )
    return paths


def read_local_set(path: Path) -> tuple[GGUFHeader, list[Path], int]:
    """(merged header, parts, bytes read) for a local GGUF file or the split set it belongs to."""
    paths = split_siblings(path)
    read = [read_header_file(p) for p in paths]
    headers = [h for h, _ in read]
    header = headers[0] if len(headers) == 1 else merge_split_headers(headers)
    return header, paths, sum(n for _, n in read)


# --- cache records ---------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, ArraySummary):
        return {"__gguf_summary__": [int(value.item_type), value.count]}
    if isinstance(value, tuple):
        if len(value) > _INLINE_ITEMS or any(isinstance(v, (tuple, ArraySummary)) for v in value):
            return {"__gguf_tuple__": json.dumps(_plain(value), allow_nan=True)}
        return list(value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, ArraySummary):
        return {"__gguf_summary__": [int(value.item_type), value.count]}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__gguf_summary__" in value:
            item_type, count = value["__gguf_summary__"]
            return ArraySummary(item_type=int(item_type), count=int(count))
        if "__gguf_tuple__" in value:
            return _decode(json.loads(value["__gguf_tuple__"]))
        if value.get("__array__"):  # summarised by the cache (a record not written here)
            return ArraySummary(item_type=int(GGUFValueType.STRING), count=int(value.get("length", 0)))
        return value
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def header_record(header: GGUFHeader, *, file_size_bytes: int) -> dict[str, Any]:
    """The cache's ``gguf_headers`` record for a header: metadata, tensors, header and file bytes."""
    table = [[t.name, t.ggml_type, list(t.shape), t.offset, t.split_index] for t in header.tensors]
    tensors = {
        "format": RECORD_FORMAT,
        "version": header.version,
        "alignment": header.alignment,
        "data_offset": header.data_offset,
        "table": json.dumps(table, separators=(",", ":")),
    }
    return {
        "metadata": {k: _encode(v) for k, v in header.metadata.items()},
        "tensors": tensors,
        "header_bytes": header.header_bytes,
        "file_size_bytes": file_size_bytes,
    }


def header_from_record(record: Mapping[str, Any], *, name: str) -> GGUFHeader | None:
    """The header a record of :func:`header_record` holds; None for a record it did not write."""
    tensors = record.get("tensors")
    if not isinstance(tensors, dict) or tensors.get("format") != RECORD_FORMAT:
        return None
    infos = tuple(
        TensorInfo(
            name=n,
            ggml_type=t,
            type_name=GGMLQuantizationType(t).name,
            shape=tuple(dims),
            offset=off,
            split_index=split,
        )
        for n, t, dims, off, split in json.loads(tensors["table"])
    )
    metadata = {k: _decode(v) for k, v in (record.get("metadata") or {}).items()}
    return GGUFHeader(
        version=int(tensors["version"]),
        metadata=MappingProxyType(metadata),
        tensors=infos,
        alignment=int(tensors["alignment"]),
        header_bytes=int(record.get("header_bytes") or 0),
        data_offset=int(tensors["data_offset"]),
        name=name,
    )


# --- shapes -----------------------------------------------------------------------------------


def shape_from_header(header: GGUFHeader, *, name: str) -> ModelShape:
    """The model's shape from a GGUF header, through ``explorer.gguf.shape``.

    Raises:
        GGUFError: this install has no ``explorer.gguf.shape`` (or it cannot read the header).
    """
    try:
        from explorer.gguf.shape import shape_from_gguf
    except ImportError as e:
        raise GGUFError(
            f"{name}: reading a model's shape from a GGUF header needs explorer.gguf.shape, which is not available"
            f" ({e})",
            hint="pass the model's config.json (or its Hub repo with the original weights) instead",
        ) from None
    return shape_from_gguf(header, name=name)
