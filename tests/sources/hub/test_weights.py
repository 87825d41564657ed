"""explorer.sources.hub.weights: safetensors headers read in one request each, against the test Hub.

Nothing of explorer is mocked: the reads go to ``hubserver``, which logs each request and its Range.
The hostile headers are built byte by byte and served, or given to the parser, which takes bytes.
"""

from __future__ import annotations

import json
import struct

import pytest
from support.hub_fixtures import make_repo, write_safetensors

from explorer.errors import HubError
from explorer.sources.hub.records import SAFETENSORS_INDEX
from explorer.sources.hub.weights import (
    SAFETENSORS_ENTRY_BYTES,
    SAFETENSORS_HEADER_SLACK_BYTES,
    fetch_safetensors_params,
    first_read_bytes,
    parameter_counts,
)

REPO = "weights-org/two-shards"
SINGLE_FILE = "weights-org/one-file"
#: shard 1 holds two tensors of 4,096 BF16 parameters each, shard 2 one of 16,384 (the data, all zeros and
#: sparse, runs past each first read, so the server sends every byte asked for)
SHARD_1 = {"a.weight": ("BF16", [64, 64]), "b.weight": ("BF16", [4096])}
SHARD_2 = {"c.weight": ("BF16", [128, 128])}


def _shards(root, *, metadata: dict | None = None) -> dict[str, int]:
    """REPO with two shards and their index; shard 2's ``__metadata__`` is ``metadata``. Header lengths by file."""
    folder = make_repo(root, REPO, {"config.json": {"model_type": "llama"}})
    lengths = {}
    for name, tensors, meta in (("s-1.safetensors", SHARD_1, None), ("s-2.safetensors", SHARD_2, metadata)):
        write_safetensors(folder / name, tensors, metadata=meta)
        lengths[name] = struct.unpack("<Q", (folder / name).read_bytes()[:8])[0]
    weight_map = {**dict.fromkeys(SHARD_1, "s-1.safetensors"), **dict.fromkeys(SHARD_2, "s-2.safetensors")}
    (folder / SAFETENSORS_INDEX).write_text(json.dumps({"weight_map": weight_map}))
    return lengths


def _ranges(server, name: str) -> list[str]:
    return [rng for _, path, rng, _ in server.stats.log if path.endswith("/" + name)]


def test_first_read_is_sized_from_the_tensors_the_index_names():
    # two names of 8 bytes: 2 × (8 + 128) + 4,096 = 4,368 bytes, where huggingface_hub reads 100,001
    assert first_read_bytes(["a.weight", "b.weight"]) == 4_368
    assert SAFETENSORS_ENTRY_BYTES == 128 and SAFETENSORS_HEADER_SLACK_BYTES == 4_096
    # a name's UTF-8 bytes count, not its characters: "é" is 2 bytes
    assert first_read_bytes(["é"]) == 2 + 128 + 4_096
    # a hostile index naming millions of tensors asks at most the largest header accepted, plus its length
    assert first_read_bytes(["x" * 1000] * 30_000) == 25_000_008


def test_each_shard_header_is_one_request_sized_from_the_index(tmp_path, new_hub_server):
    lengths = _shards(tmp_path)
    server = new_hub_server(tmp_path)
    params = fetch_safetensors_params(REPO, "main", endpoint=server.endpoint)
    assert dict(params.params_by_dtype) == {"BF16": 4_096 + 4_096 + 16_384} and params.total_params == 24_576
    # the index, then one read per shard: 4,368 bytes for shard 1 (above), 1 × (8 + 128) + 4,096 = 4,232 for shard 2
    assert _ranges(server, SAFETENSORS_INDEX) == [""]
    assert _ranges(server, "s-1.safetensors") == ["bytes=0-4367"]
    assert _ranges(server, "s-2.safetensors") == ["bytes=0-4231"]
    assert all(8 + n <= 4_232 for n in lengths.values())  # each header fits its first read
    assert sum(server.stats.bytes_sent[p] for p in server.stats.bytes_sent if p.endswith("s-1.safetensors")) == 4_368


