"""Benchmark: sweep every ``-ngl`` of a 126-layer model; ``python -m explorer.bench.llamacpp``.

Two Llama-3.1-405B-like models (126 layers, n_embd 16384, 128 heads, 8 KV
heads, n_ff 53248, vocab 128256) on four 80 GiB GPUs at n_ctx 8192:

- ``shape``: ``llama_model_from_shape`` of the fixture config
  (tests/data/configs/meta-llama__Meta-Llama-3.1-405B.json) at Q4_K_M;
- ``exact``: a synthetic exact model, every matrix Q4_K (144 bytes per 256).

One sweep calls :func:`llamacpp_memory` for ``-ngl`` 0 … 127. Reports the
median and 95th percentile over the sweeps, the time per call, and
:func:`max_gpu_layers` / :func:`max_context` once each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from explorer.engines.llamacpp.fit import max_context, max_gpu_layers
from explorer.engines.llamacpp.host_buffers import HostPlacement, HostWeights
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.model import LlamaLayer, LlamaModel
from explorer.engines.llamacpp.settings import Device, LlamaCppSettings
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.units import GiB

CONFIG = Path(__file__).resolve().parents[2] / "tests" / "data" / "configs" / "meta-llama__Meta-Llama-3.1-405B.json"
DEVICES = tuple(Device(name=f"H100 #{i}", kind="gpu", memory_bytes=80 * GiB) for i in range(4))
SETTINGS = LlamaCppSettings(n_ctx=8192)


def q4k(rows: int, cols: int) -> int:
    """Bytes of a Q4_K matrix: 144 bytes per 256 weights."""
    return rows * cols // 256 * 144


def _host(start: int, block: int, repack: int) -> HostPlacement:
    """A block whose Q4_K matrices go to CPU_REPACK (AVX2, AVX-512) or AMX at 148/144 of their bytes."""
    span = (start, start + block)
    repacked = HostWeights(cpu_bytes=block - repack, repack_bytes=repack, span=span)
    return HostPlacement(
        plain=HostWeights(cpu_bytes=block, span=span),
        avx2=repacked,
        avx512=repacked,
        amx=HostWeights(cpu_bytes=block - repack, amx_bytes=repack * 148 // 144, span=span),
    )


def _output_host(start: int, norm: int, output: int) -> HostPlacement:
    """The final norm, then a Q6_K output: never repacked on x86; AMX takes it at its own size."""
    whole = HostWeights(cpu_bytes=norm + output, span=(start, start + norm + output))
    amx = HostWeights(cpu_bytes=norm, amx_bytes=output, span=(start, start + norm))
    return HostPlacement(plain=whole, avx2=whole, avx512=whole, amx=amx)


def exact_405b() -> LlamaModel:
    """A synthetic exact 405B-like model: Q4_K matrices, f32 norms, Q6_K-sized output."""
    E, H, KV, D, F, V, L = 16384, 128, 8, 128, 53248, 128256, 126
    block = q4k(H * D, E) + 2 * q4k(KV * D, E) + q4k(E, H * D) + 3 * q4k(F, E) + 2 * E * 4
    repack = block - 2 * E * 4
    output = V * E // 256 * 210  # Q6_K
    layers = tuple(
        LlamaLayer(
            attn="full",
            n_head=H,
            n_head_kv=KV,
            k_row=KV * D,
            v_row=KV * D,
            weight_bytes=block,
            host=_host(i * block, block, repack),
            n_ff=F,
        )
        for i in range(L)
    )
    return LlamaModel(
        name="synthetic-405B-Q4_K",
        arch="llama",
        exact=True,
        n_embd=E,
        n_vocab=V,
        n_head=H,
        n_embd_head_k=D,
        n_ctx_train=131072,
        layers=layers,
        token_embd_bytes=q4k(V, E),
        output_bytes=output,
        output_norm_bytes=E * 4,
        output_host=_output_host(L * block, E * 4, output),
        n_rot=D,
        n_tensors=L * 11 + 3,
    )


def shape_405b() -> LlamaModel:
    """The fixture config's shape at Q4_K_M."""
    from explorer.model.shapes import shape_from_config

    shape = shape_from_config(json.loads(CONFIG.read_text()), name="Llama-3.1-405B")
    return llama_model_from_shape(shape, "Q4_K_M")


def sweep(model: LlamaModel) -> float:
    """Seconds to compute the memory at every -ngl."""
    start = time.perf_counter()
    for ngl in range(model.n_layer + 2):
        llamacpp_memory(model, replace(SETTINGS, n_gpu_layers=ngl), DEVICES)
    return time.perf_counter() - start


def report(label: str, model: LlamaModel, sweeps: int) -> None:
    sweep(model)  # warm-up (fills the cache-layout memo), not timed
    times = [sweep(model) for _ in range(sweeps)]
    median = statistics.median(times)
    p95 = statistics.quantiles(times, n=20, method="inclusive")[18]
    calls = model.n_layer + 2
    t0 = time.perf_counter()
    ngl = max_gpu_layers(model, SETTINGS, DEVICES, host_bytes=512 * GiB)
    t1 = time.perf_counter()
    ctx = max_context(model, SETTINGS, DEVICES, host_bytes=512 * GiB)
    t2 = time.perf_counter()
    print(
        f"{label}: {model.name}, {model.n_layer} layers, {model.weight_bytes / GiB:.1f} GiB, {sweeps} sweeps of {calls} calls"
    )
    print(f"  sweep  median {median * 1e3:.2f} ms  p95 {p95 * 1e3:.2f} ms")
    print(f"  call   median {median / calls * 1e6:.0f} us  p95 {p95 / calls * 1e6:.0f} us")
    print(
        f"  max_gpu_layers = {ngl} in {(t1 - t0) * 1e3:.2f} ms; max_context = {ctx} tokens in {(t2 - t1) * 1e3:.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=30, help="timed sweeps (at least 20)")
    args = parser.parse_args(argv)
    sweeps = max(20, args.sweeps)
    print(f"devices: 4 x 80 GiB GPU; n_ctx {SETTINGS.n_ctx}, n_ubatch {SETTINGS.n_ubatch}, flash attention auto")
    report("exact", exact_405b(), sweeps)
    if CONFIG.exists():
        report("shape", shape_405b(), sweeps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
