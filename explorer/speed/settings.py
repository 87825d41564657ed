"""What the speed model assumes where the catalogue is silent: links, fabrics, the host, efficiency.

Link figures (assumptions, stated): vendors quote NVLink / PCIe both
directions summed, so one way is half (H100 SXM 450 GB/s); a link of 200
GB/s or more is NVLink-class with 5 µs a collective, else PCIe with 20 µs;
a card with no figure is taken as PCIe 4.0 x16 (64 GB/s). Between nodes the
fabric is 400 Gb/s InfiniBand (50 GB/s one way, 10 µs) unless its name
carries a rate (``eth100g`` → 100 Gb/s); llama.cpp RPC adds 50 µs a hop
(a TCP round trip on a fast LAN). The host (CPU) defaults to 100 GB/s of
memory bandwidth and 2 TFLOPs, unless the node states its CPU
(:func:`node_host_bandwidth`: a named CPU's nominal figure times the share
its threads reach, :data:`HOST_REACH`); every engine to its own efficiency.
Reasons for each figure: docs/notes/speed_model.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from explorer.errors import PlanError
from explorer.limits import MIN_SHARE
from explorer.units import GB

NVLINK_CLASS_BYTES_PER_S = 200 * GB
NVLINK_LATENCY_S = 5e-6
PCIE_LATENCY_S = 20e-6
UNKNOWN_LINK_BYTES_PER_S = 64 * GB  # PCIe 4.0 x16, both directions
HOST_LINK_MAX_BYTES_PER_S = 128 * GB  # PCIe 5.0 x16, both directions: no card talks to its host faster
FABRIC_BYTES_PER_S = 50 * GB  # 400 Gb/s InfiniBand NDR, one way
FABRIC_LATENCY_S = 10e-6
RPC_LATENCY_S = 50e-6
#: what one small collective (an all-reduce of one step's activations) takes in practice, by link: the
#: estimate's figure (the bound keeps the latencies above); fitted on published multi-card MoE and dense rows
COLLECTIVE_ESTIMATE_S = {"nvlink": 25e-6, "pcie": 50e-6, "fabric": 150e-6}
#: an expert-parallel dispatch or combine (all-to-all) costs this many small collectives' latency
ALLTOALL_LATENCIES = 2
ACTIVATION_BYTES = 2  # bf16 hidden states (vLLM, SGLang)
LLAMACPP_ACTIVATION_BYTES = 4  # llama.cpp hands f32 hidden states between devices
FP8_COMPUTE_KINDS = ("fp8", "nvfp4", "mxfp4", "bnb8")
#: the share of a CPU family's nominal memory bandwidth that llama.cpp's CPU threads reach (unlisted: 1). Fitted
#: on the published CPU-only rows (docs/notes/speed_model.md): the 24-core CPU of an M2 Ultra ran Mistral-7B Q8_0
#: at 27 tok/s, about 208 GB/s of its 800 (the nominal figure put the estimate 2.13 × fast); Apple's CPU
#: clusters cannot fill a Max's or an Ultra's bus. The x86 and Arm server rows (one and two sockets) need none.
HOST_REACH: dict[str, float] = {"apple-max": 0.5, "apple-ultra": 0.5}
_APPLE_WIDE = re.compile(r"^(?:apple-)?m\d+-(max|ultra)(?:-|$)")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedSettings:
    """What the speed model assumes where the catalogue is silent.

    Attributes:
        efficiency: per engine, the share of the bound an engine reaches (0 < e ≤ 1), where it differs from
            the engine's own (:class:`~explorer.engines.interface.SpeedFacts`); the estimate is bound /
            efficiency a step (time to first token: bound / efficiency). Given as a mapping; stored as sorted
            (engine, factor) pairs.
        default_efficiency: for an engine the mapping does not name (None: the engine's own).
        host_bandwidth_bytes_per_s: CPU memory bandwidth for layers on the host and CPU-only runs.
        host_tflops: CPU dense TFLOPs for prefill on the host.
        fabric_bandwidth_bytes_per_s: one-way bandwidth between nodes (None: from the fabric's
            name, else 400 Gb/s InfiniBand = 50 GB/s).
        prices: a :class:`~explorer.speed.prices.PriceTable` (None: no cost figures; the edges
            pass :func:`explorer.sources.shipped.shipped_prices`).
    """

    efficiency: Mapping[str, float] | tuple[tuple[str, float], ...] = ()
    default_efficiency: float | None = None
    host_bandwidth_bytes_per_s: int = 100 * GB
    host_tflops: float = 2.0
    fabric_bandwidth_bytes_per_s: int | None = None
    prices: object = None

    def __post_init__(self) -> None:
        pairs = self.efficiency.items() if isinstance(self.efficiency, Mapping) else self.efficiency
        pairs = tuple(sorted((str(k), float(v)) for k, v in pairs))  # type: ignore[union-attr]
        stated = (("default", self.default_efficiency),) if self.default_efficiency is not None else ()
        for engine, value in pairs + stated:
            if not MIN_SHARE <= value <= 1:
                raise PlanError(
                    f"speed efficiency for {engine} is {value}; it must be {MIN_SHARE:g} to 1",
                    hint="an efficiency is the share of the bound reached, e.g. 0.6",
                )
        if self.host_bandwidth_bytes_per_s <= 0 or self.host_tflops <= 0:
            raise PlanError(
                f"host bandwidth ({self.host_bandwidth_bytes_per_s}) and TFLOPs ({self.host_tflops}) must be positive"
            )
        object.__setattr__(self, "efficiency", pairs)

    def efficiency_for(self, engine: str, own: float) -> float:
        """The efficiency factor of an engine whose own is ``own``: the mapping's, else the default, else its own."""
        fallback = own if self.default_efficiency is None else self.default_efficiency
        return dict(self.efficiency).get(engine, fallback)  # type: ignore[arg-type]


def host_family(name: str) -> str:
    """The family :data:`HOST_REACH` is keyed on: ``apple-max`` / ``apple-ultra`` for an Apple Max or Ultra
    chip, named as a CPU (``apple-m2-max``) or as a unified-memory class (``m2-ultra-192g``); else the name."""
    m = _APPLE_WIDE.match(name.lower())
    return f"apple-{m[1]}" if m else name.lower()


def host_reach(name: str) -> float:
    """The share of its nominal memory bandwidth a CPU's threads reach (1 where :data:`HOST_REACH` lists no
    family for it)."""
    return HOST_REACH.get(host_family(name), 1.0)


def _host_source(node) -> tuple[int, str] | None:
    """(nominal bytes/s, name whose reach applies) of a node's host memory, '' when stated with ``bw=``."""
    if node.cpu.memory_bandwidth_bytes_per_s:
        return node.cpu.memory_bandwidth_bytes_per_s, "" if node.cpu.bandwidth_stated else node.cpu.name
    if node.unified and node.gpus and node.gpus[0].gpu.bandwidth_bytes_per_s:
        return node.gpus[0].gpu.bandwidth_bytes_per_s, node.gpus[0].gpu.name
    return None


def node_host_bandwidth(node) -> int | None:
    """The memory bandwidth a node's CPU threads read at, when it is known: its CPU's (``cpu=`` a named CPU, or
    ``bw=``), else a unified host's chip's (its CPU shares that memory), a named figure times the share its
    family's threads reach (:func:`host_reach`; a ``bw=`` figure is taken as measured); None for the
    settings' default."""
    source = _host_source(node)
    if source is None:
        return None
    nominal, name = source
    return round(nominal * host_reach(name)) if name else nominal


def host_reach_note(node) -> str | None:
    """What a plan whose host reads below its CPU's nominal bandwidth says (None: it reads at the nominal)."""
    source = _host_source(node)
    if source is None or not source[1] or host_reach(source[1]) == 1:
        return None
    nominal, name = source
    share = host_reach(name)
    return (
        f"CPU threads read {name}'s memory at {share:.0%} of its nominal {nominal / GB:,.0f} GB/s "
        f"({nominal * share / GB:,.0f} GB/s), the share llama.cpp's CPU threads reach on {host_family(name)} "
        "chips in published rows; state bw=GBPS for your machine's own figure"
    )


def card_link(gpu) -> tuple[float, float]:
    """(one-way bytes/s, latency s) between two cards of a class in one node."""
    both = gpu.interconnect_bytes_per_s or UNKNOWN_LINK_BYTES_PER_S
    return both / 2, NVLINK_LATENCY_S if both >= NVLINK_CLASS_BYTES_PER_S else PCIE_LATENCY_S


def card_link_kind(gpu) -> str:
    """``nvlink`` (a link of 200 GB/s or more, both ways) or ``pcie``: the key of :data:`COLLECTIVE_ESTIMATE_S`."""
    both = gpu.interconnect_bytes_per_s or UNKNOWN_LINK_BYTES_PER_S
    return "nvlink" if both >= NVLINK_CLASS_BYTES_PER_S else "pcie"


def fabric_bytes_per_s(fabric: str | None, settings: SpeedSettings) -> float:
    """One-way bandwidth between nodes: the setting, a rate in the fabric's name (``eth100g``), or 50 GB/s."""
    if settings.fabric_bandwidth_bytes_per_s:
        return settings.fabric_bandwidth_bytes_per_s
    m = re.search(r"(\d{2,4})g", (fabric or "").lower())
    return int(m[1]) * GB / 8 if m else FABRIC_BYTES_PER_S


def peak_flops_per_s(gpu, precision) -> float:
    """Peak FLOPs for these weights: fp8 where the weights are 8 bits or fewer as fp8/int8/fp4 and the card has fp8."""
    kinds = {g.fmt.kind for g in precision.groups}
    low = any(k in FP8_COMPUTE_KINDS for k in kinds) or any(
        g.fmt.kind == "int" and g.fmt.bits == 8 for g in precision.groups
    )
    tflops = gpu.fp8_tflops if low and gpu.fp8_tflops else gpu.bf16_tflops
    return tflops * 1e12
