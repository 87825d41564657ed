"""What a precision costs and saves, for the teaching notebook ``notebooks/quantisation.py``.

Every figure is the planner's own: weight bytes and bits a weight from
:meth:`~explorer.model.shapes.ModelShape.weight_bytes` (scales and zero points
counted by :class:`~explorer.model.precision.WeightFormat`), llama.cpp's
per-tensor mix from :func:`explorer.gguf.mix.gguf_mix`, KV cache bytes from the
shape, the quality score and its evidence from :mod:`explorer.plan.ranking`.
This module tabulates them and writes one matrix's arithmetic out, e.g. an
AWQ int4 ``4,096 × 4,096`` q_proj: ``4,096 × ⌈4,096 × 4 / 32⌉ × 4 + … = 8,716,288 bytes = 4.16 bits a weight``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from explorer.errors import ExplorerError
from explorer.gguf.constants import GGML_QUANT_SIZES
from explorer.gguf.mix import MIX_BASE_TYPES, PUBLISHED_FILES, gguf_mix
from explorer.model.precision import Precision, WeightFormat
from explorer.model.tensors import Tensor
from explorer.plan.ranking import PUBLISHED_PERPLEXITY, quality
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.kv_lesson import kv_table
from explorer.units import GiB, cdiv

__all__ = [
    "KV_TYPES",
    "LADDER",
    "LESSON_MODELS",
    "PERPLEXITY_MODELS",
    "QuantDefaults",
    "is_mix",
    "kept_bytes",
    "kv_rows",
    "ladder_rows",
    "matrix_formula",
    "mix_layer_rows",
    "mix_or_reason",
    "mix_rules",
    "mix_summary",
    "perplexity_rows",
    "quality_rows",
    "sample_in_mix",
    "sample_matrix",
]

#: (what it shows, snapshot repo)
LESSON_MODELS: tuple[tuple[str, str], ...] = (
    ("dense, untied head", "meta-llama/Meta-Llama-3.1-8B"),
    ("bias on q/k/v", "Qwen/Qwen2.5-7B"),
    ("tied head: the embedding is stored as the head", "google/gemma-2-9b-it"),
    ("ffn_down rows that fall back", "Qwen/Qwen2.5-72B"),
)
#: (weights per block, bytes per block) by ggml type name
GGML_QUANT_SIZES_BY_NAME: dict[str, tuple[int, int]] = {t.name: v for t, v in GGML_QUANT_SIZES.items()}
#: the precision slider, 16 bits down to about 4: safetensors what-ifs, then GGUF mixes
LADDER: tuple[str, ...] = ("bf16", "fp8", "int8", "int4-gptq", "int4-awq", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M")
#: KV cache types compared
KV_TYPES: tuple[str, ...] = ("auto", "fp8", "q8_0", "q4_0")


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantDefaults:
    """What the quantisation lesson opens with (tests override it).

    Attributes:
        model: a :data:`LESSON_MODELS` repo.
        precision: a :data:`LADDER` step.
        context_tokens: the context for the KV cache types.
        sequences: sequences the KV cache holds.
    """

    model: str = "meta-llama/Meta-Llama-3.1-8B"
    precision: str = "Q4_K_M"
    context_tokens: int = 32768
    sequences: int = 1


#: the snapshot model standing for the one llama-quantize measured its perplexity on (Llama-3-8B and 3.1-8B
#: have the same 8,030,261,248 weights)
PERPLEXITY_MODELS: dict[str, str] = {"Llama-3-8B": "meta-llama/Meta-Llama-3.1-8B"}


def kept_bytes(shape, precision: Precision) -> int:
    """Bytes the precision leaves in the model's dtype: embeddings, norms, the LM head and skipped modules."""
    total = sum(precision.tensor_bytes(t) for t in shape.embeddings + shape.head + shape.vision)
    for i, layer in enumerate(shape.decoder):
        total += sum(precision.tensor_bytes(t, i) for t in layer.tensors if precision.format_for(t, i) is None)
    if precision.all_matrices:  # a GGUF what-if quantises embeddings and head too
        total -= sum(precision.tensor_bytes(t) for t in shape.embeddings + shape.head if t.cols > 1)
    return total


def ladder_rows(shape, names: Sequence[str] = LADDER) -> list[dict[str, Any]]:
    """One row a precision: its label, bits a weight (scales counted), weight bytes, what stays at 16 bits."""
    base = shape.weight_bytes("bf16")
    rows = []
    for order, name in enumerate(names):
        p = shape.resolve_precision(name)
        total = shape.weight_bytes(p)
        kept = kept_bytes(shape, p)
        rows.append(
            {
                "name": name,
                "order": order,
                "label": p.name,
                "format": "GGUF" if p.method == "gguf" else "safetensors",
                "bits": shape.bits_per_weight(p),
                "bytes": total,
                "gib": total / GiB,
                "kept_bytes": kept,
                "saved": 1 - total / base,
            }
        )
    return rows


