"""vLLM and SGLang load a float32 checkpoint at 16 bits: the dtype by card and model type, the plan and its command.

granite-3.1-1b-a400m-instruct's config says float32. Its 1,334,628,352 parameters: 49,155 × 1,024 tied embeddings
(50,334,720) + the final norm (1,024) + 24 layers of 53,512,192 (attention 2 × 1,024² + 2 × 1,024 × 512 =
3,145,728; 32 experts × 3 × 512 × 1,024 = 50,331,648; router 32 × 1,024; two norms 2,048). KV: 24 layers × 2 ×
8 heads × 64 × 2 bytes = 49,152 bytes a token at 16 bits (98,304 at float32). RoPE cache: 131,072 positions × 64.
"""

from __future__ import annotations

import dataclasses

import pytest
from support.corpus import load_config, shape_of
from support.engine_logs import parsed

from explorer.artifacts.offer import original_artifact, what_if_artifact
from explorer.engines import sglang, vllm
from explorer.engines.layouts import Layout
from explorer.engines.load_dtype import served_shape, sglang_auto_dtype, vllm_auto_dtype
from explorer.engines.logs.check import check_log
from explorer.engines.request import PlanRequest
from explorer.engines.vllm_release import vllm_release
from explorer.model.shapes import shape_from_config
from explorer.plan.pinning import check_pinned, pinned_launch
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue

CAT = shipped_catalogue()
GRANITE = "ibm-granite__granite-3.1-1b-a400m-instruct"
PARAMS = 1_334_628_352
KV_4096_BYTES = 4096 * 49_152  # 201,326,592: the 4,096-token cache at 16 bits


def _gemma2_fp32():
    """gemma-2-9b-it's config with a float32 ``torch_dtype``: a model type vLLM never runs at float16."""
    config = load_config("google__gemma-2-9b-it")
    config["torch_dtype"] = "float32"
    return shape_from_config(config, name="gemma-2-fp32")


def _best(shape, cluster, engine, artifacts=None):
    result = plan(shape, parse_cluster(cluster), PlanRequest(context_tokens=4096), artifacts=artifacts, suggest=False)
    return next(o for o in result.options if o.engine == engine)


@pytest.mark.parametrize(
    ("gpu", "dtype"),
    [("h100-80g", "bf16"), ("a100-80g", "bf16"), ("mi300x-192g", "bf16"), ("t4-16g", "fp16"), ("v100-32g", "fp16")],
)
def test_vllm_downcasts_to_the_cards_preferred_dtype(gpu, dtype):
    # CUDA's supported_dtypes: bf16 first from compute capability 8.0 (A100, H100), fp16 first on Volta and Turing;
    # ROCm keeps the platform default, bf16 first
    assert vllm_auto_dtype(shape_of(GRANITE), CAT.resolve(gpu)) == dtype


def test_vllm_never_float16_for_gemma2():
    # gemma2 is in _FLOAT16_NOT_SUPPORTED_MODELS: bf16 where the card has it; on a T4 only fp32 is left
    shape = _gemma2_fp32()
    assert shape.dtype == "fp32"
    assert vllm_auto_dtype(shape, CAT.resolve("h100-80g")) == "bf16"
    assert vllm_auto_dtype(shape, CAT.resolve("t4-16g")) == "fp32"
    loaded = served_shape("fp32", shape, original_artifact(shape))
    assert loaded.dtype == "fp32" and loaded.cast_from == "fp32"  # kept, and written out: auto would not keep it


def test_sglang_uses_float16_but_bfloat16_for_gemma():
    assert sglang_auto_dtype(shape_of(GRANITE), CAT.resolve("h100-80g")) == "fp16"
    assert sglang_auto_dtype(shape_of(GRANITE), CAT.resolve("t4-16g")) == "fp16"
    assert sglang_auto_dtype(_gemma2_fp32(), CAT.resolve("t4-16g")) == "bf16"


