"""The recommendations an inference engineer would sign (issue 13's cases, on real configs and clusters).

Byte figures are worked by hand in the comments: H100 80 GB = 81,559 MiB = 79.65 GiB; L40S 48 GB = 46,068 MiB
= 44.99 GiB; H200 = 143,771 MiB = 140.4 GiB; L4 = 23,034 MiB; vLLM offers 0.9 of a card unless told otherwise.
"""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.artifacts.offer import fallback_artifacts, original_artifact, what_if_artifact, what_if_artifacts
from explorer.engines.parallel_rules import block_refusals
from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
from explorer.speed.estimate import SpeedSettings

LLAMA_8B, LLAMA_70B, LLAMA_405B = (
    "meta-llama__Meta-Llama-3.1-8B",
    "meta-llama__Meta-Llama-3.1-70B",
    "meta-llama__Meta-Llama-3.1-405B",
)


def _plan(name, spec, *, what_ifs=(), **request):
    shape = shape_of(name)
    artifacts = [original_artifact(shape), *what_if_artifacts(shape, what_ifs)]
    return plan(shape, parse_cluster(spec), PlanRequest(**request), artifacts=artifacts)


def test_70b_on_two_l40s_keeps_every_layer_on_the_gpus_first():
    """bf16 weights 70.55B × 2 bytes = 141.1 GB (131.4 GiB) > 2 × 45.0 GiB: bf16 only runs with layers on the host.
    int4 AWQ (39.7 GB) and fp8 (70.6 GB) fit the two cards; either comes before any offload."""
    result = _plan(LLAMA_70B, "1x2xl40s-48g", what_ifs=("fp8", "int4-awq"), context_tokens=32768)
    first = result.options[0]
    assert first.tier == 1 and first.evaluation.layers_on_host == 0 and first.placement == "accelerators"
    offloads = [i for i, o in enumerate(result.options) if o.evaluation.layers_on_host]
    assert offloads, "the bf16 llama.cpp partial offload is still listed"
    last_tier_1 = max(i for i, o in enumerate(result.options) if o.tier == 1)
    assert min(offloads) > last_tier_1
    awq = next(o for o in result.options if o.engine == "vllm" and "AWQ" in o.precision)
    assert result.options.index(awq) < min(offloads)  # vLLM AWQ (about 19 tok/s) above the 0.8 tok/s offload


def test_the_own_weights_fall_back_to_quantised_ones_only_when_they_keep_no_gpu_layout():
    """The default plan (no precision asked) of the bf16 70B on 2 × L40S at 32k: bf16 keeps no all-GPU layout, so
    the fallback (fp8, int4 AWQ, Q8_0, Q4_K_M; here none published, so placeholders) is planned too. vLLM tp 2 at int4 AWQ comes first: 39.7 GB of weights
    is 18.5 GiB a card; it is a tensor-parallel layout on the fewest cards (2), so it ranks above llama.cpp's Q8_0
    split by layer on the same two cards, which decodes at a third of its speed."""
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x2xl40s-48g")
    fallback = fallback_artifacts(shape, [original_artifact(shape)])
    assert [a.quant for a in fallback] == ["fp8 per-tensor, online", "int4 AWQ g128", "Q8_0", "Q4_K_M", "Q3_K_M"]
    result = plan(shape, cluster, PlanRequest(context_tokens=32768), fallback=fallback)
    first = result.options[0]
    # widened names the fallbacks that gave an option: fp8 (66 GiB of weights) keeps none on 2 × 48 GiB at 32k
    planned = [o.artifact for o in result.options]
    assert result.widened == tuple(a.label for a in fallback if a in planned)
    assert "original (fp8 per-tensor, online)" not in result.widened and "original (int4 AWQ g128)" in result.widened
    assert (first.engine, first.layout.tp, first.precision, first.tier) == ("vllm", 2, "int4 AWQ g128", 1)
    q8 = next(o for o in result.options if o.precision == "Q8_0" and o.tier == 1)
    assert q8.speed.decode_estimate_tokens_per_s < first.speed.decode_estimate_tokens_per_s / 2
    assert any(s.kind == "cluster" and s.fits for s in result.suggestions)  # the bf16 weights' way forward
    # 8 × H100 hold the bf16 weights on the GPUs: the fallback is not used and nothing is widened
    roomy = plan(shape, parse_cluster("1x8xh100-80g"), PlanRequest(context_tokens=32768), fallback=fallback)
    assert not roomy.widened and {o.precision for o in roomy.options} == {"bf16", "BF16"}


