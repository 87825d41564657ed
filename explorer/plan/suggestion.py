"""A suggestion: one change to a plan and what it leads to, and what every kind of suggestion shares.

:mod:`explorer.plan.suggest` makes them (the kinds and the rules are there);
:mod:`explorer.plan.suggest_hardware` the ones that change the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from explorer.engines.load_dtype import served
from explorer.engines.options import MEMORY_RULES, Option, PlanResult
from explorer.engines.registry import SPLIT_ENGINES
from explorer.engines.request import PlanRequest
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.plan.longest_context import full_offload_context

__all__ = ["NO_TIER", "Ask", "Replan", "Suggestion", "best_tier", "longest_on_accelerators", "outcome"]

#: a plan without suggestions: (shape, cluster, request, artifacts) -> ranked result
Replan = Callable[[ModelShape, Cluster, PlanRequest, Sequence[Artifact]], PlanResult]
NO_TIER = 4  # what "nothing fits" ranks as


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    """One change and what it leads to.

    Attributes:
        kind: one of :data:`explorer.plan.suggest.KINDS`.
        change: the request or cluster change, as the CLI's and app's controls name it
            (``{"quant": "int4-awq"}``, ``{"kv_dtype": "fp8"}``, ``{"context": 40960}``,
            ``{"concurrency": 3}``, ``{"cluster": "1x2xl4-24g"}``; a precision with a cluster:
            ``{"quant": "fp8 block 128×128", "cluster": "1x8xh100-80g"}``).
        text: the change in words, with its cost (bits a weight, dollars an hour).
        fits: it reaches a better tier than the best option today (every layer on accelerators
            when a lower tier fits; anything when nothing does).
        tier: the tier of the best option it leads to; None when nothing fits even then.
        max_context: the best option's longest context (tokens a sequence) when it fits; else the
            longest context, at the asked concurrency, any refused layout would hold.
        best: the best option after the change, by the plan's goal.
    """

    kind: str
    change: Mapping[str, Any]
    text: str
    fits: bool
    tier: int | None
    max_context: int
    best: Option | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        best = self.best
        return {
            "kind": self.kind,
            "change": dict(self.change),
            "text": self.text,
            "fits": self.fits,
            "tier": self.tier,
            "max_context": self.max_context,
            "best": None
            if best is None
            else {
                "label": best.label,
                "engine": best.engine,
                "tier": best.tier,
                "replicas": best.replicas,
                "decode_tokens_per_s_estimate": round(best.speed.decode_estimate_tokens_per_s, 2)
                if best.speed is not None
                else None,
                "command": best.evaluation.command,
            },
        }


def best_tier(result: PlanResult) -> int:
    """The tier of the plan's best option; :data:`NO_TIER` when nothing fits."""
    return result.options[0].tier if result.options else NO_TIER


def longest_on_accelerators(shape: ModelShape, result: PlanResult) -> int:
    """The longest context (at the asked concurrency) at which some layout keeps every layer on accelerators:
    a memory refusal's, or a llama.cpp partial offload's with every layer on its cards."""
    refused = max((x.max_context or 0 for x in result.rejected if x.rule in MEMORY_RULES), default=0)
    offloads = (o for o in result.options if o.placement == "host-offload")
    return max(refused, max((full_offload_context(shape, o, result.request) for o in offloads), default=0))


def outcome(shape: ModelShape, kind: str, change: Mapping[str, Any], text: str, result: PlanResult,
             today: int) -> Suggestion:  # fmt: skip
    """What a change led to: ``result`` is the plan after it, ``today`` the tier of the best option before."""
    best = result.options[0] if result.options else None
    fits = best is not None and best.tier < today
    return Suggestion(
        kind=kind,
        change=change,
        text=text,
        fits=fits,
        tier=best.tier if best else None,
        max_context=best.evaluation.max_context_tokens if fits and best else longest_on_accelerators(shape, result),
        best=best,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """What every suggestion of one plan shares."""

    shape: ModelShape
    cluster: Cluster
    request: PlanRequest
    artifacts: tuple[Artifact, ...]
    result: PlanResult
    replan: Replan
    today: int
    precisions: tuple[Artifact, ...] = ()

    def again(self, *, cluster: Cluster | None = None, request: PlanRequest | None = None,
              artifacts: Sequence[Artifact] | None = None) -> PlanResult:  # fmt: skip
        """The plan again with one thing changed (a cluster, a request or the artifacts)."""
        return self.replan(
            self.shape, cluster or self.cluster, request or self.request, tuple(artifacts or self.artifacts)
        )

    def loaded(self, artifact: Artifact, gpu: GPUClass | None) -> tuple[ModelShape, Precision]:
        """The model as the asked engines load ``artifact`` on ``gpu``, the one with the fewest weight bytes
        (:func:`~explorer.engines.load_dtype.served`: vLLM and SGLang load a float32 checkpoint at 16 bits), and
        its precision; the shape as it is without a card class or an engine that casts it (llama.cpp)."""
        as_it_is = (self.shape, self.shape.precision_of(artifact))
        if gpu is None:
            return as_it_is
        ways = [served(SPLIT_ENGINES[e], self.shape, artifact, gpu) for e in self.request.engines if e in SPLIT_ENGINES]
        return min(ways, key=lambda way: way[0].weight_bytes(way[1]), default=as_it_is)

    def loaded_weight_bytes(self, artifact: Artifact, gpu: GPUClass | None) -> int:
        """``artifact``'s weights as loaded on ``gpu`` (:meth:`loaded`): its own size where loaded as it is,
        else the weights at the dtype they are loaded at (Llama-3.3-70B's float32 checkpoint: 141 GB at bf16, not
        282)."""
        shape, precision = self.loaded(artifact, gpu)
        return artifact.size_bytes if shape is self.shape else shape.weight_bytes(precision)

    def need_bytes(self, artifact: Artifact, gpu: GPUClass | None) -> int:
        """``artifact``'s weights and the asked KV cache as loaded on ``gpu`` (:meth:`loaded`): the KV at ``auto``
        follows the dtype the weights are loaded at."""
        shape, _ = self.loaded(artifact, gpu)
        kv = shape.kv_bytes(self.request.context_tokens, self.request.kv_dtype, self.request.concurrency)
        return self.loaded_weight_bytes(artifact, gpu) + kv
