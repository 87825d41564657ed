"""Benchmark: place 20 models on a 64-card mixed fleet; ``python -m explorer.bench.placement``.

Reports the median and 95th percentile of wall time over the runs, and their
ratio to a one-second budget (the planner runs on every keystroke of the UI,
so it must stay far below that). ``--copies N --cards C`` scales the request:
N copies of the 20 models on C cards (``--copies 40 --cards 4000``: 800 models
on 4,000 cards, the fleet-size check of issue 27).
"""

from __future__ import annotations

import argparse
import statistics
import time

from explorer.fleet.place import Card, ModelDemand, Placement, place
from explorer.fleet.text import describe_placement
from explorer.units import GiB, KiB, MiB

BUDGET_S = 1.0

# Four card classes, 16 of each: (total GiB, usable fraction).
_CARD_CLASSES = [(141, 0.9), (80, 0.9), (48, 0.9), (24, 0.85)]


def fleet(count: int = 64) -> list[Card]:
    """``count`` cards of four classes, interleaved so that equal cards are not adjacent by index."""
    return [
        Card.from_total(index=i, total_bytes=_CARD_CLASSES[i % 4][0] * GiB, usable_fraction=_CARD_CLASSES[i % 4][1])
        for i in range(count)
    ]


def models(copies: int = 1) -> list[ModelDemand]:
    """20 models from 1 GiB embedders to a 2 TiB query model that must swap with a 1.5 TiB ingest one.

    Exercises single cards, sharing, splits, context floors that widen a split,
    replicas spreading and stacking, and a swap group. ``copies`` > 1 repeats the
    20 under new names (``chat-8b``, ``chat-8b~1``, ...).
    """
    out: list[ModelDemand] = []
    # (name, weights GiB, KV KiB/token, context, floor, replicas, phases, rank)
    table = [
        ("moe-400b", 400, 64, 131_072, 16_384, 1, {"query"}, 0),
        ("dense-236b", 236, 160, 65_536, 8_192, 1, {"query"}, 0),
        ("dense-70b", 140, 320, 32_768, None, 2, {"query"}, 1),
        ("coder-32b", 64, 256, 32_768, 4_096, 2, {"query"}, 1),
        ("vision-72b", 144, 320, 16_384, None, 1, {"ingest"}, 1),
        ("ocr-7b", 15, 56, 8_192, None, 4, {"ingest"}, 2),
        ("chat-8b", 16, 128, 131_072, 8_192, 8, {"query"}, 1),
        ("chat-3b", 6, 36, 32_768, None, 4, {"query"}, 2),
        ("reason-14b", 28, 192, 65_536, 16_384, 2, {"query"}, 2),
        ("summ-9b", 18, 96, 32_768, None, 2, {"ingest"}, 2),
        ("embed-a", 1, 0, 0, None, 8, set(), 0),
        ("embed-b", 2, 0, 0, None, 4, set(), 0),
        ("rerank-a", 1, 8, 8_192, None, 4, {"query"}, 1),
        ("rerank-b", 4, 16, 8_192, None, 2, {"query"}, 2),
        ("asr-1b", 3, 4, 4_096, None, 2, {"ingest"}, 2),
        ("tts-1b", 2, 4, 4_096, None, 2, {"query"}, 3),
        ("guard-8b", 16, 128, 8_192, None, 2, set(), 1),
        ("layout-2b", 4, 16, 8_192, None, 2, {"ingest"}, 3),
        ("giant-1.5t", 1500, 96, 65_536, 4_096, 1, {"ingest"}, 4),
        ("frontier-2t", 2000, 128, 131_072, 8_192, 1, {"query"}, 5),
    ]
    for copy in range(copies):
        for name, weights, kv_kib, context, floor, replicas, phases, rank in table:
            out.append(
                _demand(
                    name if copy == 0 else f"{name}~{copy}", weights, kv_kib, context, floor, replicas, phases, rank
                )
            )
    return out


def _demand(name, weights, kv_kib, context, floor, replicas, phases, rank) -> ModelDemand:
    return ModelDemand(
        name=name,
        weights_bytes=weights * GiB,
        fixed_bytes_per_card=768 * MiB,
        kv_bytes_per_token=kv_kib * KiB,
        context_tokens=context,
        min_context_tokens=floor,
        replicas=replicas,
        phases=frozenset(phases),
        rank=rank,
    )


def run(runs: int, copies: int = 1, card_count: int = 64) -> tuple[list[float], Placement]:
    """Time ``runs`` placements of the same request; returns seconds per run and the last result."""
    demand, cards = models(copies), fleet(card_count)
    times: list[float] = []
    result = place(demand, cards)  # warm-up, not timed
    for _ in range(runs):
        start = time.perf_counter()
        result = place(demand, cards)
        times.append(time.perf_counter() - start)
    return times, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="timed runs (at least 20)")
    parser.add_argument("--copies", type=int, default=1, help="copies of the 20 models (default 1)")
    parser.add_argument("--cards", type=int, default=64, help="cards in the fleet (default 64)")
    parser.add_argument("--show", action="store_true", help="print the placement too")
    args = parser.parse_args(argv)
    runs = max(1 if args.copies > 1 else 20, args.runs)
    times, result = run(runs, args.copies, args.cards)
    median = statistics.median(times)
    p95 = statistics.quantiles(times, n=20, method="inclusive")[18] if len(times) > 1 else times[0]
    print(f"placement: {20 * args.copies} models on {args.cards} cards, {runs} runs")
    print(
        f"  instances {len(result.instances)}, swap groups {len(result.swap_groups)}, "
        f"tight {len(result.tight)}, short of replicas {len(result.missing_replicas)}"
    )
    print(f"  median {median * 1000:.2f} ms  ({median / BUDGET_S:.4f} of the {BUDGET_S:.0f} s budget)")
    print(f"  p95    {p95 * 1000:.2f} ms  ({p95 / BUDGET_S:.4f} of the {BUDGET_S:.0f} s budget)")
    if args.show:
        print(describe_placement(result))
    return 0 if p95 < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
