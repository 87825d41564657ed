"""explorer.engines.setting: each request setting declared once; its checks, its text and its launch flags."""

from __future__ import annotations

import dataclasses

import pytest
from support.corpus import shape_of

from explorer.engines.all2all import ALL2ALL_BACKENDS
from explorer.engines.request import PlanRequest
from explorer.engines.setting import declared_settings, launch_flags, with_implied
from explorer.errors import PlanError
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster

SETTINGS = {s.field: s for s in declared_settings(PlanRequest)}


def test_every_field_but_the_calibrations_is_declared_once():
    fields = [f.name for f in dataclasses.fields(PlanRequest)]
    assert [s.field for s in declared_settings(PlanRequest)] == [f for f in fields if f != "calibrations"]
    keys = [s.key for s in SETTINGS.values()]
    options = [o for s in SETTINGS.values() for o in s.cli]
    assert len(keys) == len(set(keys)) and len(options) == len(set(options))  # one URL key, one option each


def test_the_issue_drift_cases_are_one_range():
    # -ngl -1 is llama.cpp's "every layer", which the planner honours (full offload only): accepted everywhere
    assert PlanRequest(n_gpu_layers=-1).n_gpu_layers == -1 and SETTINGS["n_gpu_layers"].parse("-1") == -1
    with pytest.raises(PlanError, match="n_gpu_layers is -2; it must be a whole number from -1 to 1,048,576"):
        PlanRequest(n_gpu_layers=-2)
    # --max-num-seqs and --tp: one range, the request's (2^20 sequences, 100,000 GPUs)
    assert PlanRequest(max_num_seqs=100_000, tensor_parallel_size=70_000).tensor_parallel_size == 70_000
    with pytest.raises(PlanError, match="max_num_seqs is 0; it must be a whole number from 1 to 1,048,576"):
        PlanRequest(max_num_seqs=0)
    with pytest.raises(PlanError, match="70,000 is out of range: it must be a whole number from 1 to 65,536"):
        dataclasses.replace(SETTINGS["max_num_seqs"], high=65_536).parse("70000")


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("context_tokens", 0, "a whole number from 1 to 1,073,741,824"),
        ("concurrency", True, "a whole number from 1 to 1,048,576"),  # a bool is not a count
        ("gpu_memory_utilization", float("nan"), "a finite number from 0.01 to 1"),
        ("hicache_ratio", 0.0, "a finite number from above 0 to 1,000"),
        ("swap_space_gib", float("inf"), "a finite number from 0 to 1,048,576"),
        ("flash_attn", "maybe", "one of auto, on, off"),
        ("kv_dtype", "fp4", "one of auto, bf16, fp16, fp32, fp8, q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl"),
        ("tensor_split", (0.0, 0.0), "not all 0"),
        ("tensor_split", (2e6, 1.0), "finite shares from 0 to 1,000,000"),
        ("engines", (), "it must name at least one engine"),
    ],
)
def test_the_request_refuses_what_its_declaration_refuses(field, value, why):
    with pytest.raises(PlanError, match=why.replace("(", r"\(")):
        PlanRequest(**{field: value})


def test_texts_read_as_the_cli_and_the_app_read_them():
    assert SETTINGS["tensor_split"].parse("3,1") == (3.0, 1.0)
    assert SETTINGS["speculative"].parse("eagle") == "EAGLE"  # a choice in any case, kept as declared
    assert SETTINGS["mmap"].parse("on") is False  # --no-mmap on
    assert SETTINGS["max_num_seqs"].parse("") is None and SETTINGS["batch_tokens"].parse("") == 2048
    with pytest.raises(PlanError, match="'1.5' is not a whole number"):
        SETTINGS["n_gpu_layers"].parse("1.5")
    with pytest.raises(PlanError, match="4,097 shares is out of range"):
        SETTINGS["tensor_split"].parse(",".join(["1"] * 4097))


def test_launch_flags_echo_what_the_user_set_and_what_the_engine_resolved():
    request = PlanRequest(swap_space_gib=8, max_num_seqs=64, enforce_eager=True, mmap=False, batch_tokens=1024)
    # --swap-space is vllm.py's to write, by the release's rule (printed once, only where the release takes it)
    assert launch_flags(request, "vllm") == ["--max-num-seqs 64", "--enforce-eager"]
    assert launch_flags(request, "sglang") == ["--disable-cuda-graph"]
    assert launch_flags(request, "llamacpp") == ["--load-mode none"]  # llama.cpp's own flag for --no-mmap
    assert launch_flags(PlanRequest(), "vllm") == []  # defaults are not written
    # what the engine resolved is written even at its default, in the declarations' order
    resolved = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
    assert launch_flags(PlanRequest(), "vllm", resolved=resolved) == [
        "--max-num-seqs 256",
        "--max-num-batched-tokens 8192",
    ]


