"""llama.cpp for the planner: its walk, its pinned layouts, its footprint, behind the Engine protocol.

:mod:`~explorer.engines.llamacpp.launch` sizes one launch;
:mod:`~explorer.engines.llamacpp.walk` tries every layout of a cluster (one
card, a node's cards, a node's cards of several classes, RPC across nodes,
partial offload, CPU, unified memory); :mod:`~explorer.engines.llamacpp.pinned`
lays a launch over cards a user names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from explorer.engines.collect import Collector
from explorer.engines.evaluation import Evaluation, NodeCommand
from explorer.engines.interface import FleetLaunch, Footprint, PinnedLayout, SpeedFacts
from explorer.engines.llamacpp import pinned, walk
from explorer.engines.llamacpp.launch import NAME, llama_model, recheck, settings_for
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES, RPC_FIRST_PORT
from explorer.engines.names import ENGINE_LABELS, EngineName
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.hardware.cards import CardRef
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape


def fleet_launch(model_id: str, fleet: FleetLaunch) -> Evaluation:
    """``llama-server`` for one instance of a fleet placement: every layer on the GPUs (``-ngl 999``), the batch
    sizes the footprint was measured at (``-b``, ``-ub``: the request's defaults), a local file ``-m``, a Hub id
    ``-hf``; several cards a ``--tensor-split`` in the proportions the placement split the weights and KV. Across
    nodes the other nodes' cards are ``rpc-server``s (one a card, ports counting up a node from
    :data:`RPC_FIRST_PORT`), and the split follows llama.cpp's device order: the RPC servers first, in ``--rpc``
    order, then the local GPUs (``src/llama.cpp``: "add RPC servers at the front of the list")."""
    request = PlanRequest()
    head_node = fleet.nodes[0][0] if fleet.nodes else ""
    placed = [(rank, node, gpu) for rank, (node, gpus) in enumerate(fleet.nodes) for gpu in gpus]
    remote = [i for i, (_rank, node, _gpu) in enumerate(placed) if node != head_node]
    endpoints, workers, used = [], [], dict.fromkeys((placed[i][1] for i in remote), 0)
    for i in remote:
        rank, node, gpu = placed[i]
        port = RPC_FIRST_PORT + used[node]
        used[node] += 1
        endpoints.append(f"<{node}>:{port}")
        workers.append(NodeCommand(rank=rank, command=f"rpc-server -H 0.0.0.0 -p {port}", devices=(gpu,), where=node))
    order = remote + [i for i in range(len(fleet.shard_bytes)) if i not in remote]
    local = model_id.endswith(".gguf") or model_id.startswith(("/", ".", "~"))
    command = (f"llama-server {'-m' if local else '-hf'} {model_id} -c {fleet.context_tokens} "
               f"-b {request.batch_tokens} -ub {request.ubatch_tokens} -ngl 999")  # fmt: skip
    if len(order) > 1:
        total = sum(fleet.shard_bytes) or 1
        command += " --tensor-split " + ",".join(
            f"{fleet.shard_bytes[i] / total:.3f}".rstrip("0").rstrip(".") for i in order
        )
    if endpoints:
        command += " --rpc " + ",".join(endpoints)
    ports = (*endpoints, *dict.fromkeys(f"-p {e.rpartition(':')[2]}" for e in endpoints))
    return fleet.evaluation(command, tuple(workers), ports)


#: the two contexts a footprint's KV slope is measured between
FOOTPRINT_PROBE_TOKENS = (4096, 8192)


def footprint(shape: ModelShape, artifact: Artifact, kv_dtype: str) -> Footprint:
    """A llama.cpp instance's footprint: every layer's buffers at two contexts on the host, plus the CUDA context."""
    model = llama_model(shape, artifact)
    small, large = (
        llamacpp_memory(model, settings_for(PlanRequest(context_tokens=c, kv_dtype=kv_dtype)), ()).host
        for c in FOOTPRINT_PROBE_TOKENS
    )
    low, high = FOOTPRINT_PROBE_TOKENS
    per_token = (large.kv_bytes - small.kv_bytes) // (high - low)
    fixed = (
        small.compute_bytes
        + small.output_bytes
        + small.other_bytes
        + CUDA_CONTEXT_BYTES
        + max(0, small.kv_bytes - per_token * low)
    )
    return Footprint(weights_bytes=small.model_bytes, fixed_bytes_per_card=fixed, kv_bytes_per_token=per_token)


@dataclass(frozen=True, slots=True)
class LlamaCpp:
    """llama.cpp for the planner (an :class:`~explorer.engines.interface.Engine`): it lays out its own
    replicas (one card, a node's cards of one or several classes, RPC across nodes, partial offload, CPU,
    unified memory)."""

    name: ClassVar[EngineName] = NAME
    label: ClassVar[str] = ENGINE_LABELS[NAME]
    #: each copy is its own ``llama-server`` (no flag starts several)
    data_parallel_flag: ClassVar[str | None] = None
    #: one ``llama-server`` prefills and decodes; it has no prefill/decode split
    disaggregated_prefill: ClassVar[bool] = False
    #: fitted on published llama.cpp rows (docs/notes/speed_model.md)
    speed: ClassVar[SpeedFacts] = SpeedFacts(
        efficiency=0.6,
        dense_layer_floor_s=0.25e-4,
        moe_layer_floor_s=1.5e-4,
        token_overhead_s=1.5e-3,
        host_layers=True,
        gguf=True,
    )

    def prefill_chunk_tokens(self, gpu, request: PlanRequest) -> int:
        """``-b``: the logical batch ``llama-server`` fills with prompt tokens a step."""
        return request.batch_tokens

    def walk(
        self,
        shape: ModelShape,
        cluster: Cluster,
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
        out: Collector,
    ) -> None:
        """Every llama.cpp way (:func:`explorer.engines.llamacpp.walk.walk`)."""
        walk.walk(shape, cluster, artifacts, request, model_ref, out)

    def recheck(self, shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str) -> Option:
        """Same node, cards and ``-ngl`` at the new request (:func:`recheck`)."""
        return recheck(shape, option, request, model_ref=model_ref)

    def footprint(self, shape: ModelShape, artifact: Artifact, gpu: GPUClass | None, kv_dtype: str) -> Footprint:
        """The same on any card class (:func:`footprint`)."""
        return footprint(shape, artifact, kv_dtype)

    def fleet_command(self, model_id: str, fleet: FleetLaunch) -> Evaluation:
        """``llama-server`` on the head node's cards, an ``rpc-server`` on each other node's card
        (:func:`fleet_launch`)."""
        return fleet_launch(model_id, fleet)

    def serves(self, artifact: Artifact) -> bool:
        """A GGUF as it is, the model's own weights as the GGUF they convert to (:func:`pinned.serves`)."""
        return pinned.serves(artifact)

    def pin(
        self,
        shape: ModelShape,
        cards: Sequence[CardRef],
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
    ) -> PinnedLayout:
        """One card, a node's cards, or RPC across nodes (:func:`explorer.engines.llamacpp.pinned.pin`)."""
        return pinned.pin(shape, cards, artifacts, request, model_ref)


ENGINE = LlamaCpp()