def test_granite_float32_on_an_h100_is_planned_at_bf16_by_vllm():
    option = _best(shape_of(GRANITE), "1x1xh100-80g", "vllm")
    card = option.per_card
    assert option.precision == "bf16" and option.dtype == "bf16" and option.bits_per_weight == 16.0
    assert option.label.endswith("original (fp32) at bf16")
    # 1,334,628,352 × 2 + the RoPE cache at bf16 (131,072 × 64 × 2 = 16 MiB), not 5,372,067,840 at fp32
    assert card.weights == PARAMS * 2 + 131_072 * 64 * 2 == 2_686_033_920
    assert card.kv_cache == KV_4096_BYTES
    # T 8,192, 1,024 sequences: the sampler's 15.5 × 1,024 × 49,216 = 781,156,352 + the MoE workspace
    # 2 × 8,192 × 8 × 2 × 512 × 2 bytes = 268,435,456 (at fp32 that term was twice as large: 1,318,027,264 in all)
    assert card.activations == 781_156_352 + 268_435_456
    assert "--dtype bfloat16" in option.evaluation.command
    # the speed model reads what was planned: 2 bytes a weight and a KV value
    assert "0.86 GB weights + 0.20 GB KV" in option.speed.breakdown


def test_granite_float32_on_a_t4_is_planned_at_fp16_by_vllm():
    option = _best(shape_of(GRANITE), "1x1xt4-16g", "vllm")
    card = option.per_card
    assert option.precision == "fp16"
    assert card.weights == 2_686_033_920 and card.kv_cache == KV_4096_BYTES
    # T 2,048, 256 sequences: 15.5 × 256 × 49,216 = 195,289,088 + 2 × 2,048 × 8 × 2 × 512 × 2 = 67,108,864
    assert card.activations == 195_289_088 + 67_108_864
    assert "--dtype float16" in option.evaluation.command


def test_granite_float32_is_planned_at_fp16_by_sglang():
    option = _best(shape_of(GRANITE), "1x1xh100-80g", "sglang")
    card = option.per_card
    assert option.precision == "fp16"
    # SGLang's RoPE cache stays fp32 on CUDA: 131,072 × 64 × 4 = 32 MiB
    assert card.weights == PARAMS * 2 + 131_072 * 64 * 4 == 2_702_811_136
    assert card.kv_cache == KV_4096_BYTES
    assert "--dtype float16" in option.evaluation.command


@pytest.mark.parametrize(("quant", "flag"), [("bf16", "--dtype bfloat16"), ("fp16", "--dtype float16")])
def test_a_dense_what_if_is_the_cast_asked_for(quant, flag):
    shape = shape_of(GRANITE)
    for engine in ("vllm", "sglang"):
        option = _best(shape, "1x1xh100-80g", engine, [what_if_artifact(shape, quant)])
        assert option.precision == quant and option.per_card.kv_cache == KV_4096_BYTES
        assert option.evaluation.command.count("--dtype") == 1 and flag in option.evaluation.command


def test_float32_asked_for_is_kept_and_written_out():
    # --quant fp32 of a float32 checkpoint: 4 bytes a weight, a KV value and vLLM's RoPE cache value, --dtype float32
    shape = shape_of(GRANITE)
    for engine in ("vllm", "sglang"):
        option = _best(shape, "1x1xh100-80g", engine, [what_if_artifact(shape, "fp32")])
        assert option.precision == "fp32" and option.per_card.kv_cache == KV_4096_BYTES * 2
        assert option.per_card.weights == PARAMS * 4 + 131_072 * 64 * 4  # SGLang's cache is fp32 anyway
        assert "--dtype float32" in option.evaluation.command


