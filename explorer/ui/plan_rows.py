"""Plan results as plain rows for the notebooks and widgets: tables, refusals, chart data.

A :class:`~explorer.engines.options.PlanResult` (or options) in, lists of
dicts and strings out; the one state is the sweep cache
(:mod:`explorer.ui.sweep_cache`). No marimo, no ipywidgets, no altair; the edges
(``notebooks/app.py``, :mod:`explorer.ui.widgets`, :mod:`explorer.ui.charts`)
lay them out. Byte figures stay ints until a row shows them, in GiB
(1024³ bytes), with the unit in the column name or the text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from explorer.engines.common import ENGINE_LABELS, ENGINES, PlanRequest
from explorer.engines.options import Option, PlanResult
from explorer.errors import ExplorerError
from explorer.model.artifacts import Artifact
from explorer.safe_text import safe_html
from explorer.ui.sweep_cache import SWEEPS
from explorer.units import GiB, gib

__all__ = [
    "ENGINE_CHOICES",
    "TABLE_COLUMNS",
    "artifact_choices",
    "card_parts",
    "context_steps",
    "context_sweep",
    "near_miss_rows",
    "near_misses",
    "nearest_step",
    "option_rows",
    "refusal_groups",
    "rows_html",
    "speed_of_option",
    "sweep_options",
]

#: the engine menu: label -> engines planned
ENGINE_CHOICES: dict[str, tuple[str, ...]] = {
    "all three, side by side": ENGINES,
    **{label: (name,) for name, label in ENGINE_LABELS.items()},
}

#: the ranked table's columns, in order
TABLE_COLUMNS = (
    "#",
    "fits",
    "option",
    "engine",
    "cards",
    "per card (GiB)",
    "max context",
    "max concurrency",
    "decode tok/s",
    "TTFT (s)",
    "$ / M tokens",
    "command",
)


def context_steps(limit: int, floor: int = 512) -> list[int]:
    """A geometric list of context lengths from ``floor`` to ``limit``: 512, 768, 1,024, 1,536, 2,048 …

    Powers of two and one and a half times them (a log-scale slider in
    round numbers), then ``limit`` itself when it is not one of them.
    """
    limit = max(int(limit), 1)
    steps: list[int] = []
    p = floor
    while p <= limit:
        steps.append(p)
        if p * 3 // 2 <= limit:
            steps.append(p * 3 // 2)
        p *= 2
    if not steps or steps[-1] != limit:
        steps.append(limit)
    return sorted(set(steps))


def nearest_step(steps: Sequence[int], want: int) -> int:
    """The step closest to ``want`` on a log scale (ties go to the smaller): 1,400 → 1,024, 1,500 → 2,048."""
    want = max(int(want), 1)
    return min(steps, key=lambda s: (abs(math.log(max(s, 1) / want)), s))


def artifact_choices(artifacts: Sequence[Artifact], what_ifs: Sequence[Artifact] = ()) -> dict[str, Artifact]:
    """Menu label -> artifact: the repository's real offer first, then what-if precisions.

    ``original (bf16) · 14.96 GiB · fetched``; ``what-if: int4 AWQ g128 · 5.33 GiB · computed``.
    """
    out: dict[str, Artifact] = {}
    for a in (*artifacts, *what_ifs):
        head = f"what-if: {a.quant}" if a.what_if else a.label
        label = f"{head} · {gib(a.size_bytes, 2)} · {a.size_source}"
        while label in out:
            label += " ·"
        out[label] = a
    return out


def _engine(option: Option) -> str:
    return ENGINE_LABELS.get(option.engine, option.engine)


def speed_of_option(option: Option) -> tuple[float | None, float | None, float | None]:
    """(decode tokens/s estimate, time to first token estimate in s, USD per million tokens), None when unknown."""
    s = getattr(option, "speed", None)
    if s is None:
        return None, None, None
    return (
        getattr(s, "decode_estimate_tokens_per_s", None),
        getattr(s, "time_to_first_token_estimate_s", None),
        getattr(s, "cost_per_million_tokens", None),
    )


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def _row(rank: str, option: Option, fits: str) -> dict[str, Any]:
    card, ev = option.per_card, option.evaluation
    tps, ttft, cost = speed_of_option(option)
    return {
        "#": rank,
        "fits": fits,
        "option": option.label,
        "engine": _engine(option),
        "cards": "CPU" if option.layout.cpu else str(option.layout.cards),
        "per card (GiB)": f"{card.total / GiB:,.1f} / {card.usable / GiB:,.1f}",
        "max context": f"{ev.max_context_tokens:,}",
        "max concurrency": f"{ev.max_concurrency:,}",
        "decode tok/s": _num(tps, ",.1f"),
        "TTFT (s)": _num(ttft, ",.2f"),
        "$ / M tokens": _num(cost, ",.2f"),
        "command": ev.command,
    }


def option_rows(result: PlanResult, limit: int = 40) -> list[dict[str, Any]]:
    """The ranked options as table rows (``TABLE_COLUMNS``), best first, ✓ in ``fits``."""
    return [_row(str(i), o, "✓" if o.fits else "✗") for i, o in enumerate(result.options[:limit], 1)]


def near_misses(result: PlanResult, limit: int = 3) -> list[Option]:
    """The refused ways that were evaluated and did not fit, closest to fitting first."""
    evaluated = [r.option for r in result.rejected if r.rule == "memory" and r.option is not None]
    evaluated.sort(key=lambda o: (o.per_card.total / max(o.per_card.usable, 1), o.layout.cards, o.label))
    return evaluated[:limit]


def near_miss_rows(result: PlanResult, limit: int = 3) -> list[dict[str, Any]]:
    """Rows for the ways that just failed to fit, marked ✗ (shown in red)."""
    return [_row("✗", o, "✗ short by " + gib(-o.per_card.headroom)) for o in near_misses(result, limit)]


def refusal_groups(result: PlanResult) -> list[tuple[str, int, list[dict[str, str]]]]:
    """(rule, how many ways it refused, the kept refusals as rows), most frequent rule first."""
    kept: dict[str, list[dict[str, str]]] = {}
    for r in result.rejected:
        kept.setdefault(r.rule, []).append({"way": r.label, "artifact": r.artifact, "reason": r.reason})
    counts = dict(result.pruned) or {k: len(v) for k, v in kept.items()}
    return sorted(((rule, n, kept.get(rule, [])) for rule, n in counts.items()), key=lambda t: (-t[1], t[0]))


def card_parts(option: Option) -> list[dict[str, Any]]:
    """Long-form rows of what each card role (and the host) holds: role, part, GiB, usable GiB."""
    ev = option.evaluation
    cards = list(ev.cards) + ([ev.host] if ev.host is not None else [])
    rows = []
    for order, card in enumerate(cards):
        role = f"{card.role} (×{card.count})" if card.count > 1 else card.role
        for part_order, part in enumerate(("weights", "kv_cache", "activations", "overhead")):
            rows.append(
                {
                    "role": role,
                    "order": order,
                    "part": part.replace("_", " "),
                    "part_order": part_order,
                    "gib": getattr(card, part) / GiB,
                    "usable_gib": card.usable / GiB,
                    "capacity_gib": card.capacity / GiB,
                }
            )
    return rows


def sweep_options(result: PlanResult, best: int = 4, misses: int = 2) -> list[Option]:
    """Options worth drawing against context: the best of each (engine, weights), then the nearest misses."""
    top: list[Option] = []
    seen: set[tuple[str, str]] = set()
    for o in result.options:
        if (o.engine, o.artifact.label) not in seen and len(top) < best:
            seen.add((o.engine, o.artifact.label))
            top.append(o)
    return top + near_misses(result, misses)


def context_sweep(
    shape: Any, options: Sequence[Option], request: PlanRequest, contexts: Sequence[int], *, speed: bool = True
) -> list[dict[str, Any]]:
    """Each option re-checked at each context: per-card total and usable (GiB), whether it fits, tokens/s.

    Weights and overhead stay, the KV cache grows (``planner.recheck``); the
    speed estimate is recomputed too when ``speed`` (None where unknown). The
    asked context does not change the curves, so the last few sweeps are kept
    (:data:`explorer.ui.sweep_cache.SWEEPS`).
    """
    from explorer.plan.planner import recheck

    key = (shape, tuple(o.label for o in options), replace(request, context_tokens=1), tuple(contexts), speed)
    kept = SWEEPS.get(key)
    if kept is not None:
        return kept
    rows = []
    for option in options:
        name = option.label if option.fits else f"✗ {option.label}"
        for c in contexts:
            try:
                o = recheck(shape, option, replace(request, context_tokens=int(c)), speed=speed)
            except ExplorerError:
                continue
            card = o.per_card
            rows.append(
                {
                    "option": name,
                    "context": int(c),
                    "total_gib": card.total / GiB,
                    "usable_gib": card.usable / GiB,
                    "fits": o.fits,
                    "tokens_per_s": speed_of_option(o)[0] if speed else None,
                }
            )
    return SWEEPS.put(key, rows)


def rows_html(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = TABLE_COLUMNS, *, table_id: str = "explorer-options"
) -> str:
    """A plain HTML table of ``rows``; a row whose ``fits`` starts with ✗ is red.

    Plain HTML (not an interactive grid) so that it renders the same in a live
    app, a static HTML export and a Jupyter output.
    """
    head = "".join(f"<th style='text-align:left;padding:4px 8px'>{safe_html(c)}</th>" for c in columns)
    body = []
    for r in rows:
        bad = str(r.get("fits", "")).startswith("✗")
        style = "color:#b91c1c;background:#fef2f2" if bad else ""
        cells = []
        for c in columns:
            text = safe_html(str(r.get(c, "")))
            if c == "command" and text:
                text = f"<code style='font-size:11px;white-space:pre-wrap'>{text}</code>"
            cells.append(f"<td style='padding:4px 8px;vertical-align:top'>{text}</td>")
        body.append(f"<tr class='{'misfit' if bad else 'fit'}' style='{style}'>{''.join(cells)}</tr>")
    return (
        f"<table id='{table_id}' style='border-collapse:collapse;font-size:13px'>"
        f"<thead><tr style='border-bottom:1px solid #ccc'>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )
