"""Data + expert parallelism as the engines run it (issue 23 §1, §2): vLLM's dp ranks sharing experts, SGLang's
--ep-size and its rule for data parallelism across nodes, each with per-rank memory worked by hand."""

from __future__ import annotations

from support.corpus import shape_of
from support.moe_configs import moe_shape

from explorer.engines.request import PlanRequest
from explorer.plan.pinning import check_pinned
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.units import GiB, MiB

CAT = shipped_catalogue()
V3 = "deepseek-ai__DeepSeek-V3"
#: DeepSeek-V3's routed experts, fp8 in 128 × 128 blocks: gate, up (2,048 × 7,168) and down (7,168 × 2,048), each
#: 14,680,064 bytes + ⌈2048/128⌉·⌈7168/128⌉ = 896 fp32 scales (3,584 bytes) = 14,683,648; 256 experts on 58 MoE layers
V3_EXPERT_BYTES = 3 * 14_683_648
V3_ROUTED_BYTES = 58 * 256 * V3_EXPERT_BYTES  # 654,068,416,512
#: vLLM's RoPE cache on every rank (explorer.engines.vllm_rope): 163,840 × 64 × 2 bytes
V3_ROPE_BYTES = 20_971_520


def _plan(shape, cluster, **req):
    return plan(shape, parse_cluster(cluster), PlanRequest(**req), speed=False)


def test_deepseek_v3_dp8_ep_on_8_h200_fits_with_per_rank_memory_by_hand():
    """`--dp 8` on 8 × H200 was refused as 8 copies ("the weights alone (626.9 GiB) exceed 1 × h200"); as vLLM runs
    it, each rank holds the attention, dense layers, shared experts, embedding and head whole (tp 1) and 32 of the
    256 routed experts of each MoE layer."""
    shape = shape_of(V3)
    result = _plan(shape, "1x8xh200-141g", engines=("vllm",), data_parallel_size=8)
    (option,) = result.options
    layout, card = option.layout, option.per_card
    assert (layout.tp, layout.dp, layout.ep, layout.cards) == (1, 8, 8, 8)
    whole = 673_150_582_112  # every weight once: 654,068,416,512 routed + 19,082,165,600 the rest
    assert whole - V3_ROUTED_BYTES == 19_082_165_600
    # a rank: the rest whole + 32 experts × 58 layers × 44,050,944 = 19,082,165,600 + 81,758,552,064, and vLLM's
    # RoPE cache (YaRN's 4,096 × 40 = 163,840 positions × the 64-wide rope key × 2 bytes = 20,971,520)
    assert card.weights == 19_082_165_600 + V3_ROUTED_BYTES // 8 + V3_ROPE_BYTES == 100_861_689_184
    # its own sequence's MLA latent: 576 values × 2 bytes × 61 layers × 4,096 tokens
    assert card.kv_cache == 576 * 2 * 61 * 4096 == 287_834_112
    # sampler 15.5 B × 1,024 rows × 129,280 logits + the fused-MoE buffers 2 × 8,192 tokens × 8 × 2 × 2,048 × 2 B
    assert card.activations == int(15.5 * 1024 * 129_280) + 2 * 8192 * 8 * 2 * 2048 * 2 == 3_125_673_984
    # CUDA graphs 0.1 GiB + 7 MiB × 2 × 51 sizes, and 2.1 GiB of non-torch memory for the rank's NCCL groups
    assert card.overhead == GiB // 10 + 7 * MiB * 2 * 51 + int(2.1 * GiB)
    assert card.usable == int(CAT.resolve("h200-141g").visible_memory_bytes * 0.9) == 135_679_338_086
    # 28,602,031,162 bytes left a rank hold 99 sequences of 287,834,112: 792 over the 8 ranks
    assert option.evaluation.max_concurrency == 8 * 99
    # DeepSeek-V3's config.json names its own code (auto_map: configuration_deepseek.DeepseekV3Config), hence
    # --trust-remote-code, as vLLM's DeepSeek recipe and SGLang's docs pass it
    assert option.evaluation.command == (
        "vllm serve deepseek-ai__DeepSeek-V3 --data-parallel-size 8 --max-model-len 4096 --gpu-memory-utilization 0.9 "
        "--enable-expert-parallel --trust-remote-code --max-num-seqs 1024 --max-num-batched-tokens 8192"
    )


