"""Tests for explorer/gguf/quant.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gguf
import pytest
from support.corpus import DATA as TEST_DATA
from support.gguf_factory import F16, F32, Q4_K, Q6_K, Q8_0, VT, Typed, build_gguf, data_file_size

from explorer.errors import GGUFError
from explorer.gguf.header import parse_gguf_header
from explorer.gguf.quant import (
    FILE_TYPE_NAMES,
    NOMINAL_BITS_PER_WEIGHT,
    QuantName,
    bits_per_weight,
    file_type_name,
    header_bits_per_weight,
    nominal_bits_per_weight,
    quant_from_filename,
    quant_name,
)
from explorer.units import GiB

DATA = TEST_DATA / "gguf"


def header(metadata: dict, tensors=(), name: str = ""):
    data = build_gguf(metadata, tensors, with_data=False)
    return parse_gguf_header(data, file_size=data_file_size(data, tensors), name=name)


@pytest.mark.parametrize(
    "value, name",
    [
        (0, "F32"), (1, "F16"), (2, "Q4_0"), (7, "Q8_0"), (10, "Q2_K"), (15, "Q4_K_M"), (17, "Q5_K_M"),
        (18, "Q6_K"), (20, "IQ2_XS"), (25, "IQ4_NL"), (32, "BF16"), (33, "Q4_0_4_4"), (36, "TQ1_0"),
        (38, "MXFP4_MOE"), (1024, None), (999, None), (True, None), ("15", None),
    ],
)  # fmt: skip
def test_file_type_names(value, name):
    assert file_type_name(value) == name


def test_file_type_table_covers_llama_file_type():
    for member in gguf.LlamaFileType:
        if member is not gguf.LlamaFileType.GUESSED:
            assert member.name.endswith(FILE_TYPE_NAMES[member])


@pytest.mark.parametrize(
    "filename, name",
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("llama-2-7b-chat.Q2_K.gguf", "Q2_K"),
        ("gemma-2b-it-q4_k_m.gguf", "Q4_K_M"),
        ("mistral-7b-instruct-v0.2.Q5_K_M.gguf", "Q5_K_M"),
        ("Meta-Llama-3.1-8B-Instruct-Q8_0.gguf", "Q8_0"),
        ("DeepSeek-R1-UD-IQ1_S-00001-of-00003.gguf", "UD-IQ1_S"),
        ("gemma-3-27b-it-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("Llama-3.2-1B-Instruct-IQ2_XS.gguf", "IQ2_XS"),
        ("Phi-3-mini-IQ4_NL.gguf", "IQ4_NL"),
        ("model-IQ2_XXS.gguf", "IQ2_XXS"),
        ("model-Q4_0_4_4.gguf", "Q4_0_4_4"),
        ("bitnet-TQ1_0.gguf", "TQ1_0"),
        ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
        ("Qwen3-8B-BF16.gguf", "BF16"),
        ("Llama-3.2-1B-Instruct-f16.gguf", "F16"),
        ("ggml-model-f32.gguf", "F32"),
        ("model-fp16.gguf", "F16"),
        ("model-F16-Q3_K_L.gguf", "Q3_K_L"),  # the last one wins
        ("org/repo/sub/model.Q6_K.gguf", "Q6_K"),
        ("Qwen3-8B.gguf", None),
        ("model.gguf", None),
        ("F16x-model.gguf", None),
    ],
)
def test_quant_from_filename(filename, name):
    assert quant_from_filename(filename) == name


def test_quant_name_prefers_file_type_then_filename_then_tensors():
    tensors = [("a", (256, 4), Q4_K), ("b", (256, 4), Q6_K), ("c", (256,), F32)]
    assert quant_name(header({"general.file_type": 15}, tensors), "m-Q8_0.gguf") == QuantName(
        name="Q4_K_M", source="file_type"
    )
    # GUESSED (1024) is not a name; header.name is the default file name
    assert quant_name(header({"general.file_type": 1024}, tensors, name="m-IQ3_M.gguf")) == QuantName(
        name="IQ3_M", source="filename"
    )
    # Q6_K holds 2 × 210 = 420 bytes, Q4_K 2 × 144 = 288, F32 1,024: F32 dominates by bytes
    assert quant_name(header({}, tensors), "model.gguf") == QuantName(name="F32", source="tensors")
    assert quant_name(header({}, tensors[:2]), "model.gguf") == QuantName(name="Q6_K", source="tensors")
    with pytest.raises(GGUFError, match="cannot name the quantisation"):
        quant_name(header({}), "model.gguf")


def test_bits_per_weight_is_exact():
    assert bits_per_weight(144, 256) == 4.5  # one Q4_K block
    assert bits_per_weight(34 * 1000, 32 * 1000) == 8.5  # Q8_0
    with pytest.raises(GGUFError, match="positive parameter count"):
        bits_per_weight(10, 0)


@pytest.mark.parametrize(
    "type_name, bits",
    [("F32", 32), ("F16", 16), ("BF16", 16), ("Q8_0", 8.5), ("Q4_0", 4.5), ("Q4_K", 4.5), ("Q5_K", 5.5),
     ("Q6_K", 6.5625), ("Q2_K", 2.625), ("IQ4_XS", 4.25), ("IQ2_XXS", 2.0625), ("MXFP4", 4.25), ("q4_k", 4.5)],
)  # fmt: skip
def test_nominal_bits(type_name, bits):
    assert nominal_bits_per_weight(type_name) == bits
    assert nominal_bits_per_weight("Q9_9") is None
    assert all(b > 0 for b in NOMINAL_BITS_PER_WEIGHT.values())


def test_mixed_header_bits_per_weight():
    # 65,536 Q4_K weights (36,864 B) + 65,536 Q8_0 weights (69,632 B) → 106,496 × 8 / 131,072 = 6.5
    h = header({}, [("a", (256, 256), Q4_K), ("b", (256, 256), Q8_0)])
    assert header_bits_per_weight(h) == 6.5


# --- real metadata ----------------------------------------------------------------------


def loader_dump_tensors(path: Path) -> list[tuple[str, tuple[int, ...], int]]:
    """Tensor lines of a llama.cpp loader log: name, shape (trailing 1s dropped), type."""
    line = re.compile(r"- tensor\s+\d+:\s+(\S+)\s+(\w+)\s+\[([\d,\s]+)\]")
    out = []
    for m in line.finditer(path.read_text()):
        dims = [int(d) for d in m.group(3).split(",")]
        while len(dims) > 1 and dims[-1] == 1:
            dims.pop()
        out.append((m.group(1), tuple(dims), gguf.GGMLQuantizationType[m.group(2).upper()]))
    return out


def test_open_llama_f16_matches_llama_cpp_log():
    tensors = loader_dump_tensors(DATA / "openlm-research__open_llama_7b_v2.f16.llamacpp_loader_dump.txt")
    assert len(tensors) == 291
    h = header({"general.architecture": "llama", "general.file_type": 1, "llama.block_count": 32}, tensors)
    assert quant_name(h) == QuantName(name="F16", source="file_type")
    # the log: "model params = 6.74 B", "model size = 12.55 GiB (16.00 BPW)", 65 f32 + 226 f16 tensors
    assert h.parameter_count == 6_738_415_616
    assert round(h.tensor_bytes_total / GiB, 2) == 12.55
    assert round(header_bits_per_weight(h), 2) == 16.00
    assert sum(t.ggml_type == F16 for t in h.tensors) == 226
    assert sorted(k for k in h.tensors_by_block() if isinstance(k, int)) == list(range(32))


def test_qwen_dump_file_type_names_f16():
    dump = json.loads((DATA / "Qwen__Qwen2.5-0.5B-Instruct.ollama_convert_expected.json").read_text())
    h = header(
        {"general.architecture": dump["general.architecture"], "general.file_type": int(dump["general.file_type"])}
    )
    assert quant_name(h, "qwen2.5-0.5b-instruct-q8_0.gguf") == QuantName(name="F16", source="file_type")


@pytest.mark.parametrize("spec", sorted(p.name for p in DATA.glob("*.hfjs_spec.json")), ids=lambda n: n.split(".")[0])
def test_hub_file_names_agree_with_their_file_type(spec):
    data = json.loads((DATA / spec).read_text())
    filename = data["_source_gguf_url"].rsplit("/", 1)[-1]
    declared = data["metadata_partial"]["general.file_type"].rsplit(".", 1)[-1]  # "GGMLFileQuantizationType.Q2_K"
    assert quant_from_filename(filename) == declared
    file_type = int(gguf.LlamaFileType["MOSTLY_" + declared])
    assert quant_name(header({"general.file_type": Typed(file_type, VT.UINT32)}), filename).name == declared
