"""Why decode is memory-bound, for the teaching notebook ``notebooks/speed.py``.

Every figure is the speed model's own (:mod:`explorer.speed.roofline`): the
placement of an option's layers, each card's step term by term
(:func:`~explorer.speed.roofline.part_step_cost`: bytes read, FLOPs, the two
times), the cycle and the published measurements compared by
:func:`explorer.speed.published.compare`. This module sweeps them (batch,
tensor parallelism, layers left on the host) and writes the arithmetic out,
e.g. for Llama-3.1-8B at bf16 on an H100, one sequence at 8,192 tokens:
``(15.01 GB weights + 1.07 GB KV) / 3,350 GB/s = 4.80 ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.engines.layouts import Layout
from explorer.engines.registry import SPLIT_ENGINES
from explorer.engines.request import PlanRequest
from explorer.hardware.catalogue import GPUClass
from explorer.sources.shipped import published_speeds, shipped_catalogue, shipped_cpus
from explorer.speed.estimate import DEFAULT_SETTINGS
from explorer.speed.published import MODELS, compare, machine_for, unmapped
from explorer.speed.roofline import StepCost, decode_cycle_s, part_step_cost, placement
from explorer.speed.settings import peak_flops_per_s
from explorer.ui.parallel_lesson import ENGINE, vllm_layout

__all__ = [
    "BATCH_STEPS",
    "CARDS",
    "LESSON_MODELS",
    "PRECISIONS",
    "SpeedDefaults",
    "Step",
    "batch_sweep",
    "decode_step",
    "offload_rows",
    "published_rows",
    "roofline_rows",
    "tp_rows",
]

#: (what it shows, snapshot repo)
LESSON_MODELS: tuple[tuple[str, str], ...] = (
    ("dense, 8 B", "meta-llama/Meta-Llama-3.1-8B"),
    ("dense, 70 B", "meta-llama/Meta-Llama-3.1-70B"),
    ("mixture of experts, 3.3 B of 30.5 B active", "Qwen/Qwen3-30B-A3B"),
)
#: card classes offered (data/gpus.csv)
CARDS: tuple[str, ...] = ("h100-80g", "h200-141g", "a100-80g", "l40s-48g", "rtx4090-24g")
#: weight precisions offered (what-if names)
PRECISIONS: tuple[str, ...] = ("bf16", "fp8", "int4-awq")
#: the batch slider: sequences decoding together
BATCH_STEPS: tuple[int, ...] = tuple(2**i for i in range(11))
#: the GGUF llama.cpp offloads in the lesson
OFFLOAD_QUANT = "Q4_K_M"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedDefaults:
    """What the speed lesson opens with (tests override it).

    Attributes:
        model: a :data:`LESSON_MODELS` repo.
        gpu_class: a :data:`CARDS` class.
        precision: a :data:`PRECISIONS` name.
        batch: sequences decoding together (a :data:`BATCH_STEPS` value).
        context_tokens: the context each holds.
    """

    model: str = "meta-llama/Meta-Llama-3.1-8B"
    gpu_class: str = "h100-80g"
    precision: str = "bf16"
    batch: int = 1
    context_tokens: int = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One decode step of ``batch`` sequences on one card of a tensor-parallel group, and its bound.

    Attributes:
        cost: the card's step, term by term (bytes, FLOPs, the two times, all-reduces).
        bandwidth_bytes_per_s: the card's memory bandwidth.
        peak_flops_per_s: its peak for these weights (fp8 where they are 8 bits or fewer and it has fp8).
        active_params: parameters a token uses on this card (dense share, plus k/E of its experts).
        batch: sequences decoding together.
        context_tokens: the context each holds.
        tp: cards in the tensor-parallel group.
        cycle_s: seconds between two tokens of one sequence.
    """

    cost: StepCost
    bandwidth_bytes_per_s: float
    peak_flops_per_s: float
    active_params: float
    batch: int
    context_tokens: int
    tp: int
    cycle_s: float

    @property
    def tokens_per_s(self) -> float:
        """All sequences together, at most: ``batch / cycle``."""
        return self.batch / self.cycle_s

    @property
    def bound_by(self) -> str:
        """``memory`` when reading takes longer than computing, else ``compute``."""
        return "compute" if self.cost.compute_s > self.cost.memory_s else "memory"

    @property
    def intensity(self) -> float:
        """FLOPs per byte read; the card turns compute-bound past ``peak / bandwidth`` (its ridge)."""
        return self.cost.flops / (self.cost.weight_bytes + self.cost.kv_bytes)

    @property
    def ridge(self) -> float:
        """The card's FLOPs per byte of bandwidth: H100 989.4 TFLOP/s / 3.35 TB/s = 295."""
        return self.peak_flops_per_s / self.bandwidth_bytes_per_s

    def formulas(self) -> tuple[str, str]:
        """(memory line, compute line) in this step's numbers, GB = 10⁹ bytes, TFLOP = 10¹² FLOPs."""
        c, b = self.cost, self.batch
        memory = (
            f"({c.weight_bytes / 1e9:,.2f} GB weights + {b} × {c.kv_bytes / b / 1e9:,.3f} GB KV) "
            f"/ {self.bandwidth_bytes_per_s / 1e9:,.0f} GB/s = {c.memory_s * 1e3:,.3f} ms"
        )
        attention = c.flops / (2 * b) - self.active_params
        compute = (
            f"2 × {b} × ({self.active_params / 1e9:,.2f} B parameters + {attention / 1e9:,.2f} B for attention) "
            f"= {c.flops / 1e12:,.3f} TFLOP / {self.peak_flops_per_s / 1e12:,.1f} TFLOP/s = {c.compute_s * 1e3:,.3f} ms"
        )
        return memory, compute


