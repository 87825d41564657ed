"""Whether an engine has attention kernels for a model's attention on a card (sparse MLA: DeepSeek-V3.2, GLM-5)."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.attention_kernels import RULE, attention_refusal, sparse_mla
from explorer.engines.request import PlanRequest
from explorer.errors import ManualSelectionError, PlacementError
from explorer.fleet.footprints import demand_for
from explorer.fleet.terms import parse_model_term
from explorer.plan.pinning import check_pinned
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_catalogue


def test_sparse_mla_is_the_indexer_beside_an_mla_cache():
    assert sparse_mla(shape_of("zai-org__GLM-5"))
    assert sparse_mla(shape_of("deepseek-ai__DeepSeek-V3.2"))
    assert not sparse_mla(shape_of("deepseek-ai__DeepSeek-R1"))  # MLA, no indexer
    assert not sparse_mla(shape_of("meta-llama__Meta-Llama-3.1-8B"))


@pytest.mark.parametrize(
    ("gpu", "refused"),
    [
        ("a100-80g", True),  # SM80: no DeepGEMM indexer, no FlashMLA
        ("l40s-48g", True),  # SM89
        ("rtx5090-32g", True),  # SM120: DeepGEMM and FlashMLA build for SM90/SM100 only
        ("h100-80g", False),
        ("b200-180g", False),
    ],
)
def test_sglang_runs_sparse_mla_on_hopper_and_blackwell_only(gpu, refused):
    glm = shape_of("zai-org__GLM-5")
    reason = attention_refusal("sglang", glm, shipped_catalogue().get(gpu))
    assert (reason is not None) is refused
    if refused:
        assert reason.startswith("sglang has no sparse-MLA (DSA) attention kernels for ")


def test_vllm_and_llamacpp_run_sparse_mla_on_an_a100_and_dense_models_are_never_refused():
    cat = shipped_catalogue()
    glm, r1 = shape_of("zai-org__GLM-5"), shape_of("deepseek-ai__DeepSeek-R1")
    for gpu in ("a100-80g", "l40s-48g", "rtx5090-32g", "h100-80g"):  # TRITON_MLA_SPARSE (bf16 cache) or FlashMLA
        assert attention_refusal("vllm", glm, cat.get(gpu)) is None
    refused = attention_refusal("vllm", glm, cat.get("t4-16g"))  # its Triton kernels multiply bf16 tiles: SM80+
    assert refused is not None and refused.startswith("vllm has no sparse-MLA (DSA) attention kernels for turing")
    assert attention_refusal("llamacpp", glm, cat.get("a100-80g")) is None
    assert attention_refusal("sglang", r1, cat.get("a100-80g")) is None


def test_glm5_on_a100s_offers_no_sglang_layout_and_says_why():
    """GLM-5 at 131,072 tokens on 4 × 8 A100: SGLang (its pp28 bf16 row ranked second before) is refused once,
    before any layout; vLLM's options stay."""
    result = plan(
        shape_of("zai-org__GLM-5"),
        parse_cluster("4x8xa100-80g@ib0"),
        PlanRequest(context_tokens=131072, engines=("vllm", "sglang")),
        speed=False,
        suggest=False,
    )
    assert {o.layout.engine for o in result.options} == {"vllm"}
    (refusal,) = [r for r in result.rejected if r.rule == RULE]
    assert refusal.engine == "sglang" and "ampere cards (a100-80g)" in refusal.reason


def test_a_refusal_never_hints_at_the_engine_that_refused():
    """Pinned T4s with vLLM and an SGLang placement on an A100: each hint names what runs GLM-5 there (the
    pinned hint once said "use --engine vllm" to vLLM itself)."""
    glm = shape_of("zai-org__GLM-5")
    with pytest.raises(ManualSelectionError) as pinned:
        check_pinned(glm, parse_cluster("1x8xt4-16g"), [str(i) for i in range(8)], engine="vllm")
    assert "turing cards" in str(pinned.value)
    assert pinned.value.hint == "use --engine llamacpp, or Ampere or newer cards"
    a100 = shipped_catalogue().get("a100-80g")
    with pytest.raises(PlacementError) as placed:
        demand_for(glm, parse_model_term("glm:8k"), gpu=a100, engine="sglang")
    assert placed.value.hint.startswith("use --engine vllm (Ampere or newer) or --engine llamacpp")
    assert "--engine sglang" not in placed.value.hint
