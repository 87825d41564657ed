"""The CLI's model term, ``ID[:QUANT][:CONTEXT[/MIN]][xREPLICAS][@phase,...]``, as a pure parser.

Examples::

    Qwen/Qwen3-8B                 -> id, no context, 1 replica, always running
    Qwen/Qwen3-8B:32k             -> 32,768 tokens ("k" is 1024, as context sizes go)
    Qwen/Qwen3-32B:32k/8k         -> aims at 32,768 tokens, accepts as few as 8,192 (the context floor)
    BAAI/bge-m3x2@ingest,query    -> 2 replicas, runs in ingest and query
    repo:Q4_K_M:8192              -> id "repo" at Q4_K_M, 8,192 tokens
    org/name:int4-awq             -> id "org/name" at int4 AWQ (its published checkpoint where one is known)
    org/name:FILE.gguf:8192       -> id "org/name:FILE.gguf": a file, not a precision

Suffixes are read from the right, so an ID may contain ``:`` and ``x``: only a trailing ``:<number>`` is a
context, and only a trailing ``:<precision>`` a precision (a what-if name, :data:`WHAT_IF_NAMES`, or a GGUF quant,
:data:`GGUF_MIX_BITS`; llama.cpp's ``-hf REPO:QUANT`` spelling). An ID that itself ends in ``x<digits>`` must be
followed by a context or ``x1`` (``model-x2x1``); ``model-x2`` reads as two replicas of ``model-``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from explorer.errors import ModelTermError
from explorer.hardware.cluster import MAX_GPUS
from explorer.limits import MAX_CONTEXT_TOKENS
from explorer.model.quant_config import GGUF_MIX_BITS, WHAT_IF_NAMES

_PHASE = re.compile(r"^[A-Za-z][\w-]*$")
_REPLICAS = re.compile(r"^(?P<rest>.+?)[xX](?P<n>\d+)$")
_CONTEXT = re.compile(r"^(?P<rest>.+):(?P<n>\d+)(?P<k>[kK]?)(?:/(?P<min>\d+)(?P<mk>[kK]?))?$")
_BAD_ID = re.compile(r"[\s@,]")
#: a term's precision suffix (any case) -> its spelling: the what-if names lower case, the GGUF quants upper
_PRECISIONS = {name.upper(): name for name in WHAT_IF_NAMES} | {quant.upper(): quant for quant in GGUF_MIX_BITS}
#: the most replicas a term may ask for: one a GPU of the largest cluster explorer plans for
MAX_REPLICAS = MAX_GPUS
#: the most digits a number of a term may have (read before it is converted: 10^4300 digits is a ValueError)
_MAX_DIGITS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTerm:
    """One parsed model term.

    Attributes:
        model_id: the Hub repo id, path or catalogue name, as written.
        context_tokens: the context asked for, or None to use the model's default (tokens).
        min_context_tokens: the least context it accepts (``/MIN``), or None: exactly ``context_tokens`` (tokens).
        replicas: instances asked for (>= 1).
        phases: phases it runs in; empty means always.
        precision: the precision it is placed at (``:int4-awq``, ``:Q8_0``), or None: the command's ``--quant``,
            else its own weights.
    """

    model_id: str
    context_tokens: int | None = None
    min_context_tokens: int | None = None
    replicas: int = 1
    phases: frozenset[str] = field(default_factory=frozenset)
    precision: str | None = None


def _fail(text: str, why: str) -> ModelTermError:
    return ModelTermError(f"model term {text!r}: {why}")


def _number(text: str, digits: str, what: str, least: int, most: int, *, kilo: bool = False) -> int:
    """A term's number (``k``: × 1024), within [``least``, ``most``], else a :class:`ModelTermError` naming it."""
    value = int(digits) * (1024 if kilo else 1) if len(digits) <= _MAX_DIGITS else None
    if value is None or not least <= value <= most:
        shown = digits + ("k" if kilo else "") if len(digits) <= _MAX_DIGITS else f"a {len(digits):,}-digit number"
        raise _fail(text, f"{what} {shown} is out of range: {least:,} to {most:,}")
    return value


def parse_model_term(text: str) -> ModelTerm:
    """Parse ``ID[:QUANT][:CONTEXT[/MIN]][xREPLICAS][@phase,...]`` into a :class:`ModelTerm`.

    Raises ModelTermError naming the term and what is wrong with it.
    """
    if not isinstance(text, str) or not text.strip():
        raise ModelTermError(f"model term must be a non-empty string, got {text!r}")
    rest = text.strip()
    phases: frozenset[str] = frozenset()
    if "@" in rest:
        rest, _, tail = rest.rpartition("@")
        names = tail.split(",")
        bad = [n for n in names if not _PHASE.match(n)]
        if bad:
            raise _fail(text, f"phases must be comma-separated names (letters, digits, _ or -); bad: {bad}")
        phases = frozenset(names)
    replicas = 1
    m = _REPLICAS.match(rest)
    if m:
        rest, replicas = m["rest"], _number(text, m["n"], "replicas", 1, MAX_REPLICAS)
    context = floor = None
    m = _CONTEXT.match(rest)
    if m:
        rest = m["rest"]
        context = _number(text, m["n"], "the context", 1, MAX_CONTEXT_TOKENS, kilo=bool(m["k"]))
        if m["min"] is not None:
            floor = _number(text, m["min"], "the context floor", 1, MAX_CONTEXT_TOKENS, kilo=bool(m["mk"]))
            if not 1 <= floor <= context:
                raise _fail(text, f"the context floor {floor:,} must be between 1 and the context {context:,}")
    head, colon, tail = rest.rpartition(":")
    precision = _PRECISIONS.get(tail.upper()) if colon and head else None
    if precision is not None:
        rest = head
    if not rest or rest.endswith(":") or _BAD_ID.search(rest):
        raise _fail(text, f"{rest!r} is not a model id (no spaces, '@' or ',', and not ending in ':')")
    return ModelTerm(
        model_id=rest,
        context_tokens=context,
        min_context_tokens=floor,
        replicas=replicas,
        phases=phases,
        precision=precision,
    )
