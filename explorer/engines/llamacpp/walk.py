"""llama.cpp's walk: its state for an artifact, how a candidate launch is tried, judged free now and accepted, and
the layouts of one class on one node, of a Mac's unified memory and of the CPU.

:mod:`~explorer.engines.llamacpp.spans` adds the layouts that span several classes or nodes, and
:func:`explorer.engines.llamacpp.engine.walk` tries them all in a scheduler's order.

- **One node, one class** (each GPU pool): the fewest cards that hold every
  layer (with ``-ngl N``: that hold N layers); wider is "more than needed".
  When no width holds every layer, the node's cards with the most layers on
  them, the rest on the CPU (partial offload), when CPU offload is allowed.
  Widths start at a lower bound (the offloaded weights against a card's
  room, counted not enumerated), and a width narrower than the node's is
  checked in one allocation with every layer on it before it is evaluated.
- **Unified memory** (a Mac): its GPU's working set.
- **CPU only**, on the node with the most RAM.

An option is *free now* when, on some node, llama.cpp launched now with the
same ``-ngl`` fits what is free: each card offering its free memory, the
split following it (:mod:`explorer.engines.llamacpp.offload`), and the host
its free RAM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.layouts import Layout
from explorer.engines.llamacpp.launch import NAME, evaluate, launch_split, nominal_bits_for, settings_for
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.offload import (
    CUDA_CONTEXT_BYTES,
    Seat,
    card_seats,
    class_seats,
    metal_seat,
    seats_from_cards,
)
from explorer.engines.options import Option, memory_reason
from explorer.errors import LlamaCppAbortError, LlamaCppConfigError, LlamaCppFitError
from explorer.hardware.cards import roomiest_class_cards
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.copies import host_kinds
from explorer.hardware.pools import Pool
from explorer.units import cdiv, gib


class Ctx:
    """What every llama.cpp candidate of one artifact shares (the walk's state for one artifact)."""

    def __init__(self, shape, model, artifact, quant, bits, request, model_ref, out, offload) -> None:
        self.shape, self.model, self.artifact, self.quant, self.bits = shape, model, artifact, quant, bits
        self.nominal_bits = nominal_bits_for(shape, artifact)
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
        nominal_bits=ctx.nominal_bits,
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


def _fewest_width(ctx: Ctx, pool: Pool, max_width: int) -> int:
    """The fewest cards whose room the offloaded weights need, counted not enumerated (1 with ``-ngl`` given);
    narrower widths are refused at once (``memory-lower-bound``)."""
    if ctx.offload.fixed_ngl is not None:
        return 1
    room = max(1, pool.gpu.memory_bytes - CUDA_CONTEXT_BYTES)  # a card smaller than the CUDA context holds nothing
    first = min(max_width, max(1, cdiv(ctx.offloadable_bytes, room)))
    if first > 1:
        below = Layout(engine=NAME, gpu_class=pool.gpu.name, gpus_per_node=first - 1, pp=first - 1)
        ctx.out.refuse(
            NAME,
            below,
            ctx.artifact.name,
            "memory-lower-bound",
            f"the offloaded weights alone ({gib(ctx.offloadable_bytes)}) exceed {below.label}"
            + (f"; partial offload is planned on all {max_width} cards" if ctx.offload.partial else ""),
            count=first - 1,
        )
    return first


def _holds_every_layer(ctx: Ctx, seats: Sequence[Seat]) -> bool:
    """One allocation with every layer on ``seats``: whether they hold it (the host aside). A partial offload on
    fewer cards than the node has is never offered, so a width that fails this needs no full evaluation."""
    settings = replace(settings_for(ctx.request, split=launch_split(ctx.request, seats)), n_gpu_layers=-1)
    try:
        mem = llamacpp_memory(ctx.model, settings, [s.device for s in seats])
    except LlamaCppConfigError:
        return True  # the full evaluation refuses it with llama.cpp's own reason
    return all(d.total_bytes <= d.device.memory_bytes for d in mem.devices)


def walk_pool(ctx: Ctx, pool: Pool) -> Option | None:
    """One node of a pool: the fewest cards that hold it, else the node's cards with the rest on the CPU; the
    option accepted (None: none), which RPC across the pool's nodes must beat."""
    max_width = 1 if pool.gpu.is_mig else pool.width()
    # the first node of the most cards and host RAM: the first of its kind (alike nodes share both)
    node = max((n for n, _ in pool.kinds), key=lambda n: (n.group(pool.gpu.name).count, n.host_ram_bytes))
    chosen: Option | None = None
    for width in range(_fewest_width(ctx, pool, max_width), max_width + 1):
        layout = Layout(engine=NAME, gpu_class=pool.gpu.name, gpus_per_node=width, pp=width)
        seats = class_seats(pool.gpu, width)
        partial_here = width < max_width and ctx.offload.fixed_ngl is None and ctx.offload.partial
        if partial_here and not _holds_every_layer(ctx, seats):
            ctx.out.refuse(
                NAME,
                layout,
                ctx.artifact.name,
                "partial-offload",
                f"not every layer fits on {layout.label}: the node's {max_width} cards take more",
            )
            continue
        option = try_launch(ctx, layout, seats, pool.gpu, node, hosts=pool.hosts(width))
        if option is None:
            continue
        if asked(ctx, option):
            chosen = option
            if option.evaluation.layers_on_host == 0:
                ctx.full_width[pool.gpu.name] = min(width, ctx.full_width.get(pool.gpu.name, width))
            if width < max_width:
                wider = replace(layout, gpus_per_node=max_width, pp=max_width)
                more_than_needed(ctx, wider, layout.label, max_width - width)
            break
        if width == max_width:
            chosen = option
        else:
            ctx.out.refuse(
                NAME,
                layout,
                ctx.artifact.name,
                "partial-offload",
                f"{option.evaluation.layers_on_host} layers would stay on the CPU: the node's {max_width} cards take more",
            )
    if chosen is not None:
        width = chosen.layout.gpus_per_node
        launches = [  # one node of each kind: alike nodes launch alike
            (card_seats(roomiest_class_cards(n, pool.gpu.name, width), now=True), n)
            for n, _ in pool.kinds
            if n.group(pool.gpu.name).count >= width
        ]
        accept(ctx, chosen, launches)
    return chosen


def walk_unified(ctx: Ctx, node: Node, *, hosts: int) -> None:
    """A unified-memory host (a Mac): its GPU's working set of the RAM."""
    layout = Layout(engine=NAME, gpu_class=node.gpus[0].gpu.name, unified=True)
    option = try_launch(ctx, layout, (metal_seat(node),), node.gpus[0].gpu, node, hosts=hosts)
    if option is not None and (asked(ctx, option) or ctx.offload.partial):
        ctx.out.accept(replace(option, free_now=node.host_free_bytes >= option.evaluation.host.total))


def walk_cpu(ctx: Ctx, cluster: Cluster) -> None:
    """CPU only: the node with the most RAM; every node whose RAM holds it counts as a host."""
    if not cluster.nodes:
        return
    kinds = host_kinds(cluster)  # the first node of each kind: the first of the most RAM is among them
    node = max((n for n, _ in kinds), key=lambda n: n.host_ram_bytes)
    layout = Layout(engine=NAME, gpu_class="cpu", gpus_per_node=0, cpu=True)
    option = try_launch(ctx, layout, (), None, node, hosts=1)
    if option is None:
        return
    need = option.evaluation.host.total
    hosts = sum(many for n, many in kinds if int(n.host_ram_bytes * ctx.request.host_fraction) >= need)
    free = any(n.host_free_bytes >= need for n, _ in kinds)
    ctx.out.accept(replace(option, hosts=hosts, free_now=free))
