"""Read a vLLM start-up log (V0 0.4 to V1 0.26): its settings, the memory it measured, whether it started.

Lines read (each optional; at least one figure must be there):

- settings: ``non-default args: {…}``, ``args: Namespace(…)``, ``Initializing a V1 LLM engine (vX) with
  config: …``, ``Using max model len N``, ``Defaulting max_num_batched_tokens to N``, ``Chunked prefill is
  enabled with max_num_batched_tokens=N``, ``Requested memory: 0.95 (util)``, ``Desired GPU memory
  utilization is (0.9, …)``; ``data_parallel_size`` and ``enable_expert_parallel`` among them;
- figures: ``Model loading took X GiB``, ``Available KV cache memory: X GiB``, ``GPU KV cache size: N
  tokens``, ``torch peak memory increase: XGiB``, ``non-torch forward increase memory: XGiB``, ``Graph
  capturing finished in N secs, took X GiB``, ``Estimated CUDA graph memory: X GiB``, ``worker init memory
  snapshot: … free_memory=XGiB, total_memory=XGiB``, ``Free memory on device (F/T GiB)``, the start-up
  summary ``Actual usage is …``, V0's ``Loading model weights took X GB`` and ``# GPU blocks: N`` (0.4 on;
  ``# CUDA blocks`` in 0.7), its ``Memory profiling results: total_gpu_memory=…`` (0.6.4) and its summary of
  0.6.5 to 0.8 (``the current vLLM instance can use total_gpu_memory (T) x gpu_memory_utilization (U) = B``,
  ``model weights take W; … the rest of the memory reserved for KV Cache is K``);
- refusals: ``Available KV cache memory: -X``, ``… larger than the available KV cache memory``, ``… larger
  than the maximum number of tokens that can be stored in KV cache``, ``Free memory on device … is less
  than desired``, ``CUDA out of memory`` (and torch's ``OutOfMemoryError``, the allocator's ``CUDA Error: out
  of memory``), ``EngineCore failed to start``; an error after ``Application startup complete`` is a later
  failure, not a refusal to start. The figures a refusal or an out-of-memory error prints are read too
  (:mod:`explorer.engines.logs.oom`).
"""

from __future__ import annotations

import re
from typing import Any

from explorer.engines.logs.oom import oom_figures
from explorer.engines.logs.record import (
    NUMBER,
    EngineLog,
    find_all,
    first,
    first_line,
    first_line_number,
    gib_bytes,
    put_max,
    put_min,
    setting_value,
)

#: lines that say vLLM measured its memory (one is needed to call a log vLLM's)
SIGNATURES = (
    r"Model loading took",
    r"Loading model weights took",
    r"Available KV cache memory",
    r"GPU KV cache size",
    r"Memory profiling results",
    r"# GPU blocks",
    r"# CUDA blocks",
    r"Free memory on device",
    r"KV cache is needed",
    r"the current vLLM instance can use",
    r"model weights take",
)
SETTING_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "quantization",
    "enforce_eager",
    "dtype",
    "data_parallel_size",
    "data_parallel_size_local",
    "enable_expert_parallel",
)
_REFUSALS = (
    r"Available KV cache memory: -",
    r"larger than the available KV cache memory",
    r"larger than the maximum number of tokens that can be stored in KV cache",
    r"Free memory on device .* is less than desired GPU memory utilization",
    r"No available memory for the cache blocks",
    r"CUDA out of memory",
    r"CUDA Error: out of memory",
    r"HIP out of memory",
    r"OutOfMemoryError",
    r"EngineCore failed to start",
    r"Engine core initialization failed",
)
_STARTED = (r"Graph capturing finished", r"Starting vLLM API server", r"Application startup complete", r"init engine")
#: lines that say the server is up: an error after one is a later failure, not a refusal to start
_SERVING = (r"Starting vLLM API server", r"Application startup complete")
_VERSION = (
    r"vLLM API server version (\S+)",
    r"Initializing a V\d LLM engine \(v([^)]+)\)",
    r"Initializing an LLM engine \(v([^)]+)\)",
    r"█\s+version (\S+)",
)


def _args_dict(text: str) -> dict[str, Any]:
    """``non-default args: {…}`` as a dict: the whole literal, or, where it holds objects Python cannot read back
    (``AttentionConfig(…)``) or the paste is cut, its ``'key': value`` pairs of plain values one by one."""
    parsed = setting_value(text.strip())
    if isinstance(parsed, dict):
        return parsed
    pairs = re.findall(r"'(\w+)': ('[^']*'|-?\d+(?:\.\d+)?|True|False|None)(?=[,}])", text)
    return {k: setting_value(v) for k, v in pairs if v != "None"}


