"""Launch commands load what the option plans: a published checkpoint, the model itself, or a visible placeholder.

Issue 13's bug: a what-if AWQ option printed ``vllm serve meta-llama/Meta-Llama-3.1-70B
--tensor-parallel-size 2``, which loads the bf16 weights (141 GB) and runs out of memory.
"""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.artifacts.checkpoints import GGUFFile, PublishedCheckpoint
from explorer.artifacts.offer import what_if_artifacts
from explorer.engines.request import PlanRequest
from explorer.model.quant_config import WHAT_IF_NAMES
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster

MODEL = "meta-llama/Meta-Llama-3.1-70B"
AWQ = PublishedCheckpoint(
    repo="hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
    base_model="meta-llama/Meta-Llama-3.1-70B-Instruct",
    format="awq",
    bits=4,
    stands_in=True,
)
GGUF = PublishedCheckpoint(
    repo="bartowski/Meta-Llama-3.1-70B-Instruct-GGUF",
    base_model="meta-llama/Meta-Llama-3.1-70B-Instruct",
    format="gguf",
    files=(GGUFFile(name="Meta-Llama-3.1-70B-Instruct-Q4_K_M.gguf", quant="Q4_K_M", size_bytes=42_520_398_400),),
    stands_in=True,
)


def _plan(names, checkpoints=(), cluster="1x2xl40s-48g"):
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    artifacts = what_if_artifacts(shape, names, checkpoints)
    return plan(shape, parse_cluster(cluster), PlanRequest(context_tokens=32768), artifacts=artifacts,
                model_ref=MODEL)  # fmt: skip


def test_the_awq_what_if_loads_the_published_awq_repo():
    result = _plan(("int4-awq", "Q4_K_M"), (AWQ, GGUF))
    commands = {o.engine: o.evaluation.command for o in result.options if o.layout.tp == 2 or o.engine == "llamacpp"}
    # 70B at int4 AWQ g128 is about 37 GiB: two L40S hold it at tp 2 with vLLM and SGLang
    assert commands["vllm"].startswith(f"vllm serve {AWQ.repo} --tensor-parallel-size 2")
    assert f"--model-path {AWQ.repo} " in commands["sglang"]
    assert "--quantization" not in commands["vllm"]  # the checkpoint's config says AWQ; a flag could contradict it
    # llama.cpp loads the published GGUF file, and refuses the AWQ safetensors with a reason
    assert commands["llamacpp"].startswith(f"llama-server --hf-repo {GGUF.repo} --hf-file {GGUF.files[0].name}")
    refused = [r for r in result.rejected if r.engine == "llamacpp" and r.rule == "format"]
    assert refused and "publishes int4 AWQ g128 safetensors" in refused[0].reason


@pytest.mark.parametrize("name", WHAT_IF_NAMES)
def test_no_command_loads_the_original_weights_for_a_what_if(name):
    """Without published checkpoints: the model itself only where the engine quantises it while loading
    (fp8, bitsandbytes on vLLM; fp8 on SGLang, both over bf16 weights), with the flag; else a placeholder."""
    options = [o for o in _plan((name,), cluster="1x8xh100-80g").options if o.artifact.what_if]
    assert options or name == "bf16"  # bf16 is the checkpoint's own precision: no what-if
    for o in options:
        command = o.evaluation.command
        loads_original = f" {MODEL} " in f"{command} " and f"<{MODEL}" not in command
        if loads_original:  # a cast (--dtype float16) or an online quantisation (--quantization fp8)
            assert "--quantization" in command or "--dtype" in command, command
            assert o.engine != "llamacpp"
        else:
            assert f"<{MODEL}" in command, command
