"""Which host buffer llama.cpp's CPU backend gives each weight: ``CPU``, ``CPU_REPACK`` or ``AMX``.

llama.cpp 0c1e57098 (llama-cpp-python 0.3.36), for weights that stay on the
host with extra buffer types in use (``use_extra_bufts``, no GPU host
buffer ahead of them). ``llama-model-loader.cpp:select_weight_buft`` takes
the first buffer type of ``llama-model.cpp:make_cpu_buft_list`` whose device
accepts the tensor's op (``weight_buft_supported`` probes the op the tensor
table of ``llama-arch.cpp`` gives it). The CPU's extra types come in the
order of ``ggml-cpu.cpp:ggml_backend_cpu_get_extra_buffer_types``: **AMX
first** (compiled only with AMX-INT8 and AVX512-VNNI: a native build on
Sapphire Rapids or later), then ``CPU_REPACK``; plain ``CPU`` last.

- **AMX** (``ggml-cpu/amx/amx.cpp:extra_buffer_type::supports_op``): op
  MUL_MAT only (never GET_ROWS, so never ``token_embd``; never MUL_MAT_ID,
  so never MoE experts), the weight's rows ``ne1`` a multiple of 32, its
  type Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS (packed) or F16
  (unpacked), ``ne0`` a multiple of the type's alignment. Any number of
  dimensions. Size (``amx/mmq.cpp:ggml_backend_amx_get_alloc_size``):
  packed types take ``ne1 × ne0/block × (block bytes + extra)`` with extra
  4 for Q8_0, Q4_K and Q5_K, 2 for IQ4_XS, else 0, counting ``ne0 × ne1``
  only (a 3-D weight gets one slice); F16 its ``ggml_nbytes``.
- **CPU_REPACK** (``ggml-cpu/repack.cpp:ggml_repack_get_optimal_repack_type``
  and ``supports_op``): MUL_MAT of a 2-D or MUL_MAT_ID of a 3-D weight with
  ``ne1 % 8 == 0`` of Q4_0, Q4_K, IQ4_NL or MXFP4 on x86 with AVX2, plus
  Q2_K when built with AVX-512 (``cpu=avx512`` and ``cpu=amx`` hosts:
  native builds). Size unchanged (``ggml_nbytes``).
- **CPU**: the rest; with mmap they are mapped (``CPU_Mapped`` covers the
  file range from the first to the last of them,
  ``llama-model-loader.cpp:get_mapping_range``), without it read into ``CPU``.

A tied output (no ``output.weight``) is ``token_embd`` created again as a
MUL_MAT weight: in AMX or CPU_REPACK it is a second copy, in CPU the same
tensor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from explorer.errors import LlamaCppAbortError
from explorer.gguf.constants import GGML_QUANT_SIZES
from explorer.gguf.header import TensorInfo

#: the host CPUs explorer models a native llama.cpp build for (explorer.hardware.host_cpu.FEATURE_LEVELS)
CPU_BUILDS = ("avx2", "avx512", "amx")
#: ggml types CPU_REPACK takes on x86 with AVX2 (Q5_K, Q6_K, Q8_0 are repacked on ARM only)
REPACK_TYPES = frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"})
#: ... and with AVX-512 compiled in (repack.cpp: Q2_K needs ``ggml_cpu_has_avx512()``)
REPACK_TYPES_AVX512 = REPACK_TYPES | {"Q2_K"}
#: the weight rows CPU_REPACK needs a multiple of (its 8x8 layouts)
REPACK_ROWS = 8
#: AMX's packed types and the bytes the packed layout adds per block (mmq.cpp get_row_size)
AMX_EXTRA_BYTES = {"Q4_0": 0, "Q4_1": 0, "Q8_0": 4, "Q4_K": 4, "Q5_K": 4, "Q6_K": 0, "IQ4_XS": 2}
#: the ne0 multiple AMX's supports_op asks per type (F16 is taken unpacked)
AMX_ROW_ALIGN = {"Q4_0": 32, "Q4_1": 32, "Q8_0": 32, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256, "IQ4_XS": 256, "F16": 16}
#: the weight rows AMX needs a multiple of (TILE_N * 2)
AMX_ROWS = 32
#: weights read by GET_ROWS (llama-arch.cpp): never in an extra buffer
GET_ROWS_WEIGHTS = frozenset({"token_embd", "pos_embd", "token_types", "per_layer_token_embd"})
#: weights used by ops other than a matmul
OTHER_OP_WEIGHTS = frozenset({"ssm_conv1d", "ssm_a", "ssm_d", "rope_freqs", "attn_sinks"})
#: MLA's absorbed matrices: when AMX holds them llama.cpp cannot schedule their matmul (see refuse_amx_abort)
AMX_MLA_MATRICES = ("attn_k_b", "attn_v_b")
#: the assert llama.cpp stops on then (ggml/src/ggml-backend.cpp, ggml_backend_sched_split_graph)
SCHED_ASSERT = "GGML_ASSERT(*cur_backend_id != -1) failed"


def weight_op(name: str, n_dims: int) -> str:
    """The op llama.cpp probes a weight with: ``GET_ROWS``, ``MUL_MAT``, ``MUL_MAT_ID`` or ``OTHER``."""
    if not name.endswith(".weight"):
        return "OTHER"  # biases (ADD), scales
    leaf = name[: -len(".weight")].rsplit(".", 1)[-1]
    if leaf in GET_ROWS_WEIGHTS:
        return "GET_ROWS"
    if leaf.endswith("_exps"):
        return "MUL_MAT_ID"
    if n_dims < 2 or leaf.endswith("norm") or leaf in OTHER_OP_WEIGHTS:
        return "OTHER"
    return "MUL_MAT"


def amx_takes(t: TensorInfo, op: str) -> bool:
    """Whether the AMX buffer type accepts the weight (amx.cpp supports_op on the loader's probe)."""
    align = AMX_ROW_ALIGN.get(t.type_name)
    return op == "MUL_MAT" and align is not None and t.shape[1] % AMX_ROWS == 0 and t.shape[0] % align == 0


def repack_takes(t: TensorInfo, op: str, cpu: str) -> bool:
    """Whether CPU_REPACK accepts the weight in a build for ``cpu`` (repack.cpp supports_op)."""
    types = REPACK_TYPES if cpu == "avx2" else REPACK_TYPES_AVX512
    if t.type_name not in types or len(t.shape) < 2 or t.shape[1] % REPACK_ROWS:
        return False
    return (op == "MUL_MAT" and len(t.shape) == 2) or (op == "MUL_MAT_ID" and len(t.shape) == 3)


def host_buffer(t: TensorInfo, cpu: str, op: str | None = None) -> str:
    """The buffer a host weight lands in with extra buffer types on: ``AMX``, ``CPU_REPACK`` or ``CPU``."""
    op = op or weight_op(t.name, len(t.shape))
    if cpu == "amx" and amx_takes(t, op):
        return "AMX"
    if repack_takes(t, op, cpu):
        return "CPU_REPACK"
    return "CPU"


def amx_alloc_bytes(t: TensorInfo) -> int:
    """Bytes the AMX buffer allocates for the weight (mmq.cpp ggml_backend_amx_get_alloc_size).

    Packed types: ``ne1 × ne0/block × (block bytes + extra)``, ``ne2``/``ne3``
    ignored; F16: its ``ggml_nbytes``. Q8_0 [512, 8192]: 8192 × 16 × 38 =
    4,980,736 bytes (nbytes 4,456,448).
    """
    extra = AMX_EXTRA_BYTES.get(t.type_name)
    if extra is None:
        return t.n_bytes
    block, block_bytes = GGML_QUANT_SIZES[t.ggml_type]
    return t.shape[1] * (t.shape[0] // block) * (block_bytes + extra)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostWeights:
    """Where a group of host weights lands with one build.

    Attributes:
        cpu_bytes: left in the default CPU buffer (mapped with mmap, read into ``CPU`` without), bytes.
        repack_bytes: copied into ``CPU_REPACK``, bytes.
        amx_bytes: copied into ``AMX`` (its allocation sizes), bytes.
        span: the file range (start, end) of the tensors left in CPU; (0, 0) when none is.
        amx_mla: MLA's absorbed matrices (``attn_k_b``, ``attn_v_b``) held in AMX.
    """

    cpu_bytes: int = 0
    repack_bytes: int = 0
    amx_bytes: int = 0
    span: tuple[int, int] = (0, 0)
    amx_mla: tuple[str, ...] = ()

    @property
    def span_bytes(self) -> int:
        """The size of the file range llama.cpp maps for the CPU tensors (``CPU_Mapped`` with mmap), bytes."""
        return self.span[1] - self.span[0]


def merged(parts: Iterable[HostWeights]) -> HostWeights:
    """Several groups together: bytes summed, spans joined (the first start to the last end)."""
    parts = list(parts)
    spans = [p.span for p in parts if p.span[1] > p.span[0]]
    return HostWeights(
        cpu_bytes=sum(p.cpu_bytes for p in parts),
        repack_bytes=sum(p.repack_bytes for p in parts),
        amx_bytes=sum(p.amx_bytes for p in parts),
        span=(min(s for s, _ in spans), max(e for _, e in spans)) if spans else (0, 0),
        amx_mla=tuple(sorted({n for p in parts for n in p.amx_mla})),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPlacement:
    """A group of weights on the host in every build llama.cpp may be.

    Attributes:
        plain: without extra buffer types (``--no-repack``, or behind a GPU's host buffer): all in CPU.
        avx2: a build for x86-64 with AVX2 (the reference build): CPU_REPACK, no AMX.
        avx512: a native AVX-512 build: CPU_REPACK with Q2_K too.
        amx: a native build on an AMX CPU: AMX first, CPU_REPACK for what AMX refuses.
    """

    plain: HostWeights
    avx2: HostWeights
    avx512: HostWeights
    amx: HostWeights

    def on(self, cpu: str | None) -> HostWeights:
        """The group in a build for ``cpu`` (one of :data:`CPU_BUILDS`); None: without extra buffer types."""
        return self.plain if cpu is None else getattr(self, cpu)


def _group(tensors: list[TensorInfo], cpu: str | None, *, copy: bool) -> HostWeights:
    cpu_t, repack, amx, mla = [], 0, 0, []
    for t in tensors:
        where = "CPU" if cpu is None else host_buffer(t, cpu, "MUL_MAT" if copy else None)
        if where == "AMX":
            amx += amx_alloc_bytes(t)
            leaf = t.name.removesuffix(".weight").rsplit(".", 1)[-1]
            if leaf in AMX_MLA_MATRICES:
                mla.append(leaf)
        elif where == "CPU_REPACK":
            repack += t.n_bytes
        elif not copy:  # a tied copy left in CPU is the same tensor as token_embd
            cpu_t.append(t)
    return HostWeights(
        cpu_bytes=sum(t.n_bytes for t in cpu_t),
        repack_bytes=repack,
        amx_bytes=amx,
        span=(min(t.offset for t in cpu_t), max(t.offset + t.n_bytes for t in cpu_t)) if cpu_t else (0, 0),
        amx_mla=tuple(sorted(set(mla))),
    )


def place(tensors: Iterable[TensorInfo], *, tied_copy: bool = False) -> HostPlacement:
    """Where ``tensors`` land on the host in each build.

    ``tied_copy``: they are a tied output's copy of ``token_embd`` (placed as a
    MUL_MAT weight; nothing extra when it stays in CPU).
    """
    tensors = list(tensors)
    return HostPlacement(
        plain=_group(tensors, None, copy=tied_copy),
        avx2=_group(tensors, "avx2", copy=tied_copy),
        avx512=_group(tensors, "avx512", copy=tied_copy),
        amx=_group(tensors, "amx", copy=tied_copy),
    )


#: a group with no tensors (an untied model's tied copy)
NOWHERE = place([])


def refuse_amx_abort(weights: HostWeights, *, flash_attn: bool) -> None:
    """Refuse a launch llama.cpp aborts on: an MLA matmul whose weight AMX holds but cannot run.

    AMX's ``supports_op`` takes a MUL_MAT only when both operands are
    contiguous. MLA multiplies ``attn_k_b`` by the query after a
    ``ggml_permute`` (src/models/deepseek2.cpp), and with flash attention
    ``attn_v_b`` by the permuted attention output (src/llama-graph.cpp
    ``build_attn_mha``). Once AMX holds the weight no backend supports the
    node, and ``sched_reserve`` stops on ggml-backend.cpp:1294
    ``GGML_ASSERT(*cur_backend_id != -1)`` (the process aborts, SIGABRT).
    Without flash attention ``attn_v_b`` meets a contiguous operand and runs.

    Raises:
        LlamaCppAbortError: ``attn_k_b``, or ``attn_v_b`` with flash attention, is held in AMX.
    """
    held = [n for n in weights.amx_mla if n == "attn_k_b" or flash_attn]
    if not held:
        return
    raise LlamaCppAbortError(
        f"llama.cpp aborts at startup on this AMX CPU: MLA's {' and '.join(held)} would be held in its AMX buffer, "
        f"which cannot run {'their' if len(held) > 1 else 'its'} matmul with a permuted operand, so sched_reserve "
        f"stops on {SCHED_ASSERT} in ggml-backend.cpp",
        hint="launch with --no-repack (-nr: no AMX or CPU_REPACK buffers), use a llama.cpp build without AMX "
        "(-DGGML_NATIVE=OFF, AMX off), or a GGUF whose attn_k_b/attn_v_b are BF16 or F32"
        + ("" if "attn_k_b" in held else ", or turn flash attention off (-fa off)"),
    )
