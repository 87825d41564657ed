"""SGLang's default mem_fraction_static and KV pool, as its own server_args rules set them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.corpus import load_config, shape_of

from explorer.engines import sglang
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.errors import PlanError
from explorer.model.shapes import shape_from_config
from explorer.sources.shipped import shipped_catalogue
from explorer.units import GiB, gib

CAT = shipped_catalogue()


@pytest.mark.parametrize(
    "gpu, tp, expected",
    [
        # 81,559 MiB: reserved 512 + 8192·1.5 + 256·2 + 1/8·1024 = 13,440 → (81559 − 13440) / 81559 = 0.835
        ("h100-80g", 1, 0.835),
        # tp 8: graph bs 512 → 512 + 12288 + 1024 + 1024 = 14,848 → 0.818
        ("h100-80g", 8, 0.818),
        # 24,564 MiB: 512 + 2048·1.5 + 24·2 + 128 = 3,760 → 0.847
        ("rtx4090-24g", 1, 0.847),
    ],
)
def test_default_mem_fraction_static(gpu, tp, expected):
    g = CAT.resolve(gpu)
    layout = Layout(engine="sglang", gpu_class=g.name, gpus_per_node=tp, tp=tp)
    assert sglang.mem_fraction_static(shape_of("meta-llama__Meta-Llama-3.1-8B"), g, layout, PlanRequest()) == expected


def test_vision_models_get_a_smaller_fraction():
    g = CAT.resolve("h100-80g")
    layout = Layout(engine="sglang", gpu_class=g.name)
    vl = sglang.mem_fraction_static(shape_of("Qwen__Qwen2.5-VL-7B-Instruct"), g, layout, PlanRequest())
    # ViT 32 layers × 1280²: complexity 1.25 → factor 0.95 × 0.975 → round(0.835 × 0.92625, 3)
    assert vl == round(0.835 * 0.95 * (1 - 0.1 * (32 * 1280**2 / (24 * 1024**2) - 1)), 3)


def test_kv_pool_is_static_share_minus_weights():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    g = CAT.resolve("h100-80g")
    ev = sglang.evaluate(
        shape, shape.precision, Layout(engine="sglang", gpu_class=g.name), g, PlanRequest(context_tokens=1000), "m"
    )
    # the share is of what is free at start: torch's 79.19 GiB less 0.5 GiB of CUDA context (one card)
    free = round(79.19 * GiB) - GiB // 2
    assert sglang.free_at_start_bytes(g, Layout(engine="sglang", gpu_class=g.name), None) == free
    static = int(free * 0.835)
    card = ev.cards[0]
    assert card.kv_cache == 1000 * 131072  # no block rounding
    assert card.weights + card.kv_cache + card.activations + card.overhead == card.total
    assert ev.max_concurrency == (static - shape.weight_bytes()) // (1000 * 131072)
    assert card.activations + card.overhead == g.memory_bytes - static


def test_refusals_of_the_seed():
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    layout = Layout(engine="sglang", gpu_class="h100-80g", nodes=2, gpus_per_node=8, tp=8, pp=2)
    rules = [r for r, _ in sglang.refusals(shape, layout, PlanRequest(speculative="EAGLE"))]
    assert "pp-incompatible" in rules
    rules = [r for r, _ in sglang.refusals(shape, layout, PlanRequest(enable_mixed_chunk=True))]
    assert "pp-incompatible" in rules
    both = PlanRequest(speculative="EAGLE", enable_mixed_chunk=True)
    assert "spec-mixed-chunk" in [r for r, _ in sglang.refusals(shape, Layout(engine="sglang", gpu_class="x"), both)]


def test_speculative_and_dp_attention_reserve_more():
    g = CAT.resolve("h100-80g")
    shape = shape_of("deepseek-ai__DeepSeek-V3")
    layout = Layout(engine="sglang", gpu_class=g.name, gpus_per_node=8, tp=8, dp=8)
    tp8 = replace(layout, dp=1)
    plain = sglang.mem_fraction_static(shape, g, tp8, PlanRequest())
    dp = sglang.mem_fraction_static(shape, g, layout, PlanRequest(dp_attention=True))
    spec = sglang.mem_fraction_static(shape, g, tp8, PlanRequest(speculative="EAGLE"))
    assert dp < plain and spec < plain
    # 8 dp ranks on the 8 tp cards are DP attention whether asked or offered (sglang_dp_attention): the same share
    assert sglang.mem_fraction_static(shape, g, layout, PlanRequest()) == dp


# --- issue 15 item 11: piecewise CUDA graphs and --language-only ---------------------------------------


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        # reserved 13,440 MiB (above): 0.835
        (PlanRequest(), 0.835),
        # + 4,096 // 4 = 1,024 MiB after the 10 GiB floor → 14,464 → (81,559 − 14,464) / 81,559 = 0.823
        (PlanRequest(piecewise_cuda_graph=True, piecewise_cuda_graph_max_tokens=4096), 0.823),
        # switched on with no token count: the seed reserves nothing more
        (PlanRequest(piecewise_cuda_graph=True), 0.835),
    ],
)
def test_piecewise_cuda_graphs_reserve_a_quarter_mib_a_token(request_, expected):
    g = CAT.resolve("h100-80g")
    layout = Layout(engine="sglang", gpu_class=g.name)
    assert sglang.mem_fraction_static(shape_of("meta-llama__Meta-Llama-3.1-8B"), g, layout, request_) == expected


def test_language_only_skips_the_vision_head_check():
    """LLaVA-1.5-7B's text heads (32) divide tp 8; give its vision tower 20 heads and they do not. SGLang refuses
    tp 8, unless --language-only (the encoder runs elsewhere), which the command then carries."""
    from dataclasses import replace

    base = shape_of("llava-hf__llava-1.5-7b-hf")
    shape = replace(base, vision_tower=replace(base.vision_tower, heads=20))
    layout = Layout(engine="sglang", gpu_class="h100-80g", gpus_per_node=8, tp=8)
    assert [r for r, _ in sglang.refusals(shape, layout, PlanRequest())] == ["vision-heads"]
    assert sglang.refusals(shape, layout, PlanRequest(language_only=True)) == []
    ev = sglang.evaluate(shape, shape.precision, layout, CAT.resolve("h100-80g"), PlanRequest(language_only=True), "m")
    assert "--language-only" in ev.command


def test_knobs_reach_the_command():
    g = CAT.resolve("h100-80g")
    layout = Layout(engine="sglang", gpu_class=g.name)
    request = PlanRequest(chunked_prefill_size=4096, cuda_graph_max_bs=64, enforce_eager=True)
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    ev = sglang.evaluate(shape, shape.precision, layout, g, request, "m")
    for flag in ("--chunked-prefill-size 4096", "--cuda-graph-max-bs 64", "--disable-cuda-graph"):
        assert flag in ev.command
    # reserved 512 + 4096·1.5 + 64·2 + 128 = 6,912 MiB, raised to the 10,240 MiB floor: (81,559 − 10,240) / 81,559
    assert sglang.mem_fraction_static(shape, g, layout, request) == 0.874


# --- issue 15 item 12: the combined figures ------------------------------------------------------------


def test_sglang_says_what_all_cards_together_need():
    """tp 4 on H100s: each card's static share (mem_fraction_static) holds weights + KV, so all four together
    need (weights + KV) × 4 ÷ mfs, and each card needs int(mfs × 100) % of its memory free (gpustack's words)."""
    g = CAT.resolve("h100-80g")
    layout = Layout(engine="sglang", gpu_class=g.name, gpus_per_node=4, tp=4)
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    ev = sglang.evaluate(shape, shape.precision, layout, g, PlanRequest(context_tokens=8192), "m")
    mfs = sglang.mem_fraction_static(shape, g, layout, PlanRequest())
    card = ev.cards[0]
    need = (card.weights + card.kv_cache) * 4 / mfs
    note = next(n for n in ev.notes if "combined" in n)
    assert f"--mem-fraction-static={mfs:g}, all 4 GPUs combined need at least {need / 2**30:,.1f} GiB" in note
    assert f"each card needs {int(mfs * 100)} % of its memory allocatable" in note


def test_the_pool_starts_from_free_memory_after_distributed_init():
    # Qwen3-235B-A22B-FP8 on 4 × H100 at 0.93 (vllm#21348): SGLang logged K + V = 16.46 GiB.
    # free = 79.19 − 0.5 context − 2.0 NCCL/all-reduce (NVLink) = 76.69 GiB; 0.93 of it less 55.12 GiB of weights
    shape = shape_of("Qwen__Qwen3-235B-A22B-FP8")
    g = CAT.resolve("h100-80g")
    layout = Layout(engine="sglang", gpu_class=g.name, gpus_per_node=4, tp=4)
    free = sglang.free_at_start_bytes(g, layout, None)
    assert free == round(79.19 * GiB) - GiB // 2 - 2 * GiB
    ev = sglang.evaluate(
        shape, shape.precision, layout, g, PlanRequest(context_tokens=4096, mem_fraction_static=0.93), "m"
    )
    pool = int(free * 0.93) - ev.cards[0].weights
    assert abs(pool - 16.46 * GiB) <= 0.02 * 16.46 * GiB  # 16.20 GiB
    # the old base, the driver's 79.65 GiB, gave 18.95 GiB (+15 %)
    assert int(g.memory_bytes * 0.93) - ev.cards[0].weights > 1.14 * 16.46 * GiB


@pytest.mark.parametrize(("gpu", "bytes_a_token"), [("b200-180g", 61 * (656 + 132)), ("h200-141g", 61 * (1152 + 132))])
def test_deepseek_v32_keeps_its_sparse_cache_in_fp8_by_default_on_blackwell(gpu, bytes_a_token):
    """SGLang's DeepSeek-V3.2 docs: the default KV cache is fp8_e4m3 on B200 and bf16 on H200. Each of the 61
    layers holds the latent (fp8: 512 + 4 fp32 scales + 64 bf16 rope = 656 bytes; bf16: 1,152) and the
    indexer's keys (132): 48,068 bytes a token on B200, 78,324 on H200, and MLA's latent is whole on every card."""
    shape = shape_of("deepseek-ai__DeepSeek-V3.2")
    card = shipped_catalogue().get(gpu)
    assert shape.kv_bytes_per_token(sglang.default_kv_dtype(shape, card, "auto")) == bytes_a_token
    layout = Layout(engine="sglang", gpu_class=gpu, nodes=1, gpus_per_node=8, tp=8, pp=1)
    ev = sglang.evaluate(shape, shape.precision, layout, card, PlanRequest(context_tokens=8192), "m")
    assert ev.cards[0].kv_cache == 8192 * bytes_a_token
    assert "--kv-cache-dtype" not in ev.command  # the engine's own default: nothing to pass
    assert sglang.default_kv_dtype(shape, card, "bf16") == "bf16"  # an asked dtype stands


def test_sglang_keeps_the_stated_length_when_rope_names_an_original_one():
    """SGLang's get_context_length applies no factor when rope_scaling names original_max_position_embeddings:
    Qwen3-8B with YaRN ×4 from 32,768 (its docs' long-context recipe) over a stated 40,960 accepts 40,960 in SGLang,
    131,072 in vLLM (original × factor)."""
    config = load_config("Qwen__Qwen3-8B")
    config["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    shape = shape_from_config(config, name="qwen3-yarn")
    assert shape.max_position_embeddings == 40_960 and shape.max_context_tokens == 131_072
    assert shape.context_limit(keeps_stated_length=True) == 40_960
    assert shape.clamp_context(100_000, keeps_stated_length=True) == 40_960 and shape.clamp_context(100_000) == 100_000
    layout = Layout(engine="sglang", gpu_class="h100-80g", nodes=1, gpus_per_node=1, tp=1, pp=1)
    (rule, reason), *_ = sglang.refusals(shape, layout, PlanRequest(context_tokens=65_536))
    assert rule == "context-limit" and reason.startswith("SGLang derives a context length of 40,960")
    assert not sglang.refusals(shape, layout, PlanRequest(context_tokens=32_768))


# --- issue 24: the command carries every setting the plan assumed, in flags SGLang takes --------------------


def test_the_command_states_the_static_share_and_the_batch_sizes_it_assumed():
    """An H100 at tp 1: SGLang's defaults for the card (chunked prefill 8,192, CUDA-graph batch 256) and the
    static share the plan computed (0.835, docs/notes/sglang_memory.md's table) are all in the command."""
    g = CAT.resolve("h100-80g")
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    ev = sglang.evaluate(shape, shape.precision, Layout(engine="sglang", gpu_class=g.name), g, PlanRequest(), "m")
    assert ev.command == (
        "python -m sglang.launch_server --model-path m --context-length 4096 --mem-fraction-static 0.835 "
        "--chunked-prefill-size 8192 --cuda-graph-max-bs 256"
    )


def test_a_launch_across_nodes_is_a_command_a_node_with_its_rank():
    g = CAT.resolve("h100-80g")
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    layout = Layout(engine="sglang", gpu_class=g.name, tp=16, nodes=2, gpus_per_node=8)
    ev = sglang.evaluate(shape, shape.precision, layout, g, PlanRequest(), "m")
    assert ev.command.endswith("--nnodes 2 --node-rank 0 --dist-init-addr <head-node>:5000")
    (worker,) = ev.workers
    assert worker.command.endswith("--nnodes 2 --node-rank 1 --dist-init-addr <head-node>:5000")


@pytest.mark.parametrize("kv", ["fp16", "q8_0", "fp32"])
def test_kv_types_sglang_lacks_are_refused(kv):
    """SGLang 0.5.10's --kv-cache-dtype: auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16, fp4_e2m1."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")  # bf16
    refused = sglang.refusals(shape, Layout(engine="sglang", gpu_class="h100-80g"), PlanRequest(kv_dtype=kv))
    assert [rule for rule, _ in refused] == ["kv-dtype"]


def test_the_host_pool_size_is_whole_gb():
    """--hicache-size is an int in SGLang's parser: 8.5 GB cannot be asked for."""
    with pytest.raises(PlanError, match="hicache_size_gb is 8.5; it must be a whole number from 0"):
        PlanRequest(hierarchical_cache=True, hicache_size_gb=8.5)
    assert PlanRequest(hierarchical_cache=True, hicache_size_gb=8.0).hicache_size_gb == 8.0


def test_one_card_is_not_all_1_gpus_combined():
    g = CAT.resolve("h100-80g")
    layout = Layout(engine="sglang", gpu_class=g.name, gpus_per_node=1)
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    ev = sglang.evaluate(shape, shape.precision, layout, g, PlanRequest(context_tokens=8192), "m")
    mfs = sglang.mem_fraction_static(shape, g, layout, PlanRequest())
    card = ev.cards[0]
    note = next(n for n in ev.notes if "allocatable" in n)
    assert (
        f"--mem-fraction-static={mfs:g}, the GPU needs at least {gib(int((card.weights + card.kv_cache) / mfs))}"
        in note
    )


def test_a_reserve_past_the_card_is_a_layout_that_does_not_fit_not_a_crash():
    """SGLang reserves tp × pp / 8 GiB more for each rank (server_args), so 61 pipeline stages of DeepSeek-R1 on
    T4s reserve 512 + 2048·1.5 + 8·2 + 61/8·1024 = 11,408 MiB of 15,360: fine; at pp 120 (an across-nodes trial)
    512 + 3,072 + 16 + 15,360 = 18,960 MiB, more than the card: the default fraction comes out at
    round((15,360 − 18,960) / 15,360, 3) = −0.234.
    SGLang cannot start so; the plan crashed on a negative byte count ('free_needed_bytes came out as
    −504,986,148'). Now the static share is 0 and the layout is a memory refusal (no sequence fits)."""
    shape = shape_of("deepseek-ai__DeepSeek-R1")
    g = CAT.resolve("t4-16g")
    layout = Layout(engine="sglang", gpu_class=g.name, nodes=15, gpus_per_node=8, pp=120)
    assert g.memory_bytes // 2**20 == 15_360
    assert sglang.reserved_mib(15_360, 1, 120, 1, PlanRequest())[0] == 18_960
    assert sglang.mem_fraction_static(shape, g, layout, PlanRequest()) == -0.234
    ev = sglang.evaluate(shape, shape.precision, layout, g, PlanRequest(), "m")
    assert (ev.free_needed_bytes, ev.max_concurrency, ev.max_context_tokens) == (0, 0, 0)
    assert all(card.total > card.usable for card in ev.cards)
