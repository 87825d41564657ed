"""Whether an engine runs a precision's weight formats on a card."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.artifacts.offer import what_if_artifact
from explorer.engines.request import PlanRequest
from explorer.engines.weight_kernels import weight_only_note, weights_refusal
from explorer.model.quant_config import what_if_precision
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue


def test_block_fp8_is_refused_on_a100_and_runs_on_h100():
    cat = shipped_catalogue()
    r1 = shape_of("deepseek-ai__DeepSeek-R1").precision
    reason = weights_refusal("sglang", r1, cat.get("a100-80g"))
    assert reason is not None and reason.startswith("sglang has no fp8-block kernel for ampere cards (a100-80g)")
    assert weights_refusal("sglang", r1, cat.get("h100-80g")) is None
    assert weights_refusal("llamacpp", r1, cat.get("a100-80g")) is None  # no rows: not checked


def test_fp8_on_ampere_runs_weight_only_and_says_so():
    cat = shipped_catalogue()
    fp8 = shape_of("Qwen__Qwen3-32B-FP8").precision  # block 128 × 128 in its config
    per_channel = what_if_precision("int8")
    assert weights_refusal("vllm", per_channel, cat.get("a100-80g")) is None
    note = weight_only_note("vllm", what_if_precision("nvfp4"), cat.get("h100-80g"))
    assert note.startswith("nvfp4 weights run weight-only on hopper (h100-80g)")
    assert weight_only_note("vllm", fp8, cat.get("h100-80g")) == ""


def test_a_weight_only_launch_says_so_in_its_notes():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    result = plan(
        shape,
        parse_cluster("1x1xa100-80g"),
        PlanRequest(engines=("vllm",)),
        artifacts=[what_if_artifact(shape, "nvfp4")],
        speed=False,
        suggest=False,
    )
    notes = result.options[0].evaluation.notes
    assert any(n.startswith("nvfp4 weights run weight-only on ampere (a100-80g)") for n in notes)
