"""``explorer bench`` / ``python -m explorer.bench.plan``: how fast plan() is.

Prints the median and p95 of one plan() for a model on 8-, 64-, 1,000- and
100,000-GPU mixed clusters (all engines, speed estimates attached; each run
at a context 256 tokens longer than the last, as a slider moves, so nothing
is answered from a cache), in wall and CPU milliseconds (CPU moves less with
the load of a shared machine); a sweep rate: plan() calls per second over a
grid of contexts × concurrencies × precisions on the 64-GPU cluster; and the
scale check: one node of 8, 10,000 and 100,000 H100s, planned by counts (the
100,000-card node should cost what the 8-card one does, with the same
layouts and more replicas); and the launch lines of the first 8 options on the 1,000- and
100,000-GPU clusters (the app's command column); and a context move as the app makes it (:func:`context_moves`): a
first plan against a plan at a context not planned before and one at a context planned before. Figures are from
one run on this machine;
compare them as ratios (the 1,000-GPU median against the 20 ms target, the
wide nodes against the 8-card one), not as absolutes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from functools import partial

from explorer.artifacts.offer import fallback_artifacts, original_artifact
from explorer.engines.request import PlanRequest
from explorer.memo import clear_memos
from explorer.model.shapes import shape_from_config
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_prices
from explorer.sources.snapshot.read import load_snapshot
from explorer.speed.estimate import SpeedSettings

CLUSTERS = {
    8: "1x8xh100-80g",
    64: "4x8xh100-80g@ib0 + 2x8xa100-80g@ib1 + 1x8xl40s-48g + 1x8xrtx4090-24g + 1xcpu-512g",
    1000: "60x8xh100-80g@ib0 + 40x8xa100-40g@ib1 + 20x8xl40s-48g@eth0 + 4x8xh200-141g@ib2 + 1x8xrtx4090-24g "
    "+ 2xcpu-1024g",
    #: the 1,000-GPU cluster's make a hundred times over: 12,700 nodes, so per-node work shows
    100_000: "6000x8xh100-80g@ib0 + 4000x8xa100-40g@ib1 + 2000x8xl40s-48g@eth0 + 400x8xh200-141g@ib2 "
    "+ 100x8xrtx4090-24g + 200xcpu-1024g",
}
TARGET_1000_MS = 20.0
#: the 100,000-GPU cluster's plan against the 1,000-GPU one's (issue 27): per-node work is counted once per cluster
TARGET_100K_RATIO = 1.5
#: one node, ever wider: planning counts cards, so the time should not grow with the width
WIDE_NODES = (8, 10_000, 100_000)
#: rows whose launch lines are timed (the app's table shows about this many)
LAUNCH_ROWS = 8
#: a context move's scenarios: the app's three (explorer.bench.app.SCENARIOS) and two MoE (label, model, cluster)
MOVE_SCENARIOS = (
    ("70B on 1 × 8 H100 (the app's default)", "meta-llama/Meta-Llama-3.1-70B", "1x8xh100-80g"),
    ("70B on 125 × 8 H100", "meta-llama/Meta-Llama-3.1-70B", "125x8xh100-80g@ib0"),
    ("405B on 2 × 8 H100", "meta-llama/Meta-Llama-3.1-405B", "2x8xh100-80g@ib0"),
    ("DeepSeek-V3 on 1 × 8 H200", "deepseek-ai/DeepSeek-V3", "1x8xh200-141g"),
    ("Qwen3-30B-A3B on 1 × RTX 4090", "Qwen/Qwen3-30B-A3B", "1x1xrtx4090-24g"),
)
#: a move's plan against a first plan's (issue 27): what does not depend on the context is remembered
TARGET_MOVE_SHARE = 0.25
#: first plans timed per scenario (the least is reported: each starts from empty memos)
FIRST_PLANS = 3


def _bundled_config(name: str) -> dict:
    """A model's config from the shipped snapshot."""
    entry = load_snapshot().get(name)
    if entry is None:
        raise SystemExit(f"explorer bench: {name} is not in the shipped snapshot (see explorer snapshot list)")
    return entry.config


def _time(fn, runs: int) -> tuple[list[float], list[float]]:
    """(wall, CPU) milliseconds of ``fn(i)`` for i in range(runs)."""
    wall, cpu = [], []
    for i in range(runs):
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn(i)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
    return wall, cpu


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(prog="explorer bench", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="meta-llama/Meta-Llama-3.1-70B")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    shape = shape_from_config(_bundled_config(args.model), name=args.model)
    request = PlanRequest(context_tokens=32768)
    print(f"plan() for {args.model}, context 32,768, engines vllm + sglang + llamacpp ({args.runs} runs each)")
    medians = {}
    for gpus, spec in CLUSTERS.items():
        cluster = parse_cluster(spec)
        result = plan(shape, cluster, request)
        # each run moves the context by 256 tokens, as a slider does, so no answer is reused
        wall, cpu = _time(
            lambda i, c=cluster: plan(shape, c, replace(request, context_tokens=32768 + 256 * (i + 1))), args.runs
        )
        medians[gpus] = statistics.median(cpu)
        print(
            f"  {cluster.total_gpus:>5} GPUs: median {statistics.median(wall):7.2f} ms wall {medians[gpus]:7.2f} ms CPU"
            f"  p95 {_p95(wall):7.2f} ms wall  ({len(result.options)} options, {result.considered:,} ways considered)"
        )
    cluster = parse_cluster(CLUSTERS[64])
    grid = [
        PlanRequest(context_tokens=c, concurrency=n, precision=p)
        for c in (2048, 8192, 32768, 131072)
        for n in (1, 8)
        for p in (None, "fp8", "int4-awq")
    ]
    start = time.perf_counter()
    for req in grid:
        plan(shape, cluster, req)
    rate = len(grid) / (time.perf_counter() - start)
    print(f"  sweep on 64 GPUs: {len(grid)} cases, {rate:,.0f} cases/s")
    ratio = medians[1000] / TARGET_1000_MS
    print(f"  1,000-GPU CPU median / {TARGET_1000_MS:.0f} ms target = {ratio:.2f}")
    wide = medians[100_000] / medians[1000]
    print(f"  100,000-GPU CPU median / 1,000-GPU CPU median = {wide:.2f} (target <= {TARGET_100K_RATIO})")
    _launch_lines(shape, request, args.runs)
    _wide_nodes(shape, request, args.runs)
    context_moves(args.runs)
    return 0