def test_405b_on_two_h100_nodes_lists_the_whole_node_layout():
    """bf16 405.85B × 2 = 811.7 GB = 756 GiB; one node offers 8 × 79.65 × 0.9 = 573 GiB: it must span nodes.
    The fewest cards are 12 (tp 2 × pp 6); the layout the engines' docs recommend, tp 8 × pp 2 on all 16, is kept."""
    result = _plan(LLAMA_405B, "2x8xh100-80g@ib0", context_tokens=4096, engines=("vllm", "sglang"))
    vllm = {(o.layout.tp, o.layout.pp, o.layout.cards) for o in result.options if o.engine == "vllm"}
    assert (8, 2, 16) in vllm and (2, 6, 12) in vllm
    sglang = {(o.layout.tp, o.layout.pp) for o in result.options if o.engine == "sglang"}
    assert (16, 1) in sglang  # SGLang spans nodes with tensor parallelism itself (--nnodes 2)
    whole = next(o for o in result.options if o.engine == "vllm" and o.layout.tp == 8)
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in whole.evaluation.command
    assert not any(x.rule == "more-than-needed" and x.layout and x.layout.cards == 16 for x in result.rejected)


def test_405b_fastest_puts_the_whole_node_layout_first():
    result = plan(
        shape_of(LLAMA_405B), parse_cluster("2x8xh100-80g@ib0"), PlanRequest(engines=("vllm",)), goal="fastest"
    )
    assert (result.options[0].layout.tp, result.options[0].layout.pp) == (8, 2)


def test_deepseek_v3_on_two_h200_nodes_runs_two_replicas_of_one_node():
    """fp8 weights of 671B (block scales counted) are about 642 GiB; one node offers 8 × 140.4 × 0.9 = 1,011 GiB:
    a node holds it, so two nodes hold two copies; a second node is never one replica's "more than needed"."""
    result = _plan("deepseek-ai__DeepSeek-V3", "2x8xh200-141g@ib0", context_tokens=4096)
    one_node = [o for o in result.options if o.layout.nodes == 1 and not o.layout.cpu]
    assert one_node and all(o.replicas == 2 for o in one_node)
    tp8 = next(o for o in one_node if o.engine == "vllm" and o.layout.tp == 8)
    assert tp8.replicas_now == 2
    bound, estimate = tp8.aggregate_decode_tokens_per_s
    assert estimate == pytest.approx(2 * tp8.speed.decode_aggregate_estimate_tokens_per_s)
    assert bound == pytest.approx(2 * tp8.speed.decode_aggregate_bound_tokens_per_s)
    refusal = next(x for x in result.rejected if x.rule == "more-than-needed" and x.layout and x.layout.nodes == 2)
    assert "replicas" in refusal.reason


