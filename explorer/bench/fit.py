"""``python -m explorer.bench.fit``: how fast the hardware-first view (``explorer fit``) answers.

For each cluster, :func:`explorer.plan.fit_view.fit_rows` over every model of
the shipped snapshot (the cache left out, so runs compare): the first run in
the process (cold: every model's shape, weights and llama.cpp model built
for the first time) and the median of the next runs (warm), in wall and CPU
seconds (CPU moves less with the load of a shared machine), with how many
models land in each tier. The target is under 1 s for the ~80 snapshot
models on one cluster. Figures from one run on this machine: compare them as
ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import statistics
import time

from explorer.engines.request import PlanRequest
from explorer.plan.fit_view import fit_rows, summary
from explorer.sources.known_models import known_models
from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
from explorer.speed.estimate import SpeedSettings

CLUSTERS = ("1x8xh100-80g", "1x1xrtx4090-24g", "1x1xm4-max-128g", "2x8xh100-80g@ib0 + 1x4xl40s-48g")
TARGET_S = 1.0


def _timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(prog="python -m explorer.bench.fit", description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", action="append", help=f"cluster specs (default: {', '.join(CLUSTERS)})")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3, help="warm runs after the cold one")
    args = parser.parse_args(argv)
    wall, cpu, known = _timed(lambda: known_models(use_cache=False))
    models = known.models  # type: ignore[attr-defined]
    print(f"listing {len(models)} snapshot models: {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU")
    speed, catalogue = SpeedSettings(prices=shipped_prices()), shipped_catalogue()
    request = PlanRequest(context_tokens=args.context)
    print(f"fit_rows at context {args.context:,}, goal fewest-cards; seconds: cold (first in process), warm median")
    for spec in args.cluster or CLUSTERS:
        cluster = parse_cluster(spec)

        def run(c=cluster):
            return fit_rows(models, c, request, speed=speed, catalogue=catalogue)

        cold_wall, cold_cpu, rows = _timed(run)
        warm = [_timed(run)[:2] for _ in range(args.runs)]
        warm_wall = statistics.median(w for w, _ in warm) if warm else float("nan")
        warm_cpu = statistics.median(c for _, c in warm) if warm else float("nan")
        tiers = ", ".join(f"{k} {v}" for k, v in summary(rows).items())  # type: ignore[arg-type]
        print(
            f"  {spec:<34} cold {cold_wall:5.2f} s wall {cold_cpu:5.2f} s CPU; warm {warm_wall:5.2f} s wall "
            f"{warm_cpu:5.2f} s CPU  ({tiers})"
        )
    print(
        f"  target: under {TARGET_S:.0f} s for the snapshot on one cluster (compare the CPU column on a busy machine)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
