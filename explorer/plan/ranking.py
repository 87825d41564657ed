"""Ranking options: tiers first, then the goal the user picks.

**Tiers, always** (:attr:`~explorer.engines.options.Option.placement`, best first):

1. every layer on accelerators, any engine (a card, a node's cards, vLLM or
   SGLang across nodes, a Mac's GPU);
2. llama.cpp across nodes through RPC, then llama.cpp with layers left in
   host memory (partial offload);
3. the CPU alone.

No option of a lower tier ranks above one of a higher tier under any goal,
and inside tier 2 RPC (every layer on a GPU) stays above partial offload.
With the fewest-cards goal this is the order of gpustack's GGUF selector
(``_filter_in_sequence``): one card › several cards of one node › across
nodes (RPC) › partial offload › CPU.

**Goals, inside a tier:**

- ``fewest-cards`` (the default, the seeds' order): first the options whose
  launch command runs as printed (published weights as they are; explorer's
  addition: converting bf16 weights to a GGUF for llama.cpp, or quantising
  them yourself, is work the serving engines do not ask for); then the
  options that keep headroom before those at the brim (:func:`at_the_brim`:
  more than 95 % of a card's usable memory, or room for fewer than two
  sequences; a warning, not the recommendation); then the fewest cards, counted
  as the cards a copy takes from its nodes (:func:`cards_spent`: 6 of an
  8-card node leave 2 that hold no second copy, so the copy spends 8, as an
  8-card layout does; 3 of 8 spend 4, two copies a node), then the fewest
  nodes; then, on several cards, a tensor-parallel layout before a layer
  split alone (pipeline stages, llama.cpp's split by layer), whose cards run
  one after another (explorer's addition: 70B on 2 × L40S is served at int4
  with tp 2 at about three times the speed of Q8_0 split by layer); then the
  better precision (:func:`precision_score`), rising to about 8.6 bits a
  weight and falling past it (eight bits keep what sixteen do, near enough,
  for half the memory; the cap is 5.8 on the CPU, and with layers left in host
  memory, where every bit is read for every token), near-equal precisions under the cap counted alike (the same
  whole bits: Q8_0's 8.5 and fp8's 8.03 are both 8); then whether the cards
  are free now (busy is not unfit); then the faster decode estimate, in
  steps of 2 % (of two engines on the same cards, the one that serves
  faster); then the serving engines before llama.cpp in the order plans list
  them (:data:`~explorer.engines.names.ENGINES`: vLLM, SGLang, llama.cpp),
  whose continuous batching and paged KV cache the roofline does not see;
  then the most headroom;
- ``fastest``: the highest decode estimate of one sequence at the asked concurrency;
- ``throughput``: the highest aggregate decode estimate over the cluster, every
  replica at the asked concurrency;
- ``cost``: the fewest dollars per million output tokens (options without a price last);
- ``longest-context``: the longest context one sequence can have.

Each goal falls back to the fewest-cards order, and ties after that to names,
so the order never depends on the order options were found in.

**Queueing candidates** (``Option.asked_sequences``: a vLLM or SGLang layout
that holds fewer sequences of the asked context than asked, the rest waiting:
:mod:`explorer.plan.queueing`) are then placed among the options that hold
everyone by one rule, :func:`queue_or_hold`: above such an option of their
tier only with at least :data:`QUEUE_THROUGHPUT_FACTOR` × its cluster
throughput.

**Many users, fewest cards** (the default goal at an asked concurrency above one): an option that holds
everyone is lifted above an earlier option of its tier by the same measure, :func:`outserves`: at least
:data:`QUEUE_THROUGHPUT_FACTOR` × its cluster throughput, with the same cluster, never over a launch that runs as
printed with one that does not, nor over headroom from the brim. Fewest cards a copy is the rule for one user;
for many, the cards left over hold more copies, and the cluster's throughput is what the users get (gpt-oss-120b
at 32k × 64 on 8 × H100: llama.cpp's MXFP4 GGUF on 2 cards, four copies, 3,804 tokens/s together, against vLLM
tp 4 ep 4, two copies, 6,639: vLLM first).

Why the cap sits at 8.6 bits: llama-quantize's own figures
(:data:`PUBLISHED_PERPLEXITY`) put Q8_0 — 7.96 GiB for Llama-3-8B's 8.03 B
weights, 8.52 bits a weight — 0.0026 above the 16-bit model's perplexity,
and 16-bit F16 itself 0.0020 above F32: past about 8.5 bits a bit buys
nothing measurable. Below it each bit counts: Q6_K (6.57 bits) +0.0217,
Q4_K_M (4.90) +0.1754, Q3_K_M (4.00) +0.6569, Q2_K (3.17) +3.5199. On a CPU
every weight is read for every token, so speed wins sooner: the cap there is
5.8, just above Q5_K_M (5.70 bits, +0.0569). A partial offload reads its host
layers the same way, so it takes the CPU's cap: Gemma-4-26B on one T4 runs
Q4_K_M with a few layers on the host rather than BF16 with most of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Literal, get_args

from explorer.engines.names import ENGINES
from explorer.engines.options import BRIM_PERCENT, PLACEMENTS, ROOM_FOR_SEQUENCES, Option, at_the_brim
from explorer.errors import PlanError
from explorer.units import gib

# fmt: off
#: llama-quantize's quality figures: (mix, file size in GiB as it prints "G", perplexity increase over the
#: unquantised model, the model measured). From ``tools/quantize/quantize.cpp`` QUANT_OPTIONS (llama.cpp
#: commit 0c1e57098); the mixes it lists by bits alone (IQ*, TQ*) carry no perplexity and are left out.
PUBLISHED_PERPLEXITY: tuple[tuple[str, float, float, str], ...] = (
    ("Q2_K",   2.96, 3.5199, "Llama-3-8B"),
    ("Q3_K_S", 3.41, 1.6321, "Llama-3-8B"),
    ("Q3_K_M", 3.74, 0.6569, "Llama-3-8B"),
    ("Q3_K_L", 4.03, 0.5562, "Llama-3-8B"),
    ("Q4_0",   4.34, 0.4685, "Llama-3-8B"),
    ("Q4_K_S", 4.37, 0.2689, "Llama-3-8B"),
    ("Q4_K_M", 4.58, 0.1754, "Llama-3-8B"),
    ("Q4_1",   4.78, 0.4511, "Llama-3-8B"),
    ("Q5_0",   5.21, 0.1316, "Llama-3-8B"),
    ("Q5_K_S", 5.21, 0.1049, "Llama-3-8B"),
    ("Q5_K_M", 5.33, 0.0569, "Llama-3-8B"),
    ("Q5_1",   5.65, 0.1062, "Llama-3-8B"),
    ("Q6_K",   6.14, 0.0217, "Llama-3-8B"),
    ("Q8_0",   7.96, 0.0026, "Llama-3-8B"),
    ("F16",   14.00, 0.0020, "Mistral-7B"),
    ("BF16",  14.00, -0.0050, "Mistral-7B"),
)
# fmt: on

QUALITY_CAP_BITS = 8.6
CPU_QUALITY_CAP_BITS = 5.8
PAST_CAP_SLOPE = 0.25

Goal = Literal["fewest-cards", "fastest", "throughput", "cost", "longest-context"]
GOALS: tuple[Goal, ...] = get_args(Goal)
DEFAULT_GOAL: Goal = "fewest-cards"
#: the old ``sort`` names and the goals they became
SORT_ALIASES: dict[str, Goal] = {"default": "fewest-cards", "speed": "fastest"}


def quality(bits_per_weight: float, *, cpu: bool) -> float:
    """A precision score: the bits up to the cap, then falling a quarter point per bit past it."""
    if bits_per_weight <= 0:
        return 0.0
    cap = CPU_QUALITY_CAP_BITS if cpu else QUALITY_CAP_BITS
    if bits_per_weight <= cap:
        return bits_per_weight
    return cap - (bits_per_weight - cap) * PAST_CAP_SLOPE


def whole_bits(bits_per_weight: float) -> int:
    """The precision's nominal bits: 8.5 (Q8_0) and 8.03 (fp8 with block scales) are 8, 4.85 (Q4_K_M) is 4."""
    return math.floor(bits_per_weight + 1e-6)


