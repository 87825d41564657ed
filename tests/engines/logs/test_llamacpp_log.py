"""llama.cpp's buffer lines across builds, read from published logs."""

from __future__ import annotations

from explorer.engines.logs import read_engine_log
from explorer.units import MiB

#: ggml-org/llama.cpp#6122 (March 2024, RTX 4070 Ti + RTX 3090 Ti): weights as "llm_load_tensors: CUDA0 buffer size"
BUILD_2024 = """  Device 0: NVIDIA GeForce RTX 4070 Ti, compute capability 8.9, VMM: yes
  Device 1: NVIDIA GeForce RTX 3090 Ti, compute capability 8.6, VMM: yes
llm_load_tensors: ggml ctx size =    0.37 MiB
llm_load_tensors: offloading 40 repeating layers to GPU
llm_load_tensors: offloading non-repeating layers to GPU
llm_load_tensors: offloaded 41/41 layers to GPU
llm_load_tensors:        CPU buffer size =  1640.62 MiB
llm_load_tensors:      CUDA0 buffer size =  5434.38 MiB
llm_load_tensors:      CUDA1 buffer size = 13989.53 MiB
.......................................................................................
llama_new_context_with_model: n_ctx      = 4096
llama_new_context_with_model: n_batch    = 2048
llama_new_context_with_model: n_ubatch   = 512
llama_new_context_with_model: freq_base  = 8000000.0
llama_new_context_with_model: freq_scale = 1
llama_kv_cache_init:      CUDA0 KV buffer size =  1536.00 MiB
llama_kv_cache_init:      CUDA1 KV buffer size =  3584.00 MiB
llama_new_context_with_model: KV self size  = 5120.00 MiB, K (f16): 2560.00 MiB, V (f16): 2560.00 MiB
llama_new_context_with_model:  CUDA_Host  output buffer size =     1.95 MiB
llama_new_context_with_model: pipeline parallelism enabled (n_copies=4)
llama_new_context_with_model:      CUDA0 compute buffer size =   672.01 MiB
"""
#: ggml-org/llama.cpp#9390 (early 2025, 8 GPUs, DeepSeek): llama_init_from_model and a q4_0 K cache
BUILD_2025 = """load_tensors:        CUDA6 model buffer size = 25338.47 MiB
load_tensors:        CUDA7 model buffer size = 19728.83 MiB
llama_init_from_model: n_seq_max     = 8
llama_init_from_model: n_ctx         = 16384
llama_init_from_model: n_ctx_per_seq = 2048
llama_init_from_model: n_batch       = 256
llama_init_from_model: n_ubatch      = 256
llama_init_from_model: flash_attn    = 0
llama_kv_cache_init: kv_size = 16384, offload = 1, type_k = 'q4_0', type_v = 'f16', n_layer = 61, can_shift = 0
llama_kv_cache_init:      CUDA0 KV buffer size =  5824.00 MiB
llama_kv_cache_init:      CUDA1 KV buffer size =  5824.00 MiB
"""


def test_a_2024_build_weights_kv_compute_and_settings():
    log = read_engine_log(BUILD_2024)
    o = log.observed
    # the output buffer (1.95 MiB on CUDA_Host) is no model buffer; CPU's 1640.62 MiB stays on the host
    assert o["weights_bytes"] == round(5434.38 * MiB) + round(13989.53 * MiB)
    assert o["host_weights_bytes"] == round(1640.62 * MiB)
    assert o["kv_cache_bytes"] == (1536 + 3584) * MiB and o["compute_bytes"] == round(672.01 * MiB)
    assert log.cards == 2 and log.settings["n_ctx"] == 4096 and log.settings["n_ubatch"] == 512
    assert log.settings["type_k"] == "f16" and log.settings["n_gpu_layers"] == 41


def test_an_early_2025_build_context_settings_and_kv_types():
    log = read_engine_log(BUILD_2025)
    s = log.settings
    assert s["n_ctx"] == 16384 and s["n_seq_max"] == 8 and s["n_batch"] == 256 and s["flash_attn"] == "0"
    assert s["type_k"] == "q4_0" and s["type_v"] == "f16"
    assert log.observed["kv_cache_bytes"] == 2 * 5824 * MiB


#: jonsjoberg/llm_cheating_sentiment llama_server.log (b7960, Apple M3 Pro): Metal named MTL0 since late 2025
METAL_MTL0 = """build: 7960 (db6adb3c8) with AppleClang 17.0.0.17000603 for Darwin arm64
llama_model_load_from_file_impl: using device MTL0 (Apple M3 Pro) (unknown id) - 28753 MiB free
print_info: file type   = Q4_K - Medium
load_tensors: offloaded 41/41 layers to GPU
load_tensors:   CPU_Mapped model buffer size =   525.00 MiB
load_tensors:  MTL0_Mapped model buffer size = 13672.05 MiB
llama_context:        CPU  output buffer size =     2.00 MiB
llama_kv_cache:       MTL0 KV buffer size = 14200.00 MiB
sched_reserve:       MTL0 compute buffer size =   348.26 MiB
sched_reserve:        CPU compute buffer size =   197.51 MiB
"""


def test_metal_named_mtl0_is_the_gpu():
    # before: MTL0's buffers counted as the host's (0 GiB of weights on the GPU)
    log = read_engine_log(METAL_MTL0)
    o = log.observed
    assert o["weights_bytes"] == round(13672.05 * MiB) and o["host_weights_bytes"] == 525 * MiB
    assert o["kv_cache_bytes"] == 14200 * MiB and o["compute_bytes"] == round(348.26 * MiB)
    assert log.card == "Apple M3 Pro" and o["free_at_start_bytes"] == 28753 * MiB and log.cards == 1