def _settings(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    config = first(r"with config: (.*)$", text)
    if config:
        for key, value in re.findall(r"\b(\w+)=('[^']*'|[^,]+)", config[1]):
            if key == "max_seq_len":
                out["max_model_len"] = setting_value(value)
            elif key == "model":
                out["model"] = setting_value(value)
            elif key in SETTING_KEYS and value not in ("None",):
                out[key] = setting_value(value)
    namespace = first(r"args: Namespace\((.*)\)", text)
    if namespace:
        for key, value in re.findall(r"\b(\w+)=('[^']*'|[^,]+)", namespace[1]):
            if (key in SETTING_KEYS or key in ("model", "model_tag")) and value != "None":
                out[key] = setting_value(value)
    args = first(r"non-default args: (\{.*)$", text)
    if args:
        out.update({k: v for k, v in _args_dict(args[1]).items() if k in SETTING_KEYS or k in ("model", "model_tag")})
    for pattern, key in (
        (r"Using max model len (\d+)", "max_model_len"),
        (r"Defaulting max_num_batched_tokens to (\d+)", "max_num_batched_tokens"),
        (r"Defaulting max_num_seqs to (\d+)", "max_num_seqs"),
        (r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)", "max_num_batched_tokens"),
        (r"max seq len \((\d+)\)", "max_model_len"),
    ):
        m = first(pattern, text)
        if m and key not in out:
            out[key] = int(m[1])
    m = first(r"Requested memory: " + NUMBER + r" \(util\)", text) or first(
        r"GPU memory utilization (?:is )?\(" + NUMBER + ",", text
    )
    m = m or first(r"gpu_memory_utilization=" + NUMBER, text) or first(r"gpu_memory_utilization \(" + NUMBER, text)
    if m and "gpu_memory_utilization" not in out:
        out["gpu_memory_utilization"] = float(m[1])
    return out


#: one-figure lines: (key, which rank's figure, pattern of a GiB figure); per-rank lines keep the binding one
# fmt: off
_GIB_LINES = (
    ("weights_bytes",             max, r"(?:Model loading took|Loading model weights took) " + NUMBER + r" ?Gi?B"),
    ("kv_cache_bytes",            min, r"Available KV cache memory: " + NUMBER + " GiB"),
    ("activation_bytes",          max, r"torch peak memory increase: " + NUMBER + "GiB"),
    ("non_torch_bytes",           max, r"non-torch forward increase memory: " + NUMBER + "GiB"),
    ("cuda_graph_bytes",          max, r"Graph capturing finished in \d+ secs?, took " + NUMBER + " GiB"),
    ("cuda_graph_estimate_bytes", max, r"Estimated CUDA graph memory: " + NUMBER + " GiB"),
    ("requested_bytes",           max, r"worker requested memory: " + NUMBER + "GiB"),
)
# fmt: on
#: 0.10's start-up summary
_SUMMARY = " GiB for ".join(
    ["Actual usage is " + NUMBER, "weight, " + NUMBER, "peak activation, " + NUMBER, "non-torch memory, and " + NUMBER]
)
#: V0's profiling line
_V0_PROFILE = "GiB ".join(
    f"{key}={NUMBER}"
    for key in (
        "total_gpu_memory",
        "initial_memory_usage",
        "peak_torch_memory",
        "memory_usage_post_profile",
        "non_torch_memory",
        "kv_cache_size",
    )
)


#: V0 0.6.5 to V1 0.8's summary (every rank prints it; the binding rank's KV room is kept)
_BUDGET = (
    r"the current vLLM instance can use total_gpu_memory \("
    + NUMBER
    + r" ?GiB\) x gpu_memory_utilization \("
    + NUMBER
    + r"\) = "
    + NUMBER
    + " ?GiB"
)
_TAKES = "; ".join(
    [
        "model weights take " + NUMBER + " ?GiB",
        "non_torch_memory takes " + NUMBER + " ?GiB",
        "PyTorch activation peak memory takes " + NUMBER + " ?GiB",
        "the rest of the memory reserved for KV Cache is " + NUMBER + " ?GiB",
    ]
)
#: V1's refusal of a sequence longer than the KV room (0.8 on): needed, then available, then the estimate
_V1_SHORT = (
    r"max seq len \((\d+)\), \(" + NUMBER + r" GiB KV cache is needed, which is larger than the available KV cache "
    r"memory \(" + NUMBER + r" GiB\)"
)


def _summaries(text: str, out: dict[str, int]) -> None:
    """V0 0.6.5–0.7 and V1 0.8's profiling summary, the refusals' KV figures and an out-of-memory error's."""
    budget = first(_BUDGET, text)
    if budget:
        out.setdefault("torch_total_bytes", gib_bytes(budget[1]))
        out.setdefault("requested_bytes", gib_bytes(budget[3]))
    takes = find_all(_TAKES, text)
    if takes:
        put_max(out, "weights_bytes", [gib_bytes(row[0]) for row in takes])
        put_max(out, "non_torch_bytes", [gib_bytes(row[1]) for row in takes])
        put_max(out, "activation_bytes", [gib_bytes(row[2]) for row in takes])
        put_min(out, "kv_cache_bytes", [gib_bytes(row[3]) for row in takes])
    short = first(_V1_SHORT, text)
    if short:
        out.setdefault("kv_cache_bytes", gib_bytes(short[3]))
        out["kv_needed_bytes"] = gib_bytes(short[2])
    fit = first(r"the estimated maximum model length is (\d+)", text)
    if fit:
        out["fitting_context_tokens"] = int(fit[1])
    v0_short = first(
        r"The model's max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV "
        r"cache \((\d+)\)",
        text,
    )
    if v0_short:
        out.setdefault("kv_cache_tokens", int(v0_short[2]))
    for key, value in oom_figures(text).items():
        out.setdefault(key, value)


def _figures(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, pick, pattern in _GIB_LINES:
        (put_max if pick is max else put_min)(out, key, map(gib_bytes, find_all(pattern, text)))
    put_min(
        out, "kv_cache_tokens", (int(t.replace(",", "")) for t in find_all(r"GPU KV cache size: ([\d,]+) tokens", text))
    )
    snapshot = find_all(r"free_memory=" + NUMBER + r"GiB, total_memory=" + NUMBER + "GiB", text)
    startup = find_all(r"Free memory on device(?: \S+)? \(" + NUMBER + "/" + NUMBER + r" GiB\)", text)
    put_min(out, "free_at_start_bytes", [gib_bytes(f) for f, _ in snapshot + startup])
    put_max(out, "torch_total_bytes", [gib_bytes(t) for _, t in snapshot + startup])
    summary = first(_SUMMARY, text)
    if summary:
        out.setdefault("weights_bytes", gib_bytes(summary[1]))
        out.setdefault("activation_bytes", gib_bytes(summary[2]))
        out.setdefault("non_torch_bytes", gib_bytes(summary[3]))
    summary = first(r"for consumed memory \(weights \+ non-torch\), " + NUMBER + " GiB for peak activation", text)
    if summary:
        out.setdefault("activation_bytes", gib_bytes(summary[1]))
    v0 = find_all(_V0_PROFILE, text)
    if v0:
        total, _, peak, _, non_torch, _ = max(v0, key=lambda row: float(row[2]))
        out.setdefault("torch_total_bytes", gib_bytes(total))
        out.setdefault("non_torch_bytes", gib_bytes(non_torch))
        out.setdefault("kv_cache_bytes", min(gib_bytes(row[5]) for row in v0))
        if "weights_bytes" in out:
            out.setdefault("activation_bytes", gib_bytes(peak) - out["weights_bytes"])
    blocks = find_all(r"# (?:GPU|CUDA) blocks: (\d+)", text)
    if blocks and "kv_cache_tokens" not in out:
        out["kv_cache_tokens"] = min(int(b) for b in blocks) * 16
    _summaries(text, out)
    return out


#: V0's prefix on the lines of a worker process (tensor-parallel ranks other than the driver, rank 0)
_V0_WORKER = re.compile(r"\(VllmWorkerProcess pid=\d+\)")
#: V0's per-rank figure lines
_V0_RANK_FIGURES = re.compile(r"Loading model weights took|Memory profiling (?:results|takes)|model weights take")


def _driver_rank(text: str) -> bool | None:
    """Whether V0's per-rank figures are the driver's: False when every one is a worker process's line (the driver,
    rank 0, runs in the engine's own process and prints without the prefix); None when none is printed."""
    lines = [line for line in text.splitlines() if _V0_RANK_FIGURES.search(line)]
    if not lines:
        return None
    return not all(_V0_WORKER.search(line) for line in lines)


def _version(text: str) -> str | None:
    for pattern in _VERSION:
        m = first(pattern, text)
        if m:
            return m[1]
    return None


def _failed_after_serving(text: str) -> bool:
    """Whether the server was up before the first refusal line (a later out-of-memory error, at wake-up or
    under load, does not undo the start)."""
    served = [n for p in _SERVING if (n := first_line_number(p, text)) is not None]
    failed = [n for p in _REFUSALS if (n := first_line_number(p, text)) is not None]
    return bool(served and failed) and min(served) < min(failed)


def read_vllm(text: str) -> EngineLog:
    """A vLLM log's record (the text already cleaned of colour codes)."""
    settings = _settings(text)
    model = settings.pop("model", None) or settings.pop("model_tag", None)
    settings.pop("model_tag", None)
    refusal = (
        "" if _failed_after_serving(text) else next((line for p in _REFUSALS if (line := first_line(p, text))), "")
    )
    refused = True if refusal else (False if any(first(p, text) for p in _STARTED) else None)
    device = first(r"device_name=([A-Za-z0-9_-]+)", text)
    cards = int(settings.get("tensor_parallel_size", 1) or 1) * int(settings.get("pipeline_parallel_size", 1) or 1)
    return EngineLog(
        engine="vllm",
        version=_version(text),
        model=str(model) if model else None,
        card=device[1].replace("_", " ") if device else None,
        cards=cards,
        settings=settings,
        observed=_figures(text),
        refused=refused,
        refusal=refusal[:400],
        lines=text.count("\n") + 1,
        driver_rank=_driver_rank(text),
    )
