"""The least time an engine's decode step takes, whatever the bytes: kernel floors per layer and a per-token cost.

A decode step launches a handful of kernels a layer; each takes a few
microseconds even when it reads little. So once a layout has cut the bytes a
card reads small enough (many cards, a small model, a mixture of experts
with few active parameters), the step is bound by those kernels, not by
memory. The floors are the engine's own facts
(:class:`~explorer.engines.interface.SpeedFacts`: a dense layer, a MoE
layer, and a per-token overhead for sampling, scheduling and the step's
launch), fitted on published rows of each engine with a third kept out
(docs/notes/speed_model.md), for a Hopper-class card; other card generations
scale the layer floors and the overhead (:data:`GENERATION_FLOOR`, fitted the
same way), and a unified-memory chip family its efficiency (:data:`UNIFIED_REACH`).

The floor holds the *estimate*, never the bound: a bound stays the roofline's.
Collectives (tensor-parallel all-reduces, expert-parallel dispatch and
combine, pipeline hand-offs) are not in the floor: they are costed per
layout in :mod:`explorer.speed.roofline`.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.interface import SpeedFacts
from explorer.engines.registry import engine_named

#: a card class's generation, by the start of its name in data/gpus.csv (first match wins)
GENERATIONS: tuple[tuple[str, str], ...] = (
    ("gh200", "hopper"), ("gb200", "blackwell"), ("gb300", "blackwell"),
    ("a100", "ampere"), ("a800", "ampere"), ("a10", "ampere"), ("a40", "ampere"), ("a30", "ampere"),
    ("a6000", "ampere"), ("rtx30", "ampere"), ("rtx-a", "ampere"),
    ("h100", "hopper"), ("h200", "hopper"), ("h800", "hopper"), ("h20", "hopper"),
    ("b200", "blackwell"), ("b300", "blackwell"), ("rtx50", "blackwell"), ("rtx-pro-6000", "blackwell"),
    ("l4", "ada"), ("l40", "ada"), ("rtx40", "ada"), ("rtx-6000-ada", "ada"),
    ("mi", "cdna"),
)  # fmt: skip
#: layer floors and per-token overhead by card generation, relative to a Hopper-class card (unlisted: 1)
GENERATION_FLOOR: dict[str, float] = {"ampere": 2.5}
#: the share of its nominal bandwidth a unified-memory chip family reaches, by the start of its class name
#: (``m1-max-64g`` → ``m1``), relative to the engine's efficiency; unlisted families: 1. Fitted on the
#: published Apple rows (docs/notes/speed_model.md): M1 Max and Ultra run 3B-70B models 1.3-1.7 × slower than
#: M2 / M3 chips of the same bandwidth; the M2 and M3 Ultra rows need no share of their own.
UNIFIED_REACH: dict[str, float] = {"m1": 0.85}


def generation(gpu) -> str:
    """The card generation of a catalogue class (``ampere``, ``hopper``…); ``other`` when its name says none."""
    name = getattr(gpu, "name", "") or ""
    return next((gen for prefix, gen in GENERATIONS if name.startswith(prefix)), "other")


def speed_facts(engine: str) -> SpeedFacts:
    """An engine's speed facts, by its name (the registry's engine).

    Raises:
        PlanError: no engine has the name.
    """
    return engine_named(engine).speed


@dataclass(frozen=True, slots=True, kw_only=True)
class Pace:
    """How an engine's estimate is paced on one card class: its efficiency and its floors there.

    Attributes:
        efficiency: the share of the bound reached (the estimate's step is at least bound step / efficiency).
        dense_layer_s: the least time a dense layer takes on this card class.
        moe_layer_s: the same for a MoE layer.
        token_s: the per-token overhead beyond the layers.
    """

    efficiency: float
    dense_layer_s: float
    moe_layer_s: float
    token_s: float

    def layers_s(self, dense: int, moe: int) -> float:
        """The floor of ``dense`` dense layers and ``moe`` MoE layers."""
        return dense * self.dense_layer_s + moe * self.moe_layer_s


def unified_reach(gpu) -> float:
    """The share of its nominal bandwidth a unified-memory chip reaches beside others (1: a discrete card,
    or a family :data:`UNIFIED_REACH` does not list)."""
    if gpu is None or not getattr(gpu, "unified", False):
        return 1.0
    return UNIFIED_REACH.get(gpu.name.split("-", 1)[0], 1.0)


def pace_for(facts: SpeedFacts, gpu, efficiency: float) -> Pace:
    """The engine's pace on ``gpu``'s class (None: the CPU or an unnamed host, the Hopper-class floors); a
    unified-memory chip's efficiency is scaled by the share of its bandwidth its family reaches."""
    scale = GENERATION_FLOOR.get(generation(gpu), 1.0) if gpu is not None else 1.0
    return Pace(
        efficiency=efficiency * unified_reach(gpu),
        dense_layer_s=facts.dense_layer_floor_s * scale,
        moe_layer_s=facts.moe_layer_floor_s * scale,
        token_s=facts.token_overhead_s * scale,
    )


def decode_floor_s(shape, pace: Pace) -> float:
    """The least time one decode step of ``shape`` takes at ``pace``, collectives aside: every layer's
    kernel floor plus the per-token overhead."""
    moe = shape.moe.moe_layers if shape.moe else 0
    return pace.layers_s(shape.layers - moe, moe) + pace.token_s