def test_an_online_fp8_what_if_keeps_the_rest_at_16_bits():
    shape = shape_of(GRANITE)
    option = _best(shape, "1x1xh100-80g", "vllm", [what_if_artifact(shape, "fp8")])
    command = option.evaluation.command
    assert "--dtype bfloat16 --quantization fp8" in command
    assert option.per_card.kv_cache == KV_4096_BYTES
    layout, gpu = Layout(engine="vllm", gpu_class="h100-80g"), CAT.resolve("h100-80g")
    online = shape.resolve_precision("fp8-online")  # none published: vLLM's --quantization fp8, one scale a tensor
    fp32_base = vllm.stage_weight_bytes(shape, online, layout, gpu, vllm_release(None))[0]
    # what fp8 leaves alone is bf16, 2 bytes less a value than at an fp32 base: the embeddings (49,155 × 1,024 =
    # 50,334,720), the routers (24 × 32 × 1,024 = 786,432), the norms (24 × 2 × 1,024 + 1,024 = 50,176); and the
    # RoPE cache (131,072 × 64)
    left_alone = 50_334_720 + 786_432 + 50_176
    assert fp32_base - option.per_card.weights == (left_alone + 131_072 * 64) * 2


def test_a_bf16_checkpoint_loads_as_it_is():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    assert served_shape("fp16", shape, original_artifact(shape)) is shape
    option = _best(shape, "1x1xh100-80g", "vllm")
    assert option.dtype == "" and "--dtype" not in option.evaluation.command


def test_the_loaded_shape_is_one_object_a_dtype():
    shape = shape_of(GRANITE)
    bf16 = shape.at_dtype("bf16")
    assert bf16 is shape.at_dtype("bfloat16")  # the planner's memos keyed on a shape keep answering
    assert (bf16.dtype, bf16.cast_from, bf16.precision.name, bf16.precision.base.name) == (
        "bf16",
        "fp32",
        "bf16",
        "bf16",
    )
    assert bf16.weight_bytes() == PARAMS * 2 and shape.weight_bytes() == PARAMS * 4


def test_the_fleet_footprint_is_the_loaded_models():
    shape = shape_of(GRANITE)
    gpu = CAT.resolve("h100-80g")
    for engine in (vllm.ENGINE, sglang.ENGINE):
        footprint = engine.footprint(shape, original_artifact(shape), gpu, "auto")
        assert footprint.kv_bytes_per_token == 49_152
        assert footprint.weights_bytes == PARAMS * 2 + 131_072 * 64 * 2  # vLLM's budget rule, its RoPE cache


def test_gemma2_on_an_h100_keeps_bf16():
    shape = _gemma2_fp32()
    for engine in ("vllm", "sglang"):  # vLLM: gemma2 refuses fp16; SGLang: bf16 for every Gemma
        option = _best(shape, "1x1xh100-80g", engine)
        assert option.precision == "bf16" and "--dtype bfloat16" in option.evaluation.command
        assert option.per_card.kv_cache == shape.at_dtype("bf16").kv_bytes(4096) == shape.kv_bytes(4096) // 2


def test_a_pinned_t4_launch_is_planned_at_fp16():
    # vLLM on a pinned T4: fp16 (no bf16 below compute capability 8.0), weights and KV at 2 bytes
    cluster = parse_cluster("1x1xt4-16g")
    result = check_pinned(shape_of(GRANITE), cluster, ["0"], engine="vllm", request=PlanRequest(context_tokens=4096))
    option = result.option
    assert option.precision == "fp16" and option.per_card.weights == 2_686_033_920
    assert option.per_card.kv_cache == KV_4096_BYTES and "--dtype float16" in pinned_launch(result)[0]


def test_a_log_of_a_float32_checkpoint_is_checked_at_the_loaded_dtype():
    # a vLLM log at --dtype auto (bfloat16 on an H100), checked against granite's float32 shape: the weights it
    # predicts are 1,334,628,352 × 2 + the RoPE cache at bf16; with --dtype float32 in the log, at 4 bytes
    log = parsed("vllm__llama-3.1-8b__H100__4")
    shape = shape_of(GRANITE)
    check = check_log(log, shape, CAT)
    assert check.predicted["weights_bytes"] == PARAMS * 2 + 131_072 * 64 * 2
    as_fp32 = dataclasses.replace(log, settings={**log.settings, "dtype": "torch.float32"})
    assert check_log(as_fp32, shape, CAT).predicted["weights_bytes"] == PARAMS * 4 + 131_072 * 64 * 4