def test_the_kvplan_case_refuses_with_max_context_and_suggests_the_fp8_kv_cache():
    """Llama-3.1-8B on one L4 at 131,072 tokens, gpu_memory_utilization 0.92 (the kvplan case).

    vLLM's current release: 0.92 × torch's 22.05 GiB = 21,781,926,641 B; weights 16,060,522,496 and their RoPE
    cache 33,554,432; the sampler's peak 508,919,808; CUDA graphs and non-torch 1,124,492,902: 4,054,437,003 B for
    128 KiB a token = 30,933 tokens, 30,928 in blocks of 16 (explorer.plan.longest_context). An fp8 KV cache halves
    the token: 61,865, 61,856 in blocks: still short of 131,072 on vLLM (llama.cpp's full offload holds more, which
    it reports).
    """
    result = plan(
        shape_of(LLAMA_8B),
        parse_cluster("1x1xl4-24g"),
        PlanRequest(context_tokens=131072, gpu_memory_utilization=0.92),
        speed=SpeedSettings(prices=shipped_prices()),
        catalogue=shipped_catalogue(),
    )
    refusal = next(x for x in result.rejected if x.engine == "vllm" and x.rule == "memory")
    assert refusal.max_context == 30_928
    assert refusal.to_dict()["max_context"] == 30_928
    assert all(o.tier > 1 for o in result.options)  # only a partial offload and the CPU fit
    kinds = {s.kind: s for s in result.suggestions}
    kv = kinds["kv-cache"]
    assert kv.change == {"kv_dtype": "fp8"} and not kv.fits and kv.max_context >= 61_856
    assert kinds["context"].fits and kinds["context"].change["context"] >= 30_928
    assert kinds["cluster"].change == {"cluster": "1x2xl4-24g"} and kinds["cluster"].best.layout.tp == 2
    assert "card-class" in kinds and kinds["card-class"].fits
    assert any(s.kind == "precision" and s.fits for s in result.suggestions)
    assert [s.fits for s in result.suggestions] == sorted((s.fits for s in result.suggestions), reverse=True)


def test_a_plan_on_accelerators_suggests_nothing():
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x1xh100-80g"), PlanRequest(), catalogue=shipped_catalogue())
    assert result.options[0].tier == 1 and result.suggestions == ()


def test_nothing_fits_suggests_the_smallest_cluster_of_the_users_class():
    """405B bf16 (756 GiB) on one L4: nothing fits, not even the CPU (64 GiB of RAM assumed). Its own class
    needs at least 756 / (0.95 × 22.5) = 36 L4s: five nodes of 8 (``5x8xl4-24g@ib0``) or more."""
    result = plan(
        shape_of(LLAMA_405B),
        parse_cluster("1x1xl4-24g"),
        PlanRequest(),
        speed=SpeedSettings(prices=shipped_prices()),
        catalogue=shipped_catalogue(),
    )
    assert not result.options
    own = next(s for s in result.suggestions if s.kind == "cluster")
    spec = own.change["cluster"]
    nodes = int(spec.split("x")[0])
    assert spec.endswith("x8xl4-24g@ib0") and nodes >= 5 and own.fits and own.best.layout.nodes > 1


def test_goal_names_and_the_old_sort_names():
    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g")
    fastest = plan(shape, cluster, PlanRequest(engines=("vllm",)), goal="fastest")
    by_sort = plan(shape, cluster, PlanRequest(engines=("vllm",)), sort="speed")
    assert [o.label for o in fastest.options] == [o.label for o in by_sort.options]
    assert fastest.options[0].layout.tp == 8 and fastest.goal == "fastest"


def test_a_launch_that_converts_the_weights_ranks_after_one_that_loads_them():
    """70B bf16 on 8 × H100 at 32k: llama.cpp holds it on 2 cards (65.3 GiB of weights a card of 79.1), vLLM needs 4
    (tp 2 needs 75.5 GiB a card of 71.3). llama.cpp's command loads the weights only once converted to a BF16 GGUF,
    so vLLM tp 4, which loads the published safetensors, comes first; the 2-card llama.cpp option stays listed."""
    result = _plan(LLAMA_70B, "1x8xh100-80g", context_tokens=32768)
    first = result.options[0]
    assert (first.engine, first.layout.tp, first.runs_as_printed) == ("vllm", 4, True)
    two = next(o for o in result.options if o.engine == "llamacpp" and o.layout.cards == 2)
    assert not two.runs_as_printed and "convert_hf_to_gguf.py" in two.evaluation.command


