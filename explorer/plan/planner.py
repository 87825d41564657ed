"""plan(): every way a model can run on a cluster, best first, and why the others cannot.

Each engine the request names walks the cluster itself (the
:class:`~explorer.engines.interface.Engine` protocol) and writes the ways
that fit and the refused ones into one
:class:`~explorer.engines.collect.Collector`: vLLM and SGLang through the
tensor × pipeline walk of :mod:`explorer.engines.split_walk` (its docstring
lists the refusal rules in order), llama.cpp through its own
(:mod:`explorer.engines.llamacpp.walk`: one card, a layer split, a node's
cards of several classes, RPC across nodes, partial offload, CPU, unified memory). The planner checks the request,
adds speed estimates and ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from explorer.engines.collect import Collector
from explorer.engines.common import PlanRequest
from explorer.engines.options import Option, PlanResult
from explorer.engines.registry import engine_named, engines_named
from explorer.errors import PlanError
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.offer import original_artifact, what_if_artifact
from explorer.plan.ranking import SortKey, rank
from explorer.speed.estimate import SpeedSettings, speed_of


def recheck(
    shape: ModelShape,
    option: Option,
    request: PlanRequest,
    *,
    model_ref: str | None = None,
    speed: bool | SpeedSettings = True,
) -> Option:
    """The same way at another context or concurrency: weights and overhead stay, the KV cache changes.

    The speed estimate is recomputed for the new request (with ``speed``), else dropped.
    """
    out = engine_named(option.layout.engine).recheck(shape, option, request, model_ref=model_ref or shape.name)
    settings = speed if isinstance(speed, SpeedSettings) else None
    return replace(out, speed=speed_of(out, shape, request, settings) if speed else None)


def plan(
    shape: ModelShape,
    cluster: Cluster,
    request: PlanRequest | None = None,
    *,
    artifacts: Sequence[Artifact] | None = None,
    model_ref: str | None = None,
    sort: SortKey = "default",
    speed: bool | SpeedSettings = True,
) -> PlanResult:
    """Every way ``shape`` can run on ``cluster``, best first, and the refused ways with reasons.

    With ``speed`` (True, or :class:`~explorer.speed.estimate.SpeedSettings`) each option carries its
    speed-of-light bound and estimate (``Option.speed``, see :mod:`explorer.speed.estimate`); ``sort="speed"``
    ranks on it.
    """
    request = request or PlanRequest()
    if request.context_tokens < 1 or request.concurrency < 1:
        raise PlanError(f"context ({request.context_tokens}) and concurrency ({request.concurrency}) must be ≥ 1")
    if not 0 < request.gpu_memory_utilization <= 1:
        raise PlanError(f"gpu_memory_utilization must be in (0, 1], got {request.gpu_memory_utilization}")
    engines = engines_named(request.engines)
    model_ref = model_ref or shape.name or "MODEL"
    if artifacts is None:
        artifacts = [what_if_artifact(shape, request.precision) if request.precision else original_artifact(shape)]
    out = Collector()
    for engine in engines:
        engine.walk(shape, cluster, artifacts, request, model_ref, out)
    options = out.options
    if speed:
        settings = speed if isinstance(speed, SpeedSettings) else None
        options = [replace(o, speed=speed_of(o, shape, request, settings)) for o in options]
    return PlanResult(
        model=model_ref,
        request=request,
        options=tuple(rank(options, sort)),
        rejected=tuple(out.rejected),
        pruned=dict(out.pruned),
        considered=out.considered,
    )