def test_the_walk_offers_dp_ep_beside_tp_and_it_holds_more_sequences():
    """The same 8 H200s: tp 8 keeps the whole MLA latent on every card, dp 8 a rank's own sequences only, so the
    dp layout holds more sequences though each card carries more weights."""
    result = _plan(shape_of(V3), "1x8xh200-141g", engines=("vllm",))
    by_parallel = {o.layout.parallel: o for o in result.options}
    assert {"tp8 ep8", "dp8 ep8"} <= set(by_parallel)
    tp, dp = by_parallel["tp8 ep8"], by_parallel["dp8 ep8"]
    assert dp.per_card.weights > tp.per_card.weights
    assert dp.evaluation.max_concurrency > tp.evaluation.max_concurrency


def test_kimi_k2_dp16_over_two_nodes_refused_on_h100_with_numbers_and_fits_on_h200():
    """Kimi-K2 (fp8, 958.5 GiB) as `--data-parallel-size 16 --data-parallel-size-local 8 --enable-expert-parallel`:
    a rank holds 24 of the 384 experts of its 60 MoE layers (24 × 60 × 44,050,944 = 63,433,359,360 bytes) beside
    the rest whole; on 80 GB H100s that is more than vLLM's 0.9 × 79.19 GiB."""
    kimi = moe_shape("moonshotai/Kimi-K2-Instruct")
    refused = _plan(kimi, "2x8xh100-80g@ib0", engines=("vllm",), data_parallel_size=16)
    assert not refused.options
    (why,) = refused.rejected
    assert why.rule == "memory" and why.layout.parallel == "dp16 ep16" and why.layout.nodes == 2
    assert why.reason == "needs 78.9 GiB on a card (each of 16 cards (16 dp ranks of 1)), has 71.3 GiB usable"
    fits = _plan(kimi, "2x8xh200-141g@ib0", engines=("vllm",), data_parallel_size=16)
    (option,) = fits.options
    rest = option.per_card.weights - 24 * 60 * 44_050_944 - 131_072 * 64 * 2  # routed experts, the RoPE cache
    assert option.per_card.weights == 77_689_544_544 and rest == 14_239_407_968  # attention, dense, shared, vocab
    # the head's command, and the other node's (the launch lines name the head node in <head-node>)
    head, (other,) = option.evaluation.command, option.evaluation.workers
    base = (
        "vllm serve moonshotai/Kimi-K2-Instruct --data-parallel-size 16 --max-model-len 4096 "
        "--gpu-memory-utilization 0.9 --enable-expert-parallel --max-num-seqs 1024 --max-num-batched-tokens 8192"
    )
    shared = " --data-parallel-size-local 8 --data-parallel-address <head-node> --data-parallel-rpc-port 13345"
    assert head == base + shared
    assert other.rank == 1 and other.command == base + shared + " --data-parallel-start-rank 8 --headless"


def test_qwen3_coder_480b_fp8_dp8_ep_on_8_h200():
    """160 experts of 2,560 on 62 layers, fp8 blocks: gate/up 2,560 × 6,144 and down 6,144 × 2,560 are
    15,728,640 bytes + 20 × 48 × 4 = 3,840 of scales each; a rank holds 20 experts a layer."""
    coder = moe_shape("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8")
    (option,) = _plan(coder, "1x8xh200-141g", engines=("vllm",), data_parallel_size=8).options
    expert = 3 * (15_728_640 + 3_840)
    routed_rank = 62 * 20 * expert
    assert routed_rank == 58_524_825_600
    rope = 262_144 * 128 * 2  # vLLM's RoPE cache: 262,144 positions × 128 × 2 bytes
    assert option.per_card.weights - routed_rank - rope == 14_001_746_944  # attention, routers, norms, vocab whole
    # 8 KV heads × 128 × 2 (K, V) × 2 bytes × 62 layers × 4,096 tokens for its own sequence
    assert option.per_card.kv_cache == 8 * 128 * 2 * 2 * 62 * 4096
    assert " --data-parallel-size 8 --max-model-len 4096 " in option.evaluation.command
    assert " --enable-expert-parallel " in option.evaluation.command


