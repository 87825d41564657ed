"""plan(): every way a model can run on a cluster, best first, and why the others cannot.

For vLLM and SGLang the planner walks every GPU pool (a class on a set of
nodes a replica may span: one fabric's nodes, or one stand-alone node), every
node count and every cards-per-node width, and every tensor × pipeline
split of those cards the engine can run. Each candidate is refused by the
first rule it breaks, in this order, and counted under that rule:

1. ``mig-single-slice``: a MIG slice serves a replica alone, never joined;
2. divisibility (``attention-heads``, ``kv-heads``, ``vision-heads``,
   ``ssm-heads``, ``pipeline-layers``) and the engine's own refusals;
3. ``memory-lower-bound``: the weights alone exceed the cards;
4. ``memory``: the engine's accounting does not fit the asked context × concurrency;
5. ``more-than-needed``: it fits, but a way with no more cards and no more
   nodes (and fewer of one) fits too. On one node every width that fits is
   kept (scaling up is a choice); across nodes only the fewest are.
6. ``split``: the same cards fit with a better split (more tensor parallelism).

llama.cpp layouts (one card, a node's cards, RPC across nodes, partial
offload, CPU, unified memory) come from :mod:`explorer.engines.llamacpp.engine`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from explorer.model.artifacts import ORIGINAL, Artifact
from explorer.plan.offer import original_artifact, what_if_artifact
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster, Node
from explorer.engines import sglang, vllm
from explorer.engines.common import Layout, PlanRequest
from explorer.errors import PlanError
from explorer.engines.options import Option, PlanResult, Rejection, memory_reason
from explorer.model.precision import Precision
from explorer.plan.ranking import SortKey, rank
from explorer.model.shapes import ModelShape
from explorer.speed.estimate import SpeedSettings, speed_of
from explorer.model.weights import weight_breakdown

#: refusals kept in a result; ``pruned`` counts them all
MAX_REJECTIONS = 400


@dataclass(frozen=True, slots=True)
class Pool:
    """GPUs of one class that one replica may use together.

    Attributes:
        gpu: the class.
        nodes: the nodes holding it (spannable: one fabric; else nodes that stand alone).
        fabric: the fabric they share, or None.
        spannable: whether a replica may span several of the nodes.
        groups: each node's GPU group of the class (filled in from ``nodes``).
    """

    gpu: GPUClass
    nodes: tuple[Node, ...]
    fabric: str | None
    spannable: bool
    groups: tuple = ()

    def __post_init__(self) -> None:
        if not self.groups:  # each node's GPU group of the class, in node order
            object.__setattr__(self, "groups", tuple(n.group(self.gpu.name) for n in self.nodes))

    def width(self) -> int:
        """The most cards of the class one node offers."""
        return max(g.count for g in self.groups)

    def hosts(self, cards: int) -> int:
        """How many nodes have at least ``cards`` cards of the class."""
        return sum(1 for g in self.groups if g.count >= cards)


def gpu_pools(cluster: Cluster) -> list[Pool]:
    """The cluster's GPU pools: each fabric's nodes of a class, and each class's stand-alone nodes together."""
    pools: list[Pool] = []
    for (name, fabric), nodes in cluster.pools().items():
        gpu = nodes[0].group(name).gpu  # type: ignore[union-attr]
        if nodes[0].unified:
            continue
        spannable = fabric is not None and not gpu.is_mig
        pools.append(Pool(gpu=gpu, nodes=nodes, fabric=fabric, spannable=spannable))
    return pools


class _Collector:
    """Options, refusals and counts as the walk finds them."""

    def __init__(self) -> None:
        self.options: list[Option] = []
        self.rejected: list[Rejection] = []
        self.pruned: Counter[str] = Counter()
        self.considered = 0

    def refuse(self, engine: str, layout: Layout | None, artifact: str, rule: str, reason: str,
               option: Option | None = None, count: int = 1) -> None:
        self.pruned[rule] += count
        self.considered += count
        if len(self.rejected) < MAX_REJECTIONS:
            self.rejected.append(Rejection(engine=engine, layout=layout, artifact=artifact, rule=rule,
                                           reason=reason, option=option))

    def accept(self, option: Option) -> None:
        self.considered += 1
        self.options.append(option)


def precision_of(shape: ModelShape, artifact: Artifact) -> Precision:
    """The precision an artifact loads at."""
    if artifact.name == ORIGINAL and not artifact.what_if:
        return shape.precision
    return shape.resolve_precision(artifact.quant)


