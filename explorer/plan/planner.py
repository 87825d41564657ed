"""plan(): every way a model can run on a cluster, best first, why the others cannot, and a way forward.

Each engine the request names walks the cluster itself (the
:class:`~explorer.engines.interface.Engine` protocol) and writes the ways
that fit and the refused ones into one
:class:`~explorer.engines.collect.Collector`: vLLM and SGLang through the
tensor × pipeline walk of :mod:`explorer.engines.split_walk` (its docstring
lists the refusal rules in order), llama.cpp through its own
(:mod:`explorer.engines.llamacpp.walk`: one card, a layer split, a node's
cards of several classes, RPC across nodes, partial offload, CPU, unified memory). The planner checks the request,
then for every option adds its speed estimate and its replicas
(:mod:`explorer.plan.replicas`), for every memory refusal the longest context
that would fit (:mod:`explorer.plan.longest_context`), ranks by tier and goal
(:mod:`explorer.plan.ranking`), and, when nothing keeps every layer on
accelerators, suggests changes (:mod:`explorer.plan.suggest`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from explorer.artifacts.offer import all_gpu_only, original_artifact, what_if_artifact
from explorer.engines.collect import Collector
from explorer.engines.options import Option, PlanResult
from explorer.engines.registry import engine_named, engines_named
from explorer.engines.request import PlanRequest
from explorer.errors import PlanError
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.cluster import Cluster
from explorer.memo import memo
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.longest_context import with_refusal_contexts
from explorer.plan.question import PlanQuestion
from explorer.plan.queueing import queued_candidates, requeued, settled
from explorer.plan.ranking import DEFAULT_GOAL, at_the_brim, goal_named, rank
from explorer.plan.replicas import Census, replica_launch, with_replicas
from explorer.plan.suggest import KINDS, suggestions
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

    The speed estimate is recomputed for the new request (with ``speed``), else dropped. An option the planner
    gave an fp8 KV cache (``Option.kv_dtype``) keeps it. A queueing candidate (``Option.asked_sequences``) is
    re-derived at the sequences its KV cache holds, its command still asking for everyone
    (:func:`~explorer.plan.queueing.requeued`): Llama-3.1-8B at 32,768 × 64 on an H100 with an fp8 cache stays
    "27 of 64 at once" at 70.5 GiB, not 64 sequences at 145.9 GiB.
    """
    if option.asked_sequences:
        bare = replace(option, asked_sequences=0)
        return requeued(bare, request, lambda r: recheck(shape, bare, r, model_ref=model_ref, speed=speed))
    request = option_request(request, option)
    out = engine_named(option.layout.engine).recheck(shape, option, request, model_ref=model_ref or shape.name)
    settings = speed if isinstance(speed, SpeedSettings) else None
    return replace(out, speed=speed_of(out, shape, request, settings) if speed else None)


def option_request(request: PlanRequest, option: Option) -> PlanRequest:
    """The request an option was planned for: ``request`` with the KV cache type the planner chose for it."""
    return replace(request, kv_dtype=option.kv_dtype) if option.kv_dtype else request


def _check(request: PlanRequest) -> None:
    if request.context_tokens < 1 or request.concurrency < 1:
        raise PlanError(f"context ({request.context_tokens}) and concurrency ({request.concurrency}) must be ≥ 1")
    if not 0 < request.gpu_memory_utilization <= 1:
        raise PlanError(f"gpu_memory_utilization must be in (0, 1], got {request.gpu_memory_utilization}")
    engines_named(request.engines)  # an unknown engine is refused before any walk


