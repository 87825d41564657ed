"""Read a GGUF header from a byte prefix, strictly: pure, bytes in, records out.

``parse_gguf_header(prefix)`` reads the magic, the key/values and the tensor
infos; it never needs a byte of the data section. When the prefix ends too
early it raises :class:`GGUFNeedMoreBytes` whose ``needed_total`` is a true
lower bound on the header's length: the end of the item being read plus the
smallest encoding of everything the counts say is still to come. A fetcher
that reads ``suggested_fetch_bytes(err)`` (at least double) converges in a
few round trips even through a 150k-token vocabulary.

Everything is checked before it is used, and nothing is allocated in
proportion to a claimed count before the bytes for it are known to exist.

Format facts come from :mod:`explorer.gguf.constants` (gguf-py's value types,
quant sizes, magic) and llama.cpp ``ggml/src/gguf.cpp`` (limits, the checks).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from explorer.errors import (
    GGUFError,
    GGUFNeedMoreBytes,
    GGUFSplitError,
    GGUFTensorError,
    GGUFTruncatedError,
    capped_list,
)
from explorer.gguf.binary import ArraySummary, MetadataValue, read_header
from explorer.gguf.constants import (
    GGML_QUANT_SIZES,
    KEY_SPLIT_COUNT,
    KEY_SPLIT_NO,
    KEY_SPLIT_TENSORS_COUNT,
)
from explorer.units import round_up

__all__ = [
    "ArraySummary",
    "GGUFHeader",
    "MetadataValue",
    "TensorInfo",
    "merge_split_headers",
    "parse_gguf_header",
    "split_parts",
    "suggested_fetch_bytes",
]


_BLOCK = re.compile(r"blk\.(\d+)\.")


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorInfo:
    """One tensor's entry in the header.

    Attributes:
        name: the tensor's name, e.g. ``blk.0.attn_q.weight``.
        ggml_type: its ``GGMLQuantizationType`` value (:mod:`explorer.gguf.constants`).
        type_name: that type's name, e.g. ``Q4_K``.
        shape: dimensions in GGUF order (``ne0`` first, the row length).
        offset: bytes from the start of the data section to the tensor's data.
        split_index: which part of a split set holds it (0-based; 0 if unsplit).
    """

    name: str
    ggml_type: int
    type_name: str
    shape: tuple[int, ...]
    offset: int
    split_index: int = 0

    @property
    def n_elements(self) -> int:
        """Number of weights: the product of the dimensions."""
        return math.prod(self.shape)

    @property
    def n_bytes(self) -> int:
        """Bytes of data: ``n_elements * type_size // block_size`` (Q4_K: 256 weights in 144 bytes)."""
        block_size, type_size = GGML_QUANT_SIZES[self.ggml_type]
        return self.n_elements * type_size // block_size

    @property
    def block(self) -> int | None:
        """The transformer block index for ``blk.N.*`` tensors, else None."""
        m = _BLOCK.match(self.name)
        return int(m.group(1)) if m else None


#: non-block tensors that ``tensors_by_block`` reports under their own key
_NAMED_GROUPS = ("token_embd", "output", "output_norm")


