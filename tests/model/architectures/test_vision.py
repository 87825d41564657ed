"""Vision towers: the Qwen-VL patch merger and Qwen3-VL's learned positions, counted as vLLM builds them."""

from __future__ import annotations

from support.corpus import load_config

from explorer.model.architectures.vision import vision_tower


def _params(name: str, text_hidden: int) -> int:
    tensors, spec = vision_tower(load_config(name)["vision_config"], text_hidden)
    assert spec is not None
    return sum(t.elements for t in tensors)


# one ViT block of width 1,152 (16 heads, MLP 4,304, GELU): qkv 3,456 × 1,152 + its bias, proj 1,152², the two
# MLP linears 2 × 4,304 × 1,152, two LayerNorms (weight and bias) and the proj, fc1 and fc2 biases
QWEN3_BLOCK = 3456 * 1152 + 3456 + 1152 * 1152 + 2 * 4304 * 1152 + 4 * 1152 + 1152 + 4304 + 1152
# Conv3d patch embedding 1,152 × (3 × 2 × 16 × 16) with a bias; learned positions 2,304 × 1,152
QWEN3_STEM = 1152 * 1536 + 1152 + 2304 * 1152


def test_qwen35_vision_tower_as_vllm_builds_it():
    # vLLM qwen3_vl.py: 27 blocks, and a merger of 2 × 2 patches: LayerNorm(1,152), then 4,608 → 4,608 → 5,120
    # with biases. 460,730,096: the parameters the AutoRound Qwen3.6-27B checkpoint's index implies
    # (tests/model/test_weights.py)
    merger = 2 * 1152 + 4608 * 4608 + 4608 + 5120 * 4608 + 5120
    assert _params("Qwen__Qwen3.5-27B", 5120) == 27 * QWEN3_BLOCK + QWEN3_STEM + merger == 460_730_096


def test_qwen3_vl_adds_a_deepstack_merger_per_listed_layer():
    # deepstack_visual_indexes [8, 16, 24]: three more mergers, each normalising the merged 4,608 (postshuffle)
    merger = 2 * 1152 + 4608 * 4608 + 4608 + 5120 * 4608 + 5120
    deepstack = 2 * 4608 + 4608 * 4608 + 4608 + 5120 * 4608 + 5120
    assert _params("Qwen__Qwen3-VL-32B-Instruct", 5120) == 27 * QWEN3_BLOCK + QWEN3_STEM + merger + 3 * deepstack


def test_qwen25_vl_merger_without_learned_positions():
    # 32 blocks of width 1,280 with a gated MLP of 3,420 (SiLU): qkv + bias, proj, gate/up/down, norms and biases
    # as explorer's standard ViT counts them (6 × 1,280 + 2 × 3,420); a patch embedding 1,280 × (3 × 2 × 14 × 14)
    # without bias and no position table (rotary); the merger 5,120 → 5,120 → 3,584 with biases
    block = 3840 * 1280 + 3840 + 1280 * 1280 + 3 * 3420 * 1280 + 6 * 1280 + 2 * 3420
    merger = 2 * 1280 + 5120 * 5120 + 5120 + 3584 * 5120 + 3584
    assert _params("Qwen__Qwen2.5-VL-7B-Instruct", 3584) == 32 * block + 1280 * 1176 + merger
