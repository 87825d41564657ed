"""Deterministic generator of small GGUF files that llama.cpp will load.

Each model is a plain dict (a *spec*) listing the architecture, the shape
numbers and the storage type of every tensor role.  `tensor_plan(spec)` turns
a spec into the exact list of tensors (name, ggml shape, type) that
`write_gguf(spec, path)` writes, so explorer's own code can compute from the
same spec and compare against llama.cpp's printed buffer sizes
(`tests/data/llamacpp_measured.json`, produced by `tests/support/llamacpp_measure.py`).

Facts used here (llama.cpp as vendored by llama-cpp-python 0.3.36, commit
0c1e57098; see docs/notes/llamacpp_memory.md):

- Shapes are in ggml order: ``ne[0]`` is the row length (the input dimension
  of a matmul weight), so ``attn_q`` is ``(n_embd, n_head * head_dim)``.
- Quantised rows must be a whole number of blocks (Q4_K: 256, Q8_0/Q4_0: 32).
- Tensor names and the per-arch tensor lists come from `src/models/<arch>.cpp`
  (``load_arch_tensors``); the per-arch metadata keys from ``load_arch_hparams``
  there and from ``llama_model_base::load_hparams`` in `src/llama-model.cpp`.
- The tokenizer is a minimal SentencePiece ("llama") vocab: <unk>, <s>, </s>,
  the 256 byte tokens <0x00>..<0xFF>, then filler pieces.  llama.cpp's SPM
  loader looks up <0x0A> for the newline token (`src/llama-vocab.cpp`).

Generation is deterministic: no timestamps are written, key/tensor order is
fixed, float data comes from a NumPy generator seeded by the CRC-32 of the
tensor name, and quantised blocks are all zero bytes (a valid block whose
scale is 0).

Run ``python tests/support/llamacpp_models.py OUT_DIR`` to write every model.
"""

from __future__ import annotations

import hashlib
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np

# (block size in elements, bytes per block) -- gguf-py `GGML_QUANT_SIZES`,
# ggml/src/ggml.c `type_traits`.
QUANT_SIZES: dict[str, tuple[int, int]] = {
    "F32": (1, 4),
    "F16": (1, 2),
    "Q8_0": (32, 34),
    "Q4_0": (32, 18),
    "Q4_K": (256, 144),
}

Spec = dict[str, Any]

# SentencePiece token types (llama.h `llama_token_type`)
_TT_NORMAL, _TT_UNKNOWN, _TT_CONTROL, _TT_BYTE = 1, 2, 3, 6

