"""explorer.engines.llamacpp.compute: the Hadamard rotation inputs of a quantized KV cache.

The phase estimate itself is held against every measured reserve in
tests/engines/llamacpp/test_memory.py; these tests hold the rotation term
against llama.cpp 0c1e57098's own figures (tests/data/llamacpp_measured.json).
"""

from __future__ import annotations

from support.llamacpp_compare import cases, memory_for

from explorer.engines.llamacpp.compute import rotation_bytes
from explorer.units import MiB

F32 = 4


def _case(case_id: str) -> dict:
    return next(c for c in cases(ok=True) if c["id"] == case_id)


def _rotations(case_id: str) -> dict[str, int]:
    mem = memory_for(_case(case_id))
    return {c.name: rotation_bytes(mem.model, mem.context, c) for c in mem.caches if c.name != "rs"}


def test_a_quantized_k_and_v_of_head_64_add_two_64_by_64_matrices():
    # granite: 2 KV heads of 64; K q8_0 → 64² f32, V q8_0 → 64² f32: 2 × 4,096 × 4 = 32,768 B
    assert _rotations("granitehybrid_hybrid/ctx8192_faon_kq8_0_vq8_0") == {"kv": 2 * 64 * 64 * F32}


def test_the_k_matrix_is_the_largest_power_of_two_dividing_the_head_and_v_stays_64():
    # gemma3: one KV head of 256 in each of its two caches; K 256² × 4 = 262,144, V 64² × 4 = 16,384
    assert _rotations("gemma3_swa/ctx8192_faon_kq8_0_vq8_0") == {"kv": 278_528, "kv_swa": 278_528}
    # a q8_0 K with an f16 V rotates K alone
    assert _rotations("gemma3_swa/ctx8192_faon_kq8_0_vf16") == {"kv": 262_144, "kv_swa": 262_144}
    # qwen3moe: head 128 → 128² × 4 = 65,536 for K
    assert _rotations("qwen3moe_moe/ctx8192_faon_kq8_0_vf16") == {"kv": 65_536}


def test_f16_caches_and_mla_are_not_rotated():
    assert _rotations("granitehybrid_hybrid/ctx8192_faon_kf16_vf16") == {"kv": 0}
    # deepseek2's graph has the same 185 nodes at q8_0 as at f16: no rotation
    assert set(_rotations("deepseek2_mla/ctx2048_faon_kq8_0_vq8_0").values()) == {0}


def test_the_estimate_moves_by_what_llama_cpp_moved():
    # granite at 8192 cells with flash attention: llama.cpp reserved 21.8526 MiB at q8_0/q8_0 and 21.8213 MiB
    # at f16/f16 (the attention phase sets both); the 0.0313 MiB between them is the two matrices (32,768 B)
    q8, f16 = "granitehybrid_hybrid/ctx8192_faon_kq8_0_vq8_0", "granitehybrid_hybrid/ctx8192_faon_kf16_vf16"
    measured = {i: float(_case(i)["figures"]["compute_exact"][0]["mib_str"]) for i in (q8, f16)}
    assert round((measured[q8] - measured[f16]) * MiB) in range(32_768 - 53, 32_768 + 53)  # 4 decimals of a MiB
    assert memory_for(_case(q8)).host.compute_bytes - memory_for(_case(f16)).host.compute_bytes == 32_768
