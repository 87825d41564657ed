"""llama.cpp's walk: every way it runs an artifact on a cluster, in the order a scheduler tries them.

For each artifact, what the request allows (:func:`~explorer.engines.llamacpp.offload.offload_for`:
``-ngl`` and ``--no-cpu-offload``) decides which layouts are tried:

1. **One node, one class** (each GPU pool): the fewest cards that hold every
   layer (with ``-ngl N``: that hold N layers); wider is "more than needed".
   When no width holds every layer, the node's cards with the most layers on
   them, the rest on the CPU (partial offload), when CPU offload is allowed.
2. **One node, several classes**: a node whose cards differ (an RTX 4090 beside
   an RTX 3090) is one pool to llama.cpp, split in proportion to each card's
   memory; tried only with more cards than one class of the node needs.
3. **Across nodes (RPC)**, when one node's cards do not hold it: the node with
   the most cards keeps them, and single cards on the pool's other nodes join
   as ``rpc-server``s, the fewest that hold every layer. When even all of them
   do not, the most layers they hold, the rest on the CPU, only when CPU
   offload is allowed and that beats the node's own partial offload.
4. **Unified memory** (a Mac): its GPU's working set.
5. **CPU only**, on the node with the most RAM.

An option is *free now* when, on some node, llama.cpp launched now with the
same ``-ngl`` fits what is free: each card offering its free memory, the
split following it (:mod:`explorer.engines.llamacpp.seats`), and the host
its free RAM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from explorer.engines.collect import Collector
from explorer.engines.common import Evaluation, Layout, PlanRequest
from explorer.engines.llamacpp.launch import NAME, evaluate, gguf_quant_for, launch_split, llama_model
from explorer.engines.llamacpp.offload import offload_for
from explorer.engines.llamacpp.seats import (
    CUDA_CONTEXT_BYTES,
    Seat,
    card_seats,
    class_seats,
    metal_seat,
    rpc_seats,
    seats_from_cards,
)
from explorer.engines.options import Option, memory_reason
from explorer.errors import LlamaCppConfigError, LlamaCppFitError
from explorer.hardware.cards import CardRef, node_cards, roomiest_cards
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.pools import Pool, gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.units import gib

#: the most single-card RPC servers one launch is planned with (gpustack caps its search at 16 cards too)
MAX_RPC_SERVERS = 16


class _Ctx:
    """What every llama.cpp candidate of one artifact shares."""

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
        ctx = _Ctx(shape, model, artifact, gguf_quant_for(shape, artifact), bits, request, model_ref, out, offload)
        if offload.gpu:
            for pool in gpu_pools(cluster):
                _walk_pool(ctx, pool)
            for node in _distinct(n for n in cluster.gpu_nodes if _mixed_cards(n)):
                _walk_mixed(ctx, node, hosts=_count(cluster.gpu_nodes, node))
            for node in _distinct(cluster.unified_nodes):
                _walk_unified(ctx, node, hosts=_count(cluster.unified_nodes, node))
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


def _distinct(nodes) -> list[Node]:
    seen, out = set(), []
    for n in nodes:
        key = (n.host_ram_bytes, tuple((g.gpu.name, g.count) for g in n.gpus))
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


def _count(nodes: Sequence[Node], like: Node) -> int:
    shape = [(g.gpu.name, g.count) for g in like.gpus]
    return sum(
        1 for n in nodes if n.host_ram_bytes >= like.host_ram_bytes and [(g.gpu.name, g.count) for g in n.gpus] == shape
    )


def _holds(ctx: _Ctx, option: Option) -> bool:
    """Whether the option is what was asked: every layer on devices, or exactly the user's ``-ngl``."""
    return ctx.offload.fixed_ngl is not None or option.evaluation.layers_on_host == 0


def _try(
    ctx: _Ctx, layout: Layout, seats: Sequence[Seat], gpu: GPUClass | None, node: Node, *, hosts: int
) -> Option | None:
    """Evaluate a launch; return the option if it fits, refuse it with the reason if not.

    Launches on equal seats and an equal host give the same answer: each is evaluated once per plan.
    """
    key = (layout, tuple(seats), node.host_ram_bytes, node.gpu_usable_limit_bytes)
    try:
        if key not in ctx.memo:
            ctx.memo[key] = evaluate(
                ctx.model, ctx.artifact, layout, seats, node, ctx.request, ctx.model_ref, quant=ctx.quant
            )[0]
        ev = ctx.memo[key]
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


