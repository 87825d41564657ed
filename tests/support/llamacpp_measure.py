"""Measure llama.cpp's buffer sizes on the GGUFs of `tests/support/llamacpp_models.py`.

Usage::

    python tests/support/llamacpp_measure.py --out tests/data/llamacpp_measured.json
    python tests/support/llamacpp_measure.py --models llama_gqa --out /tmp/m.json --jobs 1

Each case loads one model and creates one context in a *fresh subprocess*
(``--child``), so llama.cpp's C-level log (which llama-cpp-python forwards to
Python's ``sys.stderr``) is captured whole and one crash cannot take the run
down.  The parent parses the log with `parse_log` and writes one JSON file.

The child uses llama-cpp-python's low-level binding (``llama_model_load_from_file``
+ ``llama_init_from_model``) because the high-level ``llama_cpp.Llama`` does not
expose ``n_seq_max`` or ``kv_unified``; one case per model also goes through
``llama_cpp.Llama`` (``api="Llama"``) to show the two agree.

Nothing is evaluated: every figure is what llama.cpp reserves at load time on
the CPU backend (``n_gpu_layers=0``).

The parsing half (`parse_log` and its helpers) needs only the standard library,
so `tests/engines/llamacpp/test_harness.py` runs without llama_cpp installed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
RESULT_TAG = "@@LLAMACPP_MEASURE_RESULT "

# llama-cpp-python 0.3.36 vendors llama.cpp at this commit (its CHANGELOG:
# "update llama.cpp to ggml-org/llama.cpp@0c1e57098"); the library itself
# reports no commit at run time.
KNOWN_COMMITS = {"0.3.36": "0c1e57098"}

# ---------------------------------------------------------------------------
# log parsing (pure, standard library only)
# ---------------------------------------------------------------------------


def _num(name: str) -> str:
    """A named decimal-number group."""
    return rf"(?P<{name}>\d+(?:\.\d+)?)"


# "load_tensors:   CPU_Mapped model buffer size =    32.24 MiB"
# "llama_kv_cache:        CPU KV buffer size =     1.00 MiB"
# "llama_context:        CPU  output buffer size =     0.12 MiB"
# "sched_reserve:        CPU compute buffer size =    64.50 MiB"
# older builds: "llm_load_tensors:        CPU buffer size = ..." (no kind),
# "llama_kv_cache_init:", "llama_new_context_with_model:" prefixes.
BUFFER_RE = re.compile(
    r"^(?P<src>[~\w]+):\s+(?P<buffer>\S+)\s+(?:(?P<kind>model|KV|RS|output|compute)\s+)?"
    r"buffer size\s*=\s*" + _num("mib") + r"\s*MiB"
)
# "~llama_context:        CPU compute buffer size is  64.5020 MiB, matches expectation of  64.5020 MiB"
COMPUTE_EXACT_RE = re.compile(
    r"^~llama_context:\s+(?P<buffer>\S+) compute buffer size (?:is|of)\s+" + _num("mib") + r" MiB"
    r"(?:, (?:matches|does not match) expectation of\s+" + _num("expected") + r" MiB)?"
)
# "llama_kv_cache: size =    1.00 MiB (   512 cells,   4 layers,  1/1 seqs), K (f16):    0.50 MiB, V (f16):    0.50 MiB"
# older: "... (  512 cells,  4 layers,  1 seqs), K (f16): ..."
KV_SUMMARY_RE = re.compile(
    r"size\s*=\s*" + _num("mib") + r" MiB \(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers,\s*"
    r"(?P<seqs>\d+)(?:/(?P<streams>\d+))? seqs\),\s*K \((?P<type_k>\w+)\):\s*"
    + _num("k")
    + r" MiB,\s*V \((?P<type_v>\w+)\):\s*"
    + _num("v")
    + r" MiB"
)
# older builds: "llama_new_context_with_model: KV self size  =  256.00 MiB, K (f16):  128.00 MiB, V (f16):  128.00 MiB"
KV_SELF_RE = re.compile(
    r"KV self size\s*=\s*"
    + _num("mib")
    + r" MiB,\s*K \((?P<type_k>\w+)\):\s*"
    + _num("k")
    + r" MiB,\s*V \((?P<type_v>\w+)\):\s*"
    + _num("v")
    + r" MiB"
)
# "llama_memory_recurrent: size =    1.05 MiB (     1 cells,   4 layers,  1 seqs  0 rs_seq), R (f32):    0.05 MiB, S (f32):    1.00 MiB, P (f32):    0.00 MiB"
RS_SUMMARY_RE = re.compile(
    r"size\s*=\s*" + _num("mib") + r" MiB \(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers,\s*"
    r"(?P<seqs>\d+) seqs(?:\s+(?P<rs_seq>\d+) rs_seq)?\),\s*R \((?P<type_r>\w+)\):\s*"
    + _num("r")
    + r" MiB,\s*S \((?P<type_s>\w+)\):\s*"
    + _num("s")
    + r" MiB(?:,\s*P \((?P<type_p>\w+)\):\s*"
    + _num("p")
    + r" MiB)?"
)
# "llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells"
ISWA_RE = re.compile(r"creating\s+(?P<which>non-SWA|SWA) KV cache, size = (?P<cells>\d+) cells")
# "llama_context: n_ctx                 = 512"  (also n_ctx_seq / older n_ctx_per_seq)
CONTEXT_RE = re.compile(r"^llama_(?:context|new_context_with_model):\s+(?P<key>[a-z_]+)\s+=\s+(?P<value>\S+)\s*$")
# "sched_reserve: graph: nodes = 150, splits = 1, input objects = 4, input tensors = 6"
# "sched_reserve: graph (pp bs=512, tg bs=1): nodes = 150 / 140, splits = 1 / 1, ..."
# older: "llama_context: graph nodes  = 150" / "graph splits = 1"
GRAPH_RE = re.compile(
    r"graph(?P<pp> \(pp bs=\d+, tg bs=\d+\))?: nodes = (?P<nodes>[\d /]+), splits = (?P<splits>[\d /]+)"
)
GRAPH_OLD_RE = re.compile(r"graph (?P<key>nodes|splits)\s*=\s*(?P<value>\d+)")
PRINT_INFO_RE = re.compile(r"^print_info:\s+(?P<key>[^=]+?)\s*=\s*(?P<value>.*?)\s*$")
SCHED_COPIES_RE = re.compile(r"sched copies = (?P<n>\d+)")
# the llama_context block keys a memory model needs (older builds: n_ctx_per_seq)
CONTEXT_KEYS = (
    "n_seq_max",
    "n_ctx",
    "n_ctx_seq",
    "n_ctx_per_seq",
    "n_batch",
    "n_ubatch",
    "flash_attn",
    "kv_unified",
    "n_outputs_max",
    "causal_attn",
)
# lines worth keeping verbatim even though they carry no size
NOTE_PATTERNS = (
    "rounding down",
    "padding V cache",
    "full-size SWA",
    "not supported",
    "Flash Attention",
    "cannot be used with preferred buffer type",
    "requires Flash Attention",
    "failed",
    "error",
    "n_ctx_seq (",
    "pipeline parallelism",
)


def _mib(s: str) -> dict[str, Any]:
    """A printed MiB figure both as printed and as a float."""
    return {"mib_str": s, "mib": float(s)}


def _pair(s: str) -> list[int]:
    """'150 / 140' -> [150, 140]; '150' -> [150]."""
    return [int(x) for x in s.split("/")]


def parse_log(text: str) -> dict[str, Any]:
    """Pull every buffer size and memory summary out of a llama.cpp log.

    Returns a dict with keys ``model_buffers``, ``kv_buffers``, ``rs_buffers``,
    ``output_buffers``, ``compute_buffers`` (lists of ``{"buffer", "mib",
    "mib_str", "line"}`` in log order), ``compute_exact`` (the 4-decimal
    figures llama_context's destructor prints), ``kv_summaries``,
    ``rs_summaries``, ``iswa_cells``, ``context`` (the ``llama_context: key =
    value`` block), ``graph``, ``print_info``, ``size_lines`` (every other line
    with ``size =``/``size is``) and ``notes`` (warnings worth keeping).
    """
    out: dict[str, Any] = {
        "model_buffers": [],
        "kv_buffers": [],
        "rs_buffers": [],
        "output_buffers": [],
        "compute_buffers": [],
        "other_buffers": [],
        "compute_exact": [],
        "kv_summaries": [],
        "rs_summaries": [],
        "iswa_cells": {},
        "context": {},
        "graph": {},
        "print_info": {},
        "size_lines": [],
        "notes": [],
    }
    kind_key = {
        "model": "model_buffers",
        "KV": "kv_buffers",
        "RS": "rs_buffers",
        "output": "output_buffers",
        "compute": "compute_buffers",
    }
    for raw in text.splitlines():
        line = raw.rstrip()
        used = False
        if m := COMPUTE_EXACT_RE.search(line):
            rec = {"buffer": m["buffer"], **_mib(m["mib"]), "line": line}
            if m["expected"]:
                rec["expected_mib"] = float(m["expected"])
            out["compute_exact"].append(rec)
            used = True
        elif m := BUFFER_RE.search(line):
            kind = m["kind"] or ("model" if "load_tensors" in m["src"] else None)
            key = kind_key.get(kind, "other_buffers")
            out[key].append({"buffer": m["buffer"], **_mib(m["mib"]), "source": m["src"], "line": line})
            used = True
        if m := KV_SUMMARY_RE.search(line):
            out["kv_summaries"].append(
                {
                    **_mib(m["mib"]),
                    "cells": int(m["cells"]),
                    "layers": int(m["layers"]),
                    "seqs": int(m["seqs"]),
                    "streams": int(m["streams"]) if m["streams"] else None,
                    "type_k": m["type_k"],
                    "k": _mib(m["k"]),
                    "type_v": m["type_v"],
                    "v": _mib(m["v"]),
                    "line": line,
                }
            )
            used = True
        elif m := KV_SELF_RE.search(line):
            out["kv_summaries"].append(
                {
                    **_mib(m["mib"]),
                    "cells": None,
                    "layers": None,
                    "seqs": None,
                    "streams": None,
                    "type_k": m["type_k"],
                    "k": _mib(m["k"]),
                    "type_v": m["type_v"],
                    "v": _mib(m["v"]),
                    "line": line,
                }
            )
            used = True
        elif m := RS_SUMMARY_RE.search(line):
            rec = {
                **_mib(m["mib"]),
                "cells": int(m["cells"]),
                "layers": int(m["layers"]),
                "seqs": int(m["seqs"]),
                "rs_seq": int(m["rs_seq"]) if m["rs_seq"] else None,
                "type_r": m["type_r"],
                "r": _mib(m["r"]),
                "type_s": m["type_s"],
                "s": _mib(m["s"]),
                "line": line,
            }
            if m["type_p"]:
                rec["type_p"], rec["p"] = m["type_p"], _mib(m["p"])
            out["rs_summaries"].append(rec)
            used = True
        if m := ISWA_RE.search(line):
            out["iswa_cells"]["swa" if m["which"] == "SWA" else "base"] = int(m["cells"])
            used = True
        if m := CONTEXT_RE.search(line):
            v = m["value"]
            out["context"][m["key"]] = int(v) if v.isdigit() else v
            used = True
        if m := GRAPH_RE.search(line):
            out["graph"]["nodes"] = _pair(m["nodes"])
            out["graph"]["splits"] = _pair(m["splits"])
            out["graph"]["line"] = line
            used = True
        elif m := GRAPH_OLD_RE.search(line):
            out["graph"][m["key"]] = [int(m["value"])]
            used = True
        if m := SCHED_COPIES_RE.search(line):
            out["graph"]["sched_copies"] = int(m["n"])
        if m := PRINT_INFO_RE.search(line):
            out["print_info"][m["key"].strip()] = m["value"]
            used = True
        if not used and re.search(r"size (=|is)", line):
            out["size_lines"].append(line)
        if not used and any(p in line for p in NOTE_PATTERNS) and "llama_graph_n_input_tensors" not in line:
            out["notes"].append(line)
    return out


def relevant_lines(text: str) -> list[str]:
    """The raw lines that carry a size, the cache layout, the graph or a warning.

    Timing lines ("reserve took ... ms") are left out so a re-run gives the
    same file; so are the per-model print_info/load lines and the
    ``llama_context: n_... =`` block (parsed into ``figures.context``).
    """
    keep = (BUFFER_RE, COMPUTE_EXACT_RE, KV_SUMMARY_RE, KV_SELF_RE, RS_SUMMARY_RE, ISWA_RE, GRAPH_RE, GRAPH_OLD_RE)
    out = []
    for ln in text.splitlines():
        ln = ln.rstrip()
        if ln.startswith(("print_info:", "load:", "llama_model_loader:")) or "llama_graph_n_input_tensors" in ln:
            continue
        if any(r.search(ln) for r in keep) or (
            any(p in ln for p in NOTE_PATTERNS) and "n_ctx_seq (" not in ln and "resolve_fused_ops: fused" not in ln
        ):
            out.append(ln)
    return out


# ---------------------------------------------------------------------------
# the measurement matrix
# ---------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "n_ctx": 512,
    "n_batch": 512,
    "n_ubatch": 512,
    "n_seq_max": 1,
    "kv_unified": False,
    "type_k": "f16",
    "type_v": "f16",
    "flash_attn": "off",
    "use_mmap": True,
    "swa_full": None,
    "n_gpu_layers": 0,
    "api": "lowlevel",
    # 0 = n_batch (llama_context_default_params); 1 isolates the non-logits part
    # of the compute buffer, since the reserve graph has min(n_ubatch, n_outputs_max) outputs
    "n_outputs_max": 0,
    "use_extra_bufts": True,  # False: no CPU_REPACK buffer
    "embeddings": False,
}

# cache types tried with flash attention on / off (a quantised V needs FA:
# llama_init_from_model refuses "quantized V cache requires flash_attn to be
# enabled" otherwise, recorded once per model as an *_expect_error case)
CACHE_FA_ON = [("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q8_0", "f16")]
CACHE_FA_OFF = [("f16", "f16"), ("q8_0", "f16"), ("q4_0", "f16")]


def build_cases(model_names: list[str], specs: dict[str, dict]) -> list[dict[str, Any]]:
    """The case list: an n_ctx x FA x cache-type grid plus one-factor probes.

    Every probe changes one or two factors from `BASE`; ids read
    ``<model>/<factors>``: 72-86 cases per attention model, 50 for mamba2 and
    4 for a spec marked ``"matrix": "load"``.
    """
    cases: list[dict[str, Any]] = []

    def add(model: str, tag: str, **kw: Any) -> None:
        cases.append({"id": f"{model}/{tag}", "model": model, "params": {**BASE, **kw}})

    for name in model_names:
        spec = specs[name]
        if spec.get("matrix") == "load":
            add(name, "ctx512_faoff_kf16_vf16")
            add(name, "ctx512_nommap", use_mmap=False)
            add(name, "ctx512_norepack", use_extra_bufts=False)
            add(name, "ctx512_nommap_norepack", use_mmap=False, use_extra_bufts=False)
            continue
        recurrent_only = spec["arch"] == "mamba2"
        mla = spec["arch"] == "deepseek2"  # one cache type for K and V (llama_init_from_model)
        # A. context x flash attention x cache types
        for n_ctx in (512, 1000, 2048, 8192):
            for fa, combos in (("off", CACHE_FA_OFF), ("on", CACHE_FA_ON)):
                if recurrent_only:
                    combos = combos[:1]
                elif mla:
                    combos = [(k, v) for k, v in combos if k == v]
                for tk, tv in combos:
                    add(name, f"ctx{n_ctx}_fa{fa}_k{tk}_v{tv}", n_ctx=n_ctx, flash_attn=fa, type_k=tk, type_v=tv)
        # B. more context sizes (n_ctx < n_ubatch; > n_ctx_train)
        for n_ctx in (256, 4096, 16384):
            for fa in ("off", "on"):
                add(name, f"ctx{n_ctx}_fa{fa}", n_ctx=n_ctx, flash_attn=fa)
        # C. micro-batch sweep (n_batch raised where n_ubatch exceeds it)
        for ub in (32, 128, 256, 1024):
            for fa in ("off", "on"):
                add(name, f"ctx4096_fa{fa}_ub{ub}", n_ctx=4096, flash_attn=fa, n_ubatch=ub, n_batch=max(512, ub))
        for fa in ("off", "on"):
            add(name, f"ctx8192_fa{fa}_ub128", n_ctx=8192, flash_attn=fa, n_ubatch=128)
        # D. one output row in the reserve graph: the compute buffer without the logits
        for n_ctx in (512, 2048, 8192):
            for fa in ("off", "on"):
                add(name, f"ctx{n_ctx}_fa{fa}_nout1", n_ctx=n_ctx, flash_attn=fa, n_outputs_max=1)
        for ub in (128, 1024):
            add(name, f"ctx4096_faoff_ub{ub}_nout1", n_ctx=4096, n_ubatch=ub, n_batch=max(512, ub), n_outputs_max=1)
        # E. logical batch vs micro-batch
        add(name, "ctx2048_b2048_ub512", n_ctx=2048, n_batch=2048, n_ubatch=512)
        add(name, "ctx2048_b256_ub512", n_ctx=2048, n_batch=256, n_ubatch=512)
        # F. parallel sequences: one stream per sequence vs one unified stream
        for n_seq in (2, 4, 8):
            for unified in (False, True):
                u = "unified" if unified else "streams"
                add(name, f"ctx4096_seq{n_seq}_{u}", n_ctx=4096, n_seq_max=n_seq, kv_unified=unified)
        for unified in (False, True):
            u = "unified" if unified else "streams"
            add(name, f"ctx4096_seq4_{u}_faon", n_ctx=4096, n_seq_max=4, kv_unified=unified, flash_attn="on")
        add(name, "ctx1000_seq3_streams", n_ctx=1000, n_seq_max=3)
        # G. loading and API
        add(name, "ctx512_nommap", use_mmap=False)
        add(name, "ctx512_norepack", use_extra_bufts=False)
        add(name, "ctx512_nommap_norepack", use_mmap=False, use_extra_bufts=False)
        add(name, "ctx512_ngl99", n_gpu_layers=99)
        add(name, "ctx2048_faauto", n_ctx=2048, flash_attn="auto")
        add(name, "ctx512_embeddings", embeddings=True)
        add(name, "ctx512_api_Llama", api="Llama")
        # H. sliding window: the SWA cache sized from the window instead of n_ctx
        if spec.get("window"):
            for n_ctx in (512, 2048, 8192):
                for ub in (512, 128):
                    add(name, f"ctx{n_ctx}_swafull0_ub{ub}", n_ctx=n_ctx, swa_full=False, n_ubatch=ub)
                    add(
                        name,
                        f"ctx{n_ctx}_swafull0_ub{ub}_faon",
                        n_ctx=n_ctx,
                        swa_full=False,
                        n_ubatch=ub,
                        flash_attn="on",
                    )
            for unified in (False, True):
                u = "unified" if unified else "streams"
                add(name, f"ctx4096_swafull0_seq4_{u}", n_ctx=4096, swa_full=False, n_seq_max=4, kv_unified=unified)
        if not recurrent_only:
            # I. f32 cache; J. expected failures, recorded as ground truth
            add(name, "ctx512_faoff_kf32_vf32", type_k="f32", type_v="f32")
            add(name, "ctx512_faoff_kq8_0_vq8_0_expect_error", type_k="q8_0", type_v="q8_0")
            if mla:
                add(name, "ctx512_faon_kq8_0_vf16_expect_error", type_k="q8_0", type_v="f16", flash_attn="on")
    return cases


# ---------------------------------------------------------------------------
# child: one load, one context
# ---------------------------------------------------------------------------


def _child(case_json: str) -> int:
    import llama_cpp as L  # only the child needs llama_cpp

    case = json.loads(case_json)
    p = case["params"]
    ggml_type = {
        "f16": L.GGML_TYPE_F16,
        "f32": L.GGML_TYPE_F32,
        "q8_0": L.GGML_TYPE_Q8_0,
        "q4_0": L.GGML_TYPE_Q4_0,
        "q4_1": L.GGML_TYPE_Q4_1,
        "q5_0": L.GGML_TYPE_Q5_0,
        "q5_1": L.GGML_TYPE_Q5_1,
        "iq4_nl": L.GGML_TYPE_IQ4_NL,
    }
    fa = {
        "off": L.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "on": L.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "auto": L.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }[p["flash_attn"]]
    result: dict[str, Any] = {"ok": False}
    if p["api"] == "Llama":
        try:
            llm = L.Llama(
                case["model_path"],
                n_gpu_layers=p["n_gpu_layers"],
                n_ctx=p["n_ctx"],
                n_batch=p["n_batch"],
                n_ubatch=p["n_ubatch"],
                type_k=ggml_type[p["type_k"]],
                type_v=ggml_type[p["type_v"]],
                flash_attn=p["flash_attn"] == "on",
                use_mmap=p["use_mmap"],
                swa_full=p["swa_full"],
                n_threads=1,
                verbose=True,
            )
            c = llm._ctx.ctx
            result.update(
                ok=True,
                n_ctx=L.llama_n_ctx(c),
                n_batch=L.llama_n_batch(c),
                n_ubatch=L.llama_n_ubatch(c),
                n_seq_max=L.llama_n_seq_max(c),
                model_size_bytes=L.llama_model_size(llm._model.model),
                n_params=L.llama_model_n_params(llm._model.model),
            )
            llm.close()
        except Exception as e:
            result["error"] = f"{type(e).__name__}: {e}"
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0

    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = p["n_gpu_layers"]
    mp.load_mode = L.LLAMA_LOAD_MODE_MMAP if p["use_mmap"] else L.LLAMA_LOAD_MODE_NONE
    mp.use_extra_bufts = p["use_extra_bufts"]
    model = L.llama_model_load_from_file(case["model_path"].encode(), mp)
    if not model:
        result["error"] = "llama_model_load_from_file returned NULL"
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0
    result["model_size_bytes"] = L.llama_model_size(model)
    result["n_params"] = L.llama_model_n_params(model)
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = p["n_ctx"], p["n_batch"], p["n_ubatch"]
    cp.n_seq_max, cp.kv_unified = p["n_seq_max"], p["kv_unified"]
    cp.type_k, cp.type_v, cp.flash_attn_type = ggml_type[p["type_k"]], ggml_type[p["type_v"]], fa
    cp.n_threads = cp.n_threads_batch = 1
    cp.n_outputs_max = p["n_outputs_max"]
    cp.embeddings = p["embeddings"]
    if p["swa_full"] is not None:
        cp.swa_full = p["swa_full"]
    result["swa_full_effective"] = bool(cp.swa_full)
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        result["error"] = "llama_init_from_model returned NULL"
    else:
        result.update(
            ok=True,
            n_ctx=L.llama_n_ctx(ctx),
            n_ctx_seq=L.llama_n_ctx_seq(ctx),
            n_batch=L.llama_n_batch(ctx),
            n_ubatch=L.llama_n_ubatch(ctx),
            n_seq_max=L.llama_n_seq_max(ctx),
        )
        L.llama_free(ctx)  # its destructor prints the 4-decimal compute buffer sizes
    L.llama_model_free(model)
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------------
# parent: run the matrix
# ---------------------------------------------------------------------------


def _drop_lines(parsed: dict[str, Any]) -> dict[str, Any]:
    """The parsed figures without the per-entry copy of the raw line."""
    for v in parsed.values():
        if isinstance(v, list):
            for rec in v:
                if isinstance(rec, dict):
                    rec.pop("line", None)
        elif isinstance(v, dict):
            v.pop("line", None)
    return parsed


def dump_json(doc: dict[str, Any]) -> str:
    """JSON with one case per line, so a re-run diffs case by case."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    text = json.dumps(head, indent=1)[:-2]  # drop the closing "\n}"
    cases = ",\n  ".join(json.dumps(c, separators=(",", ":")) for c in doc["cases"])
    return text + ',\n "cases": [\n  ' + cases + "\n ]\n}\n"


