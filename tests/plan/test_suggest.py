"""Suggestions: each change planned again, with what it leads to."""

from __future__ import annotations

import pytest
from support.corpus import load_config, shape_of

from explorer.artifacts.offer import original_artifact
from explorer.engines.request import PlanRequest
from explorer.model.shapes import shape_from_config
from explorer.plan.planner import plan, with_suggestions
from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
from explorer.speed.estimate import SpeedSettings

SPEED = SpeedSettings(prices=shipped_prices())


def _plan(name, spec, **request):
    return plan(shape_of(name), parse_cluster(spec), PlanRequest(**request), speed=SPEED, catalogue=shipped_catalogue())


def test_a_uma_host_names_its_assumed_bandwidth_and_the_chips_that_have_their_own():
    """On ``uma-128g`` the decode reads at the host's assumed 100 GB/s; an M4 Max (546 GB/s) reads 5.46 times as
    fast, the same bytes a token (Llama-3.1-8B at Q4_K_M: the issue's 10.6 against 57.9 tok/s)."""
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1xuma-128g", precision="Q4_K_M")
    best = result.options[0]
    assert best.layout.unified and "100 GB/s" in best.speed.assumptions[0]
    chips = {s.change["cluster"]: s for s in result.suggestions if s.kind == "named-chip"}
    m4 = chips["1x1xm4-max-128g"]
    assert m4.fits and m4.best.speed.assumptions == ()
    ratio = m4.best.speed.decode_bound_tokens_per_s / best.speed.decode_bound_tokens_per_s  # estimates add overhead
    assert ratio == pytest.approx(5.46, rel=0.02)
    assert best.to_dict()["speed"]["assumptions"] == list(best.speed.assumptions)


def test_only_lower_tiers_fit_suggest_the_precision_that_keeps_every_layer_on_the_cards():
    """70B bf16 on two L40S: only a llama.cpp partial offload (and the CPU) fit; fp8 (72.7 GB) on vLLM holds
    every layer on the two cards (2 × 40.5 GiB usable), so the family stops at fp8. Its bits a weight: 68.45B
    linear weights at 8.002 (fp8 and a 4-byte scale per 128 × 128 block) and the bf16 embeddings and head,
    2 × 128,256 × 8,192 = 2.10B at 16: (68.45 × 8.002 + 2.10 × 16) / 70.55 = 8.24."""
    result = _plan("meta-llama__Meta-Llama-3.1-70B", "1x2xl40s-48g", context_tokens=4096)
    assert result.options[0].tier == 2
    precisions = {s.change["quant"]: s for s in result.suggestions if s.kind == "precision"}
    fp8 = precisions["fp8"]
    assert fp8.fits and fp8.tier == 1 and fp8.best.engine in ("vllm", "sglang") and "8.24 bits a weight" in fp8.text
    assert "Q8_0" in precisions and precisions["Q8_0"].fits  # llama.cpp's family: 75 GB on 2 × 44.5 GiB


def test_fewer_sequences_are_suggested_with_the_number_that_fits():
    """8 × 8,192 tokens on one L4: vLLM's KV room at 0.9 (0.9 × 23,676,007,219 B less weights 16,060,522,496,
    sampler 508,919,808, graphs and non-torch 1,124,492,902 = 3,614,471,291 B: 1,723 blocks of 16 × 128 KiB)
    holds 3 sequences of 512 blocks, not 8 (nor at fp8: 8 × 8,192 × 64 KiB = 4 GiB, which the planner tries; with
    llama.cpp, whose q8_0 cache holds them on the card, nothing is left to suggest)."""
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1x1xl4-24g", context_tokens=8192, concurrency=8, engines=("vllm",))
    fewer = next(s for s in result.suggestions if s.kind == "concurrency")
    most = fewer.change["concurrency"]
    assert most == 3 and fewer.fits and fewer.best.evaluation.max_concurrency >= most


