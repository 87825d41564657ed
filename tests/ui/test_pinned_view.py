"""The app's "Pin GPUs" answers with the engine chosen (issue 24: llama.cpp answered with vLLM)."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.artifacts.offer import original_artifact, what_if_artifact
from explorer.engines.request import PlanRequest
from explorer.sources.shipped import parse_cluster
from explorer.ui.pinned_view import pin_engine, pinned_answer, pinned_launch

LLAMA_8B = "meta-llama__Meta-Llama-3.1-8B"


def test_the_engine_menu_decides_and_all_engines_follow_the_weights():
    shape = shape_of(LLAMA_8B)
    gguf, original = what_if_artifact(shape, "Q4_K_M"), original_artifact(shape)
    assert pin_engine(("llamacpp",), [original]) == "llamacpp"
    assert pin_engine(("vllm", "sglang", "llamacpp"), [gguf, original]) == "llamacpp"
    assert pin_engine(("vllm", "sglang", "llamacpp"), [original]) == "vllm"
    assert pin_engine(("vllm", "sglang"), [gguf]) == "vllm"  # the menu holds no engine for it: its first says why


def test_pinning_with_llamacpp_answers_with_llama_server_on_the_pinned_card():
    """Engine llama.cpp, a Q4_K_M GGUF, card 1 of two L40S: ``llama-server`` on device 1, not ``vllm serve``."""
    shape = shape_of(LLAMA_8B)
    result = pinned_answer(
        shape,
        parse_cluster("1x2xl40s-48g"),
        "1",
        engines=("llamacpp",),
        request=PlanRequest(),
        artifacts=[what_if_artifact(shape, "Q4_K_M")],
        model_ref="meta-llama/Meta-Llama-3.1-8B",
    )
    assert result.option.engine == "llamacpp"
    (line,) = pinned_launch(result)
    assert line.startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=1 llama-server ") and line.endswith(" --port 8000")