def _layout(shape, gpu_class: str, tp: int) -> tuple[Layout, GPUClass]:
    return vllm_layout(shape, gpu_class, tp, 1, PlanRequest())


def decode_step(shape, precision_name: str, gpu_class: str, batch: int, context: int, tp: int = 1) -> Step | None:
    """One card's decode step at ``tp`` (vLLM's layout), from the speed model; None when the card has no bandwidth."""
    precision = shape.resolve_precision(precision_name)
    layout, gpu = _layout(shape, gpu_class, tp)
    where = placement(shape, precision, layout, gpu, 0, False, 0, DEFAULT_SETTINGS)
    if where is None:
        return None
    part, kv = where.parts[0], shape.kv_type("auto")
    moe = shape.moe
    k_over_e = moe.experts_per_token / moe.experts if moe and moe.experts else 0.0
    return Step(
        cost=part_step_cost(shape, part, batch, context, kv),
        bandwidth_bytes_per_s=part.bandwidth_bytes_per_s,
        peak_flops_per_s=peak_flops_per_s(gpu, precision),
        active_params=part.profile.dense_params + part.profile.expert_params * k_over_e,
        batch=batch,
        context_tokens=context,
        tp=tp,
        cycle_s=decode_cycle_s(shape, where, batch, context, kv),
    )


def batch_sweep(
    shape, precision_name: str, gpu_class: str, context: int, batches: Iterable[int] = BATCH_STEPS
) -> list[dict[str, Any]]:
    """Each batch's step on one card: reading the weights, reading the KV cache, both (memory), computing,
    the step (ms), tokens/s and what bounds it. Batching shares one read of the weights among the
    sequences; each sequence still reads its own KV cache."""
    rows = []
    for b in batches:
        step = decode_step(shape, precision_name, gpu_class, b, context)
        if step is None:
            return []
        bw = step.bandwidth_bytes_per_s
        rows.append(
            {
                "batch": b,
                "weights_ms": step.cost.weight_bytes / bw * 1e3,
                "kv_ms": step.cost.kv_bytes / bw * 1e3,
                "memory_ms": step.cost.memory_s * 1e3,
                "compute_ms": step.cost.compute_s * 1e3,
                "step_ms": step.cycle_s * 1e3,
                "tokens_per_s": step.tokens_per_s,
                "bound_by": step.bound_by,
                "intensity": step.intensity,
                "tflops": step.cost.flops / step.cycle_s / 1e12,
            }
        )
    return rows


