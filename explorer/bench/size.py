"""``python -m explorer.bench.size``: how fast ``explorer size`` answers over the catalogue's priced classes.

For each model, :func:`explorer.plan.size.size` of a chat workload (200 users, prompts of 2,000 tokens,
answers of 500, TTFT 1 s, TPOT 50 ms) over every priced class of ``data/prices.csv`` and its replica shapes:
the first run in the process (cold: shapes, plans and roofline placements built for the first time) and the
median of the next runs (warm), in wall and CPU seconds. The target is under 2 s for one model. Figures from
one run on this machine: compare them as ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import statistics
import time

from explorer.plan.size import REPLICA_SPECS, size
from explorer.sources.resolve import load_model
from explorer.sources.shipped import shipped_catalogue, shipped_prices
from explorer.speed.workload import Workload

MODELS = ("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-72B")
TARGET_S = 2.0
WORKLOAD = Workload(users=200, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050)


def _timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(prog="python -m explorer.bench.size", description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help=f"snapshot models (default: {', '.join(MODELS)})")
    parser.add_argument("--runs", type=int, default=2, help="warm runs after the cold one")
    args = parser.parse_args(argv)
    catalogue, prices = shipped_catalogue(), shipped_prices()
    print(
        f"size over {len(prices.rows)} priced classes x {len(REPLICA_SPECS)} replica shapes; seconds: cold, warm median"
    )
    for name in args.model or MODELS:
        shape = load_model(name, offline=True).shape

        def run(s=shape):
            return size(s, WORKLOAD, catalogue, prices)

        cold_wall, cold_cpu, result = _timed(run)
        warm = [_timed(run)[:2] for _ in range(args.runs)]
        warm_wall = statistics.median(w for w, _ in warm) if warm else float("nan")
        warm_cpu = statistics.median(c for _, c in warm) if warm else float("nan")
        first = result.clusters[0] if result.clusters else None  # type: ignore[attr-defined]
        best = f"{first.gpu_class} x {first.cards}" if first else "none"
        print(
            f"  {name:<24} cold {cold_wall:5.2f} s wall {cold_cpu:5.2f} s CPU; warm {warm_wall:5.2f} s wall "
            f"{warm_cpu:5.2f} s CPU  (first: {best})"
        )
    print(f"  target: under {TARGET_S:.0f} s for one model over the catalogue's priced classes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
