"""A log beside explorer's plan of it: the card, the setup, the figures, the verdict and the calibration."""

from __future__ import annotations

import dataclasses

import pytest
from support.corpus import shape_of
from support.engine_logs import entry, log_record, parsed, shape_for

from explorer.engines.calibration import Calibration
from explorer.engines.layouts import Layout
from explorer.engines.logs import EngineLog
from explorer.engines.logs.check import calibration_from_check, check_log
from explorer.engines.logs.setup import card_class, gguf_quant
from explorer.engines.request import PlanRequest
from explorer.errors import EngineLogError
from explorer.hardware.cluster_text import parse_cluster_spec
from explorer.plan.planner import plan
from explorer.sources.shipped import shipped_catalogue
from explorer.units import GiB

CAT = shipped_catalogue()


@pytest.mark.parametrize(
    "device, expected",
    [
        ("NVIDIA H100 80GB HBM3", "h100-80g"),
        ("NVIDIA A100-SXM4-80GB", "a100-80g"),
        ("Tesla T4", "t4-16g"),
        ("NVIDIA GeForce RTX 3090", "rtx3090-24g"),
        ("NVIDIA RTX A6000", "rtxa6000-48g"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtxpro6000-96g"),
    ],
)
def test_the_card_from_the_device_name(device, expected):
    assert card_class(EngineLog(engine="llamacpp", card=device), CAT).name == expected


def test_the_card_from_the_total_the_engine_saw():
    # 79.19 GiB is an H100's torch-visible total (and no other class's, within 0.02 GiB)
    log = EngineLog(engine="vllm", observed={"torch_total_bytes": round(79.19 * GiB)})
    assert card_class(log, CAT).name == "h100-80g"
    assert card_class(log, CAT, "a100-80g").name == "a100-80g"  # --card wins
    with pytest.raises(EngineLogError, match="does not say which card") as e:
        card_class(EngineLog(engine="sglang", observed={"torch_total_bytes": 50 * GiB}), CAT)
    assert "--card" in str(e.value)


@pytest.mark.parametrize(
    "printed, name", [("Q4_K - Medium", "Q4_K_M"), ("IQ4_NL - 4.5 bpw", "IQ4_NL"), ("Q8_0", "Q8_0"), ("F16", "F16")]
)
def test_llamacpp_file_types(printed, name):
    assert gguf_quant(printed) == name


def test_a_vllm_log_lined_up_part_by_part():
    log = parsed("vllm__llama-3.1-8b__H100__4")
    check = check_log(log, shape_of("meta-llama__Meta-Llama-3.1-8B"), CAT)
    assert check.setup.gpu.name == "h100-80g" and check.setup.request.vllm_version == "0.19.0"
    assert check.setup.request.gpu_memory_utilization == 0.95 and check.setup.request.context_tokens == 8192
    assert check.started is True and check.fits is True and check.agrees is True
    d = check.to_dict()
    assert set(d) >= {"engine", "model", "card", "settings", "observed", "predicted", "differences"}
    assert all(isinstance(v, int) for part in ("observed", "predicted", "differences") for v in d[part].values())
    # 0.95 × 79.19 GiB = 75.23 GiB asked for, as the log's 'worker requested memory' line says
    assert abs(d["differences"]["requested_bytes"]) <= 0.005 * GiB
    # Model loading took 14.99 GiB; explorer: 8,030,261,248 parameters × 2 bytes = 14.96 GiB, and the RoPE cache
    # (131,072 positions × 128 × 2 bytes = 32 MiB): 14.99 GiB
    assert d["predicted"]["weights_bytes"] == 16_060_522_496 + 33_554_432
    assert abs(d["differences"]["kv_cache_bytes"]) < 0.01 * d["observed"]["kv_cache_bytes"]


def test_gpt_oss_120b_on_one_h100_is_refused_as_vllm_refuses_it():
    shape = shape_of("openai__gpt-oss-120b")
    request = PlanRequest(context_tokens=131072, gpu_memory_utilization=0.9, engines=("vllm",))
    result = plan(shape, parse_cluster_spec("1x1xh100-80g", CAT), request)
    assert not result.options and result.pruned == {"memory": 1}
    card = result.rejected[0].option.per_card
    # 71.27 GiB asked (0.9 × 79.19); weights 65.52 GiB (the Triton layout: scales twice, fp32 biases, the swizzled
    # values padded to 64 bytes; and the 32 MiB RoPE cache), activation 2.97, 1.05 GiB of graphs and non-torch
    # leave 1.73 GiB, short of one 131,072-token sequence (4.79 GiB)
    assert card.usable == int(round(79.19 * GiB) * 0.9)
    assert abs(card.weights - 65.52 * GiB) < 0.01 * GiB
    assert card.usable - card.weights - card.activations - card.overhead < card.kv_cache
    # at 0.95 it fits, with under 1 GiB to spare, as the logs that started at 0.95 show
    roomy = plan(
        shape, parse_cluster_spec("1x1xh100-80g", CAT), dataclasses.replace(request, gpu_memory_utilization=0.95)
    )
    assert roomy.options and roomy.options[0].per_card.headroom < 1 * GiB


def test_the_published_gpt_oss_120b_refusals_replay():
    # vLLM 0.10.1 (Marlin, 38.9 B a logit): 'Available KV cache memory: -2.14 GiB' at 0.9
    log = parsed("vllm__gpt-oss-120b__H100__1")
    overrides = entry("vllm__gpt-oss-120b__H100__1")["replay"]["settings"]
    check = check_log(log, shape_for("openai__gpt-oss-120b"), CAT, card="h100-80g", overrides=overrides)
    assert check.started is False and check.fits is False
    assert abs(check.predicted["kv_cache_bytes"] - (-2.14 * GiB)) < 0.05 * GiB
    assert abs(check.predicted["weights_bytes"] - 65.97 * GiB) < 0.01 * 65.97 * GiB  # Marlin's padded experts


def test_an_sglang_log_is_checked_on_free_memory_at_start():
    log = parsed("sglang__llama-3.2-3b__48GB__1")
    check = check_log(
        log, shape_of("meta-llama__Llama-3.2-3B"), CAT, card="l40s-48g", overrides={"mem_fraction_static": 0.2}
    )
    # free at start: 44.42 − 0.5 = 43.92 GiB (logged 44.11); pool 0.2 × 43.92 − 5.98 = 2.80 GiB (logged 2.68)
    assert check.predicted["free_at_start_bytes"] == round(44.42 * GiB) - GiB // 2
    assert abs(check.differences["kv_cache_bytes"]) < 0.05 * check.observed["kv_cache_bytes"]
    assert check.started is True and check.fits is True  # SGLang starts with any pool, shorter requests served


def test_calibration_from_a_log():
    log = parsed("vllm__gpt-oss-20b__H100__3")
    check = check_log(log, shape_of("openai__gpt-oss-20b"), CAT)
    cal = calibration_from_check(check, "2026-05-01", "vllm.log")
    assert cal.engine == "vllm" and cal.gpu_class == "h100-80g" and cal.distributed is True
    assert cal.torch_memory_bytes == round(79.19 * GiB) and cal.graph_bytes == round(1.55 * GiB)
    assert cal.non_torch_bytes == round(2.07 * GiB) and cal.activation_bytes == round(2.87 * GiB)
    assert cal.activation_scale == round(round(2.87 * GiB) / check.predicted["activation_bytes"], 4)
    with pytest.raises(EngineLogError, match="measured nothing to calibrate"):
        bare = dataclasses.replace(check, observed={"weights_bytes": 1})
        calibration_from_check(bare, "2026-05-01")


def test_a_calibration_changes_later_plans_on_that_class_only():
    shape = shape_of("openai__gpt-oss-20b")
    layout = Layout(engine="vllm", gpu_class="h100-80g")
    from explorer.engines import vllm

    g = CAT.get("h100-80g")
    plain = vllm.evaluate(shape, shape.precision, layout, g, PlanRequest(context_tokens=8192), "m")
    cal = Calibration(
        engine="vllm",
        gpu_class="h100-80g",
        measured_on="2026-05-01",
        torch_memory_bytes=79 * GiB,
        activation_scale=0.5,
        non_torch_bytes=GiB,
        graph_bytes=2 * GiB,
    )
    calibrated = vllm.evaluate(
        shape, shape.precision, layout, g, PlanRequest(context_tokens=8192, calibrations=(cal,)), "m"
    )
    p, c = plain.cards[0], calibrated.cards[0]
    assert c.usable == int(79 * GiB * 0.9) != p.usable
    assert c.activations == int(p.activations * 0.5) and c.overhead == GiB + 2 * GiB
    assert "calibrated from your log of 2026-05-01" in calibrated.notes
    other = vllm.evaluate(
        shape,
        shape.precision,
        Layout(engine="vllm", gpu_class="a100-80g"),
        CAT.get("a100-80g"),
        PlanRequest(context_tokens=8192, calibrations=(cal,)),
        "m",
    )
    assert not any("calibrated" in n for n in other.notes)


def test_a_v0_worker_ranks_figures_are_replayed_without_the_sampler():
    """vllm__deepseek-r1-distill-qwen-14b__RTX4090__1 (V0 ~0.7, tp 2 on RTX 4090s at 0.98): the reporter's rank (a
    worker process) profiled 0.19 GiB of activation and 8.69 GiB of KV room; the driver's sampler (256 rows ×
    152,064 logits × 38.9 B = 1.41 GiB) is on rank 0 alone, whose smaller room sets the 81,536 blocks' tokens."""
    name = "vllm__deepseek-r1-distill-qwen-14b__RTX4090__1"
    log = log_record(name)
    assert log.driver_rank is False
    overrides = entry(name)["replay"]["settings"]
    check = check_log(log, shape_for("Qwen__Qwen2.5-14B"), CAT, card="rtx4090-24g", overrides=overrides)
    assert check.setup.sampler_rank is False
    # the forward pass alone: 512 tokens (V0's chunked prefill past 32K) × (3 × 5,120 + 3 × 13,824 / 2) × 2 B
    assert check.predicted["activation_bytes"] == 512 * (3 * 5120 + 3 * 13824 // 2) * 2
    assert abs(check.predicted["kv_cache_bytes"] - 8.69 * GiB) < 0.05 * 8.69 * GiB
    assert check.started is False and check.fits is False  # 131,072 tokens do not fit the driver's room