def _ranked(
    shape: ModelShape,
    cluster: Cluster,
    request: PlanRequest,
    artifacts: Sequence[Artifact],
    *,
    model_ref: str,
    goal: str,
    speed: bool | SpeedSettings,
) -> PlanResult:
    """Walk, estimate, count replicas, rank: a plan without suggestions."""
    out = Collector()
    for engine in engines_named(request.engines):
        engine.walk(shape, cluster, artifacts, request, model_ref, out)
    options = out.options
    if speed:
        settings = speed if isinstance(speed, SpeedSettings) else None
        options = [replace(o, speed=speed_of(o, shape, request, settings)) for o in options]
    census = cluster.derived(Census)  # counted once per cluster, not once per plan
    options = [with_replicas(o, cluster, request, census) for o in options]
    return PlanResult(
        model=model_ref,
        request=request,
        options=tuple(rank(options, goal)),
        rejected=with_refusal_contexts(shape, out.rejected, request),
        pruned=dict(out.pruned),
        considered=out.considered,
        goal=goal,
        replica_launch=partial(replica_launch, cluster=cluster, request=request, moe=shape.moe is not None),
    )


#: the KV cache type planned beside the model's own when that keeps no layout on accelerators with headroom:
#: vLLM ``--kv-cache-dtype fp8``, SGLang ``fp8_e4m3``, llama.cpp ``-ctk q8_0 -ctv q8_0`` (half the bytes of bf16)
SMALLER_KV = "fp8"


def _smaller_kv(request: PlanRequest, shape: ModelShape) -> PlanRequest | None:
    """The request with an fp8 KV cache, when the user left the KV type to the model (``auto``) and the model
    keeps it in more than 8 bits; else None."""
    if request.kv_dtype != "auto" or shape.kv_type().bits_per_element <= 8:
        return None
    return replace(request, kv_dtype=SMALLER_KV)


def _with_smaller_kv(own: PlanResult, shape: ModelShape, cluster: Cluster, artifacts: Sequence[Artifact], *,
                     speed: bool | SpeedSettings) -> PlanResult:  # fmt: skip
    """``own`` with the fp8-KV variant of every layout that keeps every layer on accelerators with headroom only
    at fp8 (or at all, at the brim, when none of ``own``'s keeps every layer on accelerators: llama.cpp all on one
    T4 with a q8_0 cache, 14 tok/s, before 14 layers on its CPU, 4 tok/s) ranked beside its options, when none of
    ``own``'s keeps every layer on accelerators with headroom
    (:func:`~explorer.plan.ranking.at_the_brim`; a layout offered only beside one at the brim aside) and the KV
    type is the model's: the engines' docs recommend ``--kv-cache-dtype fp8`` to hold more sequences or longer
    ones (vLLM's quantized_kvcache.md, SGLang's quantized_kv_cache.md). Each such option says so
    (``Option.kv_dtype``, its command carries the flag); the ranking decides between them. Its refusals and counts
    are not added: they are the same layouts at another KV type, and the model's own KV type's say why a layout is
    refused.

    70B bf16, 64 sequences of 32,768 tokens on 8 × H100: 640 GiB of bf16 KV leave llama.cpp with 17 layers on the
    CPU (0.3 tok/s) first; at fp8 (320 GiB) vLLM tp 8 holds them on the cards and ranks first."""
    smaller = _smaller_kv(own.request, shape)
    if smaller is None or any(o.tier == 1 and not at_the_brim(o) and not o.beside_brim for o in own.options):
        return own
    roomy = {_way(o) for o in own.options if o.tier == 1 and not at_the_brim(o)}  # fp8 buys these nothing
    # with no layout on the accelerators alone at the model's KV type, one at the brim at fp8 is still far ahead
    # of layers on the CPU (the fewest-cards goal ranks it after any with headroom; the others weigh it by their
    # own keys)
    brim_too = not any(o.tier == 1 for o in own.options)
    extra = _ranked(shape, cluster, smaller, artifacts, model_ref=own.model, goal=own.goal, speed=speed)
    marked = [
        replace(o, kv_dtype=SMALLER_KV)
        for o in extra.options
        if o.tier == 1 and (brim_too or not at_the_brim(o)) and _way(o) not in roomy
    ]
    return replace(own, options=tuple(rank([*own.options, *marked], own.goal)))