#: a changed value for every setting an engine's command carries, and the text its command must then hold
# fmt: off
CHANGED: dict[str, tuple[object, dict[str, str]]] = {
    "context_tokens": (8192, {"vllm": "--max-model-len 8192", "sglang": "--context-length 8192", "llamacpp": "-c 8192"}),
    "concurrency": (2, {"llamacpp": "-np 2"}),
    "kv_dtype": ("fp8", {"vllm": "--kv-cache-dtype fp8", "sglang": "--kv-cache-dtype fp8_e4m3", "llamacpp": "-ctk q8_0"}),
    "gpu_memory_utilization": (0.8, {"vllm": "--gpu-memory-utilization 0.8"}),
    "max_num_seqs": (64, {"vllm": "--max-num-seqs 64"}),
    "max_num_batched_tokens": (4096, {"vllm": "--max-num-batched-tokens 4096"}),
    "mem_fraction_static": (0.8, {"sglang": "--mem-fraction-static 0.8"}),
    "dp_attention": (True, {"sglang": "--enable-dp-attention"}),
    "speculative": ("NGRAM", {"sglang": "--speculative-algorithm NGRAM"}),
    "enable_mixed_chunk": (True, {"sglang": "--enable-mixed-chunk"}),
    "chunked_prefill_size": (4096, {"sglang": "--chunked-prefill-size 4096"}),
    "cuda_graph_max_bs": (32, {"sglang": "--cuda-graph-max-bs 32"}),
    "enforce_eager": (True, {"vllm": "--enforce-eager", "sglang": "--disable-cuda-graph"}),
    "piecewise_cuda_graph": (True, {"sglang": "--enable-piecewise-cuda-graph"}),
    "piecewise_cuda_graph_max_tokens": (2048, {"sglang": "--piecewise-cuda-graph-max-tokens 2048"}),
    "language_only": (True, {"sglang": "--language-only"}),
    "hierarchical_cache": (True, {"sglang": "--enable-hierarchical-cache"}),
    "hicache_ratio": (3.0, {"sglang": "--hicache-ratio 3"}),
    "hicache_size_gb": (10.0, {"sglang": "--hicache-size 10"}),
    "swap_space_gib": (8.0, {"vllm": "--swap-space 8"}),
    "flash_attn": ("on", {"llamacpp": "-fa on"}),
    "n_gpu_layers": (-1, {"llamacpp": "-ngl 29"}),  # -1: every layer, written as llama.cpp resolves it (28 + output)
    "tensor_split": ((3.0, 1.0), {"llamacpp": "--tensor-split 3,1"}),
    "batch_tokens": (1024, {"llamacpp": "-b 1024"}),
    "ubatch_tokens": (256, {"llamacpp": "-ub 256"}),
    "mmap": (False, {"llamacpp": "--load-mode none"}),
    "tensor_parallel_size": (2, {"vllm": "--tensor-parallel-size 2", "sglang": "--tp-size 2"}),
    "pipeline_parallel_size": (2, {"vllm": "--pipeline-parallel-size 2", "sglang": "--pp-size 2"}),
    "data_parallel_size": (2, {"vllm": "--data-parallel-size 2", "sglang": "--dp-size 2"}),
    "expert_parallel_size": (2, {"sglang": "--ep-size 2"}),
    "all2all_backend": ("deepep_low_latency", {"vllm": "--all2all-backend deepep_low_latency",
                                               "sglang": "--moe-a2a-backend deepep --deepep-mode low_latency"}),
}
# fmt: on
#: where one engine takes another value than CHANGED's (llama.cpp's KV types are ggml's)
ENGINE_VALUE = {("kv_dtype", "llamacpp"): "q8_0"}
#: the model a setting needs other than Llama-3.2-3B: --ep-size splits a mixture of experts' experts
MODEL = {"expert_parallel_size": "Qwen__Qwen3-30B-A3B", "all2all_backend": "Qwen__Qwen3-30B-A3B"}
#: what else a setting needs to show in a command: the experts' all-to-all runs between expert-parallel ranks;
#: --swap-space is taken up to vLLM 0.17.1 (refused from 0.18)
ALSO = {
    ("all2all_backend", "sglang"): {"expert_parallel_size": 2},
    ("swap_space_gib", "vllm"): {"vllm_version": "0.17.1"},
}


def test_the_all2all_choices_are_the_backends_explorer_sizes():
    assert SETTINGS["all2all_backend"].choices == ALL2ALL_BACKENDS


def test_every_setting_a_command_carries_is_in_the_table():
    """Each setting with an engine flag is either in CHANGED for exactly its engines, or explorer's own
    planning input (``launch="none"``: the weights planned, the engines, no-cpu-offload, the host share, the
    vLLM release the budget follows)."""
    carried = {s.field: {e for e, flag in s.flags.items() if flag} for s in SETTINGS.values() if s.launch != "none"}
    assert {f: set(texts) for f, (_v, texts) in CHANGED.items()} == {f: e for f, e in carried.items() if e}
    assert {s.field for s in SETTINGS.values() if s.launch == "none"} == {
        "precision", "engines", "cpu_offload", "host_fraction", "vllm_version",
    }  # fmt: skip


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_every_setting_the_user_changed_is_in_its_engine_command(field):
    """Llama-3.2-3B (a MoE for --ep-size) on two H100s: the best option of each engine the setting belongs to carries its flag (the
    request read as the CLI and the app read it: ``--hicache-size`` turns the host pool on)."""
    value, texts = CHANGED[field]
    shape, cluster = shape_of(MODEL.get(field, "meta-llama__Llama-3.2-3B")), parse_cluster("1x2xh100-80g")
    for engine, text in texts.items():
        given = {field: ENGINE_VALUE.get((field, engine), value)} | ALSO.get((field, engine), {})
        request = PlanRequest(engines=(engine,), **with_implied(SETTINGS.values(), given))
        result = plan(shape, cluster, request, model_ref="m", speed=False, suggest=False)
        assert result.options, f"{field}={value!r}: {engine} has no option"
        command = result.options[0].evaluation.command
        assert f" {text}" in f"{command} ", command
