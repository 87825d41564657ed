"""The cluster to buy: card classes and counts that serve a workload, cheapest an hour first.

For each priced card class of the catalogue (and the user's own cluster, when given) and each replica size
(:data:`REPLICA_SPECS`: 1, 2, 4 and 8 cards of a node, then two nodes of 8), the planner lists the ways the
model runs on one replica; each way on accelerators alone is sized for the workload
(:func:`explorer.speed.load.size_option`: the largest batch within the targets and the KV cache, the
replicas, aggregated or with prefill and decode apart), and a class keeps its cheapest. Classes that meet the
workload come first, cheapest an hour first; a workload no class meets gets the closest ones and what would
meet it, never an empty answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from explorer.engines.request import PlanRequest
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.hardware.cluster import Cluster
from explorer.hardware.cluster_text import parse_cluster_spec
from explorer.model.artifacts import Artifact
from explorer.plan.planner import plan
from explorer.speed.estimate import DEFAULT_SETTINGS
from explorer.speed.load import Sizing, replica_load, size_option
from explorer.speed.prices import PriceTable
from explorer.speed.settings import SpeedSettings
from explorer.speed.workload import Workload

__all__ = ["REPLICA_SPECS", "SizeResult", "SizedCluster", "size", "size_options", "sizing_request"]

#: the replica shapes tried on each class: (nodes, cards a node)
REPLICA_SPECS: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 8))
#: the ways of one replica sized, best first as the planner ranks them (the rest are slower or bigger)
OPTIONS_SIZED = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class SizedCluster:
    """A cluster that serves the workload (or comes closest): one class's cards running one option.

    Attributes:
        gpu_class: the card class.
        option: the way one replica runs (engine, layout, precision, launch command).
        sizing: the replicas, their batch, what binds, what it costs.
        own: the user's own cluster (``--cluster``) rather than a class of the catalogue.
        own_cards: the cards the user's cluster has (0: not the user's).
    """

    gpu_class: str
    option: Any
    sizing: Sizing
    own: bool = False
    own_cards: int = 0

    @property
    def cards(self) -> int:
        """Cards the workload needs."""
        return self.sizing.cards

    def sort_key(self) -> tuple:
        """Met first, then cheaper an hour (unpriced last), fewer cards; unmet: the smaller shortfall."""
        if not self.sizing.met:
            return (1, max(self.sizing.shortfall.values()), self.cards)
        cost = self.sizing.usd_per_hour
        return (0, math.inf if cost is None else cost, self.cards)

    def to_dict(self, workload: Workload) -> dict[str, Any]:
        """JSON-ready fields: class, cards, cost an hour, option, binding limit and the load figures."""
        o = self.option
        return {
            "gpu_class": self.gpu_class,
            "cards": self.cards,
            "usd_per_hour": None if self.sizing.usd_per_hour is None else round(self.sizing.usd_per_hour, 2),
            "option": o.label,
            "engine": o.engine,
            "precision": o.precision,
            "layout": o.layout.parallel,
            "binding": self.sizing.binding,
            "met": self.sizing.met,
            "own_cluster": self.own,
            **({"own_cards": self.own_cards} if self.own else {}),
            "load": self.sizing.to_dict(workload.answer_tokens),
            "command": o.evaluation.command,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeResult:
    """Clusters for a workload, best first, and what to do when none meets it.

    Attributes:
        workload: the workload sized.
        clusters: one a class (and the user's cluster), those that meet the workload first, cheapest first.
        advice: where none meets the workload: by how much the closest misses, and what would meet it.
        searched: the classes tried.
    """

    workload: Workload
    clusters: tuple[SizedCluster, ...]
    advice: tuple[str, ...] = ()
    searched: tuple[str, ...] = ()

    @property
    def met(self) -> tuple[SizedCluster, ...]:
        """The clusters that meet the workload, best first."""
        return tuple(c for c in self.clusters if c.sizing.met)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the workload, the clusters best first, the advice."""
        return {
            "workload": self.workload.to_dict(),
            "clusters": [c.to_dict(self.workload) for c in self.clusters],
            "met": bool(self.met),
            "advice": list(self.advice),
            "searched": list(self.searched),
        }


def size(
    shape,
    workload: Workload,
    catalogue: Catalogue,
    prices: PriceTable,
    request: PlanRequest | None = None,
    *,
    artifacts: Sequence[Artifact] | None = None,
    own: Cluster | None = None,
    classes: Sequence[str] | None = None,
    settings: SpeedSettings | None = None,
) -> SizeResult:
    """Clusters that serve ``workload`` with ``shape``, cheapest an hour first (see the module's text).

    Args:
        request: the engine settings (the context is the workload's prompt + answer).
        own: the user's cluster, sized as one more candidate (its class's price, if any).
        classes: the card classes to try (default: every class ``prices`` lists that the catalogue knows).
    """
    request = sizing_request(request, workload)
    settings = replace(settings or DEFAULT_SETTINGS, prices=prices)
    names = tuple(classes) if classes is not None else tuple(r.gpu_class for r in prices.rows)
    tried = tuple(n for n in names if (gpu := catalogue.lookup(n)) is not None and _sizable(gpu))
    found: list[SizedCluster] = []
    for name in tried:
        best = _best_on_class(shape, workload, catalogue, request, artifacts, name, prices, settings)
        if best is not None:
            found.append(best)
    if own is not None:
        mine = _best_on(shape, workload, own, catalogue, request, artifacts, prices, settings)
        if mine is not None:
            found.append(replace(mine, own=True, own_cards=own.total_gpus))
    ranked = tuple(sorted(found, key=SizedCluster.sort_key))
    advice = () if any(c.sizing.met for c in ranked) else _advice(workload, ranked, tried)
    return SizeResult(workload=workload, clusters=ranked, advice=advice, searched=tried)


def sizing_request(request: PlanRequest | None, workload: Workload) -> PlanRequest:
    """The request each replica is planned with: ``request``'s engine settings at the workload's context (prompt +
    answer), one sequence asked (the sizing finds the batch)."""
    return replace(request or PlanRequest(), context_tokens=workload.context_tokens, concurrency=1)


def size_options(
    options, shape, workload: Workload, request: PlanRequest, settings: SpeedSettings
) -> list[Sizing | None]:
    """Each option of a plan sized for ``workload`` (``explorer plan --users``); None where its speed is unknown
    (no bandwidth or FLOPs for its card class, or no sequence fits). Prices from ``settings``."""
    prices = settings.prices if isinstance(settings.prices, PriceTable) else PriceTable()
    sized: list[Sizing | None] = []
    for option in options:
        load = replica_load(option, shape, workload, request, settings)
        price = None if option.layout.cpu else prices.usd_per_gpu_hour(option.layout.gpu_class)
        sized.append(None if load is None else size_option(load, max(1, option.layout.cards), price))
    return sized


def _sizable(gpu: GPUClass) -> bool:
    """A discrete card with a known bandwidth (a MIG slice or a unified host is not rented by the card)."""
    return bool(gpu.bandwidth_bytes_per_s) and not gpu.unified and not gpu.mig_parent


def _best_on_class(shape, workload, catalogue, request, artifacts, name, prices, settings) -> SizedCluster | None:
    """A class's cheapest way over the replica shapes; the larger shapes are tried only while the smaller ones
    leave the model without a way that meets the workload on accelerators alone."""
    best: SizedCluster | None = None
    for nodes, width in REPLICA_SPECS:
        spec = f"{nodes}x{width}x{name}" + ("@ib" if nodes > 1 else "")
        got = _best_on(shape, workload, parse_cluster_spec(spec, catalogue), catalogue, request, artifacts, prices,
                       settings)  # fmt: skip
        if got is not None and (best is None or got.sort_key() < best.sort_key()):
            best = got
    return best


def _best_on(shape, workload, cluster, catalogue, request, artifacts, prices, settings) -> SizedCluster | None:
    """The cheapest sized way among the planner's best options on one replica's cluster."""
    result = plan(shape, cluster, request, artifacts=artifacts, model_ref=shape.name or "model", speed=False,
                  suggest=False, catalogue=catalogue)  # fmt: skip
    best: SizedCluster | None = None
    sized = 0
    for option in result.options:
        if sized >= OPTIONS_SIZED:
            break
        if option.gpu is None or option.layout.cpu or option.evaluation.layers_on_host or not option.fits:
            continue
        if shape.moe is None and option.layout.dp > 1:  # copies side by side: the sizing's own replicas
            continue
        load = replica_load(option, shape, workload, request, settings)
        if load is None:
            continue
        sized += 1
        price = prices.usd_per_gpu_hour(option.layout.gpu_class)
        candidate = SizedCluster(gpu_class=option.gpu.name, option=option,
                                 sizing=size_option(load, option.layout.cards, price))  # fmt: skip
        if best is None or candidate.sort_key() < best.sort_key():
            best = candidate
    return best


def _advice(workload: Workload, ranked: tuple[SizedCluster, ...], tried: tuple[str, ...]) -> tuple[str, ...]:
    """What the closest clusters miss by, and what would meet the workload."""
    if not ranked:
        return (
            f"the model runs on no priced class of {', '.join(tried) or 'the catalogue'} within two nodes of 8 cards "
            f"at {workload.context_tokens:,} tokens (prompt + answer) on accelerators alone; a lower precision "
            "(--quant fp8, int4-awq) or a shorter prompt and answer would let it fit",
        )
    closest = ranked[0]
    s, label = closest.sizing, f"{closest.gpu_class} ({closest.option.label})"
    lines = []
    if "tpot" in s.shortfall and workload.tpot_target_s:
        reached = s.point.tpot_s
        lines.append(
            f"time per output token: the closest, {label}, takes {reached * 1e3:.1f} ms at one sequence, "
            f"{s.shortfall['tpot']:.2f} × the {workload.tpot_target_s * 1e3:.1f} ms target; a TPOT target of "
            f"{math.ceil(reached * 1e3)} ms would be met, or weights at a lower precision (--quant fp8, int4-awq: "
            "fewer bytes read a step), or a card class with more memory bandwidth"
        )
    if "ttft" in s.shortfall and workload.ttft_s:
        ratio = s.shortfall["ttft"]
        if math.isfinite(ratio):
            shorter = max(1, int(workload.prompt_tokens / ratio))
            lines.append(
                f"time to first token: the closest, {label}, takes {s.ttft_s:.2f} s, {ratio:.2f} × the "
                f"{workload.ttft_s:g} s target; prompts of about {shorter:,} tokens (or a prefix-cache share of "
                f"{1 - 1 / ratio:.0%}) would meet it, or a card class with more compute"
            )
        else:
            lines.append(
                f"time to first token: on {label} prompts of {workload.prefill_tokens:,} tokens arrive faster than "
                "the prefill chunks can take them at any batch; longer answers per prompt, a larger chunk "
                "(--max-num-batched-tokens, --chunked-prefill-size) or a prefix-cache share would meet it"
            )
    return tuple(lines)
