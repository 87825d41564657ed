"""Reading engines' start-up logs: every corpus excerpt explorer reads gives the figures printed in it."""

from __future__ import annotations

import pytest
from support.engine_logs import entry, names, parsed

from explorer.engines.logs import read_engine_log
from explorer.errors import EngineLogError
from explorer.units import GiB, MiB

#: corpus figures (GiB as printed) → the reader's keys
GIB_KEYS = {
    "model_loading_gib": "weights_bytes",
    "available_kv_cache_gib": "kv_cache_bytes",
    "activation_peak_gib": "activation_bytes",
    "non_torch_increase_gib": "non_torch_bytes",
    "cuda_graph_gib": "cuda_graph_bytes",
    "torch_total_gib": "torch_total_bytes",
    "free_at_start_gib": "free_at_start_bytes",
    "weights_gib": "weights_bytes",
}
READ = [n for n in names() if parsed(n) is not None]


def test_most_excerpts_are_read_and_the_engine_is_told():
    assert len(READ) >= 85
    for n in READ:
        assert parsed(n).engine == entry(n)["engine"], n


@pytest.mark.parametrize("name", READ)
def test_the_reader_finds_the_printed_figures(name):
    e, log = entry(name), parsed(name)
    for k, key in GIB_KEYS.items():
        value = e["observed"].get(k)
        if not isinstance(value, (int, float)) or key not in log.observed:
            continue
        if key == "free_at_start_bytes":  # the reader keeps the least free rank (the one that refuses)
            assert log.observed[key] <= value * GiB + 0.006 * GiB
        else:
            assert abs(log.observed[key] - value * GiB) <= 0.006 * GiB, (key, log.observed[key] / GiB, value)
    for k in ("kv_cache_tokens", "kv_tokens"):
        if isinstance(e["observed"].get(k), int) and "kv_cache_tokens" in log.observed:
            assert log.observed["kv_cache_tokens"] == e["observed"][k]
    if e["observed"].get("refused") is not None and log.refused is not None:
        assert log.refused == e["observed"]["refused"]


def test_vllm_019_debug_log():
    log = parsed("vllm__llama-3.1-8b__H100__4")
    assert log.engine == "vllm" and log.version == "0.19.0" and log.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert log.settings["gpu_memory_utilization"] == 0.95 and log.settings["max_num_batched_tokens"] == 8192
    o = log.observed
    # worker init memory snapshot: free_memory=78.68GiB, total_memory=79.19GiB; Model loading took 14.99 GiB
    assert o["torch_total_bytes"] == round(79.19 * GiB) and o["free_at_start_bytes"] == round(78.68 * GiB)
    assert o["weights_bytes"] == round(14.99 * GiB) and o["kv_cache_tokens"] == 476_016
    assert log.refused is False and log.cards == 1


def test_vllm_v0_profiling_line_and_the_driver_rank():
    log = parsed("vllm__llama-3.1-8b__L40S__1")
    # the driver rank peaked at 8.70 GiB with 7.5122 GiB of weights: 1.19 GiB of activation; KV is the least rank's
    assert log.version == "0.6.4.post1" and log.settings["max_num_batched_tokens"] == 512
    assert log.observed["activation_bytes"] == round(8.70 * GiB) - round(7.5122 * GiB)
    assert log.observed["kv_cache_bytes"] == round(30.55 * GiB)
    assert log.observed["kv_cache_tokens"] == 31284 * 16  # '# GPU blocks: 31284' of 16 tokens


def test_vllm_refusals_are_seen():
    short = parsed("vllm__codellama-34b__H100__1")  # cuda:1 had 60.87 GiB free of the 75.23 GiB asked for
    assert short.refused is True and short.observed["free_at_start_bytes"] == round(60.87 * GiB)
    oom = parsed("vllm__gpt-oss-20b__H100__1")
    assert oom.refused is True and "CUDA out of memory" in oom.refusal


def test_sglang_server_args_and_command_line():
    log = parsed("sglang__llama-3.2-3b__48GB__1")
    assert log.engine == "sglang" and log.model == "meta-llama/Llama-3.2-3B"
    assert log.settings["context_length"] == 35000  # the excerpt's ServerArgs line is cut after it
    # K 1.34 + V 1.34 GB (GiB, as SGLang divides by 2^30)
    assert log.observed["kv_cache_bytes"] == 2 * round(1.34 * GiB) and log.observed["kv_cache_tokens"] == 25169
    assert log.observed["free_at_start_bytes"] == round(44.11 * GiB)
    cli = parsed("sglang__qwen3-235b-a22b-fp8__H100__1")
    assert cli.model == "/path/to/Qwen3-235B-A22B-FP8" and cli.cards == 4
    assert cli.settings["mem_fraction_static"] == 0.93


def test_llamacpp_buffers_by_device():
    log = parsed("llamacpp__qwen2.5-14b__RTX3090__1")
    assert log.engine == "llamacpp" and log.version == "b7896 (ec6c7421e)" and log.card == "NVIDIA GeForce RTX 3090"
    o = log.observed
    assert o["weights_bytes"] == round(8148.38 * MiB) and o["host_weights_bytes"] == round(417.66 * MiB)
    assert o["kv_cache_bytes"] == 6144 * MiB and o["compute_bytes"] == 307 * MiB
    assert log.settings["file_type"] == "Q4_K - Medium" and log.settings["n_seq_max"] == 4
    two = parsed("llamacpp__qwen3.5-35b-a3b__A6000__1")
    assert two.cards == 2 and two.observed["weights_bytes"] == round(17931.70 * MiB) + round(16736.08 * MiB)


def test_a_log_without_start_up_lines_says_what_was_expected():
    with pytest.raises(EngineLogError, match="no vLLM, SGLang or llama.cpp start-up lines") as e:
        read_engine_log("Traceback (most recent call last):\n  nothing useful here\n")
    assert "Model loading took" in str(e.value) and "KV Cache is allocated" in str(e.value)
    assert "model buffer size" in str(e.value)
    with pytest.raises(EngineLogError, match="empty"):
        read_engine_log("   \n")
    with pytest.raises(EngineLogError, match="has no memory figure"):
        read_engine_log("INFO Load weight begin. avail mem=nothing\n")


def test_colour_codes_are_ignored():
    text = "\x1b[32mINFO\x1b[0m 01-01 00:00:00 [gpu_model_runner.py:1] Model loading took 14.99 GiB and 3 s\n"
    assert read_engine_log(text).observed["weights_bytes"] == round(14.99 * GiB)
