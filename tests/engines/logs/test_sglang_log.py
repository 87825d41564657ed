"""SGLang's memory lines and settings across its releases, read from published logs."""

from __future__ import annotations

from explorer.engines.logs import read_engine_log
from explorer.engines.logs.check import unread_parts
from explorer.engines.logs.sglang_log import read_sglang
from explorer.units import GiB

#: sgl-project/sglang#2468 (December 2024, Mistral-7B): no "mem usage" after loading, the pool in tokens only
SGLANG_040 = """[2024-12-13 01:44:59 TP0] Load weight end. type=MistralForCausalLM, dtype=torch.bfloat16, avail mem=9.69 GB
[2024-12-13 01:44:59 TP0] Memory pool end. avail mem=2.44 GB
[2024-12-13 01:44:59 TP0] Capture cuda graph begin. This can take up to several minutes.
[2024-12-13 01:45:01 TP0] Capture cuda graph end. Time elapsed: 2.19 s
[2024-12-13 01:45:02 TP0] max_total_num_tokens=56524, max_prefill_tokens=16384, max_running_requests=2049, \
context_len=32768
[2024-12-13 01:45:02] INFO:     Application startup complete.
"""
#: sgl-project/sglang#18039 (MiMo-V2-Flash, tp 4): a sliding-window pool, K and V of different sizes
SWA = """[2026-01-31 13:50:39 TP2] Use sliding window memory pool. full_layer_tokens=375360, swa_layer_tokens=300288
[2026-01-31 13:50:39 TP1] KV Cache is allocated. #tokens: 300288, K size: 8.38 GB, V size: 5.59 GB
[2026-01-31 13:50:39 TP2] KV Cache is allocated. #tokens: 300288, K size: 8.38 GB, V size: 5.59 GB
"""
#: sgl-project/sglang#17392 (2026): expert and data parallel settings on the command line
EP_COMMAND = (
    "SGLANG_DEEPEP_BF16_DISPATCH=1 python3 -m sglang.launch_server --model $MODEL --trust-remote-code --tp-size 4 "
    "--ep-size 4 --dp-size 4 --base-gpu-id 4 --moe-runner-backend deep_gemm --enable-dp-lm-head --moe-dense-tp-size 1 "
    "--enable-dp-attention --moe-a2a-backend deepep --deepep-mode low_latency --mem-fraction-static 0.8\n"
)
#: sgl-project/sglang#7762 (2025): the older --enable-ep-moe switch
EP_MOE = (
    "SGL_ENABLE_JIT_DEEPGEMM=1 python3 -m sglang.launch_server --model-path ${MODEL_PATH} --context-length 8192 "
    "--tp 8 --trust-remote-code --host 0.0.0.0 --port 8000 --mem-fraction-static 0.8 --enable-ep-moe "
    "--cuda-graph-max-bs 256\n"
)


def test_sglang_040_pool_tokens_and_the_weights_it_does_not_print():
    log = read_engine_log(SGLANG_040)
    assert log.engine == "sglang" and log.refused is False
    assert log.observed["kv_cache_tokens"] == 56524 and "weights_bytes" not in log.observed
    (missing,) = unread_parts(log)
    assert missing.startswith("this log prints no weights line ('Load weight end. … mem usage=X GB')")


def test_a_sliding_window_pool_sums_k_and_v():
    o = read_engine_log(SWA).observed
    assert o["kv_cache_tokens"] == 300288 and o["kv_cache_bytes"] == round(8.38 * GiB) + round(5.59 * GiB)


def test_expert_and_data_parallel_settings():
    s = read_sglang(EP_COMMAND).settings
    assert s["tensor_parallel_size"] == 4 and s["expert_parallel_size"] == 4 and s["dp_size"] == 4
    assert s["enable_dp_attention"] is True and s["mem_fraction_static"] == 0.8
    old = read_sglang(EP_MOE).settings
    assert old["enable_ep_moe"] is True and old["tensor_parallel_size"] == 8 and old["context_length"] == 8192
