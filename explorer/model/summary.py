"""Plain-data summaries of a shape, for JSON output, tables and notebooks."""

from __future__ import annotations

from collections import Counter
from typing import Any

from explorer.model.shapes import ModelShape
from explorer.units import gib, human_count


def layer_kinds(shape: ModelShape) -> dict[str, int]:
    """How many layers of each cache kind (full, sliding, mla, recurrent, none…)."""
    return dict(Counter(layer.cache.kind for layer in shape.decoder))


def shape_summary(
    shape: ModelShape, *, kv_dtype: str = "auto", context_tokens: int | None = None, sequences: int = 1
) -> dict[str, Any]:
    """A JSON-ready dict of a shape's figures; byte counts are ints.

    ``context_tokens`` defaults to the model's own limit.
    """
    context = shape.max_context_tokens if context_tokens is None else context_tokens
    moe = shape.moe
    return {
        "name": shape.name,
        "model_type": shape.model_type,
        "text_model_type": shape.text_model_type,
        "architecture": shape.architecture,
        "family": shape.family,
        "params": shape.params,
        "active_params": shape.active_params,
        "layers": shape.layers,
        "layer_kinds": layer_kinds(shape),
        "hidden_size": shape.hidden_size,
        "attention": shape.attention,
        "attention_heads": shape.attention_heads,
        "kv_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "vocab_size": shape.vocab_size,
        "tied_embeddings": shape.tied_embeddings,
        "experts": shape.experts,
        "shared_experts": moe.shared_experts if moe else 0,
        "experts_per_token": moe.experts_per_token if moe else 0,
        "moe_intermediate_size": moe.moe_intermediate_size if moe else 0,
        "first_dense_layers": moe.first_dense_layers if moe else 0,
        "vision_heads": shape.vision_tower.heads if shape.vision_tower else 0,
        "max_position_embeddings": shape.max_position_embeddings,
        "max_context": shape.max_context_tokens,
        "rope_scaling": shape.rope_scaling,
        "dtype": shape.dtype,
        "precision": shape.precision.name,
        "weight_bytes": shape.weight_bytes(),
        "bits_per_weight": round(shape.bits_per_weight(), 3),
        "kv_dtype": shape.kv_type(kv_dtype).name,
        "kv_bytes_per_token": shape.kv_bytes_per_token(kv_dtype),
        "context": context,
        "sequences": sequences,
        "kv_bytes": shape.kv_bytes(context, kv_dtype, sequences),
        "approximate": shape.approximate,
        "notes": list(shape.notes),
    }


def shape_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows for a human-readable table of a summary; sizes in GiB (1024³)."""
    s = summary
    rows = [
        ("model", f"{s['name'] or s['model_type']} ({s['model_type']}, {s['family']})"),
        ("parameters", f"{human_count(s['params'])} ({s['params']:,})"),
    ]
    if s["experts"]:
        rows.append(("active / token", f"{human_count(s['active_params'])} ({s['active_params']:,})"))
        rows.append(
            ("experts", f"{s['experts']} routed, {s['shared_experts']} shared, {s['experts_per_token']} per token")
        )
    kinds = ", ".join(f"{n} {k}" for k, n in s["layer_kinds"].items())
    rows += [
        ("layers", f"{s['layers']} ({kinds})"),
        ("attention", f"{s['attention']}: {s['attention_heads']} heads, {s['kv_heads']} KV heads × {s['head_dim']}"),
        (
            "context limit",
            f"{s['max_context']:,} tokens" + (f" (rope {s['rope_scaling']})" if s["rope_scaling"] else ""),
        ),
        ("weights", f"{gib(s['weight_bytes'], 2)} at {s['precision']} ({s['bits_per_weight']:.2f} bits/weight)"),
        ("KV per token", f"{s['kv_bytes_per_token']:,} bytes ({s['kv_dtype']})"),
        (f"KV at {s['context']:,}", f"{gib(s['kv_bytes'], 2)} for {s['sequences']} sequence(s)"),
        ("approximate", "yes" if s["approximate"] else "no"),
    ]
    return rows