def decompositions(engine: str, nodes: int, width: int, request: PlanRequest) -> Iterator[tuple[int, int]]:
    """(tp, pp) splits of ``nodes × width`` cards the engine runs, most tensor parallelism first."""
    cards = nodes * width
    divisors = [d for d in range(width, 0, -1) if width % d == 0]
    if engine == "sglang" and nodes > 1:
        yield cards, 1  # SGLang spans tensor parallelism over nodes (--nnodes)
    for tp in divisors:
        yield tp, cards // tp


def make_layout(engine: str, pool: Pool, nodes: int, width: int, tp: int, pp: int, shape: ModelShape,
            request: PlanRequest) -> Layout:
    moe = shape.moe is not None and tp > 1 and engine == "vllm"
    dp = tp if engine == "sglang" and request.dp_attention else 1
    return Layout(engine=engine, gpu_class=pool.gpu.name, fabric=pool.fabric if nodes > 1 else None,
                  nodes=nodes, gpus_per_node=width, tp=tp, pp=pp, dp=dp, ep=tp if moe else 1)


def _free_now(pool: Pool, nodes: int, width: int, needed: int) -> bool:
    free = sum(1 for g in pool.groups if g.free_bytes_for(width) >= needed)
    return free >= nodes


def _walk_pool(engine: str, shape: ModelShape, artifact: Artifact, precision: Precision, pool: Pool,
               request: PlanRequest, model_ref: str, out: _Collector) -> None:
    module = vllm if engine == "vllm" else sglang
    bits = shape.bits_per_weight(precision)
    total_weights = weight_breakdown(shape, precision).total_bytes
    gmu = request.gpu_memory_utilization if engine == "vllm" else 0.95
    max_width = 1 if pool.gpu.is_mig else pool.width()
    if pool.gpu.is_mig and pool.width() > 1:
        out.refuse(engine, None, artifact.name, "mig-single-slice",
                   f"{pool.gpu.name}: a replica takes exactly one MIG slice; slices are never joined",
                   count=pool.width() - 1)
    max_nodes = len(pool.nodes) if pool.spannable else 1
    best: Option | None = None  # fewest cards, then fewest nodes, of the ways that fit so far
    for nodes in range(1, max_nodes + 1):
        if nodes > 1 and best is not None and nodes >= best.layout.cards:
            layout = make_layout(engine, pool, nodes, max_width, max_width, nodes, shape, request)
            out.refuse(engine, layout, artifact.name, "more-than-needed",
                       f"{nodes} or more nodes are more than needed: {best.layout.label} holds it",
                       count=(max_nodes - nodes + 1) * max_width)
            break
        for width in range(1, max_width + 1):
            hosts = pool.hosts(width)
            if hosts < nodes:
                continue
            if nodes > 1 and best is not None and nodes * width >= best.layout.cards:
                layout = make_layout(engine, pool, nodes, width, width, nodes, shape, request)
                out.refuse(engine, layout, artifact.name, "more-than-needed",
                           f"{layout.label} is more than needed: {best.layout.label} holds it",
                           count=max_width - width + 1)
                break
            option = _try_split(module, engine, shape, artifact, precision, pool, nodes, width, bits,
                                total_weights, gmu, hosts, request, model_ref, out)
            if option is None:
                continue
            out.accept(option)
            if best is None or option.layout.cards < best.layout.cards:
                best = option
            if nodes > 1:
                break  # wider widths on as many nodes take more cards


def _try_split(module, engine: str, shape: ModelShape, artifact: Artifact, precision: Precision, pool: Pool,
               nodes: int, width: int, bits: float, total_weights: int, gmu: float, hosts: int,
               request: PlanRequest, model_ref: str, out: _Collector) -> Option | None:
    """The best (tp, pp) split of ``nodes × width`` cards that fits, refusing the others."""
    cards = nodes * width
    accepted = None
    for tp, pp in decompositions(engine, nodes, width, request):
        layout = make_layout(engine, pool, nodes, width, tp, pp, shape, request)
        if accepted is not None:
            out.refuse(engine, layout, artifact.name, "split", f"{accepted.layout.parallel} is a better split of the same cards")
            continue
        reasons = module.refusals(shape, layout) if engine == "vllm" else module.refusals(shape, layout, request)
        if reasons:
            rule, reason = reasons[0]
            out.refuse(engine, layout, artifact.name, rule, reason)
            continue
        if total_weights > pool.gpu.memory_bytes * gmu * cards:
            out.refuse(engine, layout, artifact.name, "memory-lower-bound",
                       f"the weights alone ({total_weights / 2**30:.1f} GiB) exceed {cards} × {pool.gpu.name}")
            break
        evaluation = module.evaluate(shape, precision, layout, pool.gpu, request, model_ref)
        option = Option(layout=layout, artifact=artifact, precision=precision.name, bits_per_weight=bits,
                        evaluation=evaluation, free_now=_free_now(pool, nodes, width, evaluation.free_needed_bytes),
                        hosts=hosts, gpu=pool.gpu, node=pool.nodes[0])
        if not evaluation.fits:
            out.refuse(engine, layout, artifact.name, "memory", memory_reason(option.per_card), option=option)
            continue
        accepted = option
    return accepted


