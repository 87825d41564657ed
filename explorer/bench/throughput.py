"""``python -m explorer.bench.throughput``: published throughput at concurrency against the load model.

Each row of ``data/published_throughput.csv`` planned and sized (:mod:`explorer.plan.throughput_check`): its
output tokens a second measured, the bound and the estimate, their ratios, and which rows are kept out. The
table and the summary lines are the ones docs/notes/speed_model.md quotes ("Throughput under load").
"""

from __future__ import annotations

from functools import cache

from explorer.plan.throughput_check import CLOSE, ThroughputComparison, compare_all
from explorer.sources.resolve import load_model
from explorer.sources.shipped import shipped_catalogue
from explorer.speed.published import kept_out
from explorer.ui.serving_lesson import published_throughput


def comparisons() -> tuple[list[ThroughputComparison], list[str]]:
    """Every mapped row compared, and a line for each row that could not be."""
    return compare_all(published_throughput(), cache(lambda repo: load_model(repo, offline=True).shape),
                       shipped_catalogue())  # fmt: skip


def close(c: ThroughputComparison) -> bool:
    """The estimate is within :data:`~explorer.plan.throughput_check.CLOSE` × of the measurement."""
    return c.close


def main() -> int:
    """Print the table and the summary."""
    done, skipped = comparisons()
    print("| row | kept out | B | in/out | capacity | measured tok/s | bound (×) | estimate (×) |")
    print("|---|---|---|---|---|---|---|---|")
    for c in done:
        r = c.row
        print(f"| {r.source_id} | {'yes' if kept_out(r) else ''} | {r.concurrency} | {r.prompt_tokens}/{r.answer_tokens} | "
              f"{c.capacity} | {r.measured_output_tokens_per_s:,.1f} | {c.bound_tokens_per_s:,.0f} ({c.bound_ratio:.2f}) | "
              f"{c.estimate_tokens_per_s:,.0f} ({c.estimate_ratio:.2f}) |")  # fmt: skip
    out = [c for c in done if kept_out(c.row)]
    fit = [c for c in done if not kept_out(c.row)]
    print(f"\n{len(done)} rows compared; bound >= measured on {sum(c.bound_ratio >= 1 for c in done)} of {len(done)}")
    print(f"kept out: {sum(map(close, out))} of {len(out)} estimates within {CLOSE} x; "
          f"the rest: {sum(map(close, fit))} of {len(fit)}")  # fmt: skip
    queued = [c for c in done if c.queued and c.row.measured_ttft_ms]
    print("\n| queued row | B | capacity | queued | TTFT measured s | TTFT estimate s (×) |\n|---|---|---|---|---|---|")
    for c in queued:
        ttft = c.row.measured_ttft_ms or 0.0
        print(f"| {c.row.source_id} | {c.row.concurrency} | {c.capacity} | {c.queued} | {ttft / 1e3:,.1f} | "
              f"{c.estimate_ttft_ms / 1e3:,.1f} ({c.estimate_ttft_ms / ttft:.2f}) |")  # fmt: skip
    for line in skipped:
        print(f"not compared: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
