"""explorer.ui.quant_lesson: the planner's weight bytes at each precision, one matrix written out, the mix, KV, quality."""

from __future__ import annotations

import pytest

from explorer.gguf.mix import gguf_mix
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.quant_lesson import (
    LADDER,
    LESSON_MODELS,
    kept_bytes,
    kv_rows,
    ladder_rows,
    matrix_formula,
    mix_or_reason,
    mix_rules,
    mix_summary,
    perplexity_rows,
    quality_rows,
    sample_in_mix,
    sample_matrix,
)

LLAMA = "meta-llama/Meta-Llama-3.1-8B"


def shape(repo: str = LLAMA):
    return load_snapshot().shape(repo)


@pytest.mark.parametrize("repo", [r for _w, r in LESSON_MODELS])
def test_the_ladder_is_the_planners_weight_bytes(repo):
    s = shape(repo)
    rows = ladder_rows(s)
    assert [r["name"] for r in rows] == list(LADDER)
    for r in rows:
        assert r["bytes"] == s.weight_bytes(r["name"])
        assert r["bits"] == s.bits_per_weight(r["name"])
        assert 0 <= r["kept_bytes"] <= r["bytes"]
    assert rows[0]["bits"] == 16.0 and rows[0]["saved"] == 0.0


@pytest.mark.parametrize("name", LADDER)
def test_each_formula_ends_in_the_formats_own_bytes(name):
    s = shape()
    tensor, layer = sample_matrix(s)
    p = s.resolve_precision(name)
    fmt = p.format_for(tensor, layer)
    expected = fmt.matrix_bytes(tensor.rows, tensor.cols) if fmt else tensor.rows * tensor.cols * 2
    assert matrix_formula(p, tensor, layer).endswith(
        f"= {expected:,} bytes = {expected * 8 / 4096**2:.2f} bits a weight"
    )


def test_one_matrix_worked_by_hand():
    s = shape()
    q, layer = sample_matrix(s)
    assert (q.module, q.rows, q.cols) == ("model.layers.{i}.self_attn.q_proj", 4096, 4096)
    # AWQ int4 g128: 4,096 × 512 × 4 packed + 4,096 × 32 × 2 scales + 32 × 512 × 4 zero points
    assert 4096 * 512 * 4 + 4096 * 32 * 2 + 32 * 512 * 4 == 8_716_288
    awq = matrix_formula(s.resolve_precision("int4-awq"), q, layer)
    assert awq.endswith("= 8,716,288 bytes = 4.16 bits a weight") and "zero points" in awq and "g_idx" not in awq
    assert "g_idx 4,096 × 4" in matrix_formula(s.resolve_precision("int4-gptq"), q, layer)
    # fp8 block 128: one byte a weight + 32 × 32 fp32 scales
    assert matrix_formula(s.resolve_precision("fp8"), q, layer) == (
        "4,096 × 4,096 + ⌈4,096/128⌉ × ⌈4,096/128⌉ × 4 (an fp32 scale a 128×128 tile) = 16,781,312 bytes = 8.00 bits a weight"
    )
    assert sample_in_mix(s, "Q4_K_M") == (
        "blk.0.attn_q.weight at Q4_K: 16,777,216 / 256 × 144 = 9,437,184 bytes = 4.50 bits a weight (base type)"
    )


def test_what_int4_really_saves():
    """AWQ leaves the embeddings, the LM head and the norms at bf16: 64 % saved, not 75 %."""
    s = shape()
    awq = s.resolve_precision("int4-awq")
    # 2 × 128,256 × 4,096 × 2 bytes (embeddings and head) + 65 norms × 4,096 × 2 bytes
    assert kept_bytes(s, awq) == 2 * 128_256 * 4_096 * 2 + 65 * 4_096 * 2 == 2_101_878_784
    row = next(r for r in ladder_rows(s) if r["name"] == "int4-awq")
    assert round(row["saved"], 3) == 0.643 and round(row["bits"], 2) == 5.71
    assert kept_bytes(s, s.resolve_precision("Q4_K_M")) == 65 * 4_096 * 2  # a GGUF quantises every matrix


def test_the_mix_against_the_average_and_the_published_file():
    s = shape()
    summary = mix_summary(s, "Q4_K_M")
    assert summary["mix_bytes"] == sum(t.bytes for t in gguf_mix(s, "Q4_K_M")) == 4_912_898_048
    assert summary["average_bytes"] == s.weight_bytes("Q4_K_M") == 4_908_867_070
    file, size = summary["published"]
    assert file.startswith("lmstudio-community/") and size - summary["mix_bytes"] == 7_841_120
    assert [t["type"] for t in summary["types"]] == ["Q4_K", "Q6_K", "F32"]
    rules = {(r["tensor"], r["type"]): r for r in mix_rules(s, "Q4_K_M")}
    assert rules[("attn_v", "Q6_K")]["where"] == "layers 0–3, 6, 9, 12, 15, 18, 21, 24, 27–31"
    assert rules[("output", "Q6_K")]["why"] == "output: always Q6_K"
    # a mixture of experts has its mix too: an expert's ffn_down takes its layer's rule (48 layers: layer 0 has more
    # bits, layer 7 not): 128 × 2,048 × 768 = 201,326,592 weights at Q6_K (210 bytes a 256-block) or Q4_K (144)
    moe = {t.name: t for t in gguf_mix(shape("Qwen/Qwen3-30B-A3B"), "Q4_K_M")}
    assert moe["blk.0.ffn_down_exps.weight"].bytes == 201_326_592 // 256 * 210 == 165_150_720
    assert moe["blk.7.ffn_down_exps.weight"].bytes == 201_326_592 // 256 * 144 == 113_246_208
    assert mix_or_reason(shape("Qwen/Qwen3-30B-A3B"), "Q4_K_M")[0]["mix_bytes"] == sum(t.bytes for t in moe.values())
    assert mix_or_reason(shape("tiiuae/falcon-7b"), "Q4_K_M") == (
        None,
        "tiiuae/falcon-7b: llama.cpp's mix for Falcon is not modelled (its size at the mix's average bits is "
        "explorer.model.quant_config.GGUF_MIX_BITS)",
    )


def test_kv_cache_types():
    rows = kv_rows(shape(), 32768)
    assert [r["bytes_per_token"] for r in rows] == [131_072, 65_536, 69_632, 36_864]
    assert [r["gib"] for r in rows] == [4.0, 2.0, 2.125, 1.125]  # × 32,768 tokens
    assert rows[0]["kv"] == "auto (bf16)" and rows[3]["saved"] == 1 - 36_864 / 131_072
    assert rows[2]["formula"].startswith("32 × (K 1,088 + V 1,088) bytes = 69,632 bytes a token")


def test_quality_and_perplexity():
    q = {(r["where"], r["bits"]): r["quality"] for r in quality_rows([4.9, 8.5, 16.0])}
    assert q[("GPU", 16.0)] == 8.6 - (16 - 8.6) * 0.25 == 6.75
    assert q[("GPU", 8.5)] == 8.5 and q[("CPU", 8.5)] == 5.8 - (8.5 - 5.8) * 0.25
    ppl = {r["mix"]: r for r in perplexity_rows()}
    assert round(ppl["Q4_K_M"]["bits"], 2) == 4.90 and ppl["Q4_K_M"]["dppl"] == 0.1754
    assert ppl["F16"]["bits"] == 16.0
