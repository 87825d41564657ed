"""Splitting a model over cards, for the teaching notebook ``notebooks/parallelism.py``.

Every figure is the planner's own: the split is laid out, refused and sized by
vLLM's engine (or SGLang's, DP attention included) through the :class:`~explorer.engines.interface.SplitEngine`
protocol (``make_layout``, ``refusals``, ``evaluate``), the weights a card holds
come from the engine's ``card_weights``, the stages from
:func:`explorer.engines.layouts.pp_partition`, the bytes on the wire and the
pipeline's timing from :mod:`explorer.speed.roofline`. This module lays them
out per card and writes the arithmetic in the model's own numbers, e.g. for
Qwen2.5-7B on 4 cards: ``28 query heads / 4 cards = 7 a card``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from explorer.artifacts.offer import original_artifact
from explorer.engines.evaluation import Evaluation
from explorer.engines.layouts import Layout, pp_partition
from explorer.engines.load_dtype import served
from explorer.engines.parallel_rules import Refusal, kv_head_counts
from explorer.engines.registry import SPLIT_ENGINES
from explorer.engines.request import PlanRequest
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.pools import gpu_pools
from explorer.model.shapes import ModelShape
from explorer.model.weights import WeightBreakdown
from explorer.sources.shipped import parse_cluster
from explorer.speed.estimate import DEFAULT_SETTINGS
from explorer.speed.roofline import (
    allreduce_bytes,
    decode_cycle_s,
    handoff_bytes,
    micro_batches,
    part_step_cost,
    placement,
)
from explorer.units import GiB, cdiv

__all__ = [
    "CARD_STEPS",
    "LESSON_MODELS",
    "ParallelDefaults",
    "Split",
    "card_rows",
    "comms",
    "engine_layout",
    "expert_rows",
    "head_formula",
    "head_rows",
    "loaded_shape",
    "pipeline_timing",
    "split_model",
    "vllm_layout",
]

Mode = Literal["tensor", "pipeline"]

#: (what it shows, snapshot repo)
LESSON_MODELS: tuple[tuple[str, str], ...] = (
    ("28 query heads, 4 KV heads", "Qwen/Qwen2.5-7B"),
    ("80 layers, 8 KV heads", "meta-llama/Meta-Llama-3.1-70B"),
    ("128 experts, 8 a token", "Qwen/Qwen3-30B-A3B"),
    ("a 16-head vision tower", "Qwen/Qwen3-VL-32B-Instruct"),
)
#: the card counts the slider offers (one node of that many cards)
CARD_STEPS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32)
#: the engine whose rules and accounting the lesson shows
ENGINE = "vllm"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelDefaults:
    """What the parallelism lesson opens with (tests override it).

    Attributes:
        model: a :data:`LESSON_MODELS` repo.
        gpu_class: the card class.
        cards: cards on the one node (a :data:`CARD_STEPS` value).
        context_tokens: the context each sequence holds.
        sequences: sequences decoding together.
    """

    model: str = "Qwen/Qwen2.5-7B"
    gpu_class: str = "h100-80g"
    cards: int = 4
    context_tokens: int = 32768
    sequences: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """One way to put a model on ``cards`` cards, as the engine lays it out, and the planner's verdict.

    Attributes:
        mode: ``tensor`` (every layer split across the cards) or ``pipeline`` (the layers split into stages).
        layout: the layout (tp, pp and, for a mixture of experts under tensor parallelism, ep = tp).
        gpu: the card class.
        refusals: the rules the split breaks, each (rule, reason), as the planner words them; empty if none.
        evaluation: per-card memory at the request's context and sequences (None when refused).
        weights: one card's share of the weights as the engine splits them (every stage's layers; a stage takes
            its slice).
        stages: (first layer, end layer) of each pipeline stage.
    """

    mode: Mode
    layout: Layout
    gpu: GPUClass
    refusals: tuple[Refusal, ...]
    evaluation: Evaluation | None
    weights: WeightBreakdown
    stages: tuple[tuple[int, int], ...]

    @property
    def allowed(self) -> bool:
        """Whether no divisibility rule refuses the split."""
        return not self.refusals


def loaded_shape(shape: ModelShape, gpu_class: str, engine: str = ENGINE) -> ModelShape:
    """The model as ``engine`` loads its checkpoint on ``gpu_class``, as the planner plans it
    (:func:`explorer.engines.load_dtype.served`): a float32 checkpoint at 16 bits (vLLM: bf16 from compute
    capability 8.0, fp16 below), any other as it is."""
    gpu = gpu_pools(parse_cluster(f"1x1x{gpu_class}"))[0].gpu
    return served(SPLIT_ENGINES[engine], shape, original_artifact(shape), gpu)[0]


def engine_layout(
    shape, gpu_class: str, tp: int, pp: int, request: PlanRequest, engine: str = ENGINE
) -> tuple[Layout, GPUClass]:
    """``engine``'s layout of ``tp × pp`` cards of ``gpu_class`` on one node, and the card class: vLLM's ep = tp
    for experts; SGLang's dp = tp under DP attention and the request's ``--ep-size``."""
    pool = gpu_pools(parse_cluster(f"1x{tp * pp}x{gpu_class}"))[0]
    return SPLIT_ENGINES[engine].make_layout(pool, 1, tp * pp, tp, pp, shape, request), pool.gpu


def vllm_layout(shape, gpu_class: str, tp: int, pp: int, request: PlanRequest) -> tuple[Layout, GPUClass]:
    """vLLM's layout of ``tp × pp`` cards of ``gpu_class`` on one node (ep = tp for experts), and the card class."""
    return engine_layout(shape, gpu_class, tp, pp, request)