def test_a_mac_falls_back_to_a_published_gguf_rather_than_converting_the_bf16_weights():
    """Llama-3.1-8B bf16 on an M4 Max: only llama.cpp runs there, and it loads the safetensors only once they are
    converted to a BF16 GGUF (a placeholder command). The fallback's Q8_0 GGUF (8.5 bits: 8.03B × 8.5 / 8 = 8.5 GB)
    loads as published and comes first; the converted BF16 stays listed below it."""
    shape = shape_of(LLAMA_8B)
    published = shipped_checkpoints("meta-llama/Meta-Llama-3.1-8B")  # bartowski's GGUFs among them
    fallback = fallback_artifacts(shape, [original_artifact(shape)], published)
    result = plan(shape, parse_cluster("1xm4-max-128g"), PlanRequest(), fallback=fallback)
    first = result.options[0]
    assert result.widened and (first.engine, first.precision, first.runs_as_printed) == ("llamacpp", "Q8_0", True)
    converted = next(o for o in result.options if o.tier == 1 and not o.runs_as_printed)
    assert converted.precision == "BF16" and result.options.index(converted) > 0


def test_a_mac_converts_gemma4_to_q8_0_rather_than_bf16_when_no_gguf_is_published():
    """Gemma-4-26B-A4B on an M4 Max at 32k: only llama.cpp runs there, and no published GGUF is known, so every
    launch converts the bf16 weights first. Converting to BF16 (47.0 GiB of weights, 36.3 tok/s) and to Q8_0
    (26.4 GiB all told, 60.3 tok/s) stand alike (tier 1, a placeholder, headroom), so the wider plan is kept
    because the ranking puts Q8_0 first: 8.5 bits a weight keep what 16 do (score 8.6 against BF16's
    8.6 - 7.4 / 4 = 6.75) at half the bytes read a token. Before, the plan kept the own weights' BF16 alone."""
    shape = shape_of("google__gemma-4-26B-A4B")
    fallback = fallback_artifacts(shape, [original_artifact(shape)])
    result = plan(shape, parse_cluster("1xm4-max-128g"), PlanRequest(context_tokens=32768), fallback=fallback)
    first = result.options[0]
    assert (first.engine, first.precision, first.tier, first.runs_as_printed) == ("llamacpp", "Q8_0", 1, False)
    assert "Q8_0" in result.widened
    bf16 = next(o for o in result.options if o.precision == "BF16" and o.tier == 1)
    assert (
        result.options.index(bf16) == 1
        and bf16.speed.decode_estimate_tokens_per_s < first.speed.decode_estimate_tokens_per_s
    )


def test_no_fallback_for_weights_already_about_four_bits():
    """gpt-oss-120b ships its experts in MXFP4 (60.8 GiB all told): int4 AWQ would be 58.2 GiB, 96 % of it, over the
    0.75 share a fallback may keep; fp8 (110 GiB), Q8_0 and Q4_K_M are larger still. Nothing is added, so a plan where
    the own weights do not fit says so and suggests the fp8 KV cache or a shorter context instead."""
    shape = shape_of("openai__gpt-oss-120b")
    assert fallback_artifacts(shape, [original_artifact(shape)]) == ()
    bf16 = shape_of(LLAMA_70B)  # 141.1 GB: fp8 (70.6 GB, 0.50) … Q4_K_M (0.31) all clearly smaller
    assert len(fallback_artifacts(bf16, [original_artifact(bf16)])) == 5  # fp8, int4 AWQ, Q8_0, Q4_K_M, Q3_K_M


def test_llamacpp_converts_the_original_weights_never_a_safetensors_what_if():
    """llama.cpp makes a GGUF from the model's own bf16 weights; an int4 AWQ what-if (safetensors nobody publishes)
    is vLLM's and SGLang's to load, and a Q4_K_M what-if says the quant. So Gemma 4 26B on one 4090 lists
    llama.cpp Q4_K_M once, not a second time as "int4 AWQ as a Q4_K_M GGUF"."""
    shape = shape_of("google__gemma-4-26B-A4B")
    fallback = fallback_artifacts(shape, [original_artifact(shape)])
    result = plan(shape, parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=16384), fallback=fallback)
    llamacpp = [o for o in result.options if o.engine == "llamacpp"]
    assert all(o.artifact.format == "gguf" or not o.artifact.what_if for o in llamacpp)
    labels = [o.label for o in result.options]
    assert len(labels) == len(set(labels))


