"""Manual pinning: the user names the GPUs; explorer checks them and says by how much they overcommit.

GPUs are named ``NODE:INDEX`` (``h100-80g@ib0#0:3``), or by index alone
when the cluster has one GPU node. Pinning is checked for the engines that
split a replica tensor × pipeline (:data:`explorer.engines.registry.SPLIT_ENGINES`:
vLLM, SGLang). All pinned GPUs must be of one class, and the same number on
each node. The pinned cards are laid out as the planner would lay them (the
best tensor × pipeline split the rules allow), then each card's need is
compared with what the engine may use there, and with what is free on it now
(:meth:`explorer.hardware.cluster.GPUGroup.free_bytes_on`: a busy card has nothing free).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.engines.common import PlanRequest
from explorer.engines.options import Option
from explorer.engines.registry import SPLIT_ENGINES
from explorer.errors import ManualSelectionError
from explorer.hardware.cluster import Cluster
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.offer import original_artifact
from explorer.units import gib


@dataclass(frozen=True, kw_only=True)
class PinnedResult:
    """A check of user-pinned GPUs.

    Attributes:
        option: the layout on exactly those GPUs, with its per-card memory.
        overcommit_bytes: bytes over what the engine may use, on the worst card (0: it fits).
        short_now_bytes: bytes over what is free right now on the worst pinned card (0: free enough).
        message: what to tell the user.
    """

    option: Option
    overcommit_bytes: int
    short_now_bytes: int
    message: str

    @property
    def overcommitted(self) -> bool:
        """Whether the pinned cards cannot hold the model as asked."""
        return self.overcommit_bytes > 0


def _resolve_gpus(cluster: Cluster, gpus: Sequence[str]) -> list[tuple[str, int]]:
    gpu_nodes = cluster.gpu_nodes
    out = []
    for text in gpus:
        node_name, _, index = text.rpartition(":")
        if not node_name:
            if len(gpu_nodes) != 1:
                raise ManualSelectionError(
                    f"GPU {text!r}: name it NODE:INDEX; the cluster has {len(gpu_nodes)} GPU nodes"
                )
            node_name = gpu_nodes[0].name
        node = cluster.node(node_name)
        if node is None:
            raise ManualSelectionError(
                f"GPU {text!r}: no node named {node_name!r}", hint=f"nodes: {', '.join(n.name for n in gpu_nodes[:6])}"
            )
        if not index.isdigit() or not 0 <= int(index) < node.gpu_count:
            raise ManualSelectionError(f"GPU {text!r}: node {node_name} has GPUs 0..{node.gpu_count - 1}")
        out.append((node.name, int(index)))
    if len(set(out)) != len(out):
        raise ManualSelectionError("a GPU is pinned twice")
    return out


def check_pinned(
    shape: ModelShape,
    cluster: Cluster,
    gpus: Sequence[str],
    *,
    engine: str = "vllm",
    request: PlanRequest | None = None,
    artifact: Artifact | None = None,
    model_ref: str | None = None,
) -> PinnedResult:
    """Lay the model over exactly the pinned GPUs and report any overcommit."""
    request = request or PlanRequest()
    split_engine = SPLIT_ENGINES.get(engine)
    if split_engine is None:
        raise ManualSelectionError(f"pinning is checked for {' and '.join(SPLIT_ENGINES)}, not {engine}")
    if not gpus:
        raise ManualSelectionError("no GPUs pinned")
    picked = _resolve_gpus(cluster, gpus)
    per_node = Counter(name for name, _ in picked)
    if len(set(per_node.values())) != 1:
        raise ManualSelectionError(f"pinned GPUs must be as many on each node: {dict(per_node)}")
    nodes = [cluster.node(name) for name in per_node]
    classes = {n.gpus[0].gpu.name if len(n.gpus) == 1 else "mixed" for n in nodes}  # type: ignore[union-attr]
    if len(classes) != 1 or "mixed" in classes:
        raise ManualSelectionError(f"pinned GPUs must be of one class, got {sorted(classes)}")
    gpu = nodes[0].gpus[0].gpu  # type: ignore[union-attr]
    fabrics = {n.fabric for n in nodes}  # type: ignore[union-attr]
    if len(nodes) > 1 and (len(fabrics) != 1 or None in fabrics):
        raise ManualSelectionError("pinned GPUs span nodes that share no fabric")
    width = next(iter(per_node.values()))
    pool = Pool(gpu=gpu, nodes=tuple(nodes), fabric=nodes[0].fabric, spannable=len(nodes) > 1)  # type: ignore[arg-type]
    artifact = artifact or original_artifact(shape)
    precision = shape.precision_of(artifact)
    reasons: list[str] = []
    for tp, pp in split_engine.decompositions(len(nodes), width, request):
        layout = split_engine.make_layout(pool, len(nodes), width, tp, pp, shape, request)
        refused = split_engine.refusals(shape, layout, request)
        if refused:
            reasons.append(refused[0][1])
            continue
        ev = split_engine.evaluate(shape, precision, layout, gpu, request, model_ref or shape.name)
        option = Option(
            layout=layout,
            artifact=artifact,
            precision=precision.name,
            bits_per_weight=shape.bits_per_weight(precision),
            evaluation=ev,
            free_now=True,
            hosts=1,
            gpu=gpu,
        )
        return _judge(option, cluster, picked, ev.free_needed_bytes)
    raise ManualSelectionError(f"no split of the {len(picked)} pinned GPUs is allowed: {reasons[0]}")


def _judge(option: Option, cluster: Cluster, picked: list[tuple[str, int]], free_needed: int) -> PinnedResult:
    worst = option.per_card
    over = max(0, worst.total - worst.usable)
    groups = {name: cluster.node(name).gpus[0] for name, _ in picked}  # type: ignore[union-attr]
    free, name, index = min((groups[name].free_bytes_on(index), name, index) for name, index in picked)
    short = max(0, free_needed - free)
    cards = len(picked)
    if over:
        message = (
            f"Manual GPU selection overcommits: {worst.role} needs {gib(worst.total)} but has "
            f"{gib(worst.usable)} usable, {gib(over)} over ({cards} pinned GPUs; "
            f"{gib(over * worst.count)} over in all)"
        )
    elif short and index >= groups[name].free_count:
        message = (
            f"The pinned GPUs hold the model, but GPU {name}:{index} is busy now: a workload holds it, "
            f"and the engine needs {gib(free_needed)} free on it to start"
        )
    elif short:
        message = (
            f"The pinned GPUs hold the model, but GPU {name}:{index} has {gib(short)} less free now than "
            f"the engine needs to start ({gib(free_needed)})"
        )
    else:
        message = f"The {cards} pinned GPUs hold the model: {gib(worst.headroom)} to spare on the fullest card"
    return PinnedResult(option=option, overcommit_bytes=over, short_now_bytes=short, message=message)
