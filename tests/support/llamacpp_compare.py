"""explorer's llama.cpp memory model against llama.cpp's printed buffers: the comparisons the tests share."""

from __future__ import annotations

import json
from functools import cache, lru_cache

from explorer.engines.llamacpp.memory import LlamaCppMemory, llamacpp_memory
from explorer.engines.llamacpp.model import LlamaModel, llama_model_from_gguf
from explorer.engines.llamacpp.settings import LlamaCppSettings
from support.corpus import DATA
from support.llamacpp_headers import header_for

MEASURED = DATA / "llamacpp_measured.json"
MiB = 1024 * 1024
#: the compute buffer must be within this share of llama.cpp's
TOLERANCE = 0.05


@lru_cache(maxsize=1)
def measured() -> dict:
    """The checked-in measurements."""
    return json.loads(MEASURED.read_text())


def cases(ok: bool | None = None) -> list[dict]:
    """Measured cases (only those that loaded, or only those that failed)."""
    return [c for c in measured()["cases"] if ok is None or bool(c["result"].get("ok")) == ok]


@cache
def model_for(name: str) -> LlamaModel:
    """The exact model of a spec, from its in-memory GGUF header."""
    return llama_model_from_gguf(header_for(name))


def settings_for(p: dict) -> LlamaCppSettings:
    """A case's parameters as settings (swa_full None is the C API default, true)."""
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
    )


def memory_for(case: dict) -> LlamaCppMemory:
    """explorer's memory for a case, CPU only (the build was CPU-only: -ngl changes nothing)."""
    return llamacpp_memory(model_for(case["model"]), settings_for(case["params"]), devices=())


def mib(n: int) -> str:
    """Bytes as llama.cpp prints MiB."""
    return f"{n / MiB:.2f}"


def model_buffers(mem: LlamaCppMemory) -> dict[str, str]:
    """The model buffers llama.cpp would print for a CPU-only load."""
    h = mem.host
    out = {"CPU_Mapped": mib(h.mapped_bytes)} if mem.settings.mmap else {"CPU": mib(h.loaded_bytes)}
    if h.repack_bytes:
        out["CPU_REPACK"] = mib(h.repack_bytes)
    return out


def compute_error(case: dict, mem: LlamaCppMemory) -> float:
    """(estimate - llama.cpp) / llama.cpp for the compute buffer."""
    truth = float(case["figures"]["compute_exact"][0]["mib_str"]) * MiB
    return (mem.host.compute_bytes - truth) / truth
