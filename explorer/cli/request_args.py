"""The command line's request options, made from the request's own declarations.

Every :class:`~explorer.engines.request.PlanRequest` field declared with a
command-line option (:mod:`explorer.engines.setting`) becomes one
``add_argument`` here, its text read by the same :meth:`Setting.parse` the
app's boxes use, so the command line, the app and the request accept and
refuse the same values. :func:`request_from_args` builds the request from the
parsed options in one comprehension. ``explorer plan`` and ``explorer fit``
take them all.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

from explorer.engines.calibration import Calibration
from explorer.engines.names import ENGINES, engine_label
from explorer.engines.registry import engine_named, engine_names, use_discovery
from explorer.engines.request import PlanRequest
from explorer.engines.setting import Setting, declared_settings, with_implied
from explorer.errors import PlanError
from explorer.sources.engine_plugins import load_engine_plugins

__all__ = ["CLI_SETTINGS", "add_setting_arguments", "request_from_args", "setting_values"]

#: the request's settings the command line takes, in declaration order
CLI_SETTINGS: tuple[Setting, ...] = tuple(s for s in declared_settings(PlanRequest) if s.cli)


#: the engines of other packages (``explorer.engines`` entry points) are found when a name is not built in or
#: every engine is planned: building the arguments (``--help``) loads none
use_discovery(load_engine_plugins)
#: how ``--help`` names an engine: the built-ins, and another package's
ENGINE_METAVAR = "{" + ",".join(ENGINES) + ",…}"

#: how ``--help`` names a value of each kind
_METAVARS = {"int": "N", "float": "X", "floats": "SHARES", "text": "TEXT", "seconds": "DURATION"}


def _reader(s: Setting) -> Callable[[str], Any]:
    """argparse's ``type=`` for a setting: its :meth:`Setting.parse`, a refusal as argparse's error."""

    def read(text: str) -> Any:
        try:
            return s.parse(text)
        except PlanError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    read.__name__ = s.kind  # argparse names the type in its messages
    return read


def engine_choice(text: str) -> str:
    """argparse's ``type=`` for an engine name: a built-in, else one another package adds (loading them then).

    Raises:
        argparse.ArgumentTypeError: no engine has the name (the message lists them all).
    """
    try:
        return engine_named(text).name
    except PlanError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _help(s: Setting) -> str:
    """The setting's help, the engines' own flags, its range and its default."""
    own = ", ".join(f"{engine_label(name)} {flag}" for name, flag in s.flags.items() if flag and flag != s.cli[0])
    parts = [s.help + (f" ({own})" if own else "")]
    if s.kind in ("int", "float", "seconds"):
        parts.append(s.range_text)
    if s.kind not in ("bool", "engines") and not s.optional:
        parts.append(f"default {s.default}")
    return "; ".join(parts)


def add_setting_arguments(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    skip: Iterable[str] = (),
    only: Iterable[str] = (),
    settings: Iterable[Setting] = CLI_SETTINGS,
) -> None:
    """One option per setting with a command-line option (the request's, or ``settings``: another record's, such
    as the workload's): those in ``only`` (empty: all), but the fields in ``skip``."""
    skipped, wanted = set(skip), set(only)
    for s in settings:
        if s.field in skipped or (wanted and s.field not in wanted):
            continue
        kw: dict[str, Any] = {"dest": s.field, "help": _help(s)}
        if s.kind == "bool":
            kw |= {"action": "store_const", "const": not s.default, "default": s.default}
        elif s.kind == "engines":
            kw |= {"action": "append", "type": engine_choice, "default": None, "metavar": ENGINE_METAVAR}
        else:
            kw |= {"type": _reader(s), "default": None if s.optional else s.default, "metavar": _METAVARS.get(s.kind)}
            if s.kind == "choice":
                kw["metavar"] = "{" + ",".join(s.choices) + "}"
        p.add_argument(*s.cli, **kw)


def setting_values(args: argparse.Namespace) -> dict[str, Any]:
    """The request's settings as the options gave them (those the parser has), a given setting turning on the
    switch it implies (``--piecewise-cuda-graph-max-tokens`` turns on ``piecewise_cuda_graph``)."""
    values = {s.field: getattr(args, s.field) for s in CLI_SETTINGS if hasattr(args, s.field)}
    if "engines" in values:  # default: every engine the registry has
        values["engines"] = tuple(values["engines"] or engine_names())
    return with_implied(CLI_SETTINGS, values)


def request_from_args(args: argparse.Namespace, calibrations: tuple[Calibration, ...] = ()) -> PlanRequest:
    """The request of the parsed options (and the calibrations measured from the user's logs)."""
    return PlanRequest(**setting_values(args), calibrations=calibrations)
