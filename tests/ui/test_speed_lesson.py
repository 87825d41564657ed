"""explorer.ui.speed_lesson: the speed model's own step, swept over batch, tensor parallelism and offloading."""

from __future__ import annotations

import pytest

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.speed_lesson import batch_sweep, decode_step, offload_rows, published_rows, roofline_rows, tp_rows

LLAMA = "meta-llama/Meta-Llama-3.1-8B"


def shape(repo: str = LLAMA):
    return load_snapshot().shape(repo)


@pytest.mark.parametrize(
    ("repo", "cluster", "tp"), [(LLAMA, "1x1xh100-80g", 1), ("meta-llama/Meta-Llama-3.1-70B", "1x4xh100-80g", 4)]
)
def test_the_step_is_the_planners_bound(repo, cluster, tp):
    """The lesson's tokens/s is the bound the app shows for the same vLLM option."""
    s = shape(repo)
    request = PlanRequest(context_tokens=1024, engines=("vllm",))
    option = next(o for o in plan(s, parse_cluster(cluster), request).options if o.layout.tp == tp and o.layout.pp == 1)
    assert option.precision == "bf16"
    step = decode_step(s, "bf16", "h100-80g", 1, 1024, tp)
    assert step.tokens_per_s == pytest.approx(option.speed.decode_bound_tokens_per_s, rel=1e-12)


def test_one_step_worked_by_hand():
    step = decode_step(shape(), "bf16", "h100-80g", 1, 1024)
    # weights read: 16,060,522,496 bytes less the 128,256 × 4,096 × 2 embedding (a row gather, not read)
    assert step.cost.weight_bytes == 16_060_522_496 - 128_256 * 4_096 * 2 == 15_009_849_344
    assert step.cost.kv_bytes == 1024 * 131_072  # 2 × 32 layers × 8 KV heads × 128 × 2 bytes a token
    memory, compute = step.formulas()
    assert memory == "(15.01 GB weights + 1 × 0.134 GB KV) / 3,350 GB/s = 4.521 ms"
    assert compute.startswith("2 × 1 × (7.50 B parameters + 0.27 B for attention)")
    assert step.bound_by == "memory" and round(step.tokens_per_s, 1) == 221.2
    assert round(step.ridge) == 295 and round(step.intensity, 2) == 1.03  # 989.4 TFLOP/s over 3.35 TB/s
    ceiling = roofline_rows(step, [1.0, 1000.0])
    assert ceiling == [{"intensity": 1.0, "tflops": 3.35}, {"intensity": 1000.0, "tflops": 989.4}]


def test_batching_turns_compute_bound_only_at_short_context():
    short = {r["batch"]: r for r in batch_sweep(shape(), "bf16", "h100-80g", 128)}
    long = batch_sweep(shape(), "bf16", "h100-80g", 8192)
    assert short[1]["bound_by"] == "memory" and short[1024]["bound_by"] == "compute"
    assert all(r["bound_by"] == "memory" for r in long)  # each sequence's 1 GB of KV outgrows its FLOPs
    # the weights' read is the same at every batch; the compute passes it near the ridge (295 sequences)
    assert len({round(r["weights_ms"], 9) for r in long}) == 1
    assert short[256]["compute_ms"] < short[256]["weights_ms"] < short[512]["compute_ms"]
    assert [r["tokens_per_s"] for r in long] == sorted(r["tokens_per_s"] for r in long)


def test_tensor_parallelism_and_its_refusals():
    rows = {r["tp"]: r for r in tp_rows(shape("meta-llama/Meta-Llama-3.1-70B"), "bf16", "h100-80g", 1, 8192)}
    assert rows[1]["allreduce_ms"] == 0 and rows[8]["allreduce_ms"] > 0
    assert rows[8]["gb_a_card"] < rows[4]["gb_a_card"] < rows[1]["gb_a_card"]
    assert rows[1]["tokens_per_s"] < rows[2]["tokens_per_s"] < rows[4]["tokens_per_s"] < rows[8]["tokens_per_s"]
    qwen = {r["tp"]: r for r in tp_rows(shape("Qwen/Qwen2.5-7B"), "bf16", "h100-80g", 1, 8192)}
    assert qwen[8]["refused"] == "Total attention heads (28) must be divisible by tensor parallel size (8)"
    assert qwen[8]["tokens_per_s"] is None and qwen[4]["refused"] == ""


def test_offloading_costs_each_layer_its_host_read():
    """docs/notes/speed_model.md: Llama-3.1-70B Q4_K_M on an RTX 4090, each layer on the host adds its bytes
    × (1/100 − 1/1008) s/GB: 523 MB of weights, 4.7 ms a token (4.9 with its KV at 4,096 tokens);
    48 of 80 layers there: 3.6 tokens/s."""
    rows = offload_rows(shape("meta-llama/Meta-Llama-3.1-70B"), "rtx4090-24g", 4096)
    assert len(rows) == 81 and rows[0]["layers_on_host"] == 0
    # one layer at 4.89 bits a weight, its two norms and its fp16 KV at 4,096 tokens
    matrices = [8192 * 8192, 1024 * 8192, 1024 * 8192, 8192 * 8192, 28672 * 8192, 28672 * 8192, 8192 * 28672]
    layer = sum(-(-n * 489 // 800) for n in matrices) + 2 * 8192 * 2 + 4096 * 2 * 8 * 128 * 2
    per_layer = layer * (1 / 100e9 - 1 / 1008e9)
    hop = 20e-6 + 8192 * 4 / 32e9  # the one PCIe hand-off of f32 hidden states from host to card
    for k in (1, 16, 48):
        t = 1 / rows[k]["tokens_per_s"] - 1 / rows[0]["tokens_per_s"]
        assert t == pytest.approx(k * per_layer + hop, rel=1e-6)
    weights = sum(-(-n * 489 // 800) for n in matrices)
    assert round(weights / 1e6) == 523 and round(weights * (1 / 100e9 - 1 / 1008e9) * 1e3, 1) == 4.7
    assert round(per_layer * 1e3, 1) == 4.9 and round(rows[48]["tokens_per_s"], 1) == 3.6


def test_published_rows_are_the_comparisons():
    rows = published_rows(load_snapshot().shape)
    assert len(rows) == 83  # the mapped rows of data/published_speeds.csv (tests/speed/test_published.py)
    assert all(r["bound"] >= r["measured"] for r in rows)
    xd = next(r for r in rows if r["source"] == "xd-l3-4090-8b-q4km")
    assert round(xd["bound"], 1) == 216.5 and xd["measured"] == 130.58  # docs/notes/speed_model.md's table