def run_case(case: dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
    """Run one case in a subprocess and return it with its parsed figures."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(case)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    log = proc.stderr
    result: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG) :])
    if not result:
        result = {"ok": False, "error": f"child exited with {proc.returncode} and no result"}
    # keep the tail of the log for cases that failed inside llama.cpp
    if not result.get("ok"):
        tail = [ln for ln in log.splitlines() if "llama_graph_n_input_tensors" not in ln][-8:]
        why = [ln for ln in tail if ln.startswith(("llama_init_from_model:", "llama_model_load"))]
        result["error"] = "; ".join(filter(None, [result.get("error", ""), *why]))
        result["log_tail"] = tail
    parsed = _drop_lines(parse_log(log))  # raw lines are kept once, in "lines"
    parsed.pop("print_info", None)  # per model, stored once
    parsed.pop("notes", None)  # the same lines are in "lines"
    parsed["size_lines"] = [ln for ln in parsed["size_lines"] if not ln.startswith("load:")]
    parsed["context"] = {k: v for k, v in parsed["context"].items() if k in CONTEXT_KEYS}
    out = {k: v for k, v in case.items() if k != "model_path"}
    out.update(result=result, figures=parsed, lines=relevant_lines(log), returncode=proc.returncode)
    out["_log"] = log
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(TESTS / "data" / "llamacpp_measured.json"))
    ap.add_argument("--models", nargs="*", help="spec names (default: all)")
    ap.add_argument("--models-dir", help="where to write the GGUFs (default: a temp dir)")
    ap.add_argument(
        "--logs-dir",
        default=None,
        help="write the raw log of each model's base case here (default: <out dir>/llamacpp_logs)",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child)

    sys.path.insert(0, str(TESTS))  # run as a script: find the support package
    from support import llamacpp_models as gen

    names = args.models or list(gen.SPECS)
    t_start = time.monotonic()
    tmp = None
    if args.models_dir:
        models_dir = Path(args.models_dir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="llamacpp_models_")
        models_dir = Path(tmp.name)
    paths = gen.write_all(models_dir, names)
    models: dict[str, Any] = {}
    for n in names:
        models[n] = {
            "spec": gen.SPECS[n],
            "file_bytes": paths[n].stat().st_size,
            "sha256": gen.sha256_of(paths[n]),
            "tensor_bytes": sum(gen.tensor_nbytes(s, ty) for _, s, ty in gen.tensor_plan(gen.SPECS[n])),
            # "name type [ne0,ne1,...]" in file order (ggml shape order)
            "tensors": [f"{t} {ty} [{','.join(map(str, s))}]" for t, s, ty in gen.tensor_plan(gen.SPECS[n])],
        }
    cases = build_cases(names, gen.SPECS)
    for c in cases:
        c["model_path"] = str(paths[c["model"]])

    results: list[dict[str, Any]] = [None] * len(cases)  # type: ignore[list-item]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = {pool.submit(run_case, c): i for i, c in enumerate(cases)}
        for k, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            i = futs[fut]
            results[i] = fut.result()
            r = results[i]
            status = "ok " if r["result"].get("ok") else "ERR"
            print(f"[{k:3d}/{len(cases)}] {status} {r['id']}", file=sys.stderr)

    # per-model facts printed once (print_info block) come from the base case log
    logs_dir = Path(args.logs_dir) if args.logs_dir else Path(args.out).parent / "llamacpp_logs"
    logs_dir.mkdir(parents=True, exist_ok=True)
    for n in names:
        base = next(r for r in results if r["model"] == n and r["id"].endswith("ctx512_faoff_kf16_vf16"))
        models[n]["print_info"] = parse_log(base["_log"])["print_info"]
        models[n]["model_size_bytes"] = base["result"].get("model_size_bytes")
        models[n]["n_params"] = base["result"].get("n_params")
        (logs_dir / f"{n}__ctx512_faoff_kf16_vf16.log").write_text(base["_log"])
    for r in results:
        del r["_log"]

    import llama_cpp

    version = llama_cpp.__version__
    doc = {
        "schema": 1,
        "generated_by": "python tests/support/llamacpp_measure.py",
        "llama_cpp_python": version,
        "llama_cpp_commit": KNOWN_COMMITS.get(version, "unknown"),
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "backend": "CPU only (n_gpu_layers=0)",
        "units": "figures are MiB as printed by llama.cpp (mib_str) and as float (mib); 1 MiB = 1048576 bytes",
        "total_wall_s": round(time.monotonic() - t_start, 1),
        "models": models,
        "cases": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(dump_json(doc))
    n_ok = sum(1 for r in results if r["result"].get("ok"))
    print(f"wrote {args.out}: {len(results)} cases ({n_ok} ok) in {doc['total_wall_s']} s", file=sys.stderr)
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
