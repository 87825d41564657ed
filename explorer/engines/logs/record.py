"""What an engine's start-up log says: the record the three readers fill, and the number helpers they share.

Byte figures are int counts of bytes: the engines print GiB (vLLM; SGLang
writes "GB" but divides by 2³⁰) or MiB (llama.cpp) with two decimals, so a
figure is exact to ±0.005 of its unit.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from explorer.units import GiB, MiB

#: a number as the engines print them
NUMBER = r"(-?\d+(?:\.\d+)?)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineLog:
    """One engine start-up, as its log tells it.

    Attributes:
        engine: ``vllm``, ``sglang`` or ``llamacpp``.
        version: the engine's version or build, when printed.
        model: the model as the log names it (a Hub id, a local path, or llama.cpp's ``general.name``).
        card: the device name, when printed (``NVIDIA GeForce RTX 3090``).
        cards: cards one replica used (tp × pp; llama.cpp: devices holding layers).
        settings: what it ran with, under the engines' own names (``tensor_parallel_size``,
            ``gpu_memory_utilization``, ``max_model_len``, ``mem_fraction_static``, ``n_ctx``…).
        observed: what it measured: ``*_bytes`` int bytes, ``*_tokens`` int tokens.
        refused: True when it refused to start, False when it started, None when the log stops before either.
        refusal: the engine's refusal message.
        lines: how many lines the log had.
    """

    engine: str
    version: str | None = None
    model: str | None = None
    card: str | None = None
    cards: int = 1
    settings: Mapping[str, Any] = field(default_factory=dict)
    observed: Mapping[str, int] = field(default_factory=dict)
    refused: bool | None = None
    refusal: str = ""
    lines: int = 0


def clean(text: str) -> str:
    """The log without terminal colour codes."""
    return _ANSI.sub("", text)


def gib_bytes(text: str) -> int:
    """A GiB figure as printed (``58.11``) in bytes."""
    return round(float(text) * GiB)


def mib_bytes(text: str) -> int:
    """A MiB figure as printed (``8148.38``) in bytes."""
    return round(float(text) * MiB)


def find_all(pattern: str, text: str) -> list:
    """Every match of ``pattern`` (groups as :func:`re.findall` gives them)."""
    return re.findall(pattern, text, re.MULTILINE)


def first(pattern: str, text: str) -> re.Match | None:
    """The first match of ``pattern`` in ``text``."""
    return re.search(pattern, text, re.MULTILINE)


def put_min(out: dict[str, int], key: str, values: Iterable[int]) -> None:
    """Store the least of ``values`` under ``key`` (per-rank lines: the binding rank), when there are any."""
    values = list(values)
    if values:
        out[key] = min(values)


def put_max(out: dict[str, int], key: str, values: Iterable[int]) -> None:
    """Store the largest of ``values`` under ``key`` (per-rank weights: the fullest rank), when there are any."""
    values = list(values)
    if values:
        out[key] = max(values)


def setting_value(text: str) -> Any:
    """A value as an engine prints it in its settings (``8192``, ``'fp8'``, ``None``, ``[1, 2]``); text that is
    no Python literal comes back as it is, without its quotes."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text.strip("'\"")
