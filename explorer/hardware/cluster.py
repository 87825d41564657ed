"""The cluster model: nodes, their GPUs by class, and how nodes may be spanned.

A cluster is written as text or as a file. The text grammar (full reference
with examples in ``docs/cluster_spec.md``)::

    spec    := term ( "+" term )*                  spaces around "+" allowed
    term    := NODES "x" body [ "@" FABRIC ] ( "," option )*
    body    := GPUS "x" CLASS                      2x8xh100-80g, 1x7xa100-80g-mig-1g.10gb, 1x1xh100:81559MiB
             | "cpu-" RAM                          1xcpu-256g: no GPUs, 256 GiB of RAM
             | "uma-" RAM                          1xuma-128g: unified memory (a Mac), 128 GiB
    option  := "ram=" RAM                          host RAM of each GPU node
             | "free=" INT                         free GPUs per node (0..GPUS)
             | "free=" FRACTION | "free=" SIZE    free memory of each card (0.75, 60GiB)
    RAM     := number "g" (GiB) | number "t" (TiB) | a size with a unit (512GiB, 500GB)
    FABRIC  := [A-Za-z0-9_.-]+                     nodes sharing a fabric may be spanned

CLASS is anything :meth:`explorer.hardware.catalogue.Catalogue.resolve` accepts. Nodes
without ``@FABRIC`` stand alone: a replica never spans them. A GPU node's
host RAM, when not stated, is assumed to be max(64 GiB, 2 × its GPU memory)
(``host_ram_assumed``). A unified host is one "GPU" of class ``uma-RAMg`` (or
an Apple class) whose memory is the RAM; the GPU may use only Metal's working
set of it (:attr:`Node.gpu_usable_limit_bytes`). Every malformed spec raises
:class:`ClusterSpecError` naming the term, never another exception.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from explorer.errors import ClusterSpecError, capped_list
from explorer.hardware.catalogue import GPUClass, metal_working_set_bytes
from explorer.hardware.host_cpu import DEFAULT_CPU, HostCPU
from explorer.units import GiB, TiB

T = TypeVar("T")

MAX_GPUS = 100_000  # a whole cluster, GPUs and nodes each
MAX_RAM_BYTES = 1024 * TiB
GRAMMAR = (
    "grammar: NODESxGPUSxCLASS[@FABRIC][,ram=RAM][,free=N|FRACTION|SIZE][,cpu=avx2|avx512|amx|NAME][,bw=GB/s] joined by '+', "
    "or NODESxcpu-RAM / NODESxuma-RAM; e.g. 2x8xh100-80g@ib0 + 1x4xl40s-48g,free=2 + 1xcpu-256g"
)


def default_host_ram_bytes(gpu_memory_bytes: int) -> int:
    """Host RAM assumed for a GPU node that does not state it: max(64 GiB, 2 × its GPU memory).

    Twice the GPU memory is what a server vendor fits to stage weights through
    RAM (an 8 × H100 node: 1,274 GiB assumed, 2 TiB typical); the 1 PiB cap only
    keeps absurd nodes representable.
    """
    return min(max(64 * GiB, 2 * gpu_memory_bytes), MAX_RAM_BYTES)


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUGroup:
    """A node's devices of one class.

    Attributes:
        gpu: the class of every device in the group (a MIG slice is a class of its own).
        count: devices in the group.
        free_count: devices no workload holds now: the first ``free_count`` by index; the others are busy.
        free_bytes: free bytes per card when known (the least of ``card_free_bytes`` when those are given).
        card_free_bytes: free bytes of each card, when known one by one; else empty.
    """

    gpu: GPUClass
    count: int
    free_count: int
    free_bytes: int | None = None
    card_free_bytes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        name = self.gpu.name
        if self.count < 1 or not 0 <= self.free_count <= self.count:
            raise ClusterSpecError(
                f"{name}: {self.count} GPUs with {self.free_count} free is impossible",
                hint="count >= 1 and 0 <= free <= count",
            )
        if self.card_free_bytes and len(self.card_free_bytes) != self.count:
            raise ClusterSpecError(f"{name}: {len(self.card_free_bytes)} per-card free figures for {self.count} cards")
        for free in (self.free_bytes, *self.card_free_bytes):
            if free is not None and not 0 <= free <= self.gpu.memory_bytes:
                raise ClusterSpecError(f"{name}: {free:,} bytes free on a card of {self.gpu.memory_bytes:,} bytes")

    @property
    def alike_key(self) -> tuple:
        """What makes two groups alike (class name, counts, free figures), cheap to hash: alike nodes are
        counted together by it (:mod:`explorer.hardware.pools`, :mod:`explorer.hardware.copies`)."""
        return (self.gpu.name, self.count, self.free_count, self.free_bytes, self.card_free_bytes)

    @property
    def memory_bytes(self) -> int:
        """Total memory of the group's devices."""
        return self.count * self.gpu.memory_bytes

    @property
    def max_replica_width(self) -> int:
        """Most devices of this group one replica may use: 1 for MIG slices, else all."""
        return 1 if self.gpu.is_mig else self.count

    def free_bytes_on(self, index: int) -> int:
        """Free bytes on card ``index`` of the group right now.

        0 on a busy card (``index >= free_count``); else its own figure from
        ``card_free_bytes``, else ``free_bytes``, else the whole card when nothing
        is known of its use. ``free_bytes: 0`` means nothing is free, not "unknown".
        """
        if not 0 <= index < self.free_count:
            return 0
        if self.card_free_bytes:
            return self.card_free_bytes[index]
        return self.gpu.memory_bytes if self.free_bytes is None else self.free_bytes

    def free_bytes_for(self, width: int) -> int:
        """Free bytes per card a replica on ``width`` of these cards can count on (0 if it cannot have them):
        the ``width``-th largest of :meth:`free_bytes_on` over the group's cards.

        Counted, not enumerated: without per-card figures every free card has the same free bytes,
        so a 100,000-card group costs what an 8-card one does.
        """
        if not 1 <= width <= self.count:
            return 0
        if not self.card_free_bytes:
            return self.free_bytes_on(0) if width <= self.free_count else 0
        return self._free_sorted[width - 1]

    def cards_free_for(self, needed_bytes: int) -> int:
        """How many of the group's cards have at least ``needed_bytes`` free right now (see :meth:`free_bytes_on`)."""
        if not self.card_free_bytes:
            return self.free_count if self.free_count and self.free_bytes_on(0) >= needed_bytes else 0
        return sum(1 for free in self._free_sorted if free >= needed_bytes)

    @property
    def _free_sorted(self) -> tuple[int, ...]:
        """:meth:`free_bytes_on` of every card, largest first (only used with per-card figures, which a file gives)."""
        return tuple(sorted((self.free_bytes_on(k) for k in range(self.count)), reverse=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One machine.

    Attributes:
        name: unique in the cluster: ``h100-80g@ib0#1``.
        fabric: the network it shares with nodes a replica may span; None stands alone.
        gpus: its devices by class; empty for a CPU-only node.
        host_ram_bytes: its RAM (for a unified host, the memory the GPU shares).
        host_free_bytes: RAM no workload holds now.
        unified: GPU memory is the host RAM (Apple M-series and other UMA hosts).
        host_ram_assumed: the RAM was not stated but set by :func:`default_host_ram_bytes`.
        cpu: its host CPU (:mod:`explorer.hardware.host_cpu`); x86-64 with AVX2 when not stated.
    """

    name: str
    fabric: str | None = None
    gpus: tuple[GPUGroup, ...] = ()
    host_ram_bytes: int
    host_free_bytes: int
    unified: bool = False
    host_ram_assumed: bool = False
    cpu: HostCPU = DEFAULT_CPU

    def __post_init__(self) -> None:
        if not 0 < self.host_ram_bytes <= MAX_RAM_BYTES or not 0 <= self.host_free_bytes <= self.host_ram_bytes:
            raise ClusterSpecError(
                f"node {self.name}: host RAM {self.host_ram_bytes:,} bytes with "
                f"{self.host_free_bytes:,} free is impossible"
            )
        if len({g.gpu.name for g in self.gpus}) != len(self.gpus):
            raise ClusterSpecError(f"node {self.name}: a GPU class appears twice; give one group per class")

    @property
    def gpu_count(self) -> int:
        """Devices on the node, all classes."""
        return sum(g.count for g in self.gpus)

    @property
    def free_gpu_count(self) -> int:
        """Devices no workload holds now."""
        return sum(g.free_count for g in self.gpus)

    @property
    def is_cpu_only(self) -> bool:
        """True for a node without GPUs."""
        return not self.gpus

    @property
    def gpu_memory_bytes(self) -> int:
        """Total device memory on the node."""
        return sum(g.memory_bytes for g in self.gpus)

    @property
    def gpu_usable_limit_bytes(self) -> int:
        """Device memory a GPU workload may use in all: the Metal working set of a unified host's RAM
        (:func:`explorer.hardware.catalogue.metal_working_set_bytes`), else every card's memory (a CUDA
        unified-memory chip's too: :attr:`~explorer.hardware.catalogue.GPUClass.metal`)."""
        if self.unified and any(g.gpu.metal for g in self.gpus):
            return metal_working_set_bytes(self.host_ram_bytes)
        return self.gpu_memory_bytes

    def group(self, class_name: str) -> GPUGroup | None:
        """The node's devices of one class, or None."""
        return next((g for g in self.gpus if g.gpu.name == class_name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """All the nodes a plan may use.

    Attributes:
        nodes: every node, names unique.
    """

    nodes: tuple[Node, ...]
    _derived: dict[Callable[..., Any], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def derived(self, build: Callable[[Cluster], T]) -> T:
        """``build(self)``, built on first use and kept with the cluster (which never changes).

        What a plan derives from every node (its pools, the census of alike nodes) is then counted once per
        cluster, not once per plan: a slider move on a 100,000-GPU cluster costs what it does on 1,000.
        """
        if build not in self._derived:
            self._derived[build] = build(self)
        return self._derived[build]

    def __post_init__(self) -> None:
        dupes = sorted(name for name, k in Counter(n.name for n in self.nodes).items() if k > 1)
        if dupes:
            raise ClusterSpecError(f"node names repeat: {capped_list(dupes)}", hint="name every node once")
        if self.total_gpus > MAX_GPUS or len(self.nodes) > MAX_GPUS:
            raise ClusterSpecError(
                f"{self.total_gpus:,} GPUs on {len(self.nodes):,} nodes is beyond the {MAX_GPUS:,} explorer plans for"
            )

    @property
    def total_gpus(self) -> int:
        """Devices in the cluster (a MIG slice and a unified host each count as one)."""
        return sum(n.gpu_count for n in self.nodes)

    @property
    def free_gpus(self) -> int:
        """Devices no workload holds now."""
        return sum(n.free_gpu_count for n in self.nodes)

    @property
    def gpu_classes(self) -> tuple[GPUClass, ...]:
        """The classes present, in order of first appearance."""
        seen: dict[str, GPUClass] = {}
        for n in self.nodes:
            for g in n.gpus:
                seen.setdefault(g.gpu.name, g.gpu)
        return tuple(seen.values())

    @property
    def gpu_nodes(self) -> tuple[Node, ...]:
        """Nodes with at least one device."""
        return tuple(n for n in self.nodes if n.gpus)

    @property
    def cpu_nodes(self) -> tuple[Node, ...]:
        """Nodes without GPUs."""
        return tuple(n for n in self.nodes if n.is_cpu_only)

    @property
    def unified_nodes(self) -> tuple[Node, ...]:
        """Hosts whose GPU memory is their RAM."""
        return tuple(n for n in self.nodes if n.unified)

    @property
    def assumptions(self) -> tuple[str, ...]:
        """What a plan on this cluster assumes of its classes the catalogue lacks, said plainly: each such class
        (:attr:`GPUClass.assumed`) with the host RAM its nodes are assumed to have when the spec does not say.

        ``1x1xm3-pro-36g:36GiB``: ``m3-pro-36g:36864MiB is not in the catalogue: planned as a discrete card of
        36.0 GiB (…), of unknown memory bandwidth and TFLOPs (no speed estimate); its node's host RAM is assumed:
        72 GiB (max(64 GiB, 2 × its GPU memory); state it with ram=)``
        """
        out = []
        for gpu in self.gpu_classes:
            if gpu.assumed is None:
                continue
            assumed = sorted({n.host_ram_bytes for n in self.nodes_with(gpu.name) if n.host_ram_assumed})
            ram = (
                f"; its node's host RAM is assumed: {' / '.join(f'{r / GiB:,.0f} GiB' for r in assumed)} "
                "(max(64 GiB, 2 × its GPU memory); state it with ram=)"
                if assumed and not gpu.unified
                else ""
            )
            out.append(gpu.assumed + ram)
        return tuple(out)

    def node(self, name: str) -> Node | None:
        """The node of this name, or None."""
        return next((n for n in self.nodes if n.name == name), None)

    def nodes_with(self, class_name: str) -> tuple[Node, ...]:
        """Nodes holding devices of a class."""
        return tuple(n for n in self.nodes if n.group(class_name) is not None)

    def pools(self) -> dict[tuple[str, str | None], tuple[Node, ...]]:
        """Nodes per (class name, fabric), in order of appearance; fabric None gathers nodes that stand alone."""
        out: dict[tuple[str, str | None], list[Node]] = {}
        for n in self.nodes:
            for g in n.gpus:
                out.setdefault((g.gpu.name, n.fabric), []).append(n)
        return {k: tuple(v) for k, v in out.items()}

    def span_groups(self, class_name: str) -> tuple[tuple[Node, ...], ...]:
        """Sets of nodes one replica of a class may span: a fabric's nodes together, a fabric-less node alone.

        MIG slices never span: each of their nodes is a set of its own.
        """
        out: list[tuple[Node, ...]] = []
        for (cls, fabric), nodes in self.pools().items():
            if cls != class_name:
                continue
            if fabric is None or nodes[0].group(cls).gpu.is_mig:  # type: ignore[union-attr]
                out.extend((n,) for n in nodes)
            else:
                out.append(nodes)
        return tuple(out)


__all__ = [
    "GRAMMAR",
    "MAX_GPUS",
    "Cluster",
    "GPUGroup",
    "Node",
    "default_host_ram_bytes",
]
