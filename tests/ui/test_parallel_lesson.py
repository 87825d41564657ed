"""explorer.ui.parallel_lesson: splits laid out, refused and sized by the planner's own vLLM engine."""

from __future__ import annotations

import pytest

from explorer.engines.registry import SPLIT_ENGINES
from explorer.engines.request import PlanRequest
from explorer.sources.snapshot.read import load_snapshot
from explorer.speed.estimate import DEFAULT_SETTINGS
from explorer.speed.roofline import decode_cycle_s, placement
from explorer.ui.parallel_lesson import (
    LESSON_MODELS,
    card_rows,
    comms,
    expert_rows,
    head_formula,
    head_rows,
    loaded_shape,
    pipeline_timing,
    split_model,
)
from explorer.units import GiB

REQUEST = PlanRequest(context_tokens=32768, concurrency=1)


def shape(repo: str):
    return load_snapshot().shape(repo)


def test_qwen2_5_7b_refuses_8_way_tensor_parallelism():
    qwen = shape("Qwen/Qwen2.5-7B")
    eight = split_model(qwen, "h100-80g", 8, "tensor", REQUEST)
    assert eight.refusals == (
        ("attention-heads", "Total attention heads (28) must be divisible by tensor parallel size (8)"),
    )
    assert eight.evaluation is None and card_rows(eight) == []
    four = split_model(qwen, "h100-80g", 4, "tensor", REQUEST)
    assert four.allowed and four.layout.parallel == "tp4"
    assert head_formula(qwen, 4) == "28 query heads / 4 cards = 7 a card; 4 KV heads / 4 cards = 1 a card"
    assert [r["query heads"] for r in head_rows(qwen, 4)] == ["0–6", "7–13", "14–20", "21–27"]
    # the refused 8-way split, had it run: 3.5 query heads a card, each KV head copied onto 2 cards
    assert head_formula(qwen, 8).startswith("28 query heads / 8 cards = 3.50: not whole; 8 cards > 4 KV heads")
    assert head_rows(qwen, 8)[1]["KV heads"] == "0 (copy 2 of 2)"


@pytest.mark.parametrize("mode", ["tensor", "pipeline"])
@pytest.mark.parametrize("repo", [r for _w, r in LESSON_MODELS])
def test_card_rows_add_up_to_the_engines_cards(repo, mode):
    """What the chart stacks is the engine's own per-card total, card by card."""
    s = shape(repo)
    split = split_model(s, "h100-80g", 4, mode, REQUEST)
    assert split.allowed
    rows = card_rows(split)
    assert len({r["card"] for r in rows}) == 4
    for stage, card in enumerate(split.evaluation.cards):
        for c in range(split.layout.tp):
            name = f"card {stage * split.layout.tp + c + 1}"
            assert sum(r["gib"] for r in rows if r["card"] == name) * GiB == pytest.approx(card.total, rel=1e-12)


def test_pipeline_stages_hold_the_embeddings_first_and_the_head_last():
    qwen = shape("Qwen/Qwen2.5-7B")
    split = split_model(qwen, "h100-80g", 3, "pipeline", REQUEST)
    assert split.stages == ((0, 9), (9, 19), (19, 28))  # 28 // 3 = 9 each, the one left over to the middle stage
    rows = {(r["card"], r["part"]): r["gib"] for r in card_rows(split)}
    assert rows[("card 1", "embeddings")] > 0 and rows[("card 1", "LM head")] == 0
    assert rows[("card 3", "embeddings")] == 0 and rows[("card 3", "LM head")] > 0
    # 152,064 × 3,584 × 2 bytes of embedding on the first card: 1.015 GiB
    assert rows[("card 1", "embeddings")] == 152_064 * 3_584 * 2 / GiB


def test_what_crosses_the_wire():
    qwen = shape("Qwen/Qwen2.5-7B")
    tp = comms(qwen, split_model(qwen, "h100-80g", 4, "tensor", REQUEST), 1)
    # 2 all-reduces × 28 layers × 2(4 − 1)/4 × 3,584 × 2 bytes = 602,112 bytes a card a step
    assert tp["bytes"] == 602_112 and tp["exchanges"] == 56 and tp["per_exchange"] == 10_752
    pp = comms(qwen, split_model(qwen, "h100-80g", 4, "pipeline", REQUEST), 8)
    assert pp["bytes"] == 3 * 8 * 3_584 * 2 == 172_032
    assert comms(qwen, split_model(qwen, "h100-80g", 1, "tensor", REQUEST), 1)["bytes"] == 0


def test_the_bubble_is_the_speed_models_cycle():
    qwen = shape("Qwen/Qwen2.5-7B")
    split = split_model(qwen, "h100-80g", 4, "pipeline", REQUEST)
    one, eight = pipeline_timing(qwen, split, 1, 32768), pipeline_timing(qwen, split, 8, 32768)
    where = placement(qwen, qwen.precision, split.layout, split.gpu, 0, False, 0, DEFAULT_SETTINGS)
    assert one["cycle_ms"] == decode_cycle_s(qwen, where, 1, 32768, qwen.kv_type()) * 1e3
    # one sequence visits the stages in turn: each card works about a quarter of the cycle, the rest of
    # the cycle (0.3 %) is the three hand-offs of 7,168 bytes
    assert one["micro_batches"] == 1 and 0.99 < sum(one["busy"]) < 1
    assert 0.7 < one["idle"] < 0.76
    # eight sequences in four micro-batches keep the slowest stage busy the whole cycle
    assert eight["micro_batches"] == 4 and max(eight["busy"]) == pytest.approx(1.0) and eight["idle"] < 0.2
    assert pipeline_timing(qwen, split_model(qwen, "h100-80g", 4, "tensor", REQUEST), 1, 32768) is None


