"""One launch of a tensor × pipeline engine as the user narrows it: ``--tp``, ``--pp``, ``--dp``.

The walk (:mod:`explorer.engines.split_walk`) and manual pinning
(:mod:`explorer.engines.split_pinned`) both lay launches out through here, so a
user's sizes mean the same in both:

- a world size (tp × pp × dp, any missing one 1) fixes the cards of a launch;
- tp and pp, when given, are the only split tried;
- plain data parallelism (``--dp`` without DP attention: vLLM ``--data-parallel-size``
  of a dense model, SGLang ``--dp-size``) runs dp replicas of the tp × pp split side
  by side on one node, in one launch; each holds its share of the sequences. Under
  DP attention the dp ranks share the tp group's cards (SGLang requires dp to divide tp);
- expert data parallelism (vLLM ``--data-parallel-size`` of a mixture of experts, with
  ``--enable-expert-parallel``): dp ranks of tp cards each, pp 1, over any whole nodes of
  one fabric; each rank holds the attention and dense weights at its tp and its own
  sequences' KV cache, and the routed experts are spread over all tp × dp ranks
  (vLLM's ``docs/serving/data_parallel_deployment.md``: "expert layers form a tensor
  parallel group of size DP × TP", expert-parallel with the flag).

A launch the rules leave no split for is refused with the reason
(:func:`no_split_reason`), never dropped unsaid.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from explorer.engines.evaluation import Evaluation
from explorer.engines.interface import SplitEngine
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.engines.weight_kernels import weight_only_note
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.pools import Pool
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.units import cdiv


def plain_dp(request: PlanRequest) -> int:
    """Data-parallel ranks of one launch without DP attention (``--dp`` alone); 1 when none."""
    return 1 if request.dp_attention else request.data_parallel_size or 1


def expert_dp(engine: SplitEngine, shape: ModelShape, request: PlanRequest) -> bool:
    """Whether the user's dp ranks share the experts (the engine's expert data parallelism on a mixture of
    experts) rather than each holding a copy."""
    return engine.expert_data_parallel and shape.moe is not None and plain_dp(request) > 1


def weight_copy_cards(layout: Layout, request: PlanRequest) -> int:
    """The cards one copy of the weights spans: every card of an expert-parallel dp launch, a plain replica's
    share of the others."""
    return layout.cards if layout.expert_dp else layout.cards // plain_dp(request)


def launch_splits(
    engine: SplitEngine, nodes: int, width: int, request: PlanRequest, shape: ModelShape
) -> Iterator[tuple[int, int]]:
    """The engine's (tp, pp) splits of a launch on ``nodes × width`` cards, narrowed to the user's tp, pp, dp.

    With a world size given, only a launch of exactly that many cards; plain dp replicas sit side by side
    on one node, so the split is of one replica's ``width / dp`` cards; expert dp ranks take
    ``cards / dp`` cards each (tp within a node, pp 1) on any whole nodes.
    """
    world, dp = request.world_size, plain_dp(request)
    if world is not None and nodes * width != world:
        return
    if expert_dp(engine, shape, request):
        tp, rest = divmod(nodes * width, dp)
        narrowed = request.tensor_parallel_size in (None, tp) and request.pipeline_parallel_size in (None, 1)
        if tp and not rest and width % tp == 0 and narrowed:
            yield tp, 1
        return
    if dp > 1 and (nodes > 1 or width % dp):
        return
    for tp, pp in engine.decompositions(nodes, width // dp, request):
        if request.tensor_parallel_size not in (None, tp) or request.pipeline_parallel_size not in (None, pp):
            continue
        if request.dp_attention and request.data_parallel_size and tp % request.data_parallel_size:
            continue
        yield tp, pp


def make_launch(
    engine: SplitEngine, pool: Pool, nodes: int, width: int, tp: int, pp: int, shape: ModelShape, request: PlanRequest
) -> Layout:
    """The engine's layout of a launch, with the user's dp (plain replicas, expert dp ranks with ep = tp × dp, or
    the DP attention size)."""
    layout = engine.make_layout(pool, nodes, width, tp, pp, shape, request)
    if expert_dp(engine, shape, request):
        return replace(layout, dp=plain_dp(request), ep=tp * plain_dp(request))
    return replace(layout, dp=request.data_parallel_size) if request.data_parallel_size else layout


def no_split_reason(engine: SplitEngine, nodes: int, width: int, request: PlanRequest, shape: ModelShape) -> str:
    """Why the user's sizes leave no split of ``nodes × width`` cards (said, so no launch is dropped unsaid)."""
    dp, cards = plain_dp(request), nodes * width
    if expert_dp(engine, shape, request):
        return (
            f"dp {dp} expert-parallel ranks on {nodes} node(s) × {width} need tp = {cards} / {dp} cards a rank, "
            f"dividing a node's {width} cards, and pp 1"
        )
    if dp > 1 and nodes > 1:
        return f"dp {dp} across {nodes} nodes: {engine.data_parallel_nodes_rule}"
    if dp > 1 and width % dp:
        return f"dp {dp} replicas do not divide a node's {width} cards"
    asked = ", ".join(
        f"{k} {v}" for k, v in (("tp", request.tensor_parallel_size), ("pp", request.pipeline_parallel_size)) if v
    )
    return f"{asked or 'the engine'} does not split {nodes} node(s) × {width} card(s)"


