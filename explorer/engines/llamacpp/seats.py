"""The cards a llama.cpp launch offloads to, each as a :class:`Seat`: the device llama.cpp sees and the card it is.

llama.cpp reads each device's free memory when it starts, and by default
splits the layers in proportion to it. A seat's device offers the card's
memory less :data:`CUDA_CONTEXT_BYTES` (the CUDA runtime and cuBLAS workspace,
which llama.cpp does not print). Planned, a card is as it would be idle: its
whole memory. *Now*, it is what the cluster says is free on it
(:attr:`explorer.hardware.cards.CardRef.free_bytes`), so a busy card offers
nothing and the split follows free memory.

An RPC server (``rpc-server`` on another node, one card each) is a seat of
kind ``rpc`` with an endpoint for ``--rpc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from explorer.engines.common import CardMemory
from explorer.engines.llamacpp.settings import Device, DeviceKind
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