def test_a_widened_plan_equals_planning_every_artifact_at_once():
    """The fallback is walked on its own and merged with the own weights' plan: the same options in the same order,
    and the same refusal counts, as one plan over all the artifacts, but for the last-resort Q3_K_M, kept only
    where every layer is on the cards."""
    from explorer.artifacts.offer import all_gpu_only

    shape, cluster = shape_of(LLAMA_70B), parse_cluster("1x2xl40s-48g + 1x1xrtx4090-24g")
    own = [original_artifact(shape)]
    fallback = fallback_artifacts(shape, own, shipped_checkpoints("meta-llama/Meta-Llama-3.1-70B"))
    request = PlanRequest(context_tokens=16384)
    widened = plan(shape, cluster, request, artifacts=own, fallback=fallback, suggest=False)
    at_once = plan(shape, cluster, request, artifacts=[*own, *fallback], suggest=False)
    kept = [o.label for o in at_once.options if o.tier == 1 or not all_gpu_only(o.artifact)]
    assert widened.widened and [o.label for o in widened.options] == kept
    assert len(kept) < len(at_once.options)  # Q3_K_M with layers in host memory is dropped
    assert widened.pruned == at_once.pruned and widened.considered == at_once.considered


# --- issue 24: the headroom rule ------------------------------------------------------------------------------------


def test_a_card_filled_to_the_brim_is_a_warning_not_the_recommendation():
    """Llama-3.1-70B at 32k on 2 × H100 (the app's default context), the own bf16 weights widened to the published
    checkpoints: llama.cpp's Q8_0 on one card needs 79.1 of 79.1 GiB usable and holds one 32k sequence; it ranked #1.
    Past 95 % of the usable memory (or room for fewer than two sequences) a layout ranks after every layout with
    headroom: vLLM's int4 AWQ on one card (50.0 of 71.3 GiB, 70 %, three sequences) leads, and vLLM tp 2 with
    nvidia's FP8 checkpoint (43.6 of 71.3 GiB) is the first two-card row, above the brim."""
    from explorer.plan.ranking import at_the_brim, headroom_warning

    shape = shape_of(LLAMA_70B)
    fallback = fallback_artifacts(
        shape, [original_artifact(shape)], shipped_checkpoints("meta-llama/Meta-Llama-3.1-70B")
    )
    result = plan(shape, parse_cluster("1x2xh100-80g"), PlanRequest(context_tokens=32768), fallback=fallback)
    brim = next(o for o in result.options if o.engine == "llamacpp" and o.precision == "Q8_0" and o.tier == 1)
    assert brim.layout.cards == 1 and at_the_brim(brim) and brim.evaluation.max_concurrency == 1
    assert brim.per_card.total * 100 > 99 * brim.per_card.usable
    first = result.options[0]
    assert not at_the_brim(first) and first.per_card.total * 100 <= 95 * first.per_card.usable
    assert (first.engine, first.layout.cards, first.precision) == ("vllm", 1, "int4 AWQ g128")
    fp8 = next(o for o in result.options if o.engine == "vllm" and o.layout.tp == 2 and o.precision.startswith("fp8"))
    assert fp8.artifact.repo == "nvidia/Llama-3.1-70B-Instruct-FP8"
    assert result.options.index(fp8) < result.options.index(brim)
    assert [o for o in result.options[: result.options.index(fp8)] if o.layout.cards > 1] == []
    warning = headroom_warning(brim)
    assert warning.startswith("at the brim: the binding card needs 99 % of its usable memory (79.1 GiB of 79.1 GiB)")
    assert "holds 1 sequence of the asked context" in warning and headroom_warning(first) is None