def test_experts_vision_heads_layers_and_mla():
    moe = shape("Qwen/Qwen3-30B-A3B")
    split = split_model(moe, "h100-80g", 4, "tensor", REQUEST)
    assert split.layout.ep == 4
    assert expert_rows(moe, 4) == [
        {"card": f"card {c + 1}", "experts": f"{32 * c}–{32 * c + 31}", "count": 32} for c in range(4)
    ]
    assert expert_rows(shape("Qwen/Qwen2.5-7B"), 4) == []
    vl = split_model(shape("Qwen/Qwen3-VL-32B-Instruct"), "h100-80g", 32, "tensor", REQUEST)
    assert [rule for rule, _ in vl.refusals] == ["vision-heads"]  # 64 query heads and 8 KV heads allow 32 cards
    deep = split_model(shape("Qwen/Qwen2.5-7B"), "h100-80g", 32, "pipeline", REQUEST)
    assert deep.refusals == (("pipeline-layers", "Pipeline parallel size (32) exceeds the model's 28 layers"),)
    assert head_formula(shape("deepseek-ai/DeepSeek-V3"), 8).endswith(
        "the MLA latent has no heads: every card keeps it whole"
    )


def test_the_split_is_the_engines_own():
    """The same layout through the SplitEngine protocol gives the same per-card memory."""
    llama = shape("meta-llama/Meta-Llama-3.1-70B")
    split = split_model(llama, "h100-80g", 4, "tensor", REQUEST)
    engine = SPLIT_ENGINES["vllm"]
    again = engine.evaluate(llama, llama.precision, split.layout, split.gpu, REQUEST, llama.name)
    assert again.cards == split.evaluation.cards
    # the engine's card holds the checkpoint's share and the RoPE cache (131,072 positions × 128 × 2 bytes)
    assert split.evaluation.cards[0].weights - split.weights.total_bytes == 131_072 * 128 * 2
    rows = {(r["card"], r["part"]): r["gib"] for r in card_rows(split)}
    assert rows[("card 1", "built while loading")] == 131_072 * 128 * 2 / GiB


def test_sglang_dp_attention_cards_hold_the_engines_weights():
    """SGLang `--tp 4 --enable-dp-attention` (dp 4) on Qwen3-30B-A3B: the attention is whole on each card
    (tp / dp = 1), the experts split by tp; the lesson's parts add up to SGLang's own card, and the attention the
    lesson shows is the engine's, not tp 4's quarter."""
    qwen = shape("Qwen/Qwen3-30B-A3B")
    request = PlanRequest(context_tokens=32768, concurrency=1, dp_attention=True)
    split = split_model(qwen, "h100-80g", 4, "tensor", request, engine="sglang")
    assert split.allowed and split.layout.parallel == "tp4 dp4"
    card = split.evaluation.cards[0]
    assert sum(r["gib"] for r in card_rows(split) if r["card"] == "card 1") * GiB == pytest.approx(
        card.total, rel=1e-12
    )
    assert card.weights - split.weights.total_bytes == 40_960 * 128 * 4  # SGLang's fp32 RoPE cache on CUDA
    # a layer's attention whole: (q 4,096 × 2,048 + k, v 512 × 2,048 each + o 2,048 × 4,096) × 2 bytes = 37,748,736;
    # at tp 4 q and o a quarter (8,388,608) and 1 of the 4 KV heads (2 × 128 × 2,048 × 2 = 1,048,576): 9,437,184.
    # The DP-attention card holds 48 × 28,311,552 = 1,358,954,496 bytes more (norms are whole either way)
    plain = split_model(qwen, "h100-80g", 4, "tensor", REQUEST, engine="sglang")
    assert split.weights.total_bytes - plain.weights.total_bytes == 48 * 28_311_552


def test_a_float32_checkpoint_is_split_at_the_dtype_vllm_loads_it_at():
    """granite-3.1-1b-a400m-instruct's config says float32; vLLM loads it at bf16 on an H100 and fp16 on a T4
    (explorer.engines.load_dtype), so the lesson splits 2 bytes a weight, as the planner does: the same cards as
    its bf16 twin. Its 1,334,628,352 weights over tp 4: 50,334,720 embedding values (the vocabulary padded to
    49,216 = 769 × 64, a quarter each: 12,304 × 1,024 = 12,599,296), the final norm whole (1,024), and 24 layers
    of 53,512,192 whose two norms (2,048) and router (32 × 1,024) stay whole: 53,477,376 / 4 + 34,816 = 13,404,160
    each; 12,599,296 + 1,024 + 24 × 13,404,160 = 334,300,160 values, 2 bytes each."""
    from support.corpus import load_config

    from explorer.model.shapes import shape_from_config

    config = load_config("ibm-granite__granite-3.1-1b-a400m-instruct")
    fp32 = shape_from_config(config, name="granite")
    bf16 = shape_from_config({**config, "torch_dtype": "bfloat16"}, name="granite")
    assert fp32.dtype == "fp32"
    assert loaded_shape(fp32, "h100-80g").dtype == "bf16" and loaded_shape(fp32, "t4-16g").dtype == "fp16"
    assert loaded_shape(bf16, "h100-80g") is bf16
    split, twin = (split_model(s, "h100-80g", 4, "tensor", REQUEST) for s in (fp32, bf16))
    assert split.weights.total_bytes == twin.weights.total_bytes == 334_300_160 * 2
    assert split.evaluation.binding.total == twin.evaluation.binding.total
