"""One llama.cpp launch: its settings, its memory on the devices it offloads to, and its command.

Every figure comes from :func:`explorer.engines.llamacpp.memory.llamacpp_memory`,
llama.cpp's own allocation rules: exact per tensor when the artifact has a
GGUF header, from the shape at the quant's average bits otherwise (the
original weights are planned as the GGUF they convert to: bf16 → BF16,
float32 → F16 as ``convert_hf_to_gguf.py``'s default writes it, 8-bit → Q8_0,
4-bit → Q4_K_M).

Per device, ``per_card`` reports the model buffer as ``weights``, the KV
buffer as ``kv_cache``, the compute buffer as ``activations`` and the output
buffer and graph metadata as ``overhead``. The devices are
:class:`~explorer.engines.llamacpp.offload.Seat`s (a card offers its memory less
the CUDA context); a host offers ``host_fraction`` of its RAM; a Mac's GPU
may use Metal's working set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from explorer.artifacts.checkpoints import convert_ref, placeholder_ref
from explorer.engines.evaluation import CardMemory, Evaluation, NodeCommand
from explorer.engines.layouts import Layout
from explorer.engines.llamacpp.fit import gpu_layers_fit, max_context, max_sequences
from explorer.engines.llamacpp.layers import proportional_tensor_split
from explorer.engines.llamacpp.memory import LlamaCppMemory, llamacpp_memory
from explorer.engines.llamacpp.model import LlamaModel, llama_model_from_gguf
from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES, Seat, seats_from_cards
from explorer.engines.llamacpp.settings import Device, LlamaCppSettings, cache_type
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.engines.names import EngineName
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.engines.setting import launch_flags
from explorer.errors import LlamaCppFitError, UnknownPrecisionError
from explorer.hardware.cluster import Node
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape

NAME: EngineName = "llamacpp"

#: the GGUF a what-if precision of the original weights converts to
GGUF_FOR = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "fp8": "Q8_0", "int8": "Q8_0", "bnb int8": "Q8_0"}

#: the GGUF ``convert_hf_to_gguf.py --outtype auto`` (its default) writes from a float32 checkpoint at llama.cpp
#: 0c1e57098 (``conversion/base.py``: no 2-D bfloat16 or float16 tensor found, "defaulting to --outtype f16");
#: releases before the converter was split into ``conversion/`` wrote BF16 for it, so the printed conversion
#: names the type (:func:`~explorer.artifacts.checkpoints.convert_ref`: ``--outtype f16``)
FLOAT32_CONVERTS_TO = "F16"


def gguf_quant_for(shape: ModelShape, artifact: Artifact) -> str:
    """The GGUF quant llama.cpp would load for an artifact: a GGUF's own (an artifact's, or the precision of a
    model read from a GGUF header); for the original weights the GGUF their precision converts to (bf16 → BF16,
    float32 → F16 as the converter's default writes it: :data:`FLOAT32_CONVERTS_TO`; 8-bit → Q8_0, else
    Q4_K_M); a float32 what-if (``--quant fp32``) keeps F32. Original MXFP4 experts (gpt-oss)
    convert to their checkpoint's float type: the converter keeps the experts as they are
    (:func:`~explorer.model.conversion.converted_precision`), where ``llama-quantize`` to Q4_K_M would
    re-quantise them to Q5_0 (2,880 columns are not whole 256-blocks) and grow the file."""
    if artifact.format == "gguf":
        return artifact.quant
    precision = shape.precision_of(artifact)
    if precision.method == "gguf":
        return precision.name
    if not artifact.what_if and precision.method == "none" and precision.name == "fp32":
        return FLOAT32_CONVERTS_TO
    if precision is shape.precision and precision.method == "mxfp4" and precision.base.name in GGUF_FOR:
        return GGUF_FOR[precision.base.name]
    label = artifact.quant.lower()
    for key, quant in GGUF_FOR.items():
        if label.startswith(key):
            return quant
    return "Q8_0" if shape.precision_of(artifact).nominal_bits >= 8 else "Q4_K_M"


def nominal_bits_for(shape: ModelShape, artifact: Artifact) -> float:
    """The nominal bits a weight of what llama.cpp loads (:attr:`~explorer.engines.options.Option.nominal_bits`):
    the precision the artifact names (Q4_K_M: 4.89; the original bf16 weights converted: 16); 0.0 for a GGUF
    whose types explorer names no precision for (``mixed``), which the ranking then classes by its real bits; a
    float32 checkpoint's weights 16, as the F16 GGUF they convert to (:func:`gguf_quant_for`)."""
    try:
        precision = shape.precision_of(artifact)
        if artifact.format != "gguf" and gguf_quant_for(shape, artifact) == FLOAT32_CONVERTS_TO:
            precision = shape.resolve_precision("fp16")
        return precision.nominal_bits
    except UnknownPrecisionError:
        return 0.0


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


