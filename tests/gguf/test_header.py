"""Tests for explorer/gguf/header.py (and the byte reader in gguf_binary.py)."""

from __future__ import annotations

import json
import random
import struct
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corpus import DATA as TEST_DATA
from support.gguf_factory import (
    F16,
    F32,
    Q4_K,
    Q8_0,
    VT,
    Typed,
    build_gguf,
    build_gguf_with_writer,
    data_file_size,
    dump_scalar_metadata,
    llama_like,
    llama_metadata,
    pack_kv,
    pack_preamble,
    pack_string,
    pack_tensor_info,
)

from explorer.errors import (
    GGUFError,
    GGUFFormatError,
    GGUFLimitError,
    GGUFNeedMoreBytes,
    GGUFSplitError,
    GGUFTensorError,
    GGUFTruncatedError,
    GGUFValueError,
)
from explorer.gguf.binary import KEEP_NUMBERS, KEEP_STRINGS, MAX_HEADER_BYTES
from explorer.gguf.header import (
    ArraySummary,
    GGUFHeader,
    merge_split_headers,
    parse_gguf_header,
    split_parts,
    suggested_fetch_bytes,
)

DATA = TEST_DATA / "gguf"


def parse(data: bytes, **kw) -> GGUFHeader:
    return parse_gguf_header(data, file_size=len(data), **kw)


# --- valid files ------------------------------------------------------------------


def test_llama_like_file_parses_with_sizes_and_metadata():
    tensors = llama_like(blocks=2)
    data = build_gguf(llama_metadata(blocks=2), tensors)
    h = parse(data, name="tiny-Q4_K_M.gguf")
    assert h.version == 3 and h.alignment == 32 and h.name == "tiny-Q4_K_M.gguf"
    assert h.architecture == "llama"
    assert h.arch_get("block_count") == 2 and h.get("llama.rope.freq_base") == 10000.0
    assert h.get("missing", "x") == "x" and h.arch_get("missing") is None
    assert h.data_offset % 32 == 0 and h.data_offset - h.header_bytes < 32
    assert [t.name for t in h.tensors] == [t[0] for t in tensors]
    q = next(t for t in h.tensors if t.name == "blk.1.attn_q.weight")
    # 256 × 256 Q4_K weights = 256 blocks of 144 bytes = 36,864 bytes
    assert (q.shape, q.type_name, q.n_elements, q.n_bytes, q.block) == ((256, 256), "Q4_K", 65536, 36864, 1)
    assert h.tensors[0].block is None
    # the 320 token strings are summarised; 320 INT32 token types fit the small-array limit
    assert h.get("tokenizer.ggml.tokens") == ArraySummary(item_type=VT.STRING, count=320)
    assert h.get("tokenizer.ggml.token_type") == (1,) * 320
    assert h.array_count("tokenizer.ggml.tokens") == h.array_count("tokenizer.ggml.token_type") == 320
    assert h.array_count("general.name") is None


def test_tensors_by_block_sums_to_total():
    data = build_gguf(llama_metadata(), llama_like(blocks=3) + [("rope_freqs.weight", (64,), F32)])
    h = parse(data)
    groups = h.tensors_by_block()
    assert sorted(k for k in groups if isinstance(k, int)) == [0, 1, 2]
    assert groups["token_embd"] == 320 * 256 * 144 // 256  # Q4_K embeddings: 46,080 bytes
    assert groups["output"] == 320 * 256 * 210 // 256  # Q6_K: 210 bytes per 256 weights
    assert groups["output_norm"] == 256 * 4 and groups["other"] == 64 * 4
    assert sum(groups.values()) == h.tensor_bytes_total
    assert h.parameter_count == sum(t.n_elements for t in h.tensors)


def test_writer_and_struct_builds_agree():
    metadata = llama_metadata(vocab=100)
    tensors = [("a", (64, 2), F32), ("b", (32, 3), F16), ("c", (64, 4), Q8_0), ("d", (512, 2), Q4_K)]
    mine = parse(build_gguf(metadata, tensors))
    del metadata["general.architecture"]  # the writer adds it
    theirs = parse(build_gguf_with_writer(metadata, tensors))
    assert theirs.tensors == mine.tensors
    assert dict(theirs.metadata) == dict(mine.metadata)
    assert (theirs.header_bytes, theirs.data_offset) == (mine.header_bytes, mine.data_offset)


