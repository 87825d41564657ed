"""The block-FP8 rule: each card's share of a blocked weight is whole blocks, or the engine refuses to load it."""

from __future__ import annotations

from support.corpus import shape_of
from support.moe_configs import moe_shape

from explorer.engines.parallel_rules import block_refusals


def _rules(shape, tp, ep=1):
    return block_refusals(shape, shape.precision, tp, ep)


def test_minimax_m2_experts_at_tp_8_are_192_columns_a_card():
    minimax = moe_shape("MiniMaxAI/MiniMax-M2")
    ((rule, reason),) = _rules(minimax, 8)
    assert rule == "fp8-block"
    assert reason == (
        "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128. "
        "(tp 8: model.layers.{i}.mlp.experts.*.gate_proj)"
    )
    assert _rules(minimax, 4) == ()  # 1536 / 4 = 384 = 3 × 128; attention 6144 / 4 and 1024 / 4 whole too
    assert _rules(minimax, 8, ep=8) == ()  # experts whole on each card; q 768, k/v 128, o 768 a card


def test_qwen3_coder_480b_fp8_at_tp_8_is_320_and_the_dense_layers_are_checked_too():
    coder = moe_shape("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8")
    ((_, reason),) = _rules(coder, 8)
    assert reason.startswith("The output_size of gate's and up's weight = 320 is not divisible")  # 2560 / 8
    assert _rules(coder, 4) == ()  # 640 = 5 × 128
    # Qwen3-235B-A22B-FP8's 1,536-wide experts break at tp 8 as MiniMax-M2's do
    qwen235 = shape_of("Qwen__Qwen3-235B-A22B-FP8")
    assert _rules(qwen235, 8)[0][1].startswith("The output_size of gate's and up's weight = 192")


def test_deepseek_v3_keeps_its_blocks_at_tp_8_and_16_and_unblocked_weights_have_no_rule():
    v3 = shape_of("deepseek-ai__DeepSeek-V3")
    assert _rules(v3, 8) == ()  # experts 2048 / 8 = 256; dense 18432 / 8 = 2304 = 18 × 128
    # tp 32 (4 nodes): the first dense layers' 18,432 / 32 = 576 break first, the message SGLang's DeepSeek docs
    # list under troubleshooting
    ((_, reason),) = _rules(v3, 32)
    assert reason.startswith(
        "Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128."
    )
    assert _rules(v3, 32, ep=32)[0][1].startswith("Weight output_partition_size = 576")  # ep keeps experts only
    assert _rules(shape_of("meta-llama__Meta-Llama-3.1-70B"), 8) == ()  # bf16: nothing blocked