def precision_score(bits_per_weight: float, *, cpu: bool, nominal_bits: float = 0.0) -> float:
    """The precision's rank score: :func:`quality` of the real bits, near-equal precisions counted alike.

    Under the cap, precisions of the same whole bits are near-equal (Q8_0's 8.5 and fp8's 8.03; Q4_K_M's
    4.85 and AWQ's 4.25), so that the engine and the speed decide between them: the cap's own whole bit
    counts as the cap (8.6; 5.8 on the CPU), a lower one as its middle (4.x: 4.5). Past the cap the real
    bits fall a quarter point a bit. On the CPU that gives Q5_K_M (5.70 bits) 5.8 › Q6_K (6.57) 5.61 ›
    Q8_0 (8.50) 5.13 › Q4_K_M (4.85) 4.5, the seed's order (comparing whole bits on both sides of the cap
    put Q6_K, whole 6 scored 5.75, and Q8_0, 5.25, above Q5_K_M's 5); on a GPU fp8 = Q8_0 8.6 › F16 6.75 ›
    Q6_K 6.5, as the seed's real bits (6.75 › 6.6).

    The class (the whole bits, and whether the precision is past the cap) is the precision's ``nominal_bits``
    when known (its main format: 8 for fp8, 4 for int4 AWQ, 4.89 for Q4_K_M), not the real average, which the
    tensors a format leaves alone lift on models with large vocabularies: Llama-3.1-8B's fp8 checkpoint keeps
    1.05 B of its 8.03 B weights in bf16 and averages 9.05 bits, which scored 8.49 against Q8_0's 8.6 and ranked
    llama.cpp before vLLM on a 4090 at 32k (vLLM: 47.3 tok/s, llama.cpp 45.9); Qwen2.5-72B's Q4_K_M averages
    5.16 bits (its embeddings and half its V and down projections in Q6_K), which scored 5.5 against int4 AWQ's
    4.5 and ranked llama.cpp (39.8 tok/s) before vLLM (48.1) on one H100. Past the cap the real bits decay.
    """
    if bits_per_weight <= 0:
        return 0.0
    cap = CPU_QUALITY_CAP_BITS if cpu else QUALITY_CAP_BITS
    nominal = nominal_bits or bits_per_weight
    if nominal > cap:
        return quality(bits_per_weight, cpu=cpu)
    whole = whole_bits(nominal)
    return cap if whole == whole_bits(cap) else whole + 0.5


