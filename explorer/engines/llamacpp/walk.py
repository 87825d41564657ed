"""llama.cpp's walk: every way it runs an artifact on a cluster, in the order a scheduler tries them.

For each artifact, what the request allows (:func:`~explorer.engines.llamacpp.offload.offload_for`:
``-ngl`` and ``--no-cpu-offload``) decides which layouts are tried:

1. **One node, one class** (each GPU pool): the fewest cards that hold every
   layer (with ``-ngl N``: that hold N layers); wider is "more than needed".
   When no width holds every layer, the node's cards with the most layers on
   them, the rest on the CPU (partial offload), when CPU offload is allowed.
   Widths start at a lower bound (the offloaded weights against a card's
   room, counted not enumerated), and a width narrower than the node's is
   checked in one allocation with every layer on it before it is evaluated.
2. **One node, several classes** (:mod:`~explorer.engines.llamacpp.spans`): a node whose cards differ (an RTX 4090 beside
   an RTX 3090) is one pool to llama.cpp, split in proportion to each card's
   memory; tried only with more cards than one class of the node needs.
3. **Across nodes (RPC)** (:mod:`~explorer.engines.llamacpp.spans`), when one node's cards do not hold it: the node with
   the most cards keeps them, and single cards on the pool's other nodes join
   as ``rpc-server``s, the fewest that hold every layer. When even all of them
   do not, the most layers they hold, the rest on the CPU, only when CPU
   offload is allowed and that beats the node's own partial offload.
4. **Unified memory** (a Mac): its GPU's working set.
5. **CPU only**, on the node with the most RAM.

An option is *free now* when, on some node, llama.cpp launched now with the
same ``-ngl`` fits what is free: each card offering its free memory, the
split following it (:mod:`explorer.engines.llamacpp.offload`), and the host
its free RAM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.collect import Collector
from explorer.engines.layouts import Layout
from explorer.engines.llamacpp.candidates import Ctx, accept, asked, more_than_needed, try_launch
from explorer.engines.llamacpp.launch import NAME, gguf_quant_for, launch_split, llama_model, settings_for
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES, Seat, card_seats, class_seats, metal_seat, offload_for
from explorer.engines.llamacpp.pinned import serves
from explorer.engines.llamacpp.spans import mixed_cards, walk_mixed, walk_rpc
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.errors import LlamaCppConfigError, LlamaCppFitError
from explorer.hardware.cards import roomiest_class_cards
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.copies import host_kinds
from explorer.hardware.pools import Pool, gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.units import cdiv, gib


def walk(
    shape: ModelShape,
    cluster: Cluster,
    artifacts: Sequence[Artifact],
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> None:
    """Every llama.cpp way to run each artifact on the cluster, into ``out`` (see the module docstring)."""
    served = shape.params - sum(t.elements for t in shape.mtp)
    for artifact in artifacts:
        if not serves(artifact):  # another repository's safetensors (AWQ, FP8…), or a safetensors what-if
            where = f"{artifact.repo} publishes" if artifact.repo else "a what-if of"
            out.refuse(
                NAME,
                None,
                artifact.name,
                "format",
                f"llama.cpp loads GGUF files; {where} {artifact.quant} safetensors "
                "(plan a GGUF quant such as Q4_K_M for llama.cpp)",
            )
            continue
        try:
            model = llama_model(shape, artifact)
        except (LlamaCppConfigError, LlamaCppFitError, ValueError) as err:
            out.refuse(NAME, None, artifact.name, "gguf", str(err))
            continue
        offload = offload_for(request, model.n_layer)
        if offload.conflict:
            out.refuse(NAME, None, artifact.name, "cpu-offload", offload.conflict)
            continue
        bits = model.weight_bytes * 8 / served if served else 0.0
        ctx = Ctx(shape, model, artifact, gguf_quant_for(shape, artifact), bits, request, model_ref, out, offload)
        if offload.gpu:
            for pool in gpu_pools(cluster):
                _walk_pool(ctx, pool)
            for node, hosts in cluster.derived(_mixed_kinds):
                walk_mixed(ctx, node, hosts=hosts)
            for node, hosts in cluster.derived(_unified_kinds):
                _walk_unified(ctx, node, hosts=hosts)
        if offload.cpu:
            _walk_cpu(ctx, cluster)
        elif cluster.nodes:
            why = (
                "--no-cpu-offload keeps every layer on the accelerators"
                if not request.cpu_offload
                else f"--ngl {offload.fixed_ngl} offloads layers to the GPUs"
            )
            cpu = Layout(engine=NAME, gpu_class="cpu", gpus_per_node=0, cpu=True)
            out.refuse(NAME, cpu, artifact.name, "cpu-offload", f"no CPU-only option: {why}")


def _mixed_kinds(cluster: Cluster) -> tuple[tuple[Node, int], ...]:
    """The distinct nodes with cards of several classes, each with how many GPU nodes could host its launch
    (built once per cluster: :meth:`Cluster.derived`)."""
    gpu_nodes = cluster.gpu_nodes
    return tuple((node, _count(gpu_nodes, node)) for node in _distinct(n for n in gpu_nodes if mixed_cards(n)))


def _unified_kinds(cluster: Cluster) -> tuple[tuple[Node, int], ...]:
    """The distinct unified-memory hosts, each with how many hosts could take its launch (once per cluster)."""
    unified = cluster.unified_nodes
    return tuple((node, _count(unified, node)) for node in _distinct(unified))


def _distinct(nodes) -> list[Node]:
    seen, out = set(), []
    for n in nodes:
        key = (n.host_ram_bytes, n.cpu.name, tuple((g.gpu.name, g.count) for g in n.gpus))
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


def _count(nodes: Sequence[Node], like: Node) -> int:
    shape = [(g.gpu.name, g.count) for g in like.gpus]
    return sum(
        1 for n in nodes if n.host_ram_bytes >= like.host_ram_bytes and [(g.gpu.name, g.count) for g in n.gpus] == shape
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


def _walk_pool(ctx: Ctx, pool: Pool) -> None:
    """One node of a pool: the fewest cards that hold it, else the node's cards with the rest on the CPU."""
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
    if pool.spannable and (chosen is None or not asked(ctx, chosen)):
        walk_rpc(ctx, pool, chosen)


def _walk_unified(ctx: Ctx, node: Node, *, hosts: int) -> None:
    layout = Layout(engine=NAME, gpu_class=node.gpus[0].gpu.name, unified=True)
    option = try_launch(ctx, layout, (metal_seat(node),), node.gpus[0].gpu, node, hosts=hosts)
    if option is not None and (asked(ctx, option) or ctx.offload.partial):
        ctx.out.accept(replace(option, free_now=node.host_free_bytes >= option.evaluation.host.total))


def _walk_cpu(ctx: Ctx, cluster: Cluster) -> None:
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
