"""Weight formats and precisions: bytes per matrix with scales, and config parsing."""

from __future__ import annotations

import dataclasses

import pytest
from support.corpus import shape_of

from explorer.errors import UnknownPrecisionError
from explorer.model.precision import WeightFormat
from explorer.model.quant_config import what_if_precision
from explorer.model.tensors import Tensor
from explorer.units import cdiv


def test_fp8_block_scales():
    fmt = WeightFormat(kind="fp8", bits=8, block=(128, 128))
    # 4096 × 14336: 1 byte a weight + ⌈4096/128⌉·⌈14336/128⌉ = 32·112 fp32 scales
    assert fmt.matrix_bytes(4096, 14336) == 4096 * 14336 + 32 * 112 * 4
    assert fmt.matrix_bytes(130, 130) == 130 * 130 + 2 * 2 * 4  # partial blocks round up


def test_gptq_and_awq_int4_g128():
    gptq = WeightFormat(kind="int", bits=4, group_size=128, g_idx=True)
    awq = WeightFormat(kind="int", bits=4, group_size=128, packing="awq")
    rows, cols = 4096, 4096
    packed = rows * cols // 2  # 4 bits a weight, in int32 words
    scales = (cols // 128) * rows * 2  # fp16 per group per output row
    zeros = (cols // 128) * rows // 2  # 4-bit zero points, packed
    assert awq.matrix_bytes(rows, cols) == packed + scales + zeros
    assert gptq.matrix_bytes(rows, cols) == packed + scales + zeros + cols * 4  # + g_idx int32


def test_other_formats():
    assert WeightFormat(kind="bnb8", bits=8).matrix_bytes(10, 64) == 640 + 10 * 4
    assert WeightFormat(kind="bnb4", bits=4).matrix_bytes(10, 64) == 320 + 10 * 4
    assert WeightFormat(kind="nvfp4", bits=4).matrix_bytes(32, 64) == 32 * 32 + 32 * 4 + 8
    assert WeightFormat(kind="mxfp4", bits=4).matrix_bytes(32, 64) == 32 * 32 + 32 * 2
    assert WeightFormat(kind="dense", bits=16).matrix_bytes(3, 5) == 30


def test_skip_lists_keep_modules_in_base_dtype():
    p = shape_of("Qwen__Qwen3-30B-A3B-FP8").precision
    gate = Tensor(module="model.layers.{i}.mlp.gate", rows=128, cols=2048, role="router")
    q = Tensor(module="model.layers.{i}.self_attn.q_proj", rows=4096, cols=2048, role="attention", linear=True)
    assert p.format_for(gate, 0) is None
    assert p.format_for(q, 0).kind == "fp8"
    assert p.tensor_bytes(gate, 0) == 128 * 2048 * 2


def test_compressed_tensors_ignore_regexes():
    p = shape_of("moonshotai__Kimi-K2.5").precision  # int4 g32 experts; attention and shared experts ignored
    expert = Tensor(
        module="model.layers.{i}.mlp.experts.*.gate_proj",
        rows=2048,
        cols=7168,
        count=384,
        role="expert",
        split="expert_column",
        linear=True,
    )
    attn = Tensor(module="model.layers.{i}.self_attn.q_b_proj", rows=64 * 192, cols=1536, role="attention", linear=True)
    assert p.format_for(expert, 5).kind == "int" and p.format_for(expert, 5).group_size == 32
    assert p.format_for(attn, 5) is None


def test_what_if_names():
    s = shape_of("meta-llama__Meta-Llama-3.1-8B")
    assert s.weight_bytes("bf16") == 16_060_522_496
    assert s.weight_bytes("fp8") < s.weight_bytes("int8") < s.weight_bytes("bf16")
    assert s.weight_bytes("int4-awq") < s.weight_bytes("fp8")
    assert 4.5 < s.bits_per_weight("int4-gptq") < 6  # embeddings and head stay 16-bit
    q4 = what_if_precision("Q4_K_M")
    assert q4.method == "gguf" and q4.all_matrices
    assert 4.8 < s.bits_per_weight("Q4_K_M") < 5.0
    with pytest.raises(UnknownPrecisionError, match="int3"):
        what_if_precision("int3")


def test_gguf_what_ifs_follow_llamas_type_fallback():
    # llama.cpp quantises a tensor whose rows are not a multiple of 256 to a 32-block type (Q4_K → Q5_0,
    # Q6_K → Q8_0): Q4_K_M's 4.89 bits become 4.89 + (5.5 − 4.5) = 5.89 for such a tensor
    q4km = what_if_precision("Q4_K_M")
    fmt = q4km.groups[0].fmt
    assert fmt.block_cols == 256 and fmt.fallback_bits == 5.89
    assert fmt.matrix_bytes(8192, 8192) == cdiv(8192 * 8192 * 4890, 8000)
    assert fmt.matrix_bytes(8192, 29568) == cdiv(8192 * 29568 * 5890, 8000)  # Qwen2.5-72B ffn_down rows
    assert fmt.matrix_bytes(10, 100) == 10 * 100 * 2  # not a multiple of 32 either: F16
    assert what_if_precision("Q8_0").groups[0].fmt.block_cols == 0  # a 32-block type needs no fallback
    assert what_if_precision("IQ2_XXS").groups[0].fmt.fallback_bits == 4.5  # IQ types fall back to IQ4_NL
    shape = shape_of("Qwen__Qwen2.5-72B")
    # 80 ffn_down tensors of 8192 × 29568 at 5.89 bits instead of 4.89: + 80 × 8192 × 29568 / 8 bytes (2.42 GB)
    plain = dataclasses.replace(
        q4km, groups=(dataclasses.replace(q4km.groups[0], fmt=dataclasses.replace(fmt, block_cols=0)),)
    )
    extra = shape.weight_bytes(q4km) - shape.weight_bytes(plain)
    assert abs(extra - 80 * 8192 * 29568 // 8) <= 80  # a byte of rounding a tensor
    # 46.87 GB; llama.cpp's own per-tensor rules (Q6_K and its Q8_0 fallback on half the ffn_down and
    # attn_v tensors, Q6_K output) come to 47.4 GB, where the plain 4.89-bit mix said 44.4 (-6 %)
    assert 46.8e9 < shape.weight_bytes("Q4_K_M") < 47.0e9 and shape.weight_bytes(plain) < 44.5e9
