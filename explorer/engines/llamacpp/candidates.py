"""What every llama.cpp candidate of a walk shares: the artifact's context, and how a candidate is tried,
judged free now and accepted (:mod:`explorer.engines.llamacpp.walk`, :mod:`explorer.engines.llamacpp.spans`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.layouts import Layout
from explorer.engines.llamacpp.launch import NAME, evaluate, launch_split, settings_for
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.offload import Seat, seats_from_cards
from explorer.engines.options import Option, memory_reason
from explorer.errors import LlamaCppAbortError, LlamaCppConfigError, LlamaCppFitError
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Node


class Ctx:
    """What every llama.cpp candidate of one artifact shares (the walk's state for one artifact)."""

    def __init__(self, shape, model, artifact, quant, bits, request, model_ref, out, offload) -> None:
        self.shape, self.model, self.artifact, self.quant, self.bits = shape, model, artifact, quant, bits
        self.request, self.model_ref, self.out, self.offload = request, model_ref, out, offload
        self.memo: dict = {}
        #: per card class, the fewest cards of it on one node that hold every layer
        self.full_width: dict[str, int] = {}

    @property
    def offloadable_bytes(self) -> int:
        """Weights that can leave the host (``token_embd`` always stays)."""
        return self.model.weight_bytes - self.model.token_embd_bytes


def asked(ctx: Ctx, option: Option) -> bool:
    """Whether the option is what was asked: every layer on devices, or exactly the user's ``-ngl``."""
    return ctx.offload.fixed_ngl is not None or option.evaluation.layers_on_host == 0


def try_launch(
    ctx: Ctx, layout: Layout, seats: Sequence[Seat], gpu: GPUClass | None, node: Node, *, hosts: int
) -> Option | None:
    """Evaluate a launch; return the option if it fits, refuse it with the reason if not.

    Launches on equal seats and an equal host give the same answer: each is evaluated once per plan.
    """
    key = (layout, tuple(seats), node.host_ram_bytes, node.cpu.name, node.gpu_usable_limit_bytes)
    try:
        if key not in ctx.memo:
            ctx.memo[key] = evaluate(
                ctx.model, ctx.artifact, layout, seats, node, ctx.request, ctx.model_ref, quant=ctx.quant
            )[0]
        ev = ctx.memo[key]
    except LlamaCppAbortError as err:  # llama.cpp would start and abort: the reason says what to change
        ctx.out.refuse(NAME, layout, ctx.artifact.name, "llamacpp-abort", str(err))
        return None
    except LlamaCppConfigError as err:
        ctx.out.refuse(NAME, layout, ctx.artifact.name, "llamacpp-config", err.message)
        return None
    option = Option(
        layout=layout,
        artifact=ctx.artifact,
        precision=ctx.quant,
        bits_per_weight=ctx.bits,
        evaluation=ev,
        free_now=False,
        hosts=hosts,
        gpu=gpu,
        node=node,
    )
    if not ev.fits:
        ctx.out.refuse(NAME, layout, ctx.artifact.name, "memory", memory_reason(option.per_card), option=option)
        return None
    return option


def launched_now(ctx: Ctx, option: Option, launches: Sequence[tuple[Sequence[Seat], Node]]) -> tuple[float, ...] | None:
    """The split of the first of ``launches`` (seats offering free memory now, on a node) that runs the option now
    with its ``-ngl``; None when none does. Seats offering what the planned ones offer (idle cards) run it when the
    host has the RAM free; others are sized again, llama.cpp's buffers only."""
    planned = seats_from_cards(option.evaluation.cards)
    offered = [s.device.memory_bytes for s in planned]
    fixed = replace(ctx.request, n_gpu_layers=option.evaluation.n_gpu_layers)
    host_need = option.evaluation.host.total if option.evaluation.host else 0
    seen = set()
    for seats, node in launches:
        key = (tuple(seats), node.host_free_bytes, node.host_ram_bytes, node.cpu.name)
        if key in seen or node.host_free_bytes < host_need or any(s.device.memory_bytes == 0 for s in seats):
            continue
        seen.add(key)
        if [s.device.memory_bytes for s in seats] == offered:
            return launch_split(ctx.request, planned)
        try:
            split = launch_split(ctx.request, seats)
            settings = settings_for(fixed, split=split, cpu=node.cpu.build)
            mem = llamacpp_memory(ctx.model, settings, [s.device for s in seats])
        except (LlamaCppConfigError, LlamaCppFitError):
            continue
        host_bytes = int(node.host_ram_bytes * ctx.request.host_fraction)
        if mem.fits(host_bytes) and node.host_free_bytes >= mem.host.total_bytes:
            return split
    return None


def accept(ctx: Ctx, option: Option, launches: Sequence[tuple[Sequence[Seat], Node]]) -> None:
    """Accept the option, free now when one of ``launches`` runs it now; a split that follows free memory
    differently from the planned one is noted."""
    split = launched_now(ctx, option, launches)
    ev = option.evaluation
    if split is not None and len(split) > 1 and split != launch_split(ctx.request, seats_from_cards(ev.cards)):
        shares = ",".join(f"{x:.3g}" for x in split)
        ev = replace(ev, notes=(*ev.notes, f"launched now, llama.cpp splits by free memory: --tensor-split {shares}"))
    ctx.out.accept(replace(option, evaluation=ev, free_now=split is not None))


def more_than_needed(ctx: Ctx, layout: Layout, label: str, count: int) -> None:
    """Refuse ``count`` wider layouts: ``label`` already holds the model."""
    ctx.out.refuse(
        NAME, layout, ctx.artifact.name, "more-than-needed", f"{label} holds it: more cards only split it", count=count
    )
