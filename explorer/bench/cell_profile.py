"""What one move costs the server, cell by cell, read from the websocket frames marimo sends.

A ``marimo run`` page hears about every cell that runs: ``cell-op`` frames (the
status, ``queued`` → ``running`` → ``idle``, each stamped with the server's
clock, and the output) and ``execution`` frames (the attempt's phases). Grouped
by cell, a move's frames say which cells ran, how long each ran on the server
(its ``running`` stamp to its ``idle`` stamp) and how many messages and bytes it
sent. Frames that name no cell (the run's end, a UI element's message, …) are
grouped by their ``op``.

Cells are named by what they define (``result, plan_ms, chosen``), else by the
first line of their code, read from the notebook with marimo's own loader so
the ids match the served ones (marimo numbers a file's cells the same way each
time it loads it).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True, slots=True)
class CellCost:
    """One cell's (or one frame kind's) share of a move.

    Attributes:
        name: the cell's name (:func:`cell_names`), or ``(op)`` for frames that name no cell.
        messages: frames received.
        bytes_count: their UTF-8 bytes.
        server_ms: the server's time from the cell's ``running`` stamp to its ``idle`` stamp (ms); None when the
            cell did not run in the move (only its output or status changed) or for frames that name no cell.
        ended_ms: the cell's last ``idle`` stamp, ms after the move's key was pressed (``since_s``); None as above.
    """

    name: str
    messages: int
    bytes_count: int
    server_ms: float | None
    ended_ms: float | None = None


def cell_names(notebook: Path) -> dict[str, str]:
    """Cell id -> a short name: the names it defines (at most three), else its first line of code."""
    from marimo._ast.load import load_app  # the bench's own dependency; never imported by the app

    app = load_app(str(notebook))
    if app is None:
        return {}
    out: dict[str, str] = {}
    for cell_id, cell in app._cell_manager.valid_cells():
        defs = sorted(d for d in cell.defs if not d.startswith("_"))
        first = next((line.strip() for line in cell._cell.code.splitlines() if line.strip()), "")
        out[cell_id] = ", ".join(defs[:3]) + (" …" if len(defs) > 3 else "") if defs else first[:48]
    return out


def _parsed(frame: str | bytes) -> dict:
    try:
        message = json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        return {}
    return message if isinstance(message, dict) else {}


def cell_costs(frames: Iterable[str | bytes], names: Mapping[str, str], since_s: float = 0.0) -> list[CellCost]:
    """The frames a page received during one move, grouped by cell (most bytes first); ``since_s`` is when the
    move began (s since the epoch: the server's stamps are on the same machine's clock)."""
    messages: dict[str, int] = {}
    sizes: dict[str, int] = {}
    started: dict[str, float] = {}
    ran_ms: dict[str, float] = {}
    ended_s: dict[str, float] = {}
    for frame in frames:
        message = _parsed(frame)
        data = message.get("data") if isinstance(message.get("data"), dict) else {}
        cell_id = data.get("cell_id")
        key = names.get(cell_id, cell_id) if isinstance(cell_id, str) else f"({message.get('op', '?')})"
        messages[key] = messages.get(key, 0) + 1
        sizes[key] = sizes.get(key, 0) + len(frame.encode() if isinstance(frame, str) else frame)
        if message.get("op") == "cell-op" and isinstance(data.get("timestamp"), int | float):
            if data.get("status") == "running":
                started[key] = data["timestamp"]
            elif data.get("status") == "idle" and key in started:
                ran_ms[key] = ran_ms.get(key, 0.0) + (data["timestamp"] - started.pop(key)) * 1000
                ended_s[key] = data["timestamp"]
    costs = [
        CellCost(
            name=k,
            messages=messages[k],
            bytes_count=sizes[k],
            server_ms=ran_ms.get(k),
            ended_ms=(ended_s[k] - since_s) * 1000 if k in ended_s else None,
        )
        for k in messages
    ]
    return sorted(costs, key=lambda c: (-c.bytes_count, c.name))


def profile_report(moves: Sequence[Sequence[CellCost]]) -> str:
    """A markdown table over ``moves``: for each cell, in how many moves it ran or sent, and its medians
    (its time on the server, when it ended after the key press, its messages and bytes), in the order the
    cells end.

    The medians are over the moves it appears in; the last row sums every cell's median (a typical move).
    """
    by_name: dict[str, list[CellCost]] = {}
    for move in moves:
        for cost in move:
            by_name.setdefault(cost.name, []).append(cost)
    lines = [
        f"| cell (or frame kind) | in moves (of {len(moves)}) | server ms | ended at ms | messages | bytes |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    total_ms = total_messages = total_bytes = 0.0
    rows = sorted(by_name.items(), key=lambda kv: (_median_of(kv[1], "ended_ms") or float("inf"), kv[0]))
    for name, costs in rows:
        ms, ended = _median_of(costs, "server_ms"), _median_of(costs, "ended_ms")
        count = statistics.median(c.messages for c in costs)
        size = statistics.median(c.bytes_count for c in costs)
        total_ms, total_messages, total_bytes = total_ms + (ms or 0.0), total_messages + count, total_bytes + size
        shown = [f"{x:,.1f}" if x is not None else "—" for x in (ms, ended)]
        lines.append(f"| {name} | {len(costs)} | {shown[0]} | {shown[1]} | {count:,.0f} | {size:,.0f} |")
    lines.append(f"| all | | {total_ms:,.1f} | | {total_messages:,.0f} | {total_bytes:,.0f} |")
    return "\n".join(lines)


def _median_of(costs: Sequence[CellCost], attribute: str) -> float | None:
    values = [getattr(c, attribute) for c in costs if getattr(c, attribute) is not None]
    return statistics.median(values) if values else None
