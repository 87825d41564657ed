"""The setup an engine log ran: its card class, its split, and the request explorer plans it as.

The card comes from ``--card`` when given, else from the device the log
names (``NVIDIA H100 80GB HBM3`` → ``h100-80g``), else from the total
memory the engine saw, matched against the catalogue's torch-visible
totals. Settings the log does not show take the engine's defaults (vLLM:
utilisation 0.9, the model's whole context; SGLang: its default static
share; llama.cpp: llama-server's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from explorer.engines.logs import EngineLog
from explorer.engines.request import PlanRequest
from explorer.errors import EngineLogError
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.model.shapes import ModelShape
from explorer.units import GiB

#: words a device name carries that no catalogue name does
_VENDOR = {"nvidia", "geforce", "tesla", "amd", "radeon", "instinct", "apple", "graphics"}
#: how close a logged total must be to a class's torch-visible total to name the class
TOTAL_MATCH_BYTES = GiB // 50
#: llama.cpp's printed file types → explorer's quant names
_FILE_TYPES = {"medium": "M", "small": "S", "large": "L"}


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSetup:
    """What a log's run was, as explorer plans it.

    Attributes:
        engine: the engine.
        gpu: the card class.
        tp: tensor-parallel size (llama.cpp: 1).
        pp: pipeline-parallel size (llama.cpp: the devices holding layers).
        dp: data-parallel ranks of one launch (vLLM ``--data-parallel-size``, SGLang ``--dp-size``); a rank
            holds tp × pp cards and is checked as one replica.
        ep: expert-parallel size (vLLM ``--enable-expert-parallel``: tp × dp; SGLang ``--ep-size``; 1: experts
            split by tp).
        request: the request with the log's settings.
        quant: llama.cpp's GGUF quant (None for vLLM and SGLang).
        free_bytes: free memory a card had at start, when the log says (vLLM's check against it).
        sampler_rank: whether the log's figures are a rank that runs the sampler (vLLM V0 samples on the driver
            rank alone: a worker process's profile holds no logits).
    """

    engine: str
    gpu: GPUClass
    tp: int
    pp: int
    request: PlanRequest
    dp: int = 1
    ep: int = 1
    quant: str | None = None
    free_bytes: int | None = None
    sampler_rank: bool = True


def _device_class(name: str, catalogue: Catalogue) -> GPUClass | None:
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in _VENDOR]
    memory = next((w[:-2] for w in words if re.fullmatch(r"\d+gb", w)), None)
    for k in range(len(words), 0, -1):
        found = catalogue.lookup("".join(words[:k]))
        if found is not None and not found.is_mig:
            return found
    if memory and words:
        return catalogue.lookup(f"{words[0]}-{memory}g")
    return None


def card_class(log: EngineLog, catalogue: Catalogue, label: str | None = None) -> GPUClass:
    """The log's card class: ``label``, else the device it names, else its total matched to the catalogue.

    Raises:
        EngineLogError: none of these names a class.
        UnknownGPUClassError: ``label`` is not a class.
    """
    if label:
        return catalogue.resolve(label)
    if log.card:
        found = _device_class(log.card, catalogue)
        if found is not None:
            return found
    total = log.observed.get("torch_total_bytes")
    if total:
        near = [g for g in catalogue if g.torch_memory_bytes and abs(g.torch_memory_bytes - total) <= TOTAL_MATCH_BYTES]
        if len(near) == 1:
            return near[0]
    seen = f"device {log.card!r}" if log.card else "no device name"
    shown = f", a total of {total / GiB:.2f} GiB" if total else ""
    raise EngineLogError(
        f"the {log.engine} log does not say which card it ran on ({seen}{shown})",
        hint="name the card class with --card, e.g. --card h100-80g",
    )


def _int(value: Any, default: int | None = None) -> int | None:
    try:
        return int(value) if value is not None and value != "" else default
    except (TypeError, ValueError):
        return default


def _float(value: Any, default: float | None = None) -> float | None:
    try:
        return float(value) if value is not None and value != "" else default
    except (TypeError, ValueError):
        return default


def _kv_dtype(value: Any) -> str:
    text = str(value or "auto").lower()
    return "fp8" if text.startswith("fp8") else "auto" if text in ("auto", "none", "bfloat16", "float16") else text


def _precision(settings: Mapping[str, Any], shape: ModelShape) -> str | None:
    if settings.get("precision"):
        return str(settings["precision"])
    dtype = str(settings.get("dtype", "")).lower().replace("torch.", "")
    if dtype in ("float32", "fp32"):  # asked for: a float32 checkpoint too, which auto would load at 16 bits
        return "fp32"
    if str(settings.get("quantization", "")).lower() == "fp8" and shape.precision.method == "none":
        return "fp8"
    return None


def gguf_quant(file_type: str) -> str | None:
    """llama.cpp's printed file type as a quant name: ``Q4_K - Medium`` → ``Q4_K_M``, ``IQ4_NL - 4.5 bpw`` → ``IQ4_NL``."""
    m = re.match(r"^\s*([A-Z0-9_]+)(?:\s*-\s*(\w+))?", file_type or "")
    if m is None:
        return None
    suffix = _FILE_TYPES.get((m[2] or "").lower())
    return f"{m[1]}_{suffix}" if suffix else m[1]


def _vllm_request(s: Mapping[str, Any], shape: ModelShape, version: str | None) -> PlanRequest:
    return PlanRequest(
        context_tokens=_int(s.get("max_model_len"), shape.max_context_tokens) or 1,
        kv_dtype=_kv_dtype(s.get("kv_cache_dtype")),
        precision=_precision(s, shape),
        engines=("vllm",),
        gpu_memory_utilization=_float(s.get("gpu_memory_utilization"), 0.9) or 0.9,
        max_num_batched_tokens=_int(s.get("max_num_batched_tokens")),
        max_num_seqs=_int(s.get("max_num_seqs")),
        enforce_eager=bool(s.get("enforce_eager", False)),
        vllm_version=version,
    )


def _sglang_request(s: Mapping[str, Any], shape: ModelShape) -> PlanRequest:
    chunk = _int(s.get("chunked_prefill_size"))
    return PlanRequest(
        context_tokens=_int(s.get("context_length"), shape.max_context_tokens) or 1,
        kv_dtype=_kv_dtype(s.get("kv_cache_dtype")),
        precision=_precision(s, shape),
        engines=("sglang",),
        mem_fraction_static=_float(s.get("mem_fraction_static")),
        chunked_prefill_size=chunk if chunk and chunk > 0 else None,
        cuda_graph_max_bs=_int(s.get("cuda_graph_max_bs")),
        dp_attention=bool(s.get("enable_dp_attention", False)),
        enforce_eager=bool(s.get("disable_cuda_graph", False)),
    )


def _llamacpp_request(s: Mapping[str, Any], shape: ModelShape) -> PlanRequest:
    seqs = _int(s.get("n_seq_max"), 1) or 1
    per_seq = _int(s.get("n_ctx_seq")) or (_int(s.get("n_ctx"), 4096) or 4096) // seqs
    flash = str(s.get("flash_attn", "auto")).lower()
    flash = (
        "on"
        if flash in ("enabled", "1", "on", "true")
        else "off"
        if flash in ("disabled", "0", "off", "false")
        else "auto"
    )
    kv = str(s.get("type_k", "f16")).lower()
    return PlanRequest(
        context_tokens=per_seq,
        concurrency=seqs,
        kv_dtype="auto" if kv == "f16" else kv,
        engines=("llamacpp",),
        flash_attn=flash,
        n_gpu_layers=_int(s.get("n_gpu_layers")),
        batch_tokens=_int(s.get("n_batch"), 2048) or 2048,
        ubatch_tokens=_int(s.get("n_ubatch"), 512) or 512,
    )


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes")


def _parallel(log: EngineLog, s: Mapping[str, Any], shape: ModelShape) -> tuple[int, int, int, int]:
    """(tp, pp, dp, ep) as the log ran them: ep is 1 for a model without experts."""
    tp, pp = _int(s.get("tensor_parallel_size"), 1) or 1, _int(s.get("pipeline_parallel_size"), 1) or 1
    dp = _int(s.get("data_parallel_size") or s.get("dp_size"), 1) or 1
    if log.engine == "vllm":
        ep = tp * dp if _truthy(s.get("enable_expert_parallel")) else 1
    else:
        ep = _int(s.get("expert_parallel_size"), 1) or 1
        a2a = str(s.get("moe_a2a_backend") or "none").lower() != "none" or _truthy(s.get("enable_deepep_moe"))
        ep = tp if (_truthy(s.get("enable_ep_moe")) or a2a) and ep == 1 else ep  # SGLang sets ep = tp for both
    return tp, pp, dp, ep if shape.moe is not None else 1


def log_setup(log: EngineLog, shape: ModelShape, gpu: GPUClass, overrides: Mapping[str, Any] | None = None) -> LogSetup:
    """The setup of ``log`` on ``gpu``; ``overrides`` are settings the log does not show (engine names).

    Raises:
        EngineLogError: a llama.cpp log names no GGUF file type.
    """
    s = {**log.settings, **(overrides or {})}
    version = str(s.pop("version", "") or log.version or "") or None
    if log.engine in ("vllm", "sglang"):
        tp, pp, dp, ep = _parallel(log, s, shape)
        request = _vllm_request(s, shape, version) if log.engine == "vllm" else _sglang_request(s, shape)
    else:
        tp, pp = 1, _int(s.get("devices"), log.cards) or 1
        request = _llamacpp_request(s, shape)
        quant = gguf_quant(str(s.get("file_type", "")))
        if quant is None:
            raise EngineLogError("the llama.cpp log names no file type", hint="keep the 'file type = …' line")
        return LogSetup(engine=log.engine, gpu=gpu, tp=tp, pp=pp, request=request, quant=quant)
    free = _int(s.get("free_bytes")) or log.observed.get("free_at_start_bytes")
    return LogSetup(
        engine=log.engine,
        gpu=gpu,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        request=request,
        free_bytes=free,
        sampler_rank=log.driver_rank is not False,
    )