def _with_queueing(result: PlanResult, shape: ModelShape, cluster: Cluster, artifacts: Sequence[Artifact], *,
                   speed: bool | SpeedSettings) -> PlanResult:  # fmt: skip
    """``result`` with its queueing candidates ranked beside its options (:mod:`explorer.plan.queueing`: vLLM and
    SGLang layouts that hold fewer sequences of the asked context than asked, the rest waiting), tried at the
    model's KV type and at fp8 where :func:`_smaller_kv` gives it; the ranking decides
    (:func:`~explorer.plan.ranking.rank`)."""
    kv_types = [r for r in (result.request, _smaller_kv(result.request, shape)) if r is not None]
    model_ref, goal = result.model, result.goal
    queued = queued_candidates(
        result,
        kv_types,
        lambda r: _ranked(shape, cluster, r, artifacts, model_ref=model_ref, goal=goal, speed=speed),
        lambda o, r: recheck(shape, o, r, model_ref=model_ref, speed=speed),
    )
    return replace(result, options=tuple(rank([*result.options, *queued], goal))) if queued else result


def _with_variants(at_own_kv: PlanResult, shape: ModelShape, cluster: Cluster, artifacts: Sequence[Artifact], *,
                   speed: bool | SpeedSettings) -> tuple[PlanResult, PlanResult]:  # fmt: skip
    """``at_own_kv`` with the fp8 KV cache's layouts (:func:`_with_smaller_kv`: what holds every sequence), then
    also with the queueing candidates (:func:`_with_queueing`): both plans, the first for the suggestions."""
    holding = _with_smaller_kv(at_own_kv, shape, cluster, artifacts, speed=speed)
    return holding, _with_queueing(holding, shape, cluster, artifacts, speed=speed)


def _way(option: Option) -> tuple:
    """What an option loads on which cards: the same way at another KV type has the same key."""
    return (option.layout, option.artifact.label, option.precision)


def _merged(own: PlanResult, extra: PlanResult) -> PlanResult:
    """Two plans of one model on one cluster over different artifacts as one: the options ranked together,
    the refusals and counts added (each artifact is walked on its own, so this equals planning them at once)."""
    pruned = dict(own.pruned)
    for rule, count in extra.pruned.items():
        pruned[rule] = pruned.get(rule, 0) + count
    return replace(
        own,
        options=tuple(rank([*own.options, *extra.options], own.goal)),
        rejected=(*own.rejected, *extra.rejected),
        pruned=pruned,
        considered=own.considered + extra.considered,
    )


def _added(extra_artifacts: Sequence[Artifact], wider: PlanResult) -> tuple[str, ...]:
    """The labels of the fallback artifacts that gave the wider plan an option (a bf16 conversion planned because
    the own fp8 weights do not run on these cards, but too large for them, is not named as added)."""
    planned = [option.artifact for option in wider.options]  # artifacts hold dicts: compared, not hashed
    return tuple(a.label for a in extra_artifacts if a in planned)


def _standing(result: PlanResult) -> tuple[int, bool, bool]:
    """How good a plan's best option is: its tier, then whether its launch runs as printed, then whether it
    keeps headroom (:func:`~explorer.plan.ranking.at_the_brim`; ranking puts those first inside a tier, so the
    first option tells); a plan with no option stands below every tier. A layout offered only beside one at the
    brim (``Option.beside_brim``: one more node) is passed over, so a quantised checkpoint on the fewer cards is
    still planned and ranked against it (405B on 4 × 8 × A100-40G with vLLM: bf16 on 3 nodes is at the brim, on 4
    it is roomy, and the published int4 AWQ on one node of 8 still ranks first). A queueing candidate
    (``Option.asked_sequences``: fewer sequences at once than asked) is passed over too: the fallback is weighed for
    holding everyone, and the ranking places the candidates (Gemma-4-26B at 32k × 64 on one H100: llama.cpp Q4_K_M
    holds all 64 at 1,703 tokens/s, SGLang bf16 28 at once at 991; the Q4_K_M is still planned and ranks first)."""
    walked = [o for o in result.options if not o.beside_brim and not o.asked_sequences]  # weighed, not taken
    if not walked:
        return (4, True, True)  # below tier 3, the CPU alone
    best = walked[0]
    return (best.tier, not best.runs_as_printed, at_the_brim(best))


