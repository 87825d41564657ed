"""vLLM's memory lines across its releases, read from published logs (the excerpts of issue 26)."""

from __future__ import annotations

from explorer.engines.logs import read_engine_log
from explorer.engines.logs.vllm_log import read_vllm
from explorer.units import GiB

#: vllm-project/vllm#10517 (V0 0.6.4, RTX 3090, Llama-3.1-8B at 29,000 tokens): the profiling line and V0's refusal
V0_064 = """Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB \
memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90
# GPU blocks: 1478, # CPU blocks: 2048
Maximum concurrency for 29000 tokens per request: 0.82x
The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). \
Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""
#: vllm-project/vllm#14447 (V0 0.8.x, 8 × RTX 3090 at 0.99, a wna16 MoE): the 0.6.5–0.8 summary, every rank
V0_SUMMARY = """(VllmWorkerProcess pid=521) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; \
non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory reserved for KV \
Cache is 1.57GiB.
(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] Memory profiling takes 17.59 seconds
(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can use total_gpu_memory \
(23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB
(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; non_torch_memory takes \
0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory reserved for KV Cache is 1.57GiB.
"""
#: vllm-project/vllm#13109 (V0 0.7.2, DeepSeek-Coder-V2-Lite AWQ, MLA): "# CUDA blocks"
V0_CUDA_BLOCKS = """INFO 02-12 19:01:41 worker.py:267] model weights take 10.45GiB; non_torch_memory takes 0.16GiB; \
PyTorch activation peak memory takes 0.94GiB; the rest of the memory reserved for KV Cache is 59.75GiB.
INFO 02-12 19:01:41 executor_base.py:110] # CUDA blocks: 116023, # CPU blocks: 7767
"""
#: vllm-project/vllm#25350 (V1, kv fp8, max_model_len 221,000): the refusal's KV figures and the estimate
V1_REFUSAL = (
    "ValueError: To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is "
    "needed, which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the "
    "estimated maximum model length is 122080. Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine.\n"
)
#: vllm-project/vllm#16118 (V1 0.8, 1M tokens): the refusal before the estimate was added
V1_REFUSAL_08 = (
    "ERROR 04-05 01:12:55 [core.py:390] ValueError: To serve at least one request with the models's max seq len "
    "(1048576), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.97 GiB). Try "
    "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
)
#: vllm-project/vllm#51454 (0.25.0, 8 × B200): data and expert parallel settings in non-default args holding an
#: object (AttentionConfig) that is no Python literal, the paste cut inside it
DP_EP = (
    "INFO 08-07 21:32:22 [api_utils.py:273] non-default args: {'model_tag': '/root/.cache/huggingface/hub/models--"
    "deepseek-ai--DeepSeek-V4-Flash-0731/snapshots/7872f01b1d1fe23eabc4c98b48bffcef5a386062', 'api_server_count': "
    "8, 'enable_auto_tool_choice': True, 'tool_call_parser': 'deepseek_v4', 'model': '/root/.cache/huggingface/hub/"
    "models--deepseek-ai--DeepSeek-V4-Flash-0731/snapshots/7872f01b1d1fe23eabc4c98b48bffcef5a386062', "
    "'tokenizer_mode': 'deepseek_v4', 'trust_remote_code': True, 'served_model_name': ['deepseek-v4-flash-0731'], "
    "'reasoning_parser': 'deepseek_v4', 'data_parallel_size': 8, 'enable_expert_parallel': True, 'block_size': 256, "
    "'gpu_memory_utilization': 0.95, 'kv_cache_dtype': 'fp8', 'max_num_batched_tokens': 8192, 'max_num_seqs': 256, "
    "'moe_backend': 'deep_gemm_mega_moe', 'attention_config': AttentionConfig(backend=None, flash_attn_version=None, "
    "use_prefill_decode\n"
)
#: llm-d-planner's vLLM 0.19.0 sweep (codellama-7b, H100): "Estimated CUDA graph memory"
GRAPHS = (
    "INFO 04-22 15:13:20 [v1/worker/gpu_model_runner.py:5955] Estimated CUDA graph memory: 0.84 GiB total\n"
    "INFO 04-22 15:13:20 [v1/worker/gpu_worker.py:436] Available KV cache memory: 61.66 GiB\n"
)


def test_v0_064_profiling_line_and_its_refusal():
    log = read_engine_log(V0_064)
    o = log.observed
    # peak_torch_memory 17.98 − weights 14.9888: 2.99 GiB of activation at 29,000 tokens
    assert o["weights_bytes"] == round(14.9888 * GiB) and o["kv_cache_bytes"] == round(2.89 * GiB)
    assert o["activation_bytes"] == round(17.98 * GiB) - round(14.9888 * GiB)
    assert o["kv_cache_tokens"] == 1478 * 16 == 23648  # the blocks and the refusal agree
    assert log.settings["max_model_len"] == 29000 and log.refused is True


def test_v0_summary_of_065_to_08():
    log = read_engine_log(V0_SUMMARY)
    o = log.observed
    assert o["torch_total_bytes"] == round(23.58 * GiB) and o["requested_bytes"] == round(23.35 * GiB)
    assert o["weights_bytes"] == round(21.21 * GiB) and o["non_torch_bytes"] == round(0.20 * GiB)
    assert o["activation_bytes"] == round(0.37 * GiB) and o["kv_cache_bytes"] == round(1.57 * GiB)
    assert log.settings["gpu_memory_utilization"] == 0.99


def test_v0_cuda_blocks():
    o = read_engine_log(V0_CUDA_BLOCKS).observed
    assert o["kv_cache_tokens"] == 116023 * 16 and o["kv_cache_bytes"] == round(59.75 * GiB)


def test_v1_refusal_gives_the_kv_room_the_need_and_the_estimate():
    log = read_engine_log(V1_REFUSAL)
    o = log.observed
    assert o["kv_cache_bytes"] == round(5.59 * GiB) and o["kv_needed_bytes"] == round(10.12 * GiB)
    assert o["fitting_context_tokens"] == 122080 and log.settings["max_model_len"] == 221000
    assert log.refused is True and "KV cache is needed" in log.refusal
    old = read_engine_log(V1_REFUSAL_08)
    assert old.observed["kv_cache_bytes"] == round(9.97 * GiB) and "fitting_context_tokens" not in old.observed
    assert old.settings["max_model_len"] == 1048576


def test_data_and_expert_parallel_settings_from_args_python_cannot_read_back():
    log = read_vllm(DP_EP)
    s = log.settings
    assert s["data_parallel_size"] == 8 and s["enable_expert_parallel"] is True
    assert s["kv_cache_dtype"] == "fp8" and s["gpu_memory_utilization"] == 0.95 and s["max_num_seqs"] == 256
    assert log.model.endswith("7872f01b1d1fe23eabc4c98b48bffcef5a386062")


def test_estimated_cuda_graph_memory():
    assert read_engine_log(GRAPHS).observed["cuda_graph_estimate_bytes"] == round(0.84 * GiB)


#: WaroonRagwongsiri/SuperAi-SS6-Level2-Hack4 llm.log (0.22.0): the server up, then out of memory at a wake-up an hour later
LATER_FAILURE = """(EngineCore pid=48200) INFO 06-02 13:32:30 [model_runner.py:295] Model loading took 15.27 GiB and 12.006092 seconds
(EngineCore pid=48200) INFO 06-02 13:32:35 [gpu_worker.py:466] Available KV cache memory: 37.81 GiB
(EngineCore pid=48200) INFO 06-02 13:32:36 [model_runner.py:661] Graph capturing finished in 1 secs, took 0.06 GiB
(APIServer pid=47967) INFO:     Application startup complete.
CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:139
(EngineCore pid=48200) ERROR 06-02 14:31:01 [core.py:1365] RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:139
"""


def test_an_error_after_the_server_is_up_is_no_refusal_to_start():
    log = read_engine_log(LATER_FAILURE)
    assert log.refused is False and log.refusal == ""
    before = read_engine_log(
        LATER_FAILURE.replace("(APIServer pid=47967) INFO:     Application startup complete.\n", "")
    )
    assert before.refused is True and "CUDA Error: out of memory" in before.refusal


def test_v0_figures_printed_by_a_worker_process_are_a_non_driver_ranks():
    # vllm-project/vllm#13061 (V0, tp 2): the weights line comes from a worker process, rank 1, which runs no sampler
    worker = (
        "(VllmWorkerProcess pid=1786) INFO 02-11 07:40:45 model_runner.py:1115] Loading model weights took 13.9476 GB\n"
    )
    driver = "INFO 02-11 07:40:45 model_runner.py:1115] Loading model weights took 13.9476 GB\n"
    assert read_vllm(worker).driver_rank is False
    assert read_vllm(driver + worker).driver_rank is True  # the driver's own line is there too
    assert read_vllm(GRAPHS).driver_rank is None  # V1 prints no per-rank V0 lines
