"""Pytest fixtures for the test Hub (``hubserver``) and writers for its content.

The root conftest (``tests/conftest.py``) loads these fixtures for every test
module. PYTEST_DONT_REWRITE: no asserts here,
and test modules import the constants below before pytest registers the plugin.

The standard tree (built once per session) holds, under fixed repo ids:

- ``GATED``   meta-llama/Meta-Llama-3.1-8B: real config, 4 safetensors shards with
  the real 8B tensor shapes (8,030,261,248 parameters, BF16, sparse), gated by GATED_TOKEN.
- ``SINGLE``  fake-org/llama-tiny-single: a tiny config and one model.safetensors.
- ``SHARDED`` fake-org/llama-tiny-sharded: the same tensors over 3 shards and an index.
- ``FP8``     nvidia/Llama-3.1-70B-Instruct-FP8: config.json and hf_quant_config.json.
- ``GGUF``    fake-org/tiny-GGUF: GGUF files (sparse, 1 GiB and more) whose headers are
  390 kB (20k-token vocab) and 5.3 MB (200k tokens, 60k merges), and a 2-part split model.
- ``NOTHING`` fake-org/readme-only; ``BAD_CONFIG`` fake-org/bad-config (not JSON);
  ``NAN_CONFIG`` fake-org/nan-config (NaN and Infinity); ``PRIVATE`` fake-org/private-model.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
from pathlib import Path

import pytest

from support.corpus import CONFIGS
from support.gguf_factory import VT, Typed, build_gguf, data_file_size, llama_like, llama_metadata
from support.hubserver import HubServer

__all__ = [
    "BAD_CONFIG",
    "FP8",
    "GATED",
    "GATED_TOKEN",
    "GGUF",
    "GGUF_FILES",
    "NAN_CONFIG",
    "NOTHING",
    "PRIVATE",
    "PRIVATE_TOKEN",
    "SHARDED",
    "SINGLE",
    "closed_port_endpoint",
    "hub_endpoint",
    "hub_root",
    "hub_server",
    "new_hub_server",
]

GATED = "meta-llama/Meta-Llama-3.1-8B"
SINGLE = "fake-org/llama-tiny-single"
SHARDED = "fake-org/llama-tiny-sharded"
FP8 = "nvidia/Llama-3.1-70B-Instruct-FP8"
GGUF = "fake-org/tiny-GGUF"
NOTHING = "fake-org/readme-only"
BAD_CONFIG = "fake-org/bad-config"
NAN_CONFIG = "fake-org/nan-config"
PRIVATE = "fake-org/private-model"
GATED_TOKEN = "hf_GATEDtestTOKEN0123456789abcdef"
PRIVATE_TOKEN = "hf_PRIVATEtestTOKEN0123456789abcd"
#: file name -> (header bytes, file size in bytes) of the GGUF repo, filled by build_standard_repos
GGUF_FILES: dict[str, tuple[int, int]] = {}
TINY = {"layers": 2, "hidden": 64, "intermediate": 128, "vocab": 256, "heads": 4, "kv_heads": 2}


# ---- test content: safetensors, GGUF, repo folders ------------------------------------------

# bytes per element; safetensors dtype names (safetensors/src/tensor.rs Dtype)
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}


def write_safetensors(path: Path, tensors: dict, *, metadata: dict | None = None) -> int:
    """Write a real safetensors header over a sparse (all-zero) data section.

    ``tensors`` maps name -> (dtype, shape). Layout: 8-byte little-endian
    header length, the JSON header padded with spaces to a multiple of 8, then
    the data. Returns the file size in bytes.
    """
    header, off = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = SAFETENSORS_DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = metadata or {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        f.truncate(8 + len(hb) + off)
    return 8 + len(hb) + off


def write_sharded_safetensors(folder: Path, tensors: dict, shards: int) -> dict[str, int]:
    """Split ``tensors`` over ``model-0000i-of-0000n.safetensors`` plus ``model.safetensors.index.json``.

    Returns shard file name -> file size in bytes.
    """
    names = list(tensors)
    per = -(-len(names) // shards)
    sizes, weight_map, total = {}, {}, 0
    for i in range(shards):
        fn = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k] for k in names[i * per : (i + 1) * per]}
        sizes[fn] = write_safetensors(folder / fn, part)
        weight_map.update(dict.fromkeys(part, fn))
        total += sum(SAFETENSORS_DTYPE_BYTES[dt] * _prod(shape) for dt, shape in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return sizes


def llama_tensors(
    *,
    layers: int,
    hidden: int,
    intermediate: int,
    vocab: int,
    heads: int,
    kv_heads: int,
    dtype: str = "BF16",
    tied: bool = False,
) -> dict:
    """Tensor names and shapes of a Llama-style model, as HF checkpoints name them."""
    hd = hidden // heads
    t = {"model.embed_tokens.weight": (dtype, (vocab, hidden)), "model.norm.weight": (dtype, (hidden,))}
    if not tied:
        t["lm_head.weight"] = (dtype, (vocab, hidden))
    for i in range(layers):
        p = f"model.layers.{i}."
        t.update(
            {
                p + "input_layernorm.weight": (dtype, (hidden,)),
                p + "post_attention_layernorm.weight": (dtype, (hidden,)),
                p + "self_attn.q_proj.weight": (dtype, (heads * hd, hidden)),
                p + "self_attn.k_proj.weight": (dtype, (kv_heads * hd, hidden)),
                p + "self_attn.v_proj.weight": (dtype, (kv_heads * hd, hidden)),
                p + "self_attn.o_proj.weight": (dtype, (hidden, heads * hd)),
                p + "mlp.gate_proj.weight": (dtype, (intermediate, hidden)),
                p + "mlp.up_proj.weight": (dtype, (intermediate, hidden)),
                p + "mlp.down_proj.weight": (dtype, (hidden, intermediate)),
            }
        )
    return t


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def make_repo(
    root: Path, repo_id: str, files: dict | None = None, *, gated_tokens=None, private_tokens=None, branches=()
) -> Path:
    """Create ``root/repo_id`` with ``files`` (path -> bytes, str, or a dict written as JSON).

    ``gated_tokens`` / ``private_tokens`` (iterables) write ``.gated`` / ``.private``;
    an empty iterable gates the repo with no token allowed.
    """
    folder = Path(root) / repo_id
    folder.mkdir(parents=True, exist_ok=True)
    for rel, content in (files or {}).items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, dict):
            content = json.dumps(content, indent=1)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    for name, toks in ((".gated", gated_tokens), (".private", private_tokens), (".branches", branches or None)):
        if toks is not None:
            (folder / name).write_text("".join(f"{t}\n" for t in toks))
    return folder


def write_gguf(path: Path, metadata: dict, tensors: list, *, file_size: int | None = None) -> tuple[int, int]:
    """A GGUF file from ``gguf_factory.build_gguf``: the real header, then a sparse data section.

    ``file_size`` (bytes) defaults to what the tensors need. Returns (header bytes, file size).
    """
    header = build_gguf(metadata, tensors, with_data=False)
    size = max(file_size or 0, data_file_size(header, tensors))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(size)
    return len(header), size


def config_fixture(name: str) -> dict:
    """A fixture config by its file name stem, e.g. ``meta-llama__Meta-Llama-3.1-8B``."""
    return json.loads((CONFIGS / f"{name}.json").read_text())


def build_standard_repos(root: Path) -> Path:
    """Write the standard tree described in the module docstring under ``root``."""
    d = make_repo(
        root,
        GATED,
        {"config.json": config_fixture("meta-llama__Meta-Llama-3.1-8B"), "README.md": "# 8B\n"},
        gated_tokens=[GATED_TOKEN],
    )
    write_sharded_safetensors(
        d, llama_tensors(layers=32, hidden=4096, intermediate=14336, vocab=128256, heads=32, kv_heads=8), 4
    )
    tiny_cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
        "torch_dtype": "bfloat16",
    }
    d = make_repo(root, SINGLE, {"config.json": tiny_cfg})
    write_safetensors(d / "model.safetensors", llama_tensors(**TINY))
    d = make_repo(root, SHARDED, {"config.json": tiny_cfg})
    write_sharded_safetensors(d, llama_tensors(**TINY), 3)
    make_repo(
        root,
        FP8,
        {
            "config.json": config_fixture("nvidia__Llama-3.1-70B-Instruct-FP8"),
            "hf_quant_config.json": config_fixture("nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config"),
        },
    )
    d = make_repo(root, GGUF, {"README.md": "# GGUF\n"})
    GGUF_FILES["tiny-Q4_K_M.gguf"] = write_gguf(
        d / "tiny-Q4_K_M.gguf", llama_metadata(vocab=20_000), llama_like(vocab=20_000), file_size=1 << 30
    )
    big = llama_metadata(vocab=200_000, **{"tokenizer.ggml.merges": [f"m{i} x{i}" for i in range(60_000)]})
    GGUF_FILES["big-vocab-Q8_0.gguf"] = write_gguf(d / "big-vocab-Q8_0.gguf", big, llama_like(), file_size=3 << 30)
    for k in (1, 2):
        name = f"split-{k:05d}-of-00002.gguf"
        GGUF_FILES[name] = write_gguf(
            d / name, llama_metadata(**{"split.no": Typed(k - 1, VT.UINT16)}), llama_like(), file_size=256 << 20
        )
    make_repo(root, NOTHING, {"README.md": "nothing to see\n", ".gitattributes": "*.bin filter=lfs\n"})
    make_repo(root, BAD_CONFIG, {"config.json": "this is not JSON {"})
    make_repo(root, NAN_CONFIG, {"config.json": '{"model_type": "llama", "rope_theta": NaN, "max": Infinity}'})
    make_repo(root, PRIVATE, {"config.json": tiny_cfg}, private_tokens=[PRIVATE_TOKEN])
    return root


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def hub_root(tmp_path_factory) -> Path:
    """The standard repo tree (read-only by convention: copy it to change it)."""
    return build_standard_repos(tmp_path_factory.mktemp("hub"))


@pytest.fixture(scope="session")
def hub_server(hub_root):
    """One test Hub for the session; do not set faults on it (use ``new_hub_server``)."""
    with HubServer(hub_root) as server:
        yield server


@pytest.fixture
def hub_endpoint(hub_server, monkeypatch) -> str:
    """The session server's URL, also set as ``HF_ENDPOINT``; ``HF_TOKEN`` and offline mode cleared."""
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return hub_server.endpoint


@pytest.fixture
def new_hub_server(hub_root, tmp_path):
    """A factory of private servers (faults, counters, changed repos): ``new_hub_server(root=None, copy=False)``.

    ``copy=True`` serves a copy of the standard tree (sparse files stay sparse), to edit freely.
    """
    servers = []

    def make(root: Path | None = None, *, copy: bool = False) -> HubServer:
        if copy:
            root = tmp_path / f"hubcopy{len(servers)}"
            shutil.copytree(hub_root, root, copy_function=_sparse_copy)
        servers.append(HubServer(root or hub_root).start())
        return servers[-1]

    yield make
    for s in servers:
        s.stop()


def _sparse_copy(src: str, dst: str) -> None:
    size = Path(src).stat().st_size
    if size < 1 << 24:
        shutil.copy2(src, dst)
        return
    with open(src, "rb") as f:
        head = f.read(1 << 24)
    with open(dst, "wb") as f:  # the standard tree's big files are headers over holes
        f.write(head)
        f.truncate(size)


@pytest.fixture
def closed_port_endpoint() -> str:
    """An endpoint on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