def settings_for(
    request: PlanRequest, *, ngl: int | None = None, split: tuple[float, ...] = (), cpu: str = "avx2"
) -> LlamaCppSettings:
    """llama.cpp settings for a request: ctx-size = context × sequences, -np = concurrency; ``cpu`` is the
    host CPU llama.cpp is built for (a node's ``cpu``), which picks its CPU buffers."""
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
        cpu=cpu,
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


def gguf_source(artifact: Artifact, quant: str, model_ref: str) -> str:
    """Where ``llama-server`` loads the model from: a published GGUF repository's file
    (``--hf-repo REPO --hf-file FILE``), the file itself, or, for weights that need converting
    first, a visible placeholder that no shell would run by mistake."""
    if artifact.format == "gguf" and artifact.files:
        repo = artifact.repo or (model_ref if _is_hub_id(model_ref) else None)
        if repo:
            return f"--hf-repo {repo} --hf-file {artifact.files[0]}"
        if model_ref.lower().endswith(".gguf"):  # a local file, by the path the plan was made from
            return f"-m {model_ref}"
        return f"-m {artifact.files[0]}"
    if artifact.format == "gguf":  # a what-if GGUF quant that no known repository publishes
        return f"-m {placeholder_ref(f'{quant} GGUF', model_ref)}"
    return f"-m {convert_ref(quant, model_ref)}"


def names_model(flag: str) -> bool:
    """Whether a ``llama-server`` flag (of :func:`gguf_source`) names the model it loads (``-m``, ``--hf-repo``)."""
    return flag.startswith(("-m ", "--hf-repo ", "-hf "))


def _is_hub_id(ref: str) -> bool:
    """``org/name`` (not a local path): what ``--hf-repo`` takes."""
    return ref.count("/") == 1 and not ref.startswith((".", "/", "~")) and not ref.lower().endswith(".gguf")


def command(
    model_ref: str,
    artifact: Artifact,
    quant: str,
    layout: Layout,
    request: PlanRequest,
    mem: LlamaCppMemory,
    split: tuple[float, ...],
    seats: Sequence[Seat] = (),
) -> str:
    """The ``llama-server`` line; ``quant`` names the converted file when the artifact is not a GGUF.

    A CPU-only launch says ``-ngl 0`` and carries no ``--tensor-split``; RPC servers are listed by endpoint. The
    batch sizes are written out even at llama-server's defaults, as the plan assumed them.
    """
    parts = ["llama-server", gguf_source(artifact, quant, model_ref), f"-c {mem.settings.n_ctx}"]
    parts.append(f"-b {mem.settings.n_batch} -ub {mem.settings.n_ubatch}")
    if layout.cpu:  # llama-server's default is "auto" (as many layers as fit on any GPU it finds), not none
        parts.append("-ngl 0")
    else:
        parts.append(f"-ngl {mem.n_gpu_layers}")
        if len(split) > 1:
            parts.append("--tensor-split " + ",".join(f"{x:g}" for x in split))
    endpoints = [s.endpoint for s in seats if s.endpoint]
    if endpoints:
        parts.append("--rpc " + ",".join(endpoints))
    parts += cache_flags(mem.settings)
    if request.concurrency > 1:
        parts.append(f"-np {request.concurrency}")
    parts += launch_flags(request, "llamacpp")  # --load-mode none (the CLI's --no-mmap) as the user set it
    return " ".join(parts)


def cache_flags(settings: LlamaCppSettings) -> list[str]:
    """The KV cache a launch was sized at, as ``llama-server`` flags: ``-ctk``/``-ctv`` for a type other than its
    default f16; ``-fa`` as asked, and ``-fa on`` for a quantised V cache at ``auto``: llama.cpp refuses a quantised
    V without flash attention (``llama_init_from_model``), and ``auto`` turns it off on a device without the
    kernels, where the launch would then fail at start-up rather than run as sized (with flash attention)."""
    flags = []
    if settings.type_k != "f16" or settings.type_v != "f16":
        flags.append(f"-ctk {settings.type_k} -ctv {settings.type_v}")
    if settings.flash_attn != "auto":
        flags.append(f"-fa {settings.flash_attn}")
    elif cache_type(settings.type_v).block_elements > 1:
        flags.append("-fa on")
    return flags


