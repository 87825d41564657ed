"""explorer.engines.all2all: DeepEP's buffers a rank, as vLLM and SGLang ask for them, charged in the plan."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines import sglang
from explorer.engines.all2all import (
    ALL2ALL_BACKENDS,
    VLLM_BACKENDS,
    backend_refusals,
    low_latency_rdma_bytes,
    normal_buffer_bytes,
    sglang_buffer_bytes,
    vllm_buffer_bytes,
)
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.units import GiB

V3 = "deepseek-ai__DeepSeek-V3"
#: DeepSeek-V3's low-latency buffer at SGLang's 128 tokens (hidden 7,168, 256 experts; worked in the docstring of
#: low_latency_rdma_bytes): 4 × 256 × 128 × 14,560 + 2 × 1,024 = 1,908,410,368, rounded up past 128
V3_LL_128 = 1_908_410_496
#: at vLLM's 256 tokens: 4 × 256 × 256 × 14,560 + 2,048 = 3,816,818,688, rounded up past 128
V3_LL_256 = 3_816_818_816


def _plan(engine: str, **req):
    return plan(shape_of(V3), parse_cluster("1x8xh200-141g"), PlanRequest(engines=(engine,), **req), speed=False)


def test_low_latency_buffer_by_hand():
    assert low_latency_rdma_bytes(128, 7168, 256) == V3_LL_128
    assert low_latency_rdma_bytes(256, 7168, 256) == V3_LL_256
    # a small hidden size: the dispatch message is 16 + max(2 × 2,048, 2,048 + 4 × 16) = 4,112 bytes, the combine
    # 64 + 4,096 = 4,160; 128 experts × 128 tokens × 4,160 = 68,157,440, × 4, + 2 × 512 of signals = 272,630,784
    assert low_latency_rdma_bytes(128, 2048, 128) == 272_630_784 + 128


def test_backends_per_rank():
    assert vllm_buffer_bytes(None, 7168, 256, 1) == 0
    assert vllm_buffer_bytes("allgather_reducescatter", 7168, 256, 1) == 0
    # high throughput: 1,024 MiB of NVLink buffer in a node; across nodes as much RDMA buffer again
    assert vllm_buffer_bytes("deepep_high_throughput", 7168, 256, 1) == GiB
    assert vllm_buffer_bytes("deepep_high_throughput", 7168, 256, 2) == 2 * GiB
    assert vllm_buffer_bytes("deepep_low_latency", 7168, 256, 1) == GiB + V3_LL_256
    assert sglang_buffer_bytes("deepep_low_latency", 7168, 256, 8) == V3_LL_128
    assert sglang_buffer_bytes("deepep_high_throughput", 7168, 256, 8) == 335_709_824
    # SGLang's default mode holds both: the normal NVLink buffer and the larger RDMA one (here the low-latency)
    assert sglang_buffer_bytes("deepep_auto", 7168, 256, 8) == 335_709_824 + V3_LL_128 == 2_244_120_320
    assert sglang_buffer_bytes(None, 7168, 256, 8) == 0


def test_high_throughput_buffers_by_hand():
    """DeepEP's config hints at a bf16 hidden state of DeepSeek-V3 (14,336 bytes); a token's slot carries it, 8 bytes
    of source meta, 128 top-k indices (8 bytes) and weights (4) and 128 scales (4): 16,392 bytes."""
    # 8 ranks, one node: 10 channels × 8 peers × (5 counters × 4 + 256 tokens × 16,392) = 335,709,760 → 335,709,824
    assert normal_buffer_bytes(14_336, 8) == 335_709_824
    # 16 ranks over two nodes: NVLink 10 × 8 × (7 × 4 + 288 × 16,392) = 377,673,920 → 377,673,984; RDMA with the
    # 128 receive tokens aligned up to the send chunk (20, and 28 for the combine): 140, each slot 16 bytes more,
    # 10 × 2 × (18 × 2 × 4 + 140 × 16,408 × 2) + 1 MiB = 92,936,256 → 92,936,320
    assert normal_buffer_bytes(14_336, 16) == 377_673_984 + 92_936_320
    assert normal_buffer_bytes(14_336, 6) is None  # no recommended config for 6 ranks


def test_vllm_dp8_ep_low_latency_charges_each_rank_and_says_so_in_the_command():
    """DeepSeek-V3 DP8 + EP on 8 × H200 (tests/engines/test_expert_parallel.py works the rest): the default backend
    leaves 28,602,031,162 bytes a rank for 99 sequences of 287,834,112; DeepEP low latency takes 1 GiB +
    3,816,818,816 of them: 23,711,470,522 left, 82 sequences a rank, 656 over the 8."""
    plain = _plan("vllm", data_parallel_size=8).options[0]
    deepep = _plan("vllm", data_parallel_size=8, all2all_backend="deepep_low_latency").options[0]
    assert deepep.per_card.overhead - plain.per_card.overhead == GiB + V3_LL_256
    assert (plain.evaluation.max_concurrency, deepep.evaluation.max_concurrency) == (8 * 99, 8 * 82)
    assert " --enable-expert-parallel --all2all-backend deepep_low_latency " in deepep.evaluation.command
    assert "deepep_low_latency: 4.55 GiB of DeepEP buffers a rank" in deepep.evaluation.notes[-1]
    high = _plan("vllm", data_parallel_size=8, all2all_backend="deepep_high_throughput").options[0]
    assert high.per_card.overhead - plain.per_card.overhead == GiB
    assert high.evaluation.max_concurrency == 8 * 95  # (28,602,031,162 − 1,073,741,824) // 287,834,112 = 95


def test_vllm_runs_the_backend_between_dp_ranks_only():
    """vLLM's FusedMoEParallelConfig.use_all2all_kernels is ``dp_size > 1 and use_ep``: tp 8 with
    --enable-expert-parallel all-reduces, makes no DeepEP buffer and ignores --all2all-backend. Asked for the
    backend without --dp, vLLM's only way that runs it is DP8 + EP (each rank charged 1 GiB + 3,816,818,816 as
    above); tp 8 × ep 8 and tp 2 × pp 3 are refused with the reason, not charged 4.55 GiB for a buffer vLLM
    never makes (they were: 136 sequences for tp 8 instead of its 153)."""
    plain = _plan("vllm")
    result = _plan("vllm", all2all_backend="deepep_low_latency")
    assert [o.layout.parallel for o in plain.options] == ["tp8 ep8", "dp8 ep8", "tp2 pp3 ep2"]
    assert [o.layout.parallel for o in result.options] == ["dp8 ep8"]
    (deepep,) = result.options
    assert deepep.per_card.overhead - plain.options[1].per_card.overhead == GiB + V3_LL_256
    refused = [x for x in result.rejected if x.rule == "all2all-backend" and x.option is None]
    reasons = {x.reason for x in refused}
    assert (
        "vLLM runs deepep_low_latency between data-parallel ranks only (dp > 1 with --enable-expert-parallel); "
        "tp8 ep8 moves the experts' tokens by all-reduce and ignores it"
    ) in reasons


def test_sglang_dp_attention_with_deepep_is_the_published_layout():
    """SGLang's DeepSeek-V3 `--tp 8 --dp 8 --enable-dp-attention --moe-a2a-backend deepep`: DeepEP sets ep = tp; the
    1.78 GiB buffer comes out of what --mem-fraction-static leaves (here 24.0 GiB), so the pool is unchanged."""
    plain = _plan("sglang", dp_attention=True, expert_parallel_size=8).options[0]
    deepep = _plan("sglang", dp_attention=True, all2all_backend="deepep_low_latency").options[0]
    assert deepep.layout.parallel == plain.layout.parallel == "tp8 dp8 ep8"
    assert deepep.per_card.kv_cache == plain.per_card.kv_cache
    assert deepep.per_card.overhead >= V3_LL_128
    assert (
        "--tp-size 8 --ep-size 8 --moe-a2a-backend deepep --deepep-mode low_latency --context-length 4096 "
        in deepep.evaluation.command
    )
    assert " --enable-dp-attention --dp-size 8 " in deepep.evaluation.command


def test_sglang_normal_mode_on_one_node():
    option = _plan("sglang", all2all_backend="deepep_high_throughput").options[0]
    assert option.layout.parallel == "tp8 ep8"
    assert " --ep-size 8 --moe-a2a-backend deepep --deepep-mode normal " in option.evaluation.command
    assert "deepep_high_throughput: 0.31 GiB of DeepEP buffers a rank" in option.evaluation.notes[-1]


def test_refused_where_there_is_nothing_to_size():
    v3 = shape_of(V3)
    assert backend_refusals(v3, 8, "deepep_high_throughput", ALL2ALL_BACKENDS) == []
    assert backend_refusals(v3, 6, "deepep_high_throughput", ALL2ALL_BACKENDS) == [
        (
            "all2all-backend",
            "DeepEP's high-throughput kernels have no config for 6 ranks (its message: 'Unsupported number of EP "
            "ranks: 6'; 2, 4, 8, 16, 24, 32, 64, 128, 144, 160)",
        )
    ]
    assert backend_refusals(v3, 6, "deepep_low_latency", ALL2ALL_BACKENDS)[0][1] == (
        "DeepEP's low-latency kernels need the experts (256) to divide evenly over the 6 ranks"
    )
    assert backend_refusals(v3, 1, "deepep_low_latency", ALL2ALL_BACKENDS)[0][1].endswith("(ep 1)")
    assert backend_refusals(v3, 8, "pplx", ALL2ALL_BACKENDS)[0][1].startswith("pplx: explorer sizes the buffers of")
    assert backend_refusals(v3, 8, "deepep_auto", VLLM_BACKENDS) == [
        (
            "all2all-backend",
            "deepep_auto: explorer sizes the buffers of deepep_high_throughput, deepep_low_latency for this engine",
        )
    ]
    dense = plan(
        shape_of("Qwen__Qwen2.5-7B"),
        parse_cluster("1x2xh100-80g"),
        PlanRequest(engines=("vllm",), all2all_backend="deepep_low_latency"),
        speed=False,
    )
    assert not dense.options
    assert "this model has no experts" in dense.rejected[0].reason


def test_sglang_charges_the_buffer_without_dp_attention_and_under_pp():
    """SGLang gives every MoE layer a DeepEP dispatcher on its tp group whenever ``--moe-a2a-backend deepep`` is set
    (``create_moe_dispatcher``; ``_handle_a2a_moe`` asks DP attention of the flashinfer backend only), so the buffer is
    made without ``--enable-dp-attention`` and with pp > 1, for the tp ranks of a stage. DeepSeek-V3 on two 8 × H200
    nodes, normal mode: tp 8 holds DeepEP's 8-rank NVLink hint, 335,709,824 B (worked above); tp 2 × pp 3 the 2-rank
    one: 10 channels × 2 peers × (5 counters × 4 + 256 tokens × 16,392) = 83,927,440, rounded to 83,927,552 B; no
    RDMA buffer, each stage's ranks sit on one node."""
    assert normal_buffer_bytes(14_336, 2) == 83_927_552
    result = plan(
        shape_of(V3),
        parse_cluster("2x8xh200-141g@ib0"),
        PlanRequest(engines=("sglang",), all2all_backend="deepep_high_throughput"),
        speed=False,
    )
    by_layout = {o.layout.parallel: o for o in result.options}
    assert set(by_layout) == {"tp8 ep8", "tp2 pp3 ep2"}
    assert "deepep_high_throughput: 0.31 GiB of DeepEP buffers a rank" in by_layout["tp8 ep8"].evaluation.notes[-1]
    assert "deepep_high_throughput: 0.08 GiB of DeepEP buffers a rank" in by_layout["tp2 pp3 ep2"].evaluation.notes[-1]
    assert " --tp-size 2 --pp-size 3 --ep-size 2 --moe-a2a-backend deepep --deepep-mode normal " in (
        by_layout["tp2 pp3 ep2"].evaluation.command
    )
    assert sglang_buffer_bytes("deepep_high_throughput", 7168, 256, 2) == 83_927_552