def split_model(shape, gpu_class: str, cards: int, mode: Mode, request: PlanRequest, engine: str = ENGINE) -> Split:
    """Lay ``shape`` over one node of ``cards`` cards of ``gpu_class``, tensor- or pipeline-parallel, as ``engine``
    (vLLM by default) does; each card's weights are the engine's own split of them (SGLang's DP attention keeps
    the attention whole on each of its cards where tp / dp = 1), the model at the dtype it loads it at
    (:func:`loaded_shape`)."""
    split_engine = SPLIT_ENGINES[engine]
    shape = loaded_shape(shape, gpu_class, engine)
    tp, pp = (cards, 1) if mode == "tensor" else (1, cards)
    layout, gpu = engine_layout(shape, gpu_class, tp, pp, request, engine)
    refusals = tuple(split_engine.refusals(shape, layout, request))
    evaluation = None
    if not refusals:
        evaluation = split_engine.evaluate(shape, shape.precision, layout, gpu, request, shape.name)
    return Split(
        mode=mode,
        layout=layout,
        gpu=gpu,
        refusals=refusals,
        evaluation=evaluation,
        weights=split_engine.card_weights(shape, shape.precision, layout, request),
        stages=tuple(pp_partition(shape.layers, pp)) if pp <= shape.layers else (),
    )


def card_rows(split: Split) -> list[dict[str, Any]]:
    """Long-form rows of what each card holds, part by part (GiB), for :func:`explorer.ui.lesson_charts.split_spec`.

    Parts: embeddings (and a vision tower), decoder layers, LM head, what the engine builds while loading beside
    the checkpoint (the RoPE cache, kernels' re-layouts), KV cache, activations + overhead; they sum to the
    engine's per-card total. Empty when the split is refused.
    """
    ev = split.evaluation
    if ev is None:
        return []
    wb, tp, rows = split.weights, split.layout.tp, []
    for s, (a, b) in enumerate(split.stages):
        card = ev.cards[s]
        first, last = s == 0, s == len(split.stages) - 1
        parts = (
            ("embeddings", wb.embedding_bytes + wb.vision_bytes if first else 0),
            ("decoder layers", sum(wb.layer_bytes[a:b])),
            ("LM head", wb.head_bytes if last else 0),
            ("built while loading", card.weights - wb.stage_bytes(a, b, first=first, last=last)),
            ("KV cache", card.kv_cache),
            ("activations + overhead", card.activations + card.overhead),
        )
        for c in range(tp):
            name = f"card {s * tp + c + 1}"
            for order, (part, nbytes) in enumerate(parts):
                rows.append(
                    {
                        "card": name,
                        "card_order": s * tp + c,
                        "part": part,
                        "part_order": order,
                        "gib": nbytes / GiB,
                        "usable_gib": card.usable / GiB,
                        "layers": f"{a}–{b - 1}",
                        "fits": card.fits,
                    }
                )
    return rows


def _kv_heads(shape) -> int:
    """The KV heads the divisibility rule checks (0 for MLA, whose latent has none)."""
    return max(kv_head_counts(shape), default=0)


def head_rows(shape, tp: int) -> list[dict[str, Any]]:
    """Which attention heads each of ``tp`` cards computes: query heads split, KV heads split or copied.

    vLLM keeps ``max(1, kv_heads // tp)`` KV heads a card; past ``tp = kv_heads`` each head
    is copied onto ``tp // kv_heads`` cards (Qwen2.5-7B's 4 KV heads on 8 cards: each on 2).
    """
    q, kv = shape.attention_heads, _kv_heads(shape)
    q_each = q // tp if q % tp == 0 else None
    rows = []
    for c in range(tp):
        if kv and tp <= kv:
            k_each = kv // tp
            held = f"{c * k_each}–{(c + 1) * k_each - 1}" if k_each > 1 else f"{c * k_each}"
        elif kv:
            held = f"{c // (tp // kv)} (copy {c % (tp // kv) + 1} of {tp // kv})" if tp % kv == 0 else "—"
        else:
            held = "the whole latent (MLA)"
        rows.append(
            {
                "card": f"card {c + 1}",
                "query heads": f"{c * q_each}–{(c + 1) * q_each - 1}" if q_each else "—",
                "KV heads": held,
            }
        )
    return rows


