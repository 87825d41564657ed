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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from explorer.engines.options import Option, PlanResult
from explorer.engines.registry import engine_labels
from explorer.engines.request import PlanRequest
from explorer.errors import ExplorerError
from explorer.model.artifacts import Artifact
from explorer.plan.ranking import headroom_warning
from explorer.safe_text import safe_html
from explorer.ui.sweep_cache import SWEEPS
from explorer.units import GiB, gib

__all__ = [
    "ENGINE_CHOICES",
    "ESSENTIAL_COLUMNS",
    "TABLE_COLUMNS",
    "artifact_choices",
    "artifact_key",
    "asked_what_ifs",
    "card_parts",
    "cluster_tokens_per_s",
    "context_steps",
    "context_sweep",
    "host_note",
    "launch_text",
    "near_miss_rows",
    "near_misses",
    "nearest_step",
    "nothing_fits_md",
    "option_names",
    "option_notes",
    "option_rows",
    "refusal_groups",
    "rows_html",
    "speed_of_option",
    "sweep_options",
    "table_style",
]

#: the engine menu: label -> engines planned (every engine of the registry, then each alone)
ENGINE_CHOICES: dict[str, tuple[str, ...]] = {
    ("all three" if len(engine_labels()) == 3 else f"all {len(engine_labels())}") + ", side by side": tuple(
        engine_labels()
    ),
    **{label: (name,) for name, label in engine_labels().items()},
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
    "replicas",
    "cluster tok/s",
    "TTFT (s)",
    "$ / M tokens",
    "command",
)
#: the columns the app shows unless asked for more: they fit 1,024 px (the option's text wraps). As the CLI's
#: table: one sequence's decode estimate, the copies the cluster holds at once, and what they decode together
ESSENTIAL_COLUMNS = (
    "#",
    "fits",
    "option",
    "cards",
    "per card (GiB)",
    "max context",
    "decode tok/s",
    "replicas",
    "cluster tok/s",
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


def artifact_key(artifact: Artifact) -> str:
    """A short key for an artifact that a URL carries: its label (``original (bf16)``, ``Q4_K_M``), or
    ``what-if fp8`` for a what-if precision."""
    return f"what-if {artifact.quant}" if artifact.what_if else artifact.label


def asked_what_ifs(
    what_ifs: Callable[[tuple[str, ...]], Sequence[Artifact]], keys: Iterable[str]
) -> tuple[Artifact, ...]:
    """The what-if artifacts ``keys`` ask for by precision name (``what-if int4-awq``, as a suggestion or a
    link names them), each once; ``what_ifs`` is the model's (``ResolvedModel.what_ifs``). A name that is
    no precision is left out."""
    out: dict[str, Artifact] = {}
    for key in keys:
        if not key.startswith("what-if "):
            continue
        try:
            made = what_ifs((key.removeprefix("what-if "),))
        except ExplorerError:
            continue
        for a in made:
            out.setdefault(artifact_key(a), a)
    return tuple(out.values())


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
    return engine_labels().get(option.engine, option.engine)


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


def cluster_tokens_per_s(option: Option) -> float | None:
    """Tokens/s every replica decodes together at the asked concurrency (estimate; the CLI's ``all tok/s``),
    None without a speed estimate."""
    together = option.aggregate_decode_tokens_per_s
    return together[1] if together is not None else None


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def launch_text(result: PlanResult, option: Option) -> str:
    """The lines that start ``option`` as the plan prints them: each copy on its devices with its port, a line a
    node (:func:`explorer.plan.replicas.replica_launch`); the engine's bare command when the plan has no cluster
    to place it on."""
    if result.replica_launch is None:
        return option.evaluation.command
    return result.replica_launch(option).text()


def _row(rank: str, option: Option, fits: str, launch: str | None) -> dict[str, Any]:
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
        "replicas": f"{option.replicas:,}",
        "cluster tok/s": _num(cluster_tokens_per_s(option), ",.1f"),
        "TTFT (s)": _num(ttft, ",.2f"),
        "$ / M tokens": _num(cost, ",.2f"),
        **({"command": launch} if launch is not None else {}),
    }


def _launch(result: PlanResult, option: Option, commands: bool) -> str | None:
    return launch_text(result, option) if commands else None


def option_rows(result: PlanResult, limit: int = 40, *, commands: bool = True) -> list[dict[str, Any]]:
    """The ranked options as table rows (``TABLE_COLUMNS``), best first, ✓ in ``fits``.

    ``commands=False`` leaves the ``command`` column out: a row's launch lines place every copy on the
    cluster's nodes (:func:`launch_text`), which a table that does not show them need not pay for (0.6 s for
    8 rows on a 100,000-GPU cluster).
    """
    return [
        _row(str(i), o, "✓" if o.fits else "✗", _launch(result, o, commands))
        for i, o in enumerate(result.options[:limit], 1)
    ]


