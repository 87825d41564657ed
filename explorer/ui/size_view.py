"""The app's size mode: the workload's controls and URL keys, and ``explorer size``'s answer as the app shows it.

The workload's controls are its own declarations (:class:`~explorer.speed.workload.Workload`, each field a
:func:`~explorer.engines.setting.setting`), as the engine settings are the request's
(:mod:`explorer.ui.engine_settings`): one control a setting, keyed in the URL by its declared key (``users``,
``prompt``, ``ttft``…), read by :meth:`~explorer.engines.setting.Setting.parse`, so the app, the CLI and the JSON
accept and refuse the same values. A number is a slider over a 1-2-5 ladder inside the declaration's range (an
optional one has 0 first: not asked); a choice is a menu.

Values are text, as the URL carries them; an empty text is the declaration's default. The app opens on the
issue's chat workload (:data:`APP_WORKLOAD`: 200 users, 2,000 + 500 tokens, TTFT 1 s, TPOT 50 ms).

The answer: :func:`size_rows` (one row a cluster of :func:`explorer.plan.size.size`, best first) and
:func:`advice_md` (by how much an unmet workload misses, and what would meet it). Pure: no marimo.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from explorer.engines.setting import Setting, declared_settings
from explorer.errors import PlanError
from explorer.plan.size import SizeResult, sizing_request
from explorer.safe_text import safe_html
from explorer.speed.load import replica_load
from explorer.speed.workload import Workload
from explorer.ui.serving_lesson import frontier_rows

__all__ = [
    "APP_WORKLOAD",
    "SIZE_COLUMNS",
    "WORKLOAD_BY_KEY",
    "WORKLOAD_SETTINGS",
    "Control",
    "advice_md",
    "control_text",
    "controls",
    "frontier_of",
    "ladder",
    "read_workload",
    "size_rows",
    "workload_query",
]

#: every workload setting, in declaration order
WORKLOAD_SETTINGS: tuple[Setting, ...] = declared_settings(Workload)
#: URL key -> setting
WORKLOAD_BY_KEY: dict[str, Setting] = {s.key: s for s in WORKLOAD_SETTINGS}
#: what the app opens on where it differs from the declarations (URL key -> text): the issue's chat workload
APP_WORKLOAD: Mapping[str, str] = {"users": "200", "ttft": "1", "tpot": "0.05"}
#: the longest latency a slider offers, seconds (the declaration allows a day; a link may still carry more)
SLIDER_MAX_SECONDS = 120.0
#: where a slider starts when the declaration's least is 0 (open): seconds, and other numbers
_LEAST = {"seconds": 0.005, "float": 0.1}
#: the columns of the clusters' table, left to right
SIZE_COLUMNS = ("#", "class", "cards", "$/hour", "replicas × cards", "batch", "tok/s a user", "tok/s a GPU",
                "TTFT s", "$/M tok", "binding", "option", "command")  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Control:
    """One workload control as the app draws it.

    Attributes:
        key: the URL key (the setting's declared key).
        label: what it sets, with its flag and unit.
        kind: ``slider`` (a number) or ``menu`` (a choice).
        steps: a slider's positions (0 first where the setting is optional: not asked).
        choices: a menu's words.
        value: the position the control opens on (a number of ``steps``, or a word of ``choices``).
    """

    key: str
    label: str
    kind: str
    steps: tuple[float, ...] = ()
    choices: tuple[str, ...] = ()
    value: float | str


def ladder(s: Setting, value: float | None = None) -> tuple[float, ...]:
    """A slider's positions for a number setting: 1, 2, 5, 10… inside its range (a share: 0, 0.05 … its most),
    0 first where it is optional, and ``value`` where the ladder lacks it (a link's 300 users stays 300).

    Users (1 to 1,048,576): 0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1,000 … 500,000, 1,000,000.
    """
    low, high = s.low or 0.0, s.high or 0.0
    if s.kind == "seconds":
        high = min(high, SLIDER_MAX_SECONDS)
    if high <= 1:  # a share
        steps = [round(i * 0.05, 2) for i in range(int(high / 0.05) + 1) if i * 0.05 >= low] + [high]
    else:
        least = low if low > 0 else _LEAST.get(s.kind, 1.0)
        steps = []
        for power in range(math.floor(math.log10(least)), math.floor(math.log10(high)) + 1):
            steps += [round(m * 10.0**power, 6) for m in (1, 2, 5) if least <= m * 10.0**power <= high]
    if s.optional:
        steps.insert(0, 0.0)
    if value is not None and value not in steps:
        steps.append(value)
    return tuple(sorted({int(v) if s.kind == "int" else v for v in steps}))


def _value(s: Setting, values: Mapping[str, str]) -> Any:
    """The setting's value from its text in ``values`` (absent: the app's workload's text); where that text does
    not parse, the app's workload's value."""
    for text in (values.get(s.key), APP_WORKLOAD.get(s.key, "")):
        if text is None:
            continue
        try:
            return s.parse(text)
        except PlanError:
            continue
    return s.default


def controls(values: Mapping[str, str]) -> tuple[Control, ...]:
    """The controls of every workload setting, opened on ``values`` (URL key -> text; the app's workload where a
    key is absent or does not parse)."""
    out = []
    for s in WORKLOAD_SETTINGS:
        value = _value(s, values)
        label = _label(s)
        if s.kind == "choice":
            out.append(Control(key=s.key, label=label, kind="menu", choices=s.choices, value=value))
            continue
        shown = 0 if value is None else value
        out.append(Control(key=s.key, label=label, kind="slider", steps=ladder(s, shown), value=shown))
    return tuple(out)


def _label(s: Setting) -> str:
    """The help's first clause, the option, the unit and what 0 means: ``time per output token target (--tpot,
    seconds; 0: none)``."""
    unit = ", seconds" if s.kind == "seconds" else ""
    return f"{s.help.split(' (')[0]} ({s.cli[0]}{unit}{'; 0: none' if s.optional else ''})"


def control_text(key: str, value: Any) -> str:
    """A control's value as the URL carries it: 0 of an optional number is empty (not asked)."""
    s = WORKLOAD_BY_KEY[key]
    if s.kind == "choice":
        return str(value)
    if s.optional and not value:
        return ""
    return str(int(value)) if s.kind == "int" else f"{value:g}"


def read_workload(values: Mapping[str, str]) -> tuple[Workload | None, list[str]]:
    """(the workload of ``values``, messages for what does not parse). ``values``: URL key -> text, every key of
    the workload (an absent key: the app's workload's text). None where the settings together are not a
    workload (users and a rate both given: the message says so)."""
    fields: dict[str, Any] = {}
    errors: list[str] = []
    for s in WORKLOAD_SETTINGS:
        try:
            fields[s.field] = s.parse(values.get(s.key, APP_WORKLOAD.get(s.key, "")))
        except PlanError as e:
            errors.append(f"{s.cli[0]}: {e.message}")
            fields[s.field] = _value(s, {})
    try:
        return Workload(**fields), errors
    except PlanError as e:
        return None, [*errors, e.message]


def workload_query(values: Mapping[str, str]) -> dict[str, str]:
    """The URL keys of ``values`` whose text differs from the app's workload's as the controls write it (an empty
    text where the app's workload asks a value: the link says the user cleared it)."""
    out = {}
    for s in WORKLOAD_SETTINGS:
        text = values.get(s.key)
        if text is not None and text != control_text(s.key, _value(s, {})):
            out[s.key] = text
    return out


def size_rows(result: SizeResult, limit: int = 10) -> list[dict[str, Any]]:
    """The clusters of ``result``, best first, as the table's rows (figures as shown; ``fits`` ✗ where the
    workload is not met): the class, the cards (on the user's own cluster: ``12 of your 8``), their cost an hour,
    how a replica runs, and the option with its launch command."""
    answer = result.workload.answer_tokens
    rows = []
    for i, c in enumerate(result.clusters[:limit], start=1):
        s, p = c.sizing, c.sizing.point
        per_m = s.usd_per_million_tokens(answer) if s.met else None
        # disaggregated: the decode replicas + the prefill ones
        reps = f"{s.replicas} + {s.prefill_replicas} prefill" if s.prefill_replicas else f"{s.replicas}"
        rows.append({
            "#": i,
            "class": c.gpu_class + (" (yours)" if c.own else ""),
            "cards": f"{s.cards:,}" + (f" of your {c.own_cards:,}" if c.own else ""),
            "$/hour": "-" if s.usd_per_hour is None else f"{s.usd_per_hour:,.2f}",
            "replicas × cards": f"{reps} × {s.cards_per_replica}",
            "batch": f"{p.batch:,}" if s.met else "-",
            "tok/s a user": f"{1 / p.tpot_s:,.1f}",
            "tok/s a GPU": f"{s.output_tokens_per_s(answer) / s.cards:,.0f}" if s.met else "-",
            "TTFT s": f"{s.ttft_s:.2f}" if math.isfinite(s.ttft_s) else "∞",
            "$/M tok": "-" if per_m is None else f"{per_m:.3f}",
            "binding": s.binding if s.met else f"✗ misses {_missed(s.shortfall)}",
            "fits": "✓" if s.met else "✗",
            "option": c.option.label,
            "command": c.option.evaluation.command,
        })  # fmt: skip
    return rows


def _missed(shortfall: Mapping[str, float]) -> str:
    """``TPOT 1.42 × its target, TTFT never`` (never: prompts arrive faster than any batch prefills them)."""
    return ", ".join(
        f"{k.upper()} {v:.2f} × its target" if math.isfinite(v) else f"{k.upper()} never" for k, v in shortfall.items()
    )


def advice_md(result: SizeResult) -> str:
    """Markdown for an unmet workload: by how much the closest cluster misses, and what would meet it (empty when
    a cluster meets it)."""
    if result.met:
        return ""
    lines = "".join(f"\n- {safe_html(line)}" for line in result.advice)
    return f"**No cluster of the {len(result.searched)} classes searched meets this workload.**{lines}"


def frontier_of(result: SizeResult, shape, request=None, *, top: int = 3) -> list[dict[str, Any]]:
    """The frontier of the first ``top`` clusters of ``result`` that run different options (the user's cluster
    running the way a class's row runs is drawn once, as the table ranks it first), each a replica of its option as
    :func:`explorer.plan.size.size` planned it (``request``'s engine settings at the workload's context): for each
    batch of :data:`explorer.ui.serving_lesson.BATCH_STEPS` up to twice what its KV cache holds, a user's tokens/s
    and the tokens/s each card of the replica serves (the replica's over its cards; prefill and decode together),
    whether the KV cache holds the batch and whether the targets are met, under the option's label numbered as
    the table ranks it."""
    workload = result.workload
    planned = sizing_request(request, workload)
    rows, drawn = [], set()
    for i, cluster in enumerate(result.clusters, start=1):
        if len(drawn) == top:
            break
        if cluster.option.label in drawn:  # the user's cluster running a class's own way: the same curve
            continue
        load = replica_load(cluster.option, shape, workload, planned)
        if load is None:
            continue
        drawn.add(cluster.option.label)
        name = f"#{i} {cluster.option.label}" + (" (yours)" if cluster.own else "")
        cards = max(1, cluster.option.layout.cards)
        for r in frontier_rows(load):
            if r["batch"] > max(2 * load.capacity, 2):
                break
            rows.append({**r, "option": name, "gpu_tokens_per_s": r["gpu_tokens_per_s"] / cards})
    return rows