def _now(ctx: _Ctx, option: Option, launches: Sequence[tuple[Sequence[Seat], Node]]) -> Evaluation | None:
    """The first of ``launches`` (seats offering free memory now, on a node) that runs the option now, evaluated."""
    fixed = replace(ctx.request, n_gpu_layers=option.evaluation.n_gpu_layers)
    seen = set()
    for seats, node in launches:
        key = (tuple(seats), node.host_free_bytes, node.host_ram_bytes)
        if key in seen:
            continue
        seen.add(key)
        if any(s.device.memory_bytes == 0 for s in seats):
            continue
        try:
            ev, _ = evaluate(ctx.model, ctx.artifact, option.layout, seats, node, fixed, ctx.model_ref, quant=ctx.quant)
        except (LlamaCppConfigError, LlamaCppFitError):
            continue
        if ev.fits and node.host_free_bytes >= ev.host.total:
            return ev
    return None


def _accept(ctx: _Ctx, option: Option, launches: Sequence[tuple[Sequence[Seat], Node]]) -> None:
    """Accept the option, free now when one of ``launches`` runs it now; a split that follows free memory
    differently from the planned one is noted."""
    now = _now(ctx, option, launches)
    ev = option.evaluation
    split = launch_split(ctx.request, seats_from_cards(now.cards)) if now is not None else ()
    if len(split) > 1 and split != launch_split(ctx.request, seats_from_cards(ev.cards)):
        shares = ",".join(f"{x:.3g}" for x in split)
        ev = replace(ev, notes=(*ev.notes, f"launched now, llama.cpp splits by free memory: --tensor-split {shares}"))
    ctx.out.accept(replace(option, evaluation=ev, free_now=now is not None))


def _class_cards(node: Node, gpu: GPUClass) -> list[CardRef]:
    return [c for c in node_cards(node) if c.gpu.name == gpu.name]


def _more_than_needed(ctx: _Ctx, layout: Layout, label: str, count: int) -> None:
    ctx.out.refuse(
        NAME, layout, ctx.artifact.name, "more-than-needed", f"{label} holds it: more cards only split it", count=count
    )


def _walk_pool(ctx: _Ctx, pool: Pool) -> None:
    """One node of a pool: the fewest cards that hold it, else the node's cards with the rest on the CPU."""
    max_width = 1 if pool.gpu.is_mig else pool.width()
    node = max(pool.nodes, key=lambda n: (n.group(pool.gpu.name).count, n.host_ram_bytes))
    room = pool.gpu.memory_bytes - CUDA_CONTEXT_BYTES
    chosen: Option | None = None
    for width in range(1, max_width + 1):
        layout = Layout(engine=NAME, gpu_class=pool.gpu.name, gpus_per_node=width, pp=width)
        if ctx.offload.fixed_ngl is None and width < max_width and ctx.offloadable_bytes > width * room:
            ctx.out.refuse(
                NAME,
                layout,
                ctx.artifact.name,
                "memory-lower-bound",
                f"the offloaded weights alone ({gib(ctx.offloadable_bytes)}) exceed {layout.label}",
            )
            continue
        option = _try(ctx, layout, class_seats(pool.gpu, width), pool.gpu, node, hosts=pool.hosts(width))
        if option is None:
            continue
        if _holds(ctx, option):
            chosen = option
            if option.evaluation.layers_on_host == 0:
                ctx.full_width[pool.gpu.name] = min(width, ctx.full_width.get(pool.gpu.name, width))
            if width < max_width:
                wider = replace(layout, gpus_per_node=max_width, pp=max_width)
                _more_than_needed(ctx, wider, layout.label, max_width - width)
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
        launches = [
            (card_seats(roomiest_cards(_class_cards(n, pool.gpu), width), now=True), n)
            for n in pool.nodes
            if n.group(pool.gpu.name).count >= width
        ]
        _accept(ctx, chosen, launches)
    if pool.spannable and (chosen is None or not _holds(ctx, chosen)):
        _walk_rpc(ctx, pool, chosen)


