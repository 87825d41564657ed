"""Replicas: how many copies of an option the cluster holds at once, and how to start them all.

Counting is :class:`explorer.hardware.copies.Census` (cards counted, alike
nodes together, never enumerated): a one-node layout of ``w`` cards takes ``count // w`` copies on
each node of its class, whatever the fabric; a layout spanning ``n`` nodes
takes copies of ``n`` distinct nodes of one fabric; a MIG slice is one copy;
a CPU-only or unified-memory option one copy a host that holds it. llama.cpp
also needs host RAM for each copy (the layers and buffers it keeps there), so
a node holds at most ``RAM × host_fraction // that`` copies; a vLLM or SGLang
launch that claims host RAM (swap space, a hierarchical cache) at most
what the engine lets its claims take of the RAM // one launch's claim.

A launch with the user's ``--dp`` (plain data parallelism) is one copy: its
dp replicas sit side by side on its cards, so copies are counted of the
whole launch, as the walk laid it out.

Starting them (:func:`replica_launch`):

- one copy: the option's own command, on the node and cards the plan chose;
- a single-node layout without pipeline stages, on an engine that starts
  copies itself: one launch a node with its flag, ``vllm serve …
  --data-parallel-size 4`` (vLLM's data parallelism, one API server over 4
  engines) or SGLang's ``--dp-size 4``; never vLLM's for a mixture of experts,
  whose data-parallel ranks are one model, not copies (vLLM's
  ``FusedMoEParallelConfig.make`` spreads the experts over dp × tp ranks, as
  expert parallelism with ``--enable-expert-parallel``, else as tensor
  parallelism, and every rank steps with the others): 4 copies of tp 2 × ep 2
  written as ``--tensor-parallel-size 2 --data-parallel-size 4`` would start
  one model of ep 8 on the 8 cards;
- otherwise one launch a copy, each with its GPU list
  (``CUDA_VISIBLE_DEVICES=2,3 … --port 8001``), behind a load balancer;
  a copy across nodes is a line a node (its rank, the head's address as a placeholder); a llama.cpp copy over
  RPC is its main server's line and a line an ``rpc-server``, each copy on nodes of its own cards (the engine's
  placeholder nodes, ``<node1>``, named), its RPC ports moved so that no two copies share one.

Every line names its devices and its port (:mod:`explorer.plan.launch_lines`).
The lines are written from runs of consecutive alike nodes (:func:`explorer.hardware.copies.class_runs`, found
once per cluster), never node by node: an option's lines cost the same on 12,500 nodes as on three.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any, Literal

from explorer.engines.options import Option
from explorer.engines.registry import engine_named
from explorer.engines.request import PlanRequest
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.copies import Census, HostCap, NodeRun, class_runs, host_kinds
from explorer.plan.launch_lines import (
    FIRST_PORT,
    class_positions,
    launch_lines,
    on_devices,
    placeholder_node,
    several_classes,
)

__all__ = ["MAX_LINES", "Census", "ReplicaLaunch", "replica_launch", "with_replicas"]

#: launch lines listed; the rest are counted
MAX_LINES = 8


def _host_cap(option: Option, request: PlanRequest) -> HostCap:
    """Each copy's host RAM: a node holds as many copies as its RAM allows them together.

    llama.cpp keeps part of each copy in host RAM, within ``host_fraction`` of it; vLLM's swap space and
    SGLang's hierarchical-cache pool are claimed per launch (:mod:`explorer.engines.host_ram`), within the
    share (or less the reserve) the engine allows a claim.
    """
    host = option.evaluation.host
    if host is None or host.total <= 0:
        return None
    host_claim = getattr(engine_named(option.engine), "host_claim", None)  # a SplitEngine's (vLLM, SGLang)
    if host_claim is not None:
        claim = host_claim(option.layout, option.evaluation, request)
        if claim.bytes_per_node <= 0:
            return None
        return lambda host_ram_bytes: claim.usable_of(host_ram_bytes) // claim.bytes_per_node
    need = host.total
    return lambda host_ram_bytes: int(host_ram_bytes * request.host_fraction) // need


def _count(option: Option, cluster: Cluster, census: Census, request: PlanRequest, *, now: bool) -> int:
    layout, ev = option.layout, option.evaluation
    if layout.cpu:
        need = ev.host.total if ev.host is not None else 0
        return sum(
            many
            for n, many in host_kinds(cluster)
            if int(n.host_ram_bytes * request.host_fraction) >= need and (not now or n.host_free_bytes >= need)
        )
    return census.copies(
        layout.gpu_class,
        layout.nodes,
        layout.gpus_per_node,
        needed_bytes=ev.free_needed_bytes if now else None,
        host_cap=_host_cap(option, request),
    )


def with_replicas(option: Option, cluster: Cluster, request: PlanRequest, census: Census | None = None) -> Option:
    """The option with ``replicas`` (on every card) and ``replicas_now`` (on the cards free now) counted.

    ``census``: the cluster's :class:`Census`, when one is at hand (a plan builds it once).
    """
    census = census or Census(cluster)
    total = _count(option, cluster, census, request, now=False)
    return replace(option, replicas=max(total, 1), replicas_now=_count(option, cluster, census, request, now=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaLaunch:
    """How to start every replica of an option.

    Attributes:
        replicas: copies started.
        method: ``one`` (a single copy), ``data-parallel`` (the engine starts a node's copies in one
            launch: vLLM ``--data-parallel-size``, SGLang ``--dp-size``) or ``instances`` (one launch a
            copy, each with its GPU list and port, behind a load balancer).
        lines: ``where: command`` lines, the first :data:`MAX_LINES`.
        more: lines left out.
    """

    replicas: int
    method: Literal["one", "data-parallel", "instances"]
    lines: tuple[str, ...]
    more: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"replicas": self.replicas, "method": self.method, "lines": list(self.lines), "more": self.more}

    def text(self) -> str:
        """The lines, with a count of those left out."""
        tail = [f"… and {self.more:,} more launch(es) alike"] if self.more else []
        return "\n".join([*self.lines, *tail])


def replica_launch(
    option: Option, cluster: Cluster, request: PlanRequest | None = None, *, moe: bool = False
) -> ReplicaLaunch:
    """The launch lines for all ``option.replicas`` copies (see the module docstring), each on its devices with
    its port (:mod:`explorer.plan.launch_lines`); ``moe``: the model is a mixture of experts."""
    layout, n, ev = option.layout, max(1, option.replicas), option.evaluation
    method: Literal["one", "instances"] = "one" if n == 1 else "instances"
    request = request or PlanRequest()
    if layout.cpu or layout.unified:
        holds = (m for m in cluster.nodes if (m.is_cpu_only if layout.cpu else m.unified))
        hosts = list(islice(holds, min(n, MAX_LINES))) or [option.node]  # the first few: lines are capped
        lines = tuple(f"{m.name}: {on_devices(ev.command, (), FIRST_PORT)}" for m in hosts)  # type: ignore[union-attr]
        return ReplicaLaunch(replicas=n, method=method, lines=lines, more=max(0, n - len(lines)))
    # one launch where the plan put it (RPC servers name their cards, or copies of one over RPC do not need naming)
    rpc_once = layout.rpc and (n == 1 or not all(placeholder_node(w) for w in ev.workers))
    if rpc_once or (n == 1 and layout.nodes == 1):
        node = option.node
        head = class_positions(node, layout.gpu_class, layout.gpus_per_node) if node is not None else []
        place = [(node.name if node is not None else "<node1>", head)]
        lines = launch_lines(ev, place, FIRST_PORT, bus_order=several_classes(node))
        # a launch is written whole (every RPC server of it), whatever MAX_LINES says of copies
        return ReplicaLaunch(replicas=n, method=method, lines=tuple(lines), more=max(0, n - 1))
    slots = [(run, k) for run in class_runs(cluster, layout.gpu_class)
             if (k := run.slots(layout.gpus_per_node, host_cap=_host_cap(option, request)))]  # fmt: skip
    flag = _copies_flag(option.engine, moe=moe)
    if n > 1 and layout.nodes == 1 and flag and layout.pp == 1 and layout.dp == 1 and flag not in ev.command.split():
        return _data_parallel(option, flag, slots, n)
    if layout.nodes == 1:
        return _instances(option, slots, n)
    return _spanning(option, slots, n)


def _copies_flag(engine: str, *, moe: bool) -> str | None:
    """The flag that starts a node's copies in one launch, or None: one launch a copy. An engine whose
    data-parallel ranks of a mixture of experts share the experts (``expert_data_parallel``: vLLM) makes one
    model of them, never copies."""
    spec = engine_named(engine)
    return None if moe and spec.expert_data_parallel else spec.data_parallel_flag


@dataclass(frozen=True, slots=True)
class _Alike:
    """Consecutive nodes that take as many copies each, their cards numbered alike (runs of :func:`class_runs`
    joined): one launch line serves them all.

    Attributes:
        slots: copies each node takes.
        make: each node's classes and their counts, in order (:attr:`NodeRun.make`).
        first: the first node (its cards' positions are every node's).
        last: the last node.
        count: how many nodes.
    """

    slots: int
    make: tuple[tuple[str, int], ...]
    first: Node
    last: Node
    count: int

    def where(self) -> str:
        """The node's name, or the run of them."""
        if self.count == 1:
            return self.first.name
        return f"each of {self.count:,} nodes ({self.first.name} … {self.last.name})"