def test_an_fp8_kv_cache_is_a_ranked_candidate_when_the_models_own_holds_too_little():
    """70B bf16, 64 sequences of 32,768 tokens on 8 × H100. Its bf16 KV cache is 327,680 B a token (80 layers × 8
    KV heads × 128 × 2 × 2 B): 640 GiB for 64 × 32,768, more than 8 cards hold beside 131.4 GiB of weights, so the
    best was llama.cpp with 17 layers on the CPU (0.3 tok/s) and fp8 only a suggestion. fp8 halves it to
    163,840 B: 163,840 × 32,768 × 64 / 8 = 42,949,672,960 B a card at tp 8, which vLLM holds at 65,770,556,620 of
    76,526,653,538 usable bytes (85.9 %, 80 sequences): the first row, with the flag in its command."""
    result = plan(shape_of(LLAMA_70B), parse_cluster("1x8xh100-80g"), PlanRequest(context_tokens=32768, concurrency=64))
    first = result.options[0]
    assert (first.engine, first.layout.tp, first.kv_dtype, first.tier) == ("vllm", 8, "fp8", 1)
    assert first.per_card.kv_cache == 163_840 * 32_768 * 64 // 8 == 42_949_672_960
    assert (first.per_card.total, first.per_card.usable) == (65_770_556_620, 76_526_653_538)
    assert (
        first.label.endswith("original (bf16) · fp8 KV cache") and "--kv-cache-dtype fp8 " in first.evaluation.command
    )
    sglang = next(o for o in result.options if o.engine == "sglang")
    assert sglang.kv_dtype == "fp8" and "--kv-cache-dtype fp8_e4m3" in sglang.evaluation.command
    llama = next(o for o in result.options if o.engine == "llamacpp" and o.kv_dtype)
    assert llama.kv_cache_label == "q8_0" and "-ctk q8_0 -ctv q8_0" in llama.evaluation.command
    # the model's own KV type keeps its options (the partial offload) and its refusals; no suggestion is left
    assert any(o.tier == 2 and not o.kv_dtype for o in result.options) and result.suggestions == ()
    assert result.to_dict()["options"][0]["kv_dtype"] == "fp8" and result.request.kv_dtype == "auto"


def test_an_fp8_kv_cache_at_the_brim_goes_before_layers_on_the_cpu():
    """Llama-3.1-8B, one 131,072-token sequence on a T4: at f16 no layout keeps every layer on the card (the best
    kept 14 layers on the CPU, about 4 tok/s). With a q8_0 cache (32 layers × 8 KV heads × 128 × 2 × 34 B a 32
    = 69,632 B a token: 9,126,805,504 B) Q4_K_M holds all 33 layers on the card at 14.0 of 15.6 GB, one sequence
    (the brim: room for two is the rule), and it ranks first; it was left out, as at the brim, before."""
    result = _plan(LLAMA_8B, "1x1xt4-16g", what_ifs=("Q4_K_M", "Q8_0"), context_tokens=131072)
    first = result.options[0]
    assert (first.engine, first.precision, first.kv_dtype, first.tier) == ("llamacpp", "Q4_K_M", "fp8", 1)
    assert first.per_card.kv_cache == 69_632 * 131_072 == 9_126_805_504 and first.evaluation.layers_on_host == 0
    assert (first.per_card.total, first.per_card.usable) == (13_998_202_447, 15_569_256_448)
    assert "-ngl 33 -ctk q8_0 -ctv q8_0" in first.evaluation.command
    assert result.options[1].evaluation.layers_on_host == 14 and not result.options[1].kv_dtype


def test_no_fp8_kv_candidate_when_the_models_own_fits_with_headroom_or_the_user_chose_one():
    """At 4,096 tokens × 1 the bf16 cache leaves vLLM tp 4 room (38.0 of 71.3 GiB): no fp8-KV option. A KV type the
    user names (bf16 here) is kept as asked, even where fp8 would fit: at bf16 nothing holds all 64 on the cards, so
    the first row is a queueing candidate at bf16 (explorer/plan/queueing.py), not an fp8 cache."""
    cluster = parse_cluster("1x8xh100-80g")
    roomy = plan(shape_of(LLAMA_70B), cluster, PlanRequest(context_tokens=4096), suggest=False)
    assert roomy.options and not any(o.kv_dtype for o in roomy.options)
    named = plan(shape_of(LLAMA_70B), cluster, PlanRequest(context_tokens=32768, concurrency=64, kv_dtype="bf16"))
    assert not any(o.kv_dtype for o in named.options)
    assert not any(o.tier == 1 and not o.asked_sequences for o in named.options)
    assert (named.options[0].tier, named.options[0].asked_sequences) == (1, 64)


