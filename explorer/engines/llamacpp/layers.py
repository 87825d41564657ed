"""Which device llama.cpp puts each layer on (``llama_model::load_tensors``, src/llama-model.cpp, 0c1e57098).

``-ngl`` counts the output layer as layer ``n_layer``, and it is offloaded
first:

    i_gpu_start    = max(n_layer + 1 - ngl, 0)
    act_gpu_layers = min(ngl, n_layer + 1)            # 0 without offload devices
    layer il on a GPU  iff  i_gpu_start <= il < i_gpu_start + act_gpu_layers
    its device = upper_bound(cumulative_splits, float(il - i_gpu_start) / act_gpu_layers)

so ``-ngl 1`` offloads only the output head and ``-ngl n_layer+1`` everything.
``cumulative_splits`` are the running sums of ``--tensor-split`` (or of each
device's free memory) divided by their total, all in single precision as
llama.cpp computes them. The input layer (``token_embd``) always stays on
the CPU (gguf-parser issue #42 counted the output outside ``-ngl``; here it
is inside, as in llama.cpp).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from functools import lru_cache

from explorer.engines.llamacpp.settings import Device, LlamaCppSettings
from explorer.errors import LlamaCppConfigError

HOST = -1


def _f32(x: float) -> float:
    """Round to IEEE single precision (C++ ``float``)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def offload_devices(devices: Sequence[Device], settings: LlamaCppSettings) -> tuple[int, ...]:
    """Indices (into ``devices``) llama.cpp offloads to: every non-CPU device, or only ``main_gpu``.

    Raises:
        LlamaCppConfigError: ``main_gpu`` is not an offload device.
    """
    usable = tuple(i for i, d in enumerate(devices) if d.kind != "cpu")
    if settings.split_mode == "none" and usable:
        if not 0 <= settings.main_gpu < len(usable):
            raise LlamaCppConfigError(f"main_gpu {settings.main_gpu} is out of range: {len(usable)} offload device(s)")
        return (usable[settings.main_gpu],)
    return usable


def cumulative_splits(fractions: Sequence[float]) -> tuple[float, ...]:
    """llama.cpp's split points: running sums divided by the total, in single precision.

    Raises:
        LlamaCppConfigError: a negative fraction, or all zero.
    """
    if any(f < 0 for f in fractions) or not any(fractions):
        raise LlamaCppConfigError(f"tensor split {tuple(fractions)} needs non-negative fractions, not all zero")
    run, total = [], 0.0
    for f in fractions:
        total = _f32(total + _f32(f))
        run.append(total)
    return tuple(_f32(x / total) for x in run)


def split_fractions(devices: Sequence[Device], used: Sequence[int], settings: LlamaCppSettings) -> tuple[float, ...]:
    """The per-device split: ``--tensor-split`` if given (one per offload device), else free memory.

    Raises:
        LlamaCppConfigError: a tensor split of the wrong length.
    """
    if settings.tensor_split and any(settings.tensor_split):
        if settings.split_mode == "none":
            return (1.0,)
        if len(settings.tensor_split) != len(used):
            raise LlamaCppConfigError(
                f"tensor split {settings.tensor_split} has {len(settings.tensor_split)} entries "
                f"for {len(used)} offload device(s)"
            )
        return tuple(float(f) for f in settings.tensor_split)
    return tuple(float(devices[i].memory_bytes) for i in used)


def resolve_ngl(n_gpu_layers: int | None, n_layer: int) -> int:
    """``-ngl`` as llama.cpp uses it: None or negative is every layer plus the output (n_layer + 1)."""
    if n_gpu_layers is None or n_gpu_layers < 0:
        return n_layer + 1
    return n_gpu_layers


def layer_devices(n_layer: int, ngl: int, devices: Sequence[Device], settings: LlamaCppSettings) -> tuple[int, ...]:
    """The device index of layers ``0 … n_layer`` (``n_layer`` is the output); :data:`HOST` for the CPU."""
    placement = LlamaCppSettings(
        split_mode=settings.split_mode, main_gpu=settings.main_gpu, tensor_split=settings.tensor_split
    )  # only what placement reads: a small cache key
    return _layer_devices(n_layer, ngl, tuple(devices), placement)


@lru_cache(maxsize=1024)
def _layer_devices(n_layer: int, ngl: int, devices: tuple[Device, ...], settings: LlamaCppSettings) -> tuple[int, ...]:
    used = offload_devices(devices, settings)
    if not used or ngl <= 0:
        return (HOST,) * (n_layer + 1)
    splits = cumulative_splits(split_fractions(devices, used, settings))
    i_gpu_start = max(n_layer + 1 - ngl, 0)
    act = min(ngl, n_layer + 1)
    out = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(HOST)
            continue
        frac = _f32((il - i_gpu_start) / act)  # float / int in C++: correctly rounded
        out.append(used[min(bisect.bisect_right(splits, frac), len(used) - 1)])
    return tuple(out)


def proportional_tensor_split(free_bytes_per_device: Sequence[int]) -> tuple[float, ...]:
    """``--tensor-split`` fractions proportional to each device's free bytes (they sum to 1).

    Raises:
        LlamaCppConfigError: no device, a negative size, or nothing free.
    """
    sizes = [int(b) for b in free_bytes_per_device]
    if not sizes or any(b < 0 for b in sizes) or not sum(sizes):
        raise LlamaCppConfigError(f"free bytes {tuple(sizes)} give no split: need at least one positive size")
    total = sum(sizes)
    return tuple(b / total for b in sizes)
