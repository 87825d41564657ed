"""llama.cpp's compute buffers, estimated the way ``llama_context::sched_reserve`` reserves them.

The scheduler builds a worst-case graph (``n_tokens = min(n_ctx, n_ubatch)``
tokens, the full KV view, ``n_outputs`` logits rows) and ggml-alloc keeps,
per backend, the high-water mark of the tensors alive at once. The peak
sits in one of a few phases, each a sum of the tensors alive there (f32
unless said, T = n_tokens, E = n_embd, Dq = n_head × head width):

- **logits** (the device holding the output layer): ``(n_vocab + E) × n_out × 4``
  plus what stays below it: ``1.5 E × T × 4`` on average (ggml-alloc leaves one
  or two residual-sized blocks under the logits: measured +1 E or +2 E), and
  with MLA and flash attention the last absorbed query ``n_head × (kv_lora + rope)``.
- **attention**: ``(3E + 2Dq) × T × 4``; without flash attention plus the
  scores ``n_kv × T × n_head × 4`` (softmax in place); with it plus the
  flash-attention output ``Dq × T × 4``. MLA: ``(3E + q_lora + H·(nope+rope)
  + H·(kv_lora+rope) + H·kv_lora) × T × 4``, without flash attention also the
  scores and the transposed latent V copy ``n_kv × kv_lora``.
- **ffn**: dense ``(2 n_ff + 7E) × T × 4``; MoE ``(4E + 2 n_ff_exp n_used
  + 2 n_ff_shexp + 2 n_expert) × T × 4``.
- **ssm** (Mamba): ``(3E + in_proj + 2 conv_dim + d_inner) × T × 4`` plus
  the new states ``d_state × d_inner × 4`` per sequence.

Inputs stay alive through every layer phase: per cache a mask
``n_kv × T`` (f16 with flash attention, f32 without), ``k_idxs`` (T i64) and
``v_idxs`` (T i64 with flash attention, ``n_embd_v × T`` i64 for the
transposed V without), tokens and positions; with a quantized cache type the
Walsh-Hadamard rotation matrices (:func:`rotation_bytes`). The coefficients were read
from llama.cpp's own reserve figures (tests/data/llamacpp_measured.json,
docs/notes/llamacpp_memory.md §6, §8); over 411 measured CPU cases this
estimate is within 5 % except where ggml-alloc's placement leaves a hole
(listed in tests/engines/llamacpp/test_memory.py).

Multi-device (layer split, source only): each device reserves its own
layers' phases with its own copy of the inputs; the output device the
logits; with pipeline parallelism every input and boundary activation is
kept ``pipeline_copies`` (4) times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from explorer.engines.llamacpp.kv import CacheAlloc
from explorer.engines.llamacpp.model import LlamaLayer, LlamaModel
from explorer.engines.llamacpp.settings import ContextSizes
from explorer.memo import memo

F32 = 4
#: llama.cpp rotates K (with Q) and V by a Walsh-Hadamard matrix before a quantized cache when the cache's head
#: width is a multiple of this (``llama_kv_cache``: ``attn_rot_k`` / ``attn_rot_v``); V's matrix is this size
ROTATION_GRANULE = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeEstimate:
    """One backend's compute buffer.

    Attributes:
        total_bytes: the reserve, bytes.
        phase: the phase that sets it: ``logits``, ``attention``, ``ffn``, ``ssm``, ``input`` or ``none``.
        inputs_bytes: graph inputs alive through the layers (masks, indices, positions), bytes.
        copies_bytes: extra pipeline-parallel copies of inputs and boundary activations, bytes.
    """

    total_bytes: int
    phase: str
    inputs_bytes: int = 0
    copies_bytes: int = 0


@memo(256, keyed_on="llama.cpp model identity, a cache's layers, K or V")  # the same at every context
def _shared_head(model: LlamaModel, layers: tuple[int, ...], row: str) -> int:
    """The head width every layer of a cache (``layers``) shares (``n_embd_head_k_all``), 0 when they differ or
    have none."""
    widths = {getattr(model.layers[il], row) // model.layers[il].n_head_kv for il in layers}
    return widths.pop() if len(widths) == 1 and model.layers[layers[0]].n_head_kv else 0


def rotation_bytes(model: LlamaModel, ctx: ContextSizes, cache: CacheAlloc) -> int:
    """The Hadamard rotation matrices a KV cache hands its layers as graph inputs (f32), bytes.

    llama.cpp (``llama_kv_cache``, PR 21038, in 0c1e57098) sets ``attn_rot_k`` when the K type is quantized and
    the cache's shared K head width is a multiple of 64, ``attn_rot_v`` likewise for V (``LLAMA_ATTN_ROT_DISABLE``
    turns both off; MLA caches are not rotated: the measured deepseek2 graphs have the same nodes at q8_0 as at
    f16). K's matrix is the largest power-of-two divisor of the head width squared (head 64: 64²; 128: 128²;
    256: 256²), V's 64² whatever its head. ``build_attn`` multiplies Q and K (and V) by them before the cache
    write. Measured: granite at 8192 cells, q8_0/q8_0 against f16/f16 = +32,768 B = 2 × 64² × 4 exactly.
    """
    if model.is_mla:
        return 0
    total = 0
    head_k = _shared_head(model, cache.layers, "k_row")
    if ctx.type_k.block_elements > 1 and head_k and head_k % ROTATION_GRANULE == 0:
        nrot = ROTATION_GRANULE
        while head_k % (nrot * 2) == 0:
            nrot *= 2
        total += nrot * nrot * F32
    head_v = _shared_head(model, cache.layers, "v_row")
    if ctx.type_v.block_elements > 1 and head_v and head_v % ROTATION_GRANULE == 0:
        total += ROTATION_GRANULE * ROTATION_GRANULE * F32
    return total


def _inputs(
    model: LlamaModel, ctx: ContextSizes, caches: Sequence[CacheAlloc], layers: set[int]
) -> tuple[int, dict[int, int]]:
    """Bytes of the inputs a device's layers need, and each layer's cache cells (per stream)."""
    T = ctx.n_tokens
    total = 2 * T * F32  # tokens (or the embeddings copy) and positions
    cells: dict[int, int] = {}
    for c in caches:
        if c.name == "rs":
            continue
        mine = layers & c.layer_set
        if not mine:
            continue
        for il in mine:
            cells[il] = c.cells
        mask = c.cells * (T // c.streams) * c.streams * (2 if ctx.flash_attn else 4)
        v_max = c.v_row_max
        v_idx = T * 8 if (ctx.flash_attn or not v_max) else v_max * T * 8
        total += mask + T * 8 + v_idx + rotation_bytes(model, ctx, c)
    return total, cells


def _layer_phases(model: LlamaModel, la: LlamaLayer, ctx: ContextSizes, n_kv: int) -> tuple[tuple[str, int], ...]:
    """(phase, bytes) of one layer's own tensors at their peaks, inputs excluded."""
    T, E, H = ctx.n_tokens, model.n_embd, la.n_head or model.n_head
    out: list[tuple[str, int]] = []
    kv_total = n_kv * ctx.n_stream
    if la.attn == "mla":
        rope, kvl = model.n_rot, model.kv_lora_rank
        per_tok = 3 * E + model.q_lora_rank + H * model.n_embd_head_k + H * (kvl + rope) + H * kvl
        extra = 0 if ctx.flash_attn else n_kv * T * H * F32 + kv_total * ctx.type_k.row_bytes(kvl)
        out.append(("attention", per_tok * T * F32 + extra))
    elif la.attn != "none":
        dq = H * model.n_embd_head_k
        extra = dq * T * F32 if ctx.flash_attn else n_kv * T * H * F32
        out.append(("attention", (3 * E + 2 * dq) * T * F32 + extra))
    if la.moe:
        per_tok = 4 * E + 2 * model.n_ff_exp * model.n_expert_used + 2 * model.n_ff_shexp + 2 * model.n_expert
        out.append(("ffn", per_tok * T * F32))
    if la.n_ff:
        out.append(("ffn", (2 * la.n_ff + 7 * E) * T * F32))
    if la.recurrent:
        d_inner = model.ssm_d_inner or 2 * E
        conv = d_inner + 2 * model.ssm_n_group * model.ssm_d_state
        in_proj = d_inner + conv + model.ssm_dt_rank
        state = la.s_row * F32 * max(1, ctx.n_seq)
        out.append(("ssm", (3 * E + in_proj + 2 * conv + d_inner) * T * F32 + state))
    return tuple(out)


