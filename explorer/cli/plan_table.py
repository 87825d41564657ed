"""``explorer plan``'s text: the ranked table by tier, the best option's launch, suggestions and refusals.

The table fits a 120-column terminal with the columns a choice turns on
(where it runs, what a card holds, the longest context, a sequence's decode
estimate, the replicas and what they decode together); ``--wide`` adds the
most sequences, whether it is free now, the cost per million tokens and the
full label. Nothing here computes a figure: it shows the plan's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from explorer.engines.options import TIER_LABELS, Option, PlanResult
from explorer.engines.registry import engine_labels
from explorer.plan.ranking import headroom_warning
from explorer.units import gib

#: the option column of the default table: 66 + the other columns = 118 characters
NARROW_LABEL = 66
#: the option column of ``--wide``: the full label
WIDE_LABEL = 84


def short_label(o: Option) -> str:
    """``vLLM · 2 nodes × 8 h100-80g on ib0 (tp8 pp2) · bf16``: engine, cards, split and the precision loaded."""
    engine = engine_labels().get(o.engine, o.engine)
    if o.layout.cpu:
        return f"{engine} · CPU{_kv(o)} · {o.precision}"
    extra = "unified memory" if o.layout.unified else o.layout.parallel
    if o.layout.rpc:
        extra += ", RPC"
    if o.evaluation.layers_on_host:
        extra += f", {o.evaluation.layers_on_host} layers on CPU"
    return f"{engine} · {o.layout.label} ({extra}{_kv(o)}) · {o.precision}"


def _kv(o: Option) -> str:
    """``, fp8 KV`` for an option the planner gave a smaller KV cache than asked, and ``, 28 of 64 at once`` for one
    that holds fewer sequences than asked (the rest queue), said before a long label is cut."""
    kv = f", {o.kv_cache_label} KV" if o.kv_dtype else ""
    return kv + (f", {o.resident_sequences} of {o.asked_sequences} at once" if o.asked_sequences else "")


def compact_label(o: Option) -> str:
    """``llama.cpp 1 × rtx4090-24g, 37 on CPU · Q4_K_M``: :func:`short_label` without the words a narrow column
    cannot spare."""
    engine = engine_labels().get(o.engine, o.engine)
    if o.layout.cpu:
        return f"{engine} CPU{_kv(o)} · {o.precision}"
    where = o.layout.label + ("" if o.layout.parallel == "single" else f" {o.layout.parallel}")
    if o.layout.rpc:
        where += " RPC"
    if o.evaluation.layers_on_host:
        where += f", {o.evaluation.layers_on_host} on CPU"
    return f"{engine} {where}{_kv(o)} · {o.precision}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _tok(value: float | None, width: int) -> str:
    return f"{'?':>{width}}" if value is None else f"{value:>{width},.1f}"


def _row(i: int, o: Option, wide: bool) -> str:
    card, ev, sp = o.per_card, o.evaluation, o.speed
    use = f"{card.total / 2**30:5.1f} / {card.usable / 2**30:5.1f}"
    one = sp.decode_estimate_tokens_per_s if sp is not None else None
    agg = o.aggregate_decode_tokens_per_s
    width = WIDE_LABEL if wide else NARROW_LABEL
    label = _fit(o.label if wide else short_label(o), width)
    cells = [f"{i:>3}", f"{label:<{width}}", f"{use:>13}", f"{ev.max_context_tokens:>9,}", _tok(one, 7),
             f"{o.replicas:>5,}", _tok(agg[1] if agg else None, 9)]  # fmt: skip
    if wide:
        cost = sp.cost_per_million_tokens if sp is not None else None
        cells += [
            f"{ev.max_concurrency:>8,}",
            f"{'yes' if o.free_now else 'no':>4}",
            f"{'' if cost is None else f'{cost:.3f}':>8}",
        ]
    return " ".join(cells)


def _header(wide: bool) -> str:
    width = WIDE_LABEL if wide else NARROW_LABEL
    head = f"{'#':>3} {'option':<{width}} {'GiB a card':>13} {'max ctx':>9} {'tok/s':>7} {'repl':>5} {'all tok/s':>9}"
    return head + (f" {'max conc':>8} {'free':>4} {'$/Mtok':>8}" if wide else "")


def print_result(result: PlanResult, *, top: int = 15, wide: bool = False, assumed: Sequence[str] = ()) -> None:
    """The ranked table under tier headings, the best option's launch, suggestions and refusals; ``assumed``:
    what the plan assumed of the cluster (:attr:`~explorer.hardware.cluster.Cluster.assumptions`), said first."""
    r = result.request
    print(
        f"{result.model}: context {r.context_tokens:,} × {r.concurrency} sequence(s), KV {r.kv_dtype}, "
        f"goal {result.goal}"
    )
    for text in assumed:
        print(f"assumed: {text}")
    if not result.options:
        print("no way fits.")
    else:
        header = _header(wide)
        print(header)
        print("-" * len(header))
        tier = None
        for i, o in enumerate(result.options[:top], 1):
            if o.tier != tier:
                tier = o.tier
                print(f"    tier {tier}: {TIER_LABELS[tier]}")
            print(_row(i, o, wide))
        if len(result.options) > top:
            print(f"    … and {len(result.options) - top} more (--top N)")
        print(
            "    (GiB a card: the binding card's need / usable, GiB = 1024³ bytes; tok/s: one sequence's decode "
            "estimate;\n     repl: copies the cluster holds at once; all tok/s: every copy at the asked concurrency)"
        )
        print_best(result)
    print_suggestions(result)
    print_refusals(result)


def print_best(result: PlanResult) -> None:
    """The best option: what its card holds, its launch (all replicas), its speed; the best of each other engine."""
    best = result.options[0]
    card = best.per_card
    print(
        f"\nbest: {best.label}\n  {card.role}: weights {gib(card.weights)} + KV {gib(card.kv_cache)} + "
        f"activations {gib(card.activations)} + overhead {gib(card.overhead)} = {gib(card.total)} "
        f"of {gib(card.usable)} usable\n  {best.memory_text}"
    )
    warning = headroom_warning(best)
    if warning:
        print(f"  warning: {warning}")
    for note in best.notes:  # a stand-in checkpoint, none published; the engine's own (SGLang's combined need)
        print(f"  note: {note}")
    if result.replica_launch is None:
        print(f"  {best.evaluation.command}")
    else:
        launch = result.replica_launch(best)
        if best.replicas > 1:
            print(f"  {best.replicas:,} replicas ({launch.method}):")
        for line in launch.text().splitlines():
            print(f"    {line}" if best.replicas > 1 else f"  {line}")
    print_speed(best)
    others = [(e, o) for e, o in result.best_per_engine().items() if o is not best]
    for engine, o in others:
        rank = next(i for i, x in enumerate(result.options, 1) if x is o)
        print(f"  best {engine_labels().get(engine, engine)}: #{rank} {short_label(o)}")


def print_speed(o: Option) -> None:
    """The option's speed: bound, estimate, time to first token, cost, what a step is made of, its assumptions."""
    sp = o.speed
    if sp is None:
        print("  speed: unknown (the card class has no bandwidth figure)")
        return
    agg = (
        f"; {sp.concurrency} sequences: {sp.decode_aggregate_estimate_tokens_per_s:,.0f} tokens/s estimate "
        f"(bound {sp.decode_aggregate_bound_tokens_per_s:,.0f})"
        if sp.concurrency > 1
        else ""
    )
    ttft = (
        f"; time to first token {sp.time_to_first_token_estimate_s:.2f} s estimate "
        f"(bound {sp.time_to_first_token_bound_s:.2f} s)"
        if sp.time_to_first_token_bound_s is not None
        else ""
    )
    print(
        f"  decode {sp.decode_estimate_tokens_per_s:,.1f} tokens/s a sequence estimate "
        f"(bound {sp.decode_bound_tokens_per_s:,.1f}, {sp.bound_by}){agg}{ttft}"
    )
    if o.replicas > 1:
        bound, estimate = o.aggregate_decode_tokens_per_s  # type: ignore[misc]
        print(f"  {o.replicas:,} replicas decode {estimate:,.0f} tokens/s together estimate (bound {bound:,.0f})")
    if sp.cost_per_million_tokens is not None:
        print(
            f"  cost ${sp.cost_per_million_tokens:,.3f} per million output tokens estimate "
            f"(${sp.usd_per_gpu_hour:g} per GPU-hour)"
        )
    print(f"  {sp.breakdown}")
    for note in getattr(sp, "assumptions", ()):
        print(f"  assumed: {note}")