def headroom_warning(option: Option) -> str | None:
    """What to say beside an option at the brim (:func:`at_the_brim`), else None."""
    if not at_the_brim(option):
        return None
    card, sequences = option.per_card, option.evaluation.max_concurrency
    share = card.total * 100 // card.usable if card.usable else 100
    return (
        f"at the brim: the binding card needs {share} % of its usable memory ({gib(card.total)} of "
        f"{gib(card.usable)}) and holds {sequences:,} sequence{'s' if sequences != 1 else ''} of the asked context; "
        f"keep {100 - BRIM_PERCENT} % free and room for {ROOM_FOR_SEQUENCES} (a shorter context, more cards or "
        "fewer bits)"
    )


#: decode estimates within this factor of each other rank as equally fast (the estimate is a bound × 0.6)
SPEED_STEP = 1.02


def _decode(option: Option) -> float:
    speed = option.speed
    return speed.decode_estimate_tokens_per_s if speed is not None else 0.0


def _speed_step(option: Option) -> int:
    """The decode estimate in steps of 2 %: 30.9 and 31.1 tokens/s are one step, 27.6 and 30.9 are not. A queueing
    candidate's is its cluster throughput: a smaller resident batch decodes each sequence faster while more wait."""
    tokens = _all_tokens_per_s(option) if option.asked_sequences else _decode(option)
    return round(math.log(tokens) / math.log(SPEED_STEP)) if tokens > 0 else -(10**9)


def _tier_key(option: Option) -> tuple:
    return (PLACEMENTS.index(option.placement),)


