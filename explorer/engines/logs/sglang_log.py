"""Read an SGLang start-up log: its settings, the memory it measured, whether it started.

SGLang prints "GB" for figures it divides by 2³⁰: they are read as GiB.
Lines read (each optional; at least one figure must be there):

- settings: ``server_args=ServerArgs(model_path=…, tp_size=…, mem_fraction_static=…)`` or the
  ``sglang.launch_server --model … --tp … --mem-fraction-static …`` command line;
- figures: ``Init torch distributed ends. mem usage=X GB``, ``Load weight begin. avail mem=X GB``,
  ``Load weight end. … avail mem=X GB, mem usage=Y GB``, ``KV Cache is allocated. #tokens: N, K size: X
  GB, V size: Y GB`` (or ``KV size``), ``Capture cuda graph end. … mem usage=X GB``;
- refusals: ``Not enough memory``, ``leave no GPU memory for the KV cache``, ``larger than the profiled
  value -N``, ``CUDA out of memory``.
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
    gib_bytes,
    put_max,
    put_min,
    setting_value,
)

SIGNATURES = (
    r"KV Cache is allocated",
    r"Load weight end",
    r"Load weight begin",
    r"server_args=ServerArgs",
    r"max_total_num_tokens=",
)
#: ServerArgs field → the setting name explorer uses
_FIELDS = {
    "tp_size": "tensor_parallel_size",
    "pp_size": "pipeline_parallel_size",
    "dp_size": "dp_size",
    "ep_size": "expert_parallel_size",
    "enable_ep_moe": "enable_ep_moe",
    "enable_deepep_moe": "enable_deepep_moe",
    "moe_a2a_backend": "moe_a2a_backend",
    "mem_fraction_static": "mem_fraction_static",
    "context_length": "context_length",
    "chunked_prefill_size": "chunked_prefill_size",
    "cuda_graph_max_bs": "cuda_graph_max_bs",
    "kv_cache_dtype": "kv_cache_dtype",
    "enable_dp_attention": "enable_dp_attention",
    "disable_cuda_graph": "disable_cuda_graph",
    "quantization": "quantization",
    "max_total_tokens": "max_total_tokens",
}
#: launch_server flags → ServerArgs fields
_FLAGS = {
    "--tp": "tp_size",
    "--tp-size": "tp_size",
    "--pp-size": "pp_size",
    "--dp": "dp_size",
    "--dp-size": "dp_size",
    "--ep": "ep_size",
    "--ep-size": "ep_size",
    "--moe-a2a-backend": "moe_a2a_backend",
    "--mem-fraction-static": "mem_fraction_static",
    "--context-length": "context_length",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--cuda-graph-max-bs": "cuda_graph_max_bs",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--quantization": "quantization",
    "--max-total-tokens": "max_total_tokens",
}
_REFUSALS = (
    r"Not enough memory",
    r"leave no GPU memory for the KV cache",
    r"larger than the profiled value -\d",
    r"CUDA out of memory",
    r"OutOfMemoryError",
)


def _settings(text: str) -> tuple[str | None, dict[str, Any]]:
    out: dict[str, Any] = {}
    model = None
    command = first(r"sglang\.launch_server(.*)$", text)
    if command:
        words = command[1].split()
        for flag, value in zip(words, [*words[1:], ""], strict=True):
            if flag in ("--model", "--model-path"):
                model = value
            elif flag in _FLAGS and value and not value.startswith("--"):
                out[_FIELDS[_FLAGS[flag]]] = setting_value(value)
            elif flag in ("--enable-dp-attention", "--enable-ep-moe", "--enable-deepep-moe"):
                out[flag[2:].replace("-", "_")] = True
    args = first(r"server_args=ServerArgs\((.*)$", text)
    if args:
        for key, value in re.findall(r"\b(\w+)=('[^']*'|[^,]+)", args[1]):
            if key == "model_path":
                model = setting_value(value)
            elif key in _FIELDS and value != "None":
                out[_FIELDS[key]] = setting_value(value)
    return (str(model) if model else None), out


def _figures(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    dist = find_all(r"Init torch distributed ends\. mem usage=" + NUMBER, text)
    put_max(out, "dist_init_bytes", map(gib_bytes, dist))
    put_min(out, "free_at_start_bytes", map(gib_bytes, find_all(r"Load weight begin\. avail mem=" + NUMBER, text)))
    loaded = find_all(r"Load weight end\..*?avail mem=" + NUMBER + r" GB, mem usage=" + NUMBER, text)
    put_min(out, "free_after_load_bytes", [gib_bytes(a) for a, _ in loaded])
    put_max(out, "weights_bytes", [gib_bytes(w) for _, w in loaded])
    pools = find_all(r"KV Cache is allocated\..*?#tokens: (\d+), K size: " + NUMBER + " GB, V size: " + NUMBER, text)
    put_min(out, "kv_cache_tokens", [int(n) for n, _, _ in pools])
    put_min(out, "kv_cache_bytes", [gib_bytes(k) + gib_bytes(v) for _, k, v in pools])
    single = find_all(r"KV Cache is allocated\..*?#tokens: (\d+), KV size: " + NUMBER, text)
    if single and "kv_cache_tokens" not in out:
        put_min(out, "kv_cache_tokens", [int(n) for n, _ in single])
        put_min(out, "kv_cache_bytes", [gib_bytes(s) for _, s in single])
    _older_releases(text, out)
    graphs = find_all(r"Capture cuda graph end\..*?mem usage=" + NUMBER, text)
    put_max(out, "cuda_graph_bytes", map(gib_bytes, graphs))
    for key, value in oom_figures(text).items():
        out.setdefault(key, value)
    return out


def _older_releases(text: str, out: dict[str, int]) -> None:
    """SGLang before 0.4.1: ``KV Cache is allocated. K size: X GB, V size: Y GB`` without ``#tokens``, and the
    pool's tokens in ``max_total_num_tokens=N``. Its ``Load weight end`` prints no ``mem usage``: the weights are
    then not read (the free memory around loading holds more than the weights)."""
    if "kv_cache_bytes" not in out:
        pools = find_all(r"KV Cache is allocated\. K size: " + NUMBER + " GB, V size: " + NUMBER, text)
        put_min(out, "kv_cache_bytes", [gib_bytes(k) + gib_bytes(v) for k, v in pools])
    if "kv_cache_tokens" not in out:
        put_min(out, "kv_cache_tokens", map(int, find_all(r"max_total_num_tokens=(\d+)", text)))


def read_sglang(text: str) -> EngineLog:
    """An SGLang log's record (the text already cleaned of colour codes)."""
    model, settings = _settings(text)
    refusal = next((line for p in _REFUSALS if (line := first_line(p, text))), "")
    started = first(r"KV Cache is allocated|The server is fired up|Application startup complete", text)
    version = first(r"sglang[_=-]v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)", text)
    cards = int(settings.get("tensor_parallel_size", 1) or 1) * int(settings.get("pipeline_parallel_size", 1) or 1)
    return EngineLog(
        engine="sglang",
        version=version[1] if version else None,
        model=model,
        cards=cards,
        settings=settings,
        observed=_figures(text),
        refused=True if refusal else (False if started else None),
        refusal=refusal[:400],
        lines=text.count("\n") + 1,
    )