def print_suggestions(result: PlanResult) -> None:
    """What to change: said plainly when nothing fits, quietly when only a lower tier does."""
    if not result.suggestions:
        return
    if not result.options:
        print("\nnothing fits; each change below, planned again:")
    elif result.widened:
        print("\nto keep every layer on accelerators with the model's own weights:")
    elif result.options[0].tier > 1:
        print(f"\nto keep every layer on accelerators (best now: tier {result.options[0].tier}):")
    else:
        print("\nalso worth knowing:")
    for s in result.suggestions:
        best = s.best
        if s.fits and best is not None:
            speed = f", {best.speed.decode_estimate_tokens_per_s:,.1f} tok/s" if best.speed is not None else ""
            outcome = f"fits (tier {best.tier}): {short_label(best)}{speed}, ×{best.replicas:,}"
        else:
            outcome = f"still short: longest context {s.max_context:,} tokens"
        print(f"  - {s.text}: {outcome}")


def print_refusals(result: PlanResult, examples: int = 3) -> None:
    """Refusals grouped by rule: the count and a few distinct reasons (memory ones with the context that fits)."""
    if not result.pruned:
        return
    by_rule = defaultdict(list)
    for x in result.rejected:
        by_rule[x.rule].append(x)
    several = len({x.artifact for x in result.rejected}) > 1  # then each refusal names what it loads
    print(f"\nrefused ({result.considered:,} ways considered):")
    for rule, count in sorted(result.pruned.items(), key=lambda kv: -kv[1]):
        print(f"  {rule}: {count:,}")
        shown: list[str] = []  # a few distinct reasons: the same one for each GGUF what-if is said once
        for x in by_rule[rule]:
            longest = f" (max context {x.max_context:,})" if x.max_context is not None else ""
            what = f" · {x.artifact}" if several and x.layout is not None else ""
            line = f"    {x.label}{what}: {x.reason}{longest}"
            if line not in shown:
                shown.append(line)
            if len(shown) == examples:
                break
        print("\n".join(shown))