def cards_spent(option: Option) -> int:
    """The cards one copy of an option takes from its nodes: its cards on each node, rounded up to what the
    node's width leaves for further copies (``width / (width // cards a node)``, up to a whole card), times
    its nodes.

    6 cards of an 8-card node spend 8 (the 2 left hold no second copy); 3 spend 4 (two copies a node);
    a CPU or unified-memory host spends none.
    """
    layout = option.layout
    per_node = layout.gpus_per_node
    if not layout.cards or per_node <= 0 or option.gpu is None or option.node is None:
        return layout.cards
    group = option.node.group(option.gpu.name)
    width = group.count if group is not None else per_node
    copies = width // per_node
    return layout.nodes * math.ceil(Fraction(width, copies)) if copies else layout.cards


def _fewest_cards(option: Option) -> tuple:
    layout = option.layout
    return (
        not option.runs_as_printed,
        at_the_brim(option),
        cards_spent(option),
        layout.nodes,
        layout.tp == 1 and layout.pp > 1,
        -precision_score(
            option.bits_per_weight,
            cpu=layout.cpu or option.placement == "host-offload",
            nominal_bits=option.nominal_bits,
        ),
        not option.free_now,
        -_speed_step(option),
        ENGINES.index(option.engine) if option.engine in ENGINES else len(ENGINES),
        -option.per_card.headroom,
        layout.cards,
        option.engine,
        layout.gpu_class,
        layout.tp,
        layout.pp,
        option.artifact.name,
        option.precision,
    )


def _fastest(option: Option) -> tuple:
    return (-round(_decode(option), 6),)


def _throughput(option: Option) -> tuple:
    return (-round(_all_tokens_per_s(option), 6),)


def _all_tokens_per_s(option: Option) -> float:
    """Every replica's decode together at the asked concurrency (estimate; the CLI's ``all tok/s``), 0 without one."""
    aggregate = option.aggregate_decode_tokens_per_s
    return aggregate[1] if aggregate else 0.0


def _cost(option: Option) -> tuple:
    speed = option.speed
    cost = speed.cost_per_million_tokens if speed is not None else None
    return (cost is None, round(cost, 9) if cost is not None else 0.0)


def _longest_context(option: Option) -> tuple:
    return (-option.evaluation.max_context_tokens,)


_GOAL_KEYS: dict[str, Callable[[Option], tuple]] = {
    "fewest-cards": lambda o: (),
    "fastest": _fastest,
    "throughput": _throughput,
    "cost": _cost,
    "longest-context": _longest_context,
}


def goal_named(goal: str | None = None, *, sort: str | None = None) -> Goal:
    """The goal for a name (or an old ``sort`` name: ``default``, ``speed``).

    Raises:
        PlanError: neither names a goal.
    """
    if goal is None and sort is not None:
        if sort not in SORT_ALIASES:
            raise PlanError(f"unknown sort {sort!r}", hint=f"use a goal: {', '.join(GOALS)}")
        return SORT_ALIASES[sort]
    goal = goal or DEFAULT_GOAL
    if goal not in _GOAL_KEYS:
        raise PlanError(f"unknown goal {goal!r}", hint=f"goals: {', '.join(GOALS)}")
    return goal  # type: ignore[return-value]


def rank_key(goal: str = DEFAULT_GOAL) -> Callable[[Option], tuple]:
    """The sort key of a goal: the placement (tier), the goal's figure, then the fewest-cards order."""
    goal_key = _GOAL_KEYS[goal_named(goal)]
    return lambda o: _tier_key(o) + goal_key(o) + _fewest_cards(o)


#: how many times the cluster throughput of an option that holds every asked sequence a queueing candidate must
#: decode to rank above it (:func:`queue_or_hold`)
QUEUE_THROUGHPUT_FACTOR = 1.5