def _by_slots(slots: list[tuple[NodeRun, int]]) -> list[_Alike]:
    """Runs of consecutive nodes with the same slot count and the same classes in order."""
    out: list[_Alike] = []
    for run, k in slots:
        if out and (out[-1].slots, out[-1].make) == (k, run.make):
            out[-1] = replace(out[-1], last=run.nodes[-1], count=out[-1].count + len(run.nodes))
        else:
            out.append(_Alike(slots=k, make=run.make, first=run.nodes[0], last=run.nodes[-1], count=len(run.nodes)))
    return out


def _data_parallel(option: Option, flag: str, slots: list[tuple[NodeRun, int]], n: int) -> ReplicaLaunch:
    """A launch a run of alike nodes, its ``k`` copies on the node's first ``k × width`` cards of the class."""
    layout, ev = option.layout, option.evaluation
    lines = []
    for alike in _by_slots(slots):
        k, node = alike.slots, alike.first
        command = ev.command + (f" {flag} {k}" if k > 1 else "")
        devices = class_positions(node, layout.gpu_class, k * layout.gpus_per_node)
        lines.append(f"{alike.where()}: {on_devices(command, devices, FIRST_PORT, bus_order=several_classes(node))}")
    return ReplicaLaunch(
        replicas=n, method="data-parallel", lines=tuple(lines[:MAX_LINES]), more=max(0, len(lines) - MAX_LINES)
    )


