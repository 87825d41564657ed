"""How fast, not only whether it fits: a speed-of-light bound and an estimate for every option.

For an option (engine, cards, layout, precision) and a request (context,
concurrency), from the GPU catalogue and the model shape alone:

**Decode** is a roofline bound. A step reads, on each card a token passes
through, that card's share of the weights a step uses — every non-expert
weight and the LM head, and of the routed experts the share
1 − (1 − k/E)^B a batch of B touches (k/E for one sequence) — plus the KV
cache of its layers at the context (windows and MLA latents as the shape's
caches hold them). The input embedding is a row gather and is not read
whole. Step time on a card is ``max(bytes / bandwidth, FLOPs / peak)`` with
FLOPs = 2 × B × (active parameters + attention over the context); tensor
parallelism adds two all-reduces a layer; pipeline stages and llama.cpp's
host and GPU parts add up for one sequence, and overlap across micro-batches
in vLLM/SGLang (details in :mod:`explorer.speed.roofline`, link figures in
:mod:`explorer.speed.settings`).
Layers on the host run at the host's memory bandwidth (default 100 GB/s),
so an option with 60 % of its layers on the CPU is as slow as that makes it.

**Prefill** (time to first token for a prompt of the asked context) is
compute-bound: 2 × active parameters × P + attention 2 × q heads × (key +
value dims) × P(P+1)/2 a layer, over the stage's tensor-parallel cards, plus
all-reduces; a pipeline runs its stages one after another.

**Estimate.** Each card's part of a step is ``max(its roofline step /
efficiency, its layers' kernel floors)`` plus its collectives at what they
take in practice (tensor-parallel all-reduces, expert-parallel dispatch and
combine), and the step adds the engine's per-token overhead
(:mod:`explorer.speed.floor`, :func:`explorer.speed.roofline.part_estimate_s`).
Floors, overhead and efficiency are the engine's own
(:class:`~explorer.engines.interface.SpeedFacts`), fitted on published rows
with a third kept out (docs/notes/speed_model.md); the bound is the roofline's alone.

**Host.** Layers on the host and CPU-only runs read at the node's CPU
bandwidth (``cpu=`` a CPU of data/cpus.csv, or ``bw=``), else a unified
host's chip bandwidth, else the settings' default (100 GB/s); a named CPU or
chip at the share of it its threads reach (Apple Max and Ultra: half,
:data:`explorer.speed.settings.HOST_REACH`), and the plan says so.

**Efficiency.** Every figure above but the estimate is a bound; the
efficiency (0.6 for each engine today) divides the roofline's step and the
time to first token. Neither figure is a measurement.

**Cost.** With a price (data/prices.csv): cards × USD per GPU-hour /
(aggregate estimate tokens/s × 3600) × 10⁶ per million output tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from explorer.engines.request import PlanRequest
from explorer.errors import ImplausibleFigureError, UnknownPrecisionError
from explorer.limits import check_figures
from explorer.memo import memo
from explorer.model.artifacts import ORIGINAL
from explorer.model.conversion import converted_precision
from explorer.model.precision import Precision, SchemeGroup, WeightFormat
from explorer.speed.floor import Pace, pace_for, speed_facts
from explorer.speed.prices import PriceTable
from explorer.speed.roofline import Tally, decode_cycle_s, placement, prefill_s
from explorer.speed.settings import SpeedSettings, host_reach_note, node_host_bandwidth
from explorer.units import gb

__all__ = ["DEFAULT_SETTINGS", "SpeedEstimate", "SpeedSettings", "speed_of", "tokens_per_s_vs_context"]

DEFAULT_SETTINGS = SpeedSettings()


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedEstimate:
    """How fast an option decodes and prefills: a bound and an estimate, never a measurement.

    Attributes:
        decode_bound_tokens_per_s: one sequence's decode rate, at most, while ``concurrency``
            sequences decode together at ``context_tokens``.
        decode_estimate_tokens_per_s: the estimate: bound step ÷ efficiency, never below the kernel floors,
            plus collectives in practice and the per-token overhead.
        decode_aggregate_bound_tokens_per_s: all sequences together, at most.
        decode_aggregate_estimate_tokens_per_s: the same, all sequences together.
        time_to_first_token_bound_s: prefill of one prompt of ``context_tokens``, at least (None: FLOPs unknown).
        time_to_first_token_estimate_s: the same / efficiency.
        cost_per_million_tokens: USD per million output tokens at the aggregate estimate (None: no price).
        usd_per_gpu_hour: the price used (None: none in the table).
        bound_by: what limits a decode step: ``memory bandwidth``, ``compute``, ``host memory`` or ``interconnect``.
        efficiency: the factor applied.
        context_tokens: the context the figures are for.
        concurrency: the sequences decoding together.
        breakdown: a short text of what a step is made of.
        assumptions: what the figures assume where the catalogue is silent (a unified-memory host
            named by its memory alone decodes at the host's bandwidth).
    """

    decode_bound_tokens_per_s: float
    decode_estimate_tokens_per_s: float
    decode_aggregate_bound_tokens_per_s: float
    decode_aggregate_estimate_tokens_per_s: float
    time_to_first_token_bound_s: float | None
    time_to_first_token_estimate_s: float | None
    cost_per_million_tokens: float | None
    usd_per_gpu_hour: float | None
    bound_by: str
    efficiency: float
    context_tokens: int
    concurrency: int
    breakdown: str
    assumptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_figures(
            "a speed estimate",
            ImplausibleFigureError,
            decode_bound_tokens_per_s=self.decode_bound_tokens_per_s,
            decode_estimate_tokens_per_s=self.decode_estimate_tokens_per_s,
            decode_aggregate_bound_tokens_per_s=self.decode_aggregate_bound_tokens_per_s,
            decode_aggregate_estimate_tokens_per_s=self.decode_aggregate_estimate_tokens_per_s,
            time_to_first_token_bound_s=self.time_to_first_token_bound_s,
            time_to_first_token_estimate_s=self.time_to_first_token_estimate_s,
            cost_per_million_tokens=self.cost_per_million_tokens,
            usd_per_gpu_hour=self.usd_per_gpu_hour,
            efficiency=self.efficiency,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, merged into an option's dict."""
        return {
            "decode_tokens_per_s": {
                "bound": _r(self.decode_bound_tokens_per_s),
                "estimate": _r(self.decode_estimate_tokens_per_s),
            },
            "decode_aggregate_tokens_per_s": {
                "bound": _r(self.decode_aggregate_bound_tokens_per_s),
                "estimate": _r(self.decode_aggregate_estimate_tokens_per_s),
                "concurrency": self.concurrency,
            },
            "time_to_first_token_s": {
                "bound": _r(self.time_to_first_token_bound_s, 4),
                "estimate": _r(self.time_to_first_token_estimate_s, 4),
            },
            "cost_per_million_tokens": _r(self.cost_per_million_tokens, 4),
            "speed": {
                "bound_by": self.bound_by,
                "efficiency": self.efficiency,
                "context": self.context_tokens,
                "concurrency": self.concurrency,
                "usd_per_gpu_hour": self.usd_per_gpu_hour,
                "breakdown": self.breakdown,
                "assumptions": list(self.assumptions),
            },
        }


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def precision_for(
    shape, artifact, *, gguf: bool = False, loaded: str | None = None, bits_per_weight: float = 0.0
) -> Precision:
    """The precision an option reads its weights at.

    vLLM and SGLang: the artifact's (:meth:`~explorer.model.shapes.ModelShape.precision_of`:
    the checkpoint's own, or the what-if its ``quant`` labels). An engine that loads a GGUF (``gguf``,
    llama.cpp's :class:`~explorer.engines.interface.SpeedFacts`): the GGUF it loads —
    the shape's own per-tensor types when the shape was read from that GGUF, else
    the quant mix ``loaded`` names (original weights are planned as the GGUF
    they convert to: BF16, Q8_0, Q4_K_M). A label explorer does not know falls
    back to a mix of ``bits_per_weight`` bits, so the bytes stay right.
    """
    if gguf:
        if artifact.format == "gguf" and shape.precision.source == "gguf":
            return shape.precision
        return _what_if(shape, loaded or artifact.quant, round(bits_per_weight, 3), gguf=True)
    if artifact.name == ORIGINAL and not artifact.what_if:
        return shape.precision
    return _what_if(shape, artifact.quant, round(bits_per_weight, 3))


@memo(256, keyed_on="shape identity, GGUF quant name, bits per weight, whether a GGUF is loaded")
def _what_if(shape, quant: str, bits_per_weight: float, gguf: bool = False) -> Precision:
    """``quant`` as :meth:`~explorer.model.shapes.ModelShape.resolve_precision` reads it (a name or a label;
    a GGUF as :func:`~explorer.model.conversion.converted_precision` converts the checkpoint to it); one it does
    not know as a GGUF-like mix of ``bits_per_weight`` bits."""
    try:
        return converted_precision(shape, quant) if gguf else shape.resolve_precision(quant)
    except UnknownPrecisionError:
        pass
    if bits_per_weight <= 0:
        return shape.precision
    fmt = WeightFormat(kind="gguf", bits=bits_per_weight)
    return Precision(
        name=f"{quant} ({bits_per_weight:g} bits a weight)",
        method="gguf",
        base=shape.precision.base,
        groups=(SchemeGroup(targets=("Linear",), fmt=fmt),),
        source="what-if",
        all_matrices=True,
    )


def speed_of(
    option, shape, request: PlanRequest | None = None, settings: SpeedSettings | None = None, *, precision=None
) -> SpeedEstimate | None:
    """The speed bound and estimate of one option at the request's context and concurrency.

    None when the option's card class has no known bandwidth (an inferred
    ``foo-80g`` label): explorer does not rank on figures it does not have.
    """
    request = request or PlanRequest()
    settings = settings or DEFAULT_SETTINGS
    ev = option.evaluation
    if option.dtype:  # the model as the engine loads it (vLLM and SGLang: a float32 checkpoint at 16 bits)
        shape = shape.at_dtype(option.dtype)
    precision = precision or precision_for(
        shape,
        option.artifact,
        gguf=speed_facts(option.layout.engine).gguf,
        loaded=option.precision,
        bits_per_weight=option.bits_per_weight,
    )
    head_on_host = ev.n_gpu_layers == 0 if getattr(ev, "n_gpu_layers", None) is not None else True
    host_bw = node_host_bandwidth(option.node) if option.node is not None else None
    if host_bw:
        settings = replace(settings, host_bandwidth_bytes_per_s=host_bw)
    got = _estimate(
        shape,
        precision,
        option.layout,
        option.gpu,
        ev.layers_on_host,
        head_on_host,
        max(1, request.context_tokens),
        max(1, request.concurrency),
        request.kv_dtype,
        request.ubatch_tokens,
        settings,
    )
    on_host = option.layout.cpu or ev.layers_on_host > 0
    if got is None or not on_host:
        return got
    note = _default_host_note(settings) if not host_bw else host_reach_note(option.node)
    return replace(got, assumptions=(*got.assumptions, note)) if note else got


def _default_host_note(settings: SpeedSettings) -> str:
    """What a plan with layers on a host of unknown memory bandwidth assumes."""
    return (
        f"layers on the host are read at the assumed {gb(settings.host_bandwidth_bytes_per_s, 0)}/s of host "
        "memory bandwidth (the node names no CPU); name it in the cluster (cpu=NAME of data/cpus.csv, or bw=GBPS) for "
        "its own figure"
    )


@memo(
    8192,
    keyed_on="shape identity, precision, layout, card class, offload, context, concurrency, KV type, ubatch, settings",
)
def _estimate(
    shape,
    precision,
    layout,
    gpu,
    layers_on_host: int,
    head_on_host: bool,
    context: int,
    concurrency: int,
    kv_dtype: str,
    ubatch_tokens: int,
    settings: SpeedSettings,
) -> SpeedEstimate | None:
    facts = speed_facts(layout.engine)
    ubatch = ubatch_tokens if facts.host_layers else 0
    where = placement(shape, precision, layout, gpu, layers_on_host, head_on_host, ubatch, settings)
    if where is None:
        return None
    kv = shape.kv_type(kv_dtype)
    tally = Tally()
    cycle = decode_cycle_s(shape, where, concurrency, context, kv, tally)
    prefill = prefill_s(shape, where, context)
    eff = settings.efficiency_for(layout.engine, facts.efficiency)
    pace = pace_for(facts, None if layout.cpu else gpu, eff)
    step = decode_cycle_s(shape, where, concurrency, context, kv, pace=pace)
    bound = 1.0 / cycle
    aggregate = concurrency * bound
    prices: PriceTable | None = settings.prices  # type: ignore[assignment]
    priced = prices is not None and layout.cards and not (layout.cpu or layout.unified)
    price = prices.usd_per_gpu_hour(layout.gpu_class) if priced else None
    cost = None if price is None else layout.cards * price * step / (concurrency * 3600) * 1e6
    assumed = ()
    if layout.unified and gpu is not None and not gpu.bandwidth_bytes_per_s:
        assumed = (
            f"{gpu.name} names no chip, so its memory bandwidth is taken as the host's "
            f"{gb(settings.host_bandwidth_bytes_per_s, 0)}/s; name the chip (m4-max-128g, m3-ultra-256g…) "
            "for its own figure",
        )
    return SpeedEstimate(
        decode_bound_tokens_per_s=bound,
        decode_estimate_tokens_per_s=1.0 / step,
        decode_aggregate_bound_tokens_per_s=aggregate,
        decode_aggregate_estimate_tokens_per_s=concurrency / step,
        time_to_first_token_bound_s=prefill,
        time_to_first_token_estimate_s=None if prefill is None else prefill / eff,
        cost_per_million_tokens=cost,
        usd_per_gpu_hour=price,
        bound_by=tally.bound_by,
        efficiency=pace.efficiency,
        context_tokens=context,
        concurrency=concurrency,
        breakdown=_breakdown(tally, cycle, concurrency, context, pace, step),
        assumptions=assumed,
    )


def _breakdown(t: Tally, cycle: float, batch: int, context: int, pace: Pace, step: float) -> str:
    parts = [f"{gb(t.weight_bytes, 2)} weights + {gb(t.kv_bytes, 2)} KV read a step (one card a stage)"]
    for label, s in (
        ("memory", t.memory_s),
        ("compute", t.compute_s),
        ("host memory", t.host_s),
        ("interconnect", t.interconnect_s),
    ):
        if s > 0:
            parts.append(f"{label} {s * 1e3:.2f} ms")
    at_eff = cycle / pace.efficiency + pace.token_s
    how = f"bound ÷ {pace.efficiency:g}"
    if step > at_eff * 1.001:  # kernel floors or collectives in practice outweigh the roofline's share
        how += ", each card's layers at least their kernel floors, collectives at what they take in practice"
    if pace.token_s:
        how += f", + {pace.token_s * 1e3:.2f} ms a token"
    return (
        f"batch {batch} at {context:,} tokens: "
        + ", ".join(parts)
        + f"; cycle {cycle * 1e3:.2f} ms (bound); estimate {step * 1e3:.2f} ms a step ({how})"
    )


def tokens_per_s_vs_context(
    option, shape, contexts: Iterable[int], request: PlanRequest | None = None, settings: SpeedSettings | None = None
) -> list[SpeedEstimate | None]:
    """The option's speed at each context (same concurrency), for a tokens/s-versus-context chart."""
    request = request or PlanRequest()
    return [speed_of(option, shape, replace(request, context_tokens=int(c)), settings) for c in contexts]