def _walk_rpc(ctx: _Ctx, pool: Pool, local: Option | None) -> None:
    """The node with the most cards, plus single-card RPC servers on the pool's other nodes."""
    main = max(pool.nodes, key=lambda n: (n.group(pool.gpu.name).count, n.host_ram_bytes))
    width = main.group(pool.gpu.name).count if not pool.gpu.is_mig else 1
    others = [c for n in pool.nodes if n is not main for c in _class_cards(n, pool.gpu)][:MAX_RPC_SERVERS]
    if not others:
        return
    room = pool.gpu.memory_bytes - CUDA_CONTEXT_BYTES
    first = 1
    if ctx.offload.fixed_ngl is None:  # the offloaded weights alone need this many cards
        first = max(1, -(-ctx.offloadable_bytes // room) - width)

    def layout_with(k: int) -> Layout:
        nodes = 1 + len({c.node.name for c in others[:k]})
        return Layout(
            engine=NAME,
            gpu_class=pool.gpu.name,
            fabric=pool.fabric,
            nodes=nodes,
            gpus_per_node=width,
            pp=width + k,
            rpc=True,
            rpc_servers=k,
        )

    def probe(k: int) -> Option | None:
        seats = class_seats(pool.gpu, width) + rpc_seats(others[:k], placeholder=True)
        return _try(ctx, layout_with(k), seats, pool.gpu, main, hosts=max(1, len(pool.nodes) // layout_with(k).nodes))

    def holds(k: int) -> bool:
        option = probe(k)
        return option is not None and _holds(ctx, option)

    found = _fewest(first, len(others), holds)
    main_cards = _class_cards(main, pool.gpu)[:width]
    if found is not None:
        option = probe(found)
        _accept(ctx, option, [(card_seats(main_cards, now=True) + rpc_seats(others[:found], now=True), main)])
        if found < len(others):
            _more_than_needed(ctx, layout_with(found + 1), option.layout.label, len(others) - found)
        return
    widest = probe(len(others))
    if widest is None or not ctx.offload.partial or ctx.offload.fixed_ngl is not None:
        return
    if local is None or widest.evaluation.layers_on_host < local.evaluation.layers_on_host:
        _accept(ctx, widest, [(card_seats(main_cards, now=True) + rpc_seats(others, now=True), main)])


def _fewest(low: int, high: int, holds: Callable[[int], bool]) -> int | None:
    """The least k in [low, high] for which ``holds(k)`` (true from some k on, as more devices hold more)."""
    if low > high or not holds(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _mixed_cards(node: Node) -> list[CardRef]:
    """A node's cards of more than one class (MIG slices and unified hosts aside), largest first; else empty."""
    if node.unified:
        return []
    cards = [c for c in node_cards(node) if not c.gpu.is_mig]
    if len({c.gpu.name for c in cards}) < 2:
        return []
    return sorted(cards, key=lambda c: (-c.capacity_bytes, c.position))


def _walk_mixed(ctx: _Ctx, node: Node, *, hosts: int) -> None:
    """A node's cards of several classes as one pool, split in proportion to each card's memory."""
    cards = _mixed_cards(node)
    # one class of the node already holds every layer on this many of its cards: more cards only split it
    enough = min(
        (ctx.full_width[g.gpu.name] for g in node.gpus if ctx.full_width.get(g.gpu.name, 1 << 30) <= g.count),
        default=len(cards) + 1,
    )
    chosen: Option | None = None
    for k in range(2, min(len(cards), enough - 1) + 1):
        picked = cards[:k]
        classes = list(dict.fromkeys(c.gpu.name for c in picked))
        if len(classes) < 2:
            continue
        layout = Layout(engine=NAME, gpu_class="+".join(classes), gpus_per_node=k, pp=k)
        slowest = min((c.gpu for c in picked), key=lambda g: (g.bandwidth_bytes_per_s, g.memory_bytes))
        option = _try(ctx, layout, card_seats(picked), slowest, node, hosts=hosts)
        if option is None:
            continue
        if _holds(ctx, option):
            chosen = option
            break
        if k == len(cards):
            chosen = option
    if chosen is not None:
        picked = cards[: chosen.layout.gpus_per_node]
        _accept(ctx, chosen, [(card_seats(picked, now=True), node)])


def _walk_unified(ctx: _Ctx, node: Node, *, hosts: int) -> None:
    layout = Layout(engine=NAME, gpu_class=node.gpus[0].gpu.name, unified=True)
    option = _try(ctx, layout, (metal_seat(node),), node.gpus[0].gpu, node, hosts=hosts)
    if option is not None and (_holds(ctx, option) or ctx.offload.partial):
        ctx.out.accept(replace(option, free_now=node.host_free_bytes >= option.evaluation.host.total))


def _walk_cpu(ctx: _Ctx, cluster: Cluster) -> None:
    """CPU only: the node with the most RAM; every node whose RAM holds it counts as a host."""
    if not cluster.nodes:
        return
    node = max(cluster.nodes, key=lambda n: n.host_ram_bytes)
    layout = Layout(engine=NAME, gpu_class="cpu", gpus_per_node=0, cpu=True)
    option = _try(ctx, layout, (), None, node, hosts=1)
    if option is None:
        return
    need = option.evaluation.host.total
    hosts = sum(1 for n in cluster.nodes if int(n.host_ram_bytes * ctx.request.host_fraction) >= need)
    free = any(n.host_free_bytes >= need for n in cluster.nodes)
    ctx.out.accept(replace(option, hosts=hosts, free_now=free))