def _instances(option: Option, slots: list[tuple[NodeRun, int]], n: int) -> ReplicaLaunch:
    """A launch a copy: copy ``j`` of a node on its ``j``-th ``width`` cards of the class, port 8000 + ``j``."""
    layout, ev = option.layout, option.evaluation
    width = layout.gpus_per_node
    lines: list[str] = []
    alikes = _by_slots(slots)
    for alike in alikes:
        k, node = alike.slots, alike.first
        positions = class_positions(node, layout.gpu_class, min(k, MAX_LINES) * width)
        for j in range(k):
            if len(lines) >= MAX_LINES:
                break
            devices = positions[j * width : (j + 1) * width]
            lines += launch_lines(ev, [(alike.where(), devices)], FIRST_PORT + j, bus_order=several_classes(node))
    launches = sum(alike.slots for alike in alikes)  # one a copy slot of each run of alike nodes
    return ReplicaLaunch(replicas=n, method="instances", lines=tuple(lines), more=max(0, launches - len(lines)))


def _spanning(option: Option, slots: list[tuple[NodeRun, int]], n: int) -> ReplicaLaunch:
    """Copies over ``nodes`` nodes of one fabric each, the first few laid out greedily (most slots left first):
    a line a node of each copy, the head's with its port (one a copy headed on that node)."""
    layout, ev = option.layout, option.evaluation
    nodes, width = layout.nodes, layout.gpus_per_node
    per_copy = 1 + len(ev.workers)  # the head's line and one a worker (a rank, an RPC server)
    lines: list[str] = []
    copies = 0
    for members in _fabric_members(slots, nodes * max(1, MAX_LINES // per_copy)).values():
        left = {m.name: k for m, k in members}
        by_name = {m.name: m for m, _ in members}
        used = dict.fromkeys(left, 0)
        heads = dict.fromkeys(left, 0)
        while copies < n and len(lines) + per_copy <= MAX_LINES:
            chosen = sorted(left, key=lambda name: -left[name])[:nodes]
            if len(chosen) < nodes or left[chosen[-1]] < 1:
                break
            placed = []
            for name in chosen:
                positions = class_positions(by_name[name], layout.gpu_class, (used[name] + 1) * width)
                placed.append((name, positions[used[name] * width :]))
                left[name] -= 1
                used[name] += 1
            mixed = any(several_classes(by_name[name]) for name in chosen)
            # the API port counts the launches this node heads; the meeting ports count every copy before it
            lines += launch_lines(ev, placed, FIRST_PORT + heads[chosen[0]], bus_order=mixed, copy=copies)
            heads[chosen[0]] += 1
            copies += 1
    if not lines:  # no copy fits the cards free of others: the layout on nodes the user picks
        lines = launch_lines(ev, [(f"<node{i + 1}>", list(range(width))) for i in range(nodes)], FIRST_PORT)
        copies = 1
    return ReplicaLaunch(
        replicas=n, method="one" if n == 1 else "instances", lines=tuple(lines), more=max(0, n - copies)
    )


def _fabric_members(slots: list[tuple[NodeRun, int]], most: int) -> dict[str, list[tuple[Node, int]]]:
    """Each fabric's nodes with their slots, in node order, keeping of the nodes that start with ``k`` slots only
    the first ``most``: the greedy of :func:`_spanning` lays out at most ``most`` node-slots (copies × nodes), and
    among nodes alike so far it takes the earliest first, so the nodes it never reaches are left out and a fabric
    of 12,500 nodes costs what one of ``most`` does."""
    out: dict[str, list[tuple[Node, int]]] = {}
    kept: Counter[tuple[str, int]] = Counter()
    for run, k in slots:
        fabric = run.fabric
        if fabric is None:
            continue
        take = run.nodes[: max(0, most - kept[fabric, k])]
        kept[fabric, k] += len(take)
        out.setdefault(fabric, []).extend((m, k) for m in take)
    return out
