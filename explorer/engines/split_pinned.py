"""A tensor × pipeline engine (vLLM, SGLang) on exactly the cards a user pins.

The pinned cards must be of one class (tensor parallelism gives every card an
equal shard) and as many on each node, and nodes must share a fabric. They are
laid out as the walk would lay them: the best split the engine's rules allow,
narrowed by the user's ``--tp``/``--pp``/``--dp``
(:mod:`explorer.engines.launches`). Each card must have the engine's share of
its memory free to start (``free_needed_bytes``), and the node with the least RAM
holds the engine's host claim (:mod:`explorer.engines.host_ram`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.attention_kernels import attention_hint, attention_refusal
from explorer.engines.host_ram import with_host
from explorer.engines.interface import PinnedLayout, SplitEngine
from explorer.engines.launches import evaluate_sharded, launch_splits, make_launch, no_split_reason
from explorer.engines.load_dtype import served
from explorer.engines.options import Option
from explorer.engines.parallel_rules import block_refusals
from explorer.engines.request import PlanRequest
from explorer.engines.serve_command import serve_reference
from explorer.engines.weight_kernels import weights_refusal
from explorer.errors import ManualSelectionError
from explorer.hardware.cards import CardRef
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape


def pin_split(
    engine: SplitEngine,
    shape: ModelShape,
    cards: Sequence[CardRef],
    artifacts: Sequence[Artifact],
    request: PlanRequest,
    model_ref: str,
) -> PinnedLayout:
    """The best split of exactly ``cards`` the engine's rules allow (see the module docstring).

    Raises:
        ManualSelectionError: no safetensors artifact, mixed classes, unequal nodes, no shared fabric,
            or no split of the cards is allowed.
    """
    artifact = next((a for a in artifacts if engine.serves(a)), None)
    if artifact is None:
        formats = sorted({a.format for a in artifacts}) or ["nothing"]
        raise ManualSelectionError(
            f"{engine.name} serves safetensors weights, not {', '.join(formats)}", hint="pin with --engine llamacpp"
        )
    per_node = Counter(c.node.name for c in cards)
    if len(set(per_node.values())) != 1:
        raise ManualSelectionError(f"pinned GPUs must be as many on each node: {dict(per_node)}")
    classes = sorted({c.gpu.name for c in cards})
    if len(classes) != 1:
        raise ManualSelectionError(
            f"pinned GPUs must be of one class for {engine.name}'s tensor parallelism, got {classes}",
            hint="pin cards of one class, or use --engine llamacpp, which splits layers by each card's memory",
        )
    nodes = tuple(dict.fromkeys(c.node for c in cards))
    fabrics = {n.fabric for n in nodes}
    if len(nodes) > 1 and (len(fabrics) != 1 or None in fabrics):
        raise ManualSelectionError("pinned GPUs span nodes that share no fabric")
    gpu = cards[0].gpu
    width = len(cards) // len(nodes)
    pool = Pool(gpu=gpu, nodes=nodes, fabric=nodes[0].fabric, spannable=len(nodes) > 1)
    shape, precision = served(engine, shape, artifact, gpu)
    unsupported = weights_refusal(engine.name, precision, gpu)
    if unsupported:
        raise ManualSelectionError(unsupported, hint="pin with --quant bf16, int8 or int4-awq")
    no_attention = attention_refusal(engine.name, shape, gpu)
    if no_attention:
        raise ManualSelectionError(no_attention, hint=attention_hint(engine.name))
    ref = serve_reference(artifact, precision.method, model_ref, engine.online_methods, shape.precision.method)
    reasons: list[str] = []
    for tp, pp in launch_splits(engine, len(nodes), width, request, shape):
        layout = make_launch(engine, pool, len(nodes), width, tp, pp, shape, request)
        refused = engine.refusals(shape, layout, request) or list(block_refusals(shape, precision, tp, layout.ep))
        if refused and refused[0][0] == "fp8-block" and shape.moe is not None and layout.ep == 1:
            reasons.append(refused[0][1])
            layout = replace(layout, ep=tp)  # the experts spread whole keep their blocks
            refused = engine.refusals(shape, layout, request) or list(block_refusals(shape, precision, tp, tp))
        if refused:
            reasons.append(refused[0][1])
            continue
        layout, ev = evaluate_sharded(engine, shape, precision, layout, gpu, request, ref)
        tightest = min(nodes, key=lambda n: n.host_ram_bytes)
        ev = with_host(ev, engine.host_claim(layout, ev, request), tightest)
        option = Option(
            layout=layout,
            artifact=artifact,
            precision=precision.name,
            bits_per_weight=shape.bits_per_weight(precision),
            nominal_bits=precision.nominal_bits,
            evaluation=ev,
            free_now=True,
            hosts=1,
            gpu=gpu,
            node=nodes[0],
            dtype=shape.dtype if shape.cast_from else "",
        )
        return PinnedLayout(option=option, cards=tuple(cards), needs_bytes=(ev.free_needed_bytes,) * len(cards))
    why = reasons[0] if reasons else no_split_reason(engine, len(nodes), width, request, shape)
    raise ManualSelectionError(f"no split of the {len(cards)} pinned GPUs is allowed: {why}")
