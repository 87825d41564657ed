"""The app's per-card memory chart drawn on the server as inline SVG: a slider move sends a few KB of markup and
the page parses no vega-lite spec and embeds no chart (issue 27 §1: the per-card chart's re-embed was ~80 ms of
the page's main-thread time a move).

Rows in (:func:`explorer.ui.plan_rows.card_parts`: one row a card role and part, sizes in GiB), an ``<svg>``
string out: a bar a card role, its parts stacked left to right in :data:`explorer.ui.vega.PARTS`' colours
(the vega-lite chart's, which Jupyter still draws), over a grey bar of the card's whole memory (what the parts
leave is its free room), a black tick at what the engine may use, labelled. Every length is proportional to
bytes on one scale, shown in GiB (1024³ bytes) on the axis. The ``<title>`` and ``<desc>`` say the same in words
for a screen reader; every bar carries its own ``<title>`` (the browser's tooltip). Attributes are in single
quotes: the websocket's JSON frame escapes none of them (every text is :func:`safe_html`'s, which leaves no quote).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from explorer.safe_text import safe_html
from explorer.ui.vega import PART_COLOURS, PARTS

__all__ = ["FREE_COLOUR", "SVG_WIDTH", "card_memory_svg", "gib_per_px", "label_width", "title_lines"]

#: the viewBox's width: the app's main column at 1,024 px (sidebar 340 px) is about 650 px, so text stays near
#: its stated size there and the chart scales with wider columns
SVG_WIDTH = 640
FREE_COLOUR = "#e5e7eb"
_LABEL_W = 150  # the card roles' column, left of the bars, at its narrowest; a longer role widens it
_LABEL_MAX_W = 300  # ... up to this: a longer role is cut with "…" (its bars' tooltips and <desc> keep it whole)
_CHAR_W = 6.2  # about the width of an 11 px sans-serif character
_RIGHT_PAD = 78  # room for the "usable 79.1" label right of the widest bar
_TOP = 44  # title and subtitle
_TITLE_CHARS = 88  # a title line's characters at 13 px bold (about 6 px each) across the viewBox; longer wraps at " · "
_TITLE_LINE_H = 17
_ROW_H = 30
_AXIS_H = 34
_LEGEND_H = 22
_MIN_LABELLED_PX = 34  # a part narrower than this carries no figure inside it


def _nice_step(top_gib: float) -> float:
    """An axis step of 1, 2 or 5 × 10^n GiB that gives four to eight ticks up to ``top_gib``."""
    raw = max(top_gib, 1e-9) / 5
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _axis_top(rows: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """The axis' end and step in GiB: the largest of any card's memory, usable room and stacked parts."""
    stacks: dict[int, float] = {}
    for r in rows:
        stacks[r["order"]] = stacks.get(r["order"], 0.0) + r["gib"]
    top = max([*stacks.values(), *(r["capacity_gib"] for r in rows), *(r["usable_gib"] for r in rows)], default=1.0)
    step = _nice_step(top)
    return step * math.ceil(top / step), step


def label_width(rows: Sequence[Mapping[str, Any]]) -> float:
    """The card roles' column (viewBox units): wide enough for the longest role ("stage 1 of 8 (layers 0–6),
    2 cards (×2)" needs about 260), between :data:`_LABEL_W` and :data:`_LABEL_MAX_W`."""
    longest = max((len(r["role"]) for r in rows), default=0)
    return min(max(float(_LABEL_W), longest * _CHAR_W + 14), float(_LABEL_MAX_W))


def _plot_width(left: float) -> float:
    """The bars' room right of a card roles' column ``left`` wide."""
    return SVG_WIDTH - left - _RIGHT_PAD


def gib_per_px(rows: Sequence[Mapping[str, Any]]) -> float:
    """GiB a pixel of bar length (in viewBox units) for these rows: every bar is drawn on this one scale."""
    return _axis_top(rows)[0] / _plot_width(label_width(rows))


def _shown_role(role: str, left: float) -> str:
    """``role`` as its column shows it: whole, or cut with "…" where it would run past the chart's left edge."""
    room = int((left - 14) / _CHAR_W)
    return role if len(role) <= room else role[: max(room - 1, 1)].rstrip() + "…"


def _fmt(value: float) -> str:
    return f"{value:,.1f}"