def near_misses(result: PlanResult, limit: int = 3) -> list[Option]:
    """The refused ways that were evaluated and did not fit, closest to fitting first."""
    evaluated = [r.option for r in result.rejected if r.rule == "memory" and r.option is not None]
    evaluated.sort(key=lambda o: (o.per_card.total / max(o.per_card.usable, 1), o.layout.cards, o.label))
    return evaluated[:limit]


def near_miss_rows(result: PlanResult, limit: int = 3, *, commands: bool = True) -> list[dict[str, Any]]:
    """Rows for the ways that just failed to fit, marked ✗ (shown in red); a way that does not fit has no replicas.
    ``commands`` as :func:`option_rows`."""
    return [
        {
            **_row("✗", o, "✗ short by " + gib(-o.per_card.headroom), _launch(result, o, commands)),
            "replicas": "—",
            "cluster tok/s": "—",
        }
        for o in near_misses(result, limit)
    ]


def option_notes(option: Option) -> list[str]:
    """What to read beside an option: the headroom warning when it is at the brim
    (:func:`explorer.plan.ranking.headroom_warning`), then its notes (:attr:`Option.notes`)."""
    warning = headroom_warning(option)
    return [*([warning] if warning else []), *option.notes]


def nothing_fits_md(result: PlanResult, misses_shown: int) -> str:
    """The callout above a table with no option, in markdown: where the misses are when some were sized
    (``misses_shown`` rows in red), else what refused every way and why (refusals by a lower bound leave no
    near miss to draw: "the weights (756.0 GiB) … need at least 11 × h100-80g")."""
    if misses_shown:
        return "**Nothing fits.** The closest misses are in red; *Why not* below says why."
    groups = refusal_groups(result)
    if not groups:
        return "**Nothing fits**, and no way was considered: no engine serves what this model offers on these cards."
    said = [
        f"{count:,} × {rule}" + (f" ({safe_html(kept[0]['way'])}: {safe_html(kept[0]['reason'])})" if kept else "")
        for rule, count, kept in groups[:2]
    ]
    more = f"; and {len(groups) - 2} more rules" if len(groups) > 2 else ""
    return (
        "**Nothing fits**, and no way came close enough to be sized in full, so there is no near miss to show. "
        f"Refused: {'; '.join(said)}{more}. *Why not* below lists every refusal."
    )


def refusal_groups(result: PlanResult) -> list[tuple[str, int, list[dict[str, str]]]]:
    """(rule, how many ways it refused, the kept refusals as rows), most frequent rule first."""
    kept: dict[str, list[dict[str, str]]] = {}
    for r in result.rejected:
        kept.setdefault(r.rule, []).append({"way": r.label, "artifact": r.artifact, "reason": r.reason})
    counts = dict(result.pruned) or {k: len(v) for k, v in kept.items()}
    return sorted(((rule, n, kept.get(rule, [])) for rule, n in counts.items()), key=lambda t: (-t[1], t[0]))


def _host_counts(option: Option) -> bool:
    """Whether the host holds part of the model itself (layers offloaded, a CPU or unified run), not only the
    few buffers a GPU run keeps there: only then is the host drawn beside the cards."""
    ev, layout = option.evaluation, option.layout
    return ev.host is not None and (ev.layers_on_host > 0 or layout.cpu or layout.unified)


def card_parts(option: Option) -> list[dict[str, Any]]:
    """Long-form rows of what each card role (and the host, when it holds layers) holds: role, part, GiB,
    usable and capacity GiB. A GPU run's host buffers are :func:`host_note`, not a near-empty row."""
    ev = option.evaluation
    cards = list(ev.cards) + ([ev.host] if ev.host is not None and _host_counts(option) else [])
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


def host_note(option: Option) -> str | None:
    """What a GPU run keeps in host RAM when the chart leaves the host out (``host RAM: 2.0 GiB …``), else None."""
    host = option.evaluation.host
    if host is None or _host_counts(option) or host.total == 0:
        return None
    return (
        f"host RAM: {gib(host.total)} ({gib(host.weights)} of weights kept on the host, "
        f"{gib(host.total - host.weights)} of buffers) of {gib(host.usable)} usable"
    )


def sweep_options(result: PlanResult, best: int = 4, misses: int = 2) -> list[Option]:
    """Options worth drawing against context: the table's first ``best`` (the options it ranks first),
    then the nearest misses."""
    return list(result.options[:best]) + near_misses(result, misses)


def option_names(result: PlanResult, options: Sequence[Option]) -> dict[str, str]:
    """Each option's name in the charts, as the table numbers it: ``#1 vLLM · 4 × h100-80g (tp4) · …``;
    a miss is ``✗ …``."""
    rank = {o.label: i for i, o in enumerate(result.options, 1)}
    return {o.label: f"#{rank[o.label]} {o.label}" if o.label in rank else f"✗ {o.label}" for o in options}


