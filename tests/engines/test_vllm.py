"""vLLM's accounting: budgets, activation/graph/non-torch terms, KV per card, the kvplan case."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines import vllm
from explorer.engines.layouts import Layout, pp_partition
from explorer.engines.request import PlanRequest
from explorer.engines.vllm_budget import capture_sizes
from explorer.engines.vllm_mxfp4 import mxfp4_backend, relayout_extra_bytes
from explorer.engines.vllm_release import vllm_release
from explorer.errors import PlanError
from explorer.model.weights import weight_breakdown
from explorer.sources.shipped import shipped_catalogue
from explorer.units import GiB, MiB

CAT = shipped_catalogue()


def _eval(name, gpu, request, **layout):
    shape = shape_of(name)
    g = CAT.resolve(gpu)
    return vllm.evaluate(shape, shape.precision, Layout(engine="vllm", gpu_class=g.name, **layout), g, request, "m")


def test_kvplan_case_llama_8b_on_one_l4():
    # L4: torch sees 22.05 GiB (of the driver's 23,034 MiB); gmu 0.92. One 131,072-token request needs
    # 131,072 × 131,072 B = 16.00 GiB of KV: it cannot fit beside 14.96 GiB of weights.
    request = PlanRequest(context_tokens=131072, gpu_memory_utilization=0.92, max_num_seqs=128, vllm_version="0.11.0")
    ev = _eval("meta-llama__Meta-Llama-3.1-8B", "l4-24g", request)
    card = ev.cards[0]
    assert card.kv_cache == 16 * GiB
    assert card.usable == int(round(22.05 * GiB) * 0.92)
    assert not ev.fits
    # vLLM 0.11 on an L4 with these flags logged 38,944 tokens of KV cache (vllm__llama-3.1-8b__L4__1):
    # the longest context explorer allows is within 5 % of it, whole 16-token blocks
    assert abs(ev.max_context_tokens - 38_944) <= 0.05 * 38_944
    assert ev.max_context_tokens % 16 == 0
    assert "--gpu-memory-utilization 0.92" in ev.command and "--max-model-len 131072" in ev.command


def test_budget_terms_on_an_h100():
    ev = _eval("meta-llama__Meta-Llama-3.1-8B", "h100-80g", PlanRequest(context_tokens=8192))
    card = ev.cards[0]
    # the budget is 0.9 of torch's 79.19 GiB, not of the driver's 79.65
    assert card.usable == int(round(79.19 * GiB) * 0.9)
    # T = 8192, R = 1024 on a big card; the current release's sampler peak (15.5 B a logit) beats the
    # forward pass: max(15.5 × 1024 × 128,256, 8192 × (4·4096 + 3·14336) × 2) = 2,035,679,232
    assert card.activations == 2_035_679_232 > 8192 * (4 * 4096 + 3 * 14336) * 2
    # graphs inside the budget (from 0.21): 0.1 GiB + 7 MiB × 2 modes × 51 capture sizes; non-torch 0.25 GiB
    assert capture_sizes(1024, 8192) == 51
    assert card.overhead == GiB // 10 + 7 * MiB * 2 * 51 + GiB // 4
    assert card.kv_cache == 8192 * 131072
    assert ev.fits and ev.max_context_tokens == 131072


def test_releases_change_the_terms():
    # vLLM 0.15 on one H100, Qwen3-14B at gmu 0.95 (vllm__qwen3-14b__H100__2): 5.64 GiB of activation
    # (38.9 B × 1024 × 151,936 logits), 0.13 GiB non-torch, graphs outside the budget → 41.94 GiB of KV logged
    request = PlanRequest(context_tokens=8192, gpu_memory_utilization=0.95, vllm_version="0.15.0")
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    old = _eval("meta-llama__Meta-Llama-3.1-8B", "h100-80g", request).cards[0]
    assert old.activations == int(38.9 * 1024 * 128256)
    assert old.overhead == int(0.13 * GiB)  # no CUDA graphs before 0.21
    v0 = _eval("meta-llama__Meta-Llama-3.1-8B", "rtx3090-24g", PlanRequest(context_tokens=20000, vllm_version="0.6.4"))
    # V0 without chunked prefill profiles the whole 20,000-token context: 20,000 × (3·4096 + 3·14336) × 2 bytes,
    # 2.06 GiB against 2.07 logged (vllm__llama-3.1-8b__RTX3090__1); non-torch 0.35 GiB
    assert v0.cards[0].activations == 20000 * (3 * 4096 + 3 * 14336) * 2
    assert v0.cards[0].overhead == int(0.35 * GiB)
    assert shape.vocab_size == 128256


def test_kv_heads_replicate_past_tp():
    # Qwen3-235B has 4 KV heads: at tp 8 each card keeps one head, not half a head.
    ev = _eval("Qwen__Qwen3-235B-A22B", "h100-80g", PlanRequest(context_tokens=1000), tp=8, gpus_per_node=8, ep=8)
    # 94 layers × 1 head × 128 × 2 (K,V) × 2 bytes, 1008 tokens (63 blocks of 16)
    assert ev.cards[0].kv_cache == 94 * 128 * 2 * 2 * 1008


def test_mla_latent_is_whole_on_every_card():
    one = _eval("deepseek-ai__DeepSeek-V3", "h200-141g", PlanRequest(context_tokens=4096), tp=8, gpus_per_node=8, ep=8)
    assert one.cards[0].kv_cache == 61 * 576 * 2 * 4096


def test_pipeline_partition_matches_vllm():
    assert pp_partition(80, 3) == [(0, 27), (27, 54), (54, 80)]
    assert [b - a for a, b in pp_partition(32, 3)] == [11, 11, 10]
    assert [b - a for a, b in pp_partition(126, 4)] == [31, 32, 32, 31]


def test_pipeline_stages_hold_embeddings_first_and_head_last():
    ev = _eval("meta-llama__Meta-Llama-3.1-8B", "h100-80g", PlanRequest(context_tokens=4096), pp=2, gpus_per_node=2)
    first, last = ev.cards
    embed = 128256 * 4096 * 2
    layer = 218_112_000 * 2
    rope = 131_072 * 128 * 2  # each stage builds its own RoPE cache (32 MiB)
    assert first.weights == 16 * layer + embed + rope
    assert last.weights == 16 * layer + embed + 4096 * 2 + rope  # lm_head + final norm
    assert last.activations > first.activations  # the sampler's logits run on the last stage


def test_sliding_window_holds_window_plus_a_chunk():
    ev = _eval("google__gemma-2-9b-it", "h100-80g", PlanRequest(context_tokens=8192, max_num_batched_tokens=2048))
    per_layer_token = 2 * 8 * 256 * 2
    # 21 global layers hold 8192; 21 sliding layers hold min(8192, 4096 + 2048)
    assert ev.cards[0].kv_cache == 21 * per_layer_token * 8192 + 21 * per_layer_token * 6144


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_per_card_weights_never_grow_with_tp(tp):
    s = shape_of("meta-llama__Meta-Llama-3.1-70B")
    small = _eval("meta-llama__Meta-Llama-3.1-70B", "h100-80g", PlanRequest(), tp=tp, gpus_per_node=tp).cards[0].weights
    if tp > 1:
        wider = _eval("meta-llama__Meta-Llama-3.1-70B", "h100-80g", PlanRequest(), tp=tp // 2, gpus_per_node=tp // 2)
        assert small <= wider.cards[0].weights
    assert small >= s.weight_bytes() // tp


@pytest.mark.parametrize(
    "model, gpu, version, backend, logged_gib",
    [
        # Marlin pads gpt-oss's 2880 to 2944 (intermediate, ×128) and 3072 (hidden, ×256): 65.97 GiB logged (0.10.1)
        ("openai__gpt-oss-120b", "h100-80g", "0.10.1", "marlin", 65.97),
        # triton_kernels keeps the shapes, holds the scales twice (rows padded to 256) and the biases in fp32:
        # 64.38 GiB logged (0.14.1); by 0.19 it also pads the packed weights to 64-byte multiples
        ("openai__gpt-oss-120b", "h100-80g", "0.14.1", "triton", 64.38),
        ("openai__gpt-oss-20b", "h100-80g", "0.19.0", "triton", 13.64),
        ("openai__gpt-oss-20b", "a100-80g", "0.19.0", "marlin", 13.72),
    ],
)
def test_mxfp4_experts_as_vllm_lays_them(model, gpu, version, backend, logged_gib):
    shape = shape_of(model)
    g = CAT.get(gpu)
    release = vllm_release(version)
    assert mxfp4_backend(g, release) == backend
    ev = _eval(model, gpu, PlanRequest(context_tokens=4096, vllm_version=version))
    checkpoint = weight_breakdown(shape, shape.precision).total_bytes  # 60.77 GiB for the 120b
    assert ev.cards[0].weights > checkpoint
    assert abs(ev.cards[0].weights - logged_gib * GiB) <= 0.02 * logged_gib * GiB


def test_triton_kernels_pads_the_swizzled_mxfp4_experts():
    """gpt-oss-20b at tp 2 on an H100 with 0.19.0 (vllm__gpt-oss-20b__H100__2: 7.01 GiB a card logged)."""
    shape = shape_of("openai__gpt-oss-20b")
    h100 = CAT.get("h100-80g")
    # per expert (I 2,880 / 2 = 1,440 → 1,472, H 2,880): the loaded copy at the padded intermediate size
    # (w13 2,944 × 1,440 + w2 2,880 × 736 bytes of values, 2,944 × 90 + 2,880 × 46 of scales, bf16 biases 2 × 5,824)
    # less the checkpoint's share (2,880 × 1,440 + 2,880 × 720 values, 2,880 × 90 + 2,880 × 45 scales, 2 × 5,760),
    # the fp32 biases' other half (2 × 5,824), the swizzled scales (3,072 × 90 + 3,072 × 46 = 417,792)
    loaded = 2944 * 1440 + 2880 * 736 + 2944 * 90 + 2880 * 46 + 2 * 5824
    stored = 2880 * 1440 + 2880 * 720 + 2880 * 90 + 2880 * 45 + 2 * 5760
    old = loaded - stored + 2 * 5824 + 417_792
    assert relayout_extra_bytes(shape, shape.precision, h100, vllm_release("0.14.1"), 2, 1) == 32 * old
    # 0.19 pads the packed values to 64 bytes both ways: w13 2,944 × 1,472, w2 2,880 × 768 (+94,208 + 92,160)
    assert relayout_extra_bytes(shape, shape.precision, h100, vllm_release("0.19.0"), 2, 1) == 32 * (
        old + 94_208 + 92_160
    )
    ev = _eval("openai__gpt-oss-20b", "h100-80g", PlanRequest(context_tokens=4096, vllm_version="0.19.0"), tp=2)
    assert abs(ev.cards[0].weights - 7.01 * GiB) <= 0.01 * 7.01 * GiB


def test_mxfp4_padding_on_blackwell_and_rocm_and_nothing_for_other_checkpoints():
    shape = shape_of("openai__gpt-oss-120b")
    release = vllm_release(None)
    assert mxfp4_backend(CAT.get("b200-180g"), release) == "trtllm"
    assert mxfp4_backend(CAT.get("mi300x-192g"), release) == "rocm"
    assert mxfp4_backend(CAT.get("mi355x-288g"), release) == "rocm-gfx950"
    # TRTLLM pads 2880 to 3072 both ways: per layer 128 experts × (w13 + w2 + scales + bf16 biases)
    per_expert = (2 * 3072 * 3072 // 2 + 2 * 3072 * 96 + 3072 * 3072 // 2 + 3072 * 96 + 2 * (2 * 3072 + 3072)) - (
        2 * 2880 * 2880 // 2 + 2 * 2880 * 90 + 2880 * 2880 // 2 + 2880 * 90 + 2 * (2 * 2880 + 2880)
    )
    assert relayout_extra_bytes(shape, shape.precision, CAT.get("b200-180g"), release, 1, 1) == 128 * per_expert
    dense = shape_of("meta-llama__Meta-Llama-3.1-8B")
    assert relayout_extra_bytes(dense, dense.precision, CAT.get("h100-80g"), release, 1, 1) == 0


def test_vllm_versions_parse():
    assert vllm_release("0.15.2rc1.dev93+g11a4c9d30").version == (0, 15)
    assert vllm_release("v0.10.1").version == (0, 10) and not vllm_release("0.6.4.post1").v1
    assert vllm_release(None).graphs_in_budget and not vllm_release("0.19.0").graphs_in_budget
    with pytest.raises(PlanError, match="is not a version"):
        vllm_release("latest")


# --- issue 24: the command carries every setting the plan assumed, in flags vLLM 0.26.0 takes ----------------


def test_the_command_states_the_memory_share_and_the_batch_sizes_even_at_their_defaults():
    """vLLM 0.26's own default share is 0.92 (``vllm/config/cache.py``), explorer's 0.9: left out, the engine
    would take more than the plan. The scheduler's sizes the plan assumed for an H100 (8,192 batched tokens,
    1,024 sequences, as its note says) are written out too."""
    ev = _eval("meta-llama__Meta-Llama-3.1-8B", "h100-80g", PlanRequest())
    assert ev.notes[0] == "vLLM 0.26 (current): max_num_batched_tokens 8192, max_num_seqs 1024"
    assert ev.command == (
        "vllm serve m --max-model-len 4096 --gpu-memory-utilization 0.9 --max-num-seqs 1024 --max-num-batched-tokens 8192"
    )


def test_a_launch_across_nodes_is_a_command_a_node():
    """tp 8 × pp 2 on two nodes: vLLM's multiprocessing backend (``--nnodes``; ``ray`` is refused with it),
    rank 0 the API server, rank 1 ``--headless``, both naming the head."""
    ev = _eval("meta-llama__Meta-Llama-3.1-70B", "h100-80g", PlanRequest(), tp=8, pp=2, nodes=2, gpus_per_node=8)
    assert ev.command.endswith("--nnodes 2 --node-rank 0 --master-addr <head-node> --master-port 29501")
    (worker,) = ev.workers
    assert worker.rank == 1 and worker.command.endswith(
        "--nnodes 2 --node-rank 1 --master-addr <head-node> --master-port 29501 --headless"
    )
    assert "--distributed-executor-backend" not in ev.command


@pytest.mark.parametrize(("kv", "flag"), [("fp8", "fp8"), ("fp16", "float16")])
def test_kv_types_are_spelt_as_vllm_takes_them(kv, flag):
    ev = _eval("meta-llama__Meta-Llama-3.1-8B", "h100-80g", PlanRequest(kv_dtype=kv))
    assert f"--kv-cache-dtype {flag} " in ev.command


def test_a_kv_type_vllm_lacks_is_refused():
    """q8_0 is llama.cpp's; vLLM 0.26's --kv-cache-dtype has no such choice."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    layout = Layout(engine="vllm", gpu_class="h100-80g")
    ((rule, why),) = vllm.refusals(shape, layout, PlanRequest(kv_dtype="q8_0"))
    assert rule == "kv-dtype" and why.startswith("vLLM has no q8_0 KV cache")


def test_no_fp8_kv_cache_for_sparse_mla_below_hopper():
    """GLM-5's sparse MLA (an indexer beside the latent cache): vLLM's sparse-MLA kernels keep an fp8 cache only from
    Hopper on (vllm-project/vllm#48374), so ``--kv-cache-dtype fp8`` is refused on an A100 and an L40S, not on an
    H100; a dense model (Llama-3.1-8B) keeps fp8 on an A100; ``auto`` is never refused."""
    catalogue = shipped_catalogue()
    glm, llama = shape_of("zai-org__GLM-5"), shape_of("meta-llama__Meta-Llama-3.1-8B")
    refused = vllm.ENGINE.kv_refusal(glm, catalogue.resolve("a100-80g"), "fp8")
    assert refused is not None and "no fp8 KV cache for sparse MLA attention on ampere cards (a100-80g)" in refused
    assert vllm.ENGINE.kv_refusal(glm, catalogue.resolve("l40s-48g"), "fp8") is not None
    assert vllm.ENGINE.kv_refusal(glm, catalogue.resolve("h100-80g"), "fp8") is None
    assert vllm.ENGINE.kv_refusal(glm, catalogue.resolve("a100-80g"), "auto") is None
    assert vllm.ENGINE.kv_refusal(llama, catalogue.resolve("a100-80g"), "fp8") is None