def _app_plan(shape, cluster, context_tokens: int):
    """plan() as the app's plan cell calls it: the model's own weights, the fallback precisions (no published
    checkpoints), speed with the shipped prices, no suggestions, every engine."""
    chosen = [original_artifact(shape)]
    return plan(
        shape,
        cluster,
        PlanRequest(context_tokens=context_tokens),
        artifacts=chosen,
        model_ref=shape.name,
        speed=SpeedSettings(prices=shipped_prices()),
        suggest=False,
        fallback=fallback_artifacts(shape, chosen),
    )


def _move(shape, cluster, contexts: list[int], i: int):
    return _app_plan(shape, cluster, contexts[i])


def context_moves(runs: int) -> list[dict]:
    """A context slider's moves as the app plans them, for each of :data:`MOVE_SCENARIOS`: a first plan (empty
    memos, the shape and the cluster built afresh: the least of :data:`FIRST_PLANS`), then ``runs`` moves each to a
    context not planned before (8,192 tokens and up by 1,024), then the same contexts again (a slider back on a
    step it stood on). CPU milliseconds (medians for the moves); returns the figures printed."""
    print(
        f"  a context move as the app plans it (CPU ms; target: a new context <= {TARGET_MOVE_SHARE:.0%} of a first):"
    )
    rows, contexts = [], [8192 + 1024 * i for i in range(runs)]
    for label, model, spec in MOVE_SCENARIOS:
        config, firsts = _bundled_config(model), []
        for _ in range(FIRST_PLANS):
            clear_memos()
            shape, cluster = shape_from_config(config, name=model), parse_cluster(spec)
            firsts.append(_time(lambda _i, s=shape, c=cluster: _app_plan(s, c, 32768), 1)[1][0])
        move = partial(_move, shape, cluster, contexts)
        _, new = _time(move, runs)
        _, back = _time(move, runs)
        row = {"scenario": label, "first_ms": min(firsts), "move_ms": statistics.median(new),
               "back_ms": statistics.median(back)}  # fmt: skip
        rows.append(row)
        print(
            f"    {label}: first {row['first_ms']:6.2f}, a new context {row['move_ms']:6.2f} "
            f"({row['move_ms'] / row['first_ms']:4.0%}), one planned before {row['back_ms']:6.3f} "
            f"({row['back_ms'] / row['first_ms']:5.1%})"
        )
    return rows


def _launch_lines(shape, request: PlanRequest, runs: int) -> None:
    """The launch lines of a table's first rows (the app's command column), on the 1,000- and 100,000-GPU
    clusters: they name runs of alike nodes, so they should cost an option, not a node."""
    print(f"  launch lines of the first {LAUNCH_ROWS} options (replica_launch, the app's command column):")
    for gpus in (1000, 100_000):
        result = plan(shape, parse_cluster(CLUSTERS[gpus]), request)
        launch_rows = partial(_launches, result)
        first_wall, first_cpu = _time(launch_rows, 1)
        wall, cpu = _time(launch_rows, runs)
        print(
            f"    {gpus:>7,} GPUs: first {first_wall[0]:7.2f} ms wall {first_cpu[0]:7.2f} ms CPU (finds the runs of"
            f" alike nodes), then median {statistics.median(wall):6.2f} ms wall {statistics.median(cpu):6.2f} ms CPU"
        )


def _launches(result, _run: int) -> list:
    """The launch lines of a plan's first :data:`LAUNCH_ROWS` options."""
    return [result.replica_launch(o) for o in result.options[:LAUNCH_ROWS]]


def _wide_nodes(shape, request: PlanRequest, runs: int) -> None:
    """One node of 8, 10,000 and 100,000 H100s: time, layouts and replicas, against the 8-card node."""
    print("  one wide node of h100-80g (planned by counts):")
    base_ms, base_labels = None, None
    for width in WIDE_NODES:
        cluster = parse_cluster(f"1x{width}xh100-80g")
        result = plan(shape, cluster, request)
        wall, cpu = _time(
            lambda i, c=cluster: plan(shape, c, replace(request, context_tokens=32768 + 256 * (i + 1))), runs
        )
        ms = statistics.median(cpu)
        labels = [o.label for o in result.options]
        base_ms, base_labels = base_ms or ms, base_labels or labels
        replicas = ", ".join(f"{o.layout.cards}: ×{o.replicas:,}" for o in result.options if o.engine == "vllm")
        print(
            f"    1x{width:<7,} median {statistics.median(wall):7.2f} ms wall {ms:7.2f} ms CPU "
            f"({ms / base_ms:4.2f}× 1x8); same layouts as 1x8: {labels == base_labels}; vLLM cards: replicas {replicas}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