def test_a_recheck_keeps_the_fp8_kv_cache_the_planner_chose():
    """An fp8-KV option rechecked at a shorter context keeps its fp8 cache: at 16,384 tokens × 64 the KV is half
    of 42,949,672,960 B a card."""
    from explorer.plan.planner import recheck

    shape = shape_of(LLAMA_70B)
    request = PlanRequest(context_tokens=32768, concurrency=64)
    first = plan(shape, parse_cluster("1x8xh100-80g"), request, suggest=False).options[0]
    shorter = recheck(shape, first, PlanRequest(context_tokens=16384, concurrency=64), speed=False)
    assert shorter.per_card.kv_cache == 21_474_836_480 and "--kv-cache-dtype fp8" in shorter.evaluation.command


def test_a_layout_beside_the_brim_does_not_keep_the_quantised_checkpoints_out():
    """405B bf16, vLLM on 4 × 8 × A100-40G at 4,096 tokens: 3 nodes × 8 need 37,874,355,404 B a card (98 % of what
    vLLM may use), so the walk also offers 4 nodes × 8 (29,199,486,156 B, ``beside_brim``). That roomy layout on
    32 cards does not count as the own weights fitting: the published checkpoints are planned still, and the int4
    AWQ on one node of 8 (31,060,085,964 B) ranks first on the fewest cards, as it did before the walk offered 4."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-405B")
    own = [original_artifact(shape)]
    fallback = fallback_artifacts(shape, own, shipped_checkpoints("meta-llama/Meta-Llama-3.1-405B"))
    result = plan(shape, parse_cluster("4x8xa100-40g@ib0"), PlanRequest(engines=("vllm",)), artifacts=own,
                  fallback=fallback, suggest=False)  # fmt: skip
    first = result.options[0]
    assert (first.artifact.repo, first.layout.cards, first.per_card.total) == (
        "hugging-quants/Meta-Llama-3.1-405B-Instruct-AWQ-INT4",
        8,
        31_060_085_964,
    )
    four = next(o for o in result.options if (o.layout.nodes, o.layout.tp, o.layout.pp) == (4, 8, 4))
    assert four.beside_brim and four.per_card.total == 29_199_486_156 and four.artifact.repo is None
    three = next(o for o in result.options if (o.layout.nodes, o.layout.tp, o.layout.pp) == (3, 8, 3))
    assert three.per_card.total == 37_874_355_404 and not three.beside_brim


def test_the_70b_first_row_names_nvidias_fp8_checkpoint_by_its_own_per_tensor_scheme():
    """``plan meta-llama/Meta-Llama-3.1-70B --cluster 1x8xh100-80g --context 32768 --concurrency 64``: the own bf16
    weights widened to the published checkpoints. The first row loads nvidia/Llama-3.1-70B-Instruct-FP8, ModelOpt
    fp8 with one scale a matrix (its hf_quant_config.json ``quant_algo: FP8``), not 128 × 128 blocks: labelled so,
    tensor parallel 8 (no block rule applies), and the command names the repository with no --quantization flag."""
    shape = shape_of(LLAMA_70B)
    fallback = fallback_artifacts(
        shape, [original_artifact(shape)], shipped_checkpoints("meta-llama/Meta-Llama-3.1-70B")
    )
    request = PlanRequest(context_tokens=32768, concurrency=64)
    first = plan(shape, parse_cluster("1x8xh100-80g"), request, fallback=fallback).options[0]
    assert (first.engine, first.layout.tp, first.precision) == ("vllm", 8, "fp8 per-tensor (ModelOpt)")
    assert first.artifact.repo == "nvidia/Llama-3.1-70B-Instruct-FP8"
    assert "vllm serve nvidia/Llama-3.1-70B-Instruct-FP8 --tensor-parallel-size 8 " in first.evaluation.command
    assert "--quantization" not in first.evaluation.command


def test_nvidias_per_tensor_fp8_nemotron_super_is_not_held_to_the_block_rule():
    """Llama-3_3-Nemotron-Super-49B's pruned MLPs are 2,816 wide in some layers: at tp 4, 704 a card, not whole
    128 × 128 blocks. Labelled "fp8 block 128×128", nvidia's ModelOpt FP8 checkpoint was refused at tp 4
    (fp8-block) and planned tp 2 × pp 2 on 4 × L4; per tensor it has no blocks to split, and tp 4 leads."""
    shape = shape_of("nvidia__Llama-3_3-Nemotron-Super-49B-v1")
    fp8 = what_if_artifact(shape, "fp8", shipped_checkpoints("nvidia/Llama-3_3-Nemotron-Super-49B-v1"))
    assert (fp8.repo, fp8.quant) == ("nvidia/Llama-3_3-Nemotron-Super-49B-v1-FP8", "fp8 per-tensor (ModelOpt)")
    request = PlanRequest(context_tokens=4096, engines=("vllm", "sglang"))
    result = plan(shape, parse_cluster("1x4xl4-24g"), request, artifacts=[fp8], suggest=False)
    first = result.options[0]
    assert (first.engine, first.layout.tp, first.layout.pp) == ("vllm", 4, 1)
    assert not any(r.rule == "fp8-block" for r in result.rejected)
    block = shape.resolve_precision("fp8")
    refused = block_refusals(shape, block, 4, 1)
    assert refused and "704 is not divisible" in refused[0][1]


def test_the_last_resort_precision_is_planned_for_weights_already_about_four_bits():
    """Kimi-K2.5 ships int4 (group 32) weights: 595,047,214,816 B. Its Q3_K_M (501,921,415,434 B) is 0.84 of them,
    over the 0.75 share other fallbacks must meet, but Q3_K_M is kept only where it puts every layer on the cards, so
    any size below the original is worth planning. gpt-oss-120b's Q3_K_M (72.6 GB) is larger than its MXFP4
    (65.2 GB): still nothing."""
    kimi = shape_of("moonshotai__Kimi-K2.5")
    (q3,) = fallback_artifacts(kimi, [original_artifact(kimi)])
    assert (q3.quant, q3.size_bytes, original_artifact(kimi).size_bytes) == ("Q3_K_M", 501_921_415_434, 595_047_214_816)
    gpt_oss = shape_of("openai__gpt-oss-120b")
    assert what_if_artifact(gpt_oss, "Q3_K_M").size_bytes > original_artifact(gpt_oss).size_bytes
    assert fallback_artifacts(gpt_oss, [original_artifact(gpt_oss)]) == ()


def test_kimi_on_one_h100_node_at_128k_keeps_every_layer_on_the_cards_at_q3_k_m():
    """Kimi-K2.5 at 131,072 × 8 on 8 H100s: its int4 weights (as Q4_K_M, 584.6 GiB) leave 14 of 61 layers in host
    memory. Q3_K_M (467.5 GiB) with a q8_0 KV cache fits 7 cards: 467.5 / 7 = 66.8 GiB of weights a card, and the
    KV cache, 576 latent values × 34 / 32 bytes (q8_0) × 61 layers = 37,332 B a token × 1,048,576 tokens = 36.5 GiB,
    5.2 GiB a card. The offload stays in the table, below."""
    kimi = shape_of("moonshotai__Kimi-K2.5")
    own = [original_artifact(kimi)]
    result = plan(
        kimi,
        parse_cluster("1x8xh100-80g"),
        PlanRequest(context_tokens=131072, concurrency=8),
        artifacts=own,
        fallback=fallback_artifacts(kimi, own),
        suggest=False,
    )
    first = result.options[0]
    assert (first.engine, first.artifact.quant, first.tier, first.evaluation.layers_on_host) == (
        "llamacpp",
        "Q3_K_M",
        1,
        0,
    )
    assert first.label == "llama.cpp · 7 × h100-80g (pp7) · Q3_K_M · q8_0 KV cache"
    assert any(o.tier == 2 and o.artifact.quant == "int4 g32" for o in result.options)
