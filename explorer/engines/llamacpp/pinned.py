"""llama.cpp on cards a user names: one card, a node's cards (any classes), or several nodes through RPC.

As gpustack's GGUF selector takes selected GPUs: the cards of one node are
llama.cpp's own devices, split in proportion to each card's memory; across
nodes, the node with the most pinned cards keeps its cards and every pinned
card elsewhere runs an ``rpc-server`` of its own (nodes of one fabric only, as
the walk spans them). Every pinned card must be
able to hold at least one layer (what ``-ngl 1`` puts on a card: the output
layer and a compute buffer), or the pin is refused naming the card.
``-ngl`` and ``--no-cpu-offload`` act as in the walk
(:mod:`explorer.engines.llamacpp.offload`); with neither, as many layers as
fit go on the cards and the rest stays on the host.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.interface import PinnedLayout
from explorer.engines.layouts import Layout
from explorer.engines.llamacpp.launch import NAME, evaluate, gguf_quant_for, llama_model, nominal_bits_for, settings_for
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.model import LlamaModel
from explorer.engines.llamacpp.offload import CUDA_CONTEXT_BYTES, card_seats, offload_for, rpc_seats
from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.errors import LlamaCppConfigError, ManualSelectionError
from explorer.hardware.cards import CardRef
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.units import gib

#: the float precisions ``convert_hf_to_gguf.py --outtype`` writes from the model's own weights (f16, bf16, f32)
CONVERTED_FLOATS = frozenset({"fp16", "bf16", "fp32"})


def serves(artifact: Artifact) -> bool:
    """A GGUF, or the model's own weights converted, as they are or to another float (``--quant F16`` on a bf16
    model: ``convert_hf_to_gguf.py --outtype f16``, a routine conversion); not another repository's safetensors
    (AWQ, FP8…) nor a quantised safetensors what-if (the GGUF what-ifs say which quant)."""
    if artifact.format == "gguf" or not (artifact.repo or artifact.what_if):
        return True
    return not artifact.repo and artifact.quant.lower() in CONVERTED_FLOATS


def one_layer_bytes(model: LlamaModel, request: PlanRequest, card: CardRef) -> int:
    """What ``-ngl 1`` puts on this card alone, its CUDA context included (bytes)."""
    (seat,) = card_seats([card])
    mem = llamacpp_memory(model, settings_for(request, ngl=1), [seat.device])
    return mem.devices[0].total_bytes + CUDA_CONTEXT_BYTES


def pin(
    shape: ModelShape,
    cards: Sequence[CardRef],
    artifacts: Sequence[Artifact],
    request: PlanRequest,
    model_ref: str,
) -> PinnedLayout:
    """One llama.cpp launch on exactly ``cards`` (see the module docstring).

    Raises:
        ManualSelectionError: no artifact, a request that runs on the CPU only, a card that cannot hold
            one layer, or settings llama.cpp refuses.
    """
    served = [a for a in artifacts if serves(a)]
    if not served:
        raise ManualSelectionError("llama.cpp loads GGUF files or the model's own weights, and none is offered")
    artifact = next((a for a in served if a.format == "gguf"), served[0])
    model = llama_model(shape, artifact)
    offload = offload_for(request, model.n_layer)
    if offload.conflict:
        raise ManualSelectionError(offload.conflict)
    if not offload.gpu:
        raise ManualSelectionError("--ngl 0 runs every layer on the CPU: the pinned GPUs would hold nothing")
    for card in cards:
        need = one_layer_bytes(model, request, card)
        if need > card.capacity_bytes:
            raise ManualSelectionError(
                f"GPU {card.name} ({card.gpu.name}, {gib(card.capacity_bytes)}) lacks memory for one layer: "
                f"at least {gib(need)} is required",
                hint="pin larger cards, or fewer layers' worth of context (--context)",
            )
    local, remote = _main_and_rpc(cards)
    main = local[0].node
    apart = sorted({c.node.name for c in remote if main.fabric is None or c.node.fabric != main.fabric})
    if apart:  # as the walk, which spans only the nodes of one fabric (a pool's ``spannable``)
        raise ManualSelectionError(
            f"pinned GPUs on {', '.join(apart)} share no fabric with {main.name}: llama.cpp's RPC servers need one",
            hint="pin cards of one node, or of nodes on one fabric (NODES x GPUS x CLASS @FABRIC)",
        )
    seats = card_seats(local) + rpc_seats(remote)
    layout = _layout(local, remote)
    try:
        ev, _ = evaluate(
            model, artifact, layout, seats, main, request, model_ref, quant=gguf_quant_for(shape, artifact)
        )
    except LlamaCppConfigError as err:
        raise ManualSelectionError(f"llama.cpp refuses this launch: {err.message}") from None
    slowest = min((c.gpu for c in cards), key=lambda g: (g.bandwidth_bytes_per_s, g.memory_bytes))
    served = shape.params - sum(t.elements for t in shape.mtp)
    option = Option(
        layout=layout,
        artifact=artifact,
        precision=gguf_quant_for(shape, artifact),
        bits_per_weight=model.weight_bytes * 8 / served if served else 0.0,
        nominal_bits=nominal_bits_for(shape, artifact),
        evaluation=ev,
        free_now=True,
        hosts=1,
        gpu=slowest,
        node=main,
    )
    ordered = tuple(local) + tuple(remote)
    needs = tuple(c.total + CUDA_CONTEXT_BYTES for c in ev.cards)
    return PinnedLayout(option=option, cards=ordered, needs_bytes=needs)


def _main_and_rpc(cards: Sequence[CardRef]) -> tuple[list[CardRef], list[CardRef]]:
    """The main node's pinned cards (the node with the most of them, then the most memory) and the others."""
    counts = Counter(c.node.name for c in cards)
    memory = Counter()
    for c in cards:
        memory[c.node.name] += c.capacity_bytes
    main = max(counts, key=lambda name: (counts[name], memory[name], -list(counts).index(name)))
    return [c for c in cards if c.node.name == main], [c for c in cards if c.node.name != main]


def _layout(local: Sequence[CardRef], remote: Sequence[CardRef]) -> Layout:
    classes = "+".join(dict.fromkeys(c.gpu.name for c in (*local, *remote)))
    base = Layout(engine=NAME, gpu_class=classes, gpus_per_node=len(local), pp=len(local) + len(remote))
    if not remote:
        return base
    nodes = 1 + len({c.node.name for c in remote})
    return replace(base, nodes=nodes, fabric=local[0].node.fabric or "network", rpc=True, rpc_servers=len(remote))