def evaluate_layout(shape: ModelShape, precision: Precision, layout: Layout, gpu: GPUClass, request: PlanRequest,
                    model_ref: str):
    """Evaluate one vLLM or SGLang layout (the engine's own accounting)."""
    module = vllm if layout.engine == "vllm" else sglang
    return module.evaluate(shape, precision, layout, gpu, request, model_ref)


def recheck(shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str | None = None,
            speed: bool | SpeedSettings = True) -> Option:
    """The same way at another context or concurrency: weights and overhead stay, the KV cache changes.

    The speed estimate is recomputed for the new request (with ``speed``), else dropped.
    """
    if option.layout.engine == "llamacpp":
        from explorer.engines.llamacpp import engine as llamacpp

        out = llamacpp.recheck(shape, option, request, model_ref=model_ref)
    else:
        precision = precision_of(shape, option.artifact)
        ev = evaluate_layout(shape, precision, option.layout, option.gpu, request, model_ref or shape.name)
        out = option.with_evaluation(ev)
    settings = speed if isinstance(speed, SpeedSettings) else None
    return replace(out, speed=speed_of(out, shape, request, settings) if speed else None)


def plan(shape: ModelShape, cluster: Cluster, request: PlanRequest | None = None, *,
         artifacts: Sequence[Artifact] | None = None, model_ref: str | None = None,
         sort: SortKey = "default", speed: bool | SpeedSettings = True) -> PlanResult:
    """Every way ``shape`` can run on ``cluster``, best first, and the refused ways with reasons.

    With ``speed`` (True, or :class:`~explorer.speed.estimate.SpeedSettings`) each option carries its
    speed-of-light bound and estimate (``Option.speed``, see :mod:`explorer.speed.estimate`); ``sort="speed"``
    ranks on it.
    """
    request = request or PlanRequest()
    if request.context_tokens < 1 or request.concurrency < 1:
        raise PlanError(f"context ({request.context_tokens}) and concurrency ({request.concurrency}) must be ≥ 1")
    if not 0 < request.gpu_memory_utilization <= 1:
        raise PlanError(f"gpu_memory_utilization must be in (0, 1], got {request.gpu_memory_utilization}")
    model_ref = model_ref or shape.name or "MODEL"
    if artifacts is None:
        artifacts = [what_if_artifact(shape, request.precision) if request.precision else original_artifact(shape)]
    out = _Collector()
    for engine in request.engines:
        if engine == "llamacpp":
            from explorer.engines.llamacpp import engine as llamacpp

            llamacpp.walk(shape, cluster, artifacts, request, model_ref, out)
            continue
        _walk_gpu_engine(engine, shape, cluster, artifacts, request, model_ref, out)
    options = out.options
    if speed:
        settings = speed if isinstance(speed, SpeedSettings) else None
        options = [replace(o, speed=speed_of(o, shape, request, settings)) for o in options]
    return PlanResult(model=model_ref, request=request, options=tuple(rank(options, sort)),
                      rejected=tuple(out.rejected), pruned=dict(out.pruned), considered=out.considered)


def _walk_gpu_engine(engine: str, shape: ModelShape, cluster: Cluster, artifacts: Sequence[Artifact],
                     request: PlanRequest, model_ref: str, out: _Collector) -> None:
    for artifact in artifacts:
        if artifact.format != "safetensors":
            out.refuse(engine, None, artifact.name, "format", f"{engine} serves safetensors weights, not {artifact.format}")
            continue
        precision = precision_of(shape, artifact)
        if request.context_tokens > shape.max_context_tokens:
            out.refuse(engine, None, artifact.name, "context-limit",
                       f"context {request.context_tokens:,} exceeds the model's limit of {shape.max_context_tokens:,} tokens")
            continue
        for node in cluster.unified_nodes:
            out.refuse(engine, None, artifact.name, "platform",
                       f"{engine} does not run on unified-memory host {node.name} (use llama.cpp)")
        for pool in gpu_pools(cluster):
            _walk_pool(engine, shape, artifact, precision, pool, request, model_ref, out)
