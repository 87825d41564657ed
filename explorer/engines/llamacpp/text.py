"""A plain-text account of :class:`~explorer.engines.llamacpp.memory.LlamaCppMemory` (display only)."""

from __future__ import annotations

from explorer.units import MiB


def _mib(n: int) -> str:
    return f"{n / MiB:10.2f}"


def memory_text(mem) -> str:
    """Every buffer in MiB (1 MiB = 1,048,576 bytes), per device and on the host, and how each arose."""
    c, m = mem.context, mem.model
    lines = [
        (
            f"{m.name or m.arch}: {m.n_layer} layers, -ngl {mem.n_gpu_layers}"
            f" ({mem.layers_on_host} layers{' and the output' if mem.output_on_host else ''} on the host)"
        ),
        (
            f"context: n_ctx {c.n_ctx} ({c.n_stream} stream(s) of {c.n_ctx_seq} cells), n_ubatch {c.n_ubatch},"
            f" {c.n_outputs} outputs, flash attention {'on' if c.flash_attn else 'off'}, K {c.type_k.name} V {c.type_v.name}"
        ),
        f"{'where':24s}{'model':>10s}{'KV+state':>10s}{'compute':>10s}{'output':>10s}{'other':>10s}{'total':>10s}  MiB",
    ]
    for d in mem.devices:
        lines.append(
            f"{d.device.name[:24]:24s}{_mib(d.model_bytes)}{_mib(d.kv_bytes)}{_mib(d.compute_bytes)}"
            f"{_mib(d.output_bytes)}{_mib(d.other_bytes)}{_mib(d.total_bytes)}  ({len(d.layers)} layers, compute: {d.phase})"
        )
    h = mem.host
    lines.append(
        f"{'host':24s}{_mib(h.model_bytes)}{_mib(h.kv_bytes)}{_mib(h.compute_bytes)}"
        f"{_mib(h.output_bytes)}{_mib(h.other_bytes)}{_mib(h.total_bytes)}  (compute: {h.phase})"
    )
    lines.append(
        f"host weights: CPU_Mapped {h.mapped_bytes / MiB:.2f} MiB, CPU {h.loaded_bytes / MiB:.2f} MiB,"
        f" CPU_REPACK {h.repack_bytes / MiB:.2f} MiB"
        + (f", AMX {h.amx_bytes / MiB:.2f} MiB" if h.amx_bytes else "")
        + f" (a build for cpu={mem.settings.cpu})"
    )
    for cache in mem.caches:
        what = "recurrent state" if cache.name == "rs" else f"{cache.name} cache"
        lines.append(
            f"{what}: {cache.cells} cells x {cache.streams} stream(s), {len(cache.layers)} layers,"
            f" {cache.k_bytes / MiB:.2f} + {cache.v_bytes / MiB:.2f} MiB"
        )
    lines += [f"note: {n}" for n in mem.notes]
    return "\n".join(lines)