def test_the_cheapest_class_for_one_node_has_a_price():
    result = _plan("meta-llama__Meta-Llama-3.1-405B", "1x1xl4-24g")
    cheapest = next(s for s in result.suggestions if s.kind == "card-class")
    assert cheapest.fits and "an hour" in cheapest.text and cheapest.change["cluster"].startswith("1x")
    spec = cheapest.change["cluster"]
    assert cheapest.best.layout.gpu_class == spec.split("x", 2)[2]


def test_suggestions_can_come_after_the_table():
    """A face plans without suggestions first, then asks for them: the same as planning with them."""
    shape, cluster = shape_of("meta-llama__Meta-Llama-3.1-70B"), parse_cluster("1x2xl40s-48g")
    at_once = plan(shape, cluster, PlanRequest(), speed=SPEED, catalogue=shipped_catalogue())
    table = plan(shape, cluster, PlanRequest(), speed=SPEED, suggest=False)
    assert table.suggestions == ()
    later = with_suggestions(
        table, shape, cluster, [original_artifact(shape)], speed=SPEED, catalogue=shipped_catalogue()
    )
    assert [s.to_dict() for s in later.suggestions] == [s.to_dict() for s in at_once.suggestions]
    assert later.suggestions


def test_a_shorter_context_is_suggested_with_headroom_not_at_the_brim():
    """Issue 24's headroom rule: 8B bf16 on one 4090 with vLLM at 128k. The longest context that fits is 38,112
    tokens, one sequence at 100 % of the 21.2 GiB vLLM may use; the suggestion is the longest (in steps of 256)
    whose layout holds two sequences within 95 %: 18,944 tokens, 18.8 of 21.2 GiB (89 %), two sequences."""
    from explorer.plan.ranking import at_the_brim

    result = plan(shape_of("meta-llama__Meta-Llama-3.1-8B"), parse_cluster("1x1xrtx4090-24g"),
                  PlanRequest(context_tokens=131072, engines=("vllm",)))  # fmt: skip
    shorter = next(s for s in result.suggestions if s.kind == "context")
    assert shorter.fits and shorter.change == {"context": 18944}
    assert shorter.text == "a context of 18,944 tokens (asked 131,072; 38,112 fit only at the brim)"
    assert not at_the_brim(shorter.best) and shorter.best.evaluation.max_concurrency == 2
    longer = plan(shape_of("meta-llama__Meta-Llama-3.1-8B"), parse_cluster("1x1xrtx4090-24g"),
                  PlanRequest(context_tokens=18944 + 256, engines=("vllm",)), suggest=False)  # fmt: skip
    own_kv = [o for o in longer.options if not o.kv_dtype]
    assert at_the_brim(own_kv[0])  # one step longer is at the brim with the bf16 cache
    assert longer.options[0].kv_dtype == "fp8" and not at_the_brim(longer.options[0])  # so fp8 is planned, roomy


def test_405b_on_one_h100_is_offered_the_precision_and_the_cluster_together():
    """Issue 24: Llama-3.1-405B on one H100. The standard answers change the precision and the cluster at once:
    the published FP8 checkpoint (405.9B × 8.03 bits ≈ 378 GiB: 6 cards at least, so one node of 8) on 8 × H100, and
    the published int4 AWQ (≈ 203 GiB: 3 cards at least, so a node of 4) on 4 × H100; each is what the planner
    answers when asked for that precision on that cluster. Q8_0 and Q4_K_M lead to the same clusters: left out."""
    from explorer.artifacts.offer import fallback_artifacts, what_if_artifact
    from explorer.sources.checkpoints import shipped_checkpoints

    shape = shape_of("meta-llama__Meta-Llama-3.1-405B")
    published = shipped_checkpoints("meta-llama/Meta-Llama-3.1-405B")
    fallback = fallback_artifacts(shape, [original_artifact(shape)], published)
    result = plan(shape, parse_cluster("1x1xh100-80g"), PlanRequest(), fallback=fallback)
    assert result.options == ()
    combined = [s for s in result.suggestions if s.kind == "precision-cluster"]
    assert [(s.change["cluster"], s.best.layout.tp, s.best.engine) for s in combined] == [
        ("1x8xh100-80g", 8, "vllm"),
        ("1x4xh100-80g", 4, "vllm"),
    ]
    fp8, awq = combined
    assert fp8.fits and fp8.best.artifact.repo == "meta-llama/Meta-Llama-3.1-405B-FP8"
    assert awq.fits and awq.best.artifact.repo == "hugging-quants/Meta-Llama-3.1-405B-Instruct-AWQ-INT4"
    assert awq.text == "hugging-quants/Meta-Llama-3.1-405B-Instruct-AWQ-INT4 (int4 AWQ g128) on 1x4xh100-80g"
    for s in combined:  # the planner's own answer when asked
        asked = what_if_artifact(shape, s.change["quant"], published)
        again = plan(shape, parse_cluster(s.change["cluster"]), PlanRequest(), artifacts=[asked], suggest=False)
        assert again.options[0].label == s.best.label


