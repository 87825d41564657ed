"""The app's engine settings: the request's own declarations (:mod:`explorer.engines.setting`), grouped by engine.

Every :class:`~explorer.engines.request.PlanRequest` setting that the app's
main controls do not set (context, concurrency, KV type, precision, engines)
is a box here, under its engine, keyed in the URL by its declared key; a
setting added to the request appears by itself, and the CLI reads the same
declaration, so both accept and refuse the same values.

Values are text as the user typed them (a URL carries text too); an empty
text means the request's default. :func:`request_changes` reads them into the
``dataclasses.replace`` arguments of a request, or names what does not parse.
Pure: no marimo.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.engines.registry import ENGINES_BY_NAME, engine_labels
from explorer.engines.request import PlanRequest
from explorer.engines.setting import Setting, declared_settings, with_implied
from explorer.errors import PlanError

__all__ = [
    "KEY_ALIASES",
    "SETTINGS",
    "SETTINGS_BY_KEY",
    "canonical_settings",
    "engine_groups",
    "group_title",
    "label",
    "placeholder",
    "read_text",
    "request_changes",
    "settings_text",
]

#: every setting the settings section offers, in the request's field order
SETTINGS: tuple[Setting, ...] = tuple(s for s in declared_settings(PlanRequest) if not s.main)
#: URL key -> setting
SETTINGS_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
#: an old link's URL key -> the key that replaced it (the flag was renamed: llama.cpp 0c1e57098 reads the file
#: instead of mapping it with ``--load-mode none``, its ``--no-mmap`` is gone)
KEY_ALIASES: dict[str, str] = {"no-mmap": "load-mode-none"}


def placeholder(s: Setting) -> str:
    """What an empty box means: the default, or the engine's own rule."""
    if s.optional:
        return "proportional to free memory" if s.kind == "floats" else "engine's default"
    return str(s.default)


def label(s: Setting) -> str:
    """What the setting does, with the other engines' own flags: ``no CUDA graphs (SGLang --disable-cuda-graph)``."""
    labels = engine_labels()
    others = [f"{labels.get(e, e)} {flag}" for e, flag in s.flags.items() if flag and flag != s.flag]
    return s.help + (f" ({', '.join(others)})" if others else "")


def read_text(s: Setting, text: str) -> Any:
    """The setting's value from the text in its box (see :meth:`Setting.parse`).

    Raises:
        PlanError: the text is not a value of the setting, the message starting with its flag.
    """
    try:
        return s.parse(text)
    except PlanError as e:
        raise PlanError(f"{s.flag}: {e.message}") from None


def group_title(engines: tuple[str, ...]) -> str:
    """A group's title: its engines' labels (``vLLM and SGLang``); no engine: explorer's own planning."""
    labels = engine_labels()
    return " and ".join(labels.get(e, e) for e in engines) or "Planning"


def engine_groups() -> dict[str, tuple[Setting, ...]]:
    """Title -> the settings of those engines; one engine's before the settings it shares with later engines
    (vLLM, SGLang, vLLM and SGLang, llama.cpp), explorer's own planning settings last."""
    order = list(ENGINES_BY_NAME)

    def place(engines: tuple[str, ...]) -> tuple[int, int]:
        where = [order.index(e) if e in order else len(order) for e in engines]
        return (max(where), len(where)) if where else (len(order) + 1, 0)

    keys = sorted({s.engines for s in SETTINGS}, key=place)
    return {group_title(k): tuple(s for s in SETTINGS if s.engines == k) for k in keys}


def request_changes(values: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(``dataclasses.replace`` arguments for a PlanRequest, messages for the values that do not parse).

    ``values``: URL key -> text (empty: the default). A bool's text is ``on``/``off`` (for an inverted flag,
    ``on`` means the flag is given: ``--load-mode none`` on sets ``mmap`` False). An old link's key
    (:data:`KEY_ALIASES`) is read as the key that replaced it. A setting given turns on the switch it implies
    (``--hicache-size`` turns on the hierarchical cache), as on the command line.
    """
    changes: dict[str, Any] = {}
    errors: list[str] = []
    for key, text in canonical_settings(values).items():
        setting = SETTINGS_BY_KEY.get(key)
        if setting is None:
            continue
        try:
            value = read_text(setting, text)
        except PlanError as e:
            errors.append(str(e))
            continue
        if value != setting.default:
            changes[setting.field] = value
    return with_implied(SETTINGS, changes), errors


def canonical_settings(values: Mapping[str, str]) -> dict[str, str]:
    """``values`` with each old key (:data:`KEY_ALIASES`) under the key that replaced it; the new key wins when a
    link carries both."""
    out = {KEY_ALIASES[k]: v for k, v in values.items() if k in KEY_ALIASES}
    out.update((k, v) for k, v in values.items() if k not in KEY_ALIASES)
    return out


def settings_text(values: Mapping[str, str]) -> str:
    """The settings that differ from the defaults as flags, as the engines take them:
    ``--gpu-memory-utilization 0.85 -ngl 20 --load-mode none``."""
    changes, _errors = request_changes(values)
    parts = []
    for s in SETTINGS:
        if s.field not in changes:
            continue
        value = changes[s.field]
        if s.kind == "bool":
            parts.append(s.flag if value is True or s.inverted else f"{s.flag} off")
        else:
            parts.append(f"{s.flag} {','.join(f'{v:g}' for v in value) if s.kind == 'floats' else value}")
    return " ".join(parts)