def test_a_header_longer_than_its_first_read_takes_exactly_one_more(tmp_path, new_hub_server):
    lengths = _shards(tmp_path, metadata={"format": "pt", "notes": "n" * 10_000})
    server = new_hub_server(tmp_path)
    params = fetch_safetensors_params(REPO, "main", endpoint=server.endpoint)
    assert params.total_params == 24_576  # the metadata changes no count
    long = lengths["s-2.safetensors"]
    assert long > 4_232 - 8
    assert _ranges(server, "s-2.safetensors") == ["bytes=0-4231", f"bytes=8-{long + 7}"]
    assert _ranges(server, "s-1.safetensors") == ["bytes=0-4367"]


def test_a_single_file_is_read_as_huggingface_hub_reads_it(tmp_path, new_hub_server):
    folder = make_repo(tmp_path, SINGLE_FILE, {"config.json": {"model_type": "llama"}})
    write_safetensors(folder / "model.safetensors", SHARD_1)
    server = new_hub_server(tmp_path)
    assert fetch_safetensors_params(SINGLE_FILE, "main", endpoint=server.endpoint).total_params == 8_192
    assert _ranges(server, "model.safetensors") == ["bytes=0-100000"]


def _header(doc) -> bytes:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return text.encode()


def _counts(doc) -> dict[str, int]:
    return parameter_counts(_header(doc), REPO, "s.safetensors", "repo 'r', revision 's'")


GOOD = {"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}


def test_counts_read_only_dtype_and_shape_of_each_tensor():
    assert _counts(GOOD) == {"BF16": 6}
    scalar = {"s": {"dtype": "F32", "shape": [], "data_offsets": [12, 16]}}
    assert _counts({**GOOD, **scalar, "__metadata__": {"format": "pt"}}) == {"BF16": 6, "F32": 1}


def _deep(levels: int):
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, "not json-encoded"),  # deeper than the parser goes: RecursionError, typed
        ("not json", "not json-encoded"),
        ([1, 2], "not json-encoded"),  # a list, not an object
        ({"__metadata__": {"x": _deep(64)}, **GOOD}, "nested deeper than 64"),  # 66 levels with the header's own
        ({"w": {**GOOD["w"], "extra": _deep(63)}}, "nested deeper than 64"),  # in a key the format does not define
        ({"w": {"dtype": "BF16", "shape": [2, 3]}}, "format not recognized"),  # no data_offsets
        ({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [[0], 12]}}, "format not recognized"),
        ({"w": {"dtype": "BF16", "shape": [2, -3], "data_offsets": [0, 12]}}, "format not recognized"),
        ({"w": {"dtype": 7, "shape": [2, 3], "data_offsets": [0, 12]}}, "format not recognized"),
        ({"w": {"dtype": "BF16", "shape": [[2], 3], "data_offsets": [0, 12]}}, "format not recognized"),
        ({"w": 5}, "format not recognized"),
    ],
)
def test_hostile_headers_are_typed_errors(doc, says):
    with pytest.raises(HubError, match=says):
        _counts(doc)


def test_nesting_at_the_limit_is_read():
    # the header (1) > __metadata__ (2) > 62 nested lists (3..64): 64 levels, the most accepted
    assert _counts({"__metadata__": {"x": _deep(62)}, **GOOD}) == {"BF16": 6}


def test_a_hostile_header_served_is_a_typed_error(tmp_path, new_hub_server):
    folder = make_repo(tmp_path, SINGLE_FILE, {"config.json": {"model_type": "llama"}})
    body = b'{"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12],"x":' + b"[" * 200 + b"]" * 200 + b"}}"
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    server = new_hub_server(tmp_path)
    with pytest.raises(HubError, match="nested deeper than 64"):
        fetch_safetensors_params(SINGLE_FILE, "main", endpoint=server.endpoint)
    # a length past the cap is refused before any second read
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 25_000_001) + b"{}")
    server.reset_stats()
    with pytest.raises(HubError, match="too big"):
        fetch_safetensors_params(SINGLE_FILE, "main", endpoint=server.endpoint)
    assert _ranges(server, "model.safetensors") == ["bytes=0-100000"]
