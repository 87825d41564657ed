"""llama.cpp options: one card, a node's cards, RPC across nodes, partial offload, CPU, unified memory.

Every figure comes from :func:`explorer.engines.llamacpp.memory.llamacpp_memory`,
llama.cpp's own allocation rules: exact per tensor when the artifact has a
GGUF header, from the shape at the quant's average bits otherwise (the
original weights are planned as the GGUF they convert to: bf16 → BF16,
8-bit → Q8_0, 4-bit → Q4_K_M).

Per device, ``per_card`` reports the model buffer as ``weights``, the KV
buffer as ``kv_cache``, the compute buffer as ``activations`` and the output
buffer and graph metadata as ``overhead``. A card offers its memory less
:data:`CUDA_CONTEXT_BYTES` (the CUDA runtime and cuBLAS workspace, which
llama.cpp does not print); a host offers
``host_fraction`` of its RAM; a Mac's GPU may use Metal's working set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import ClassVar

from explorer.engines.collect import Collector
from explorer.engines.common import CardMemory, EngineName, Evaluation, Layout, PlanRequest
from explorer.engines.interface import Footprint
from explorer.engines.llamacpp.fit import max_context, max_gpu_layers, max_sequences
from explorer.engines.llamacpp.layers import proportional_tensor_split
from explorer.engines.llamacpp.memory import LlamaCppMemory, llamacpp_memory
from explorer.engines.llamacpp.model import LlamaModel, llama_model_from_gguf
from explorer.engines.llamacpp.settings import Device, LlamaCppSettings
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.engines.options import Option, memory_reason
from explorer.errors import LlamaCppConfigError, LlamaCppFitError
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.pools import Pool, gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.units import MiB

CUDA_CONTEXT_BYTES = 512 * MiB
NAME: EngineName = "llamacpp"

#: the GGUF a what-if precision of the original weights converts to
GGUF_FOR = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "fp8": "Q8_0", "int8": "Q8_0", "bnb int8": "Q8_0"}


def gguf_quant_for(shape: ModelShape, artifact: Artifact) -> str:
    """The GGUF quant llama.cpp would load for an artifact: a GGUF's own; for the original weights the GGUF
    their precision converts to (bf16 → BF16, 8-bit → Q8_0, else Q4_K_M)."""
    if artifact.format == "gguf":
        return artifact.quant
    label = artifact.quant.lower()
    for key, quant in GGUF_FOR.items():
        if label.startswith(key):
            return quant
    return "Q8_0" if shape.precision_of(artifact).nominal_bits >= 8 else "Q4_K_M"


@lru_cache(maxsize=512)  # a model at each quant: the hardware-first view asks for a hundred models
def _model_from_shape(shape: ModelShape, quant: str) -> LlamaModel:
    return llama_model_from_shape(shape, quant)


def llama_model(shape: ModelShape, artifact: Artifact) -> LlamaModel:
    """The llama.cpp model of an artifact: exact from its GGUF header, else from the shape."""
    if artifact.gguf_header is not None:
        return _model_from_header(artifact.gguf_header)
    return _model_from_shape(shape, gguf_quant_for(shape, artifact))


_FROM_HEADER: dict[int, tuple[object, LlamaModel]] = {}


def _model_from_header(header) -> LlamaModel:
    """llama_model_from_gguf, remembered per header object (headers hold a mapping, so they do not hash)."""
    hit = _FROM_HEADER.get(id(header))
    if hit is not None and hit[0] is header:
        return hit[1]
    if len(_FROM_HEADER) > 32:
        _FROM_HEADER.clear()
    model = llama_model_from_gguf(header)
    _FROM_HEADER[id(header)] = (header, model)
    return model


def settings_for(request: PlanRequest, *, ngl: int | None = None, split: tuple[float, ...] = ()) -> LlamaCppSettings:
    """llama.cpp settings for a request: ctx-size = context × sequences, -np = concurrency."""
    kv = "f16" if request.kv_dtype in ("auto", "bf16", "fp16") else request.kv_dtype
    if kv == "fp8":
        kv = "q8_0"
    return LlamaCppSettings(
        n_ctx=request.context_tokens * request.concurrency,
        n_batch=request.batch_tokens,
        n_ubatch=request.ubatch_tokens,
        n_seq=request.concurrency,
        type_k=kv,
        type_v=kv,
        flash_attn=request.flash_attn,
        mmap=request.mmap,
        n_gpu_layers=request.n_gpu_layers if ngl is None else ngl,
        tensor_split=request.tensor_split or split,
    )


def _card(role: str, d, usable: int, capacity: int) -> CardMemory:
    return CardMemory(
        role=role,
        weights=d.model_bytes,
        kv_cache=d.kv_bytes,
        activations=d.compute_bytes,
        overhead=d.output_bytes + d.other_bytes,
        usable=usable,
        capacity=capacity,
    )


def _host_card(mem: LlamaCppMemory, node: Node, request: PlanRequest, unified_bytes: int = 0) -> CardMemory:
    """The host's share; on a unified-memory host the GPU's share comes out of the same RAM first."""
    h = mem.host
    usable = max(0, int(node.host_ram_bytes * request.host_fraction) - unified_bytes)
    role = "host (RAM left beside the GPU's share)" if unified_bytes else "host"
    return CardMemory(
        role=role,
        weights=h.model_bytes,
        kv_cache=h.kv_bytes,
        activations=h.compute_bytes,
        overhead=h.output_bytes + h.other_bytes,
        usable=usable,
        capacity=node.host_ram_bytes,
    )


def command(
    model_ref: str,
    artifact: Artifact,
    quant: str,
    layout: Layout,
    request: PlanRequest,
    mem: LlamaCppMemory,
    split: tuple[float, ...],
) -> str:
    """The ``llama-server`` line; ``quant`` names the converted file when the artifact is not a GGUF."""
    target = artifact.files[0] if artifact.files else f"{model_ref.rsplit('/', 1)[-1]}-{quant}.gguf"
    parts = ["llama-server", f"-m {target}", f"-c {mem.settings.n_ctx}"]
    if not layout.cpu:
        parts.append(f"-ngl {mem.n_gpu_layers}")
    if len(split) > 1:
        parts.append("--tensor-split " + ",".join(f"{x:g}" for x in split))
    if layout.rpc:
        parts.append("--rpc " + ",".join(f"<node{k}>:50052" for k in range(1, layout.nodes)))
    if mem.settings.type_k != "f16":
        parts.append(f"-ctk {mem.settings.type_k} -ctv {mem.settings.type_v}")
    if request.flash_attn != "auto":
        parts.append(f"-fa {request.flash_attn}")
    if request.concurrency > 1:
        parts.append(f"-np {request.concurrency}")
    if not request.mmap:
        parts.append("--no-mmap")
    return " ".join(parts)


def evaluate(
    model: LlamaModel,
    artifact: Artifact,
    layout: Layout,
    gpu: GPUClass | None,
    node: Node,
    request: PlanRequest,
    model_ref: str,
    *,
    quant: str,
    rpc_nodes: int = 1,
) -> tuple[Evaluation, LlamaCppMemory]:
    """Memory of one llama.cpp layout: devices, host, longest context, and the launch command.

    ``quant`` is the GGUF it loads (:func:`gguf_quant_for`).
    """
    devices, usable = _devices(layout, gpu, node, rpc_nodes)
    split = _split_for(request, devices)
    host_bytes = int(node.host_ram_bytes * request.host_fraction)
    settings = settings_for(request, split=split)
    if layout.cpu:
        settings = replace(settings, n_gpu_layers=0)
    elif request.n_gpu_layers is None:
        settings = replace(settings, n_gpu_layers=_ngl(model, settings, devices, host_bytes))
    mem = llamacpp_memory(model, settings, devices)
    capacity = gpu.memory_bytes if gpu else node.host_ram_bytes
    cards = tuple(_card(f"{d.device.name}", d, usable, capacity) for d in mem.devices)
    unified = sum(d.total_bytes for d in mem.devices if d.device.unified)
    host = _host_card(mem, node, request, unified_bytes=unified)
    fits = mem.fits(host_bytes)
    # one sequence, any context: the key leaves the asked context out, so a slider's moves hit the memo
    longest = _longest(model, replace(settings, n_seq=1, n_ctx=0), tuple(devices), host_bytes) if fits else 0
    conc = (
        max_sequences(model, settings, devices, host_bytes, context_tokens=request.context_tokens, known=mem)
        if fits
        else 0
    )
    notes = [f"n_ctx {mem.n_ctx_padded:,} cells (padded to 256)"]
    if not model.exact:
        notes.append(f"sized from the shape at {model.name or 'the quant'}'s average bits (no GGUF header)")
    if mem.layers_on_host:
        notes.append(f"{mem.layers_on_host} of {model.n_layer} layers run on the CPU")
    ev = Evaluation(
        cards=cards,
        host=host,
        max_context_tokens=longest,
        max_concurrency=conc,
        command=command(model_ref, artifact, quant, layout, request, mem, split),
        layers_on_host=mem.layers_on_host,
        notes=tuple(notes),
        free_needed_bytes=max((c.total for c in cards), default=0),
        n_gpu_layers=mem.n_gpu_layers,
    )
    return ev, mem


@lru_cache(maxsize=256)
def _longest(model: LlamaModel, settings: LlamaCppSettings, devices: tuple[Device, ...], host_bytes: int) -> int:
    """The longest single-sequence context that fits with these devices and ``-ngl`` (``settings`` at one
    sequence, ``n_ctx`` 0)."""
    try:
        return max_context(model, settings, devices, host_bytes, limit_tokens=max(model.n_ctx_train, 1))
    except LlamaCppFitError:
        return 0


def _devices(layout: Layout, gpu: GPUClass | None, node: Node, rpc_nodes: int) -> tuple[list[Device], int]:
    if layout.cpu or gpu is None:
        return [], 0
    if layout.unified:
        usable = node.gpu_usable_limit_bytes
        return [Device(name="Metal", kind="metal", memory_bytes=usable)], usable
    usable = gpu.memory_bytes - CUDA_CONTEXT_BYTES
    devices = [Device(name=f"GPU {i}", kind="gpu", memory_bytes=usable) for i in range(layout.gpus_per_node)]
    for k in range(1, rpc_nodes):
        devices += [
            Device(name=f"RPC node {k} GPU {i}", kind="rpc", memory_bytes=usable) for i in range(layout.gpus_per_node)
        ]
    return devices, usable


def _ngl(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device], host_bytes: int) -> int:
    try:
        return max_gpu_layers(model, settings, devices, host_bytes)
    except LlamaCppFitError:
        return model.n_layer + 1


def walk(
    shape: ModelShape,
    cluster: Cluster,
    artifacts: Sequence[Artifact],
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> None:
    """Every llama.cpp way to run each artifact on the cluster, into ``out``."""
    served = shape.params - sum(t.elements for t in shape.mtp)
    for artifact in artifacts:
        try:
            model = llama_model(shape, artifact)
        except (LlamaCppConfigError, LlamaCppFitError, ValueError) as err:
            out.refuse(NAME, None, artifact.name, "gguf", str(err))
            continue
        bits = model.weight_bytes * 8 / served if served else 0.0
        quant = gguf_quant_for(shape, artifact)
        ctx = _Ctx(shape, model, artifact, quant, bits, request, model_ref, out)
        for pool in gpu_pools(cluster):
            _walk_gpu_pool(ctx, pool)
        for node in _distinct(cluster.unified_nodes):
            layout = Layout(engine=NAME, gpu_class=node.gpus[0].gpu.name, unified=True)
            option = _try(ctx, layout, node.gpus[0].gpu, node, hosts=_count(cluster.unified_nodes, node))
            if option is not None:
                ctx.out.accept(option)
        _walk_cpu(ctx, cluster)


class _Ctx:
    """What every llama.cpp candidate of one artifact shares."""

    def __init__(self, shape, model, artifact, quant, bits, request, model_ref, out) -> None:
        self.shape, self.model, self.artifact, self.quant, self.bits = shape, model, artifact, quant, bits
        self.request, self.model_ref, self.out = request, model_ref, out
        self.memo: dict = {}


def _distinct(nodes: Sequence[Node]) -> list[Node]:
    seen, out = set(), []
    for n in nodes:
        key = (n.host_ram_bytes, tuple(g.gpu.name for g in n.gpus))
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


def _count(nodes: Sequence[Node], like: Node) -> int:
    return sum(
        1
        for n in nodes
        if n.host_ram_bytes >= like.host_ram_bytes and [g.gpu.name for g in n.gpus] == [g.gpu.name for g in like.gpus]
    )


def _try(
    ctx: _Ctx,
    layout: Layout,
    gpu: GPUClass | None,
    node: Node,
    *,
    hosts: int,
    free_now: bool = True,
    rpc_nodes: int = 1,
) -> Option | None:
    """Evaluate a layout; accept it if it fits, refuse it with the reason if not.

    Pools of the same class and node size give the same answer: it is computed once per plan.
    """
    key = (layout, gpu.name if gpu else None, node.host_ram_bytes, node.gpu_usable_limit_bytes, rpc_nodes)
    try:
        if key not in ctx.memo:
            ctx.memo[key] = evaluate(
                ctx.model,
                ctx.artifact,
                layout,
                gpu,
                node,
                ctx.request,
                ctx.model_ref,
                quant=ctx.quant,
                rpc_nodes=rpc_nodes,
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
        free_now=free_now and node.host_free_bytes >= (ev.host.total if ev.host else 0),
        hosts=hosts,
        gpu=gpu,
        node=node,
    )
    if not ev.fits:
        ctx.out.refuse(NAME, layout, ctx.artifact.name, "memory", memory_reason(option.per_card), option=option)
        return None
    return option


def _split_for(request: PlanRequest, devices: Sequence[Device]) -> tuple[float, ...]:
    """``--tensor-split``: the user's, else proportional to the devices' memory (none for one device)."""
    if request.tensor_split:
        return request.tensor_split
    return proportional_tensor_split([d.memory_bytes for d in devices]) if len(devices) > 1 else ()


def _holds_every_layer(ctx: _Ctx, layout: Layout, pool: Pool, node: Node) -> bool:
    """One allocation with every layer on the layout's cards: whether they hold it (the host aside).
    A partial offload on fewer cards than the node has is never offered, so it needs no full evaluation."""
    devices, _ = _devices(layout, pool.gpu, node, 1)
    settings = replace(settings_for(ctx.request, split=_split_for(ctx.request, devices)), n_gpu_layers=-1)
    try:
        mem = llamacpp_memory(ctx.model, settings, devices)
    except LlamaCppConfigError:
        return True  # the full evaluation refuses it with llama.cpp's own reason
    return all(d.total_bytes <= d.device.memory_bytes for d in mem.devices)


def _walk_gpu_pool(ctx: _Ctx, pool: Pool) -> None:
    max_width = 1 if pool.gpu.is_mig else pool.width()
    node = max(pool.nodes, key=lambda n: (n.group(pool.gpu.name).count, n.host_ram_bytes))
    full = None
    partial = None
    first = 1
    if ctx.request.n_gpu_layers is None:  # the fewest cards the offloaded weights need, counted not enumerated
        offloadable = ctx.model.weight_bytes - ctx.model.token_embd_bytes
        first = min(max_width, max(1, -(-offloadable // (pool.gpu.memory_bytes - CUDA_CONTEXT_BYTES))))
        if first > 1:
            below = Layout(engine=NAME, gpu_class=pool.gpu.name, gpus_per_node=first - 1, pp=first - 1)
            ctx.out.refuse(
                NAME,
                below,
                ctx.artifact.name,
                "memory-lower-bound",
                f"the offloaded weights alone ({offloadable / 2**30:.1f} GiB) exceed {below.label}; "
                f"partial offload is planned on all {max_width} cards",
                count=first - 1,
            )
    for width in range(first, max_width + 1):
        layout = Layout(engine=NAME, gpu_class=pool.gpu.name, gpus_per_node=width, pp=width)
        if width < max_width and ctx.request.n_gpu_layers is None and not _holds_every_layer(ctx, layout, pool, node):
            ctx.out.refuse(
                NAME,
                layout,
                ctx.artifact.name,
                "partial-offload",
                f"not every layer fits on {layout.label}: the node's {max_width} cards take more",
            )
            continue
        free = any(g.free_count >= width for g in pool.groups)
        option = _try(ctx, layout, pool.gpu, node, hosts=pool.hosts(width), free_now=free)
        if option is None:
            continue
        if option.evaluation.layers_on_host == 0:
            full = option
            if width < max_width:
                ctx.out.refuse(
                    NAME,
                    replace(layout, gpus_per_node=max_width, pp=max_width),
                    ctx.artifact.name,
                    "more-than-needed",
                    f"{layout.label} holds every layer: more cards only split them",
                    count=max_width - width,
                )
            break
        if ctx.request.n_gpu_layers is not None or width == max_width:
            partial = option
        else:
            ctx.out.refuse(
                NAME,
                layout,
                ctx.artifact.name,
                "partial-offload",
                f"{option.evaluation.layers_on_host} layers would stay on the CPU: the node's "
                f"{max_width} cards take more",
            )
    chosen = full or partial
    if chosen is not None:
        ctx.out.accept(chosen)
    if full is None and pool.spannable:
        _walk_rpc(ctx, pool, max_width)


def _walk_rpc(ctx: _Ctx, pool: Pool, width: int) -> None:
    """Across nodes: the first node's cards locally, the others' through RPC servers."""
    nodes = [n for n in pool.nodes if n.group(pool.gpu.name).count >= width]
    for count in range(2, len(nodes) + 1):
        layout = Layout(
            engine=NAME,
            gpu_class=pool.gpu.name,
            fabric=pool.fabric,
            nodes=count,
            gpus_per_node=width,
            pp=count * width,
            rpc=True,
        )
        option = _try(
            ctx,
            layout,
            pool.gpu,
            nodes[0],
            hosts=len(nodes),
            rpc_nodes=count,
            free_now=sum(1 for g in pool.groups if g.free_count >= width) >= count,
        )
        if option is not None and option.evaluation.layers_on_host == 0:
            ctx.out.accept(option)
            if count < len(nodes):
                ctx.out.refuse(
                    NAME,
                    replace(layout, nodes=count + 1, pp=(count + 1) * width),
                    ctx.artifact.name,
                    "more-than-needed",
                    f"{layout.label} holds every layer",
                    count=len(nodes) - count,
                )
            return


def _walk_cpu(ctx: _Ctx, cluster: Cluster) -> None:
    """CPU only: the node with the most RAM; every node whose RAM holds it counts as a host."""
    if not cluster.nodes:
        return
    node = max(cluster.nodes, key=lambda n: n.host_ram_bytes)
    layout = Layout(engine=NAME, gpu_class="cpu", gpus_per_node=0, cpu=True)
    option = _try(ctx, layout, None, node, hosts=1)
    if option is None:
        return
    need = option.evaluation.host.total
    hosts = sum(1 for n in cluster.nodes if int(n.host_ram_bytes * ctx.request.host_fraction) >= need)
    free = any(n.host_free_bytes >= need for n in cluster.nodes)
    ctx.out.accept(replace(option, hosts=hosts, free_now=free))


def recheck(shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str | None = None) -> Option:
    """The same llama.cpp layout at another context or concurrency: same node, same cards, same ``-ngl``."""
    fixed = replace(request, n_gpu_layers=option.evaluation.n_gpu_layers)
    model = llama_model(shape, option.artifact)
    ev, _ = evaluate(
        model,
        option.artifact,
        option.layout,
        option.gpu,
        option.node,
        fixed,
        model_ref or shape.name,
        quant=gguf_quant_for(shape, option.artifact),
        rpc_nodes=option.layout.nodes if option.layout.rpc else 1,
    )
    return option.with_evaluation(ev)


#: the two contexts a footprint's KV slope is measured between
FOOTPRINT_PROBE_TOKENS = (4096, 8192)


def footprint(shape: ModelShape, artifact: Artifact, kv_dtype: str) -> Footprint:
    """A llama.cpp instance's footprint: every layer's buffers at two contexts on the host, plus the CUDA context."""
    model = llama_model(shape, artifact)
    small, large = (
        llamacpp_memory(model, settings_for(PlanRequest(context_tokens=c, kv_dtype=kv_dtype)), ()).host
        for c in FOOTPRINT_PROBE_TOKENS
    )
    low, high = FOOTPRINT_PROBE_TOKENS
    per_token = (large.kv_bytes - small.kv_bytes) // (high - low)
    fixed = (
        small.compute_bytes
        + small.output_bytes
        + small.other_bytes
        + CUDA_CONTEXT_BYTES
        + max(0, small.kv_bytes - per_token * low)
    )
    return Footprint(weights_bytes=small.model_bytes, fixed_bytes_per_card=fixed, kv_bytes_per_token=per_token)


@dataclass(frozen=True, slots=True)
class LlamaCpp:
    """llama.cpp for the planner (an :class:`~explorer.engines.interface.Engine`): it lays out its own
    replicas (one card, a node's cards, RPC across nodes, partial offload, CPU, unified memory)."""

    name: ClassVar[EngineName] = NAME
    data_parallel_flag: ClassVar[str | None] = None

    def walk(
        self,
        shape: ModelShape,
        cluster: Cluster,
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
        out: Collector,
    ) -> None:
        """Every llama.cpp way (:func:`walk`)."""
        walk(shape, cluster, artifacts, request, model_ref, out)

    def recheck(self, shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str) -> Option:
        """Same node, cards and ``-ngl`` at the new request (:func:`recheck`)."""
        return recheck(shape, option, request, model_ref=model_ref)

    def footprint(self, shape: ModelShape, artifact: Artifact, gpu: GPUClass | None, kv_dtype: str) -> Footprint:
        """The same on any card class (:func:`footprint`)."""
        return footprint(shape, artifact, kv_dtype)


ENGINE = LlamaCpp()