SPECS: dict[str, Spec] = {
    # (a) dense llama with GQA, separate output head, mixed weight types.
    "llama_gqa": {
        "name": "llama_gqa",
        "arch": "llama",
        "n_layer": 4,
        "n_embd": 512,
        "n_head": 8,
        "n_head_kv": 2,
        "head_dim": 64,
        "n_ff": 1536,
        "vocab": 32000,
        "n_ctx_train": 8192,
        "tied_embeddings": False,
        "types": {
            "token_embd": "Q4_K",
            "output": "Q8_0",
            "norm": "F32",
            "attn_q": "Q4_K",
            "attn_k": "Q4_K",
            "attn_v": "F16",
            "attn_output": "Q4_K",
            "ffn_gate": "Q4_0",
            "ffn_up": "Q4_0",
            "ffn_down": "Q4_K",
        },
    },
    # (a2) the same llama, tied output, Q4_0 embeddings: the output copy of
    # token_embd is repacked into CPU_REPACK (a second copy in memory) while
    # token_embd itself (GET_ROWS) stays in the plain CPU buffer.  Only the
    # loading cases are measured for it ("matrix": "load").
    "llama_tied_q4_0": {
        "name": "llama_tied_q4_0",
        "arch": "llama",
        "n_layer": 4,
        "n_embd": 512,
        "n_head": 8,
        "n_head_kv": 2,
        "head_dim": 64,
        "n_ff": 1536,
        "vocab": 32000,
        "n_ctx_train": 8192,
        "tied_embeddings": True,
        "matrix": "load",
        "types": {
            "token_embd": "Q4_0",
            "norm": "F32",
            "attn_q": "Q4_K",
            "attn_k": "Q4_K",
            "attn_v": "F16",
            "attn_output": "Q4_K",
            "ffn_gate": "Q4_0",
            "ffn_up": "Q4_0",
            "ffn_down": "Q4_K",
        },
    },
    # (b) MoE: qwen3moe, head_dim (128) != n_embd / n_head (128 too would hide
    # bugs, so n_embd=512 with 4 heads of 128 and 2 KV heads), tied output.
    "qwen3moe_moe": {
        "name": "qwen3moe_moe",
        "arch": "qwen3moe",
        "n_layer": 4,
        "n_embd": 512,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 128,
        "n_ff": 768,
        "experts": 8,
        "experts_used": 2,
        "n_ff_exp": 256,
        "vocab": 8192,
        "n_ctx_train": 8192,
        "tied_embeddings": True,
        "types": {
            "token_embd": "Q8_0",
            "norm": "F32",
            "ffn_gate_inp": "F32",
            "attn_q": "F16",
            "attn_k": "F16",
            "attn_v": "F16",
            "attn_output": "F16",
            "ffn_gate_exps": "Q4_K",
            "ffn_up_exps": "Q4_K",
            "ffn_down_exps": "Q8_0",
        },
    },
    # (c) sliding window: gemma3, default pattern 6 (layers 0-4 and 6 SWA,
    # 5 and 7 global), window 300 (not a multiple of 256 on purpose).
    "gemma3_swa": {
        "name": "gemma3_swa",
        "arch": "gemma3",
        "n_layer": 8,
        "n_embd": 512,
        "n_head": 4,
        "n_head_kv": 1,
        "head_dim": 256,
        "n_ff": 1536,
        "window": 300,
        "swa_pattern": 6,
        "vocab": 16384,
        "n_ctx_train": 8192,
        "tied_embeddings": True,
        "types": {
            "token_embd": "F16",
            "norm": "F32",
            "attn_q": "Q8_0",
            "attn_k": "Q8_0",
            "attn_v": "Q8_0",
            "attn_output": "Q8_0",
            "ffn_gate": "Q4_K",
            "ffn_up": "Q4_K",
            "ffn_down": "Q4_K",
        },
    },
    # (d) MLA: deepseek2 with the split k_b/v_b tensors and the *_mla keys
    # (current converter layout), 1 dense lead layer, 8 experts + 1 shared.
    "deepseek2_mla": {
        "name": "deepseek2_mla",
        "arch": "deepseek2",
        "n_layer": 3,
        "n_embd": 512,
        "n_head": 8,
        "q_lora_rank": 256,
        "kv_lora_rank": 256,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
        "n_ff": 1024,
        "n_layer_dense_lead": 1,
        "experts": 8,
        "experts_used": 2,
        "experts_shared": 1,
        "n_ff_exp": 256,
        "vocab": 8192,
        "n_ctx_train": 8192,
        "tied_embeddings": False,
        "types": {
            "token_embd": "Q8_0",
            "output": "F16",
            "norm": "F32",
            "ffn_gate_inp": "F32",
            "attn_q_a": "Q8_0",
            "attn_q_b": "Q8_0",
            "attn_kv_a_mqa": "Q8_0",
            "attn_k_b": "F16",
            "attn_v_b": "Q8_0",
            "attn_output": "Q4_K",
            "ffn_gate": "Q4_K",
            "ffn_up": "Q4_K",
            "ffn_down": "Q4_K",
            "ffn_gate_exps": "Q4_K",
            "ffn_up_exps": "Q4_K",
            "ffn_down_exps": "Q8_0",
            "ffn_gate_shexp": "Q8_0",
            "ffn_up_shexp": "Q8_0",
            "ffn_down_shexp": "Q8_0",
        },
    },
    # (e1) pure recurrent: mamba2 (one conv + SSM state per layer per sequence).
    "mamba2_ssm": {
        "name": "mamba2_ssm",
        "arch": "mamba2",
        "n_layer": 4,
        "n_embd": 512,
        "d_inner": 1024,
        "d_state": 64,
        "n_group": 1,
        "dt_rank": 16,
        "d_conv": 4,
        "vocab": 8192,
        "n_ctx_train": 8192,
        "tied_embeddings": True,
        "types": {
            "token_embd": "Q8_0",
            "norm": "F32",
            "ssm_in": "Q8_0",
            "ssm_out": "Q4_K",
            "ssm_conv1d": "F32",
            "ssm_small": "F32",
        },
    },
    # (e2) hybrid: granitehybrid, recurrent where head_count_kv is 0.
    "granitehybrid_hybrid": {
        "name": "granitehybrid_hybrid",
        "arch": "granitehybrid",
        "n_layer": 4,
        "n_embd": 512,
        "n_head": 8,
        "n_head_kv": [0, 2, 0, 2],
        "head_dim": 64,
        "n_ff": 1024,
        "d_inner": 1024,
        "d_state": 64,
        "n_group": 1,
        "dt_rank": 16,
        "d_conv": 4,
        "vocab": 8192,
        "n_ctx_train": 8192,
        "tied_embeddings": True,
        "types": {
            "token_embd": "Q8_0",
            "norm": "F32",
            "attn_q": "Q8_0",
            "attn_k": "Q8_0",
            "attn_v": "Q8_0",
            "attn_output": "Q8_0",
            "ffn_gate": "Q4_K",
            "ffn_up": "Q4_K",
            "ffn_down": "Q4_K",
            "ssm_in": "Q8_0",
            "ssm_out": "Q4_K",
            "ssm_conv1d": "F32",
            "ssm_small": "F32",
        },
    },
}