@pytest.mark.parametrize("version", [2, 3])
def test_versions_2_and_3_parse(version):
    assert parse(build_gguf({"k": 1}, [("t", (32,), F32)], version=version)).version == version


def test_zero_tensors_zero_keys_and_empty_strings():
    h = parse(pack_preamble(0, 0))
    assert (h.metadata, h.tensors, h.header_bytes, h.data_offset) == ({}, (), 24, 32)
    h = parse(build_gguf({"general.name": "", "tokenizer.chat_template": "", "xs": Typed([], VT.ARRAY, VT.FLOAT64)}))
    assert h.get("general.name") == "" and h.get("xs") == () and h.tensors == ()


def test_alignment_key_moves_data_offset_and_offsets():
    data = build_gguf({"general.architecture": "llama"}, [("a", (16,), F32), ("b", (16,), F32)], alignment=64)
    h = parse(data)
    assert h.alignment == 64 and h.get("general.alignment") == 64
    assert h.data_offset % 64 == 0 and [t.offset for t in h.tensors] == [0, 64]


def test_scalar_types_round_trip():
    md = {
        "u8": Typed(255, VT.UINT8),
        "i8": Typed(-1, VT.INT8),
        "u16": Typed(65535, VT.UINT16),
        "i16": Typed(-2, VT.INT16),
        "u32": Typed(7, VT.UINT32),
        "i32": Typed(-3, VT.INT32),
        "f32": Typed(0.5, VT.FLOAT32),
        "b": True,
        "u64": Typed(2**64 - 1, VT.UINT64),
        "i64": Typed(-(2**63), VT.INT64),
        "f64": Typed(0.1, VT.FLOAT64),
        "s": "héllo",
    }
    h = parse(build_gguf(md))
    assert {k: h.get(k) for k in md} == {k: (v.value if isinstance(v, Typed) else v) for k, v in md.items()}


def test_small_arrays_are_tuples_big_ones_summaries():
    md = {
        "swa": [True, False] * 10,
        "kv_heads": Typed([8] * KEEP_NUMBERS, VT.ARRAY, VT.INT32),
        "scores": Typed([0.0] * (KEEP_NUMBERS + 1), VT.ARRAY, VT.FLOAT32),
        "tags": ["a"] * KEEP_STRINGS,
        "merges": ["a b"] * (KEEP_STRINGS + 1),
        "nested": Typed([[1, 2], [3]], VT.ARRAY, VT.ARRAY),
    }
    h = parse(build_gguf(md))
    assert h.get("swa") == (True, False) * 10 and h.get("kv_heads") == (8,) * KEEP_NUMBERS
    assert h.get("scores") == ArraySummary(item_type=VT.FLOAT32, count=KEEP_NUMBERS + 1)
    assert h.get("tags") == ("a",) * KEEP_STRINGS
    assert h.get("merges") == ArraySummary(item_type=VT.STRING, count=KEEP_STRINGS + 1)
    assert h.get("nested") == ArraySummary(item_type=VT.ARRAY, count=2)


def test_header_alone_is_enough():
    data = build_gguf(llama_metadata(), llama_like())
    h = parse(data)
    assert parse_gguf_header(data[: h.header_bytes], file_size=len(data)) == h


# --- hostile headers: each a typed error naming the numbers ---------------------------


def one_tensor(name=b"t", dims=(32,), ggml_type=0, offset=0, n_dims=None, kvs=b"", n_kv=0) -> bytes:
    info = pack_string(name) + struct.pack("<I", len(dims) if n_dims is None else n_dims)
    info += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ggml_type, offset)
    return pack_preamble(1, n_kv) + kvs + info + bytes(4096)


def one_kv(kv: bytes) -> bytes:
    return pack_preamble(0, 1) + kv + bytes(64)


