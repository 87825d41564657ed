"""The setup a log ran, as explorer plans it: the data- and expert-parallel sizes a log prints."""

from __future__ import annotations

from support.engine_logs import shape_for

from explorer.engines.logs import EngineLog
from explorer.engines.logs.check import check_log
from explorer.engines.logs.setup import log_setup
from explorer.engines.logs.sglang_log import read_sglang
from explorer.sources.shipped import shipped_catalogue

MOE = "Qwen__Qwen3-30B-A3B"  # 48 layers of 128 experts
DENSE = "Qwen__Qwen3-8B"


def _vllm(**settings) -> EngineLog:
    return EngineLog(engine="vllm", settings={"tensor_parallel_size": 2, "max_model_len": 8192, **settings})


def test_vllm_expert_parallel_spans_tp_times_dp():
    h100 = shipped_catalogue().resolve("h100-80g")
    setup = log_setup(_vllm(data_parallel_size=4, enable_expert_parallel=True), shape_for(MOE), h100)
    assert (setup.tp, setup.dp, setup.ep) == (2, 4, 8)
    plain = log_setup(_vllm(data_parallel_size=4), shape_for(MOE), h100)
    assert (plain.dp, plain.ep) == (4, 1)  # replicas side by side, experts split by tp
    dense = log_setup(_vllm(data_parallel_size=4, enable_expert_parallel=True), shape_for(DENSE), h100)
    assert dense.ep == 1  # no experts to spread


def test_sglang_ep_size_and_the_older_switch():
    h100 = shipped_catalogue().resolve("h100-80g")
    ep = EngineLog(engine="sglang", settings={"tensor_parallel_size": 4, "expert_parallel_size": 4})
    assert log_setup(ep, shape_for(MOE), h100).ep == 4
    switch = EngineLog(engine="sglang", settings={"tensor_parallel_size": 8, "enable_ep_moe": True})
    assert log_setup(switch, shape_for(MOE), h100).ep == 8
    # sgl-project/sglang#4232: "--tp 8 --dp 8 --enable-dp-attention --enable-deepep-moe"; DeepEP makes ep = tp
    deepep = read_sglang(
        "python3 -m sglang.launch_server --model-path /data00/models/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention "
        "--enable-deepep-moe --trust-remote-code  --port 8010 --context-length 8192 --mem-fraction-static 0.8 "
        "--disable-cuda-graph\n"
    )
    assert deepep.settings["enable_deepep_moe"] is True and deepep.settings["dp_size"] == 8
    assert log_setup(deepep, shape_for(MOE), h100).ep == 8


def test_expert_parallel_weights_are_the_ranks_share():
    # tp 2 × dp 4 with EP: each rank holds 1/8 of the experts and 1/2 of attention; tp 2 alone holds 1/2 of both
    shape, catalogue = shape_for(MOE), shipped_catalogue()
    ep = check_log(_vllm(data_parallel_size=4, enable_expert_parallel=True), shape, catalogue, card="h100-80g")
    tp = check_log(_vllm(), shape, catalogue, card="h100-80g")
    # experts are ~95 % of the 30.5 B parameters: the EP rank keeps ~1/8 of them, well under half of tp 2's share
    assert ep.predicted["weights_bytes"] < 0.5 * tp.predicted["weights_bytes"]
    assert ep.predicted["kv_needed_bytes"] == tp.predicted["kv_needed_bytes"]  # KV is split by tp in both