def _num(value: float) -> str:
    """A coordinate, short: two decimals, no trailing zeros."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _card_bars(role: str, parts: Sequence[Mapping[str, Any]], y: float, per_px: float, left: float) -> list[str]:
    """One card role's row, its bars starting at ``left``: its label, the card's memory (grey), its parts
    stacked, the usable tick."""
    first = parts[0]
    capacity_px, usable_px = first["capacity_gib"] / per_px, first["usable_gib"] / per_px
    mid = y + _ROW_H / 2
    out = [
        f"<text x='{_num(left - 8)}' y='{_num(mid)}' text-anchor='end' dominant-baseline='middle'>"
        f"{safe_html(_shown_role(role, left))}</text>",
        f"<rect x='{_num(left)}' y='{_num(mid - 11)}' width='{_num(capacity_px)}' height='22' fill='{FREE_COLOUR}'>"
        f"<title>{safe_html(role)}: the card's memory, {_fmt(first['capacity_gib'])} GiB</title></rect>",
    ]
    x = left
    for part in sorted(parts, key=lambda p: p["part_order"]):
        width = part["gib"] / per_px
        colour = PART_COLOURS[PARTS.index(part["part"])]
        out.append(
            f"<rect class='part' data-part='{part['part']}' x='{_num(x)}' y='{_num(mid - 8)}' width='{_num(width)}' "
            f"height='16' fill='{colour}'><title>{safe_html(role)}: {part['part']}, {part['gib']:,.2f} GiB</title></rect>"
        )
        if width >= _MIN_LABELLED_PX:
            out.append(
                f"<text x='{_num(x + width / 2)}' y='{_num(mid)}' text-anchor='middle' dominant-baseline='middle' "
                f"fill='white' font-size='10'>{_fmt(part['gib'])}</text>"
            )
        x += width
    tick = left + usable_px
    out += [
        f"<rect class='usable' x='{_num(tick - 1.5)}' y='{_num(mid - 13)}' width='3' height='26' fill='black'>"
        f"<title>{safe_html(role)}: the engine may use {_fmt(first['usable_gib'])} GiB</title></rect>",
        f"<text x='{_num(tick + 5)}' y='{_num(mid)}' dominant-baseline='middle' font-size='10'>"
        f"usable {_fmt(first['usable_gib'])}</text>",
    ]
    return out


def _axis(y: float, top: float, step: float, per_px: float, left: float) -> list[str]:
    """The GiB axis under the bars (from ``left``): a line, a tick and a figure every ``step`` GiB, its title."""
    right = left + top / per_px
    out = [f"<line x1='{_num(left)}' x2='{_num(right)}' y1='{y}' y2='{y}' stroke='#888'/>"]
    for i in range(round(top / step) + 1):
        x = left + i * step / per_px
        out.append(f"<line x1='{_num(x)}' x2='{_num(x)}' y1='{y}' y2='{y + 4}' stroke='#888'/>")
        out.append(f"<text x='{_num(x)}' y='{y + 14}' text-anchor='middle' font-size='10'>{i * step:,g}</text>")
    out.append(
        f"<text x='{_num((left + right) / 2)}' y='{y + 28}' text-anchor='middle' font-size='11'>GiB (1024³ bytes)</text>"
    )
    return out


def _legend(y: float) -> list[str]:
    """The parts' colours as the vega-lite chart's legend, then the free room and the usable tick."""
    entries = [*zip(PARTS, PART_COLOURS, strict=True), ("free", FREE_COLOUR)]
    out, x = [], float(_LABEL_W)
    for name, colour in entries:
        out.append(f"<rect x='{_num(x)}' y='{y}' width='10' height='10' fill='{colour}'/>")
        out.append(f"<text x='{_num(x + 14)}' y='{y + 9}' font-size='11'>{name}</text>")
        x += 26 + 6 * len(name)
    out.append(f"<rect x='{_num(x)}' y='{y - 2}' width='3' height='14' fill='black'/>")
    out.append(f"<text x='{_num(x + 8)}' y='{y + 9}' font-size='11'>usable</text>")
    return out


def _description(roles: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The chart in words, a sentence a card role: its parts, its total, its usable room and memory in GiB."""
    sentences = []
    for role, parts in roles.items():
        held = ", ".join(f"{p['part']} {_fmt(p['gib'])}" for p in sorted(parts, key=lambda p: p["part_order"]))
        total = sum(p["gib"] for p in parts)
        sentences.append(
            f"{role}: {held}; {_fmt(total)} GiB in all, of {_fmt(parts[0]['usable_gib'])} GiB usable "
            f"and {_fmt(parts[0]['capacity_gib'])} GiB on the card."
        )
    return " ".join(sentences)


def title_lines(title: str, width: int = _TITLE_CHARS) -> list[str]:
    """``title`` in lines of at most ``width`` characters, broken after its `` · `` separators (SVG text does not
    wrap); a part longer than a line stays whole on a line of its own."""
    parts = title.split(" · ")
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines[-1] += " ·"
            lines.append(part)
    return lines


def card_memory_svg(rows: Sequence[Mapping[str, Any]], *, title: str, chart_id: str = "explorer-cards") -> str:
    """What each card role holds as an inline ``<svg>`` (a string): ``rows`` from
    :func:`explorer.ui.plan_rows.card_parts`, every bar's length its GiB over :func:`gib_per_px`."""
    roles: dict[str, list[Mapping[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (r["order"], r["part_order"])):
        roles.setdefault(r["role"], []).append(r)
    top, step = _axis_top(rows)
    left = label_width(rows)
    per_px = top / _plot_width(left)  # gib_per_px(rows), from the axis and the column already found
    lines = title_lines(title)
    below_title = _TOP + _TITLE_LINE_H * (len(lines) - 1)
    axis_y = below_title + _ROW_H * len(roles) + 4
    height = axis_y + _AXIS_H + _LEGEND_H
    body = [
        f"<text x='0' y='{16 + _TITLE_LINE_H * i}' font-size='13' font-weight='bold'>{safe_html(line)}</text>"
        for i, line in enumerate(lines)
    ]
    body.append(
        f"<text x='0' y='{below_title - 11}' font-size='11' fill='#555'>GiB (1024³ bytes); grey: the card's memory "
        "(free where no part covers it); black tick: what the engine may use</text>"
    )
    for i, (role, parts) in enumerate(roles.items()):
        body += _card_bars(role, parts, below_title + i * _ROW_H, per_px, left)
    body += _axis(axis_y, top, step, per_px, left) + _legend(axis_y + _AXIS_H + 4)
    return (
        f"<svg id='{chart_id}' role='img' aria-labelledby='{chart_id}-title {chart_id}-desc' "
        f"viewBox='0 0 {SVG_WIDTH} {height}' width='100%' style='max-width:{SVG_WIDTH * 1.25:g}px' "
        f"font-family='sans-serif' font-size='11' xmlns='http://www.w3.org/2000/svg'>"
        f"<title id='{chart_id}-title'>{safe_html(title)}</title>"
        f"<desc id='{chart_id}-desc'>{safe_html(_description(roles))}</desc>" + "".join(body) + "</svg>"
    )
