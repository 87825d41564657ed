"""Plausible maxima, finite numbers and bounded JSON: hostile values refused before anything is built.

A config.json or a GGUF header can hold numbers that parse but that no model
has: 2^32 - 1 layers, NaN heads, a negative key length. Building a model from
them allocates per layer (10^7 layers took 62 s and 954 MiB) or prints
nonsense (a KV cache of -512 bytes). Every count read from a file goes through
:func:`check_count` first, which refuses a value past its key's plausible
maximum (:data:`PLAUSIBLE_MAXIMA`), naming the value and the cap, before
anything is allocated; :func:`check_finite` does the same for floats.

:func:`load_json` parses JSON text with its nesting bounded (:data:`MAX_JSON_DEPTH`),
so a file of ten thousand ``[`` is a typed error, not a RecursionError;
:func:`load_toml` does the same for TOML.

Shared by every layer (the core and the edges), like :mod:`explorer.units`.
"""

from __future__ import annotations

import json
import math
import tomllib
from typing import Any

from explorer.errors import ExplorerError
from explorer.memo import memo

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_CONTEXT_TOKENS",
    "MAX_HICACHE_RATIO",
    "MAX_HOST_GIB",
    "MAX_JSON_DEPTH",
    "MAX_LAYERS",
    "MAX_NGL",
    "MAX_SPLIT_SHARE",
    "MAX_TENSOR_SPLIT_PARTS",
    "PLAUSIBLE_MAXIMA",
    "check_count",
    "check_figures",
    "check_finite",
    "json_depth",
    "load_json",
    "load_toml",
    "plausible_max",
]

#: layers (block_count, num_hidden_layers): the largest published model has 126; 8× that
MAX_LAYERS = 1 << 10
#: routed experts: the most published is 512 (Qwen3-Next); 32× that
MAX_EXPERTS = 1 << 14
#: vocabulary: the largest published is 262,208 (Gemma 3); 32× that
MAX_VOCAB = 1 << 23
#: heads and head widths (head_count, key_length, head_dim, kv_lora_rank): real ones are <= 1,536
MAX_HEADS = 1 << 16
#: context tokens (max_position_embeddings, context_length, windows): the longest published is 10,485,760
MAX_CONTEXT_TOKENS = 1 << 30
#: widths (hidden, intermediate, embedding, FFN, state sizes): the widest published is 53,248
MAX_WIDTH = 1 << 22
#: any other count a file gives
MAX_OTHER = 1 << 40
#: sequences one request may ask for at once (a million is far past any card's KV cache)
MAX_CONCURRENCY = 1 << 20
#: the largest llama.cpp -ngl (any count is taken: past the layers, all of them; people type 99, 999, 9999)
MAX_NGL = 1 << 20
#: host memory one GPU's or one rank's figure may name, GiB or GB (--swap-space, --hicache-size): 1 PiB, the
#: most RAM a node may have (explorer.hardware.cluster.MAX_RAM_BYTES)
MAX_HOST_GIB = 1 << 20
#: the largest SGLang --hicache-ratio (host KV pool over device KV pool; SGLang's default is 2)
MAX_HICACHE_RATIO = 1000
#: devices a llama.cpp --tensor-split may name
MAX_TENSOR_SPLIT_PARTS = 4096
#: the largest share in a llama.cpp --tensor-split (they are proportions: 3,1 or 0.75,0.25)
MAX_SPLIT_SHARE = 1e6
#: the least share of a card (or of the speed bound) a setting may name: 1 %; below it the figures divided
#: by the share (SGLang's "all cards need", a step time over the efficiency) leave the range of a float
MIN_SHARE = 0.01

