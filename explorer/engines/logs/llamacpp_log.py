"""Read a llama.cpp start-up log (llama-server, llama-cli, ollama's runner): settings, buffers, whether it loaded.

Lines read (each optional; at least one buffer must be there):

- the build (``build: 7896 (ec6c7421e)``), the device (``Device 0: NVIDIA GeForce RTX 3090, …, VRAM: 24126
  MiB``; ``using device CUDA0 (…) - 20645 MiB free``), the model (``general.name = …``, ``file type = …``);
- settings: ``llama_context: n_ctx = …`` (and ``n_ctx_seq``, ``n_batch``, ``n_ubatch``, ``n_seq_max``,
  ``flash_attn``, ``kv_unified``), the KV types (``K (f16)``), ``offloaded N/M layers to GPU``;
- buffers: ``<device> model buffer size = X MiB`` (before mid-2025 ``llm_load_tensors: <device> buffer size``), ``<device> KV buffer size = X MiB``, ``<device> compute
  buffer size = X MiB`` (and ``RS``, the recurrent state): devices named CUDA*, ROCm*, Metal* (MTL* since late 2025), Vulkan*… count as the GPU, CPU* and *_Host
  as the host;
- refusals: ``failed to allocate``, ``unable to load model``, ``out of memory``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from explorer.engines.logs.record import NUMBER, EngineLog, find_all, first, first_line, log_lines, mib_bytes

SIGNATURES = (r"model buffer size", r"KV buffer size", r"compute buffer size")
_GPU = re.compile(r"^(CUDA|ROCm|Metal|MTL|Vulkan|SYCL|CANN|MUSA|OpenCL|BLAS)\d*(_Mapped)?$")
#: builds before mid-2025 print the weights as ``llm_load_tensors: CUDA0 buffer size = X MiB`` (no "model")
_OLDER_MODEL = re.compile(r"llm_load_tensors:\s+(\S+) buffer size =\s+" + NUMBER + " MiB")
_REFUSALS = (r"failed to allocate", r"unable to load model", r"out of memory", r"failed to load model")
#: the prefix of the context's settings lines, by build (2024, early 2025, since)
_CONTEXT = r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): "
_SETTINGS: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("n_ctx", _CONTEXT + r"n_ctx\s+= (\d+)", int),
    ("n_ctx_seq", r"n_ctx_(?:per_)?seq\s+= (\d+)", int),
    ("n_batch", _CONTEXT + r"n_batch\s+= (\d+)", int),
    ("n_ubatch", _CONTEXT + r"n_ubatch\s+= (\d+)", int),
    ("n_seq_max", _CONTEXT + r"n_seq_max\s+= (\d+)", int),
    ("flash_attn", _CONTEXT + r"flash_attn\s+= (\S+)", str),
    ("kv_unified", r"kv_unified\s+= (\S+)", str),
    ("type_k", r" K \((\w+)\):", str),
    ("type_v", r" V \((\w+)\):", str),
    ("type_k", r"type_k = '(\w+)'", str),
    ("type_v", r"type_v = '(\w+)'", str),
    ("file_type", r"file type\s+= (.+)", str.strip),
)


def _split(values: dict[str, int]) -> tuple[int, int]:
    """(GPU bytes, host bytes) of per-device buffers."""
    gpu = sum(v for d, v in values.items() if _GPU.match(d))
    return gpu, sum(values.values()) - gpu


def _figures(text: str) -> dict[str, int]:
    """Buffers by kind. A device's model buffer is its last one printed (an earlier fit pass prints
    buffers it frees); the KV and compute buffers are those after the last model buffer, summed by
    device (an interleaved sliding-window cache has two)."""
    out: dict[str, int] = {}
    pattern = re.compile(r"(?<!\S)(\S+) (model|KV|RS|compute) buffer size =\s+" + NUMBER + " MiB")
    model: dict[str, int] = {}
    after: dict[str, dict[str, int]] = {"KV": {}, "RS": {}, "compute": {}}
    for line in log_lines(text):
        m = pattern.search(line)
        older = None if m else _OLDER_MODEL.match(line, max(line.find("llm_load_tensors:"), 0))
        if m is None and older is None:
            continue
        device, kind, value = (m[1], m[2], mib_bytes(m[3])) if m else (older[1], "model", mib_bytes(older[2]))
        if kind == "model":
            model[device] = value
            after = {"KV": {}, "RS": {}, "compute": {}}
        else:
            after[kind][device] = after[kind].get(device, 0) + value
    kinds = ((model, "weights"), (after["KV"], "kv_cache"), (after["RS"], "recurrent"), (after["compute"], "compute"))
    for values, key in kinds:
        if values:
            out[f"{key}_bytes"], out[f"host_{key}_bytes"] = _split(values)
    return out


def _settings(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, pattern, kind in _SETTINGS:
        m = None if key in out else first(pattern, text)
        if m:
            out[key] = kind(m[1])
    m = first(r"offloaded (\d+)/(\d+) layers to GPU", text)
    if m:
        out["n_gpu_layers"] = int(m[1])
    return out


def read_llamacpp(text: str) -> EngineLog:
    """A llama.cpp log's record (the text already cleaned of colour codes)."""
    observed = _figures(text)
    device = first(r"Device 0: ([^,]+),.*?(?:VRAM: (\d+) MiB)?$", text) or first(r"using device \w+ \(([^)]+)\)", text)
    vram = first(r"Device 0: .*VRAM: (\d+) MiB", text)
    if vram:
        observed["torch_total_bytes"] = mib_bytes(vram[1])
    free = first(r"using device \w+ \([^)]*\).* - (\d+) MiB free", text)
    if free:
        observed["free_at_start_bytes"] = mib_bytes(free[1])
    build = first(r"build: (\d+) \((\w+)\)", text)
    name = first(r"general\.name\s+(?:str\s+)?= (.+)", text)
    devices = {d for d, _ in find_all(r"(?<!\S)(\S+) model buffer size =\s+" + NUMBER, text) if _GPU.match(d)}
    devices |= {d for d, _ in find_all(_OLDER_MODEL.pattern, text) if _GPU.match(d)}
    refusal = next((line for p in _REFUSALS if (line := first_line(p, text))), "")
    loaded = first(
        r"server is listening|model loaded|main: model loaded|llama_new_context_with_model|graph splits", text
    )
    return EngineLog(
        engine="llamacpp",
        version=f"b{build[1]} ({build[2]})" if build else None,
        model=name[1].strip() if name else None,
        card=device[1].strip() if device else None,
        cards=max(1, len(devices)),
        settings=_settings(text),
        observed=observed,
        refused=True if refusal else (False if loaded else None),
        refusal=refusal[:400],
        lines=text.count("\n") + 1,
    )
