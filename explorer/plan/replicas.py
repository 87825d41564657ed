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

- one copy: the option's own command;
- a single-node layout without pipeline stages, on an engine that starts
  copies itself: one launch a node with its flag, ``vllm serve …
  --data-parallel-size 4`` (vLLM's data parallelism, one API server over 4
  engines) or SGLang's ``--dp-size 4``;
- otherwise one launch a copy, each with its GPU list
  (``CUDA_VISIBLE_DEVICES=2,3 … --port 8001``), behind a load balancer; a copy
  over nodes whose command has a line a node (vLLM's data-parallel head, then its
  ``--headless`` ranks) names each line's node.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from explorer.engines.common import PlanRequest
from explorer.engines.options import Option
from explorer.engines.registry import engine_named
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.copies import Census, HostCap, node_slots

__all__ = ["MAX_LINES", "Census", "ReplicaLaunch", "replica_launch", "with_replicas"]

#: launch lines listed; the rest are counted
MAX_LINES = 8
FIRST_PORT = 8000


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
        usable = [n for n in cluster.nodes if int(n.host_ram_bytes * request.host_fraction) >= need]
        return sum(1 for n in usable if n.host_free_bytes >= need) if now else len(usable)
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


def _where(nodes: list[Node]) -> str:
    if len(nodes) == 1:
        return nodes[0].name
    return f"each of {len(nodes):,} nodes ({nodes[0].name} … {nodes[-1].name})"


def _gpus(first: int, width: int) -> str:
    return ",".join(str(first + i) for i in range(width))


def replica_launch(option: Option, cluster: Cluster, request: PlanRequest | None = None) -> ReplicaLaunch:
    """The launch lines for all ``option.replicas`` copies (see the module docstring)."""
    command, layout, n = option.evaluation.command, option.layout, option.replicas
    if n <= 1:
        return ReplicaLaunch(replicas=1, method="one", lines=(command,))
    request = request or PlanRequest()
    if layout.cpu or layout.unified:
        hosts = [m for m in cluster.nodes if (m.is_cpu_only if layout.cpu else m.unified)][:n] or [option.node]
        lines = tuple(f"{m.name}: {command}" for m in hosts[:MAX_LINES])  # type: ignore[union-attr]
        return ReplicaLaunch(replicas=n, method="instances", lines=lines, more=max(0, n - len(lines)))
    slots = [(m, k) for m, k in node_slots(cluster, layout.gpu_class, layout.gpus_per_node,
                                             host_cap=_host_cap(option, request)) if k]  # fmt: skip
    flag = engine_named(option.engine).data_parallel_flag
    if layout.nodes == 1 and flag and layout.pp == 1 and layout.dp == 1:
        return _data_parallel(command, flag, slots, n)
    if layout.nodes == 1:
        return _instances(command, layout.gpus_per_node, slots, n)
    return _spanning(command, layout.nodes, layout.gpus_per_node, slots, n)


def _by_slots(slots: list[tuple[Node, int]]) -> list[tuple[int, list[Node]]]:
    """Runs of consecutive nodes with the same slot count."""
    runs: list[tuple[int, list[Node]]] = []
    for node, k in slots:
        if runs and runs[-1][0] == k:
            runs[-1][1].append(node)
        else:
            runs.append((k, [node]))
    return runs


def _data_parallel(command: str, flag: str, slots: list[tuple[Node, int]], n: int) -> ReplicaLaunch:
    runs = _by_slots(slots)
    lines = tuple(f"{_where(nodes)}: {command}" + (f" {flag} {k}" if k > 1 else "") for k, nodes in runs)
    return ReplicaLaunch(
        replicas=n, method="data-parallel", lines=lines[:MAX_LINES], more=max(0, len(lines) - MAX_LINES)
    )


def _instances(command: str, width: int, slots: list[tuple[Node, int]], n: int) -> ReplicaLaunch:
    lines: list[str] = []
    total = 0
    for k, nodes in _by_slots(slots):
        total += k * len(nodes)
        for j in range(k):
            if len(lines) < MAX_LINES:
                where = _where(nodes)
                lines.append(
                    f"{where}: CUDA_VISIBLE_DEVICES={_gpus(j * width, width)} {command} --port {FIRST_PORT + j}"
                )
    return ReplicaLaunch(replicas=n, method="instances", lines=tuple(lines), more=max(0, _launches(slots) - len(lines)))


def _launches(slots: list[tuple[Node, int]]) -> int:
    """Lines :func:`_instances` writes in all: one a copy slot of each run of alike nodes."""
    return sum(k for k, _ in _by_slots(slots))


def _spanning(command: str, nodes: int, width: int, slots: list[tuple[Node, int]], n: int) -> ReplicaLaunch:
    """Copies over ``nodes`` nodes of one fabric each: the first few laid out greedily (most slots left first)."""
    lines: list[str] = []
    fabrics: dict[str | None, list[tuple[Node, int]]] = {}
    for m, k in slots:
        if m.fabric is not None:
            fabrics.setdefault(m.fabric, []).append((m, k))
    for members in fabrics.values():
        left = {m.name: k for m, k in members}
        used = dict.fromkeys(left, 0)
        while len(lines) < MAX_LINES:
            chosen = sorted(left, key=lambda name: -left[name])[:nodes]
            if len(chosen) < nodes or left[chosen[-1]] < 1:
                break
            parts = []
            for name in chosen:
                parts.append(f"{name} GPUs {_gpus(used[name] * width, width)}")
                left[name] -= 1
                used[name] += 1
            per_node = command.splitlines()
            if len(per_node) == nodes:  # a line a node (vLLM's head, then --headless ranks): each its node
                lines.append("; ".join(f"{part}: {line}" for part, line in zip(parts, per_node, strict=True)))
            else:
                lines.append(f"{' + '.join(parts)}: {command}")
    return ReplicaLaunch(replicas=n, method="instances", lines=tuple(lines), more=max(0, n - len(lines)))
