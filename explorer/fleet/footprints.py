"""From models and a cluster to a placement request: footprints and cards.

A model's per-instance footprint comes from the engine's own accounting on
one card of the cluster's class (:meth:`explorer.engines.interface.Engine.footprint`):

- ``weights_bytes``: the weights an instance loads (split across a split's cards);
- ``kv_bytes_per_token``: what one more token of context costs (split likewise);
- ``fixed_bytes_per_card``: what every card of a split pays whole: vLLM's
  activation peak, CUDA graphs and non-torch memory, or llama.cpp's compute
  and output buffers and the CUDA context, plus any fixed recurrent state.

The cards are every GPU of the cluster, indexed in node order, each offering
``usable_fraction`` of its memory, or less when the spec says less is free
(``free=0.5``: half of each card; ``free=6``: the other cards are busy and offer nothing). A cluster without discrete GPUs gives a
unified budget instead: a Mac's Metal working set, or a CPU host's RAM share.

A manual plan is charged against each card's whole memory (``FleetCards.plan_cards``), not what is free now:
the plan says what the fleet holds when it runs, models already resident included, so charging it against
``free=`` would count them twice (lilbee's ``placement_from_spec``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from explorer.artifacts.checkpoints import PublishedCheckpoint
from explorer.artifacts.offer import native_gguf, original_artifact, plan_artifacts
from explorer.engines.attention_kernels import attention_hint, attention_refusal
from explorer.engines.interface import Engine
from explorer.engines.registry import CPU_ENGINE, engine_named
from explorer.engines.weight_kernels import weights_refusal
from explorer.errors import PlacementError
from explorer.fleet.place import Card, ModelDemand, ModelTerm
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape

#: context a model is charged at when its term names none
DEFAULT_CONTEXT_TOKENS = 8192


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCards:
    """What a cluster offers a placement.

    Attributes:
        cards: discrete GPUs, indexed in node order.
        labels: ``node:index (class)`` for each card, by card index.
        unified_budget_bytes: a unified-memory or CPU budget when there are no discrete GPUs.
        gpu: the class footprints are measured on (the first card's), or None.
        places: ``(node name, index on the node)`` for each card, by card index: where to launch it.
        plan_cards: the same cards each offering ``usable_fraction`` of its whole memory, busy or not:
            what a manual plan is charged against.
    """

    cards: tuple[Card, ...]
    labels: tuple[str, ...]
    unified_budget_bytes: int | None
    gpu: GPUClass | None
    places: tuple[tuple[str, int], ...] = ()
    plan_cards: tuple[Card, ...] = ()


def fleet_cards(cluster: Cluster, usable_fraction: float = 0.9, host_fraction: float = 0.85) -> FleetCards:
    """Every discrete GPU as a card; or, without any, a unified budget (Mac working set, else CPU RAM)."""
    cards, labels, places, whole = [], [], [], []
    for node in cluster.nodes:
        if node.unified:
            continue
        index_on_node = 0
        for group in node.gpus:
            for k in range(group.count):
                total, cls = group.gpu.memory_bytes, group.gpu.name
                usable = min(int(total * usable_fraction), group.free_bytes_on(k))
                span = f"{cls} on {node.fabric or node.name}"  # tensor parallelism spans a fabric, else one node
                cards.append(Card(index=len(cards), usable_bytes=usable, total_bytes=total, gpu_class=cls, span=span))
                whole.append(
                    Card(
                        index=len(whole),
                        usable_bytes=int(total * usable_fraction),
                        total_bytes=total,
                        gpu_class=cls,
                        span=span,
                    )
                )
                labels.append(f"{node.name}:{index_on_node} ({cls})" + ("" if usable else ", busy"))
                places.append((node.name, index_on_node))
                index_on_node += 1
    if cards:
        first = next(g.gpu for n in cluster.nodes if not n.unified for g in n.gpus)
        return FleetCards(
            cards=tuple(cards),
            labels=tuple(labels),
            unified_budget_bytes=None,
            gpu=first,
            places=tuple(places),
            plan_cards=tuple(whole),
        )
    if cluster.unified_nodes:
        node = max(cluster.unified_nodes, key=lambda n: n.gpu_usable_limit_bytes)
        return FleetCards(cards=(), labels=(), unified_budget_bytes=node.gpu_usable_limit_bytes, gpu=node.gpus[0].gpu)
    if cluster.nodes:
        node = max(cluster.nodes, key=lambda n: n.host_ram_bytes)
        return FleetCards(cards=(), labels=(), unified_budget_bytes=int(node.host_ram_bytes * host_fraction), gpu=None)
    raise PlacementError("the cluster has no nodes")


def _format_hint(artifact: Artifact, *, on_gpus: bool) -> str:
    """What places weights the engine does not load: the engine that loads them (``--engine``, which place
    defaults to vLLM), or a precision the engine loads; on CPUs only llama.cpp runs, so only its GGUF quants."""
    if artifact.format == "gguf":
        return "place it with --engine llamacpp, which loads GGUF quants, or at a safetensors precision (bf16, fp8, int4-awq)"
    if on_gpus:
        return "place it at a GGUF quant (Q8_0, Q4_K_M), or with --engine vllm or sglang, which load safetensors"
    return "on CPUs llama.cpp runs it: place it at a GGUF quant (Q8_0, Q4_K_M)"


def demand_for(
    shape: ModelShape,
    term: ModelTerm,
    *,
    gpu: GPUClass | None,
    engine: str = "vllm",
    rank: int = 0,
    kv_dtype: str = "auto",
    precision: str | None = None,
    name: str | None = None,
    offered: Sequence[Artifact] = (),
    checkpoints: Sequence[PublishedCheckpoint] = (),
) -> ModelDemand:
    """A model's footprint for the placement planner, from the engine's accounting on one ``gpu``
    (:meth:`explorer.engines.interface.Engine.footprint`); without a GPU class, the CPU engine's.

    The weights are the artifact an instance loads (:func:`fleet_artifact`: at the term's precision (``ID:QUANT``),
    else ``precision``, the one
    ``explorer plan --quant`` plans, a published checkpoint from ``checkpoints`` where one is known), and the
    demand says what its launch loads (``model_ref``: the published repository, or a what-if's placeholder) and
    what those weights are (``note``).

    Weights the engine has no kernel for on ``gpu`` (block-FP8 on A100 with SGLang) are a
    :class:`~explorer.errors.PlacementError` saying so (:mod:`explorer.engines.weight_kernels`), and so is
    attention it has none for (sparse MLA on A100 with SGLang: :mod:`explorer.engines.attention_kernels`).

    The term's context floor (``ID:CONTEXT/MIN``) lets the planner serve less than the target, down to it;
    an engine that splits evenly (tensor parallelism) gives an even-splitting demand.
    """
    context = term.context_tokens or shape.clamp_context(DEFAULT_CONTEXT_TOKENS)
    floor = None if term.min_context_tokens is None else min(term.min_context_tokens, context)
    sizer = engine_named(engine) if gpu is not None else CPU_ENGINE
    precision = term.precision or precision
    artifact = fleet_artifact(shape, sizer, precision=precision, offered=offered, checkpoints=checkpoints)
    if not sizer.serves(artifact):  # as explorer plan refuses it: vLLM a GGUF, llama.cpp an AWQ repository
        what = f"{artifact.repo}'s" if artifact.repo else "a what-if of its"
        raise PlacementError(
            f"{term.model_id}: {sizer.label} does not load {what} {artifact.quant} {artifact.format} weights",
            hint=_format_hint(artifact, on_gpus=gpu is not None),
        )
    unsupported = weights_refusal(engine, shape.precision_of(artifact), gpu) if gpu is not None else None
    if unsupported:
        raise PlacementError(f"{term.model_id}: {unsupported}", hint="place it with precision bf16, int8 or int4-awq")
    no_attention = attention_refusal(engine, shape, gpu) if gpu is not None else None
    if no_attention:
        raise PlacementError(f"{term.model_id}: {no_attention}", hint=attention_hint(engine))
    footprint = sizer.footprint(shape, artifact, gpu, kv_dtype)
    return ModelDemand(
        name=name or term.model_id,
        weights_bytes=footprint.weights_bytes,
        fixed_bytes_per_card=footprint.fixed_bytes_per_card,
        kv_bytes_per_token=footprint.kv_bytes_per_token,
        context_tokens=context,
        min_context_tokens=floor,
        replicas=term.replicas,
        phases=term.phases,
        rank=rank,
        even_split=footprint.even_split,
        widths=footprint.split_widths,
        kv_split_widths=footprint.kv_split_widths,
        load_flags=footprint.load_flags,
        model_ref=footprint.model_ref,
        note=artifact.note,
    )


def fleet_artifact(
    shape: ModelShape,
    sizer: Engine,
    *,
    precision: str | None = None,
    offered: Sequence[Artifact] = (),
    checkpoints: Sequence[PublishedCheckpoint] = (),
) -> Artifact:
    """The one artifact an instance of the model loads with ``sizer``.

    At ``precision``, the one ``explorer plan --quant`` plans (:func:`~explorer.artifacts.offer.plan_artifacts`):
    an ``offered`` GGUF of that quant, else the published checkpoint of it in ``checkpoints``
    (:func:`~explorer.artifacts.offer.what_if_artifact`: its repository, its file of a GGUF repository), else the
    what-if, whose note says that none is published; the engines size each from the shape at its precision, as the
    plan does. Without one, a model published as GGUF files
    loads the file ``llama-server -hf REPO`` picks (:func:`published_gguf`) when the engine serves GGUF, as does a
    model whose own weights are published as a GGUF (:func:`~explorer.artifacts.offer.native_gguf`: ggml-org's
    MXFP4 file of gpt-oss), else its own weights. The engine may not serve a precision's artifact (:meth:`~explorer.engines.interface.Engine.serves`:
    vLLM a GGUF, llama.cpp another repository's AWQ safetensors), as ``explorer plan`` refuses it.
    """
    if not precision:
        gguf = published_gguf(offered) or native_gguf(shape, checkpoints)
        return gguf if gguf is not None and sizer.serves(gguf) else original_artifact(shape)
    (artifact,) = plan_artifacts(shape, offered, quant=precision, checkpoints=checkpoints)
    return artifact


#: the quants ``llama-server -hf REPO`` looks for, in order, when the id names none (common/download.cpp
#: ``find_best_model`` at llama.cpp 0c1e57098), before it falls back to the repository's first model file
HF_DEFAULT_QUANTS = ("Q4_K_M", "Q8_0")


def published_gguf(offered: Sequence[Artifact]) -> Artifact | None:
    """Of a model published as GGUF files (a GGUF repository, a .gguf file), the one ``llama-server -hf REPO``
    loads (:data:`HF_DEFAULT_QUANTS`, else the first); None for a model with any other weights."""
    ggufs = [a for a in offered if a.format == "gguf" and not a.what_if]
    if not ggufs or len(ggufs) < len(offered):
        return None
    for quant in HF_DEFAULT_QUANTS:
        found = next((a for a in ggufs if a.quant.upper() == quant), None)
        if found is not None:
            return found
    return ggufs[0]


def launch_ids(models: Sequence[ModelDemand], ids: Mapping[str, str]) -> dict[str, str]:
    """Each model's name -> what its launch loads (``ids``: its own id, by name), a model sized at a published
    checkpoint or a what-if nobody publishes naming that instead (:attr:`ModelDemand.model_ref`)."""
    return {**ids, **{m.name: m.model_ref for m in models if m.model_ref}}


def unique_names(ids: Sequence[str]) -> list[str]:
    """Model names for the planner: the id, with ``#2``, ``#3`` for repeats."""
    seen: dict[str, int] = {}
    out = []
    for model_id in ids:
        seen[model_id] = seen.get(model_id, 0) + 1
        out.append(model_id if seen[model_id] == 1 else f"{model_id}#{seen[model_id]}")
    return out