def test_minimax_m2_fp8_full_context_with_sglang_keeps_the_block_rule():
    """1,536-wide experts at tp 8 are 192 columns a card, not whole 128-blocks: SGLang refuses to load them. The
    walk says so in SGLang's words and offers tp 8 × ep 8 (experts whole) and tp 4 (384 = 3 × 128)."""
    minimax = moe_shape("MiniMaxAI/MiniMax-M2")
    pinned = _plan(minimax, "1x8xh200-141g", engines=("sglang",), context_tokens=196_608, tensor_parallel_size=8)
    (refusal,) = [r for r in pinned.rejected if r.rule == "fp8-block"]
    assert refusal.layout.parallel == "tp8"
    assert refusal.reason.startswith(
        "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."
    )
    (option,) = pinned.options
    assert option.layout.parallel == "tp8 ep8"
    assert "--tp-size 8 --ep-size 8 --context-length 196608" in option.evaluation.command
    walked = _plan(minimax, "1x8xh200-141g", engines=("sglang",), context_tokens=196_608)
    offered = {o.layout.parallel for o in walked.options}
    assert {"tp4", "tp8 ep8"} <= offered and "tp8" not in offered


def test_sglang_data_parallelism_across_nodes_says_it_needs_dp_attention():
    """Issue 24: `--dp 2 --tp 4` on 2 × 4 L40S printed "no way fits." and nothing else."""
    result = _plan(shape_of("meta-llama__Meta-Llama-3.1-70B"), "2x4xl40s-48g@ib0", engines=("sglang",),
                   data_parallel_size=2, tensor_parallel_size=4)  # fmt: skip
    assert not result.options
    (why,) = result.rejected
    assert why.rule == "split-rules" and why.layout.parallel == "tp4 dp2" and why.layout.nodes == 2
    assert why.reason.startswith("dp 2 across 2 nodes: SGLang runs data parallelism across nodes only with "
                                 "--enable-dp-attention")  # fmt: skip


def test_dense_dp_stays_copies_and_expert_ranks_count_every_card_against_the_weights():
    l8 = shape_of("meta-llama__Meta-Llama-3.1-8B")
    copies = _plan(l8, "1x8xh100-80g", engines=("vllm",), data_parallel_size=4)
    assert {(o.layout.dp, o.layout.ep, o.layout.tp) for o in copies.options} == {(4, 1, 1)}
    three = _plan(shape_of(V3), "1x8xh200-141g", engines=("vllm",), data_parallel_size=3)
    (why,) = three.rejected
    assert why.layout.parallel == "dp3 ep3"  # the bound is over the 3 ranks' cards, not one copy's
    assert why.reason == "the weights alone (626.9 GiB) exceed 3 × h200-141g"


def test_sglang_dp_attention_keeps_each_ranks_attention_whole():
    """`--tp 8 --dp 8 --enable-dp-attention`: SGLang's attention tp is tp / dp = 1, so each card holds the whole
    MLA attention, where tp 8 splits q_b, kv_b and o eight ways. Per layer, fp8 with 128 × 128 block scales:
    q_b 24,576 × 1,536 (37,757,952 bytes whole, 4,719,744 an eighth), kv_b 32,768 × 512 (16,781,312; 2,097,664),
    o 7,168 × 16,384 (117,469,184; 14,683,648): 150,507,392 bytes more a layer, × 61 layers."""
    shape = shape_of(V3)
    offered = _plan(shape, "1x8xh200-141g", engines=("sglang",), dp_attention=True).options
    # DP attention alone, and beside it its experts spread whole (tp8 dp8 ep8: the test below)
    dp_attention = next(o for o in offered if o.layout.parallel == "tp8 dp8")
    plain = _plan(shape, "1x8xh200-141g", engines=("sglang",), tensor_parallel_size=8).options[0]
    assert plain.layout.parallel == "tp8"
    assert dp_attention.per_card.weights - plain.per_card.weights == 61 * 150_507_392 == 9_180_950_912
    assert "--tp-size 8 --context-length 4096 " in dp_attention.evaluation.command
    assert " --enable-dp-attention --dp-size 8 " in dp_attention.evaluation.command


def test_pinned_cards_take_the_same_dp_ep_launch():
    """Eight pinned H200s with `--dp 8`: vLLM lays the same dp 8 × ep 8 launch as the walk, a rank's weights as
    worked above."""
    shape = shape_of(V3)
    gpus = [str(i) for i in range(8)]
    pinned = check_pinned(shape, parse_cluster("1x8xh200-141g"), gpus, request=PlanRequest(data_parallel_size=8))
    assert pinned.option.layout.parallel == "dp8 ep8" and not pinned.overcommitted
    assert pinned.option.per_card.weights == 100_861_689_184


