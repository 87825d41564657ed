"""explorer.gguf.constants: the format tables agree with the installed gguf-py, and reading needs no numpy."""

from __future__ import annotations

import subprocess
import sys

import gguf

from explorer.gguf import constants as c


def test_value_types_match_gguf_py():
    assert {m.name: int(m) for m in c.GGUFValueType} == {m.name: int(m) for m in gguf.GGUFValueType}


def test_tensor_types_and_block_sizes_match_gguf_py():
    assert {m.name: int(m) for m in c.GGMLQuantizationType} == {m.name: int(m) for m in gguf.GGMLQuantizationType}
    ours = {int(t): sizes for t, sizes in c.GGML_QUANT_SIZES.items()}
    theirs = {int(t): tuple(sizes) for t, sizes in gguf.GGML_QUANT_SIZES.items()}
    assert ours == theirs
    assert set(c.GGML_QUANT_SIZES) == set(c.GGMLQuantizationType)  # every type has a size


def test_worked_sizes():
    # Q4_K: 256 weights in 2 + 2 + 128 + 12 = 144 bytes, 4.5 bits a weight
    assert c.GGML_QUANT_SIZES[c.GGMLQuantizationType.Q4_K] == (256, 144)
    assert c.GGML_QUANT_SIZES[c.GGMLQuantizationType.Q8_0] == (32, 34)


def test_file_types_match_gguf_py():
    want = {int(m): m.name for m in gguf.LlamaFileType if m is not gguf.LlamaFileType.GUESSED}
    assert want == c.FILE_TYPE_NAMES_BY_VALUE


def test_magic_alignment_and_keys_match_gguf_py():
    assert c.GGUF_MAGIC == gguf.GGUF_MAGIC
    assert c.GGUF_DEFAULT_ALIGNMENT == gguf.GGUF_DEFAULT_ALIGNMENT
    assert c.KEY_ALIGNMENT == gguf.Keys.General.ALIGNMENT
    assert c.KEY_FILE_TYPE == gguf.Keys.General.FILE_TYPE
    assert c.KEY_SPLIT_NO == gguf.Keys.Split.LLM_KV_SPLIT_NO
    assert c.KEY_SPLIT_COUNT == gguf.Keys.Split.LLM_KV_SPLIT_COUNT
    assert c.KEY_SPLIT_TENSORS_COUNT == gguf.Keys.Split.LLM_KV_SPLIT_TENSORS_COUNT


def test_the_gguf_package_reads_headers_without_gguf_py_or_numpy():
    code = (
        "import sys\n"
        "import explorer.gguf.header, explorer.gguf.quant, explorer.gguf.shape, explorer.sources.gguf_files\n"
        "print(sorted(m for m in ('gguf', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