def raw_array(key: bytes, item_type: int, count: int, payload: bytes = b"") -> bytes:
    return pack_string(key) + struct.pack("<IIQ", VT.ARRAY, item_type, count) + payload


HOSTILE = {
    "bad magic": (b"GGML" + bytes(40), GGUFFormatError, "bad magic"),
    "version 1": (pack_preamble(0, 0, version=1), GGUFFormatError, "version 1 is not supported"),
    "version 4": (pack_preamble(0, 0, version=4), GGUFFormatError, "version 4"),
    "version 0": (pack_preamble(0, 0, version=0), GGUFFormatError, "version 0"),
    "big-endian": (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), GGUFFormatError, "big-endian GGUF is not supported"),
    "tensor cap": (pack_preamble(2**20 + 1, 0), GGUFLimitError, "tensor count 1,048,577"),
    "kv cap": (pack_preamble(0, 2**62), GGUFLimitError, "key/value count"),
    "kvs past file": (pack_preamble(0, 1000) + bytes(100), GGUFLimitError, "1,000 key/values"),
    "tensors past file": (pack_preamble(100, 0) + bytes(100), GGUFLimitError, "100 tensors"),
    "key too long": (
        pack_preamble(0, 1) + struct.pack("<Q", 10**6) + bytes(64),
        GGUFLimitError,
        "key of 1,000,000 bytes",
    ),
    "empty key": (one_kv(pack_kv(b"", 1)), GGUFValueError, "empty key"),
    "key not utf-8": (one_kv(pack_kv(b"\xff\xfe", 1)), GGUFValueError, "not UTF-8"),
    "string over cap": (
        one_kv(pack_string(b"s") + struct.pack("<IQ", VT.STRING, 2**40)),
        GGUFLimitError,
        "1,099,511,627,776",
    ),
    "string past file": (
        one_kv(pack_string(b"s") + struct.pack("<IQ", VT.STRING, 1000)),
        GGUFLimitError,
        "past the end of the file",
    ),
    "unknown value type": (one_kv(pack_string(b"k") + struct.pack("<I", 13)), GGUFValueError, "unknown value type 13"),
    "unknown item type": (one_kv(raw_array(b"k", 99, 1)), GGUFValueError, "unknown value type 99"),
    "array over cap": (one_kv(raw_array(b"k", VT.UINT8, 2**31)), GGUFLimitError, "2,147,483,648 items"),
    # gguf-py's case: 5,000,000 FLOAT64 need 40 MB; the file has ~5 MB
    "array past file": (
        one_kv(raw_array(b"k", VT.FLOAT64, 5_000_000)) + bytes(5_200_008),
        GGUFLimitError,
        "5,000,000 items",
    ),
    "strings past file": (one_kv(raw_array(b"k", VT.STRING, 10**6)), GGUFLimitError, "1,000,000 items"),
    "too deep": (
        one_kv(
            raw_array(
                b"k",
                VT.ARRAY,
                1,
                struct.pack("<IQ", VT.ARRAY, 1) + struct.pack("<IQ", VT.ARRAY, 1) + struct.pack("<IQ", VT.UINT8, 0),
            )
        ),
        GGUFValueError,
        "deeper than 3",
    ),
    "duplicate key": (pack_preamble(0, 2) + pack_kv("k", 1) + pack_kv("k", 2), GGUFValueError, "duplicate key 'k'"),
    "alignment 48": (one_kv(pack_kv("general.alignment", 48)), GGUFValueError, "48; it must be a power of two"),
    "alignment 0": (one_kv(pack_kv("general.alignment", 0)), GGUFValueError, "power of two"),
    "alignment u64": (one_kv(pack_kv("general.alignment", Typed(32, VT.UINT64))), GGUFValueError, "must be UINT32"),
    "n_dims 0": (one_tensor(dims=(), n_dims=0), GGUFTensorError, "0 dimensions"),
    "n_dims 5": (one_tensor(dims=(1,) * 5), GGUFTensorError, "5 dimensions"),
    "n_dims 1e6": (one_tensor(dims=(1,) * 8, n_dims=1_000_000), GGUFTensorError, "1,000,000 dimensions"),
    "zero dim": (one_tensor(dims=(32, 0)), GGUFTensorError, "zero dimension"),
    # np.prod of these wraps to 4 in uint64 (gguf-py's wraparound case)
    "dims overflow": (one_tensor(dims=(4194305, 4194305, 211106198978564)), GGUFTensorError, "more than int64"),
    "unknown ggml type": (one_tensor(ggml_type=31), GGUFTensorError, "unknown ggml type 31"),
    "block size": (
        one_tensor(dims=(100, 2), ggml_type=Q4_K),
        GGUFTensorError,
        r"row size \(100\) is not a multiple of Q4_K block size \(256\)",
    ),
    "unaligned offset": (one_tensor(offset=8), GGUFTensorError, "offset 8, not a multiple of the alignment"),
    "empty name": (one_tensor(name=b""), GGUFTensorError, "name of 0 bytes"),
    "long name": (one_tensor(name=b"x" * 64), GGUFTensorError, "name of 64 bytes"),
    "duplicate tensor": (
        pack_preamble(2, 0)
        + pack_tensor_info("t", (32,), F32, 0)
        + pack_tensor_info("t", (32,), F32, 128)
        + bytes(512),
        GGUFTensorError,
        "duplicate tensor name 't'",
    ),
    "overlap": (
        pack_preamble(2, 0)
        + pack_tensor_info("a", (64,), F32, 0)
        + pack_tensor_info("b", (64,), F32, 128)
        + bytes(512),
        GGUFTensorError,
        "'a' .* overlaps tensor 'b'",
    ),
    "data past file": (
        pack_preamble(1, 0) + pack_tensor_info("t", (64, 64), F32, 0) + bytes(64),
        GGUFTruncatedError,
        "'t' ends at byte",
    ),
    "truncated file": (
        pack_preamble(0, 1) + pack_string("key") + struct.pack("<I", VT.STRING) + bytes(4),
        GGUFTruncatedError,
        "needs at least 47 bytes but the file has 43",
    ),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_hostile_headers_raise_typed_errors(case):
    data, error, match = HOSTILE[case]
    with pytest.raises(error, match=match):
        parse(data)


