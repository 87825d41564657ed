"""SGLang's DP attention offered where an MLA latent duplicated over the tp cards binds
(explorer.engines.sglang_dp_attention, through SGLang.kv_shard_layouts and launches.evaluate_sharded)."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines.launches import evaluate_launch, evaluate_sharded
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.engines.sglang import ENGINE, forced_dp_attention
from explorer.engines.sglang_dp_attention import dp_attention_layouts, dp_attention_refusals
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue

CAT = shipped_catalogue()
H200 = CAT.resolve("h200-141g")
DSV3 = "deepseek-ai__DeepSeek-V3"
KIMI = "moonshotai__Kimi-K2.5"
#: 64 sequences of 65,536 tokens with an fp8 latent: (512 + 64) values × 1 byte × 61 layers = 35,136 bytes a
#: token, 65,536 × 35,136 = 2,302,672,896 bytes a sequence (the brief's scenario at SGLang's fp8_e4m3 cache)
LONG = {"context_tokens": 65_536, "concurrency": 64, "kv_dtype": "fp8"}
SEQ_BYTES = 65_536 * 61 * 576


def _tp8(**extra) -> Layout:
    return Layout(engine="sglang", gpu_class=H200.name, gpus_per_node=8, tp=8, **extra)


def _sharded(name, layout, **req):
    """The layout SGLang launches in place of ``layout`` and its evaluation (``evaluate_sharded``)."""
    shape, request = shape_of(name), PlanRequest(**req)
    return evaluate_sharded(ENGINE, shape, shape.precision, layout, H200, request, "m")


def test_the_sizes_sglang_accepts_for_an_mla_model():
    shape = shape_of(DSV3)
    assert [x.dp for x in dp_attention_layouts(shape, _tp8(), PlanRequest())] == [2, 4, 8]
    assert dp_attention_refusals(shape, 8, 3, PlanRequest()) == [
        ("dp-attention-size", "SGLang asserts tp_size % dp_size == 0 under DP attention: 8 % 3")
    ]
    assert dp_attention_refusals(shape, 8, 1, PlanRequest())[0][0] == "dp-attention-size"
    assert dp_attention_refusals(shape, 8, 8, PlanRequest(speculative="NGRAM")) == [
        ("dp-attention-speculative", "Currently ngram speculative decoding does not support dp attention.")
    ]
    assert dp_attention_refusals(shape, 8, 8, PlanRequest(speculative="EAGLE")) == []


def test_none_for_standard_attention_pipelines_replicas_or_when_asked():
    # GQA: tp splits the KV heads already; SGLang's guide keeps tp or plain dp for such models
    (rule,) = dp_attention_refusals(shape_of("meta-llama__Meta-Llama-3.1-70B"), 8, 8, PlanRequest())
    assert rule[0] == "dp-attention-model" and rule[1].endswith("this model has full")
    shape = shape_of(DSV3)
    assert dp_attention_layouts(shape, _tp8(), PlanRequest(dp_attention=True)) == ()  # the walk plans it
    pp = Layout(engine="sglang", gpu_class=H200.name, gpus_per_node=8, tp=4, pp=2)
    assert dp_attention_layouts(shape, pp, PlanRequest()) == ()
    assert dp_attention_layouts(shape, Layout(engine="sglang", gpu_class=H200.name), PlanRequest()) == ()


def test_the_least_dp_that_holds_the_request_with_its_launch_line():
    # DeepSeek-V3 (fp8 weights) at tp 8 keeps every sequence's latent on every card: 64 × 2,302,672,896 =
    # 137.25 GiB. DP attention keeps 1/dp of them but whole attention weights at tp / dp and a reserve of
    # 512 × dp × 4.5 MiB more (cuda_graph_max_bs 512 > 300). At dp 8 on an H200 (143,771 MiB):
    # reserved 512 + 8,192 × 1.5 + 512 × 2 + 8/8 × 1,024 + 512 × 8 × 3 + 512 × 8 × 1.5 = 33,280 MiB,
    # mem_fraction_static round(110,491 / 143,771, 3) = 0.769 of 148,070,465,536 free = 113,866,187,997 static;
    # less 94,362,995,104 of weights a card leaves 19,503,192,893: 8 sequences of 2,302,672,896 a rank, × 8 = 64.
    # dp 2 (68.62 GiB of latent) and dp 4 (34.31 GiB, 142.8 GiB a card in all) do not fit.
    layout, ev = _sharded(DSV3, _tp8(), **LONG)
    assert layout.dp == 8 and layout.parallel == "tp8 dp8" and ev.fits and ev.max_concurrency == 64
    assert ev.cards[0].kv_cache == 8 * SEQ_BYTES == 18_421_383_168
    assert ev.cards[0].weights == 94_362_995_104
    assert ev.command == (
        "python -m sglang.launch_server --model-path m --tp-size 8 --context-length 65536 --mem-fraction-static 0.769 "
        "--enable-dp-attention --dp-size 8 --kv-cache-dtype fp8_e4m3 --trust-remote-code --chunked-prefill-size 8192 "
        "--cuda-graph-max-bs 512"
    )
    assert any(n.startswith("DP attention: 8 attention ranks of 1 card(s)") for n in ev.notes)


def test_the_experts_keep_the_ep_the_launch_had():
    layout, ev = _sharded(DSV3, _tp8(ep=8), **LONG)
    assert layout.parallel == "tp8 dp8 ep8" and "--tp-size 8 --ep-size 8 " in ev.command
    assert "--enable-dp-attention --dp-size 8" in ev.command


def test_a_layout_that_holds_the_request_keeps_plain_tp():
    layout, ev = _sharded(DSV3, _tp8(), context_tokens=8_192, concurrency=4)
    assert layout.dp == 1 and ev.fits and "--enable-dp-attention" not in ev.command


def test_the_most_split_when_none_holds_all_and_it_holds_more():
    # Kimi-K2.5 is a vision model: the static share shrinks by 0.9097, to round(0.769 × 0.9097, 3) = 0.7 at dp 8:
    # 103,649,325,875 static less 85,536,288,000 of weights = 18,113,037,875, 7 sequences a rank (56 of 64; the
    # card needs 140.7 GiB of 140.4); tp 8 alone holds 19
    shape, request = shape_of(KIMI), PlanRequest(**LONG)
    plain = evaluate_launch(ENGINE, shape, shape.precision, _tp8(), H200, request, "m")
    layout, ev = _sharded(KIMI, _tp8(), **LONG)
    assert plain.max_concurrency == 19
    assert layout.dp == 8 and not ev.fits and ev.max_concurrency == 56


def test_the_first_sglang_rows_of_the_two_scenarios():
    # DeepSeek-V3 (fp8 weights as published) on 8 × H200 at 65,536 × 64: 7 cards with pp 7 and an fp8 cache stay
    # first for the fewest cards; tp 8 dp 8 with the fp8 cache holds everyone at 139.4 of 140.4 GiB (at the brim)
    req = {"context_tokens": 65_536, "concurrency": 64, "engines": ("sglang",)}
    result = plan(shape_of(DSV3), parse_cluster("1x8xh200-141g"), PlanRequest(**req), speed=False)
    assert result.options[0].layout.parallel == "pp7" and result.options[0].kv_dtype == "fp8"
    # Kimi-K2.5 on 2 × 8 H200s: pp 7 with the fp8 cache too; tp 8 dp 8 holds 56 of the 64 (above)
    result = plan(shape_of(KIMI), parse_cluster("2x8xh200-141g"), PlanRequest(**req), speed=False)
    assert result.options[0].layout.parallel == "pp7" and result.options[0].kv_dtype == "fp8"


def test_a_sparse_mla_model_runs_it_at_dp_equal_to_tp():
    # SGLang turns DP attention on for DeepSeek's NSA models itself, with dp_size = tp_size
    shape = shape_of("deepseek-ai__DeepSeek-V3.2")
    assert [x.dp for x in dp_attention_layouts(shape, _tp8(), PlanRequest())] == [8]
    (rule,) = dp_attention_refusals(shape, 8, 4, PlanRequest())
    assert rule[0] == "dp-attention-size" and "dp_size = tp_size" in rule[1]


def test_a_sharded_layout_at_the_brim_yields_to_a_roomier_split_of_the_same_cards():
    # DeepSeek-V3's fp8 weights at 131,072 × 8 on 8 × H200: plain tp 8 keeps the whole latent, 8 × 131,072 ×
    # 70,272 B = 68.6 GiB, on every card and is refused; tp 8 dp 2 (each rank 4 sequences, 34.3 GiB) fits at 136.0
    # of 140.4 GiB, above 95 % (the brim). tp 4 pp 2 halves the latent by stage instead: 131.7 GiB, with headroom,
    # so it is the 8-card layout kept, and tp 8 dp 2 is refused as the worse split.
    req = PlanRequest(context_tokens=131_072, concurrency=8, engines=("sglang",))
    result = plan(shape_of(DSV3), parse_cluster("1x8xh200-141g"), req, speed=False)
    eight = [o for o in result.options if o.layout.gpus_per_node * o.layout.nodes == 8]
    assert [o.layout.parallel for o in eight] == ["tp4 pp2"]
    binding = max(c.total for c in eight[0].evaluation.cards)
    assert round(binding / 2**30, 1) == 131.7 and binding * 100 <= 95 * eight[0].evaluation.cards[0].usable
    assert any(
        r.rule == "split" and r.layout.parallel == "tp8 dp2" and "tp4 pp2 is a better split" in r.reason
        for r in result.rejected
    )


def test_a_sparse_mla_models_tensor_parallel_launch_is_planned_as_the_dp_attention_sglang_runs():
    # DeepSeek-V3.2 at 32,768 × 16 on 8 × H200 fits plain tp 8, but SGLang launches an NSA model at tp 8 with DP
    # attention at dp 8 whatever it is asked: each card keeps its own 2 sequences' latents (not all 16) and the
    # attention weights whole, and the launch line says so. DeepSeek-V3 (dense MLA) keeps plain tp 8 there.
    req = PlanRequest(context_tokens=32_768, concurrency=16, engines=("sglang",))
    v32 = plan(shape_of("deepseek-ai__DeepSeek-V3.2"), parse_cluster("1x8xh200-141g"), req, speed=False)
    tp8 = [o for o in v32.options if o.layout.tp == 8]
    assert [o.layout.parallel for o in tp8] == ["tp8 dp8"]
    assert (
        "--tp-size 8" in tp8[0].evaluation.command and "--enable-dp-attention --dp-size 8" in tp8[0].evaluation.command
    )
    v3 = plan(shape_of(DSV3), parse_cluster("1x8xh200-141g"), req, speed=False)
    assert "tp8" in [o.layout.parallel for o in v3.options]
    # planned at pp 1 only (SGLang's recipe is --tp N --dp N), and never for dense MLA or one card
    v32_shape = shape_of("deepseek-ai__DeepSeek-V3.2")
    assert forced_dp_attention(v32_shape, 8, 1, req) and not forced_dp_attention(v32_shape, 4, 2, req)
    assert not forced_dp_attention(v32_shape, 1, 1, req) and not forced_dp_attention(shape_of(DSV3), 8, 1, req)