def test_sglang_runs_ep_equal_to_tp_under_deepep_whatever_ep_size_says():
    """``--ep-size 4 --moe-a2a-backend deepep`` at tp 8: SGLang's ``_a2a_ep_size`` sets ep = tp = 8 ("The expert
    parallel size is adjusted from 4 to the tensor parallel size [8]"). explorer planned ep 4: each card charged twice
    its experts (64 of DeepSeek-V3's 256, not 32) and a buffer for 4 ranks, with a ``--ep-size 4`` SGLang overrides.
    Now the plan is the one SGLang runs, the same as without --ep-size, and says the asked size is overridden."""
    asked = _plan("sglang", all2all_backend="deepep_low_latency", expert_parallel_size=4).options[0]
    plain = _plan("sglang", all2all_backend="deepep_low_latency").options[0]
    assert asked.layout.parallel == plain.layout.parallel == "tp8 ep8"
    assert asked.per_card == plain.per_card
    assert " --tp-size 8 --ep-size 8 --moe-a2a-backend deepep " in asked.evaluation.command
    assert asked.evaluation.notes[-1].startswith("--ep-size 4 is not what SGLang runs: --moe-a2a-backend deepep sets")


def test_sglang_refuses_experts_that_do_not_divide_over_the_ranks():
    """SGLang's FusedMoE asserts ``num_experts % moe_ep_size == 0``: Mixtral's 8 experts over tp 16 = ep 16 ranks
    (DeepEP's normal kernels have a 16-rank config, so nothing else refused it); over 8 ranks, one expert each."""
    mixtral = shape_of("mistralai__Mixtral-8x7B-v0.1")
    request = PlanRequest(engines=("sglang",), all2all_backend="deepep_high_throughput")
    two_nodes = Layout(engine="sglang", gpu_class="h100-80g", fabric="ib0", nodes=2, gpus_per_node=8, tp=16, ep=16)
    one_node = Layout(engine="sglang", gpu_class="h100-80g", gpus_per_node=8, tp=8, ep=8)
    reason = (
        "SGLang's FusedMoE gives each of the 16 expert-parallel ranks whole experts: the 8 experts must divide by "
        "ep 16 (its check: num_experts % moe_ep_size == 0)"
    )
    assert ("ep-size", reason) in sglang.refusals(mixtral, two_nodes, request)
    assert [r for r in sglang.refusals(mixtral, one_node, request) if r[0] == "ep-size"] == []