@dataclass(frozen=True, slots=True, kw_only=True)
class GGUFHeader:
    """A parsed GGUF header.

    Attributes:
        version: the GGUF version (2 or 3).
        metadata: key → value; big arrays are :class:`ArraySummary`.
        tensors: tensor infos in file order.
        alignment: data alignment in bytes (``general.alignment``, default 32).
        header_bytes: bytes from the file start to the end of the tensor infos.
        data_offset: byte offset of the data section (``header_bytes`` aligned up).
        name: the file name it came from, for messages ("" if unknown).
    """

    version: int
    metadata: Mapping[str, MetadataValue]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    header_bytes: int
    data_offset: int
    name: str = ""

    @property
    def architecture(self) -> str | None:
        """``general.architecture`` (``llama``, ``qwen2``…), or None when absent."""
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def get(self, key: str, default: object = None) -> MetadataValue | object:
        """The value of a metadata key, or ``default``."""
        return self.metadata.get(key, default)

    def arch_get(self, suffix: str, default: object = None) -> MetadataValue | object:
        """The value of ``f"{architecture}.{suffix}"``, e.g. ``arch_get("block_count")``."""
        arch = self.architecture
        return default if arch is None else self.metadata.get(f"{arch}.{suffix}", default)

    def array_count(self, key: str) -> int | None:
        """Item count of an array value (kept or summarised), or None if not an array."""
        value = self.metadata.get(key)
        return len(value) if isinstance(value, (tuple, ArraySummary)) else None

    @property
    def parameter_count(self) -> int:
        """Total weights over all tensors."""
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_bytes_total(self) -> int:
        """Bytes of tensor data over all tensors (no alignment padding)."""
        return sum(t.n_bytes for t in self.tensors)

    def tensors_by_block(self) -> dict[int | str, int]:
        """Tensor bytes per block index, plus ``token_embd``, ``output``, ``output_norm``, ``other``.

        The four named keys are always present (0 when there is no such tensor).
        """
        out: dict[int | str, int] = dict.fromkeys((*_NAMED_GROUPS, "other"), 0)
        for t in self.tensors:
            block = t.block
            if block is not None:
                out[block] = out.get(block, 0) + t.n_bytes
                continue
            stem = t.name.rsplit(".", 1)[0] if t.name.endswith((".weight", ".bias")) else t.name
            out[stem if stem in _NAMED_GROUPS else "other"] += t.n_bytes
        return out


def parse_gguf_header(
    prefix: bytes | bytearray | memoryview, *, file_size: int | None = None, name: str = ""
) -> GGUFHeader:
    """Parse the GGUF header at the start of ``prefix``.

    Args:
        prefix: the first bytes of the file (any length; the data section is never needed).
        file_size: the whole file's size when known; enables the checks that
            need it (counts and tensor data past the end of the file).
        name: the file name, kept on the record for messages.

    Raises:
        GGUFNeedMoreBytes: the prefix ends before the tensor infos do.
        GGUFError: (a subclass naming the values) for anything malformed.
    """
    view = memoryview(prefix).cast("B")
    if file_size is not None and file_size < len(view):
        raise GGUFError(f"file_size ({file_size:,}) is smaller than the {len(view):,} bytes given")
    version, metadata, raw_tensors, alignment, header_bytes = read_header(view, file_size)
    tensors = tuple(
        TensorInfo(name=n, ggml_type=t, type_name=type_name, shape=shape, offset=offset)
        for n, t, type_name, shape, offset in raw_tensors
    )
    data_offset = round_up(header_bytes, alignment)  # 7,374 → 7,392 at alignment 32
    _check_data_ranges(tensors, data_offset, file_size)
    return GGUFHeader(
        version=version,
        metadata=MappingProxyType(metadata),
        tensors=tensors,
        alignment=alignment,
        header_bytes=header_bytes,
        data_offset=data_offset,
        name=name,
    )


def _check_data_ranges(tensors: tuple[TensorInfo, ...], data_offset: int, file_size: int | None) -> None:
    ordered = sorted(tensors, key=lambda t: t.offset)
    for a, b in itertools.pairwise(ordered):
        if a.offset + a.n_bytes > b.offset:
            raise GGUFTensorError(
                f"tensor {a.name!r} (bytes {a.offset:,}..{a.offset + a.n_bytes:,} of the data section) "
                f"overlaps tensor {b.name!r} at {b.offset:,}"
            )
    if file_size is not None and ordered:
        last = ordered[-1]
        end = data_offset + last.offset + last.n_bytes
        if end > file_size:
            raise GGUFTruncatedError(f"tensor {last.name!r} ends at byte {end:,} but the file has {file_size:,} bytes")