def _widens(own: PlanResult, wider: PlanResult, extra_artifacts: Sequence[Artifact]) -> bool:
    """Whether the plan with the fallback is the one to show: its best option stands higher
    (:func:`_standing`), or stands as high and the ranking puts a fallback's option first (Gemma-4-26B at 131k on
    one T4: every launch leaves layers on the host and converts the weights, and Q4_K_M with 20 of 30 layers on
    the CPU ranks before BF16 with 24 of them; on a Mac, a Q8_0 GGUF before a BF16 one)."""
    if _standing(wider) != _standing(own):
        return _standing(wider) < _standing(own)
    return bool(wider.options) and wider.options[0].artifact in extra_artifacts


#: whole plans remembered: a slider's steps either side of where it stands, a few clusters and models
PLANS_KEPT = 32


@memo(PLANS_KEPT, keyed_on="the shape, cluster, catalogue and engines by identity; the request, artifacts, "
      "fallback, model name, goal, speed settings and suggestion kinds by equality")  # fmt: skip
def _remembered(question: PlanQuestion) -> PlanResult:
    """:func:`plan` of ``question``, remembered: the same question asked again (a context slider back on a step it
    stood on) is answered from here, the very same :class:`PlanResult`."""
    return _planned(question)


def plan(
    shape: ModelShape,
    cluster: Cluster,
    request: PlanRequest | None = None,
    *,
    artifacts: Sequence[Artifact] | None = None,
    model_ref: str | None = None,
    goal: str | None = None,
    sort: str | None = None,
    speed: bool | SpeedSettings = True,
    suggest: bool | Sequence[str] = True,
    first_fit: bool = False,
    catalogue: Catalogue | None = None,
    fallback: Sequence[Artifact] | Callable[[], Sequence[Artifact]] = (),
) -> PlanResult:
    """Every way ``shape`` can run on ``cluster``, best first, the refused ways with reasons, and suggestions.

    Args:
        goal: what to rank for inside each tier (:data:`explorer.plan.ranking.GOALS`; default
            ``fewest-cards``). ``sort`` is the old name: ``default`` or ``speed`` (= ``fastest``).
        speed: True or :class:`~explorer.speed.estimate.SpeedSettings`: each option carries its
            speed-of-light bound and estimate (``Option.speed``, see :mod:`explorer.speed.estimate`);
            the settings' price table also prices the ``card-class`` suggestion.
        suggest: suggestions when no option keeps every layer on accelerators (True: every kind,
            or the kinds to make, :data:`explorer.plan.suggest.KINDS`; False: none).
        first_fit: stop at the first suggestion that fits (a model's one best suggestion).
        catalogue: the GPU catalogue, for the suggestions that name other card classes.
        fallback: other precisions of the model (published quantised checkpoints, what-ifs: see
            :func:`explorer.artifacts.offer.fallback_artifacts`) planned too when ``artifacts`` keep no option
            on accelerators alone whose launch runs as printed with headroom; the wider plan is kept when its
            best option stands higher (a higher tier, a launch that runs as printed, then headroom: not
            :func:`~explorer.plan.ranking.at_the_brim`), or as high with a fallback's option ranked first, so that the first row is the all-GPU layout an
            engineer would run rather than layers left on the CPU, weights to convert first or a card filled
            to the brim (``PlanResult.widened`` names what was added).
            A callable is called only then (a listing of many models makes none it does not need).

    Raises:
        PlanError: a context or concurrency below 1, a utilisation outside (0, 1], an unknown goal or
            engine (a parallel size, swap space or hicache ratio out of range is refused where the
            :class:`~explorer.engines.request.PlanRequest` is made).
    """
    request = request or PlanRequest()
    _check(request)
    question = PlanQuestion(
        shape=shape,
        cluster=cluster,
        catalogue=catalogue,
        engines=tuple(engines_named(request.engines)),
        request=request,
        artifacts=None if artifacts is None else tuple(artifacts),
        fallback=fallback if callable(fallback) else tuple(fallback),
        model_ref=model_ref,
        goal=goal,
        sort=sort,
        speed=speed,
        suggest=suggest if isinstance(suggest, bool) else tuple(suggest),
        first_fit=first_fit,
    )
    # a callable fallback is not compared (a new one each time would only fill the memo): planned afresh
    return _planned(question) if callable(fallback) else _remembered(question)