def test_prefix_longer_than_file_size_is_an_error():
    with pytest.raises(GGUFError, match="smaller than the 24 bytes"):
        parse_gguf_header(pack_preamble(0, 0), file_size=10)


def test_claims_past_the_header_cap_fail_without_file_size():
    # 1,000,000 keys need ≥ 14 MB (allowed, so: fetch more); 100M strings need 800 MB (refused)
    with pytest.raises(GGUFNeedMoreBytes) as err:
        parse_gguf_header(pack_preamble(0, 10**6))
    assert err.value.needed_total == 24 + 14 * 10**6
    with pytest.raises(GGUFLimitError, match="past the cap"):
        parse_gguf_header(one_kv(raw_array(b"k", VT.STRING, 10**8)))
    assert MAX_HEADER_BYTES < 8 * 10**8


# --- prefixes -------------------------------------------------------------------------


def small_file() -> bytes:
    md = llama_metadata(vocab=40) | {"general.alignment": Typed(64, VT.UINT32), "pattern": [1, 0, 1]}
    return build_gguf(md, llama_like(blocks=1, vocab=64), alignment=64)


@pytest.mark.parametrize("with_size", [False, True])
def test_every_prefix_needs_more_or_parses_fully(with_size):
    data = small_file()
    full = parse(data)
    for n in range(full.header_bytes + 2):  # the data section is never needed
        kw = {"file_size": len(data)} if with_size else {}
        try:
            h = parse_gguf_header(data[:n], **kw)
        except GGUFNeedMoreBytes as err:
            assert err.have == n < full.header_bytes
            # a true lower bound: never past the header's real end
            assert n < err.needed_total <= full.header_bytes
        else:
            assert n >= full.header_bytes and h == full


