"""Host RAM a vLLM or SGLang launch claims on each of its nodes, and which nodes have it.

- **vLLM** (≤ 0.11) sets aside ``--swap-space`` GiB of CPU memory per GPU, 4 by
  default, and refuses to start when swap × tp exceeds 70 % of the node's RAM
  ("Too large swap space", ``CacheConfig.verify_with_parallel_config``; above
  40 % it warns). V1 releases set none aside unless asked; from 0.18.0 vLLM
  has no ``--swap-space`` at all, so a swap space asked there is refused
  (:func:`explorer.engines.vllm_release.swap_space_refusal`), never charged.
- **SGLang** with ``--enable-hierarchical-cache`` keeps a host KV pool per rank,
  in pinned RAM: ``--hicache-ratio`` (2 by default) times the rank's device KV
  pool, or ``--hicache-size`` GB (10^9 bytes) per rank. It refuses when the pool
  exceeds the RAM available less 10 GiB (``HostKVCache``,
  ``HICACHE_HOST_MEMORY_RESERVE_BYTES``). Without it SGLang claims nothing.

gpustack charges the same two things (``get_computed_ram_claim``: a static
size, or a ratio of the VRAM claim) and skips a worker whose RAM is short
(``ram_not_enough``). A node's claim is per GPU (vLLM) or per rank (SGLang)
times the launch's cards on that node.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.engines.evaluation import CardMemory, Evaluation
from explorer.engines.layouts import Layout
from explorer.engines.request import PlanRequest
from explorer.engines.vllm_release import vllm_release
from explorer.hardware.cluster import Node
from explorer.units import GiB, gib

#: vLLM refuses a swap space above this share of the node's RAM
VLLM_SWAP_SHARE = 0.7
#: RAM SGLang leaves free when it sizes the hierarchical cache's host pool
SGLANG_HOST_RESERVE_BYTES = 10 * GiB
GB = 10**9


@dataclass(frozen=True, slots=True, kw_only=True)
class HostClaim:
    """What one launch takes of each of its nodes' RAM.

    Attributes:
        swap_bytes: vLLM's CPU swap space on a node (bytes).
        kv_bytes: SGLang's host KV pool on a node (bytes).
        share: the most of a node's RAM the engine lets the claim take.
        reserve_bytes: RAM the engine leaves free beside the claim (bytes).
        what: the claim in words, with its numbers.
    """

    swap_bytes: int = 0
    kv_bytes: int = 0
    share: float = 1.0
    reserve_bytes: int = 0
    what: str = ""

    @property
    def bytes_per_node(self) -> int:
        """The whole claim on one node (bytes)."""
        return self.swap_bytes + self.kv_bytes

    def usable_of(self, ram_bytes: int) -> int:
        """What the engine lets the claim take of ``ram_bytes`` of RAM (bytes, never negative)."""
        return max(0, int(ram_bytes * self.share) - self.reserve_bytes)

    def fits(self, node: Node) -> bool:
        """Whether the node's RAM allows the claim."""
        return self.bytes_per_node <= self.usable_of(node.host_ram_bytes)

    def fits_now(self, node: Node) -> bool:
        """Whether the node's free RAM allows it now."""
        return self.bytes_per_node <= max(0, min(node.host_free_bytes, self.usable_of(node.host_ram_bytes)))

    def card(self, node: Node) -> CardMemory:
        """The claim as the host's record on ``node``: swap space as overhead, the host KV pool as KV."""
        return CardMemory(
            role="host",
            weights=0,
            kv_cache=self.kv_bytes,
            activations=0,
            overhead=self.swap_bytes,
            usable=self.usable_of(node.host_ram_bytes),
            capacity=node.host_ram_bytes,
        )

    def refusal(self, node: Node, engine: str) -> str:
        """Why ``node`` cannot take the claim, with the numbers."""
        allowed = self.usable_of(node.host_ram_bytes)
        rule = (
            f"{engine} allows {int(self.share * 100)} % of it, {gib(allowed)}"
            if self.share < 1
            else f"{engine} leaves {gib(self.reserve_bytes)} free, so {gib(allowed)} is left for it"
        )
        return (
            f"{engine} claims {gib(self.bytes_per_node)} of host RAM on each node ({self.what}); "
            f"node {node.name} has {gib(node.host_ram_bytes)} and {rule}"
        )


def with_host(evaluation: Evaluation, claim: HostClaim, node: Node | None) -> Evaluation:
    """The evaluation with the claim as its host record on ``node`` (unchanged when there is no claim)."""
    if not claim.bytes_per_node or node is None:
        return evaluation
    return replace(evaluation, host=claim.card(node))


def vllm_claim(layout: Layout, request: PlanRequest) -> HostClaim:
    """vLLM's swap space on a node: ``--swap-space`` GiB (else the release's default) for each of the
    launch's GPUs there."""
    gib_per_gpu = vllm_release(request.vllm_version).swap_space(request.swap_space_gib)
    per_gpu = int(gib_per_gpu * GiB)
    if per_gpu <= 0:
        return HostClaim()
    cards = layout.gpus_per_node
    return HostClaim(
        swap_bytes=per_gpu * cards,
        share=VLLM_SWAP_SHARE,
        what=f"--swap-space {gib_per_gpu:g} GiB × {cards} GPUs",
    )


def sglang_claim(layout: Layout, evaluation: Evaluation, request: PlanRequest) -> HostClaim:
    """SGLang's host KV pool on a node when the hierarchical cache is on: per rank, ``--hicache-size`` GB, else
    ``--hicache-ratio`` × the rank's device KV pool (its static share less its weights), for each rank there."""
    if not request.hierarchical_cache:
        return HostClaim()
    if request.hicache_size_gb:
        per_rank = int(request.hicache_size_gb * GB)
        how = f"--hicache-size {request.hicache_size_gb:g} GB"
    else:
        pool = max((max(0, evaluation.free_needed_bytes - c.weights) for c in evaluation.cards), default=0)
        per_rank = int(pool * request.hicache_ratio)
        how = f"--hicache-ratio {request.hicache_ratio:g} × a {gib(pool)} device KV pool"
    ranks = layout.gpus_per_node
    return HostClaim(
        kv_bytes=per_rank * ranks,
        reserve_bytes=SGLANG_HOST_RESERVE_BYTES,
        what=f"{how} × {ranks} ranks",
    )
