"""Where a llama.cpp launch offloads its layers: the devices it offloads to, and how many layers a request lets it.

**Seats.** The cards a launch offloads to, each as a :class:`Seat`: the device llama.cpp sees and the card it
is. llama.cpp reads each device's free memory when it starts, and by default splits the layers in proportion
to it. A seat's device offers the card's memory less :data:`CUDA_CONTEXT_BYTES` (the CUDA runtime and cuBLAS
workspace, which llama.cpp does not print). Planned, a card is as it would be idle: its whole memory. *Now*, it
is what the cluster says is free on it (:attr:`explorer.hardware.cards.CardRef.free_bytes`), so a busy card
offers nothing and the split follows free memory. An RPC server (``rpc-server`` on another node, one card each)
is a seat of kind ``rpc`` with an endpoint for ``--rpc``.

**Layers** (:class:`Offload`): what ``-ngl`` and ``--no-cpu-offload`` allow. ``-ngl`` counts the output layer
as layer ``n_layer`` (see :mod:`explorer.engines.llamacpp.layers`), so a model of ``n_layer`` blocks has
``n_layer + 1`` offloadable layers. As a scheduler that takes ``-ngl`` from the user reads it (gpustack's GGUF
selector does the same):

- none given: every layout is tried: full offload, partial offload (some layers on
  the CPU) and CPU only; the last two only when CPU offload is allowed;
- ``-ngl 0``: CPU only;
- ``0 < N < n_layer + 1``: partial offload of exactly N layers, on the fewest cards
  that hold them; it needs CPU offload for the rest;
- ``N ≥ n_layer + 1`` (or negative, llama.cpp's "all"): full offload only.

``--no-cpu-offload`` forbids every layer on the CPU: no partial offload (one node's,
or across nodes through RPC) and no CPU-only option.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from explorer.engines.evaluation import CardMemory
from explorer.engines.llamacpp.settings import Device, DeviceKind
from explorer.engines.request import PlanRequest
from explorer.hardware.cards import CardRef
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Node
from explorer.units import MiB

CUDA_CONTEXT_BYTES = 512 * MiB
#: the port ``rpc-server`` listens on by default; further servers on one node count up from it
RPC_FIRST_PORT = 50052


@dataclass(frozen=True, slots=True, kw_only=True)
class Seat:
    """One offload device of a llama.cpp launch.

    Attributes:
        device: its name, kind, and the bytes llama.cpp may use on it.
        capacity_bytes: the card's whole memory (for a Mac's GPU, the host's RAM).
        endpoint: an RPC server's address (``<node>:50052``); empty for a local device.
        position: the card's position on its node (``NODE:INDEX``'s index, what ``CUDA_VISIBLE_DEVICES``
            names), when the seat is a known card.
    """

    device: Device
    capacity_bytes: int
    endpoint: str = ""
    position: int | None = None


def _room(capacity: int, free: int | None) -> int:
    """What llama.cpp may use on a card: its memory (or its free memory) less the CUDA context, never negative."""
    return max(0, (capacity if free is None else min(capacity, free)) - CUDA_CONTEXT_BYTES)


def class_seats(gpu: GPUClass, count: int, *, label: str = "GPU") -> tuple[Seat, ...]:
    """``count`` idle cards of one class: ``GPU 0``, ``GPU 1``…"""
    room = _room(gpu.memory_bytes, None)
    return tuple(
        Seat(device=Device(name=f"{label} {i}", kind="gpu", memory_bytes=room), capacity_bytes=gpu.memory_bytes)
        for i in range(count)
    )


def card_seats(cards: Sequence[CardRef], *, now: bool = False) -> tuple[Seat, ...]:
    """A node's own cards, named ``NODE:INDEX``; ``now``: each offers its free memory."""
    return tuple(
        Seat(
            device=Device(name=c.name, kind="gpu", memory_bytes=_room(c.capacity_bytes, c.free_bytes if now else None)),
            capacity_bytes=c.capacity_bytes,
            position=c.position,
        )
        for c in cards
    )