def fetch_steps(data: bytes, start: int, policy) -> tuple[int, GGUFHeader]:
    have, steps = start, 0
    while True:
        try:
            return steps, parse_gguf_header(data[:have])
        except GGUFNeedMoreBytes as err:
            steps += 1
            have = policy(err)


def test_fetching_needed_total_converges_in_few_steps():
    data = small_file()
    steps, h = fetch_steps(data, 0, lambda e: e.needed_total)
    assert h == parse(data) and steps <= 12


def test_big_vocabulary_converges_with_suggested_fetch():
    vocab = 150_000
    data = build_gguf(
        llama_metadata(vocab=vocab) | {"tokenizer.ggml.merges": ["a b"] * vocab}, llama_like(), with_data=False
    )
    steps, h = fetch_steps(data, 64 * 1024, suggested_fetch_bytes)
    assert h.array_count("tokenizer.ggml.tokens") == vocab
    assert steps <= 6  # 64 KiB, then lower bounds and doubling up to the 4.7 MB header (3 steps)
    assert suggested_fetch_bytes(GGUFNeedMoreBytes(100, 150), file_size=180) == 180
    assert suggested_fetch_bytes(GGUFNeedMoreBytes(100, 500)) == 500


# --- fuzzing: every mutation gives a GGUFError or a valid header -------------------------

FUZZ_TENSORS = llama_like(blocks=1, hidden=256, ffn=256, vocab=32)
FUZZ_BASES = [
    build_gguf(llama_metadata(vocab=70) | {"swa": [True, False, True]}, FUZZ_TENSORS, with_data=False),
    build_gguf(
        {"general.alignment": Typed(64, VT.UINT32), "n": Typed([[1, 2], [3]], VT.ARRAY, VT.ARRAY)},
        [("a", (32, 2), F32), ("b", (256,), Q4_K)],
        alignment=64,
        version=2,
        with_data=False,
    ),
    build_gguf({"s": "", "f": Typed(1.5, VT.FLOAT64), "xs": Typed([1, 2, 3], VT.ARRAY, VT.UINT64)}, with_data=False),
]
HUGE = [2**16, 2**20 + 1, 2**31, 2**32 - 1, 2**40, 2**63 - 1, 2**63, 2**64 - 1]


def mutate(data: bytearray, rng: random.Random) -> bytearray:
    """Flip bits, overwrite bytes, plant huge counts, insert, delete or truncate (1 to 3 times)."""
    for _ in range(rng.randint(1, 3)):
        if not data:
            break
        op, at = rng.choice(["flip", "byte", "huge", "insert", "delete", "truncate"]), rng.randrange(len(data))
        if op == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif op == "byte":
            data[at] = rng.randrange(256)
        elif op == "huge":  # a count, length, dim or offset gone wild
            data[at : at + 8] = struct.pack("<Q", rng.choice(HUGE))
        elif op == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == "delete":
            del data[at : at + rng.randint(1, 16)]
        else:
            del data[at:]
    return data


# One seeded Random per example keeps hypothesis's per-example cost low
# (10,000 examples in a few seconds) while staying derandomized and replayable.
@st.composite
def mutated_headers(draw) -> tuple[bytes, int | None]:
    data = mutate(bytearray(draw(st.sampled_from(FUZZ_BASES))), random.Random(draw(st.integers(0, 2**64 - 1))))
    size = draw(st.sampled_from([None, "exact", "big"]))
    file_size = None if size is None else len(data) if size == "exact" else len(data) + 10**7
    return bytes(data), file_size


@settings(
    max_examples=10_000, deadline=timedelta(milliseconds=500), derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
@given(mutated_headers())
def test_fuzzed_headers_give_typed_errors_or_headers(case):
    data, file_size = case
    try:
        h = parse_gguf_header(data, file_size=file_size)
    except GGUFNeedMoreBytes as err:
        assert err.have == len(data) < err.needed_total
        assert file_size is None or err.needed_total <= file_size
    except GGUFError:
        pass
    else:
        assert h.header_bytes <= len(data) and h.data_offset % h.alignment == 0
        assert all(t.n_bytes > 0 and t.offset % h.alignment == 0 for t in h.tensors)


# --- split sets -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "filename, expected",
    [
        ("Qwen3-235B-A22B-Q4_K_M-00001-of-00003.gguf", ("Qwen3-235B-A22B-Q4_K_M", 1, 3)),
        ("dir/m-00003-of-00003.gguf", ("m", 3, 3)),
        ("m-00004-of-00003.gguf", None),
        ("m-00000-of-00003.gguf", None),
        ("m.gguf", None),
        ("m-1-of-3.gguf", None),
    ],
)
def test_split_parts(filename, expected):
    assert split_parts(filename) == expected


