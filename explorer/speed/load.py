"""Speed under load: how many sequences one replica of an option serves within a workload's latency targets.

A replica of an option decodes a batch of ``B`` sequences at the workload's mean decode context (prompt + half
the answer). Its figures at ``B``, all estimates built on the roofline of :mod:`explorer.speed.roofline`:

- **decode step** ``d(B)``: the step of :func:`~explorer.speed.roofline.decode_cycle_s` at the engine's pace
  (weights read once a step, each sequence's KV read, compute, collectives, kernel floors, per-token overhead);
- **prefill** ``p``: one prompt's prefill (:func:`~explorer.speed.roofline.prefill_s` ÷ efficiency), for the
  prompt tokens the prefix cache does not hold;
- **continuous batching** mixes the two: while ``B`` sequences decode ``A``-token answers, ``B / A`` of them end
  a step on average and as many new prompts are prefilled in the steps, in chunks of the engine's own size
  ``C`` (vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, llama.cpp ``-b``). So a user's
  mean time per output token is ``TPOT(B) = d(B) + (B / A) × p``;
- **TPOT percentiles**: a prompt is ``n = ⌈P / C⌉`` chunks (with a lengths distribution, the mean of
  ``⌈P_i / C⌉`` over its prompt deciles), so a share ``s = min(1, (B / A) × n)`` of the steps carries one, each
  ``e = (B / A) × p / s`` longer than a plain step (the mean is unchanged: ``d + s × e``). A user's ``a`` steps
  meet ``X ~ Binomial(a, s)`` of them (normal), and its TPOT is ``d + e × X / a``: p50 is the mean, p90 takes
  ``X / a = s + 1.2816 √(s (1 − s) / a)`` (at most 1); with answer deciles ``a_j`` the p90 of their equal mix,
  ``x`` where ``mean_j Φ((x − s) √a_j / √(s (1 − s))) = 0.9``. The TPOT target holds for the mean or, with
  ``--tpot-percentile p90``, for p90;
- **time to first token**: a prompt of ``P`` tokens (the mean, or the p90 prompt of a lengths distribution
  when the target is a p90) rides ``k = ⌈P / C⌉`` steps, ``k × d(B) + p``, and waits
  for the chunk budget: the prefill share of the budget is ``ρ = (B / A) × P / C`` (≥ 1: prompts queue without
  end), and the mean wait is the M/D/1 queue's ``ρ / (2(1 − ρ))`` × that service;
- a replica holds ``B / (TTFT + A × TPOT)`` requests a second;
- **past the KV cache** (:meth:`ReplicaLoad.serve`): ``U`` users on a replica that holds ``K < U`` sequences run
  ``K`` at a time (vLLM and SGLang admit only what fits); the rest queue. Each running request takes
  ``S = TTFT(K) + A × TPOT(K)``, so (Little's law) a request spends ``U × S / K`` in all and waits
  ``S × (U − K) / K`` before its prefill starts, which its time to first token adds; the limit is the KV capacity.

The largest batch that meets the targets and that the KV cache holds (the option's ``max_concurrency`` at
prompt + answer tokens, vLLM's ``--max-num-seqs`` included) sets the replicas the workload needs.

**Disaggregation** (engines that split prefill and decode: vLLM, SGLang): decode replicas decode alone
(``TPOT = d(B)``); prefill replicas prefill back to back, each prompt ``p`` plus its KV sent over the fabric,
loaded only as far as the queue's wait keeps the time to first token within its target (at most 90 %).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, Literal

from explorer.engines.registry import engine_named
from explorer.engines.request import PlanRequest
from explorer.engines.stage_kv import stage_kv_bytes
from explorer.speed.estimate import DEFAULT_SETTINGS, precision_for
from explorer.speed.floor import pace_for, speed_facts
from explorer.speed.roofline import Tally, decode_cycle_s, placement, prefill_s
from explorer.speed.settings import SpeedSettings, fabric_bytes_per_s, node_host_bandwidth
from explorer.speed.workload import Workload

__all__ = [
    "KV_CAPACITY", "LoadPoint", "ReplicaLoad", "Sizing", "carrying_share", "layout_load", "replica_load", "size_option",
]  # fmt: skip

#: the most a prefill replica (disaggregated) is loaded: its queue's wait grows without end toward 1
PREFILL_LOAD_CAP = 0.9
#: the share of users the p90 TPOT holds for
P90 = 0.9
#: the most steps a mix's quantile takes (Newton's, halving where one leaves the bracket) and how close it ends
QUANTILE_STEPS = 60
QUANTILE_TOLERANCE = 1e-9
#: the binding limit when the KV cache (or the engine's sequence cap) stops the batch
KV_CAPACITY = "KV capacity"

Mode = Literal["aggregated", "disaggregated"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadPoint:
    """One replica decoding ``batch`` sequences under the workload (estimates, seconds).

    Attributes:
        batch: sequences decoding together on the replica.
        decode_step_s: one decode step of the batch, the estimate.
        decode_step_bound_s: the same, the roofline bound.
        tpot_s: a user's mean (and p50) time per output token, prefill chunks of new requests included
            (aggregated).
        ttft_s: the mean time to first token (``inf`` where prompts queue without end), the wait for the KV cache
            included where users queue (:meth:`ReplicaLoad.serve`).
        step_bound_by: what bounds the decode step: ``memory bandwidth``, ``compute``, ``interconnect``,
            ``host memory``.
        queued: users waiting for room in the KV cache (0: all of them run).
        chunk_share: the share of decode steps that carry a prefill chunk (0: none, a decode replica).
        chunk_extra_s: how much longer such a step is.
        answers: the users' answer lengths, of equal weight (the mean's alone without a distribution).
    """

    batch: int
    decode_step_s: float
    decode_step_bound_s: float
    tpot_s: float
    ttft_s: float
    step_bound_by: str
    queued: int = 0
    chunk_share: float = 0.0
    chunk_extra_s: float = 0.0
    answers: tuple[int, ...] = ()

    @property
    def tpot_p90_s(self) -> float:
        """The time per output token 90 % of the users stay within: ``d + e × x``, ``x`` the share of
        chunk-carrying steps they stay within (:func:`carrying_share`; worked when asked, as it is the dearest
        figure of a point)."""
        if self.chunk_share <= 0:
            return self.decode_step_s
        return self.decode_step_s + self.chunk_extra_s * carrying_share(self.chunk_share, self.answers, P90)

    def requests_per_s(self, answer_tokens: int) -> float:
        """Requests a second the replica completes at this batch: ``B / (TTFT + A × TPOT)``."""
        return self.batch / (self.ttft_s + answer_tokens * self.tpot_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaLoad:
    """What one replica of an option does under a workload, as a function of its batch.

    Attributes:
        workload: the workload.
        capacity: the most sequences the replica holds at prompt + answer tokens (its KV cache, the engine's
            sequence cap).
        prefill_s: one prompt's prefill, the estimate.
        prefill_bound_s: the same, the bound.
        chunk_tokens: prompt tokens a scheduler step prefills (the engine's chunk).
        kv_transfer_s: one prompt's KV cache sent from a prefill replica to a decode replica (disaggregated).
        disaggregates: the engine splits prefill and decode.
        step: the batch -> (decode step estimate, bound, what bounds it).
        ttft_prefill_s: the prefill of the prompt the TTFT target is checked at (the p90 prompt, with a
            distribution; None: the mean prompt's, ``prefill_s``).
    """

    workload: Workload
    capacity: int
    prefill_s: float
    prefill_bound_s: float
    chunk_tokens: int
    kv_transfer_s: float
    disaggregates: bool
    step: Callable[[int], tuple[float, float, str]]
    ttft_prefill_s: float | None = None

    @property
    def ttft_prefill(self) -> float:
        """The prefill the TTFT is measured on: the p90 prompt's where given, else the mean's."""
        return self.prefill_s if self.ttft_prefill_s is None else self.ttft_prefill_s

    def at(self, batch: int, *, disaggregated: bool = False) -> LoadPoint:
        """The replica's figures at ``batch``; ``disaggregated``: a decode replica (no prefill mixed in)."""
        w = self.workload
        d, bound, by = self.step(batch)
        per_step = batch / w.answer_tokens  # requests that end (and start) a step
        if disaggregated:
            return LoadPoint(
                batch=batch, decode_step_s=d, decode_step_bound_s=bound, tpot_s=d, ttft_s=0.0, step_bound_by=by
            )
        tpot = d + per_step * self.prefill_s
        load = per_step * w.prefill_tokens / self.chunk_tokens
        mean_service = math.ceil(w.prefill_tokens / self.chunk_tokens) * d + self.prefill_s
        service = math.ceil(w.ttft_prefill_tokens / self.chunk_tokens) * d + self.ttft_prefill
        ttft = math.inf if load >= 1 else service + mean_service * load / (2 * (1 - load))
        share = min(1.0, per_step * self.chunks_per_prompt)
        return LoadPoint(batch=batch, decode_step_s=d, decode_step_bound_s=bound, tpot_s=tpot, ttft_s=ttft,
                         step_bound_by=by, chunk_share=share, chunk_extra_s=per_step * self.prefill_s / share,
                         answers=w.answer_deciles or (w.answer_tokens,))  # fmt: skip

    @property
    def chunks_per_prompt(self) -> float:
        """The chunks a prompt is prefilled in, on average over the prompt deciles (the mean prompt's alone)."""
        prompts = self.workload.prefill_deciles
        return sum(math.ceil(p / self.chunk_tokens) for p in prompts) / len(prompts)

    def checked_tpot_s(self, point: LoadPoint) -> float:
        """The TPOT the target is checked at: p90 with ``--tpot-percentile p90``, else the mean."""
        return point.tpot_p90_s if self.workload.tpot_percentile == "p90" else point.tpot_s

    def serve(self, users: int) -> LoadPoint:
        """``users`` on this one replica: at most its capacity run, the rest wait (their TTFT grows by
        ``S × (U − K) / K``, ``S`` a running request's time)."""
        held = min(users, self.capacity)
        point = self.at(max(1, held))
        if held == users:
            return point
        running_s = point.ttft_s + self.workload.answer_tokens * point.tpot_s
        wait = running_s * (users - held) / held if held else math.inf  # a cache that holds none: no end
        return replace(point, batch=held, ttft_s=point.ttft_s + wait, queued=users - held)

    def meets(self, point: LoadPoint, *, disaggregated: bool = False) -> bool:
        """The point meets the workload's targets (time to first token: the prefill pool's when disaggregated)."""
        tpot, ttft = self.workload.tpot_target_s, self.workload.ttft_s
        ttft_ok = ttft is None or disaggregated or point.ttft_s <= ttft
        return (tpot is None or self.checked_tpot_s(point) <= tpot) and ttft_ok and math.isfinite(point.ttft_s)

    def largest_batch(self, *, disaggregated: bool = False) -> int:
        """The largest batch up to the capacity that meets the targets (0: not even one sequence does);
        the figures grow with the batch, so a bisection finds it."""
        low, high = 0, self.capacity
        while low < high:
            mid = (low + high + 1) // 2
            if self.meets(self.at(mid, disaggregated=disaggregated), disaggregated=disaggregated):
                low = mid
            else:
                high = mid - 1
        return low

    def prefill_ttft_s(self, load: float) -> float:
        """A disaggregated request's time to first token with its prefill replica at ``load`` (0 to 1): its
        prefill (the TTFT prompt's), the M/D/1 wait behind mean prompts, the KV transfer."""
        return self.ttft_prefill + self.prefill_s * load / (2 * (1 - load)) + self.kv_transfer_s

    def prefill_load(self) -> float:
        """The most a prefill replica may be loaded for the time-to-first-token target (0: none meets it).

        ``p_T + p ρ / (2(1 − ρ)) + transfer ≤ T`` gives ``ρ ≤ 2w / (1 + 2w)`` with ``w = (T − p_T − transfer) / p``
        (``p_T``: the TTFT prompt's prefill, ``p`` the mean's).
        """
        target = self.workload.ttft_s
        if target is None:
            return PREFILL_LOAD_CAP
        spare = (target - self.ttft_prefill - self.kv_transfer_s) / self.prefill_s
        return 0.0 if spare <= 0 else min(PREFILL_LOAD_CAP, 2 * spare / (1 + 2 * spare))


def carrying_share(share: float, answers: Sequence[int], q: float) -> float:
    """The share of its decode steps that carry a prefill chunk, which ``q`` of the users stay within: each step
    carries one with probability ``share``, a user of ``a`` steps meets ``X ~ Binomial(a, share)`` (normal), and
    the users' answers are ``answers``, of equal weight."""
    if share >= 1.0:
        return 1.0
    spread = math.sqrt(share * (1 - share))
    normal = NormalDist()
    if len(set(answers)) == 1:
        return min(1.0, share + normal.inv_cdf(q) * spread / math.sqrt(answers[0]))
    scales = [math.sqrt(a) / spread for a in answers]

    def below(x: float) -> tuple[float, float]:
        """The mix's CDF at ``x`` less ``q``, and its density."""
        zs = [(x - share) * k for k in scales]
        cdf = sum(normal.cdf(z) for z in zs) / len(zs)
        return cdf - q, sum(normal.pdf(z) * k for z, k in zip(zs, scales, strict=True)) / len(zs)

    # Newton's steps from the mean answer's closed form, kept inside the bracket by halving when one leaves it
    low, high = share, 1.0
    x = min(high, share + normal.inv_cdf(q) * spread / math.sqrt(sum(answers) / len(answers)))
    for _ in range(QUANTILE_STEPS):
        miss, density = below(x)
        if abs(miss) < QUANTILE_TOLERANCE:
            break
        low, high = (x, high) if miss < 0 else (low, x)
        step = x - miss / density if density > 0 else low
        x = step if low < step < high else (low + high) / 2
    return x


def replica_load(
    option, shape, workload: Workload, request: PlanRequest | None = None, settings: SpeedSettings | None = None
) -> ReplicaLoad | None:
    """An option's replica under ``workload``; None when its speed is unknown (no bandwidth or FLOPs for its
    card class) or it holds no sequence at prompt + answer tokens.

    ``request``: the plan's (its KV type, ubatch and the engine's scheduler settings).
    """
    request = request or PlanRequest(context_tokens=workload.context_tokens)
    settings = settings or DEFAULT_SETTINGS
    ev, layout = option.evaluation, option.layout
    if ev.max_concurrency < 1:
        return None
    facts = speed_facts(layout.engine)
    precision = precision_for(shape, option.artifact, gguf=facts.gguf, loaded=option.precision,
                              bits_per_weight=option.bits_per_weight)  # fmt: skip
    host_bw = node_host_bandwidth(option.node) if option.node is not None else None
    if host_bw:
        settings = replace(settings, host_bandwidth_bytes_per_s=host_bw)
    head_on_host = ev.n_gpu_layers == 0 if ev.n_gpu_layers is not None else True
    return layout_load(shape, precision, layout, option.gpu, workload, capacity=ev.max_concurrency, request=request,
                       settings=settings, layers_on_host=ev.layers_on_host, head_on_host=head_on_host)  # fmt: skip


def layout_load(
    shape,
    precision,
    layout,
    gpu,
    workload: Workload,
    *,
    capacity: int,
    request: PlanRequest,
    settings: SpeedSettings = DEFAULT_SETTINGS,
    layers_on_host: int = 0,
    head_on_host: bool = True,
) -> ReplicaLoad | None:
    """A layout's replica under ``workload`` holding at most ``capacity`` sequences, its weights read at
    ``precision``; None when the card's bandwidth or FLOPs are unknown."""
    facts = speed_facts(layout.engine)
    ubatch = request.ubatch_tokens if facts.host_layers else 0
    where = placement(shape, precision, layout, gpu, layers_on_host, head_on_host, ubatch, settings)
    if where is None:
        return None
    prompt = workload.prefill_tokens
    prefill = prefill_s(shape, where, prompt)
    if prefill is None:
        return None
    eff = settings.efficiency_for(layout.engine, facts.efficiency)
    pace = pace_for(facts, None if layout.cpu else gpu, eff)
    kv, context = shape.kv_type(request.kv_dtype), workload.decode_context_tokens

    def step(batch: int) -> tuple[float, float, str]:
        tally = Tally()
        bound = decode_cycle_s(shape, where, batch, context, kv, tally)
        return decode_cycle_s(shape, where, batch, context, kv, pace=pace), bound, tally.bound_by

    ttft_prompt = workload.ttft_prefill_tokens
    ttft_prefill = None if ttft_prompt == prompt else prefill_s(shape, where, ttft_prompt)
    engine = engine_named(layout.engine)
    chunk = getattr(engine, "prefill_chunk_tokens", None)  # an engine from another package may not say
    kv_bytes = stage_kv_bytes(shape, 0, shape.layers, kv, 1, prompt, 1)
    return ReplicaLoad(
        workload=workload,
        capacity=capacity,
        prefill_s=prefill / eff,
        prefill_bound_s=prefill,
        chunk_tokens=max(1, chunk(gpu, request) if chunk and gpu is not None else prompt),
        kv_transfer_s=kv_bytes / fabric_bytes_per_s(None, settings),
        disaggregates=bool(getattr(engine, "disaggregated_prefill", False)),
        step=step,
        ttft_prefill_s=None if ttft_prefill is None else ttft_prefill / eff,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizing:
    """How an option serves a whole workload: its replicas, their batch, what binds, and what it costs.

    Attributes:
        mode: ``aggregated`` (each replica prefills and decodes) or ``disaggregated`` (prefill and decode
            replicas apart).
        cards_per_replica: the option's cards.
        replicas: replicas that decode (aggregated: all of them).
        prefill_replicas: replicas that only prefill (disaggregated; 0 otherwise).
        largest_batch: the largest batch a replica may run within the targets and its KV cache.
        point: the figures at the batch each replica runs (the workload spread over the replicas).
        ttft_s: the mean time to first token at that load.
        requests_per_s: requests a second the workload sends (users: those that load gives).
        binding: what stops a replica's batch growing: ``KV capacity`` (the KV cache or the engine's sequence
            cap), ``tpot target``, ``ttft target``; with no batch at all, the targets missed.
        shortfall: where no batch meets the targets: the target's figure over the best reached at one sequence
            (``tpot`` and ``ttft``); empty when met.
        usd_per_gpu_hour: the card's price (None: no price).
        one_replica: the users on one replica alone, as planned (:meth:`ReplicaLoad.serve`: past its KV cache
            the rest queue and wait); None for a request rate.
    """

    mode: Mode
    cards_per_replica: int
    replicas: int
    prefill_replicas: int
    largest_batch: int
    point: LoadPoint
    ttft_s: float
    requests_per_s: float
    binding: str
    shortfall: dict[str, float]
    usd_per_gpu_hour: float | None
    one_replica: LoadPoint | None = None

    @property
    def met(self) -> bool:
        """The targets are met."""
        return not self.shortfall

    @property
    def cards(self) -> int:
        """Every card the workload needs."""
        return (self.replicas + self.prefill_replicas) * self.cards_per_replica

    @property
    def usd_per_hour(self) -> float | None:
        """The cards' cost an hour."""
        return None if self.usd_per_gpu_hour is None else self.cards * self.usd_per_gpu_hour

    def output_tokens_per_s(self, answer_tokens: int) -> float:
        """Answer tokens a second the whole deployment produces at that load."""
        return self.requests_per_s * answer_tokens

    def usd_per_million_tokens(self, answer_tokens: int) -> float | None:
        """USD per million answer tokens at that load (None: no price)."""
        hourly, rate = self.usd_per_hour, self.output_tokens_per_s(answer_tokens)
        return None if hourly is None or rate <= 0 else hourly / (rate * 3600) * 1e6

    def to_dict(self, answer_tokens: int) -> dict[str, Any]:
        """JSON-ready fields."""
        p = self.point
        return {
            "mode": self.mode,
            "cards": self.cards,
            "replicas": self.replicas,
            "prefill_replicas": self.prefill_replicas,
            "cards_per_replica": self.cards_per_replica,
            "batch": p.batch,
            "largest_batch": self.largest_batch,
            "binding": self.binding,
            "step_bound_by": p.step_bound_by,
            "tpot_s": _r(p.tpot_s, 5),
            "tpot_p90_s": _r(p.tpot_p90_s, 5),
            "ttft_s": _r(self.ttft_s, 4),
            "tokens_per_s_user": _r(1 / p.tpot_s),
            "tokens_per_s_gpu": _r(self.output_tokens_per_s(answer_tokens) / self.cards),
            "requests_per_s": _r(self.requests_per_s, 4),
            "usd_per_hour": _r(self.usd_per_hour),
            "usd_per_million_tokens": _r(self.usd_per_million_tokens(answer_tokens), 4),
            "shortfall": {k: _r(v, 3) for k, v in self.shortfall.items()},
            "one_replica": None if self.one_replica is None else _alone(self.one_replica),
        }


def _alone(p: LoadPoint) -> dict[str, Any]:
    """One replica serving every user: what runs, what queues, the TTFT with the wait."""
    return {"batch": p.batch, "queued": p.queued, "ttft_s": _r(p.ttft_s, 4), "tpot_s": _r(p.tpot_s, 5),
            "binding": KV_CAPACITY if p.queued else None}  # fmt: skip


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def size_option(load: ReplicaLoad, cards: int, usd_per_gpu_hour: float | None = None) -> Sizing:
    """The cheaper way (fewer cards; aggregated on a tie) an option of ``cards`` cards serves the workload, and
    (for users) what one replica alone would do with them all."""
    chosen = _aggregated(load, cards, usd_per_gpu_hour)
    if load.disaggregates:
        apart = _disaggregated(load, cards, usd_per_gpu_hour)
        if apart.met and (not chosen.met or apart.cards < chosen.cards):
            chosen = apart
    users = load.workload.users
    return chosen if users is None else replace(chosen, one_replica=load.serve(users))


def _aggregated(load: ReplicaLoad, cards: int, price: float | None) -> Sizing:
    w = load.workload
    best = load.largest_batch()
    if best == 0:
        return _unmet(load, cards, price, "aggregated")
    top = load.at(best)
    if w.users is not None:
        replicas = math.ceil(w.users / best)
        point = load.at(math.ceil(w.users / replicas))
        rate = w.users / (point.ttft_s + w.answer_tokens * point.tpot_s)
    else:
        replicas = math.ceil(w.rate / top.requests_per_s(w.answer_tokens))
        point = load.at(_batch_for(load, w.rate / replicas, best))
        rate = w.rate
    return Sizing(mode="aggregated", cards_per_replica=cards, replicas=replicas, prefill_replicas=0,
                  largest_batch=best, point=point, ttft_s=point.ttft_s, requests_per_s=rate,
                  binding=_binding(load, best), shortfall={}, usd_per_gpu_hour=price)  # fmt: skip


def _batch_for(load: ReplicaLoad, rate: float, most: int) -> int:
    """The least batch whose replica completes ``rate`` requests a second (at most ``most``)."""
    low, high = 1, most
    while low < high:
        mid = (low + high) // 2
        if load.at(mid).requests_per_s(load.workload.answer_tokens) >= rate:
            high = mid
        else:
            low = mid + 1
    return low


def _disaggregated(load: ReplicaLoad, cards: int, price: float | None) -> Sizing:
    w = load.workload
    best = load.largest_batch(disaggregated=True)
    room = load.prefill_load()
    if best == 0 or room <= 0:
        return _unmet(load, cards, price, "disaggregated")
    ttft = load.prefill_ttft_s(room)
    if w.users is not None:
        replicas = math.ceil(w.users / best)
        point = load.at(math.ceil(w.users / replicas), disaggregated=True)
        rate = w.users / (ttft + w.answer_tokens * point.tpot_s)
    else:
        top = load.at(best, disaggregated=True)
        replicas = math.ceil(w.rate * w.answer_tokens * top.tpot_s / best)
        point = load.at(min(best, math.ceil(w.rate * w.answer_tokens * top.tpot_s / replicas)), disaggregated=True)
        rate = w.rate
    prefill_replicas = math.ceil(rate * load.prefill_s / room)
    binding = KV_CAPACITY if best == load.capacity else "tpot target"
    return Sizing(mode="disaggregated", cards_per_replica=cards, replicas=replicas, prefill_replicas=prefill_replicas,
                  largest_batch=best, point=point, ttft_s=ttft, requests_per_s=rate, binding=binding, shortfall={},
                  usd_per_gpu_hour=price)  # fmt: skip


def _binding(load: ReplicaLoad, best: int) -> str:
    """What stops the batch at ``best``: the capacity, else the target the next batch misses."""
    if best >= load.capacity:
        return KV_CAPACITY
    nxt = load.at(best + 1)
    tpot = load.workload.tpot_target_s
    return "tpot target" if tpot is not None and load.checked_tpot_s(nxt) > tpot else "ttft target"


def _unmet(load: ReplicaLoad, cards: int, price: float | None, mode: Mode) -> Sizing:
    """A replica that meets no target even at one sequence: by how much it misses each (the answer shows that one
    replica, the closest)."""
    w = load.workload
    apart = mode == "disaggregated"
    one = load.at(1, disaggregated=apart)
    ttft = load.prefill_ttft_s(0.0) if apart else one.ttft_s
    shortfall = {}
    if w.tpot_target_s is not None and load.checked_tpot_s(one) > w.tpot_target_s:
        shortfall["tpot"] = load.checked_tpot_s(one) / w.tpot_target_s
    if w.ttft_s is not None and ttft > w.ttft_s:
        shortfall["ttft"] = ttft / w.ttft_s
    return Sizing(mode=mode, cards_per_replica=cards, replicas=1, prefill_replicas=0, largest_batch=0, point=one,
                  ttft_s=ttft, requests_per_s=0.0, binding=" and ".join(f"{k} target" for k in shortfall) or "ttft target",
                  shortfall=shortfall or {"ttft": math.inf}, usd_per_gpu_hour=price)  # fmt: skip
