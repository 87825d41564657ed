"""The memory records of an engine's answer for one layout: what each card holds, part by part, in bytes.

An engine turns a layout into :class:`CardMemory` records, one per distinct card role (a pipeline stage's card,
the host...), and gathers them with the launch's command (and the other nodes' :class:`NodeCommand`) in an
:class:`Evaluation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.errors import ImplausibleFigureError
from explorer.limits import check_figures


@dataclass(frozen=True, slots=True, kw_only=True)
class CardMemory:
    """What one card (or the host) holds, part by part, in bytes.

    Attributes:
        role: which card: ``stage 1 of 3``, ``GPU 0``, ``host``…
        weights: the weights share.
        kv_cache: the KV cache the request needs (context × concurrency).
        activations: the activation peak the engine reserves.
        overhead: engine overhead (CUDA graphs, non-torch memory, compute and output buffers…).
        usable: what the engine may use on this card.
        capacity: the card's whole memory.
        count: how many cards share this role.
    """

    role: str
    weights: int
    kv_cache: int
    activations: int
    overhead: int
    usable: int
    capacity: int
    count: int = 1

    def __post_init__(self) -> None:
        check_figures(
            f"card memory ({self.role})",
            ImplausibleFigureError,
            weights=self.weights,
            kv_cache=self.kv_cache,
            activations=self.activations,
            overhead=self.overhead,
            usable=self.usable,
            capacity=self.capacity,
        )

    @property
    def total(self) -> int:
        """Everything the card must hold."""
        return self.weights + self.kv_cache + self.activations + self.overhead

    @property
    def headroom(self) -> int:
        """Usable bytes left (negative: short by that much)."""
        return self.usable - self.total

    @property
    def fits(self) -> bool:
        """Whether it holds what it must."""
        return self.total <= self.usable


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCommand:
    """What a further node of a launch runs beside the head's command.

    Attributes:
        rank: which of the launch's nodes runs it (1 = the first after the head).
        command: its line, without devices or port (the launch lines add them).
        devices: the card positions on that node it runs on (``NODE:INDEX``'s index); empty: the same cards
            as the head's.
        where: the node's name when the engine named it (an RPC server's host), else empty.
    """

    rank: int
    command: str
    devices: tuple[int, ...] = ()
    where: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    """An engine's answer for one layout.

    Attributes:
        cards: per-role card memory; the first is the binding card shown as ``per_card``.
        host: what the host holds (llama.cpp offload, CPU runs), or None.
        max_context_tokens: the longest context one sequence can have.
        max_concurrency: sequences that fit at the asked context.
        layers_on_host: llama.cpp layers left on the CPU.
        command: how to launch it.
        notes: what this layout assumes.
        free_needed_bytes: free memory a card must have now for the engine to start on it
            (vLLM: total × utilisation; SGLang: total × mem_fraction_static; llama.cpp: what it allocates).
        n_gpu_layers: llama.cpp's ``-ngl`` as resolved (None for other engines).
        devices: the head node's card positions the command runs on, in the order its figures assume
            (llama.cpp's ``--tensor-split``); empty: the first cards of the layout's class.
        workers: what the launch's other nodes run (ranks of a launch across nodes, RPC servers).
        meeting_ports: the texts of the commands that name a port where the launch's nodes meet, each ending in
            the port: the head's rendezvous (``--dist-init-addr <head-node>:5000``, ``--master-port 29501``), an
            RPC server's (``<gpu-b>:50052`` and its ``-p 50052``); a further copy moves them
            (:func:`explorer.plan.launch_lines.launch_lines`), so two copies never share one.
    """

    cards: tuple[CardMemory, ...]
    host: CardMemory | None
    max_context_tokens: int
    max_concurrency: int
    command: str
    layers_on_host: int = 0
    notes: tuple[str, ...] = field(default=())
    free_needed_bytes: int = 0
    n_gpu_layers: int | None = None
    devices: tuple[int, ...] = ()
    workers: tuple[NodeCommand, ...] = ()
    meeting_ports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_figures(
            "an evaluation",
            ImplausibleFigureError,
            max_context_tokens=self.max_context_tokens,
            max_concurrency=self.max_concurrency,
            layers_on_host=self.layers_on_host,
            free_needed_bytes=self.free_needed_bytes,
        )

    @property
    def fits(self) -> bool:
        """Every card (and the host) holds what it must, and one sequence of the asked context fits."""
        ok = all(c.fits for c in self.cards)
        return ok and (self.host is None or self.host.fits)

    @property
    def binding(self) -> CardMemory:
        """The card with the least headroom."""
        pool = list(self.cards) + ([self.host] if self.host is not None and not self.cards else [])
        return min(pool, key=lambda c: c.headroom)
