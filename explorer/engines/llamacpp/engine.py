"""llama.cpp for the planner: its walk, its pinned layouts, its footprint, behind the Engine protocol.

:mod:`~explorer.engines.llamacpp.launch` sizes one launch; :func:`walk` tries every layout of a cluster
in a scheduler's order: :mod:`~explorer.engines.llamacpp.walk` the state, the candidates and one class on
one node, a Mac and the CPU; :mod:`~explorer.engines.llamacpp.spans` a node's cards of several classes and
RPC across nodes. :mod:`~explorer.engines.llamacpp.pinned` lays a launch over cards a user names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from explorer.engines.collect import Collector
from explorer.engines.evaluation import Evaluation, NodeCommand
from explorer.engines.interface import FleetLaunch, Footprint, PinnedLayout, SpeedFacts
from explorer.engines.layouts import Layout
from explorer.engines.llamacpp import pinned
from explorer.engines.llamacpp.launch import (
    NAME,
    cache_flags,
    gguf_quant_for,
    gguf_source,
    llama_model,
    names_model,
    recheck,
    settings_for,
)
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES, RPC_FIRST_PORT, offload_for
from explorer.engines.llamacpp.settings import LlamaCppSettings
from explorer.engines.llamacpp.spans import mixed_cards, walk_mixed, walk_rpc
from explorer.engines.llamacpp.walk import Ctx, asked, walk_cpu, walk_pool, walk_unified
from explorer.engines.names import ENGINE_LABELS, EngineName
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.errors import LlamaCppConfigError, LlamaCppFitError
from explorer.hardware.cards import CardRef
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.pools import gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.conversion import native_gguf_types
from explorer.model.shapes import ModelShape


def past_trained_context(n_ctx_train: int, context_tokens: int) -> str | None:
    """Why a context past the model's trained one is refused (``context-limit``), else None.

    llama.cpp loads ``-c`` past ``n_ctx_train`` with a warning (``llama_context: n_ctx_seq (…) > n_ctx_train (…)
    -- possible training context overflow``); llama-server then caps each slot at the trained length (``the slot
    context (…) exceeds the training context of the model (…) - capping``), and older builds ran past it with
    answers that degrade. Either way the printed context is not served, so the command is not one to print;
    vLLM and SGLang refuse such a context at start-up, and their walks refuse it too. A GGUF whose header sets YaRN rope scaling states the longer
    ``n_ctx_train`` itself. A header without the length (0) is not held to one.
    """
    if n_ctx_train <= 0 or context_tokens <= n_ctx_train:
        return None
    return (
        f"context {context_tokens:,} exceeds the model's trained context of {n_ctx_train:,} tokens (n_ctx_train): "
        f"llama-server caps each slot at {n_ctx_train:,} (older builds run past it and the answers degrade); ask for "
        f"at most {n_ctx_train:,}, or load a GGUF whose header sets YaRN rope scaling"
    )


def fleet_launch(model_id: str, fleet: FleetLaunch) -> Evaluation:
    """``llama-server`` for one instance of a fleet placement: the GGUF its footprint was sized at
    (:func:`footprint_load_flags`: the converted weights' placeholder with the conversion's steps; a model read from
    a GGUF, or a demand made without a footprint, loads ``model_id`` itself: a local file ``-m``, a Hub id ``-hf``),
    every layer on the GPUs (``-ngl 999``), the batch
    sizes the footprint was measured at (``-b``, ``-ub``: the request's defaults),
    several cards a ``--tensor-split`` in the proportions the placement split the weights and KV, and the KV cache
    type it was sized at (``-ctk``/``-ctv``, ``-fa on`` for a quantised V: :func:`cache_flags`). Across
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
    sources = [f for f in fleet.load_flags if names_model(f)]
    if not sources:
        local = model_id.endswith(".gguf") or model_id.startswith(("/", ".", "~"))
        sources = [f"{'-m' if local else '-hf'} {model_id}"]
    command = (f"llama-server {' '.join(sources)} -c {fleet.context_tokens} "
               f"-b {request.batch_tokens} -ub {request.ubatch_tokens} -ngl 999")  # fmt: skip
    if len(order) > 1:
        total = sum(fleet.shard_bytes) or 1
        command += " --tensor-split " + ",".join(
            f"{fleet.shard_bytes[i] / total:.3f}".rstrip("0").rstrip(".") for i in order
        )
    if endpoints:
        command += " --rpc " + ",".join(endpoints)
    command = " ".join((command, *(f for f in fleet.load_flags if not names_model(f))))
    ports = (*endpoints, *dict.fromkeys(f"-p {e.rpartition(':')[2]}" for e in endpoints))
    return fleet.evaluation(command, tuple(workers), ports)


#: the two contexts a footprint's KV slope is measured between
FOOTPRINT_PROBE_TOKENS = (4096, 8192)


def footprint(shape: ModelShape, artifact: Artifact, kv_dtype: str) -> Footprint:
    """A llama.cpp instance's footprint: every layer's buffers at two contexts on the host, plus the CUDA context;
    its load flags name the GGUF and the KV cache it was sized at (:func:`footprint_load_flags`)."""
    model = llama_model(shape, artifact)
    small, large = (
        llamacpp_memory(model, settings_for(PlanRequest(context_tokens=c, kv_dtype=kv_dtype)), ())
        for c in FOOTPRINT_PROBE_TOKENS
    )
    flags = footprint_load_flags(shape, artifact, small.settings)
    small, large = small.host, large.host
    low, high = FOOTPRINT_PROBE_TOKENS
    per_token = (large.kv_bytes - small.kv_bytes) // (high - low)
    fixed = (
        small.compute_bytes
        + small.output_bytes
        + small.other_bytes
        + CUDA_CONTEXT_BYTES
        + max(0, small.kv_bytes - per_token * low)
    )
    return Footprint(
        weights_bytes=small.model_bytes, fixed_bytes_per_card=fixed, kv_bytes_per_token=per_token, load_flags=flags
    )


def footprint_load_flags(shape: ModelShape, artifact: Artifact, settings: LlamaCppSettings) -> tuple[str, ...]:
    """What a fleet launch needs to load the model as its footprint sized it: the GGUF, when the model is not read
    from one (:func:`~explorer.engines.llamacpp.launch.gguf_source`, the planner's own: the weights converted, named
    by the model's name, with ``convert_hf_to_gguf.py --outtype`` and ``llama-quantize`` as the type needs), and
    the KV cache type (:func:`cache_flags`)."""
    quant = gguf_quant_for(shape, artifact)
    own_gguf = shape.precision.method == "gguf" and not artifact.what_if  # the id names a GGUF: loaded as it is
    source = () if own_gguf else (gguf_source(artifact, quant, shape.name or "the model"),)
    return (*source, *cache_flags(settings))


def walk(
    shape: ModelShape,
    cluster: Cluster,
    artifacts: Sequence[Artifact],
    request: PlanRequest,
    model_ref: str,
    out: Collector,
) -> None:
    """Every llama.cpp way to run each artifact on the cluster, into ``out``, in the order a scheduler tries them.

    For each artifact, what the request allows (:func:`~explorer.engines.llamacpp.offload.offload_for`: ``-ngl``
    and ``--no-cpu-offload``) decides which layouts are tried:

    1. one node, one class (each GPU pool: :func:`~explorer.engines.llamacpp.walk.walk_pool`);
    2. across the pool's nodes through RPC, when one node's cards do not hold it
       (:func:`~explorer.engines.llamacpp.spans.walk_rpc`);
    3. one node's cards of several classes (:func:`~explorer.engines.llamacpp.spans.walk_mixed`);
    4. unified memory (a Mac), then 5. CPU only (:mod:`~explorer.engines.llamacpp.walk`).
    """
    served = shape.params - sum(t.elements for t in shape.mtp)
    native = next((a for a in artifacts if a.format == "gguf" and a.quant.upper() in native_gguf_types(shape)), None)
    for artifact in artifacts:
        if native is not None and artifact.format != "gguf" and not artifact.what_if:
            out.refuse(
                NAME,
                None,
                artifact.name,
                "published-gguf",
                f"{native.repo or 'a published GGUF'}'s {native.files[0] if native.files else native.name} holds "
                "these weights as they are: llama.cpp loads it rather than a conversion",
            )
            continue
        if not pinned.serves(artifact):  # another repository's safetensors (AWQ, FP8…), or a safetensors what-if
            where = f"{artifact.repo} publishes" if artifact.repo else "a what-if of"
            out.refuse(
                NAME,
                None,
                artifact.name,
                "format",
                f"llama.cpp loads GGUF files; {where} {artifact.quant} safetensors "
                "(plan a GGUF quant such as Q4_K_M for llama.cpp)",
            )
            continue
        try:
            model = llama_model(shape, artifact)
        except (LlamaCppConfigError, LlamaCppFitError, ValueError) as err:
            out.refuse(NAME, None, artifact.name, "gguf", str(err))
            continue
        past = past_trained_context(model.n_ctx_train, request.context_tokens)
        if past:
            out.refuse(NAME, None, artifact.name, "context-limit", past)
            continue
        offload = offload_for(request, model.n_layer)
        if offload.conflict:
            out.refuse(NAME, None, artifact.name, "cpu-offload", offload.conflict)
            continue
        bits = model.weight_bytes * 8 / served if served else 0.0
        ctx = Ctx(shape, model, artifact, gguf_quant_for(shape, artifact), bits, request, model_ref, out, offload)
        if offload.gpu:
            for pool in gpu_pools(cluster):
                chosen = walk_pool(ctx, pool)
                if pool.spannable and (chosen is None or not asked(ctx, chosen)):
                    walk_rpc(ctx, pool, chosen)
            for node, hosts in cluster.derived(_mixed_kinds):
                walk_mixed(ctx, node, hosts=hosts)
            for node, hosts in cluster.derived(_unified_kinds):
                walk_unified(ctx, node, hosts=hosts)
        if offload.cpu:
            walk_cpu(ctx, cluster)
        elif cluster.nodes:
            why = (
                "--no-cpu-offload keeps every layer on the accelerators"
                if not request.cpu_offload
                else f"--ngl {offload.fixed_ngl} offloads layers to the GPUs"
            )
            cpu = Layout(engine=NAME, gpu_class="cpu", gpus_per_node=0, cpu=True)
            out.refuse(NAME, cpu, artifact.name, "cpu-offload", f"no CPU-only option: {why}")


def _mixed_kinds(cluster: Cluster) -> tuple[tuple[Node, int], ...]:
    """The distinct nodes with cards of several classes, each with how many GPU nodes could host its launch
    (built once per cluster: :meth:`Cluster.derived`)."""
    gpu_nodes = cluster.gpu_nodes
    return tuple((node, _count(gpu_nodes, node)) for node in _distinct(n for n in gpu_nodes if mixed_cards(n)))


def _unified_kinds(cluster: Cluster) -> tuple[tuple[Node, int], ...]:
    """The distinct unified-memory hosts, each with how many hosts could take its launch (once per cluster)."""
    unified = cluster.unified_nodes
    return tuple((node, _count(unified, node)) for node in _distinct(unified))


def _distinct(nodes) -> list[Node]:
    seen, out = set(), []
    for n in nodes:
        key = (n.host_ram_bytes, n.cpu.name, tuple((g.gpu.name, g.count) for g in n.gpus))
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


def _count(nodes: Sequence[Node], like: Node) -> int:
    shape = [(g.gpu.name, g.count) for g in like.gpus]
    return sum(
        1 for n in nodes if n.host_ram_bytes >= like.host_ram_bytes and [(g.gpu.name, g.count) for g in n.gpus] == shape
    )


@dataclass(frozen=True, slots=True)
class LlamaCpp:
    """llama.cpp for the planner (an :class:`~explorer.engines.interface.Engine`): it lays out its own
    replicas (one card, a node's cards of one or several classes, RPC across nodes, partial offload, CPU,
    unified memory)."""

    name: ClassVar[EngineName] = NAME
    label: ClassVar[str] = ENGINE_LABELS[NAME]
    #: each copy is its own ``llama-server`` (no flag starts several)
    data_parallel_flag: ClassVar[str | None] = None
    #: no data-parallel ranks, so none share a mixture of experts' experts
    expert_data_parallel: ClassVar[bool] = False
    #: one ``llama-server`` prefills and decodes; it has no prefill/decode split
    disaggregated_prefill: ClassVar[bool] = False
    #: each ``-np`` slot holds its share of ``-c`` from start-up: every asked sequence must fit
    queues_past_kv: ClassVar[bool] = False
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
        """Every llama.cpp way (:func:`walk`)."""
        walk(shape, cluster, artifacts, request, model_ref, out)

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