def queue_or_hold(queued: Option, holding: Option) -> bool:
    """Whether a queueing candidate ranks above an option of its tier that holds every asked sequence: only when
    its cluster throughput ("all tok/s", its resident batch on every replica) is at least
    :data:`QUEUE_THROUGHPUT_FACTOR` × the other's; never at one asked sequence, never without speed estimates, and
    never over a launch that runs as printed with one that does not (a placeholder for weights nobody publishes:
    Qwen3-30B-A3B at 32k × 8 on 2 × RTX 4090, a what-if int4 AWQ holding 3 a card at 401 tokens/s does not pass
    unsloth's published Q4_K_M holding all 8 at 140).

    Why: vLLM's and SGLang's schedulers admit what their KV cache holds and queue the rest, so a layout that holds 28
    of 64 sequences serves every user, each waiting its turn, and their batched decode on fewer, faster replicas
    often gives several times the throughput of llama.cpp's ``-np`` slots, which hold all 64 from start-up but
    decode them slower (Llama-3.1-8B at 32k × 64 on 2 × H100: vLLM with hugging-quants' int4 AWQ, 32 a card, 1,717
    tokens/s against llama.cpp's 887 holding all 64). The resident count is a floor: it assumes every sequence at the
    full asked context, while a paged cache admits by the tokens in use, so shorter requests leave room for more. A
    queue still costs the waiting users their time to first token, so holding everyone wins unless the queue gives
    half as much again (Qwen3-30B-A3B at 32k × 64 on 2 × H100: vLLM 1,359 against llama.cpp's 934, 1.45 ×, and
    llama.cpp stays first).
    """
    if queued.asked_sequences <= 1 or queued.tier != holding.tier:
        return False
    if holding.runs_as_printed and not queued.runs_as_printed:
        return False
    mine, theirs = _all_tokens_per_s(queued), _all_tokens_per_s(holding)
    return mine > 0 and mine >= QUEUE_THROUGHPUT_FACTOR * theirs


def outserves(option: Option, other: Option) -> bool:
    """Whether ``option``, holding every asked sequence, ranks above ``other`` of its tier under the fewest-cards
    goal: at an asked concurrency above one, with at least :data:`QUEUE_THROUGHPUT_FACTOR` × ``other``'s cluster
    throughput, and never a placeholder over a launch that runs as printed nor the brim over headroom."""
    speed = option.speed
    if speed is None or speed.concurrency <= 1 or option.tier != other.tier:
        return False
    if (not option.runs_as_printed, at_the_brim(option)) > (not other.runs_as_printed, at_the_brim(other)):
        return False
    mine, theirs = _all_tokens_per_s(option), _all_tokens_per_s(other)
    return theirs > 0 and mine >= QUEUE_THROUGHPUT_FACTOR * theirs


def _lifted_by_throughput(ordered: list[Option]) -> list[Option]:
    """``ordered`` (fewest-cards) with each option inserted just above the first option before it that it
    :func:`outserves`; in order otherwise."""
    placed: list[Option] = []
    for option in ordered:
        at = next((i for i, earlier in enumerate(placed) if outserves(option, earlier)), len(placed))
        placed.insert(at, option)
    return placed


def _queues_placed(ordered: list[Option]) -> list[Option]:
    """``ordered`` with each queueing candidate moved just above the first option of its tier that holds everyone
    and that it beats (:func:`queue_or_hold`), else below its tier's others; candidates of one place keep their
    order, so the goal still orders them."""
    holding = [o for o in ordered if not o.asked_sequences]
    if len(holding) == len(ordered):
        return ordered
    place = {id(o): (o.tier, at, 1) for at, o in enumerate(holding)}
    for option in ordered:
        if option.asked_sequences:
            beaten = (at for at, o in enumerate(holding) if queue_or_hold(option, o))
            place[id(option)] = (option.tier, next(beaten, len(holding)), 0)
    return sorted(ordered, key=lambda o: place[id(o)])


def rank(options: Iterable[Option], goal: str = DEFAULT_GOAL) -> list[Option]:
    """Options best first: tiers, then ``goal`` inside each (``default`` and ``speed`` are read as the old sorts);
    under fewest-cards at many users, an option that holds everyone lifted over one it :func:`outserves`; then the
    queueing candidates placed among those that hold everyone (:func:`queue_or_hold`)."""
    goal = goal_named(SORT_ALIASES.get(goal, goal))
    ordered = sorted(options, key=rank_key(goal))
    if goal == "fewest-cards":
        holding = _lifted_by_throughput([o for o in ordered if not o.asked_sequences])
        ordered = holding + [o for o in ordered if o.asked_sequences]
    return _queues_placed(ordered)