def suggested_fetch_bytes(err: GGUFNeedMoreBytes, *, file_size: int | None = None) -> int:
    """How long a prefix to fetch next: ``max(needed_total, 2 × have)``, capped at ``file_size``.

    ``needed_total`` alone is a guaranteed lower bound and may creep up in
    small steps through a big string array (each string counts as 8 bytes);
    doubling bounds the round trips to about log2(header / first fetch).
    """
    want = max(err.needed_total, 2 * err.have)
    return want if file_size is None else min(want, file_size)


# --- split sets ---------------------------------------------------------------

_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def split_parts(filename: str) -> tuple[str, int, int] | None:
    """``"m-00002-of-00003.gguf"`` → ``("m", 2, 3)`` (index 1-based); None if not a valid part name."""
    m = _SPLIT.match(filename.rsplit("/", 1)[-1])
    if m is None:
        return None
    index, count = int(m["no"]), int(m["count"])
    if not 1 <= index <= count:
        return None
    return m["stem"], index, count


def merge_split_headers(headers: Sequence[GGUFHeader]) -> GGUFHeader:
    """Merge the headers of a split set into one: the first part's metadata, every part's tensors.

    Parts are ordered by their ``split.no`` key (0-based), else by the index in
    their file name, else as given. ``split.count`` (else the file-name count,
    else the number given) must equal the number of parts, and
    ``split.tensors.count`` (when present) the merged tensor count. Each
    merged tensor records its part in ``split_index``. ``header_bytes`` sums
    the parts' headers; ``data_offset`` is the first part's.

    Raises:
        GGUFSplitError: no parts, missing, repeated or disagreeing parts, a tensor in two parts.
    """
    if not headers:
        raise GGUFSplitError("no split parts given")
    indexed = sorted(((_split_no(h, i), h) for i, h in enumerate(headers)), key=lambda p: p[0])
    first = indexed[0][1]
    count = _split_count(first, len(headers))
    for _, h in indexed:
        if _split_count(h, count) != count:
            raise GGUFSplitError(
                f"part {h.name!r} says split.count {_split_count(h, count)}, the first part says {count}"
            )
    seen = [no for no, _ in indexed]
    missing = sorted(set(range(count)) - set(seen))
    extra = sorted(no for no in set(seen) if seen.count(no) > 1 or not 0 <= no < count)
    if missing or extra:
        raise GGUFSplitError(
            f"a split set of {count} parts needs parts 1..{count} once each; "
            f"missing: {capped_list(n + 1 for n in missing) or 'none'}; "
            f"repeated or out of range: {capped_list(n + 1 for n in extra) or 'none'}"
        )
    tensors: list[TensorInfo] = []
    where: dict[str, int] = {}
    for no, h in indexed:
        for t in h.tensors:
            if t.name in where:
                raise GGUFSplitError(f"tensor {t.name!r} is in part {where[t.name] + 1} and part {no + 1}")
            where[t.name] = no
            tensors.append(replace(t, split_index=no))
    expected = first.get(_SPLIT_TENSORS_KEY)
    if isinstance(expected, int) and expected != len(tensors):
        raise GGUFSplitError(f"{_SPLIT_TENSORS_KEY} is {expected:,} but the parts hold {len(tensors):,} tensors")
    return replace(first, tensors=tuple(tensors), header_bytes=sum(h.header_bytes for _, h in indexed))


_SPLIT_NO_KEY = KEY_SPLIT_NO  # "split.no", 0-based
_SPLIT_COUNT_KEY = KEY_SPLIT_COUNT  # "split.count"
_SPLIT_TENSORS_KEY = KEY_SPLIT_TENSORS_COUNT  # "split.tensors.count"


def _split_no(header: GGUFHeader, position: int) -> int:
    no = header.get(_SPLIT_NO_KEY)
    if isinstance(no, int) and not isinstance(no, bool):
        return no
    parts = split_parts(header.name)
    return parts[1] - 1 if parts else position


def _split_count(header: GGUFHeader, default: int) -> int:
    count = header.get(_SPLIT_COUNT_KEY)
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    parts = split_parts(header.name)
    return parts[2] if parts else default