def evaluate_launch(
    engine: SplitEngine,
    shape: ModelShape,
    precision: Precision,
    layout: Layout,
    gpu: GPUClass,
    request: PlanRequest,
    model_ref: str,
) -> Evaluation:
    """The engine's evaluation of a launch; dp plain replicas (or expert dp ranks) each hold their share of the
    sequences. Weights the engine runs weight-only on these cards (fp8 through Marlin on Ampere) are said in its
    notes."""
    dp = layout.dp if layout.expert_dp else plain_dp(request)
    if dp == 1:
        ev = engine.evaluate(shape, precision, layout, gpu, request, model_ref)
    else:
        share = replace(request, concurrency=cdiv(request.concurrency, dp))
        ev = engine.evaluate(shape, precision, layout, gpu, share, model_ref)
        ev = replace(ev, max_concurrency=ev.max_concurrency * dp)
    note = weight_only_note(engine.name, precision, gpu)
    return replace(ev, notes=(*ev.notes, note)) if note else ev


def evaluate_sharded(
    engine: SplitEngine,
    shape: ModelShape,
    precision: Precision,
    layout: Layout,
    gpu: GPUClass,
    request: PlanRequest,
    model_ref: str,
) -> tuple[Layout, Evaluation]:
    """``layout`` and its evaluation (:func:`evaluate_launch`), or, when its KV cache is what keeps it from holding
    the request, the least further split of that cache that holds it (:meth:`~explorer.engines.interface.SplitEngine.kv_shard_layouts`:
    vLLM's decode context parallelism, SGLang's DP attention), else the most split one if it holds more sequences
    than ``layout`` does.

    Kimi-K2.5 at tp 8 on H200s, 64 × 65,536 tokens: the whole latent on every card (274.5 GiB) is refused; dcp 2
    and 4 leave too much (137.3, 68.6 GiB); dcp 8 keeps 34.3 GiB a card and holds the 64 sequences.
    """
    evaluation = evaluate_launch(engine, shape, precision, layout, gpu, request, model_ref)
    if evaluation.fits:
        return layout, evaluation
    best = layout, evaluation
    for sharded in engine.kv_shard_layouts(shape, layout, gpu, request):
        tried = evaluate_launch(engine, shape, precision, sharded, gpu, request, model_ref)
        if tried.fits:
            return sharded, tried
        best = sharded, tried
    return best if best[1].max_concurrency > evaluation.max_concurrency else (layout, evaluation)


def world_refusal(pools: Sequence[Pool], request: PlanRequest) -> str | None:
    """Why no pool can take a launch of the user's world size (None: one can)."""
    world = request.world_size
    if world is None:
        return None
    for pool in pools:
        width = 1 if pool.gpu.is_mig else pool.width()
        nodes = len(pool.nodes) if pool.spannable else 1
        if any(world % w == 0 and world // w <= nodes and pool.hosts(w) >= world // w for w in range(1, width + 1)):
            return None
    largest = max((p.width() * (len(p.nodes) if p.spannable else 1) for p in pools), default=0)
    return (
        f"{_world_text(request)} = {world} cards in one launch, but no pool offers them "
        f"(the largest offers {largest}, whole nodes of one class on one fabric)"
    )


def _world_text(request: PlanRequest) -> str:
    given = (("tp", request.tensor_parallel_size), ("pp", request.pipeline_parallel_size))
    parts = [f"{k} {v}" for k, v in given if v]
    if plain_dp(request) > 1:
        parts.append(f"dp {plain_dp(request)}")
    return " × ".join(parts) or "tp 1"
