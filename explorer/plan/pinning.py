"""Manual pinning: the user names the GPUs; explorer lays the model on exactly them and says how it fits.

GPUs are named ``NODE:INDEX`` (``h100-80g@ib0#0:3``; a node's cards are numbered
across its classes, :mod:`explorer.hardware.cards`), or by index alone when the
cluster has one GPU node. Each engine lays a launch over the cards by its own
rules (:meth:`explorer.engines.interface.Engine.pin`): vLLM and SGLang split
tensor × pipeline over cards of one class; llama.cpp takes any cards, splits
the layers by each card's memory and reaches other nodes through RPC.

- **World size.** With ``--tp``/``--pp``/``--dp`` the launch takes tp × pp × dp
  cards: more than pinned is refused; fewer uses that many of the pinned cards,
  on one node when one has enough, the ones with the most free memory first.
- **Replicas.** ``replicas`` R > 1 splits the pinned cards, in the order given,
  into R equal sets, one launch each. As gpustack schedules several pinned
  replicas, none may overcommit nor lack free memory now: that is refused. A
  launch across nodes (a distributed vLLM or SGLang instance) takes its nodes
  whole: two replicas never put distributed launches on the same node.
- **Launch.** :func:`pinned_launch` writes each replica's lines on exactly its cards
  (``CUDA_VISIBLE_DEVICES`` in the order the launch assumes, a port each, a line a node).
- **Judgement.** Each card's need is compared with what the engine may use on it
  (overcommit) and with what is free on it now
  (:meth:`explorer.hardware.cluster.GPUGroup.free_bytes_on`: a busy card has
  nothing free); the message gives both when both apply, with how many pinned
  cards have the free memory the engine needs and the usable and free GiB of
  them all together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.artifacts.offer import original_artifact
from explorer.engines.interface import PinnedLayout
from explorer.engines.options import Option
from explorer.engines.registry import engine_named
from explorer.engines.request import PlanRequest
from explorer.errors import ManualSelectionError
from explorer.hardware.cards import CardRef, node_cards
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.launch_lines import FIRST_PORT, launch_lines, several_classes
from explorer.units import gib


@dataclass(frozen=True, kw_only=True)
class PinnedResult:
    """A check of user-pinned GPUs.

    Attributes:
        option: the launch on the pinned GPUs (the first replica's), with its per-card memory.
        overcommit_bytes: bytes over what the engine may use, on the worst card or host (0: it fits).
        short_now_bytes: bytes short of what the engine needs free now, on the worst pinned card (0: free enough).
        message: what to tell the user.
        replicas: every replica's launch, the first being ``option``.
        replica_cards: the cards of each replica's launch, its main node's first.
        cards_used: pinned cards the launches run on.
        cards_pinned: cards the user pinned.
        cards_ready: used cards with the free memory the engine needs to start on them now.
        usable_bytes: what the engine may use of the used cards, together (bytes).
        free_bytes: what is free on the used cards now, together (bytes).
    """

    option: Option
    overcommit_bytes: int
    short_now_bytes: int
    message: str
    replicas: tuple[Option, ...] = ()
    replica_cards: tuple[tuple[CardRef, ...], ...] = ()
    cards_used: int = 0
    cards_pinned: int = 0
    cards_ready: int = 0
    usable_bytes: int = 0
    free_bytes: int = 0

    @property
    def overcommitted(self) -> bool:
        """Whether the pinned cards cannot hold the model as asked."""
        return self.overcommit_bytes > 0


def resolve_cards(cluster: Cluster, gpus: Sequence[str]) -> list[CardRef]:
    """The cards ``NODE:INDEX`` (or ``INDEX`` on a one-GPU-node cluster) names, in the order given.

    Raises:
        ManualSelectionError: an unknown node or index, or a card named twice.
    """
    gpu_nodes = cluster.gpu_nodes
    out: list[CardRef] = []
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
        cards = node_cards(node)
        if not index.isdigit() or not 0 <= int(index) < len(cards):
            raise ManualSelectionError(f"GPU {text!r}: node {node_name} has GPUs 0..{len(cards) - 1}")
        out.append(cards[int(index)])
    if len({c.name for c in out}) != len(out):
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
    artifacts: Sequence[Artifact] | None = None,
    model_ref: str | None = None,
    replicas: int = 1,
) -> PinnedResult:
    """Lay the model over exactly the pinned GPUs and report how it fits (see the module docstring).

    ``artifacts``: what may be loaded, the engine taking the first it serves (``artifact``: just one;
    neither: the original weights).

    Raises:
        ManualSelectionError: the pin is impossible, or ``replicas`` > 1 would overcommit.
    """
    request = request or PlanRequest()
    if replicas < 1:
        raise ManualSelectionError(f"replicas must be at least 1, got {replicas}")
    chosen_engine = engine_named(engine)
    if not gpus:
        raise ManualSelectionError("no GPUs pinned")
    picked = resolve_cards(cluster, gpus)
    sets = _replica_sets(picked, request, replicas)
    offered = list(artifacts) if artifacts else [artifact or original_artifact(shape)]
    layouts = [chosen_engine.pin(shape, s, offered, request, model_ref or shape.name) for s in sets]
    _check_distributed(layouts, chosen_engine.name)
    judged = [_judge(p) for p in layouts]
    used = sum(len(s) for s in sets)
    if replicas > 1:
        bad = [(i, j) for i, j in enumerate(judged, 1) if j.over or j.short]
        if bad:
            detail = "; ".join(f"replica {i}: {j.text}" for i, j in bad)
            raise ManualSelectionError(
                f"pinning {replicas} replicas allows no overcommit and no card short of free memory: {detail}",
                hint="pin more cards, fewer replicas, or one replica (which may overcommit and says by how much)",
            )
    first = judged[0]
    message = first.text
    if replicas > 1:
        message = f"{replicas} replicas on {len(sets[0])} pinned GPUs each: {message}"
    if used < len(picked):
        names = ", ".join(c.name for s in sets for c in s)
        message = f"uses {used} of the {len(picked)} selected GPUs ({names}); {message}"
    return PinnedResult(
        option=layouts[0].option,
        overcommit_bytes=max(j.over for j in judged),
        short_now_bytes=max(j.short for j in judged),
        message=message,
        replicas=tuple(p.option for p in layouts),
        replica_cards=tuple(p.cards for p in layouts),
        cards_used=used,
        cards_pinned=len(picked),
        cards_ready=sum(j.ready for j in judged),
        usable_bytes=sum(j.usable for j in judged),
        free_bytes=sum(j.free for j in judged),
    )


def pinned_launch(result: PinnedResult) -> tuple[str, ...]:
    """Each replica's launch lines on exactly its pinned cards, replica ``i`` on port 8000 + ``i`` (its nodes'
    meeting ports moved by ``i`` steps too): the main node's line first, then a line for each other node (a rank
    of a launch across nodes, an RPC server)."""
    lines: list[str] = []
    for i, (option, cards) in enumerate(zip(result.replicas, result.replica_cards, strict=True)):
        on_node: dict[str, list[int]] = {option.node.name: []} if option.node is not None else {}
        for card in cards:
            on_node.setdefault(card.node.name, []).append(card.position)
        mixed = any(several_classes(card.node) for card in cards)
        lines += launch_lines(option.evaluation, list(on_node.items()), FIRST_PORT + i, bus_order=mixed, copy=i)
    return tuple(lines)


def _replica_sets(picked: list[CardRef], request: PlanRequest, replicas: int) -> list[list[CardRef]]:
    """The cards of each replica's launch: the world size's worth each (else an equal share), in pinned order."""
    world = request.world_size
    if replicas == 1:
        if world is None or world == len(picked):
            return [picked]
        if world > len(picked):
            raise ManualSelectionError(
                f"the launch takes {world} GPUs (tp × pp × dp) but {len(picked)} are pinned",
                hint="pin as many GPUs as tp × pp × dp, or change --tp/--pp/--dp",
            )
        return [_fewest_nodes(picked, world)]
    per = world or len(picked) // replicas
    if per == 0 or (world is None and len(picked) % replicas):
        raise ManualSelectionError(f"{len(picked)} pinned GPUs do not split into {replicas} equal replicas")
    if per * replicas > len(picked):
        raise ManualSelectionError(
            f"{replicas} replicas of {per} GPUs (tp × pp × dp) need {per * replicas} GPUs; {len(picked)} are pinned"
        )
    return [picked[i * per : (i + 1) * per] for i in range(replicas)]


def _fewest_nodes(picked: list[CardRef], count: int) -> list[CardRef]:
    """``count`` of the pinned cards: on the one node that has enough (the most free there), else in pinned order;
    the cards with the most free memory first."""
    per_node = Counter(c.node.name for c in picked)
    roomy = [n for n, k in per_node.items() if k >= count]
    if not roomy:
        return picked[:count]

    def best_free(node: str) -> int:
        return sum(sorted((c.free_bytes for c in picked if c.node.name == node), reverse=True)[:count])

    node = max(roomy, key=best_free)
    mine = [c for c in picked if c.node.name == node]
    return sorted(mine, key=lambda c: (-c.free_bytes, picked.index(c)))[:count]


def _check_distributed(layouts: Sequence[PinnedLayout], engine: str) -> None:
    """One distributed launch (across nodes, not RPC) per node: replicas that span nodes may not share one."""
    owner: dict[str, int] = {}
    for i, p in enumerate(layouts, 1):
        lay = p.option.layout
        if lay.nodes < 2 or lay.rpc:
            continue
        for node in dict.fromkeys(c.node.name for c in p.cards):
            if node in owner:
                raise ManualSelectionError(
                    f"each node runs only one distributed {engine} instance: node {node} would hold replicas "
                    f"{owner[node]} and {i}",
                    hint="pin each replica's GPUs on nodes of its own, or give each replica one node",
                )
            owner[node] = i


@dataclass(frozen=True, slots=True, kw_only=True)
class _Judged:
    over: int
    short: int
    ready: int
    usable: int
    free: int
    text: str


def _judge(pinned: PinnedLayout) -> _Judged:
    option, cards, needs = pinned.option, pinned.cards, pinned.needs_bytes
    ev = option.evaluation
    worst = option.per_card
    records = list(ev.cards) + ([ev.host] if ev.host is not None else [])
    over_card = max(records, key=lambda c: c.total - c.usable)
    over = max(0, over_card.total - over_card.usable)
    frees = [c.free_bytes for c in cards]
    ready = sum(1 for f, n in zip(frees, needs, strict=True) if f >= n)
    short, card, need = max(((n - f, c, n) for c, f, n in zip(cards, frees, needs, strict=True)), key=lambda t: t[0])
    short = max(0, short)
    usable = option.cards_usable_bytes
    parts = []
    if over:
        parts.append(
            f"Manual GPU selection overcommits: {over_card.role} needs {gib(over_card.total)} but has "
            f"{gib(over_card.usable)} usable, {gib(over)} over ({len(cards)} pinned GPUs; "
            f"{gib(over * over_card.count)} over in all)"
        )
    if short and card.busy:
        parts.append(f"GPU {card.name} is busy now: a workload holds it, and the engine needs {gib(need)} free on it")
    elif short:
        parts.append(f"GPU {card.name} has {gib(short)} less free now than the engine needs to start ({gib(need)})")
    if not parts:
        parts.append(f"The {len(cards)} pinned GPUs hold the model: {gib(worst.headroom)} to spare on the fullest card")
    elif not over:
        parts.insert(0, "The pinned GPUs hold the model")
    if ev.layers_on_host:
        parts.append(f"{ev.layers_on_host} layers stay on the CPU")
    parts.append(
        f"{ready}/{len(cards)} of them have the free memory the engine needs now; together they offer "
        f"{gib(usable)} usable, {gib(sum(frees))} free now"
    )
    return _Judged(over=over, short=short, ready=ready, usable=usable, free=sum(frees), text="; ".join(parts))