def test_no_combined_suggestion_without_other_precisions():
    result = plan(shape_of("meta-llama__Meta-Llama-3.1-405B"), parse_cluster("1x1xh100-80g"), PlanRequest())
    assert not [s for s in result.suggestions if s.kind == "precision-cluster"]


def test_a_context_past_the_models_limit_suggests_the_limit():
    """Qwen3-30B-A3B states 40,960 tokens and no rope scaling: at 131,072 every engine refuses the context itself
    (vLLM and SGLang by the config, llama.cpp by n_ctx_train), so the one change is the context, held to the limit;
    at 40,960 one H200 holds the bf16 weights (61 GB) and the KV cache with vLLM."""
    result = _plan("Qwen__Qwen3-30B-A3B", "1x1xh200-141g", context_tokens=131072)
    assert not result.options and {x.rule for x in result.rejected} == {"context-limit"}
    (context,) = [s for s in result.suggestions if s.kind == "context"]
    assert context.change == {"context": 40960} and context.fits and context.tier == 1
    assert "the model's limit is 40,960" in context.text


def _llama70b(dtype: str):
    config = load_config("meta-llama__Llama-3.3-70B-Instruct")
    config["torch_dtype"] = dtype
    return shape_from_config(config, name=f"llama-3.3-70b-{dtype}")


def test_a_float32_checkpoint_is_suggested_what_it_needs_at_the_dtype_it_loads_at():
    """Llama-3.3-70B with a float32 config on one H100: vLLM loads it at bf16 (explorer.engines.load_dtype), so the
    suggestions are the bf16 checkpoint's. The smallest cluster: 70,553,706,496 parameters × 2 = 141,107,412,992
    bytes + the 4,096-token KV cache at bf16 (80 layers × 2 × 8 heads × 128 × 2 × 4,096 = 1,342,177,280) over 0.95
    of an H100's 85,520,809,984 usable bytes = 1.75: 2 cards (at 32 bits, 282,214,825,984 + 2,684,354,560 = 3.51:
    4). int4 AWQ keeps the embedding and the head (2 × 128,256 × 8,192 = 2,101,346,304) at 16 bits, not 32:
    4.51 bits a weight, not 4.99."""
    asked = PlanRequest(engines=("vllm",), context_tokens=4096)
    fp32, bf16 = (plan(_llama70b(d), parse_cluster("1x1xh100-80g"), asked) for d in ("float32", "bfloat16"))
    changes = {s.kind: (s.change, s.text) for s in fp32.suggestions}
    assert changes == {s.kind: (s.change, s.text) for s in bf16.suggestions}
    assert changes["cluster"] == ({"cluster": "1x2xh100-80g"}, "1x2xh100-80g")
    assert changes["precision"] == ({"quant": "int4-awq"}, "int4 (AWQ or GPTQ) weights, 4.51 bits a weight (vLLM)")
    cluster = next(s for s in fp32.suggestions if s.kind == "cluster")
    assert cluster.fits and cluster.best.label.endswith("original (fp32) at bf16") and cluster.best.layout.tp == 2
