"""The human form of sizing: ``explorer size``'s table, and the workload section ``explorer plan --users``
prints under its options. Nothing here computes a figure."""

from __future__ import annotations

from explorer.plan.size import SizeResult
from explorer.speed.load import Sizing
from explorer.speed.workload import Workload

__all__ = ["print_option_sizings", "print_size", "workload_text"]


def print_size(result: SizeResult, model: str, top: int) -> None:
    """The clusters as a table, the first one's launch, and the advice."""
    print(f"{model}: {workload_text(result.workload)}")
    print("estimates from the roofline speed model (docs/notes/speed_model.md), not measurements")
    head = f"{'#':>2}  {'class':<14} {'cards':>5} {'$/hour':>8}  {'way':<13} {'reps':>7} {'batch':>5} "
    head += f"{'tok/s/user':>10} {'tok/s/GPU':>9} {'TTFT s':>7} {'$/Mtok':>7}  binding"
    print(head)
    for i, c in enumerate(result.clusters[:top], start=1):
        s, p = c.sizing, c.sizing.point
        cost = "-" if s.usd_per_hour is None else f"{s.usd_per_hour:,.2f}"
        per_m = s.usd_per_million_tokens(result.workload.answer_tokens)
        reps = f"{s.replicas}+{s.prefill_replicas}p" if s.prefill_replicas else str(s.replicas)
        gpu_rate = f"{s.output_tokens_per_s(result.workload.answer_tokens) / s.cards:.0f}" if s.met else "-"
        mark = " (yours)" if c.own else ""
        binding = s.binding if s.met else f"misses: {s.binding}"
        print(f"{i:>2}  {c.gpu_class + mark:<14} {s.cards:>5} {cost:>8}  {s.mode:<13} {reps:>7} {p.batch:>5} "
              f"{1 / p.tpot_s:>10.1f} {gpu_rate:>9} {s.ttft_s:>7.2f} {'-' if per_m is None else f'{per_m:.3f}':>7}  "
              f"{binding} ({p.step_bound_by} a step)")  # fmt: skip
    if result.clusters:
        first = result.clusters[0]
        print(f"\nfirst: {first.option.label}; each replica:\n  {first.option.evaluation.command}")
    for line in result.advice:
        print(f"not met: {line}")


def workload_text(w: Workload) -> str:
    """The workload in words: ``200 users, prompts 2,000 and answers 500 tokens, TTFT ≤ 1 s, TPOT ≤ 50 ms``."""
    who = f"{w.users:,} users at once" if w.users is not None else f"{w.rate:g} requests a second"
    parts = [who, f"prompts {w.prompt_tokens:,} and answers {w.answer_tokens:,} tokens"]
    if w.prefix_share:
        parts.append(f"{w.prefix_share:.0%} of a prompt in the prefix cache")
    if w.ttft_s is not None:
        p90 = w.ttft_percentile == "p90" and w.prompt_p90_tokens
        parts.append(
            f"TTFT p90 ≤ {w.ttft_s:g} s (p90 prompt {w.prompt_p90_tokens:,})" if p90 else f"TTFT ≤ {w.ttft_s:g} s"
        )
    if w.tpot_target_s is not None:
        p90 = " p90" if w.tpot_percentile == "p90" else ""
        parts.append(f"TPOT{p90} ≤ {w.tpot_target_s * 1e3:g} ms")
    return ", ".join(parts)


def print_option_sizings(options, sizings: list[Sizing | None], workload: Workload, top: int) -> None:
    """``explorer plan --users/--rate``: for the first options, the cards the workload needs and what binds."""
    print(f"\nunder the workload ({workload_text(workload)}; estimates):")
    for i, (option, s) in enumerate(list(zip(options, sizings, strict=True))[:top], start=1):
        if s is None:
            print(f"{i:>3}. {option.label}: no speed figures for its card class")
            continue
        p = s.point
        if not s.met:
            missed = ", ".join(f"{k.upper()} {v:.2f} × its target" for k, v in s.shortfall.items())
            print(f"{i:>3}. {option.label}: misses the targets at one sequence ({missed})")
            continue
        reps = f"{s.replicas} + {s.prefill_replicas} prefill" if s.prefill_replicas else f"{s.replicas}"
        print(f"{i:>3}. {option.label}: {s.cards} cards ({reps} replicas, {s.mode}), batch {p.batch} of at most "
              f"{s.largest_batch} ({s.binding}), {1 / p.tpot_s:.1f} tok/s a user (TPOT p50 {p.tpot_s * 1e3:.1f} ms, "
              f"p90 {p.tpot_p90_s * 1e3:.1f} ms), TTFT {s.ttft_s:.2f} s")  # fmt: skip
        alone = s.one_replica
        if alone is not None and alone.queued:
            print(f"     on its one replica alone: {alone.batch:,} run and {alone.queued:,} wait for room in the KV "
                  f"cache (KV capacity), TTFT {alone.ttft_s:.1f} s")  # fmt: skip
