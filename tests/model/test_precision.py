"""Weight formats and precisions: bytes per matrix with scales, and config parsing."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.errors import UnknownPrecisionError
from explorer.model.precision import WeightFormat
from explorer.model.quant_config import what_if_precision
from explorer.model.tensors import Tensor


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
