"""One declaration per request setting: what it is, its range, its flags, and how a launch carries it.

Each field of :class:`~explorer.engines.request.PlanRequest` is declared with
:func:`setting`, which stores a :class:`Setting` in the field's metadata. From
that one declaration come

- the request's validation (:meth:`Setting.check`, one loop in ``__post_init__``);
- the command line's options (``explorer.cli.request_args``: ``add_argument`` in a loop);
- the app's and the Jupyter widget's settings boxes and the URL keys (``explorer.ui.engine_settings``);
- the flags a launch command carries (:func:`launch_flags`).

Text (typed on the command line or in a box, or read from a URL) becomes a
value through :meth:`Setting.parse`, which refuses exactly what
:meth:`Setting.check` refuses, so the CLI, the app and the request accept and
refuse the same values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from explorer.errors import PlanError
from explorer.limits import MAX_TENSOR_SPLIT_PARTS
from explorer.memo import memo

__all__ = ["Kind", "Launch", "Setting", "declared_settings", "launch_flags", "setting", "with_implied"]

#: how a setting's text is read: a switch, a whole number, a number, one of a few words, free text,
#: comma-separated shares (``3,1``), engine names, or a duration in seconds (``1s``, ``50ms``, ``0.2``)
Kind = Literal["bool", "int", "float", "choice", "text", "floats", "engines", "seconds"]
#: how a setting enters a launch command: ``echo``: :func:`launch_flags` writes the flag (and the value) when it
#: differs from its default; ``engine``: the engine writes the value it resolved (the layout's tp, the context,
#: the resolved ``-ngl``, the KV type as the engine spells it); ``none``: explorer's own planning assumption
Launch = Literal["echo", "engine", "none"]

_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One request setting, declared once on its ``PlanRequest`` field.

    Attributes:
        field: the ``PlanRequest`` field (filled in by :func:`declared_settings`).
        kind: how its text is read (:data:`Kind`).
        default: the request's default value.
        help: one line of help: what it does.
        flags: engine name -> the engine's own flag as the engine spells it (``--gpu-memory-utilization``,
            ``-ngl``; empty: the engine reads it but has no flag); the engines it belongs to. Empty: explorer's own
            setting.
        cli: explorer's command-line options (``--ngl``; an alias after the first); empty: not on the command line.
        url: its URL query key where it differs from the first option without dashes.
        launch: how it enters the launch command (:data:`Launch`).
        optional: None is a value (the engine's own rule); an empty text means None.
        low: the least a number may be (inclusive unless ``low_open``); for ``floats``, each share.
        high: the most a number may be (inclusive); for ``floats``, each share.
        low_open: the number must be above ``low``.
        choices: the values a ``choice`` may take.
        inverted: the switch turns the field off (``--no-mmap`` sets ``mmap`` False).
        whole: a ``float`` must be a whole number (SGLang's ``--hicache-size`` takes whole GB).
        implies: a switch this setting turns on when given (``--piecewise-cuda-graph-max-tokens`` turns on
            ``piecewise_cuda_graph``).
        main: the app sets it with its main controls (context, concurrency, KV type, weights, engine), not in
            the engine settings.
    """

    field: str = ""
    kind: Kind
    default: Any = None
    help: str
    flags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cli: tuple[str, ...] = ()
    url: str | None = None
    launch: Launch = "engine"
    optional: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] = ()
    inverted: bool = False
    whole: bool = False
    implies: str | None = None
    main: bool = False

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines it belongs to (empty: every engine, as explorer's planning assumption)."""
        return tuple(self.flags)

    @property
    def key(self) -> str:
        """Its URL query key: ``url``, else the first command-line option without dashes, else the field."""
        return self.url or (self.cli[0].lstrip("-") if self.cli else self.field.replace("_", "-"))

    @property
    def flag(self) -> str:
        """The flag people know it by: its first engine's (an empty one: the engine has none), else explorer's
        option."""
        return next((f for f in self.flags.values() if f), self.cli[0] if self.cli else self.field)

    @property
    def range_text(self) -> str:
        """What it must be, in words: ``a whole number from 1 to 1,048,576``, ``one of on, off, auto``."""
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        low, high = _shown(self.low), _shown(self.high)
        if self.kind == "int":
            return f"a whole number from {low} to {high}"
        if self.kind == "float":
            what = "a whole number" if self.whole else "a finite number"
            return f"{what} from {'above ' if self.low_open else ''}{low} to {high}"
        if self.kind == "seconds":
            return f"a duration from {'above ' if self.low_open else ''}{low} s to {high} s (1s, 50ms, 0.2)"
        if self.kind == "floats":
            return f"at most {MAX_TENSOR_SPLIT_PARTS:,} finite shares from {low} to {high} (proportions), not all 0"
        return "on or off" if self.kind == "bool" else "text"

    def refusal(self, value: Any) -> str | None:
        """Why ``value`` is not a value of this setting (None: it is)."""
        if value is None:
            return None if self.optional else "it must be given"
        if self.kind == "bool":
            return None if isinstance(value, bool) else "it must be True or False"
        if self.kind == "choice":
            return None if value in self.choices else f"it must be {self.range_text}"
        if self.kind == "text":
            return None if isinstance(value, str) else "it must be text"
        if self.kind == "engines":
            ok = isinstance(value, tuple) and value and all(isinstance(v, str) for v in value)
            return None if ok else "it must name at least one engine"
        if self.kind == "floats":
            return None if self._shares_ok(value) else f"it must be {self.range_text}"
        return None if self._number_ok(value) else f"it must be {self.range_text}"

    def _number_ok(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        above_low = value > self.low if self.low_open else value >= self.low  # NaN fails both
        return above_low and value <= self.high and (not self.whole or float(value).is_integer())

    def _shares_ok(self, value: Any) -> bool:
        if not isinstance(value, tuple) or not 0 < len(value) <= MAX_TENSOR_SPLIT_PARTS:
            return False
        each = all(not isinstance(v, bool) and isinstance(v, int | float) and self.low <= v <= self.high for v in value)
        return each and any(value)

    def check(self, value: Any) -> None:
        """Raise PlanError naming the field when ``value`` is not a value of this setting."""
        if (why := self.refusal(value)) is not None:
            raise PlanError(f"{self.field} is {value!r}; {why}")

    def parse(self, text: str) -> Any:
        """The value of the text typed (an empty text: the default, or None when optional).

        A switch reads ``on``/``off`` (for an inverted switch, ``on`` means the flag is given: ``--no-mmap``
        on is ``mmap`` False); a choice matches its words in any case.

        Raises:
            PlanError: the text is not a value of this setting (the message leaves the option's name to the caller).
        """
        text = str(text).strip()
        if text == "":
            return None if self.optional else self.default
        if self.kind == "bool":
            if text.lower() not in _TRUE + _FALSE:
                raise PlanError(f"{text!r} is not on or off")
            return (text.lower() in _TRUE) != self.inverted
        if self.kind == "choice":
            value = next((c for c in self.choices if c.lower() == text.lower()), None)
            if value is None:
                raise PlanError(f"{text!r} is not {self.range_text}")
            return value
        if self.kind in ("text", "engines"):
            return text if self.kind == "text" else tuple(t.strip() for t in text.split(",") if t.strip())
        if self.kind == "floats":
            parts = text.split(",")
            if len(parts) > MAX_TENSOR_SPLIT_PARTS:
                raise PlanError(f"{len(parts):,} shares is out of range: it must be {self.range_text}")
            value = tuple(_number(part, float) for part in parts)
        elif self.kind == "seconds":
            value = _seconds(text)
        else:
            value = _number(text, int if self.kind == "int" else float)
        if (why := self.refusal(value)) is not None:
            shown = text[:80] if self.kind == "floats" else f"{value:,}" if self.kind == "int" else f"{value:g}"
            raise PlanError(f"{shown} is out of range: {why}")
        return value


def _shown(value: float | None) -> str:
    """A bound as people read it: ``1,048,576``, ``0.01``."""
    if value is None:
        return "?"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _number(text: str, kind: type) -> float | int:
    """``int(text)`` or ``float(text)`` (``1_000`` allowed), finite, or PlanError saying what it is not."""
    try:
        value = kind(text.strip())
    except (ValueError, OverflowError):
        raise PlanError(f"{text.strip()!r} is not {'a whole number' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise PlanError(f"{text.strip()!r} is not a finite number")
    return value


def _seconds(text: str) -> float:
    """Seconds from ``1s``, ``50ms`` or a bare number of seconds, or PlanError saying what it is not."""
    text = text.strip().lower()
    scale, number = (1e-3, text[:-2]) if text.endswith("ms") else (1.0, text.removesuffix("s"))
    try:
        return _number(number, float) * scale
    except PlanError:
        raise PlanError(f"{text!r} is not a duration (1s, 50ms, or seconds as a number)") from None


def setting(default: Any = None, **declaration: Any) -> Any:
    """A ``PlanRequest`` field with its :class:`Setting` (``default`` and the declaration) in its metadata."""
    declared = Setting(default=default, **declaration)
    return dataclasses.field(default=default, metadata={"setting": declared})


def declared_settings(record: Any) -> tuple[Setting, ...]:
    """Every declared setting of a dataclass (or one of its instances), in field order, each knowing its field."""
    return _declared(record if isinstance(record, type) else type(record))


@memo(16, keyed_on="the dataclass declaring the settings")
def _declared(cls: type) -> tuple[Setting, ...]:
    return tuple(
        dataclasses.replace(f.metadata["setting"], field=f.name)
        for f in dataclasses.fields(cls)
        if "setting" in f.metadata
    )


def with_implied(settings: Iterable[Setting], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (field -> value) with the switch each given setting implies turned on (``--hicache-size 10``
    turns on ``hierarchical_cache``): the command line and the app read a request the same way."""
    out = dict(values)
    for s in settings:
        if s.implies and out.get(s.field, s.default) not in (None, s.default):
            out[s.implies] = True
    return out


def launch_flags(request: Any, engine: str, *, resolved: Mapping[str, Any] | None = None) -> list[str]:
    """The flags of ``engine``'s launch command for the settings whose ``launch`` is ``echo``, in declaration
    order: each setting ``resolved`` names with the value the engine resolved (written even at its default: the
    engine's default depends on the card and the release), else each one the user set to other than its default.
    A switch is its flag alone, else ``flag value`` (``--max-num-seqs 64``)."""
    resolved = resolved or {}
    parts = []
    for s, flag in _echoed(type(request), engine):
        value = resolved.get(s.field, getattr(request, s.field))
        if s.field not in resolved and value in (None, s.default):
            continue
        parts.append(flag if s.kind == "bool" else f"{flag} {value:g}" if s.kind == "float" else f"{flag} {value}")
    return parts


@memo(16, keyed_on="the dataclass declaring the settings, the engine")
def _echoed(cls: type, engine: str) -> tuple[tuple[Setting, str], ...]:
    """The settings ``engine``'s launch command echoes (``launch`` is ``echo`` and the engine has a flag), each with
    its flag, in declaration order: 3 of vLLM's 36, 9 of SGLang's (a command is written for every way a plan
    weighs, so :func:`launch_flags` walks these, not all)."""
    return tuple((s, s.flags[engine]) for s in _declared(cls) if s.launch == "echo" and s.flags.get(engine))
