"""``explorer bench`` / ``python -m explorer.bench.plan``: how fast plan() is.

Prints the median and p95 of one plan() for a model on 8-, 64- and
1,000-GPU mixed clusters (all engines, speed estimates attached; each run
at a context 256 tokens longer than the last, as a slider moves, so nothing
is answered from a cache), and a sweep rate: plan() calls per second over a
grid of contexts × concurrencies × precisions on the 64-GPU cluster. Figures are from one run on this machine; compare them as ratios
(the 1,000-GPU median against the 20 ms target), not as absolutes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from explorer.engines.common import PlanRequest
from explorer.model.shapes import shape_from_config
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot

CLUSTERS = {
    8: "1x8xh100-80g",
    64: "4x8xh100-80g@ib0 + 2x8xa100-80g@ib1 + 1x8xl40s-48g + 1x8xrtx4090-24g + 1xcpu-512g",
    1000: "60x8xh100-80g@ib0 + 40x8xa100-40g@ib1 + 20x8xl40s-48g@eth0 + 4x8xh200-141g@ib2 + 1x8xrtx4090-24g "
    "+ 2xcpu-1024g",
}
TARGET_1000_MS = 20.0


def _bundled_config(name: str) -> dict:
    """A model's config from the shipped snapshot."""
    entry = load_snapshot().get(name)
    if entry is None:
        raise SystemExit(f"explorer bench: {name} is not in the shipped snapshot (see explorer snapshot list)")
    return entry.config


def _time(fn, runs: int) -> list[float]:
    """Milliseconds of ``fn(i)`` for i in range(runs)."""
    out = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


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
        times = _time(
            lambda i, c=cluster: plan(shape, c, replace(request, context_tokens=32768 + 256 * (i + 1))), args.runs
        )
        medians[gpus] = statistics.median(times)
        print(
            f"  {cluster.total_gpus:>5} GPUs: median {medians[gpus]:7.2f} ms  p95 {_p95(times):7.2f} ms  "
            f"({len(result.options)} options, {result.considered:,} ways considered)"
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
    print(f"  1,000-GPU median / {TARGET_1000_MS:.0f} ms target = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
