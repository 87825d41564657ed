"""Bounded memos that say what they are keyed on, listed in one place.

The planner asks the same questions many times in one walk (a shape's weight
bytes at a precision, a stage's KV bytes, a roofline step). Each such answer
is remembered by a :func:`memo`: a :func:`functools.lru_cache` of a stated
size whose ``keyed_on`` text says what identifies an entry. Every memo is
listed in :data:`MEMOS`, and :func:`clear_memos` empties them all (tests and
benchmarks use it to measure cold runs).

Keys that include a :class:`~explorer.model.shapes.ModelShape` use the shape's
identity (see its docstring): a memo helps the object that is planned many
times, never a second shape built from the same config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class MemoInfo:
    """One registered memo.

    Attributes:
        name: ``module.function``.
        keyed_on: what identifies an entry, in words.
        maxsize: the most entries kept (least recently used dropped first).
    """

    name: str
    keyed_on: str
    maxsize: int


#: every memo of the package, by name
MEMOS: dict[str, tuple[MemoInfo, Any]] = {}


def memo(maxsize: int, *, keyed_on: str) -> Callable[[F], F]:
    """Remember up to ``maxsize`` answers of a pure function; ``keyed_on`` says what an entry's key is."""

    def wrap(func: F) -> F:
        cached = lru_cache(maxsize=maxsize)(func)
        name = f"{func.__module__}.{func.__qualname__}"
        MEMOS[name] = (MemoInfo(name=name, keyed_on=keyed_on, maxsize=maxsize), cached)
        return cached  # type: ignore[return-value]

    return wrap


def clear_memos() -> None:
    """Empty every memo (a cold start)."""
    for _info, cached in MEMOS.values():
        cached.cache_clear()