def context_sweep(
    shape: Any,
    options: Sequence[Option],
    request: PlanRequest,
    contexts: Sequence[int],
    *,
    speed: bool = True,
    names: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Each option re-checked at each context: per-card total and usable (GiB), whether it fits, tokens/s.

    Weights and overhead stay, the KV cache grows (``planner.recheck``); the
    speed estimate is recomputed too when ``speed`` (None where unknown). Each
    row's ``option`` is ``names[label]`` when given (:func:`option_names`). The
    asked context does not change an option's curve, so each option's curve is
    kept (:data:`explorer.ui.sweep_cache.SWEEPS`, keyed by :func:`_curve_key`):
    a slider move that ranks one new option among the drawn re-checks that one.
    """
    names = dict(names or {})
    blank = replace(request, context_tokens=1)
    rows = []
    for option in options:
        name = names.get(option.label) or (option.label if option.fits else f"✗ {option.label}")
        key = (shape, _curve_key(option), blank, tuple(contexts), speed)
        curve = SWEEPS.get(key)
        if curve is None:
            curve = SWEEPS.put(key, _curve(shape, option, request, contexts, speed=speed))
        rows.extend({"option": name, **point} for point in curve)
    return rows


def _curve_key(option: Option) -> tuple:
    """What a re-check of ``option`` at another context reads and a curve shows (its label, where it runs, what it
    loads, llama.cpp's ``-ngl`` and the cards or RPC servers it fills, the KV type chosen for it), and not what the
    asked context set (its KV bytes, concurrency, speed, replicas, commands): equal keys, equal curves."""
    ev = option.evaluation
    return (
        option.label,
        option.layout,
        option.gpu,
        option.node,
        option.precision,
        option.dtype,
        option.bits_per_weight,
        option.kv_dtype,
        option.asked_sequences,
        ev.n_gpu_layers,
        tuple((c.role, c.usable, c.capacity) for c in ev.cards),
    )


def _curve(shape: Any, option: Option, request: PlanRequest, contexts: Sequence[int], *, speed: bool) -> list[dict]:
    """One option's points of :func:`context_sweep`, without its name."""
    from explorer.plan.planner import recheck

    points = []
    for c in contexts:
        try:
            o = recheck(shape, option, replace(request, context_tokens=int(c)), speed=speed)
        except ExplorerError:
            continue
        card = o.per_card
        points.append(
            {
                "context": int(c),
                "total_gib": card.total / GiB,
                "usable_gib": card.usable / GiB,
                "fits": o.fits,
                "tokens_per_s": speed_of_option(o)[0] if speed else None,
            }
        )
    return points


#: columns whose figures are right-aligned and never wrap
_NUMERIC = frozenset({"#", "cards", "per card (GiB)", "max context", "max concurrency", "decode tok/s", "replicas",
                      "cluster tok/s", "TTFT (s)", "$ / M tokens"})  # fmt: skip


def rows_html(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] = TABLE_COLUMNS,
    *,
    table_id: str = "explorer-options",
    style: bool = True,
) -> str:
    """A plain HTML table of ``rows``; a row whose ``fits`` starts with ✗ is red.

    Plain HTML (not an interactive grid) so that it renders the same in a live
    app, an exported page and a Jupyter output. It takes its container's width:
    text columns wrap (the option, the command), figures do not, and a
    horizontal scroll inside the table's own box is the last resort. The look is
    one style block for the table (:func:`table_style`; figures are ``class='n'``),
    not repeated in every cell: a move of the app's slider sends the table again,
    and inline styles were half its bytes. ``style=False`` leaves the block out,
    for a page that carries it once already (the app's answer table, sent on
    every move).
    """
    head = "".join(f"<th{_numeric(c)}>{safe_html(c)}</th>" for c in columns)
    body = []
    for r in rows:
        fits = "misfit" if str(r.get("fits", "")).startswith("✗") else "fit"
        cells = []
        for c in columns:
            text = safe_html(str(r.get(c, "")))
            if c == "command" and text:
                text = f"<code>{text}</code>"
            cells.append(f"<td{_numeric(c)}>{text}</td>")
        body.append(f"<tr class='{fits}'>{''.join(cells)}</tr>")
    return (
        f"<div class='explorer-table' style='max-width:100%;overflow-x:auto'>{table_style(table_id) if style else ''}"
        f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def table_style(table_id: str = "explorer-options") -> str:
    """The ``<style>`` block of :func:`rows_html`'s table ``table_id``: borders, padding, right-aligned figures,
    red rows that do not fit."""
    t = f"#{table_id}"
    return (
        f"<style>{t}{{border-collapse:collapse;font-size:13px;width:100%}}"
        f"{t} th,{t} td{{padding:3px 6px;vertical-align:top;text-align:left;overflow-wrap:anywhere}}"
        f"{t} th{{white-space:nowrap}}{t} thead tr{{border-bottom:1px solid #ccc}}"
        f"{t} .n{{text-align:right;white-space:nowrap}}{t} tr.misfit{{color:#b91c1c;background:#fef2f2}}"
        f"{t} code{{font-size:11px;white-space:pre-wrap;overflow-wrap:anywhere}}</style>"
    )


def _numeric(column: str) -> str:
    return " class='n'" if column in _NUMERIC else ""