def sample_matrix(shape) -> tuple[Tensor, int]:
    """The first layer's query projection (or its first quantisable matrix), and its layer: the lesson's example."""
    layer = shape.decoder[0]
    tensors = [t for t in layer.tensors if t.linear and t.cols > 1]
    return next((t for t in tensors if t.module.endswith("q_proj")), tensors[0]), 0


def _int_terms(fmt: WeightFormat, rows: int, cols: int) -> str:
    bits = int(fmt.bits)
    groups = cdiv(cols, fmt.group_size) if fmt.group_size > 0 else 1
    g = f"⌈{cols:,}/{fmt.group_size}⌉" if fmt.group_size > 0 else "1"
    terms = [f"packed {rows:,} × ⌈{cols:,} × {bits}/32⌉ × 4", f"scales {rows:,} × {g} × {fmt.scale_bytes}"]
    if fmt.zero_points:
        terms.append(f"zero points {g} × ⌈{rows:,} × {bits}/32⌉ × 4")
    if fmt.g_idx:
        terms.append(f"g_idx {cols:,} × 4")
    if fmt.packing == "compressed":
        terms.append("16 (shape)")
    return " + ".join(terms) + f" ({groups:,} group(s) a row)"


def matrix_formula(precision: Precision, tensor: Tensor, layer: int | None = 0) -> str:
    """The bytes of one matrix at ``precision``, written out with its numbers and the planner's total.

    ``4,096 × 4,096 + ⌈4,096/128⌉ × ⌈4,096/128⌉ × 4 = 16,781,312 bytes = 8.00 bits a weight`` (fp8 block 128).
    """
    rows, cols = tensor.rows, tensor.cols
    fmt = precision.format_for(tensor, layer)
    n = rows * cols
    if fmt is None:
        b = precision.base
        total = n * b.block_bytes // b.block_elements
        text = f"{rows:,} × {cols:,} × {b.block_bytes} ({b.name}, not quantised)"
    else:
        total = fmt.matrix_bytes(rows, cols)
        if fmt.kind == "fp8" and fmt.block:
            r, c = fmt.block
            text = f"{rows:,} × {cols:,} + ⌈{rows:,}/{r}⌉ × ⌈{cols:,}/{c}⌉ × 4 (an fp32 scale a {r}×{c} tile)"
        elif fmt.kind == "fp8":
            text = f"{rows:,} × {cols:,} + " + (f"{rows:,} × 4" if fmt.fp8_scale == "channel" else "4")
        elif fmt.kind == "int":
            text = _int_terms(fmt, rows, cols)
        elif fmt.kind == "gguf":
            text = f"⌈{rows:,} × {cols:,} × {fmt.bits:g} / 8⌉ (the mix's average bits)"
        else:
            text = f"{rows:,} × {cols:,} at {fmt.kind}"
    return f"{text} = {total:,} bytes = {total * 8 / n:.2f} bits a weight"


def sample_in_mix(shape, quant: str) -> str:
    """How llama.cpp's mix stores the lesson's example matrix, in numbers (empty when the mix is not modelled).

    ``blk.0.attn_q.weight at Q4_K: 16,777,216 / 256 × 144 = 9,437,184 bytes = 4.50 bits a weight``.
    """
    tensor, layer = sample_matrix(shape)
    try:
        mix = gguf_mix(shape, quant)
    except ExplorerError:
        return ""
    i = sum(1 for t in shape.embeddings) + shape.decoder[layer].tensors.index(tensor)
    t = mix[i]
    block, size = GGML_QUANT_SIZES_BY_NAME[t.type_name]
    return (
        f"{t.name} at {t.type_name}: {t.elements:,} / {block} × {size} = {t.bytes:,} bytes "
        f"= {t.bits_per_weight:.2f} bits a weight ({t.why})"
    )


def mix_layer_rows(shape, quant: str) -> list[dict[str, Any]]:
    """Each decoder layer's bytes by ggml type under llama.cpp's mix (MiB), for a stacked chart."""
    rows: dict[tuple[int, str], int] = {}
    for t in gguf_mix(shape, quant):
        if t.layer is not None:
            rows[(t.layer, t.type_name)] = rows.get((t.layer, t.type_name), 0) + t.bytes
    return [{"layer": layer, "type": kind, "mib": b / 2**20} for (layer, kind), b in sorted(rows.items())]


