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

Why the cap sits at 8.6 bits: llama-quantize's own figures
(:data:`PUBLISHED_PERPLEXITY`) put Q8_0 — 7.96 GiB for Llama-3-8B's 8.03 B
weights, 8.52 bits a weight — 0.0026 above the 16-bit model's perplexity,
and 16-bit F16 itself 0.0020 above F32: past about 8.5 bits a bit buys
nothing measurable. Below it each bit counts: Q6_K (6.57 bits) +0.0217,
Q4_K_M (4.90) +0.1754, Q3_K_M (4.00) +0.6569, Q2_K (3.17) +3.5199. On a CPU
every weight is read for every token, so speed wins sooner: the cap there is
5.8, just above Q5_K_M (5.70 bits, +0.0569).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

# fmt: off
#: llama-quantize's quality figures: (mix, file size in GiB as it prints "G", perplexity increase over the
#: unquantised model, the model measured). From ``tools/quantize/quantize.cpp`` QUANT_OPTIONS (llama.cpp
#: commit 0c1e57098); the mixes it lists by bits alone (IQ*, TQ*) carry no perplexity and are left out.
PUBLISHED_PERPLEXITY: tuple[tuple[str, float, float, str], ...] = (
    ("Q2_K",   2.96, 3.5199, "Llama-3-8B"),
    ("Q3_K_S", 3.41, 1.6321, "Llama-3-8B"),
    ("Q3_K_M", 3.74, 0.6569, "Llama-3-8B"),
    ("Q3_K_L", 4.03, 0.5562, "Llama-3-8B"),
    ("Q4_0",   4.34, 0.4685, "Llama-3-8B"),
    ("Q4_K_S", 4.37, 0.2689, "Llama-3-8B"),
    ("Q4_K_M", 4.58, 0.1754, "Llama-3-8B"),
    ("Q4_1",   4.78, 0.4511, "Llama-3-8B"),
    ("Q5_0",   5.21, 0.1316, "Llama-3-8B"),
    ("Q5_K_S", 5.21, 0.1049, "Llama-3-8B"),
    ("Q5_K_M", 5.33, 0.0569, "Llama-3-8B"),
    ("Q5_1",   5.65, 0.1062, "Llama-3-8B"),
    ("Q6_K",   6.14, 0.0217, "Llama-3-8B"),
    ("Q8_0",   7.96, 0.0026, "Llama-3-8B"),
    ("F16",   14.00, 0.0020, "Mistral-7B"),
    ("BF16",  14.00, -0.0050, "Mistral-7B"),
)
# fmt: on

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
