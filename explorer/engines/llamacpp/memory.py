"""llama.cpp's memory, per device and on the host: :func:`llamacpp_memory`.

Everything llama.cpp allocates, by where it lands (see
docs/notes/llamacpp_memory.md for the facts and worked examples):

- **weights**: layers by :mod:`explorer.engines.llamacpp.layers` (the output
  counts inside ``-ngl`` and goes first); ``token_embd`` always on the host.
  A tied output is allocated again on the output's device when that is not
  the host (or into CPU_REPACK or AMX when they take it). On the host
  (:func:`host_weights`, rules in :mod:`explorer.engines.llamacpp.host_buffers`)
  the CPU build's extra buffer types take their weights: ``AMX`` first on
  an AMX CPU (``cpu="amx"``), then ``CPU_REPACK``; with mmap the file range
  of the tensors left in CPU is mapped (``CPU_Mapped``), without it they are
  read into ``CPU`` (or the GPU's pinned ``CUDA_Host``; with a GPU present
  only ``--no-host`` brings the extra types back). A launch that puts MLA's
  ``attn_k_b`` (or, with flash attention, ``attn_v_b``) in AMX aborts in
  llama.cpp and is refused (``LlamaCppAbortError``).
- **KV and recurrent state**: :mod:`explorer.engines.llamacpp.kv`, each layer's part on
  its layer's device (all on the host with ``offload_kqv`` off).
- **compute**: :mod:`explorer.engines.llamacpp.compute`, per backend; with a GPU and
  CPU layers, op offload copies the largest CPU layer's weights to the first GPU.
- **output buffer** (host): ``(n_vocab [+ n_embd]) × rows × 4``, rows = n_seq at start.
- **other** (host): graph metadata, ``2 × (368 + 40.45) × max(1024, 8 n_tensors)``
  bytes, and Hadamard matrices for a quantised cache.

On unified-memory devices (Metal) the device's bytes come out of the host's
RAM: :meth:`LlamaCppMemory.fits` counts them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from explorer.engines.llamacpp.compute import estimate_compute
from explorer.engines.llamacpp.host_buffers import CPU_BUILDS, HostWeights, merged, refuse_amx_abort
from explorer.engines.llamacpp.kv import CacheAlloc, cache_layout
from explorer.engines.llamacpp.layers import (
    HOST,
    layer_devices,
    offload_devices,
    resolve_ngl,
)
from explorer.engines.llamacpp.model import LlamaModel
from explorer.engines.llamacpp.settings import (
    ContextSizes,
    Device,
    LlamaCppSettings,
    resolve_context,
)
from explorer.errors import LlamaCppConfigError
from explorer.memo import memo
from explorer.units import MiB

#: ggml_tensor_overhead() and ggml_graph_overhead_custom(1024)/1024 in this build, bytes per graph node
NODE_BYTES = 368 + 41_424 / 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class _Buffers:
    """The buffers a backend (a device or the host) holds, and their sum."""

    model_bytes: int
    kv_bytes: int
    compute_bytes: int
    output_bytes: int = 0
    other_bytes: int = 0
    layers: tuple[int, ...] = ()
    phase: str = "none"

    @property
    def total_bytes(self) -> int:
        """Everything it holds (for the host: mapped pages of offloaded tensors not counted)."""
        return self.model_bytes + self.kv_bytes + self.compute_bytes + self.output_bytes + self.other_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMemory(_Buffers):
    """What llama.cpp allocates on one offload device.

    Attributes:
        device: the device.
        model_bytes: weights of its layers (and the output, with a tied copy of ``token_embd``).
        kv_bytes: KV cache and recurrent state of its layers.
        compute_bytes: its compute buffer (op-offload weight copies and pipeline copies included).
        output_bytes: 0 (the output buffer is on the host); kept for symmetry.
        other_bytes: anything else reserved on it.
        layers: the layer indices on it (``n_layer`` is the output layer).
        phase: the compute phase that sets its compute buffer.
    """

    device: Device


@dataclass(frozen=True, slots=True, kw_only=True)
class HostMemory(_Buffers):
    """What stays on the host (CPU RAM).

    Attributes:
        model_bytes: weights the host keeps hot: CPU tensors (mapped or loaded) plus repacked and AMX copies.
        mapped_bytes: llama.cpp's ``CPU_Mapped`` buffer: the file range of the CPU tensors (0 without mmap).
        loaded_bytes: the ``CPU`` (or pinned ``CUDA_Host``) weight buffer without mmap (0 with it).
        repack_bytes: the ``CPU_REPACK`` buffer.
        amx_bytes: the ``AMX`` buffer (a native build on an AMX CPU, ``cpu="amx"``).
        kv_bytes: KV cache and recurrent state of non-offloaded layers.
        compute_bytes: the CPU backend's compute buffer.
        output_bytes: the output (logits) buffer.
        other_bytes: graph metadata and rotation matrices.
        layers: layer indices on the host (``n_layer`` is the output layer).
        phase: the compute phase that sets its compute buffer.
    """

    mapped_bytes: int
    loaded_bytes: int
    repack_bytes: int
    amx_bytes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaCppMemory:
    """llama.cpp's memory for one model, settings and set of devices.

    Attributes:
        model: the model.
        settings: the launch settings.
        context: the sizes llama.cpp derived.
        devices: per offload device (in the order given; CPU-kind devices left out).
        host: the host's share.
        caches: the KV caches and recurrent state with their layers.
        n_gpu_layers: ``-ngl`` as resolved (n_layer + 1 = everything).
        layers_on_host: repeating layers left on the host.
        output_on_host: whether the output layer stayed on the host.
        pipeline_parallel: whether the scheduler keeps pipeline copies.
        notes: what is estimated, and why.
    """

    model: LlamaModel
    settings: LlamaCppSettings
    context: ContextSizes
    devices: tuple[DeviceMemory, ...]
    host: HostMemory
    caches: tuple[CacheAlloc, ...]
    n_gpu_layers: int
    layers_on_host: int
    output_on_host: bool
    pipeline_parallel: bool = False
    notes: tuple[str, ...] = ()

    @property
    def n_ctx_padded(self) -> int:
        """The context llama.cpp allocates, tokens (padded to 256, × sequences)."""
        return self.context.n_ctx

    @property
    def device_bytes(self) -> int:
        """All offload devices together."""
        return sum(d.total_bytes for d in self.devices)

    @property
    def total_bytes(self) -> int:
        """Devices and host together."""
        return self.device_bytes + self.host.total_bytes

    def fits(self, host_bytes: int | None = None) -> bool:
        """Whether every device holds its share, and the host (with unified devices' shares) fits ``host_bytes``."""
        if any(d.total_bytes > d.device.memory_bytes for d in self.devices):
            return False
        if host_bytes is None:
            return True
        unified = sum(d.total_bytes for d in self.devices if d.device.unified)
        return self.host.total_bytes + unified <= host_bytes

    def breakdown(self) -> str:
        """A plain-text table of every buffer, in MiB, with how the figures came about."""
        from explorer.engines.llamacpp.text import memory_text

        return memory_text(self)


@lru_cache(maxsize=64)
def _caches(
    model: LlamaModel, ctx: ContextSizes, swa_full: bool, unified: bool
) -> tuple[tuple[CacheAlloc, ...], tuple[int, ...]]:
    """The caches (:func:`cache_layout`) and each layer's KV bytes, once for every ``-ngl`` a fit search tries."""
    caches = cache_layout(model, ctx, swa_full=swa_full, unified=unified)
    return caches, _layer_kv(caches, model.n_layer)


def _layer_kv(caches: tuple[CacheAlloc, ...], n_layer: int) -> tuple[int, ...]:
    per = [0] * n_layer
    for c in caches:
        for il, size in zip(c.layers, c.layer_bytes, strict=True):
            per[il] += size
    return tuple(per)


def _other_bytes(model: LlamaModel, ctx: ContextSizes) -> int:
    nodes = max(1024, 8 * model.n_tensors)
    rot = 0
    if ctx.type_k.block_elements > 1 or ctx.type_v.block_elements > 1:
        n = 64
        while n <= model.n_embd_head_k and model.n_embd_head_k % 64 == 0:
            rot += n * n * 4
            n *= 2
    return int(2 * NODE_BYTES * nodes) + rot


def host_weights(model: LlamaModel, build: str | None, layers: Sequence[int], *, output: bool) -> HostWeights:
    """Where the host's weights land: ``token_embd``, the blocks ``layers`` and, with ``output``, the output
    group and a tied output's copy, in a build for CPU ``build`` (None: no extra buffer types)."""
    groups = [HostWeights(cpu_bytes=model.token_embd_bytes, span=model.token_embd_span)]
    groups += [model.layers[il].host.on(build) for il in layers]
    if output:
        groups += [model.output_host.on(build), model.tied_copy.on(build)]
    return merged(groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Placed:
    """Where a launch's weights sit, the same at every context (the layers' devices fixed by ``-ngl``).

    Attributes:
        host_layers: the blocks left on the host.
        on_host: the host's weights (:func:`host_weights`).
        largest_host_bytes: the largest weight group on the host (a CPU block, or the output when it stays
            there): what op offload copies into the first GPU, bytes.
        device_layers: each used device's blocks, in the order of ``used``.
        device_weight_bytes: each used device's weights (its blocks, and the output group on the output's
            device), bytes.
    """

    host_layers: tuple[int, ...]
    on_host: HostWeights
    largest_host_bytes: int
    device_layers: tuple[tuple[int, ...], ...]
    device_weight_bytes: tuple[int, ...]


@memo(1024, keyed_on="llama.cpp model identity, each layer's device, the used devices, the CPU build")
def _placed(model: LlamaModel, where: tuple[int, ...], used: tuple[int, ...], build: str | None) -> _Placed:
    """The weights of ``model`` with layer ``il`` on device ``where[il]`` (``where[n_layer]``: the output)."""
    n_layer = model.n_layer
    out_dev = where[n_layer]
    host_layers = tuple(il for il in range(n_layer) if where[il] == HOST)
    cpu_weights = [model.layers[il].weight_bytes for il in host_layers]
    if out_dev == HOST:
        cpu_weights.append(model.output_bytes or model.token_embd_bytes)
    by_device: dict[int, list[int]] = {i: [] for i in used}
    for il in range(n_layer):
        if where[il] != HOST:
            by_device[where[il]].append(il)
    output_bytes = model.output_bytes + model.output_norm_bytes + (model.token_embd_bytes if model.tied_output else 0)
    return _Placed(
        host_layers=host_layers,
        on_host=host_weights(model, build, host_layers, output=out_dev == HOST),
        largest_host_bytes=max(cpu_weights, default=0),
        device_layers=tuple(tuple(by_device[i]) for i in used),
        device_weight_bytes=tuple(
            sum(model.layers[il].weight_bytes for il in by_device[i]) + (output_bytes if out_dev == i else 0)
            for i in used
        ),
    )


def llamacpp_memory(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device] = ()) -> LlamaCppMemory:
    """llama.cpp's buffers for ``model`` under ``settings`` on ``devices`` (none: CPU only).

    Raises:
        LlamaCppConfigError: settings llama.cpp refuses (with its reason), or a bad split.
        LlamaCppAbortError: settings llama.cpp accepts but aborts on at startup (MLA weights in AMX).
    """
    devices = tuple(devices)
    s = settings
    if s.cpu not in CPU_BUILDS:
        raise LlamaCppConfigError(
            f"cpu={s.cpu!r} is not a CPU build explorer models", hint=f"use one of {', '.join(CPU_BUILDS)}"
        )
    head_k, head_v = model.attention_head_dims
    ctx = resolve_context(s, n_ctx_train=model.n_ctx_train, mla=model.is_mla, head_k=head_k, head_v=head_v)
    caches, layer_kv = _caches(model, ctx, s.swa_full, s.kv_unified)
    n_layer = model.n_layer
    ngl = resolve_ngl(s.n_gpu_layers, n_layer)
    where = layer_devices(n_layer, ngl, devices, s)
    used = offload_devices(devices, s)
    gpu_present = any(devices[i].kind == "gpu" for i in used)
    # the GPU's host buffer type comes before the CPU's extra types (--no-host drops it)
    extra_on = s.repack and (not gpu_present or s.no_host)
    kv_dev = where if s.offload_kqv else (HOST,) * (n_layer + 1)
    out_dev = where[n_layer]
    pipeline = (
        len(used) > 1
        and ngl > n_layer
        and s.split_mode == "layer"
        and s.offload_kqv
        and all(devices[i].kind == "gpu" for i in used)
    )
    copies = s.pipeline_copies if pipeline else 1
    # --- host weights
    placed = _placed(model, where, used, s.cpu if extra_on else None)
    host_layers, on_host = placed.host_layers, placed.on_host
    refuse_amx_abort(on_host, flash_attn=ctx.flash_attn)
    mapped = on_host.span_bytes if s.mmap else 0
    # --- devices
    op_offload = 0
    if s.op_offload and gpu_present and ctx.n_ubatch >= 32:
        op_offload = placed.largest_host_bytes
    first_gpu = next((i for i in used if devices[i].kind == "gpu"), None)
    out_devices = []
    for i, mine, weights in zip(used, placed.device_layers, placed.device_weight_bytes, strict=True):
        est = estimate_compute(model, ctx, caches, mine, output=out_dev == i, input_layer=False, copies=copies)
        compute = est.total_bytes + (op_offload if i == first_gpu else 0)
        out_devices.append(
            DeviceMemory(
                device=devices[i],
                model_bytes=weights,
                kv_bytes=sum(layer_kv[il] for il in mine) if s.offload_kqv else 0,
                compute_bytes=compute,
                layers=tuple(mine) + ((n_layer,) if out_dev == i else ()),
                phase=est.phase,
            )
        )
    host_est = estimate_compute(
        model, ctx, caches, host_layers, output=out_dev == HOST, input_layer=True, copies=copies
    )
    rows = max(s.n_outputs or s.n_seq, s.n_seq)
    host = HostMemory(
        model_bytes=on_host.cpu_bytes + on_host.repack_bytes + on_host.amx_bytes,
        mapped_bytes=mapped,
        loaded_bytes=0 if s.mmap else on_host.cpu_bytes,
        repack_bytes=on_host.repack_bytes,
        amx_bytes=on_host.amx_bytes,
        kv_bytes=sum(layer_kv[il] for il in range(n_layer) if kv_dev[il] == HOST),
        compute_bytes=host_est.total_bytes,
        output_bytes=(model.n_vocab + (model.n_embd if s.embeddings else 0)) * rows * 4,
        other_bytes=_other_bytes(model, ctx),
        layers=tuple(host_layers) + ((n_layer,) if out_dev == HOST else ()),
        phase=host_est.phase,
    )
    notes = list(model.notes)
    if op_offload:
        notes.append(
            f"op offload: {op_offload / MiB:.0f} MiB of CPU weights copied into the first GPU's compute buffer"
        )
    if s.flash_attn == "auto":
        notes.append("flash attention auto: resolved to on")
    return LlamaCppMemory(
        model=model,
        settings=s,
        context=ctx,
        devices=tuple(out_devices),
        host=host,
        caches=caches,
        n_gpu_layers=min(ngl, n_layer + 1) if used else 0,
        layers_on_host=len(host_layers),
        output_on_host=out_dev == HOST,
        pipeline_parallel=pipeline,
        notes=tuple(notes),
    )
