"""The byte-level GGUF reader behind :mod:`explorer.gguf.header`.

Every read goes through one primitive, :meth:`_Cursor.take`, over a
memoryview with ``struct.unpack_from``, little-endian only. The cursor carries
``tail``: the fewest bytes the counts read so far say must still follow the
item being read (each key/value is at least 14 bytes, each tensor info at
least 32, each string in an array at least 8). So when the prefix runs out,
``end of this item + tail`` is a true lower bound on the header's length, and
a claimed count or length is checked against the file size (or a sanity cap)
before any loop runs over it.

Format facts: :mod:`explorer.gguf.constants` (gguf-py's value types,
GGML_QUANT_SIZES, magic, ``general.alignment``) and llama.cpp ``ggml/src/gguf.cpp`` (versions,
GGML_MAX_DIMS, GGML_MAX_NAME, GGUF_MAX_ARRAY_ELEMENTS, the checks).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from explorer.errors import (
    GGUFFormatError,
    GGUFLimitError,
    GGUFNeedMoreBytes,
    GGUFTensorError,
    GGUFTruncatedError,
    GGUFValueError,
)
from explorer.gguf.constants import (
    GGML_QUANT_SIZES,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    KEY_ALIGNMENT,
    GGMLQuantizationType,
    GGUFValueType,
)
from explorer.units import MiB

VT = GGUFValueType
QT = GGMLQuantizationType

# --- format facts ---------------------------------------------------------------
GGUF_MAGIC_BYTES = struct.pack("<I", GGUF_MAGIC)  # b"GGUF"
SUPPORTED_VERSIONS = (2, 3)  # gguf.cpp: "GGUFv1 is no longer supported"; v3 is current
GGML_MAX_DIMS = 4  # ggml.h
GGML_MAX_NAME = 64  # ggml.h; gguf.cpp rejects tensor names of >= 64 bytes
ALIGNMENT_KEY = KEY_ALIGNMENT  # gguf.cpp: must be UINT32, a power of two
INT64_MAX = 2**63 - 1

# --- explorer's sanity caps (far above any real file) -------------------------------
MAX_TENSORS = 1 << 20
MAX_KVS = 1 << 20
MAX_ARRAY_ITEMS = 1 << 30  # gguf.cpp GGUF_MAX_ARRAY_ELEMENTS
MAX_KEY_BYTES = 1024  # real keys are < 100 bytes
MAX_STRING_BYTES = 16 * MiB  # chat templates are tens of KiB
MAX_HEADER_BYTES = 64 * MiB  # a 262k-token vocabulary with merges is ~10 MiB
MAX_ARRAY_DEPTH = 3  # gguf.cpp allows no nesting; gguf-py writes arrays of arrays
KEEP_NUMBERS = 4096  # numeric/bool arrays up to this many items stay tuples
KEEP_STRINGS = 64  # string arrays up to this many items stay tuples

#: little-endian layout of each scalar value type (GGUFValueType → struct)
_SCALARS: dict[int, struct.Struct] = {
    VT.UINT8: struct.Struct("<B"),
    VT.INT8: struct.Struct("<b"),
    VT.UINT16: struct.Struct("<H"),
    VT.INT16: struct.Struct("<h"),
    VT.UINT32: struct.Struct("<I"),
    VT.INT32: struct.Struct("<i"),
    VT.FLOAT32: struct.Struct("<f"),
    VT.BOOL: struct.Struct("<?"),
    VT.UINT64: struct.Struct("<Q"),
    VT.INT64: struct.Struct("<q"),
    VT.FLOAT64: struct.Struct("<d"),
}
_U32, _U64 = _SCALARS[VT.UINT32], _SCALARS[VT.UINT64]
#: fewest bytes a value of each type takes: a string is its u64 length; an array its u32 type + u64 count
_MIN_SIZE: dict[int, int] = {**{t: s.size for t, s in _SCALARS.items()}, VT.STRING: 8, VT.ARRAY: 12}
KV_MIN_BYTES = 8 + 1 + 4 + 1  # key length, a 1-byte key, value type, a 1-byte value
TENSOR_MIN_BYTES = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dim, type, offset


@dataclass(frozen=True, slots=True, kw_only=True)
class ArraySummary:
    """A metadata array too big to keep (a vocabulary, merges, scores).

    Attributes:
        item_type: the items' ``GGUFValueType`` (``ARRAY`` when nested).
        count: how many items the array holds.
    """

    item_type: int
    count: int

    def __len__(self) -> int:
        return self.count


#: a metadata value: scalars, small arrays as tuples, big arrays summarised
MetadataValue = int | float | bool | str | tuple | ArraySummary

#: (name, ggml_type, type name, shape in GGUF order, offset in the data section)
RawTensor = tuple[str, int, str, tuple[int, ...], int]


class _Cursor:
    __slots__ = ("buf", "file_size", "have", "pos", "tail")

    def __init__(self, buf: memoryview, file_size: int | None) -> None:
        self.buf, self.pos, self.have, self.file_size, self.tail = buf, 0, len(buf), file_size, 0

    def claim(self, end: int, what: str) -> None:
        """A count or length says the header reaches ``end`` (+ tail): fail now if it cannot."""
        total = end + self.tail
        if self.file_size is not None and total > self.file_size:
            raise GGUFLimitError(
                f"{what} needs the header to reach byte {total:,}, past the end of the file ({self.file_size:,} bytes)"
            )
        if total > MAX_HEADER_BYTES:
            raise GGUFLimitError(
                f"{what} needs the header to reach byte {total:,}, past the cap of {MAX_HEADER_BYTES:,}"
            )

    def take(self, n: int) -> int:
        """The one bounds-checked read: advance ``n`` bytes and return where they start."""
        start, end = self.pos, self.pos + n
        if end > self.have:
            total = end + self.tail
            if self.file_size is not None and total > self.file_size:
                raise GGUFTruncatedError(
                    f"the header needs at least {total:,} bytes but the file has {self.file_size:,}"
                )
            self.claim(end, f"the item at byte {start:,}")
            raise GGUFNeedMoreBytes(self.have, total)
        self.pos = end
        return start

    def unpack(self, st: struct.Struct) -> int | float | bool:
        return st.unpack_from(self.buf, self.take(st.size))[0]

    def raw(self, n: int) -> bytes:
        start = self.take(n)
        return bytes(self.buf[start : start + n])


def read_header(buf: memoryview, file_size: int | None) -> tuple[int, dict, list[RawTensor], int, int]:
    """Read magic, counts, key/values and tensor infos.

    Returns ``(version, metadata, raw tensors, alignment, header_bytes)``.
    """
    cur = _Cursor(buf, file_size)
    cur.tail = 20
    magic = cur.raw(4)
    if magic != GGUF_MAGIC_BYTES:
        raise GGUFFormatError(f"bad magic {magic!r}: a GGUF file starts with {GGUF_MAGIC_BYTES!r}")
    cur.tail = 16
    version = cur.unpack(_U32)
    if version != 0 and version & 0xFFFF == 0:  # v3 written big-endian reads as 0x03000000
        raise GGUFFormatError(f"big-endian GGUF is not supported (version field reads {version:#010x})")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFFormatError(f"GGUF version {version} is not supported; explorer reads versions 2 and 3")
    cur.tail = 8
    n_tensors = cur.unpack(_U64)
    if n_tensors > MAX_TENSORS:
        raise GGUFLimitError(f"tensor count {n_tensors:,} is above the cap of {MAX_TENSORS:,}")
    cur.tail = 0
    n_kv = cur.unpack(_U64)
    if n_kv > MAX_KVS:
        raise GGUFLimitError(f"key/value count {n_kv:,} is above the cap of {MAX_KVS:,}")
    # 20 KVs and 291 tensors need at least 24 + 20*14 + 291*32 = 9,616 bytes
    cur.claim(
        cur.pos + n_kv * KV_MIN_BYTES + n_tensors * TENSOR_MIN_BYTES, f"{n_kv:,} key/values and {n_tensors:,} tensors"
    )

    metadata: dict[str, MetadataValue] = {}
    tensor_tail = n_tensors * TENSOR_MIN_BYTES
    for i in range(n_kv):
        base = (n_kv - 1 - i) * KV_MIN_BYTES + tensor_tail
        key = _read_key(cur, base, i)
        if key in metadata:
            raise GGUFValueError(f"duplicate key {key!r} (key/value {i})")
        cur.tail = base + 1
        vtype = cur.unpack(_U32)
        cur.tail = base
        if key == ALIGNMENT_KEY and vtype != VT.UINT32:
            raise GGUFValueError(f"{ALIGNMENT_KEY} has value type {vtype}; it must be UINT32 ({int(VT.UINT32)})")
        metadata[key] = _read_value(cur, vtype, key, 0)

    alignment = metadata.get(ALIGNMENT_KEY, GGUF_DEFAULT_ALIGNMENT)
    if alignment == 0 or alignment & (alignment - 1):
        raise GGUFValueError(f"{ALIGNMENT_KEY} is {alignment}; it must be a power of two")

    names: set[str] = set()
    tensors = [
        _read_tensor_info(cur, (n_tensors - 1 - i) * TENSOR_MIN_BYTES, i, names, alignment) for i in range(n_tensors)
    ]
    return version, metadata, tensors, alignment, cur.pos


def _read_key(cur: _Cursor, base: int, i: int) -> str:
    cur.tail = base + 6  # the key's 1st byte, the value type, a 1-byte value
    n = cur.unpack(_U64)
    if n == 0:
        raise GGUFValueError(f"key/value {i} has an empty key")
    if n > MAX_KEY_BYTES:
        raise GGUFLimitError(f"key/value {i} has a key of {n:,} bytes; keys hold at most {MAX_KEY_BYTES:,}")
    cur.tail = base + 5
    raw = cur.raw(n)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GGUFValueError(f"key/value {i} has a key that is not UTF-8: {raw[:40]!r}") from None


def _read_value(cur: _Cursor, vtype: int, key: str, depth: int) -> MetadataValue:
    st = _SCALARS.get(vtype)
    if st is not None:
        return cur.unpack(st)
    if vtype == VT.STRING:
        return _read_string(cur, f"the value of {key!r}")
    if vtype == VT.ARRAY:
        return _read_array(cur, key, depth + 1)
    raise GGUFValueError(f"key {key!r} has unknown value type {vtype} (known: 0..12)")


def _read_string(cur: _Cursor, what: str) -> str:
    n = cur.unpack(_U64)
    if n > MAX_STRING_BYTES:
        raise GGUFLimitError(f"{what} is a string of {n:,} bytes; strings hold at most {MAX_STRING_BYTES:,}")
    cur.claim(cur.pos + n, f"{what} ({n:,} bytes)")
    return cur.raw(n).decode("utf-8", errors="replace")


def _read_array(cur: _Cursor, key: str, depth: int) -> MetadataValue:
    if depth > MAX_ARRAY_DEPTH:
        raise GGUFValueError(f"key {key!r} nests arrays deeper than {MAX_ARRAY_DEPTH} levels")
    outer = cur.tail
    cur.tail = outer + 8
    itype = cur.unpack(_U32)
    cur.tail = outer
    count = cur.unpack(_U64)
    item_min = _MIN_SIZE.get(itype)
    if item_min is None:
        raise GGUFValueError(f"key {key!r} is an array of unknown value type {itype} (known: 0..12)")
    if count > MAX_ARRAY_ITEMS:
        raise GGUFLimitError(f"array {key!r} claims {count:,} items; the cap is {MAX_ARRAY_ITEMS:,}")
    # 5,000,000 FLOAT64 items need 40,000,000 bytes, whatever the file's size
    cur.claim(cur.pos + count * item_min, f"array {key!r} of {count:,} items of type {itype}")
    st = _SCALARS.get(itype)
    if st is not None:
        start = cur.take(count * st.size)
        if count <= KEEP_NUMBERS:
            return struct.unpack_from(f"<{count}{st.format[-1]}", cur.buf, start)
        return ArraySummary(item_type=VT(itype), count=count)
    if itype == VT.STRING:
        return _read_string_array(cur, key, count, outer)
    for j in range(count):  # arrays of arrays: validated, then summarised
        cur.tail = outer + (count - 1 - j) * _MIN_SIZE[VT.ARRAY]
        _read_array(cur, key, depth + 1)
    cur.tail = outer
    return ArraySummary(item_type=VT.ARRAY, count=count)


def _read_string_array(cur: _Cursor, key: str, count: int, outer: int) -> MetadataValue:
    # The hot loop (150k tokens): inline reads while the bytes are there; any
    # string that is not wholly in the prefix, or too long, goes through the
    # checked path, which raises the right error.
    keep: list[str] | None = [] if count <= KEEP_STRINGS else None
    buf, have, pos = cur.buf, cur.have, cur.pos
    unpack = _U64.unpack_from
    for j in range(count):
        if pos + 8 <= have:
            n = unpack(buf, pos)[0]
            end = pos + 8 + n
            if end <= have and n <= MAX_STRING_BYTES:
                if keep is not None:
                    keep.append(bytes(buf[pos + 8 : end]).decode("utf-8", errors="replace"))
                pos = end
                continue
        cur.pos, cur.tail = pos, outer + (count - 1 - j) * 8
        text = _read_string(cur, f"item {j:,} of {key!r}")
        if keep is not None:
            keep.append(text)
        pos = cur.pos
    cur.pos, cur.tail = pos, outer
    return tuple(keep) if keep is not None else ArraySummary(item_type=VT.STRING, count=count)


def _read_tensor_info(cur: _Cursor, base: int, i: int, names: set[str], alignment: int) -> RawTensor:
    cur.tail = base + 24
    n = cur.unpack(_U64)
    if not 0 < n < GGML_MAX_NAME:
        raise GGUFTensorError(
            f"tensor {i} has a name of {n:,} bytes; names hold 1 to {GGML_MAX_NAME - 1} (GGML_MAX_NAME)"
        )
    raw = cur.raw(n)
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GGUFTensorError(f"tensor {i} has a name that is not UTF-8: {raw!r}") from None
    if name in names:
        raise GGUFTensorError(f"duplicate tensor name {name!r} (tensor {i})")
    names.add(name)

    cur.tail = base + 20
    n_dims = cur.unpack(_U32)
    if not 1 <= n_dims <= GGML_MAX_DIMS:
        raise GGUFTensorError(f"tensor {name!r} has {n_dims:,} dimensions; GGML_MAX_DIMS allows 1 to {GGML_MAX_DIMS}")
    cur.tail = base + 12
    shape = struct.unpack_from(f"<{n_dims}Q", cur.buf, cur.take(8 * n_dims))
    if 0 in shape:
        raise GGUFTensorError(f"tensor {name!r} has a zero dimension: shape {shape}")
    n_elements = math.prod(shape)
    if n_elements > INT64_MAX:
        raise GGUFTensorError(f"tensor {name!r} with shape {shape} has {n_elements:,} elements, more than int64 holds")

    cur.tail = base + 8
    ggml_type = cur.unpack(_U32)
    if ggml_type not in GGML_QUANT_SIZES:
        raise GGUFTensorError(f"tensor {name!r} has unknown ggml type {ggml_type}")
    block_size, type_size = GGML_QUANT_SIZES[ggml_type]
    type_name = QT(ggml_type).name
    if shape[0] % block_size:
        raise GGUFTensorError(
            f"tensor {name!r}: row size ({shape[0]:,}) is not a multiple of {type_name} block size ({block_size})"
        )
    cur.tail = base
    offset = cur.unpack(_U64)
    if offset % alignment:
        raise GGUFTensorError(f"tensor {name!r} has offset {offset:,}, not a multiple of the alignment ({alignment})")
    if offset + n_elements * type_size // block_size > INT64_MAX:
        raise GGUFTensorError(f"tensor {name!r} ends past byte {INT64_MAX:,} of the data section")
    return name, ggml_type, type_name, shape, offset