def _head_kv(spec: Spec, il: int) -> int:
    """KV heads of layer ``il`` (a spec may give one number or one per layer)."""
    n = spec["n_head_kv"]
    return n[il] if isinstance(n, list) else n


def _attn(spec: Spec, il: int, *, post_norms: bool = False, qk_norm: bool = False) -> list:
    e, hd, t = spec["n_embd"], spec["head_dim"], spec["types"]
    kv = _head_kv(spec, il) * hd
    p = f"blk.{il}."
    out = [
        (p + "attn_q.weight", (e, spec["n_head"] * hd), t["attn_q"]),
        (p + "attn_k.weight", (e, kv), t["attn_k"]),
        (p + "attn_v.weight", (e, kv), t["attn_v"]),
        (p + "attn_output.weight", (spec["n_head"] * hd, e), t["attn_output"]),
    ]
    if qk_norm:
        out += [(p + "attn_q_norm.weight", (hd,), t["norm"]), (p + "attn_k_norm.weight", (hd,), t["norm"])]
    if post_norms:
        out += [(p + "post_attention_norm.weight", (e,), t["norm"])]
    return out


def _ffn(spec: Spec, il: int, n_ff: int) -> list:
    e, t, p = spec["n_embd"], spec["types"], f"blk.{il}."
    return [
        (p + "ffn_gate.weight", (e, n_ff), t["ffn_gate"]),
        (p + "ffn_up.weight", (e, n_ff), t["ffn_up"]),
        (p + "ffn_down.weight", (n_ff, e), t["ffn_down"]),
    ]


