"""explorer's llama.cpp memory model against llama.cpp's printed buffers: the comparisons the tests share."""

from __future__ import annotations

import json
from functools import cache, lru_cache

from explorer.engines.llamacpp.host_buffers import HostWeights
from explorer.engines.llamacpp.memory import LlamaCppMemory, host_weights, llamacpp_memory
from explorer.engines.llamacpp.model import LlamaModel, llama_model_from_gguf
from explorer.engines.llamacpp.settings import LlamaCppSettings
from support.corpus import DATA
from support.llamacpp_headers import header_for

MEASURED = DATA / "llamacpp_measured.json"
#: the same cases in llama.cpp's AMX simulation build (its provenance says how it was made)
MEASURED_AMX = DATA / "llamacpp_measured_amx.json"
MiB = 1024 * 1024
#: the compute buffer must be within this share of llama.cpp's
TOLERANCE = 0.05


@lru_cache(maxsize=2)
def measured(amx: bool = False) -> dict:
    """The checked-in measurements (``amx``: of the AMX simulation build)."""
    return json.loads((MEASURED_AMX if amx else MEASURED).read_text())


def cases(ok: bool | None = None, *, amx: bool = False) -> list[dict]:
    """Measured cases (only those that loaded, or only those that failed)."""
    return [c for c in measured(amx)["cases"] if ok is None or bool(c["result"].get("ok")) == ok]


@cache
def model_for(name: str) -> LlamaModel:
    """The exact model of a spec, from its in-memory GGUF header."""
    return llama_model_from_gguf(header_for(name))


def settings_for(p: dict, cpu: str = "avx2") -> LlamaCppSettings:
    """A case's parameters as settings (swa_full None is the C API default, true) for a build for ``cpu``."""
    return LlamaCppSettings(
        n_ctx=p["n_ctx"],
        n_batch=p["n_batch"],
        n_ubatch=p["n_ubatch"],
        n_seq=p["n_seq_max"],
        kv_unified=p["kv_unified"],
        type_k=p["type_k"],
        type_v=p["type_v"],
        flash_attn=p["flash_attn"],
        mmap=p["use_mmap"],
        swa_full=True if p["swa_full"] is None else p["swa_full"],
        n_gpu_layers=p["n_gpu_layers"],
        repack=p["use_extra_bufts"],
        n_outputs_max=p["n_outputs_max"],
        embeddings=p["embeddings"],
        cpu=cpu,
    )


def memory_for(case: dict, cpu: str = "avx2") -> LlamaCppMemory:
    """explorer's memory for a case, CPU only (the build was CPU-only: -ngl changes nothing)."""
    return llamacpp_memory(model_for(case["model"]), settings_for(case["params"], cpu), devices=())


def weights_for(case: dict, cpu: str = "avx2") -> HostWeights:
    """explorer's host weights for a case, CPU only: what llama.cpp prints before it builds the context."""
    model = model_for(case["model"])
    build = cpu if case["params"]["use_extra_bufts"] else None
    return host_weights(model, build, range(model.n_layer), output=True)


def mib(n: int) -> str:
    """Bytes as llama.cpp prints MiB."""
    return f"{n / MiB:.2f}"


def model_buffers(mem: LlamaCppMemory) -> dict[str, str]:
    """The model buffers llama.cpp would print for a CPU-only load."""
    h = mem.host
    return buffers_printed(
        HostWeights(cpu_bytes=h.loaded_bytes, repack_bytes=h.repack_bytes, amx_bytes=h.amx_bytes),
        mapped=h.mapped_bytes if mem.settings.mmap else None,
    )


def buffers_printed(w: HostWeights, mapped: int | None) -> dict[str, str]:
    """The weight buffers as llama.cpp prints them: ``CPU_Mapped`` (``mapped`` bytes) or ``CPU``, then the
    extra buffers that hold anything."""
    out = {"CPU_Mapped": mib(mapped)} if mapped is not None else {"CPU": mib(w.cpu_bytes)}
    if w.amx_bytes:
        out["AMX"] = mib(w.amx_bytes)
    if w.repack_bytes:
        out["CPU_REPACK"] = mib(w.repack_bytes)
    return out


def weight_buffers_for(case: dict, cpu: str = "avx2") -> dict[str, str]:
    """The weight buffers explorer expects a case to print (for a case llama.cpp aborts on too)."""
    w = weights_for(case, cpu)
    return buffers_printed(w, mapped=w.span_bytes if case["params"]["use_mmap"] else None)


def printed_buffers(case: dict) -> dict[str, str]:
    """The weight buffers a measured case printed."""
    return {b["buffer"]: b["mib_str"] for b in case["figures"]["model_buffers"]}


def compute_error(case: dict, mem: LlamaCppMemory) -> float:
    """(estimate - llama.cpp) / llama.cpp for the compute buffer."""
    truth = float(case["figures"]["compute_exact"][0]["mib_str"]) * MiB
    return (mem.host.compute_bytes - truth) / truth
