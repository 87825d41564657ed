"""The launch command's shared parts: here the trust a model's own code needs (the other parts are
tests/engines/test_serve_reference.py's and the command sweep's)."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.engines.serve_command import remote_code_flags
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        # auto_map: configuration_kimi_k25.KimiK25Config; vLLM's Kimi-K2.5 recipe passes --trust-remote-code
        ("moonshotai__Kimi-K2.5", ["--trust-remote-code"]),
        # auto_map: configuration_nemotron_h.NemotronHConfig; so does vLLM's Nemotron-3-Nano recipe
        ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", ["--trust-remote-code"]),
        # no auto_map: transformers' own qwen3_moe
        ("Qwen__Qwen3-235B-A22B", []),
    ],
)
def test_a_config_naming_its_own_code_is_trusted(name, flags):
    assert remote_code_flags(shape_of(name)) == flags


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_kimi_k25_on_eight_h200_launches_with_trust_remote_code(engine):
    """The recipes' 8 × H200 command (``vllm serve moonshotai/Kimi-K2.5 -tp 8 … --trust-remote-code``, SGLang's
    ``--tp 8 --trust-remote-code``): without the flag transformers refuses the kimi_k25 config at start-up."""
    result = plan(shape_of("moonshotai__Kimi-K2.5"), parse_cluster("1x8xh200-141g"), PlanRequest(engines=(engine,)))
    best = result.options[0]
    assert (best.layout.cards, best.layout.tp) == (8, 8)
    assert " --trust-remote-code " in f"{best.evaluation.command} "


def test_a_model_without_its_own_code_launches_without_trust():
    result = plan(shape_of("Qwen__Qwen3-235B-A22B"), parse_cluster("1x8xh200-141g"), PlanRequest(engines=("vllm",)))
    assert result.options and not any("--trust-remote-code" in o.evaluation.command for o in result.options)