def logits_bytes(model: LlamaModel, ctx: ContextSizes) -> int:
    """The logits phase: the output matmul, its input rows, ``out_ids`` and the tensors left below it."""
    T, O, E = ctx.n_tokens, ctx.n_outputs, model.n_embd
    below = 3 * E * T * F32 // 2
    if model.is_mla and ctx.flash_attn:  # measured: deepseek2 keeps the absorbed query under the logits
        below = max(below, (model.n_head * (model.kv_lora_rank + model.n_rot) + E // 2) * T * F32)
    return (model.n_vocab + E) * O * F32 + O * F32 + below


def estimate_compute(model: LlamaModel, ctx: ContextSizes, caches: Sequence[CacheAlloc], layers: Sequence[int], *,
                     output: bool, input_layer: bool, copies: int = 1) -> ComputeEstimate:  # fmt: skip
    """The compute buffer of a backend that runs ``layers`` (and the output / input layer when asked).

    ``copies`` > 1 is pipeline parallelism: inputs and the activation
    crossing into the device are kept that many times.
    """
    mine = set(layers)
    phases: list[tuple[str, int]] = []
    inputs = 0
    if mine:
        inputs, cells = _inputs(model, ctx, caches, mine)
        # one phase computation per distinct kind of layer (layers of a kind sit in the same cache)
        for il in model.layer_kinds(tuple(layers)):
            la = model.layers[il]
            phases.extend((name, size + inputs) for name, size in _layer_phases(model, la, ctx, cells.get(il, 0)))
    if output:
        phases.append(("logits", logits_bytes(model, ctx)))
    if input_layer:
        phases.append(("input", (model.n_embd + 1) * ctx.n_tokens * F32))
    if not phases:
        return ComputeEstimate(total_bytes=0, phase="none")
    phase, peak = max(phases, key=lambda p: p[1])
    extra = (copies - 1) * (inputs + model.n_embd * ctx.n_tokens * F32) if copies > 1 and mine else 0
    return ComputeEstimate(total_bytes=peak + extra, phase=phase, inputs_bytes=inputs, copies_bytes=extra)