def roofline_rows(step: Step, intensities: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """The card's roofline: attainable TFLOP/s = min(peak, FLOPs per byte × bandwidth), on a log grid."""
    grid = intensities if intensities is not None else [10 ** (i / 8) for i in range(-8, 33)]
    return [{"intensity": x, "tflops": min(step.peak_flops_per_s, x * step.bandwidth_bytes_per_s) / 1e12} for x in grid]


def tp_rows(
    shape, precision_name: str, gpu_class: str, batch: int, context: int, tps: Sequence[int] = (1, 2, 4, 8)
) -> list[dict[str, Any]]:
    """The step at each tensor-parallel size: bytes a card reads, memory and all-reduce ms, tokens/s a sequence;
    the planner's refusal instead where the split is not allowed."""
    engine, rows = SPLIT_ENGINES[ENGINE], []
    for tp in tps:
        layout, _gpu = _layout(shape, gpu_class, tp)
        refusals = engine.refusals(shape, layout, PlanRequest())
        step = None if refusals else decode_step(shape, precision_name, gpu_class, batch, context, tp)
        rows.append(
            {
                "tp": tp,
                "refused": refusals[0][1] if refusals else "",
                "gb_a_card": None if step is None else (step.cost.weight_bytes + step.cost.kv_bytes) / 1e9,
                "memory_ms": None if step is None else step.cost.memory_s * 1e3,
                "allreduce_ms": None if step is None else step.cost.allreduce_s * 1e3,
                "tokens_per_s": None if step is None else 1 / step.cycle_s,
            }
        )
    return rows


def offload_rows(shape, gpu_class: str, context: int, quant: str = OFFLOAD_QUANT) -> list[dict[str, Any]]:
    """llama.cpp on one card with its first L layers on the host (100 GB/s): the bound for each L, one sequence.

    Each layer moved to the host is read at host bandwidth instead of the card's; the output head stays on the card.
    """
    precision = shape.resolve_precision(quant)
    gpu = shipped_catalogue().get(gpu_class)
    layout, kv, rows = Layout(engine="llamacpp", gpu_class=gpu.name), shape.kv_type("auto"), []
    for on_host in range(shape.layers + 1):
        where = placement(shape, precision, layout, gpu, on_host, False, 512, DEFAULT_SETTINGS)
        if where is None:
            return []
        rows.append({"layers_on_host": on_host, "tokens_per_s": 1 / decode_cycle_s(shape, where, 1, context, kv)})
    return rows


def published_rows(shape_of: Callable[[str], Any]) -> list[dict[str, Any]]:
    """Every mapped published measurement beside its bound and estimate (``shape_of``: a repo's shape)."""
    rows = []
    catalogue, cpus = shipped_catalogue(), shipped_cpus()
    for m in published_speeds():
        if unmapped(m) is not None:
            continue
        c = compare(m, shape_of(MODELS[m.model]), machine_for(m, catalogue, cpus))
        rows.append(
            {
                "source": m.source_id,
                "setup": f"{m.engine} · {m.model} {m.quant} · {m.n_gpus}× {c.gpu_class}",
                "metric": c.metric,
                "measured": m.measured_tokens_per_s,
                "bound": c.bound_tokens_per_s,
                "estimate": c.estimate_tokens_per_s,
                "bound_ratio": c.bound_ratio,
                "estimate_ratio": c.estimate_ratio,
                "engine": m.engine.split(" ")[0],
            }
        )
    return rows
