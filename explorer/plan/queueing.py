"""Queueing candidates: serving-engine layouts that hold fewer sequences of the asked context than asked, the rest
waiting in the engine's queue.

vLLM starts as long as one ``--max-model-len`` sequence fits its KV cache, runs as many full-length sequences as the
cache holds and queues the rest (its scheduler admits a request only when its KV blocks fit); SGLang's does the
same (:attr:`~explorer.engines.interface.Engine.queues_past_kv`). llama.cpp's ``-np`` slots each hold their share
of ``-c`` from start-up, so there every asked sequence must fit. When no layout of a queueing engine holds every
asked sequence with headroom (at the model's KV type, or at fp8 where the planner tries it), each such engine's
layouts are planned at :func:`least_resident` sequences (a quarter of the asked, at least one); each one that keeps
every layer on the cards with headroom there and holds fewer than asked becomes a candidate at the sequences its
KV cache holds (``Evaluation.max_concurrency``): its memory, its speed and its "all tok/s" are that resident
batch's, as the serving model's queue has it (:meth:`explorer.speed.load.ReplicaLoad.serve`: ``min(users,
capacity)`` run, the rest wait, which adds latency, not tokens). Its command asks for the asked concurrency where the
user left the cap to the engine (vLLM ``--max-num-seqs 64``, which vLLM accepts with a smaller cache). The ranking
weighs it against the layouts that hold everyone (:func:`explorer.plan.ranking.rank`).

Llama-3.1-8B bf16 at 32,768 tokens × 64 on 2 × H100: vLLM is refused at 64 (256 GiB of bf16 KV) and llama.cpp keeps
15 layers on the CPU (27 tokens/s); vLLM on one card with an fp8 KV cache holds 27, and its two replicas decode
1,457 tokens/s, the first row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from explorer.engines.names import engine_label
from explorer.engines.options import Option, PlanResult, at_the_brim
from explorer.engines.registry import engines_named
from explorer.engines.request import PlanRequest

#: the least share of the asked sequences a queueing candidate holds at once (fewer queue most users)
LEAST_RESIDENT_SHARE = 4


def least_resident(asked: int) -> int:
    """The fewest sequences a queueing candidate must hold at once: a quarter of the asked, at least one."""
    return max(1, math.ceil(asked / LEAST_RESIDENT_SHARE))


def queueing_engines(request: PlanRequest) -> tuple[str, ...]:
    """The request's engines that admit what their KV cache holds and queue the rest."""
    return tuple(e.name for e in engines_named(request.engines) if getattr(e, "queues_past_kv", False))


def queued_candidates(
    result: PlanResult,
    requests: Sequence[PlanRequest],
    plan_at: Callable[[PlanRequest], PlanResult],
    again: Callable[[Option, PlanRequest], Option],
) -> tuple[Option, ...]:
    """The queueing candidates of ``result`` (see the module docstring), none when some layout of a queueing engine
    already holds every asked sequence with headroom or one sequence is asked.

    Args:
        result: the plan at the asked concurrency (the fp8 KV cache's options merged in where planned).
        requests: the KV types to try, as requests at the asked concurrency: the model's own, then fp8 where the
            planner tries it; an option planned at another KV type than ``result.request``'s carries it
            (``Option.kv_dtype``).
        plan_at: plans a request over the same cluster and artifacts (walk, speed, replicas, ranked).
        again: one option re-evaluated for a request (memory and speed; its replicas kept).
    """
    asked = result.request
    engines = queueing_engines(asked)
    if asked.concurrency <= 1 or not engines or _holds_everyone(result, engines):
        return ()
    out: list[Option] = []
    for request in requests:
        least = replace(
            request,
            concurrency=least_resident(asked.concurrency),
            engines=engines,
            max_num_seqs=request.max_num_seqs or asked.concurrency,  # the command asks for everyone
        )
        marked = request.kv_dtype if request.kv_dtype != asked.kv_dtype else ""
        for option in plan_at(least).options:
            held = option.evaluation.max_concurrency
            if option.tier != 1 or at_the_brim(option) or held >= asked.concurrency:
                continue  # one that holds everyone at the least batch was ranked at the asked one
            option = replace(option, kv_dtype=marked)
            resident = again(option, replace(least, concurrency=held))
            out.append(_labelled(resident, asked))
    return tuple(out)


def requeued(option: Option, request: PlanRequest, again: Callable[[PlanRequest], Option]) -> Option:
    """A queueing candidate re-derived for ``request`` (the question again, or another context: the app's curves),
    as :func:`queued_candidates` makes it: its layout at :func:`least_resident` sequences with the command still
    asking for everyone (``--max-num-seqs`` the asked), then at the sequences its KV cache holds there, labelled
    "N of ASKED at once" with that resident batch's memory and speed (fewer than the least batch too: vLLM starts
    with one sequence's room, and the curves say what it holds). At a request where it holds everyone it is a
    plain option at the asked concurrency; where it holds none, the least batch's evaluation, which does not fit.

    Args:
        option: the candidate without its mark (``asked_sequences`` 0).
        again: the option re-evaluated for a request (memory and speed; its replicas kept).
    """
    asked = request.concurrency
    least = replace(request, concurrency=least_resident(asked), max_num_seqs=request.max_num_seqs or asked)
    at_least = again(least)
    held = at_least.evaluation.max_concurrency
    if held >= asked:
        return again(request)
    if held < 1:
        return _labelled(at_least, request)
    return _labelled(again(replace(least, concurrency=held)), request)


def settled(result: PlanResult) -> PlanResult:
    """``result`` without its queueing candidates where a layout of a queueing engine holds every asked sequence
    with headroom after all (one of the fallback's precisions: Qwen3-30B-A3B at 32k × 8 on one H100 holds all 8 with
    the published FP8 checkpoint, so the bf16 weights' candidates are dropped)."""
    if not _holds_everyone(result, queueing_engines(result.request)):
        return result
    return replace(result, options=tuple(o for o in result.options if not o.asked_sequences))


def _holds_everyone(result: PlanResult, engines: Sequence[str]) -> bool:
    return any(
        o.engine in engines and o.tier == 1 and not o.asked_sequences and not at_the_brim(o) for o in result.options
    )


def _labelled(option: Option, asked: PlanRequest) -> Option:
    """The option marked as holding fewer than asked, with the note that says so."""
    held, engine = option.evaluation.max_concurrency, engine_label(option.engine)
    note = (
        f"holds {held:,} of {asked.concurrency:,} sequences at {asked.context_tokens:,} tokens at once; the rest "
        f"wait ({engine} admits what its KV cache holds and queues the rest); speed and all tok/s at {held:,}"
    )
    evaluation = replace(option.evaluation, notes=(*option.evaluation.notes, note))
    return replace(option, evaluation=evaluation, asked_sequences=asked.concurrency)


__all__ = ["LEAST_RESIDENT_SHARE", "least_resident", "queued_candidates", "queueing_engines", "requeued", "settled"]