def rpc_workers(seats: Sequence[Seat]) -> tuple[NodeCommand, ...]:
    """One ``rpc-server`` a remote card, on its node, listening where ``--rpc`` looks for it
    (``-H 0.0.0.0``: rpc-server binds 127.0.0.1 unless told, out of the main node's reach)."""
    hosts: dict[str, int] = {}
    out = []
    for s in seats:
        if not s.endpoint:
            continue
        host, _, port = s.endpoint.rpartition(":")
        rank = hosts.setdefault(host, len(hosts) + 1)
        devices = (s.position,) if s.position is not None else ()
        out.append(NodeCommand(rank=rank, command=f"rpc-server -H 0.0.0.0 -p {port}", devices=devices, where=host))
    return tuple(out)


def rpc_ports(seats: Sequence[Seat]) -> tuple[str, ...]:
    """Where the main server meets its RPC servers: each endpoint as ``--rpc`` names it and the port its
    ``rpc-server -p`` listens on (``Evaluation.meeting_ports``: a further copy moves both)."""
    endpoints = [s.endpoint for s in seats if s.endpoint]
    return (*endpoints, *dict.fromkeys(f"-p {e.rpartition(':')[2]}" for e in endpoints))


def launch_split(request: PlanRequest, seats: Sequence[Seat]) -> tuple[float, ...]:
    """The ``--tensor-split`` of a launch: the user's, else in proportion to what each device offers (as llama.cpp
    splits by free memory); empty for one device."""
    if request.tensor_split:
        return request.tensor_split
    if len(seats) < 2:
        return ()
    return proportional_tensor_split([s.device.memory_bytes for s in seats])


def evaluate(
    model: LlamaModel,
    artifact: Artifact,
    layout: Layout,
    seats: Sequence[Seat],
    node: Node,
    request: PlanRequest,
    model_ref: str,
    *,
    quant: str,
) -> tuple[Evaluation, LlamaCppMemory]:
    """Memory of one llama.cpp launch on ``seats`` (none: the CPU): devices, host, longest context, command.

    ``-ngl`` is the request's, else the most that fit (every layer when CPU offload is not allowed).
    ``quant`` is the GGUF it loads (:func:`gguf_quant_for`).

    Raises:
        LlamaCppConfigError: settings llama.cpp refuses (no device offers anything, a bad tensor split…).
    """
    devices = [s.device for s in seats]
    split = launch_split(request, seats)
    host_bytes = int(node.host_ram_bytes * request.host_fraction)
    settings = settings_for(request, split=split, cpu=node.cpu.build)
    fitted = None  # the -ngl search's own allocation at the -ngl it found: not computed twice
    if layout.cpu or not devices:
        settings = replace(settings, n_gpu_layers=0)
    elif request.n_gpu_layers is None:
        fitted = _fitted(model, settings, devices, host_bytes) if request.cpu_offload else None
        settings = fitted.settings if fitted is not None else replace(settings, n_gpu_layers=model.n_layer + 1)
    mem = fitted or llamacpp_memory(model, settings, devices)
    cards = tuple(
        _card(d.device.name, d, s.device.memory_bytes, s.capacity_bytes)
        for d, s in zip(mem.devices, seats, strict=True)
    )
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
        command=command(model_ref, artifact, quant, layout, request, mem, split, seats),
        layers_on_host=mem.layers_on_host,
        notes=tuple(notes),
        free_needed_bytes=max((c.total for c in cards), default=-CUDA_CONTEXT_BYTES) + CUDA_CONTEXT_BYTES,
        n_gpu_layers=mem.n_gpu_layers,
        devices=tuple(s.position for s in seats if not s.endpoint and s.position is not None),
        workers=rpc_workers(seats),
        meeting_ports=rpc_ports(seats),
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


def _fitted(
    model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device], host_bytes: int
) -> LlamaCppMemory | None:
    """The allocation at the most layers that fit (:func:`gpu_layers_fit`); None when no ``-ngl`` fits (the launch
    then asks for every layer, and is refused)."""
    try:
        return gpu_layers_fit(model, settings, devices, host_bytes)
    except LlamaCppFitError:
        return None


def recheck(shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str | None = None) -> Option:
    """The same llama.cpp layout at another context or concurrency: same node, same cards, same ``-ngl``."""
    fixed = replace(request, n_gpu_layers=option.evaluation.n_gpu_layers)
    model = llama_model(shape, option.artifact)
    ev, _ = evaluate(
        model,
        option.artifact,
        option.layout,
        () if option.layout.cpu else seats_from_cards(option.evaluation.cards),
        option.node,
        fixed,
        model_ref or shape.name,
        quant=gguf_quant_for(shape, option.artifact),
    )
    # the same cards and RPC servers: their positions (lost in the per-card records) carry over
    return option.with_evaluation(
        replace(
            ev,
            devices=option.evaluation.devices,
            workers=option.evaluation.workers,
            meeting_ports=option.evaluation.meeting_ports,
        )
    )
