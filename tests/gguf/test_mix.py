"""explorer.gguf.mix: llama-quantize's per-tensor types, checked against real files' sizes."""

from __future__ import annotations

import pytest

from explorer.errors import GGUFError, UnknownPrecisionError
from explorer.gguf.mix import PUBLISHED_FILES, gguf_mix, more_bits
from explorer.sources.snapshot.read import load_snapshot
from explorer.units import MiB

#: a GGUF header (metadata, mostly the tokenizer) is at most this many bytes for these vocabularies
HEADER_BYTES = 8 * MiB


@pytest.mark.parametrize(("repo", "quant", "file", "size"), PUBLISHED_FILES, ids=lambda v: str(v)[:24])
def test_the_mix_explains_real_files_up_to_their_header(repo, quant, file, size):
    tensors = sum(t.bytes for t in gguf_mix(load_snapshot().shape(repo), quant))
    assert 0 <= size - tensors < HEADER_BYTES, f"{file}: {size:,} bytes, mix {tensors:,}"


def test_llama_3_1_8b_q4_k_m_tensor_by_tensor():
    mix = {t.name: t for t in gguf_mix(load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B"), "Q4_K_M")}
    # more bits in layers 0–3, 6, 9, …, 27 and 28–31: 16 of the 32 attn_v and ffn_down at Q6_K
    assert [i for i in range(32) if more_bits(i, 32)] == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    assert mix["blk.0.attn_v.weight"].type_name == mix["blk.6.attn_v.weight"].type_name == "Q6_K"
    assert mix["blk.4.attn_v.weight"].type_name == mix["blk.4.ffn_down.weight"].type_name == "Q4_K"
    assert mix["blk.5.attn_q.weight"].type_name == "Q4_K"
    # the head: 128,256 × 4,096 at Q6_K = 525,336,576 / 256 × 210 bytes
    assert mix["output.weight"].type_name == "Q6_K" and mix["output.weight"].bytes == 525_336_576 // 256 * 210
    assert mix["token_embd.weight"].type_name == "Q4_K"  # not tied: the embedding is the base type
    assert mix["blk.0.attn_norm.weight" if "blk.0.attn_norm.weight" in mix else "blk.0.norm0.weight"].type_name == "F32"
    assert sum(t.bytes for t in mix.values()) == 4_912_898_048


def test_fallbacks_and_tied_heads():
    snap = load_snapshot()
    gemma = {t.name: t for t in gguf_mix(snap.shape("google/gemma-2-9b-it"), "Q4_K_M")}
    assert gemma["token_embd.weight"].type_name == "Q6_K"  # tied: the embedding is the head, stored as the head
    # Qwen2.5-7B at Q8_0: the 3,584-wide rows are whole 32-blocks: nothing falls back
    assert {t.type_name for t in gguf_mix(snap.shape("Qwen/Qwen2.5-7B"), "Q8_0") if t.elements > 10**6} == {"Q8_0"}
    # Llama-3.3-70B (80 layers, GQA): llama.cpp's 70B rule lifts the attn_v left at Q4_K to Q5_K
    big = {t.name: t for t in gguf_mix(snap.shape("meta-llama/Llama-3.3-70B-Instruct"), "Q4_K_M")}
    assert big["blk.4.attn_v.weight"].type_name == "Q6_K"  # layers 0–9 are the first eighth: more bits
    assert big["blk.11.attn_v.weight"].type_name == "Q5_K" and big["blk.11.ffn_down.weight"].type_name == "Q4_K"


def test_rows_that_are_not_whole_blocks_fall_back():
    """Qwen2.5-72B's ffn_down rows are 29,568 wide = 115.5 blocks of 256: Q4_K falls back to Q5_0, Q6_K to Q8_0.
    The real file agrees (test above). The planner's average-bits what-if now takes the fallback's bits for such
    rows too (explorer.model.precision, ``fallback_bits``): 46,866,847,168 bytes against the mix's 47,409,725,440,
    1.1 % short (6 % before, blind to it: 44.4 GB)."""
    shape = load_snapshot().shape("Qwen/Qwen2.5-72B")
    mix = {t.name: t for t in gguf_mix(shape, "Q4_K_M")}
    assert mix["blk.20.ffn_down.weight"].type_name == "Q5_0"  # not a more-bits layer: Q4_K → Q5_0
    assert mix["blk.0.ffn_down.weight"].type_name == "Q8_0"  # a more-bits layer: Q6_K → Q8_0
    assert mix["blk.0.ffn_down.weight"].why == "fallback: 29,568 columns are not whole 256-blocks"
    assert mix["blk.20.ffn_up.weight"].type_name == "Q4_K"  # 8,192 columns: whole blocks
    tensors = sum(t.bytes for t in mix.values())
    assert 0.985 * tensors < shape.weight_bytes("Q4_K_M") < tensors


def test_gemma_4_moe_experts_follow_the_ffn_down_rule_by_layer():
    """Gemma 4 26B-A4B at Q4_K_M (llama-quant.cpp): an MoE's ffn_down takes its layer from its name, so the more-bits
    layers of 30 are 0–2, 5, 8, …, 23 and 26–29 (14); every ffn_down (dense 2,112 and experts' 704 wide) falls back
    from a 256-block type: Q6_K → Q8_0 in those layers, Q4_K → Q5_0 elsewhere. The router stays F32."""
    mix = {t.name: t for t in gguf_mix(load_snapshot().shape("google/gemma-4-26B-A4B"), "Q4_K_M")}
    assert [i for i in range(30) if more_bits(i, 30)] == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]
    assert mix["blk.0.ffn_down_exps.weight"].type_name == mix["blk.0.ffn_down.weight"].type_name == "Q8_0"
    assert mix["blk.4.ffn_down_exps.weight"].type_name == mix["blk.4.ffn_down.weight"].type_name == "Q5_0"
    # 128 experts × 2,816 × 704 = 253,755,392 weights at Q5_0 (22 bytes a 32-block) = 174,456,832 bytes
    assert mix["blk.4.ffn_down_exps.weight"].bytes == 253_755_392 // 32 * 22 == 174_456_832
    # gate and up fused: 128 × 1,408 × 2,816 = 507,510,784 weights, whole 256-blocks, Q4_K (144 bytes) = 285,474,816
    assert mix["blk.4.ffn_gate_exps.weight"].type_name == "Q4_K"
    assert mix["blk.4.ffn_gate_exps.weight"].bytes == 285_474_816
    assert (
        mix["blk.4.ffn_gate_inp.weight"].type_name == "F32" and mix["blk.4.ffn_gate_inp.weight"].bytes == 128 * 2816 * 4
    )
    # attn_v only in the 25 sliding layers (full layers reuse K): the first of them has more bits, the fifth not
    assert mix["blk.0.attn_v.weight"].type_name == "Q6_K" and mix["blk.4.attn_v.weight"].type_name == "Q4_K"
    assert "blk.5.attn_v.weight" not in mix
    # tied: the 262,144 × 2,816 table is stored as the head, Q6_K = 605,552,640 bytes
    assert mix["token_embd.weight"].type_name == "Q6_K" and mix["token_embd.weight"].bytes == 605_552_640
    total = sum(t.bytes for t in mix.values())
    assert total == 16_780_191_864  # 15.63 GiB
    # unsloth's file keeps token_embd at Q8_0 (the log's 748.00 MiB on the host = 784,334,848 bytes): 15.79 GiB,
    # 0.7 % under the 15.90 GiB the log loads on the card
    assert total - 605_552_640 + 784_334_848 == 16_958_974_072


def test_what_it_refuses():
    """Falcon (its own rules) is refused; so is a mix without per-tensor rules."""
    snap = load_snapshot()
    with pytest.raises(GGUFError, match="Falcon"):
        gguf_mix(snap.shape("tiiuae/falcon-7b"), "Q4_K_M")
    with pytest.raises(UnknownPrecisionError, match="IQ2_XS"):
        gguf_mix(snap.shape("Qwen/Qwen3-8B"), "IQ2_XS")
