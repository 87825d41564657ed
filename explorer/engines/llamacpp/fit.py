"""What fits: the largest ``-ngl`` and the longest context llama.cpp can run with.

- :func:`max_gpu_layers`: the largest ``-ngl`` (``n_layer + 1`` is everything,
  the output included) whose buffers fit every device, by binary search
  (device bytes only grow with ``-ngl``); the host must then hold the rest.
  :func:`gpu_layers_fit` returns the allocation at that ``-ngl``.
- :func:`max_context`: binary search over the padded cells (multiples of
  256 per stream); every buffer grows with the context.
- :func:`proportional_tensor_split`: ``--tensor-split`` by free memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.fit_search import largest_fitting
from explorer.engines.llamacpp.layers import proportional_tensor_split
from explorer.engines.llamacpp.memory import LlamaCppMemory, llamacpp_memory
from explorer.engines.llamacpp.model import LlamaModel
from explorer.engines.llamacpp.settings import CTX_PAD, Device, LlamaCppSettings
from explorer.errors import LlamaCppFitError
from explorer.units import MiB

__all__ = ["gpu_layers_fit", "max_context", "max_gpu_layers", "max_sequences", "proportional_tensor_split"]


def _shortfall(mem: LlamaCppMemory, host_bytes: int | None) -> str:
    parts = [
        f"{d.device.name} needs {d.total_bytes / MiB:,.0f} of {d.device.memory_bytes / MiB:,.0f} MiB"
        for d in mem.devices
        if d.total_bytes > d.device.memory_bytes
    ]
    if host_bytes is not None:
        unified = sum(d.total_bytes for d in mem.devices if d.device.unified)
        parts.append(f"host needs {(mem.host.total_bytes + unified) / MiB:,.0f} of {host_bytes / MiB:,.0f} MiB")
    return "; ".join(parts)


def max_gpu_layers(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device],
                   host_bytes: int | None = None) -> int:  # fmt: skip
    """The largest ``-ngl`` (0 … n_layer + 1) whose buffers fit every device (and ``host_bytes``, when given).

    Device bytes only grow with ``-ngl`` (and host bytes only shrink), so the
    bytes the devices have to spare never grow: :func:`largest_fitting` finds
    the largest ``-ngl`` they hold in a few allocations; the host must then
    hold the rest.

    Raises:
        LlamaCppFitError: not even ``-ngl 0`` fits (the host is too small).
        LlamaCppConfigError: settings llama.cpp refuses.
    """
    return gpu_layers_fit(model, settings, devices, host_bytes).settings.n_gpu_layers


def gpu_layers_fit(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device],
                   host_bytes: int | None = None) -> LlamaCppMemory:  # fmt: skip
    """The allocation at :func:`max_gpu_layers`' ``-ngl`` (its ``settings`` carry it): the search's own last
    allocation, so a launch need not compute it again.

    Raises:
        LlamaCppFitError: not even ``-ngl 0`` fits (the host is too small).
        LlamaCppConfigError: settings llama.cpp refuses.
    """
    memo: dict[int, LlamaCppMemory] = {}
    unified = any(d.unified for d in devices)

    def memory(ngl: int) -> LlamaCppMemory:
        if ngl not in memo:
            memo[ngl] = llamacpp_memory(model, replace(settings, n_gpu_layers=ngl), devices)
        return memo[ngl]

    # a unified device's share comes out of the host's RAM, so there the host counts too
    def slack(ngl: int) -> int:
        return _slack(memory(ngl), host_bytes if unified else None)

    everything = model.n_layer + 1
    if slack(everything) >= 0 and memory(everything).fits(host_bytes):
        return memory(everything)  # the common case, in one allocation: every layer fits
    best = largest_fitting(slack, 0, everything)
    mem = memory(best or 0)
    if mem.fits(host_bytes):
        return mem
    raise LlamaCppFitError(
        f"{model.name or model.arch}: no -ngl fits ({_shortfall(mem, host_bytes)} at -ngl {best or 0})"
    )


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

    Found with :func:`explorer.engines.fit_search.largest_fitting` over steps of 256
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


def max_sequences(model: LlamaModel, settings: LlamaCppSettings, devices: Sequence[Device] = (),
                  host_bytes: int | None = None, *, context_tokens: int, limit: int = 256,
                  known: LlamaCppMemory | None = None) -> int:  # fmt: skip
    """The most parallel sequences (``-np``) of ``context_tokens`` each that fit, up to ``limit``; 0 if none.

    Each sequence gets its own KV stream (``--parallel N -c N × context``), as llama-server sizes them.
    ``known`` is an allocation already computed at ``settings.n_seq`` sequences: the search starts there.

    Raises:
        LlamaCppConfigError: settings llama.cpp refuses.
    """
    seen: dict[int, int] = {}
    if known is not None:
        seen[known.settings.n_seq] = _slack(known, host_bytes)

    def slack(n: int) -> int:
        if n not in seen:
            mem = llamacpp_memory(model, replace(settings, n_seq=n, n_ctx=n * context_tokens), devices)
            seen[n] = _slack(mem, host_bytes)
        return seen[n]

    start = known.settings.n_seq if known is not None and seen[known.settings.n_seq] >= 0 else 1
    guess = _sequences_guess(known, host_bytes) if known is not None else None
    return largest_fitting(slack, start, max(limit, start), guess=guess) or 0


def _sequences_guess(known: LlamaCppMemory, host_bytes: int | None) -> int | None:
    """The sequences the KV cache alone leaves room for, from an allocation at ``n`` sequences: on the tightest
    device (and the host, when it counts) the bytes to spare over what one more sequence's cache (and, on the
    host, its logits) adds, plus ``n``; None when no buffer grows with the sequences. The KV cache is most of what
    grows (70B on 8 H100 at 32,768 tokens: 8,485 MiB to spare, 5,248 MiB of cache a sequence: 1 + 1 = 2, as
    the search finds), so :func:`largest_fitting` starts there."""
    n = known.settings.n_seq
    room = [(d.device.memory_bytes - d.total_bytes) * n // d.kv_bytes for d in known.devices if d.kv_bytes > 0]
    grows = known.host.kv_bytes + known.host.output_bytes
    if host_bytes is not None and grows > 0:
        unified = sum(d.total_bytes for d in known.devices if d.device.unified)
        room.append((host_bytes - known.host.total_bytes - unified) * n // grows)
    return n + min(room) if room else None