def _planned(question: PlanQuestion) -> PlanResult:
    """:func:`plan` itself, of a checked request."""
    q = question
    shape, cluster, request, artifacts, speed = q.shape, q.cluster, q.request, q.artifacts, q.speed
    model_ref, goal, sort, suggest, fallback = q.model_ref, q.goal, q.sort, q.suggest, q.fallback
    chosen = goal_named(goal, sort=sort)
    model_ref = model_ref or shape.name or "MODEL"
    if artifacts is None:
        artifacts = [what_if_artifact(shape, request.precision) if request.precision else original_artifact(shape)]
    at_own_kv = _ranked(shape, cluster, request, artifacts, model_ref=model_ref, goal=chosen, speed=speed)
    holding, own = _with_variants(at_own_kv, shape, cluster, artifacts, speed=speed)
    result = own
    extra_artifacts = ()
    if fallback and _standing(at_own_kv) > (1, False, False):  # weighed against the fp8 KV cache, not after it
        extra_artifacts = tuple(fallback() if callable(fallback) else fallback)
    if extra_artifacts:
        extra = _ranked(shape, cluster, request, extra_artifacts, model_ref=model_ref, goal=chosen, speed=speed)
        _, extra = _with_variants(extra, shape, cluster, extra_artifacts, speed=speed)
        # a last-resort precision (Q3_K_M) is worth its loss only where it keeps every layer on the cards
        extra = replace(extra, options=tuple(o for o in extra.options if o.tier == 1 or not all_gpu_only(o.artifact)))
        wider = _merged(own, extra)
        if _widens(own, wider, extra_artifacts):
            result = replace(wider, widened=_added(extra_artifacts, wider))
    result = settled(result)  # the fallback's precisions may hold everyone where the own weights queue
    if not suggest:
        return result
    advised = with_suggestions(  # what to change to hold every sequence with the model's own weights, widened or not
        holding,
        shape,
        cluster,
        artifacts,
        speed=speed,
        kinds=KINDS if suggest is True else tuple(suggest),  # type: ignore[arg-type]
        first_fit=q.first_fit,
        catalogue=q.catalogue,
        precisions=extra_artifacts,
    )
    return replace(result, suggestions=advised.suggestions)


def with_suggestions(
    result: PlanResult,
    shape: ModelShape,
    cluster: Cluster,
    artifacts: Sequence[Artifact],
    *,
    speed: bool | SpeedSettings = True,
    kinds: Sequence[str] = KINDS,
    first_fit: bool = False,
    catalogue: Catalogue | None = None,
    precisions: Sequence[Artifact] = (),
) -> PlanResult:
    """``result`` (a plan made with ``suggest=False``) with its suggestions: for a face that shows the table
    first and the way forward when asked (each suggestion plans again, tens of milliseconds each).
    ``precisions``: the model's other precisions (its fallback) that a cluster change may take with it."""
    run = partial(_ranked, model_ref=result.model, goal=result.goal, speed=speed)
    made = suggestions(
        shape,
        cluster,
        result.request,
        artifacts,
        result,
        lambda s, c, r, a: run(s, c, r, a),
        catalogue=catalogue,
        prices=speed.prices if isinstance(speed, SpeedSettings) else None,
        kinds=kinds,
        first_fit=first_fit,
        precisions=precisions,
    )
    return replace(result, suggestions=made)


__all__ = ["DEFAULT_GOAL", "SMALLER_KV", "option_request", "plan", "recheck", "with_suggestions"]
