"""What an engine's start-up log says: the record the three readers fill, and the number helpers they share.

Byte figures are int counts of bytes: the engines print GiB (vLLM; SGLang
writes "GB" but divides by 2³⁰) or MiB (llama.cpp) with two decimals, so a
figure is exact to ±0.005 of its unit.

Reading runs in time linear in the log's size (issue 25: ``".*" + pattern + ".*"`` over the whole text
took about 30 s on a 6 KB paste). Every pattern is matched one line at a time (lines cut at
:data:`MAX_LINE_CHARS`); a pattern that starts with a literal (``Model loading took ``) is tried only where that
literal occurs, at most :data:`MAX_TRIES_PER_LINE` times a line, so no line is scanned from every position; the others start with an
alternation of literals or a word boundary. :func:`first_line` gives the whole line that holds a match (a
refusal's message) without wrapping the pattern in ``.*``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from explorer.units import GiB, MiB

#: a number as the engines print them
NUMBER = r"(-?\d+(?:\.\d+)?)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: a log line longer than this is read up to here (the longest start-up line, SGLang's ServerArgs, is ~10 kB)
MAX_LINE_CHARS = 32 * 1024
#: the places on one line a pattern is tried at (its leading literal's first occurrences: vLLM's banner line
#: holds "█" a dozen times before "█  version 0.19.0"); a bound, so a line of 30,000 "█" costs 16 tries, not 30,000
MAX_TRIES_PER_LINE = 16
#: characters that end a pattern's leading literal
_META = frozenset(".^$*+?{}[]()|\\")
#: characters that make the character before them optional or repeated
_QUANTIFIERS = frozenset("*+?{")


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
        driver_rank: whether the figures are the driver rank's: False when vLLM V0 printed them from a worker
            process (``(VllmWorkerProcess pid=…)``), which runs no sampler; None when the log does not say.
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
    driver_rank: bool | None = None


def clean(text: str) -> str:
    """The log without terminal colour codes."""
    return _ANSI.sub("", text)


def gib_bytes(text: str) -> int:
    """A GiB figure as printed (``58.11``) in bytes."""
    return round(float(text) * GiB)


def mib_bytes(text: str) -> int:
    """A MiB figure as printed (``8148.38``) in bytes."""
    return round(float(text) * MiB)


def leading_literal(pattern: str) -> str:
    """The literal text every match of ``pattern`` starts with (``"Model loading took "``), or "" when it
    starts with a class, a group or an alternation (``r"Load weight end\\..*?"`` → ``"Load weight end."``)."""
    if "|" in pattern:
        return ""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            char, step = pattern[i + 1], 2  # an escaped punctuation mark is itself
        elif c in _META:
            break
        else:
            char, step = c, 1
        if i + step < len(pattern) and pattern[i + step] in _QUANTIFIERS:
            break  # "secs?": the "s" may be absent
        out.append(char)
        i += step
    return "".join(out)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> tuple[re.Pattern[str], str]:
    return re.compile(pattern), leading_literal(pattern)


@lru_cache(maxsize=4)
def log_lines(text: str) -> tuple[str, ...]:
    """The log's lines, each cut at :data:`MAX_LINE_CHARS` (kept for the next pattern over the same text)."""
    return tuple(line[:MAX_LINE_CHARS] for line in text.splitlines())


def _match_on(line: str, rx: re.Pattern[str], lead: str) -> re.Match[str] | None:
    if not lead:
        return rx.search(line)
    at = line.find(lead)
    for _ in range(MAX_TRIES_PER_LINE):
        if at < 0:
            return None
        m = rx.match(line, at)
        if m is not None:
            return m
        at = line.find(lead, at + 1)
    return None


def _matches(pattern: str, text: str) -> Iterator[re.Match[str]]:
    """The first match of ``pattern`` on each line that has one: tried where the pattern's leading literal
    occurs (at most :data:`MAX_TRIES_PER_LINE` times a line), or searched when it has none."""
    rx, lead = _compiled(pattern)
    for line in log_lines(text):
        m = _match_on(line, rx, lead)
        if m is not None:
            yield m


def find_all(pattern: str, text: str) -> list:
    """Every line's match of ``pattern`` (groups as :func:`re.findall` gives them)."""
    return [
        m.group(0) if not m.re.groups else m.group(1) if m.re.groups == 1 else m.groups()
        for m in _matches(pattern, text)
    ]


def first(pattern: str, text: str) -> re.Match | None:
    """The first match of ``pattern`` in ``text`` (one line's)."""
    return next(_matches(pattern, text), None)


def first_line(pattern: str, text: str) -> str:
    """The first whole line that holds a match of ``pattern``, stripped, or ""."""
    m = first(pattern, text)
    return m.string.strip() if m else ""


def first_line_number(pattern: str, text: str) -> int | None:
    """The number (from 0) of the first line that holds a match of ``pattern``, or None."""
    rx, lead = _compiled(pattern)
    return next((i for i, line in enumerate(log_lines(text)) if _match_on(line, rx, lead) is not None), None)


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