def _ssm(spec: Spec, il: int) -> list:
    """Mamba-2 mixer tensors (`src/models/mamba2.cpp` load_arch_tensors)."""
    e, t, p = spec["n_embd"], spec["types"], f"blk.{il}."
    d_inner, d_state, n_group = spec["d_inner"], spec["d_state"], spec["n_group"]
    dt_rank, d_conv = spec["dt_rank"], spec["d_conv"]
    conv_dim = d_inner + 2 * n_group * d_state
    return [
        (p + "ssm_in.weight", (e, d_inner + conv_dim + dt_rank), t["ssm_in"]),
        (p + "ssm_conv1d.weight", (d_conv, conv_dim), t["ssm_conv1d"]),
        (p + "ssm_conv1d.bias", (conv_dim,), t["ssm_small"]),
        (p + "ssm_dt.bias", (dt_rank,), t["ssm_small"]),
        (p + "ssm_a", (1, dt_rank), t["ssm_small"]),
        (p + "ssm_d", (1, dt_rank), t["ssm_small"]),
        (p + "ssm_norm.weight", (d_inner // n_group, n_group), t["norm"]),
        (p + "ssm_out.weight", (d_inner, e), t["ssm_out"]),
    ]


def tensor_plan(spec: Spec) -> list[tuple[str, tuple[int, ...], str]]:
    """Every tensor the spec's GGUF holds, in file order: (name, ggml shape, type)."""
    arch, e, t, V = spec["arch"], spec["n_embd"], spec["types"], spec["vocab"]
    out: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (e, V), t["token_embd"])]
    for il in range(spec["n_layer"]):
        p = f"blk.{il}."
        out.append((p + "attn_norm.weight", (e,), t["norm"]))
        if arch == "llama":
            out += _attn(spec, il) + [(p + "ffn_norm.weight", (e,), t["norm"])] + _ffn(spec, il, spec["n_ff"])
        elif arch == "qwen3moe":
            ne, nf = spec["experts"], spec["n_ff_exp"]
            out += _attn(spec, il, qk_norm=True) + [
                (p + "ffn_norm.weight", (e,), t["norm"]),
                (p + "ffn_gate_inp.weight", (e, ne), t["ffn_gate_inp"]),
                (p + "ffn_gate_exps.weight", (e, nf, ne), t["ffn_gate_exps"]),
                (p + "ffn_up_exps.weight", (e, nf, ne), t["ffn_up_exps"]),
                (p + "ffn_down_exps.weight", (nf, e, ne), t["ffn_down_exps"]),
            ]
        elif arch == "gemma3":
            out += _attn(spec, il, post_norms=True, qk_norm=True)
            out += [(p + "ffn_norm.weight", (e,), t["norm"])] + _ffn(spec, il, spec["n_ff"])
            out += [(p + "post_ffw_norm.weight", (e,), t["norm"])]
        elif arch == "deepseek2":
            out += _deepseek2_layer(spec, il)
        elif arch == "mamba2":
            out += _ssm(spec, il)
        elif arch == "granitehybrid":
            out += _ssm(spec, il) if _head_kv(spec, il) == 0 else _attn(spec, il)
            out += [(p + "ffn_norm.weight", (e,), t["norm"])] + _ffn(spec, il, spec["n_ff"])
        else:
            raise ValueError(f"unknown arch {arch!r} in spec {spec['name']!r}")
    out.append(("output_norm.weight", (e,), t["norm"]))
    if not spec["tied_embeddings"]:
        out.append(("output.weight", (e, V), t["output"]))
    return out


def _deepseek2_layer(spec: Spec, il: int) -> list:
    """One deepseek2 block, MLA layout (`src/models/deepseek2.cpp`)."""
    e, t, p, H = spec["n_embd"], spec["types"], f"blk.{il}.", spec["n_head"]
    ql, kvl = spec["q_lora_rank"], spec["kv_lora_rank"]
    rope, nope, vd = spec["qk_rope_head_dim"], spec["qk_nope_head_dim"], spec["v_head_dim"]
    out = [
        (p + "attn_q_a_norm.weight", (ql,), t["norm"]),
        (p + "attn_kv_a_norm.weight", (kvl,), t["norm"]),
        (p + "attn_q_a.weight", (e, ql), t["attn_q_a"]),
        (p + "attn_q_b.weight", (ql, H * (nope + rope)), t["attn_q_b"]),
        (p + "attn_kv_a_mqa.weight", (e, kvl + rope), t["attn_kv_a_mqa"]),
        (p + "attn_k_b.weight", (nope, kvl, H), t["attn_k_b"]),
        (p + "attn_v_b.weight", (kvl, vd, H), t["attn_v_b"]),
        (p + "attn_output.weight", (H * vd, e), t["attn_output"]),
        (p + "ffn_norm.weight", (e,), t["norm"]),
    ]
    if il < spec["n_layer_dense_lead"]:
        return out + _ffn(spec, il, spec["n_ff"])
    ne, nf, ns = spec["experts"], spec["n_ff_exp"], spec["experts_shared"]
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), t["ffn_gate_inp"]),
        (p + "exp_probs_b.bias", (ne,), t["norm"]),
        (p + "ffn_gate_exps.weight", (e, nf, ne), t["ffn_gate_exps"]),
        (p + "ffn_up_exps.weight", (e, nf, ne), t["ffn_up_exps"]),
        (p + "ffn_down_exps.weight", (nf, e, ne), t["ffn_down_exps"]),
        (p + "ffn_gate_shexp.weight", (e, nf * ns), t["ffn_gate_shexp"]),
        (p + "ffn_up_shexp.weight", (e, nf * ns), t["ffn_up_shexp"]),
        (p + "ffn_down_shexp.weight", (nf * ns, e), t["ffn_down_shexp"]),
    ]