def test_sglang_ep_size_within_tp_splits_each_expert_by_tp_over_ep():
    """`--tp 8 --ep 2` on MiniMax-M2: 128 experts a group, each split 4 ways (1536 / 4 = 384 = 3 × 128, the blocks
    kept): gate, up 384 × 3,072 and down 3,072 × 384 fp8, 1,179,648 bytes + 3 × 24 = 72 scales (288 bytes) each."""
    minimax = moe_shape("MiniMaxAI/MiniMax-M2")
    tp8 = {"engines": ("sglang",), "tensor_parallel_size": 8}
    (ep2,) = _plan(minimax, "1x8xh200-141g", expert_parallel_size=2, **tp8).options
    (ep8,) = _plan(minimax, "1x8xh200-141g", expert_parallel_size=8, **tp8).options
    assert ep2.layout.parallel == "tp8 ep2" and "--tp-size 8 --ep-size 2" in ep2.evaluation.command
    expert_ep2 = 3 * (384 * 3072 + 3 * 24 * 4)  # a quarter of an expert
    expert_ep8 = 3 * (1536 * 3072 + 12 * 24 * 4)  # a whole one
    assert ep2.per_card.weights - ep8.per_card.weights == 62 * (128 * expert_ep2 - 32 * expert_ep8)
    refused = _plan(minimax, "1x8xh200-141g", expert_parallel_size=3, **tp8)
    assert not refused.options and refused.rejected[0].reason.startswith("SGLang splits experts by tp / ep")
    dense = _plan(shape_of("meta-llama__Meta-Llama-3.1-8B"), "1x8xh100-80g", engines=("vllm",), expert_parallel_size=2)
    assert not dense.options and "ep-size" in {r.rule for r in dense.rejected}
    assert "--ep 2 applies to a mixture of experts; this model has none" in {r.reason for r in dense.rejected}


def test_qwen3_235b_fp8_second_sglang_row_keeps_its_blocks():
    """The issue's defect: SGLang's 8-card row for Qwen3-235B-A22B-FP8 was `--tp-size 8` (1,536 / 8 = 192 columns an
    expert, which SGLang refuses); it is now `--tp-size 8 --ep-size 8`, after tp 4 (384 = 3 × 128)."""
    result = _plan(shape_of("Qwen__Qwen3-235B-A22B-FP8"), "1x8xh100-80g", engines=("sglang",))
    assert [o.layout.parallel for o in result.options] == ["tp4", "tp8 ep8"]
    assert "--tp-size 8 --ep-size 8" in result.options[1].evaluation.command


def test_sglang_dp_attention_offers_its_experts_spread_whole_beside_dp_attention_alone():
    """DeepSeek's published `--tp 8 --dp 8 --enable-dp-attention --ep-size 8` on 8 × H200: offered beside DP attention
    alone (same cards, same memory a card: the experts 32 whole a card or each split 8 ways hold the same bytes).
    Both read only their own rank's 32 sequences' latents and the attention whole; at 256 sequences of 4,096 tokens
    DP attention alone all-reduces all 256 tokens twice a layer where the spread experts dispatch and combine each
    rank's 32 (6,183 vs 5,697 tokens/s together: the same bytes read, the speed model pricing the all-reduces on
    NVLink below a dispatch and a combine of 4 latencies each); at one sequence DP attention alone is faster (110.2 vs 73.8 tokens/s: each card
    reads an eighth of each expert, where the spread experts read the touched experts whole)."""
    shape = shape_of(V3)
    many = plan(
        shape,
        parse_cluster("1x8xh200-141g"),
        PlanRequest(engines=("sglang",), dp_attention=True, concurrency=256),
        goal="throughput",
        suggest=False,
    )
    first, second = many.options[:2]
    assert (first.layout.parallel, second.layout.parallel) == ("tp8 dp8", "tp8 dp8 ep8")
    assert first.per_card.weights == second.per_card.weights
    together = [o.speed.decode_aggregate_estimate_tokens_per_s for o in (first, second)]
    assert [round(x, 1) for x in together] == [6_183.4, 5_696.7]
    assert "--tp-size 8 --ep-size 8 --context-length 4096 " in second.evaluation.command
    assert " --enable-dp-attention --dp-size 8 " in second.evaluation.command
    one = plan(shape, parse_cluster("1x8xh200-141g"), PlanRequest(engines=("sglang",), dp_attention=True),
               goal="fastest", suggest=False)  # fmt: skip
    assert [o.layout.parallel for o in one.options if o.layout.cards == 8] == ["tp8 dp8", "tp8 dp8 ep8"]
    # an ep the user names is planned as asked, with no second row
    asked = _plan(shape, "1x8xh200-141g", engines=("sglang",), dp_attention=True, expert_parallel_size=8)
    assert [o.layout.parallel for o in asked.options] == ["tp8 dp8 ep8"]
