"""``python -m explorer.bench.throughput``: published throughput at concurrency against the load model.

Each row of ``data/published_throughput.csv`` planned and sized (:mod:`explorer.plan.throughput_check`): its
output tokens a second measured, the bound and the estimate, their ratios, and which rows are kept out. The
table and the summary lines are the ones docs/notes/speed_model.md quotes ("Throughput under load").
"""

from __future__ import annotations

from explorer.datafiles import data_path
from explorer.plan.throughput_check import ThroughputComparison, compare_throughput, parse_throughput, unmapped_row
from explorer.sources.resolve import load_model
from explorer.sources.shipped import shipped_catalogue
from explorer.speed.published import MODELS, kept_out

#: an estimate within this factor of the measurement, either way, counts as close
CLOSE = 1.5


def comparisons() -> tuple[list[ThroughputComparison], list[str]]:
    """Every mapped row compared, and a line for each row that could not be."""
    rows = parse_throughput(data_path("published_throughput.csv").read_text(encoding="utf-8"))
    catalogue, shapes, done, skipped = shipped_catalogue(), {}, [], []
    for row in rows:
        if (why := unmapped_row(row)) is not None:
            skipped.append(f"{row.source_id}: {why}")
            continue
        repo = MODELS[row.model]
        if repo not in shapes:
            shapes[repo] = load_model(repo, offline=True).shape
        got = compare_throughput(row, shapes[repo], catalogue)
        if got is None:
            skipped.append(f"{row.source_id}: no way at tp {row.tp} on {row.n_gpus} cards")
        else:
            done.append(got)
    return done, skipped


def close(c: ThroughputComparison) -> bool:
    """The estimate is within :data:`CLOSE` × of the measurement."""
    return 1 / CLOSE <= c.estimate_ratio <= CLOSE


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
