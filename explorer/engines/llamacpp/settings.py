"""llama.cpp's knobs, the devices it runs on, and the context sizes it derives from them.

:func:`resolve_context` repeats ``llama_context::llama_context`` and
``llama_init_from_model`` (src/llama-context.cpp, commit 0c1e57098):

- ``n_ctx = PAD(n_ctx or n_ctx_train, 256)``;
- unified KV: one stream of ``n_ctx`` cells; otherwise one stream per
  sequence of ``n_ctx_seq = PAD(n_ctx / n_seq, 256)`` cells and
  ``n_ctx = n_ctx_seq × n_seq`` (1000 tokens for 3 sequences: 512 cells
  each, 1536 in all);
- ``n_batch = min(n_ctx, n_batch)``, ``n_ubatch = min(n_batch, n_ubatch)``;
  the reserve graph has ``min(n_ctx, n_ubatch)`` tokens and
  ``min(tokens, n_outputs_max or n_batch)`` outputs;
- flash attention ``auto`` resolves to on (every backend here runs it);
  a quantised V cache turns ``auto`` on and is refused with it off;
  MLA refuses different K and V types.

Defaults are llama-server's (``common_params``): n_batch 2048, n_ubatch 512,
``swa_full`` false, flash attention auto. llama-cpp-python's ``Llama`` uses
``llama_context_default_params``: ``swa_full`` true and n_batch 512.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from explorer.errors import LlamaCppConfigError, UnknownPrecisionError
from explorer.model.dtypes import ElementType, element_type
from explorer.units import round_up

FlashAttn = Literal["on", "off", "auto"]
DeviceKind = Literal["gpu", "rpc", "cpu", "metal"]
SplitMode = Literal["layer", "none"]

#: llama.cpp pads n_ctx (and each stream's cells) to this many tokens
CTX_PAD = 256
#: the cache types llama.cpp accepts for --cache-type-k/-v (common/arg.cpp kv_cache_types)
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    """A device llama.cpp offloads to.

    Attributes:
        name: a label (``"RTX 4090 #0"``).
        kind: ``gpu`` (CUDA/ROCm/Vulkan, with a pinned host buffer type), ``rpc``,
            ``metal`` (unified memory: its bytes come out of the host's RAM) or ``cpu``
            (not an offload target).
        memory_bytes: memory llama.cpp may use on it, bytes (its free memory).
    """

    name: str
    kind: DeviceKind = "gpu"
    memory_bytes: int

    @property
    def unified(self) -> bool:
        """Whether the device shares the host's memory (Apple silicon)."""
        return self.kind == "metal"


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaCppSettings:
    """A llama.cpp launch, as its memory depends on it.

    Attributes:
        n_ctx: requested context, tokens (0: the model's trained context).
        n_batch: logical batch, tokens.
        n_ubatch: physical micro-batch, tokens.
        n_seq: parallel sequences (``--parallel``).
        kv_unified: one KV stream shared by all sequences (``--kv-unified``).
        type_k: K cache type (``f16``, ``q8_0``, ``q4_0``…).
        type_v: V cache type.
        flash_attn: ``on``, ``off`` or ``auto``.
        mmap: map the file instead of reading it (``--no-mmap`` turns it off).
        swa_full: full-size sliding-window caches (llama-server: false; llama-cpp-python: true).
        n_gpu_layers: ``-ngl``; None (or negative) offloads everything (n_layer + 1, the output included).
        tensor_split: per-device fractions (``--tensor-split``); empty: by device memory.
        main_gpu: the device for ``split_mode == "none"``.
        split_mode: ``layer`` (layers spread over devices) or ``none`` (one device).
        no_host: ``--no-host``: CPU weights skip the GPU's pinned host buffer (and may be repacked).
        repack: the CPU's extra buffer types, CPU_REPACK and AMX (``use_extra_bufts``; ``--no-repack`` turns it off).
        cpu: the host CPU llama.cpp was built for, which picks those types: ``avx2`` (CPU_REPACK; also the
            fixed-flag reference build), ``avx512`` (CPU_REPACK with Q2_K) or ``amx`` (AMX first, then
            CPU_REPACK); :mod:`explorer.engines.llamacpp.host_buffers`.
        offload_kqv: KV cache on the layer's device (``--no-kv-offload`` turns it off).
        op_offload: large-batch ops on CPU weights run on the first GPU (``--no-op-offload``).
        n_outputs_max: outputs in the reserve graph (0: n_batch).
        n_outputs: rows of the output buffer at start (0: n_seq); n_batch for logits on every token.
        embeddings: embeddings are extracted too (adds n_embd per output row).
        pipeline_copies: ``GGML_SCHED_MAX_COPIES`` (4): copies of inputs kept with pipeline parallelism.
    """

    n_ctx: int = 4096
    n_batch: int = 2048
    n_ubatch: int = 512
    n_seq: int = 1
    kv_unified: bool = False
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: FlashAttn = "auto"
    mmap: bool = True
    swa_full: bool = False
    n_gpu_layers: int | None = None
    tensor_split: tuple[float, ...] = ()
    main_gpu: int = 0
    split_mode: SplitMode = "layer"
    no_host: bool = False
    repack: bool = True
    cpu: str = "avx2"
    offload_kqv: bool = True
    op_offload: bool = True
    n_outputs_max: int = 0
    n_outputs: int = 0
    embeddings: bool = False
    pipeline_copies: int = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSizes:
    """The sizes llama.cpp derives from the settings.

    Attributes:
        n_ctx: context after padding, tokens (all streams).
        n_ctx_seq: cells per stream.
        n_stream: KV streams (1 when unified, else n_seq).
        n_seq: parallel sequences.
        n_batch: logical batch after clamping, tokens.
        n_ubatch: micro-batch after clamping, tokens.
        n_tokens: tokens of the reserve graph.
        n_outputs: outputs of the reserve graph.
        flash_attn: whether flash attention is on.
        type_k: K cache element type.
        type_v: V cache element type.
    """

    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    n_seq: int
    n_batch: int
    n_ubatch: int
    n_tokens: int
    n_outputs: int
    flash_attn: bool
    type_k: ElementType
    type_v: ElementType


def cache_type(name: str) -> ElementType:
    """A KV cache type by llama.cpp's name.

    Raises:
        LlamaCppConfigError: not one of :data:`CACHE_TYPES`.
    """
    key = str(name).strip().lower()
    if key not in CACHE_TYPES:
        raise LlamaCppConfigError(f"unsupported cache type {name!r}", hint=f"use one of {', '.join(CACHE_TYPES)}")
    try:
        return element_type(key)
    except UnknownPrecisionError:
        raise LlamaCppConfigError(f"cache type {name!r} has no size table in explorer.model.dtypes") from None


def resolve_context(settings: LlamaCppSettings, *, n_ctx_train: int, mla: bool = False, head_k: int = 0,
                    head_v: int = 0) -> ContextSizes:  # fmt: skip
    """The context sizes llama.cpp derives, after the checks ``llama_init_from_model`` makes.

    Raises:
        LlamaCppConfigError: a setting llama.cpp refuses, with llama.cpp's own reason.
    """
    s = settings
    if s.n_seq < 1 or s.n_batch < 1 or s.n_ubatch < 1 or s.n_ctx < 0:
        raise LlamaCppConfigError(
            f"n_ctx={s.n_ctx}, n_batch={s.n_batch}, n_ubatch={s.n_ubatch}, n_seq={s.n_seq}: sizes must be positive"
        )
    tk, tv = cache_type(s.type_k), cache_type(s.type_v)
    quant_v = tv.block_elements > 1
    if s.flash_attn == "off" and quant_v:
        raise LlamaCppConfigError(
            "quantized V cache requires flash_attn to be enabled",
            hint="turn flash attention on (-fa on) or use an f16 V cache",
        )
    if mla and tk.name != tv.name:
        raise LlamaCppConfigError(
            f"model does not support different K ({s.type_k}) and V ({s.type_v}) cache types",
            hint="MLA keeps one latent for K and V: give both the same type",
        )
    flash = s.flash_attn != "off"
    if flash:
        for t, width, which in ((tk, head_k, "K"), (tv, head_v, "V")):
            if width and t.block_elements > 1 and width % t.block_elements:
                raise LlamaCppConfigError(
                    f"{which} cache type {t.name} with block size {t.block_elements} does not divide "
                    f"n_embd_head_{which.lower()}={width}"
                )
    n_ctx = round_up(s.n_ctx or n_ctx_train or CTX_PAD, CTX_PAD)
    if s.kv_unified:
        n_ctx_seq, n_stream = n_ctx, 1
    else:
        n_ctx_seq = round_up(max(n_ctx // s.n_seq, 1), CTX_PAD)
        n_ctx, n_stream = n_ctx_seq * s.n_seq, s.n_seq
    n_batch = min(n_ctx, s.n_batch)
    n_ubatch = min(n_batch, s.n_ubatch)
    n_tokens = min(n_ctx, n_ubatch)
    return ContextSizes(
        n_ctx=n_ctx,
        n_ctx_seq=n_ctx_seq,
        n_stream=n_stream,
        n_seq=s.n_seq,
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        n_tokens=n_tokens,
        n_outputs=min(n_tokens, s.n_outputs_max or n_batch),
        flash_attn=flash,
        type_k=tk,
        type_v=tv,
    )
