"""Ranking options: by what the hardware is, not by what it is doing.

Best first:

1. on a GPU before the CPU;
2. the fewest cards, then the fewest nodes;
3. the better precision: rising to about 8.6 bits a weight and falling past
   it (eight bits keep what sixteen do, near enough, for half the memory);
   the cap is 5.8 on the CPU, where every bit is read for every token;
4. whether the cards are free now only breaks ties (busy is not unfit: a
   model served onto busy cards waits for one);
5. then the most headroom.

Ties after that fall back to names, so the order never depends on the order
options were found in. A "fastest that fits" sort (decode tokens per second
estimate, best first) is the user's alternative.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

QUALITY_CAP_BITS = 8.6
CPU_QUALITY_CAP_BITS = 5.8
PAST_CAP_SLOPE = 0.25

SortKey = Literal["default", "speed"]


def quality(bits_per_weight: float, *, cpu: bool) -> float:
    """A precision score: the bits up to the cap, then falling a quarter point per bit past it."""
    if bits_per_weight <= 0:
        return 0.0
    cap = CPU_QUALITY_CAP_BITS if cpu else QUALITY_CAP_BITS
    if bits_per_weight <= cap:
        return bits_per_weight
    return cap - (bits_per_weight - cap) * PAST_CAP_SLOPE


def default_key(option) -> tuple:
    """The ranking key of an option (see the module docstring)."""
    layout = option.layout
    return (
        layout.cpu,
        layout.cards,
        layout.nodes,
        -quality(option.bits_per_weight, cpu=layout.cpu),
        not option.free_now,
        -option.per_card.headroom,
        option.engine,
        layout.gpu_class,
        layout.tp,
        layout.pp,
        option.artifact.name,
    )


def speed_key(option) -> tuple:
    """Fastest that fits: the decode estimate at the asked concurrency, best first, then the default order."""
    speed = getattr(option, "speed", None)
    tokens = speed.decode_estimate_tokens_per_s if speed is not None else 0.0
    return (-tokens,) + default_key(option)


def rank(options: Iterable, sort: SortKey = "default") -> list:
    """Options best first, by the default ranking or fastest first."""
    key = speed_key if sort == "speed" else default_key
    return sorted(options, key=key)