def head_formula(shape, tp: int) -> str:
    """The split of heads in the model's numbers: ``28 query heads / 4 cards = 7 a card; 4 KV heads / 4 = 1 a card``."""
    q, kv = shape.attention_heads, _kv_heads(shape)
    q_text = f"{q} query heads / {tp} cards = " + (f"{q // tp} a card" if q % tp == 0 else f"{q / tp:.2f}: not whole")
    if not kv:
        return q_text + "; the MLA latent has no heads: every card keeps it whole"
    if tp <= kv:
        kv_text = f"{kv} KV heads / {tp} cards = " + (
            f"{kv // tp} a card" if kv % tp == 0 else f"{kv / tp:.2f}: not whole"
        )
    elif tp % kv == 0:
        kv_text = f"{tp} cards > {kv} KV heads: each card keeps 1, each head copied onto {tp // kv} cards"
    else:
        kv_text = f"{tp} cards > {kv} KV heads, and {tp} is not a multiple of {kv}: no even copy"
    return f"{q_text}; {kv_text}"


def expert_rows(shape, ep: int) -> list[dict[str, Any]]:
    """Which routed experts each of ``ep`` cards holds (vLLM's linear placement: contiguous ranges)."""
    if shape.moe is None or ep <= 1:
        return []
    experts, each = shape.moe.experts, cdiv(shape.moe.experts, ep)
    return [
        {"card": f"card {c + 1}", "experts": f"{c * each}–{min(experts, (c + 1) * each) - 1}", "count": each}
        for c in range(ep)
    ]


def comms(shape, split: Split, sequences: int) -> dict[str, Any]:
    """Bytes one card sends for one decode step of ``sequences`` tokens, with the formula in numbers.

    Tensor parallel: two ring all-reduces a layer (after attention, after the MLP), each card sending
    2(tp − 1)/tp of the ``tokens × hidden × 2`` bytes. Pipeline: one hand-off of ``tokens × hidden × 2``
    bytes between stages.
    """
    hidden, layers, tp, pp = shape.hidden_size, shape.layers, split.layout.tp, split.layout.pp
    if tp > 1:
        one = allreduce_bytes(tp, sequences, hidden)
        total = 2 * layers * one
        formula = (
            f"2 all-reduces × {layers} layers × 2({tp} − 1)/{tp} × {sequences} token(s) × {hidden:,} × 2 bytes "
            f"= {total:,.0f} bytes a card a step"
        )
        return {"bytes": total, "per_exchange": one, "exchanges": 2 * layers, "formula": formula}
    if pp > 1:
        one = handoff_bytes(sequences, hidden)
        total = (pp - 1) * one
        formula = (
            f"{pp - 1} hand-off(s) × {sequences} token(s) × {hidden:,} × 2 bytes = {total:,} bytes a step, "
            f"each stage sending {one:,}"
        )
        return {"bytes": total, "per_exchange": one, "exchanges": pp - 1, "formula": formula}
    return {"bytes": 0, "per_exchange": 0, "exchanges": 0, "formula": "one card: nothing crosses a link"}


def pipeline_timing(shape, split: Split, sequences: int, context: int) -> dict[str, Any] | None:
    """A pipeline's decode cycle from the speed model: each stage's step, the cycle, and the share each card idles.

    ``sequences`` split into ``m = min(B, pp)`` micro-batches; ``cycle = max(Σ stages + hand-offs,
    m × slowest stage)``; a card works ``m × its stage's step`` of the cycle. None when there is no
    pipeline, it is refused, or the card's bandwidth is unknown.
    """
    if split.layout.pp <= 1 or not split.allowed:
        return None
    where = placement(shape, shape.precision, split.layout, split.gpu, 0, False, 0, DEFAULT_SETTINGS)
    if where is None:
        return None
    kv = shape.kv_type("auto")
    micro = micro_batches(sequences, len(where.parts))
    size = cdiv(sequences, micro)
    steps = [part_step_cost(shape, part, size, context, kv).seconds for part in where.parts]
    cycle = decode_cycle_s(shape, where, sequences, context, kv)
    busy = [micro * s / cycle for s in steps]
    return {
        "micro_batches": micro,
        "stage_ms": [s * 1e3 for s in steps],
        "cycle_ms": cycle * 1e3,
        "busy": busy,
        "idle": 1 - sum(busy) / len(busy),
        "tokens_per_s": sequences / cycle,
    }