def rpc_seats(cards: Sequence[CardRef], *, now: bool = False, placeholder: bool = False) -> tuple[Seat, ...]:
    """One ``rpc-server`` per card, ports counting up per node from :data:`RPC_FIRST_PORT`.

    ``placeholder``: name the hosts ``<node1>``, ``<node2>``… in order (a plan that holds for any
    nodes of a pool) instead of ``<NODE>``.
    """
    hosts: dict[str, str] = {}
    used: dict[str, int] = {}
    out: list[Seat] = []
    for c in cards:
        host = hosts.setdefault(c.node.name, f"<node{len(hosts) + 1}>" if placeholder else f"<{c.node.name}>")
        endpoint = f"{host}:{RPC_FIRST_PORT + used.get(host, 0)}"
        used[host] = used.get(host, 0) + 1
        room = _room(c.capacity_bytes, c.free_bytes if now else None)
        out.append(
            Seat(
                device=Device(name=f"RPC {endpoint} ({c.gpu.name})", kind="rpc", memory_bytes=room),
                capacity_bytes=c.capacity_bytes,
                endpoint=endpoint,
                position=c.position,
            )
        )
    return tuple(out)


def metal_seat(node: Node) -> Seat:
    """A unified-memory host's GPU: Metal's working set of its RAM."""
    usable = node.gpu_usable_limit_bytes
    return Seat(device=Device(name="Metal", kind="metal", memory_bytes=usable), capacity_bytes=node.host_ram_bytes)


def seats_from_cards(cards: Sequence[CardMemory]) -> tuple[Seat, ...]:
    """The seats an evaluation was made with, rebuilt from its per-card records (to re-evaluate the same cards).

    A record's role is its device's name: ``RPC <host>:<port> (class)`` for an RPC server, ``Metal`` for a Mac's GPU.
    """
    out = []
    for c in cards:
        kind: DeviceKind = "rpc" if c.role.startswith("RPC ") else "metal" if c.role == "Metal" else "gpu"
        endpoint = c.role.split(" ")[1] if kind == "rpc" else ""
        device = Device(name=c.role, kind=kind, memory_bytes=c.usable)
        node_index = c.role.rpartition(":")[2] if kind == "gpu" else ""  # a card seat is named NODE:INDEX
        position = int(node_index) if node_index.isdigit() else None
        out.append(Seat(device=device, capacity_bytes=c.capacity, endpoint=endpoint, position=position))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Offload:
    """The kinds of llama.cpp layouts a request allows.

    Attributes:
        gpu: layouts with offload devices (cards, RPC servers, a Mac's GPU) may be tried.
        partial: layers may stay on the host.
        cpu: the CPU-only layout is tried.
        fixed_ngl: ``-ngl`` as the user gave it (None: as many as fit).
        conflict: why nothing can run as asked (None: something can).
    """

    gpu: bool
    partial: bool
    cpu: bool
    fixed_ngl: int | None = None
    conflict: str | None = None

    @property
    def wants_full(self) -> bool:
        """Whether only a layout holding every layer on devices is acceptable."""
        return not self.partial


def offload_for(request: PlanRequest, n_layer: int) -> Offload:
    """What ``request`` lets llama.cpp do with a model of ``n_layer`` blocks (``n_layer + 1`` with the output)."""
    total = n_layer + 1
    ngl, allowed = request.n_gpu_layers, request.cpu_offload
    if ngl is None:
        return Offload(gpu=True, partial=allowed, cpu=allowed)
    if ngl < 0 or ngl >= total:
        return Offload(gpu=True, partial=False, cpu=False, fixed_ngl=ngl)
    if ngl == 0:
        why = None if allowed else "--ngl 0 runs every layer on the CPU, which --no-cpu-offload forbids"
        return Offload(gpu=False, partial=False, cpu=True, fixed_ngl=0, conflict=why)
    why = (
        None
        if allowed
        else f"--ngl {ngl} of {total} layers leaves {total - ngl} on the CPU, which --no-cpu-offload forbids"
    )
    return Offload(gpu=True, partial=True, cpu=False, fixed_ngl=ngl, conflict=why)