def test_the_walk_refuses_the_kv_type_before_any_layout():
    from explorer.plan.planner import plan
    from explorer.sources.shipped import parse_cluster

    request = PlanRequest(context_tokens=4096, kv_dtype="fp8", engines=("vllm",))
    result = plan(shape_of("zai-org__GLM-5"), parse_cluster("4x8xa100-80g@ib0"), request, suggest=False)
    assert result.options == () and [r.rule for r in result.rejected] == ["kv-dtype"]


def test_decode_context_parallelism_in_the_accounting_and_the_launch_line():
    # Kimi-K2.5 at tp 8 dcp 8, 64 × 65,536 tokens: each card keeps 8,192 tokens a sequence × 70,272 B
    # (61 layers × 576 latent values × 2 bytes) = 575,668,224 B, 64 sequences 36,842,766,336 B (34.3 GiB)
    request = PlanRequest(context_tokens=65_536, concurrency=64)
    ev = _eval("moonshotai__Kimi-K2.5", "h200-141g", request, tp=8, gpus_per_node=8, ep=8, dcp=8)
    assert ev.cards[0].kv_cache == 64 * 8_192 * 70_272 == 36_842_766_336
    assert ev.fits
    assert "--tensor-parallel-size 8 --decode-context-parallel-size 8 --max-model-len 65536" in ev.command
    assert "each card keeps 1 in 8 of a sequence's KV tokens" in " ".join(ev.notes)
    # without it every card holds all 64 × 65,536 tokens: 274.5 GiB, refused
    plain = _eval("moonshotai__Kimi-K2.5", "h200-141g", request, tp=8, gpus_per_node=8, ep=8)
    assert plain.cards[0].kv_cache == 8 * ev.cards[0].kv_cache and not plain.fits
    assert "--decode-context-parallel-size" not in plain.command