def tensor_nbytes(shape: tuple[int, ...], type_name: str) -> int:
    """Bytes of one tensor: rows * (row length / block size) * bytes per block."""
    block, type_size = QUANT_SIZES[type_name]
    if shape[0] % block:
        raise ValueError(f"row length {shape[0]} is not a multiple of the {type_name} block size ({block})")
    n_rows = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    return n_rows * (shape[0] // block) * type_size


def _metadata(spec: Spec) -> list[tuple[str, Any, str]]:
    """(key, value, gguf type) triples in write order, after general.architecture."""
    a = spec["arch"]
    kv: list[tuple[str, Any, str]] = [
        ("general.name", spec["name"], "str"),
        (f"{a}.context_length", spec["n_ctx_train"], "u32"),
        (f"{a}.embedding_length", spec["n_embd"], "u32"),
        (f"{a}.block_count", spec["n_layer"], "u32"),
        (f"{a}.attention.layer_norm_rms_epsilon", 1e-6, "f32"),
        (f"{a}.vocab_size", spec["vocab"], "u32"),
    ]
    if "n_ff" in spec:
        kv.append((f"{a}.feed_forward_length", spec["n_ff"], "u32"))
    if a in ("llama", "qwen3moe", "gemma3", "granitehybrid"):
        kv += [
            (f"{a}.attention.head_count", spec["n_head"], "u32"),
            (
                f"{a}.attention.head_count_kv",
                spec["n_head_kv"],
                "arr_u32" if isinstance(spec["n_head_kv"], list) else "u32",
            ),
            (f"{a}.attention.key_length", spec["head_dim"], "u32"),
            (f"{a}.attention.value_length", spec["head_dim"], "u32"),
            (f"{a}.rope.dimension_count", spec["head_dim"], "u32"),
            (f"{a}.rope.freq_base", 10000.0, "f32"),
        ]
    if "experts" in spec:
        kv += [
            (f"{a}.expert_count", spec["experts"], "u32"),
            (f"{a}.expert_used_count", spec["experts_used"], "u32"),
            (f"{a}.expert_feed_forward_length", spec["n_ff_exp"], "u32"),
        ]
    if a == "gemma3":
        kv += [
            (f"{a}.attention.sliding_window", spec["window"], "u32"),
            (f"{a}.attention.sliding_window_pattern", spec["swa_pattern"], "u32"),
        ]
    if a == "deepseek2":
        kvl, rope = spec["kv_lora_rank"], spec["qk_rope_head_dim"]
        kv += [
            (f"{a}.attention.head_count", spec["n_head"], "u32"),
            (f"{a}.attention.head_count_kv", 1, "u32"),
            # MLA layout: the cache row is the compressed latent + the rope part
            (f"{a}.attention.key_length", kvl + rope, "u32"),
            (f"{a}.attention.value_length", kvl, "u32"),
            (f"{a}.attention.key_length_mla", spec["qk_nope_head_dim"] + rope, "u32"),
            (f"{a}.attention.value_length_mla", spec["v_head_dim"], "u32"),
            (f"{a}.attention.q_lora_rank", spec["q_lora_rank"], "u32"),
            (f"{a}.attention.kv_lora_rank", kvl, "u32"),
            (f"{a}.rope.dimension_count", rope, "u32"),
            (f"{a}.leading_dense_block_count", spec["n_layer_dense_lead"], "u32"),
            (f"{a}.expert_shared_count", spec["experts_shared"], "u32"),
            (f"{a}.expert_weights_scale", 1.0, "f32"),
            (f"{a}.expert_weights_norm", True, "bool"),
            (f"{a}.expert_gating_func", 2, "u32"),  # 2 = sigmoid
        ]
    if a in ("mamba2", "granitehybrid"):
        kv += [
            (f"{a}.ssm.conv_kernel", spec["d_conv"], "u32"),
            (f"{a}.ssm.inner_size", spec["d_inner"], "u32"),
            (f"{a}.ssm.state_size", spec["d_state"], "u32"),
            (f"{a}.ssm.time_step_rank", spec["dt_rank"], "u32"),
            (f"{a}.ssm.group_count", spec["n_group"], "u32"),
        ]
    return kv


def _vocab(n: int) -> tuple[list[str], list[float], list[int]]:
    """A minimal SPM vocab of exactly n tokens."""
    if n < 259 + 1:
        raise ValueError(f"vocab {n} is too small: the SPM vocab needs 259 fixed tokens plus at least one piece")
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [_TT_UNKNOWN, _TT_CONTROL, _TT_CONTROL] + [_TT_BYTE] * 256
    tokens += [f"\u2581t{i}" for i in range(n - len(tokens))]
    types += [_TT_NORMAL] * (n - len(types))
    scores = [0.0] * 259 + [-float(i) for i in range(n - 259)]
    return tokens, scores, types


def _data(name: str, shape: tuple[int, ...], type_name: str) -> np.ndarray:
    """Deterministic tensor contents as the numpy array GGUFWriter expects."""
    np_shape = tuple(reversed(shape))
    if type_name in ("F32", "F16"):
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        arr = rng.standard_normal(np_shape, dtype=np.float32) * np.float32(0.02)
        if name.endswith("norm.weight"):
            arr = np.ones(np_shape, dtype=np.float32)
        return arr.astype(np.float16 if type_name == "F16" else np.float32)
    block, type_size = QUANT_SIZES[type_name]
    return np.zeros(np_shape[:-1] + (shape[0] // block * type_size,), dtype=np.uint8)


def write_gguf(spec: Spec, path: str | Path) -> Path:
    """Write the spec's GGUF to ``path`` and return the path."""
    import gguf  # lazy: only generation needs gguf-py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), spec["arch"])
    adders = {"u32": w.add_uint32, "f32": w.add_float32, "str": w.add_string, "bool": w.add_bool}
    for key, value, kind in _metadata(spec):
        if kind == "arr_u32":
            w.add_array(key, value)  # ints -> INT32 array; llama.cpp's get_arr accepts it
        else:
            adders[kind](key, value)
    tokens, scores, types = _vocab(spec["vocab"])
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    for name, shape, type_name in tensor_plan(spec):
        tensor_nbytes(shape, type_name)  # validates the block size
        raw = None if type_name in ("F32", "F16") else gguf.GGMLQuantizationType[type_name]
        w.add_tensor(name, _data(name, shape, type_name), raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def sha256_of(path: str | Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_all(out_dir: str | Path, names: list[str] | None = None) -> dict[str, Path]:
    """Write the named (default: all) specs as ``<out_dir>/<name>.gguf``."""
    out_dir = Path(out_dir)
    return {n: write_gguf(SPECS[n], out_dir / f"{n}.gguf") for n in (names or list(SPECS))}


if __name__ == "__main__":
    for n, p in write_all(sys.argv[1] if len(sys.argv) > 1 else "gguf_out").items():
        print(f"{n:22s} {p.stat().st_size:>10d} B  {sha256_of(p)}  {p}")