#: (words a key contains, the most it may hold, what it counts), first match wins; each cap is
#: far above any published model and far below what would exhaust memory or time
# fmt: off
PLAUSIBLE_MAXIMA: tuple[tuple[tuple[str, ...], int, str], ...] = (
    (("vocab",),                                                        MAX_VOCAB,          "vocabulary"),
    (("layer", "block_count"),                                          MAX_LAYERS,         "layers"),
    (("intermediate", "feed_forward", "ffn"),                           MAX_WIDTH,          "width"),
    (("expert",),                                                       MAX_EXPERTS,        "experts"),
    (("head", "key_length", "value_length", "lora_rank", "dimension_count", "kv_channels"),
                                                                        MAX_HEADS,          "heads or head width"),
    (("position", "context", "seq_len", "seq_length", "n_ctx", "window", "chunk"),
                                                                        MAX_CONTEXT_TOKENS, "tokens"),
    (("hidden", "embd", "embedding", "inner", "d_model", "dim", "state", "conv", "rank", "group"),
                                                                        MAX_WIDTH,          "width"),
)
# fmt: on

#: nesting levels a JSON document may have (real configs, plans and cluster files have < 8)
MAX_JSON_DEPTH = 64


@memo(512, keyed_on="the key's name")
def plausible_max(key: str) -> tuple[int, str]:
    """(the most ``key`` may hold, what it counts) by the first row of :data:`PLAUSIBLE_MAXIMA` it matches."""
    low = key.lower()
    for words, cap, what in PLAUSIBLE_MAXIMA:
        if any(w in low for w in words):
            return cap, what
    return MAX_OTHER, "count"


def check_count(value: int, key: str, *, where: str, error: type[ExplorerError], minimum: int = 0) -> int:
    """``value`` when ``minimum <= value <= plausible_max(key)``; else ``error`` naming the value and the range."""
    cap, what = plausible_max(key)
    if value < minimum:
        raise error(f"{where}: {key} is {value:,}; it must be ≥ {minimum}", hint="the file is corrupt or hostile")
    if value > cap:
        raise error(
            f"{where}: {key} is {value:,}, past the plausible maximum of {cap:,} ({what})",
            hint="no model has that many; the file is corrupt or hostile",
        )
    return value


def check_finite(value: float, key: str, *, where: str, error: type[ExplorerError]) -> float:
    """``value`` when it is a finite number; else ``error`` naming the key."""
    if isinstance(value, float) and not math.isfinite(value):
        raise error(f"{where}: {key} is {value!r}; it must be a finite number", hint="the file is corrupt or hostile")
    return value


def check_figures(where: str, error: type[ExplorerError], **figures: float | int | None) -> None:
    """Raise ``error`` when a figure is negative, NaN or infinite (None passes): a record never holds nonsense.

    Called where records of derived figures are built (per-card memory, an
    evaluation, a speed estimate), so an input that slipped past its checks
    becomes a typed error naming the figure, not a ranked option of -63.8 GiB.
    """
    for name, value in figures.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0 or value == math.inf:
            raise error(f"{where}: {name} came out as {value!r}; it must be a finite number ≥ 0")


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep ``value``'s lists and dicts nest (a scalar: 0), counted without recursion up to ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def load_json(text: str | bytes, *, where: str, error: type[ExplorerError], hint: str | None = None) -> Any:
    """Parse JSON text (NaN and Infinity allowed, as Python's json does), nested at most MAX_JSON_DEPTH deep.

    Raises ``error`` for text that is not UTF-8, not JSON, or nested too deep;
    the message names ``where`` and never quotes more than the parser's position.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise error(
                f"{where} is not UTF-8 text (byte {e.start:,} is {bytes(text)[e.start]:#04x})", hint=hint
            ) from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise error(f"{where} nests deeper than {MAX_JSON_DEPTH} levels", hint=hint) from None
    except ValueError as e:
        raise error(f"{where} is not valid JSON: {e}", hint=hint) from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise error(f"{where} nests deeper than {MAX_JSON_DEPTH} levels", hint=hint)
    return value


def load_toml(text: str, *, where: str, error: type[ExplorerError], hint: str | None = None) -> dict[str, Any]:
    """Parse TOML text, nested at most MAX_JSON_DEPTH deep; ``error`` for text that is not TOML or too deep."""
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise error(f"{where} nests deeper than {MAX_JSON_DEPTH} levels", hint=hint) from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{where} is not valid TOML: {e}", hint=hint) from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise error(f"{where} nests deeper than {MAX_JSON_DEPTH} levels", hint=hint)
    return value
