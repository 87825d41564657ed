"""The layouts the engines consider: one way to lay a replica over cards, and its pipeline stages.

A :class:`Layout` says which card class, how many nodes and cards per node, and the tensor / pipeline / data /
expert parallel sizes; :func:`pp_partition` splits the layers over the stages and :func:`card_role` names the
cards a per-card figure is for.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.names import EngineName


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One way to lay a replica over cards.

    Attributes:
        engine: which engine.
        gpu_class: the card class name (``cpu`` for a CPU-only replica).
        fabric: the fabric the nodes share (None for one node).
        nodes: nodes used.
        gpus_per_node: cards used on each node (0 on the CPU).
        tp: tensor-parallel size.
        pp: pipeline-parallel size (llama.cpp: devices the layers are split over).
        dp: data-parallel size: plain replicas side by side, SGLang's DP attention ranks within the tp
            cards, or vLLM's expert-parallel dp ranks of tp cards each (see :attr:`expert_dp`).
        ep: expert-parallel size (1: experts split by tp instead).
        dcp: decode-context-parallel size (vLLM ``--decode-context-parallel-size``): the KV cache's tokens
            spread over this many of the tp cards, each holding 1/dcp of them (1: none).
        cpu: runs on the host's CPU only.
        unified: runs on a unified-memory host (Apple).
        rpc: llama.cpp across nodes through RPC servers.
        rpc_servers: llama.cpp's single-card RPC servers on other nodes, beside the main node's
            ``gpus_per_node`` cards (``nodes`` counts the main node and the nodes they are on).
    """

    engine: EngineName
    gpu_class: str
    fabric: str | None = None
    nodes: int = 1
    gpus_per_node: int = 1
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dcp: int = 1
    cpu: bool = False
    unified: bool = False
    rpc: bool = False
    rpc_servers: int = 0

    @property
    def cards(self) -> int:
        """Cards the replica takes (0 on the CPU)."""
        if self.rpc_servers:
            return self.gpus_per_node + self.rpc_servers
        return self.nodes * self.gpus_per_node

    @property
    def label(self) -> str:
        """A few words on where it runs: ``2 nodes × 8 h100-80g on ib0``."""
        if self.cpu:
            return "CPU"
        if self.rpc_servers:
            return f"{self.gpus_per_node} × {self.gpu_class} + {self.rpc_servers} over RPC on {self.fabric}"
        if self.nodes > 1:
            return f"{self.nodes} nodes × {self.gpus_per_node} {self.gpu_class} on {self.fabric}"
        return f"{self.gpus_per_node} × {self.gpu_class}"

    @property
    def expert_dp(self) -> bool:
        """Whether dp ranks of tp cards each share experts spread over all tp × dp ranks (vLLM
        ``--data-parallel-size`` with ``--enable-expert-parallel``): attention and dense weights per rank."""
        return self.dp > 1 and self.ep == self.tp * self.dp

    @property
    def attention_dp(self) -> bool:
        """Whether dp ranks are carved out of the tp cards (SGLang ``--enable-dp-attention``: the launch takes tp × pp
        cards, each DP rank's attention on tp / dp of them, its own sequences)."""
        return self.dp > 1 and not self.expert_dp and self.cards == self.tp * self.pp

    @property
    def parallel(self) -> str:
        """The parallel sizes that are not 1: ``tp8 pp2 ep16``, ``tp8 dcp8 ep8``."""
        sizes = (("tp", self.tp), ("dcp", self.dcp), ("pp", self.pp), ("dp", self.dp), ("ep", self.ep))
        parts = [f"{k}{v}" for k, v in sizes if v > 1]
        return " ".join(parts) or "single"


def pp_partition(layers: int, pp: int) -> list[tuple[int, int]]:
    """vLLM's ``get_pp_indices``: ``layers // pp`` each, the remainder added to the stages
    before the last, from the second-to-last backwards (80 layers / 3 → 27, 27, 26)."""
    base, rem = divmod(layers, pp)
    sizes = [base] * pp
    for i in range(2, rem + 2):
        sizes[-i] += 1
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out


def card_role(layout: Layout, stage: int, first: int, end: int) -> str:
    """Which cards a per-card figure is for: ``each of 8 cards`` or ``stage 2 of 3 (layers 27–53), 8 cards``."""
    if layout.expert_dp:
        return f"each of {layout.cards} cards ({layout.dp} dp ranks of {layout.tp})"
    if layout.pp == 1:
        return f"each of {layout.tp} cards" if layout.tp > 1 else "the card"
    return f"stage {stage + 1} of {layout.pp} (layers {first}–{end - 1}), {layout.tp} cards"
