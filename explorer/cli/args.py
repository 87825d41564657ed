"""Every number the command line takes, checked at the edge: the argparse ``type=`` of each option.

Each function here returns a checker for one kind of number, with its
allowed range; argparse calls it on the text typed and, on a bad value,
prints ``explorer plan: error: argument --context: -1 is out of range: …``
with the usage line and exits with status 2. No command reads a number any
other way, so NaN, infinities, negative counts and fractions above 1 stop
here, before anything is computed.

The request's own settings (``--context``, ``--ngl``, ``--swap-space``…) are
read by their declarations instead (:mod:`explorer.cli.request_args`), as the
app reads them. The core checks again where figures are built (``PlanRequest``,
per-card memory, speed estimates): these checkers only make the message name
the option and what it allows.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from explorer.limits import MAX_CONTEXT_TOKENS, MIN_SHARE

__all__ = [
    "context_tokens",
    "fraction",
    "int_range",
    "seconds",
]


def _number(text: str, kind: type) -> float | int:
    try:
        value = kind(text.strip())
    except (ValueError, OverflowError):
        name = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {name}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def int_range(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """A whole number in ``[lo, hi]``: ``--context 32768``, ``--workers 4``."""

    def check(text: str) -> int:
        value = _number(text, int)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value:,} is out of range: {what or 'it'} must be {lo:,} to {hi:,}")
        return value

    check.__name__ = "int_range"  # argparse names the type in its messages
    return check


def fraction(what: str = "the share") -> Callable[[str], float]:
    """A share of a card in ``[MIN_SHARE, 1]`` (1 % to all of it): ``--gpu-memory-utilization 0.9``."""

    def check(text: str) -> float:
        value = float(_number(text, float))
        if not MIN_SHARE <= value <= 1:
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: {what} must be {MIN_SHARE:g} to 1")
        return value

    check.__name__ = "fraction"
    return check


def seconds(hi: float) -> Callable[[str], float]:
    """A duration in ``(0, hi]`` seconds: ``--timeout 30``."""

    def check(text: str) -> float:
        value = float(_number(text, float))
        if not 0 < value <= hi:
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: seconds must be above 0 and at most {hi:,g}")
        return value

    check.__name__ = "seconds"
    return check


#: ``explorer shape --context``: tokens of one sequence (the request's range; shape plans nothing, so it does not
#: import the engines that :mod:`explorer.cli.request_args` lists)
context_tokens = int_range(1, MAX_CONTEXT_TOKENS, "the context")
