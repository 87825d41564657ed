"""What fits: the largest ``-ngl`` and the longest context llama.cpp can run with.

- :func:`max_gpu_layers`: the largest ``-ngl`` (``n_layer + 1`` is everything,
  the output included) whose buffers fit every device, by binary search
  (device bytes only grow with ``-ngl``); the host must then hold the rest.
- :func:`max_context`: binary search over the padded cells (multiples of
  256 per stream); every buffer grows with the context.
- :func:`proportional_tensor_split`: ``--tensor-split`` by free memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from explorer.errors import LlamaCppFitError
from explorer.fit_search import largest_fitting
from explorer.llamacpp_memory import LlamaCppMemory, llamacpp_memory
from explorer.llamacpp_model import LlamaModel
from explorer.llamacpp_placement import proportional_tensor_split
from explorer.llamacpp_settings import CTX_PAD, Device, LlamaCppSettings
from explorer.units import MiB

__all__ = ["max_context", "max_gpu_layers", "proportional_tensor_split"]


def _shortfall(mem: LlamaCppMemory, host_bytes: int | None) -> str:
    parts = [f"{d.device.name} needs {d.total_bytes / MiB:,.0f} of {d.device.memory_bytes / MiB:,.0f} MiB"
             for d in mem.devices if d.total_bytes > d.device.memory_bytes]  # fmt: skip
    if host_bytes is not None:
        unified = sum(d.total_bytes for d in mem.devices if d.device.unified)
        parts.append(f"host needs {(mem.host.total_bytes + unified) / MiB:,.0f} of {host_bytes / MiB:,.0f} MiB")
    return "; ".join(parts)


def max_gpu_layers(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device],
                   host_bytes: int | None = None) -> int:  # fmt: skip
    """The largest ``-ngl`` (0 … n_layer + 1) whose buffers fit every device (and ``host_bytes``, when given).

    Device bytes only grow with ``-ngl`` and host bytes only shrink, so the
    device test is monotone: a binary search finds the largest ``-ngl`` the
    devices hold (about 7 probes for 126 layers); the host must then hold the rest.

    Raises:
        LlamaCppFitError: not even ``-ngl 0`` fits (the host is too small).
        LlamaCppConfigError: settings llama.cpp refuses.
    """

    def memory(ngl: int) -> LlamaCppMemory:
        return llamacpp_memory(model, replace(settings, n_gpu_layers=ngl), devices)

    def devices_fit(mem: LlamaCppMemory) -> bool:
        return all(d.total_bytes <= d.device.memory_bytes for d in mem.devices if not d.device.unified) and (
            host_bytes is None or not any(d.device.unified for d in mem.devices) or mem.fits(host_bytes))

    lo, hi = 0, model.n_layer + 1
    if devices_fit(memory(hi)):
        lo = hi
    else:
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if devices_fit(memory(mid)):
                lo = mid
            else:
                hi = mid - 1
    mem = memory(lo)
    if mem.fits(host_bytes):
        return lo
    raise LlamaCppFitError(f"{model.name or model.arch}: no -ngl fits ({_shortfall(mem, host_bytes)} at -ngl {lo})")


def _slack(mem: LlamaCppMemory, host_bytes: int | None) -> int:
    """Bytes to spare on the tightest of the devices and the host (negative: over by that much)."""
    slack = min((d.device.memory_bytes - d.total_bytes for d in mem.devices), default=1 << 62)
    if host_bytes is not None:
        unified = sum(d.total_bytes for d in mem.devices if d.device.unified)
        slack = min(slack, host_bytes - mem.host.total_bytes - unified)
    return slack


def max_context(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device] = (),
                host_bytes: int | None = None, *, limit_tokens: int | None = None) -> int:  # fmt: skip
    """The largest padded ``n_ctx`` (tokens, all sequences) that fits, up to ``limit_tokens`` (default: n_ctx_train).

    Found with :func:`explorer.fit_search.largest_fitting` over steps of 256
    cells: a few evaluations of llama.cpp's allocation, the answer exact.

    Raises:
        LlamaCppFitError: even one 256-token block per sequence does not fit.
        LlamaCppConfigError: settings llama.cpp refuses.
    """
    per = 1 if settings.kv_unified else settings.n_seq
    limit = limit_tokens or model.n_ctx_train or 1 << 20
    hi = max(1, limit // (CTX_PAD * per))

    def slack(k: int) -> int:
        return _slack(llamacpp_memory(model, replace(settings, n_ctx=k * CTX_PAD * per), devices), host_bytes)

    best = largest_fitting(slack, 1, hi)
    if best is None:
        mem = llamacpp_memory(model, replace(settings, n_ctx=CTX_PAD * per), devices)
        raise LlamaCppFitError(f"{model.name or model.arch}: no context fits ({_shortfall(mem, host_bytes)})")
    return best * CTX_PAD * per
