"""Which engine wrote a start-up log, and its record: the one entry point of :mod:`explorer.engines.logs`.

The built-in readers (vLLM, SGLang, llama.cpp) are tried first; when none finds its lines, the readers other
packages' engines bring (:class:`explorer.engines.interface.LogReader`, passed in by the edges as
:func:`explorer.engines.registry.log_readers`), and last an out-of-memory traceback's frames.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from explorer.engines.logs import llamacpp_log, oom, sglang_log, vllm_log
from explorer.engines.logs.record import EngineLog, clean
from explorer.engines.names import ENGINES
from explorer.errors import EngineLogError

#: the lines each engine is recognised by, for the error that says what was expected
EXPECTED = (
    "vLLM: 'Model loading took X GiB', 'Available KV cache memory: X GiB', 'GPU KV cache size: N tokens'",
    "SGLang: 'Load weight end. … mem usage=X GB', 'KV Cache is allocated. #tokens: N, K size: X GB'",
    "llama.cpp: '<device> model buffer size = X MiB', '<device> KV buffer size = X MiB'",
)
#: a log longer than this is cut to its first lines (a start-up is a few hundred)
MAX_CHARS = 8_000_000

_READERS = (
    (vllm_log.SIGNATURES, vllm_log.read_vllm),
    (sglang_log.SIGNATURES, sglang_log.read_sglang),
    (llamacpp_log.SIGNATURES, llamacpp_log.read_llamacpp),
)


def _oom_engine(text: str) -> int:
    """The reader for a log that is an out-of-memory traceback alone: the engine its frames name.

    Raises:
        EngineLogError: the traceback names neither vLLM nor SGLang (its figures alone say nothing of a plan).
    """
    lowered = text.lower()
    counts = [lowered.count("vllm"), lowered.count("sglang")]
    if max(counts) == 0:
        raise EngineLogError(
            "an out-of-memory traceback that names no engine (no vllm/ or sglang/ frame)",
            hint="paste the engine's start-up output above the traceback; expected lines such as "
            + "; ".join(EXPECTED),
        )
    return counts.index(max(counts))


def read_engine_log(text: str, more_readers: Callable[[], Sequence[Any]] = tuple) -> EngineLog:
    """The record of a vLLM, SGLang or llama.cpp start-up log: the engine is the one whose lines it has most of.

    ``more_readers``: the :class:`~explorer.engines.interface.LogReader`s of other packages' engines, asked for
    only when no built-in reader finds its lines (finding them loads the packages' entry points).

    Raises:
        EngineLogError: the text has none of the lines any engine prints at start-up, or no figure.
    """
    if not isinstance(text, str) or not text.strip():
        raise EngineLogError(
            "the log is empty", hint="paste the engine's start-up output; expected " + "; ".join(EXPECTED)
        )
    text = clean(text[:MAX_CHARS])
    scores = [_score(signatures, text) for signatures, _ in _READERS]
    best = max(range(len(_READERS)), key=scores.__getitem__)
    if scores[best] > 0:
        return _with_figures(_READERS[best][1](text), EXPECTED[best])
    others = tuple(more_readers())
    plugin = max(others, key=lambda r: _score(r.signatures, text), default=None)
    if plugin is not None and _score(plugin.signatures, text) > 0:
        log = plugin.read(text)
        if log.engine not in ENGINES:
            raise EngineLogError(
                f"the log reader of another package's engine read it as {log.engine!r}, an accounting explorer "
                "does not check",
                hint=f"its reader names one of {', '.join(ENGINES)} (explorer.engines.interface.LogReader)",
            )
        return _with_figures(log, plugin.expected)
    expected = (*EXPECTED, *(r.expected for r in others))
    if any(re.search(p, text) for p in oom.SIGNATURES):
        best = _oom_engine(text)
        return _with_figures(_READERS[best][1](text), EXPECTED[best])
    what = "vLLM, SGLang, llama.cpp or other packages' engines'" if others else "vLLM, SGLang or llama.cpp"
    raise EngineLogError(f"no {what} start-up lines in the log", hint="expected lines such as " + "; ".join(expected))


def _score(signatures: Sequence[str], text: str) -> int:
    """How many of an engine's start-up lines the log holds."""
    return sum(len(re.findall(p, text)) for p in signatures)


def _with_figures(log: EngineLog, expected: str) -> EngineLog:
    """The record, if it holds a figure or a refusal.

    Raises:
        EngineLogError: it holds neither.
    """
    if not log.observed and not log.refused:
        raise EngineLogError(
            f"the {log.engine} log has no memory figure",
            hint="expected " + expected + " (run the engine at INFO level and keep its start-up output)",
        )
    return log