def split_set(count=3, **extra):
    parts = []
    for no in range(count):
        md = {"split.no": Typed(no, VT.UINT16), "split.count": Typed(count, VT.UINT16)}
        if no == 0:
            md = {"general.architecture": "llama", **md, "split.tensors.count": Typed(count * 2, VT.INT32), **extra}
        tensors = [(f"blk.{no}.a.weight", (32,), F32), (f"blk.{no}.b.weight", (32,), F32)]
        parts.append(parse(build_gguf(md, tensors), name=f"m-{no + 1:05d}-of-{count:05d}.gguf"))
    return parts


def test_merge_split_headers_in_any_order():
    a, b, c = split_set()
    merged = merge_split_headers([c, a, b])
    assert merged.architecture == "llama" and merged.name == a.name
    assert [t.name for t in merged.tensors] == [f"blk.{i}.{x}.weight" for i in range(3) for x in "ab"]
    assert [t.split_index for t in merged.tensors] == [0, 0, 1, 1, 2, 2]
    assert merged.header_bytes == a.header_bytes + b.header_bytes + c.header_bytes


def test_merge_by_file_names_without_split_keys():
    parts = [
        parse(build_gguf({"k": i}, [(f"t{i}", (32,), F32)]), name=f"m-{i + 1:05d}-of-00002.gguf") for i in range(2)
    ]
    merged = merge_split_headers(parts[::-1])
    assert merged.get("k") == 0 and [t.name for t in merged.tensors] == ["t0", "t1"]


def test_merge_errors():
    a, b, c = split_set()
    with pytest.raises(GGUFSplitError, match="missing: 2; repeated or out of range: none"):
        merge_split_headers([a, c])
    with pytest.raises(GGUFSplitError, match="repeated or out of range: 3"):
        merge_split_headers([a, b, c, c])
    with pytest.raises(GGUFSplitError, match="no split parts"):
        merge_split_headers([])
    twin = parse(
        build_gguf(
            {"split.no": Typed(1, VT.UINT16), "split.count": Typed(3, VT.UINT16)}, [("blk.0.a.weight", (32,), F32)]
        )
    )
    with pytest.raises(GGUFSplitError, match="'blk.0.a.weight' is in part 1 and part 2"):
        merge_split_headers([a, twin, c])
    (x,) = split_set(count=1)
    with pytest.raises(GGUFSplitError, match="split.tensors.count is 2 but the parts hold 0"):
        merge_split_headers([parse(build_gguf(dict(x.metadata) | {"split.tensors.count": 2}))])
    odd = parse(build_gguf({"split.no": Typed(2, VT.UINT16), "split.count": Typed(4, VT.UINT16)}))
    with pytest.raises(GGUFSplitError, match="split.count 4, the first part says 3"):
        merge_split_headers([a, b, odd])


# --- real metadata ----------------------------------------------------------------------


def test_qwen_dump_key_values_parse_back():
    dump = json.loads((DATA / "Qwen__Qwen2.5-0.5B-Instruct.ollama_convert_expected.json").read_text())
    md = dump_scalar_metadata(dump)
    tensors = [("token_embd.weight", (896, 151936), F16)]
    header = build_gguf(md, tensors, with_data=False)
    h = parse_gguf_header(header, file_size=data_file_size(header, tensors))
    assert h.architecture == "qwen2" and h.arch_get("block_count") == 24
    assert h.arch_get("attention.head_count_kv") == 2 and h.get("general.file_type") == 1
    assert h.tensors[0].n_bytes == 896 * 151936 * 2
