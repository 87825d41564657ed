"""Weights an engine has no kernel for on the cards are not offered; the plan widens to a precision that runs."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.artifacts.offer import fallback_artifacts, original_artifact
from explorer.engines.request import PlanRequest
from explorer.engines.weight_kernels import RULE
from explorer.plan.planner import plan
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.shipped import parse_cluster

R1 = "deepseek-ai__DeepSeek-R1"


def _r1_plan(spec: str):
    shape = shape_of(R1)
    own = [original_artifact(shape)]
    fallback = fallback_artifacts(shape, own, shipped_checkpoints("deepseek-ai/DeepSeek-R1"))
    request = PlanRequest(engines=("sglang",), context_tokens=4096)
    return plan(shape, parse_cluster(spec), request, artifacts=own, fallback=fallback, speed=False, suggest=False)


def test_deepseek_r1_on_a100s_with_sglang_never_offers_its_block_fp8_weights():
    """SGLang's docs: DeepSeek V3/R1 on A100 runs a BF16 conversion (4 × 8 × A100) or INT8 (16 × A100); its FP8
    checkpoint is 128 × 128 block-scaled, and Marlin has no block-wise fp8. No option loads the FP8 weights; the
    refusal says why; the plan widens to the published AWQ, INT8 and BF16 checkpoints, by their real names."""
    result = _r1_plan("4x8xa100-80g@ib0")
    assert all("fp8" not in o.precision for o in result.options)
    refused = [r for r in result.rejected if r.rule == RULE]
    assert len(refused) == 1 and "no fp8-block kernel for ampere cards (a100-80g)" in refused[0].reason
    repos = {o.artifact.repo for o in result.options}
    assert {"meituan/DeepSeek-R1-Channel-INT8", "unsloth/DeepSeek-R1-BF16"} <= repos
    assert result.widened == (
        "cognitivecomputations/DeepSeek-R1-AWQ (int4 AWQ g128)",
        "meituan/DeepSeek-R1-Channel-INT8 (int8 per-channel)",
        "unsloth/DeepSeek-R1-BF16 (bf16)",
    )
    int8 = next(o for o in result.options if o.artifact.repo == "meituan/DeepSeek-R1-Channel-INT8")
    # 671B at one byte a weight (embeddings and head in bf16) does not fit one node of 8 × 80 GB: two nodes, tp 16
    assert int8.layout.cards == 16 and "--model-path meituan/DeepSeek-R1-Channel-INT8" in int8.evaluation.command
    # SGLang's docs launch it with its own int8 kernels: --quantization w8a8_int8 overrides the compressed-tensors config
    assert "--quantization w8a8_int8" in int8.evaluation.command
    bf16 = next(o for o in result.options if o.artifact.repo == "unsloth/DeepSeek-R1-BF16")
    assert bf16.layout.cards >= 24 and "--model-path unsloth/DeepSeek-R1-BF16" in bf16.evaluation.command
    assert "--quantization" not in bf16.evaluation.command


def test_deepseek_r1_on_h200s_keeps_its_own_fp8_weights():
    result = _r1_plan("1x8xh200-141g")
    assert not result.widened and not any(r.rule == RULE for r in result.rejected)
    assert result.options[0].precision == "fp8 block 128×128" and result.options[0].artifact.repo is None
