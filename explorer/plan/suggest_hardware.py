"""Suggestions that change the cluster: more cards of the user's class (at the model's own precision, or at
another with it), the cheapest catalogue class for one node, and the named chips of a unified-memory host given
by its memory alone (see :mod:`explorer.plan.suggest`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.hardware.cluster import Cluster
from explorer.hardware.cluster_text import format_cluster_spec, uniform_cluster
from explorer.model.artifacts import Artifact
from explorer.plan.suggestion import Ask, Suggestion, outcome
from explorer.units import gb

__all__ = ["cheapest_class", "named_chips", "own_class", "precision_and_cluster"]

#: card counts a suggested node may have, and the most nodes a suggested cluster spans
NODE_WIDTHS = (1, 2, 4, 8)
MAX_SUGGESTED_NODES = 64
#: replans one cluster search may make
MAX_CLUSTER_TRIES = 6


def _least_cards(ask: Ask, gpu: GPUClass, artifacts: Sequence[Artifact] = ()) -> int:
    """Cards of ``gpu`` the weights (of ``artifacts``, else the plan's) and the asked KV cache need at the least
    (0.95 of each card), as the engines load them on ``gpu`` (:meth:`Ask.need_bytes`: a float32 checkpoint at 16
    bits)."""
    kv = ask.shape.kv_bytes(ask.request.context_tokens, ask.request.kv_dtype, ask.request.concurrency)
    need = min((ask.need_bytes(a, gpu) for a in artifacts or ask.artifacts), default=kv)
    return max(1, math.ceil(need / (0.95 * gpu.usable_memory_bytes)))


def _layouts(least: int, widest: int) -> list[tuple[int, int]]:
    """(nodes, cards a node) to try, fewest cards first: one node of 1, 2, 4, 8 cards, then nodes of ``widest``."""
    one = [(1, w) for w in sorted({*NODE_WIDTHS, widest}) if least <= w <= widest]
    many = [(n, widest) for n in range(max(2, math.ceil(least / widest)), MAX_SUGGESTED_NODES + 1)]
    return (one + many)[:MAX_CLUSTER_TRIES]


def _cluster_outcome(ask: Ask, gpu: GPUClass, nodes: int, width: int, fabric: str, kind: str, note: str,
                     artifact: Artifact | None = None) -> Suggestion:  # fmt: skip
    """The plan again on ``nodes`` alike nodes of ``width`` cards of ``gpu`` (with ``artifact``: at its precision)."""
    cluster = uniform_cluster(gpu, nodes, width, fabric)
    spec = format_cluster_spec(cluster)
    if artifact is None:
        return outcome(ask.shape, kind, {"cluster": spec}, f"{spec}{note}", ask.again(cluster=cluster), ask.today)
    result = ask.again(cluster=cluster, artifacts=[artifact])
    change = {"quant": artifact.quant, "cluster": spec}
    return outcome(ask.shape, kind, change, f"{artifact.label} on {spec}{note}", result, ask.today)


def _main_class(cluster: Cluster) -> tuple[GPUClass, int, int, str | None] | None:
    """The class with the most cards: (class, cards on its widest node, cards in all, a fabric it uses)."""
    best = None
    for gpu in cluster.gpu_classes:
        if gpu.is_mig or gpu.unified:
            continue
        groups = [(n, n.group(gpu.name)) for n in cluster.nodes_with(gpu.name)]
        total = sum(g.count for _, g in groups)  # type: ignore[union-attr]
        widest = max(g.count for _, g in groups)  # type: ignore[union-attr]
        fabric = next((n.fabric for n, _ in groups if n.fabric), None)
        if best is None or total > best[2]:
            best = (gpu, widest, total, fabric)
    return best


def own_class(ask: Ask) -> list[Suggestion]:
    """The smallest cluster of the user's main card class that fits (one node of 2, 4, 8 cards, then nodes of 8
    on a fabric), skipping what the cluster holds already; none when no try within a few fits."""
    main = _main_class(ask.cluster)
    made = _smallest_cluster(ask, main, "cluster") if main is not None else None
    return [made] if made is not None else []


def precision_and_cluster(ask: Ask) -> list[Suggestion]:
    """Each other precision the plan was widened to (:attr:`Ask.precisions`: the fallback, published
    checkpoints where known) on the smallest cluster of the user's main class that holds it: the precision and
    the cluster changed together, as an engineer answers. Llama-3.1-405B on one H100: FP8 on 8 × H100, int4
    AWQ on 4 × H100. A precision whose weights the cluster may hold already is the ``precision`` suggestion's;
    one that leads to a cluster a higher precision reached is left out (Q8_0 on the 8 cards fp8 takes)."""
    main = _main_class(ask.cluster)
    if main is None:
        return []
    gpu, widest, _total, _fabric = main
    out: list[Suggestion] = []
    for artifact in ask.precisions:
        if _least_cards(ask, gpu, [artifact]) <= widest:
            continue
        made = _smallest_cluster(ask, main, "precision-cluster", artifact)
        if made is not None and all(s.change["cluster"] != made.change["cluster"] for s in out):
            out.append(made)
    return out


def _smallest_cluster(ask: Ask, main: tuple[GPUClass, int, int, str | None], kind: str,
                      artifact: Artifact | None = None) -> Suggestion | None:  # fmt: skip
    """The first cluster of ``main``'s class (:func:`_layouts`, fewest cards first) the plan (at ``artifact``'s
    precision) fits, skipping what the cluster holds already; None when no try within a few fits."""
    gpu, widest, total, fabric = main
    least = max(_least_cards(ask, gpu, [artifact] if artifact else ()), 1)
    for nodes, width in _layouts(least, max(widest, NODE_WIDTHS[-1])):
        if width <= widest and (nodes == 1 or (fabric and nodes * width <= total)):
            continue  # the cluster holds this already: the plan tried it
        made = _cluster_outcome(ask, gpu, nodes, width, fabric or "ib0", kind, "", artifact)
        if made.fits:
            return made
    return None


def cheapest_class(ask: Ask, catalogue: Catalogue | None, prices: Any) -> list[Suggestion]:
    """The catalogue class whose one node (1, 2, 4 or 8 cards) holds it for the fewest dollars an hour
    (classes with a price in ``prices``, tried cheapest first; MIG slices and Macs left out)."""
    if catalogue is None or prices is None:
        return []
    offers = []
    for gpu in catalogue:
        price = prices.usd_per_gpu_hour(gpu.name)
        if price is None or gpu.is_mig or gpu.unified:
            continue
        least = _least_cards(ask, gpu)
        offers += [(w * price, w, gpu) for w in NODE_WIDTHS if w >= least]
    for usd, width, gpu in sorted(offers, key=lambda t: (t[0], t[1], t[2].name))[:MAX_CLUSTER_TRIES]:
        made = _cluster_outcome(ask, gpu, 1, width, "", "card-class", f" (${usd:,.2f} an hour)")
        if made.fits:
            return [made]
    return []


def named_chips(ask: Ask, catalogue: Catalogue | None) -> list[Suggestion]:
    """Unified hosts named by memory alone: the catalogue's chips of that memory, with their bandwidth."""
    if catalogue is None:
        return []
    unnamed = next((n.gpus[0].gpu for n in ask.cluster.unified_nodes
                    if not (n.gpus[0].gpu.known and n.gpus[0].gpu.bandwidth_bytes_per_s)), None)  # fmt: skip
    if unnamed is None:
        return []
    out = []
    for chip in catalogue:
        if chip.unified and chip.memory_bytes == unnamed.memory_bytes and chip.bandwidth_bytes_per_s:
            note = f": {gb(chip.bandwidth_bytes_per_s, 0)}/s of memory bandwidth ({unnamed.name} assumes the host's)"
            made = _cluster_outcome(ask, chip, 1, 1, "", "named-chip", note)
            out.append(replace(made, fits=made.best is not None))
    return out