def mix_summary(shape, quant: str) -> dict[str, Any]:
    """llama.cpp's mix against the planner's average: bytes by type, both totals, and a published file's size."""
    tensors = gguf_mix(shape, quant)
    by_type: dict[str, list[int]] = {}
    for t in tensors:
        entry = by_type.setdefault(t.type_name, [0, 0, 0])
        entry[0] += 1
        entry[1] += t.bytes
        entry[2] += t.elements
    total = sum(t.bytes for t in tensors)
    published = next(((f, b) for repo, q, f, b in PUBLISHED_FILES if repo == shape.name and q == quant), None)
    return {
        "types": [
            {"type": k, "tensors": n, "bytes": b, "bits": b * 8 / e, "share": b / total}
            for k, (n, b, e) in sorted(by_type.items(), key=lambda kv: -kv[1][1])
        ],
        "mix_bytes": total,
        "average_bytes": shape.weight_bytes(quant),
        "published": published,
    }


def _ranges(layers: Sequence[int]) -> str:
    """``0–3, 6, 9, 28–31``."""
    out, start = [], None
    for i, n in enumerate(layers):
        if start is None:
            start = n
        if i + 1 == len(layers) or layers[i + 1] != n + 1:
            out.append(f"{start}" if start == n else f"{start}–{n}")
            start = None
    return ", ".join(out)


def mix_rules(shape, quant: str) -> list[dict[str, Any]]:
    """Per tensor kind, which type it gets in which layers, and why (the first rule met)."""
    kinds: dict[str, dict[str, tuple[list[int], str]]] = {}
    for t in gguf_mix(shape, quant):
        if t.category in ("norm", "other"):
            continue
        entry = kinds.setdefault(t.category, {}).setdefault(t.type_name, ([], t.why))
        if t.layer is not None:
            entry[0].append(t.layer)
    rows = []
    for kind, types in kinds.items():
        for type_name, (layers, why) in types.items():
            where = (
                "" if not layers else ("every layer" if len(layers) == shape.layers else f"layers {_ranges(layers)}")
            )
            rows.append({"tensor": kind, "type": type_name, "where": where, "why": why})
    return rows


def kv_rows(shape, context: int, sequences: int = 1) -> list[dict[str, Any]]:
    """Each KV cache type: bytes a token, bytes at the context, what it saves, and the first layer group's formula."""
    auto = shape.kv_bytes(context, "auto", sequences)
    rows = []
    for kv in KV_TYPES:
        et = shape.kv_type(kv)
        at = shape.kv_bytes(context, kv, sequences)
        rows.append(
            {
                "kv": kv if kv != "auto" else f"auto ({et.name})",
                "bits": et.bits_per_element,
                "bytes_per_token": shape.kv_bytes_per_token(kv),
                "bytes": at,
                "gib": at / GiB,
                "saved": 1 - at / auto if auto else 0.0,
                "formula": kv_table(shape, kv, context, sequences)[0]["formula"],
            }
        )
    return rows


def quality_rows(bits: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """The ranking's precision score against bits a weight, on a GPU and on a CPU."""
    grid = bits if bits is not None else [b / 10 for b in range(20, 161)]
    return [
        {"bits": b, "where": where, "quality": quality(b, cpu=where == "CPU")} for where in ("GPU", "CPU") for b in grid
    ]


def perplexity_rows() -> list[dict[str, Any]]:
    """llama-quantize's perplexity increase by mix, at bits a weight = GiB × 2³⁰ × 8 / the measured model's weights.

    The 16-bit rows (measured on Mistral-7B, sized "14.00G", rounded) are 16 bits by definition.
    """
    rows = []
    for name, size_gib, dppl, model in PUBLISHED_PERPLEXITY:
        repo = PERPLEXITY_MODELS.get(model)
        bits = size_gib * 2**30 * 8 / load_snapshot().shape(repo).params if repo else 16.0
        rows.append({"mix": name, "gib": size_gib, "bits": bits, "dppl": dppl, "model": model})
    return rows


def is_mix(name: str) -> bool:
    """Whether a ladder step is a GGUF mix with per-tensor rules."""
    return name.upper() in MIX_BASE_TYPES


def mix_or_reason(shape, quant: str) -> tuple[dict[str, Any] | None, str]:
    """(the mix summary, "") or (None, why there is none) for a model the mix rules do not cover."""
    try:
        return mix_summary(shape, quant), ""
    except ExplorerError as e:
        return None, str(e)
