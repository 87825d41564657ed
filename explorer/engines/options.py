"""Options and refusals: the records a plan returns.

An :class:`Option` is one way a model runs: an engine, an artifact, a
layout over cards, and what each card holds part by part. A
:class:`Rejection` is a way that was considered and refused, with the rule
and the reason in words ("Total attention heads (28) must be divisible by
tensor parallel size (8)"; "needs 91.3 GiB a card, has 72.0 GiB usable").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from explorer.artifacts.checkpoints import loads_published_weights
from explorer.engines.evaluation import CardMemory, Evaluation
from explorer.engines.layouts import Layout
from explorer.engines.names import engine_label
from explorer.engines.request import PlanRequest
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Node
from explorer.model.artifacts import ORIGINAL, Artifact
from explorer.units import gib

Placement = Literal["accelerators", "rpc", "host-offload", "cpu"]
#: where an option's layers run, best first; the order is kept under every goal
PLACEMENTS: tuple[Placement, ...] = ("accelerators", "rpc", "host-offload", "cpu")
#: the tier of each placement: 1 every layer on accelerators (any engine); 2 llama.cpp's RPC across
#: nodes or layers left in host memory; 3 the CPU alone
TIER_OF: dict[Placement, int] = {"accelerators": 1, "rpc": 2, "host-offload": 2, "cpu": 3}
TIER_LABELS: dict[int, str] = {
    1: "every layer on accelerators",
    2: "across nodes through llama.cpp RPC, or layers in host memory",
    3: "CPU only",
}


@dataclass(frozen=True, kw_only=True)
class Option:
    """One way to run the model.

    Attributes:
        layout: engine, cards and parallel sizes.
        artifact: what is loaded (original weights, a what-if precision, a GGUF file).
        precision: the precision label of what is loaded.
        bits_per_weight: bytes × 8 / params of what is loaded.
        nominal_bits: bits a weight of the precision's main format, before scales and the tensors it leaves
            alone (:attr:`~explorer.model.precision.Precision.nominal_bits`: 8 for fp8, 4 for int4 AWQ, 4.89
            for Q4_K_M, 16 for bf16); 0 when unknown. Ranking classes precisions by it (the real average of
            Qwen2.5-72B's Q4_K_M is 5.16 bits, of Llama-3.1-8B's fp8 9.05).
        evaluation: the engine's per-card memory, limits and command.
        free_now: whether cards (or hosts) free right now could take it.
        hosts: how many nodes (or node groups) could host it at all.
        gpu: the card class (None on the CPU).
        node: a node it would run on (its host RAM bounds llama.cpp's host share).
        speed: the speed-of-light estimate, when computed (see explorer.speed.estimate).
        replicas: copies of this layout the cluster holds at once (its cards, nodes, fabrics, MIG
            slices; for llama.cpp also the host RAM each copy needs).
        replicas_now: copies that fit on the cards free right now (None: not counted).
        dtype: the dtype the engine runs the model at (activations, the KV cache at ``auto``) where it is not the
            checkpoint's: vLLM and SGLang load a float32 checkpoint at 16 bits (:mod:`explorer.engines.load_dtype`);
            ``""`` otherwise.
        kv_dtype: the KV cache type the planner chose for this option over the request's ``auto`` (``fp8``: the
            fp8 KV cache planned when the model's own holds too little, :func:`explorer.plan.planner.plan`; its
            command carries the flag); ``""``: the request's.
        beside_brim: offered only because the walk's fewer cards or nodes fit at the brim (one more node, one
            more RPC server: :func:`at_the_brim`); the planner's choice to plan other precisions looks past it, so
            a quantised checkpoint on fewer cards is still weighed against it.
        asked_sequences: the asked concurrency, for an option that holds fewer sequences of the asked context at
            once (a queueing candidate, :mod:`explorer.plan.queueing`): its evaluation and speed are at the
            sequences it holds (:attr:`resident_sequences`), the rest wait in the engine's queue; 0: it holds every
            asked sequence.
    """

    layout: Layout
    artifact: Artifact
    precision: str
    bits_per_weight: float
    evaluation: Evaluation
    free_now: bool
    hosts: int
    gpu: GPUClass | None = None
    node: Node | None = None
    speed: Any = None
    replicas: int = 1
    replicas_now: int | None = None
    nominal_bits: float = 0.0
    dtype: str = ""
    kv_dtype: str = ""
    beside_brim: bool = False
    asked_sequences: int = 0

    @property
    def engine(self) -> str:
        """The engine's name."""
        return self.layout.engine

    @property
    def fits(self) -> bool:
        """Whether every card holds what it must."""
        return self.evaluation.fits

    @property
    def per_card(self) -> CardMemory:
        """The binding card: the one with the least headroom."""
        return self.evaluation.binding

    @property
    def placement(self) -> Placement:
        """Where its layers run: all on accelerators, over llama.cpp RPC, some in host memory, or the CPU."""
        if self.layout.cpu:
            return "cpu"
        if self.evaluation.layers_on_host:
            return "host-offload"
        return "rpc" if self.layout.rpc else "accelerators"

    @property
    def tier(self) -> int:
        """1: every layer on accelerators; 2: llama.cpp RPC or host offload; 3: CPU only (:data:`TIER_LABELS`)."""
        return TIER_OF[self.placement]

    @property
    def aggregate_decode_tokens_per_s(self) -> tuple[float, float] | None:
        """(bound, estimate) of the tokens/s every replica decodes together at the asked concurrency
        (``replicas`` × the aggregate of one replica); None without a speed estimate."""
        if self.speed is None:
            return None
        return (
            self.replicas * self.speed.decode_aggregate_bound_tokens_per_s,
            self.replicas * self.speed.decode_aggregate_estimate_tokens_per_s,
        )

    @property
    def resident_sequences(self) -> int:
        """The sequences of the asked context it runs at once: its KV cache's count for a queueing candidate
        (:attr:`asked_sequences`), else 0 (it holds every asked one)."""
        return self.evaluation.max_concurrency if self.asked_sequences else 0

    @property
    def runs_as_printed(self) -> bool:
        """Whether its launch command loads published weights as they are (no placeholder for a checkpoint
        nobody publishes, no conversion to a GGUF first)."""
        return loads_published_weights(self.evaluation.command)

    @property
    def label(self) -> str:
        """Where it runs, with the engine: ``vLLM · 8 × h100-80g (tp8)``."""
        engine = engine_label(self.engine)
        what = self.artifact.label
        if self.engine == "llamacpp" and self.artifact.format != "gguf":
            what += f" as a {self.precision} GGUF"  # llama.cpp runs the weights converted
        elif self.artifact.name == ORIGINAL and not self.artifact.what_if and self.precision != self.artifact.quant:
            what += f" at {self.precision}"  # loaded at another dtype: a float32 checkpoint at bf16 (load_dtype)
        if self.kv_dtype:
            what += f" · {self.kv_cache_label} KV cache"
        if self.asked_sequences:
            what += f" · {self.resident_sequences:,} of {self.asked_sequences:,} sequences at once"
        if self.layout.cpu:
            return f"{engine} · CPU · {what}"
        extra = "unified memory" if self.layout.unified else self.layout.parallel
        if self.evaluation.layers_on_host:
            extra += f", {self.evaluation.layers_on_host} layers on CPU"
        return f"{engine} · {self.layout.label} ({extra}) · {what}"

    @property
    def kv_cache_label(self) -> str:
        """The KV cache type the planner chose, as the engine stores it (llama.cpp keeps an fp8 cache as q8_0:
        ``llamacpp.launch.settings_for``); ``""`` for the request's."""
        if self.engine == "llamacpp" and self.kv_dtype == "fp8":
            return "q8_0"
        return self.kv_dtype

    @property
    def total_bytes(self) -> int:
        """What the replica takes over all its cards (and host)."""
        total = sum(c.total * c.count for c in self.evaluation.cards)
        return total + (self.evaluation.host.total if self.evaluation.host else 0)

    def _on_cards(self, part) -> int:
        """A per-card figure summed over every card of the launch: each role × its cards, times the
        replicas of one launch (plain data parallelism repeats the roles on more cards)."""
        roles = self.evaluation.cards
        counted = sum(c.count for c in roles)
        if not counted:
            return 0
        repeat = max(1, self.layout.cards // counted)
        return sum(part(c) * c.count for c in roles) * repeat

    @property
    def cards_total_bytes(self) -> int:
        """What the launch holds on all its cards together, the host aside (bytes)."""
        return self._on_cards(lambda c: c.total)

    @property
    def cards_usable_bytes(self) -> int:
        """What the engine may use of all its cards together (bytes)."""
        return self._on_cards(lambda c: c.usable)

    @property
    def notes(self) -> tuple[str, ...]:
        """What a user should read beside the option: its artifact's note (a stand-in checkpoint, none
        published), then the engine's (SGLang's "all N GPUs combined need at least X GiB", a calibration,
        vLLM's max_num_seqs cap, layers on the CPU)."""
        return (*([self.artifact.note] if self.artifact.note else []), *self.evaluation.notes)

    @property
    def memory_text(self) -> str:
        """Per card and together, as modelplan puts it: ``43.5 GiB a card of 43.2 usable; 87.0 GiB on 2 cards``.

        On the CPU, the host's share of its RAM.
        """
        card = self.per_card
        if self.layout.cpu:
            return f"{gib(card.total)} of host RAM of {gib(card.usable)} usable"
        text = f"{gib(card.total)} a card of {gib(card.usable)} usable"
        if self.layout.cards > 1:
            text += f"; {gib(self.cards_total_bytes)} on {self.layout.cards} cards"
        return text

    def with_evaluation(self, evaluation: Evaluation) -> Option:
        """The same option with another evaluation (a longer context, say)."""
        return replace(self, evaluation=evaluation)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; every byte figure an int."""
        ev, lay, card = self.evaluation, self.layout, self.per_card
        out: dict[str, Any] = {
            "label": self.label,
            "engine": self.engine,
            "artifact": self.artifact.name,
            "format": self.artifact.format,
            "repo": self.artifact.repo,
            "what_if": self.artifact.what_if,
            "precision": self.precision,
            "kv_dtype": self.kv_cache_label or None,
            "bits_per_weight": round(self.bits_per_weight, 3),
            "gpu_class": None if lay.cpu else lay.gpu_class,
            "fabric": lay.fabric,
            "nodes": lay.nodes,
            "gpus_per_node": lay.gpus_per_node,
            "cards": lay.cards,
            "tp": lay.tp,
            "pp": lay.pp,
            "dp": lay.dp,
            "ep": lay.ep,
            "cpu": lay.cpu,
            "unified": lay.unified,
            "rpc": lay.rpc,
            "fits": self.fits,
            "tier": self.tier,
            "tier_label": TIER_LABELS[self.tier],
            "placement": self.placement,
            "free_now": self.free_now,
            "hosts": self.hosts,
            "replicas": self.replicas,
            "replicas_now": self.replicas_now,
            "per_card": _card_dict(card),
            "total_on_cards": self.cards_total_bytes,
            "usable_on_cards": self.cards_usable_bytes,
            "memory_text": self.memory_text,
            "card_roles": [_card_dict(c) for c in ev.cards],
            "host": _card_dict(ev.host) if ev.host else None,
            "layers_on_host": ev.layers_on_host,
            "max_context": ev.max_context_tokens,
            "max_concurrency": ev.max_concurrency,
            "command": ev.command,
            "node_commands": [{"rank": w.rank, "command": w.command, "where": w.where} for w in ev.workers],
            "notes": list(self.notes),
        }
        if self.asked_sequences:
            out["asked_sequences"] = self.asked_sequences  # the rest of them wait in the engine's queue
        if self.speed is not None:
            out.update(self.speed.to_dict())
            bound, estimate = self.aggregate_decode_tokens_per_s  # type: ignore[misc]
            out["aggregate_decode_tokens_per_s"] = {
                "bound": round(bound, 2),
                "estimate": round(estimate, 2),
                "replicas": self.replicas,
                "concurrency": self.speed.concurrency,
            }
        return out


def _card_dict(card: CardMemory) -> dict[str, Any]:
    return {
        "role": card.role,
        "weights": card.weights,
        "kv_cache": card.kv_cache,
        "activations": card.activations,
        "overhead": card.overhead,
        "total": card.total,
        "usable": card.usable,
        "capacity": card.capacity,
        "count": card.count,
    }


#: the share of a card's usable memory past which a layout is at the brim (:func:`at_the_brim`; the ranking puts such layouts after those with headroom, and the walks offer one
#: more node past them), in percent
BRIM_PERCENT = 95
#: the sequences of the asked context a layout must hold to leave room for more than one request
ROOM_FOR_SEQUENCES = 2


def at_the_brim(option: Option) -> bool:
    """Whether the option leaves no headroom: its binding card needs more than :data:`BRIM_PERCENT` % of its
    usable memory, or it holds fewer than :data:`ROOM_FOR_SEQUENCES` sequences of the asked context.

    Why 95 %: the usable memory already leaves out the engine's own reserve (vLLM's 10 %, SGLang's static
    share), but llama.cpp keeps none, and explorer's KV capacity is within 5 % of what the engines log
    (docs/notes/engine_logs.md): a layout past 95 % is inside the model's own error of not starting. Why two
    sequences: a server answers more than one request; a layout that holds one at the asked context queues
    the second. 70B at 32k on an H100, llama.cpp Q8_0 needs 79.1 of 79.1 GiB and holds one sequence.

    A partial offload (placement ``host-offload``) is held to the sequences alone: its ``-ngl`` is the most
    layers that fit, so its card is as full as its layers pack, whatever the precision, and one layer less on
    the card leaves the headroom at a layer's share of the speed. Gemma-4-26B, 64 sequences of 4k on a 4090:
    Q4_K_M with 14 of 30 layers on the CPU fills 22.5 of 23.5 GiB (96 %) and BF16 with 22 fills 22.1 (94 %), so
    the 95 % rule ranked BF16 (1.2 tok/s a sequence) before Q4_K_M (3.4).

    A queueing candidate (:attr:`Option.asked_sequences`) likewise: its batch is what its KV cache holds, so its
    card is full by design, and an error of 5 % there costs it a few running sequences, not its start (it was
    planned only where a quarter of the asked sequences leave the headroom: :mod:`explorer.plan.queueing`).
    """
    card = option.per_card
    packed = option.placement == "host-offload" or option.asked_sequences > 0
    full = not packed and card.total * 100 > BRIM_PERCENT * card.usable
    return full or option.evaluation.max_concurrency < ROOM_FOR_SEQUENCES


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """A way that was considered and refused.

    Attributes:
        engine: which engine.
        layout: the layout considered (None for a refusal of the whole engine or artifact).
        artifact: the artifact's name.
        rule: a short rule id (``attention-heads``, ``memory``, ``more-than-needed``…).
        reason: the reason in words, with the numbers.
        option: for a memory refusal, the evaluated option (``fits`` False), for charts.
        max_context: for a memory refusal, the longest context (tokens a sequence) that fits this
            layout at the asked concurrency, as the engine accounts it (0: not even one token);
            None for other rules.
    """

    engine: str
    layout: Layout | None
    artifact: str
    rule: str
    reason: str
    option: Option | None = None
    max_context: int | None = None

    @property
    def label(self) -> str:
        """Where the refused way would have run, with the engine's label as options show it: ``vLLM · 3 × h100-80g
        (tp3)``."""
        engine = engine_label(self.engine)
        if self.layout is None:
            return engine
        return f"{engine} · {self.layout.label} ({self.layout.parallel})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {
            "engine": self.engine,
            "label": self.label,
            "artifact": self.artifact,
            "rule": self.rule,
            "reason": self.reason,
        }
        if self.option is not None:
            out["per_card"] = _card_dict(self.option.per_card)
        if self.max_context is not None:
            out["max_context"] = self.max_context
        return out


#: refusal rules that are about memory: each such refusal carries ``max_context``
MEMORY_RULES = frozenset({"memory", "memory-lower-bound"})


def memory_reason(card: CardMemory) -> str:
    """``needs 91.3 GiB a card, has 72.0 GiB usable`` (GiB = 1024³ bytes)."""
    where = "the host" if card.role == "host" else "a card"
    return f"needs {gib(card.total)} on {where} ({card.role}), has {gib(card.usable)} usable"


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    """Every way the model could run, best first, and the ways refused.

    Attributes:
        model: the model's name.
        request: what was asked.
        options: the ways that fit, ranked.
        rejected: refused ways (the first few hundred; ``pruned`` counts them all).
        pruned: how many ways each rule refused.
        considered: how many ways were considered in all.
        goal: what the options are ranked for inside each tier (``fewest-cards``, ``fastest``…).
        suggestions: concrete changes that make the model fit (or fit a better tier), each with
            its result; empty when the best option keeps every layer on accelerators.
        replica_launch: gives an option's launch for all its replicas (set by the planner, which
            knows the cluster); None: not known.
        widened: the precisions planned besides the model's own weights because those kept no layout
            on accelerators alone (published quantised checkpoints, what-ifs); empty: none were needed.
    """

    model: str
    request: PlanRequest
    options: tuple[Option, ...]
    rejected: tuple[Rejection, ...]
    pruned: dict[str, int] = field(default_factory=dict)
    considered: int = 0
    goal: str = "fewest-cards"
    suggestions: tuple[Any, ...] = ()
    widened: tuple[str, ...] = ()
    replica_launch: Callable[[Option], Any] | None = field(default=None, compare=False, repr=False)

    def best_per_engine(self) -> dict[str, Option]:
        """The best option of each engine that has one, in the ranked order (for a "best per engine" strip)."""
        out: dict[str, Option] = {}
        for o in self.options:
            out.setdefault(o.engine, o)
        return out

    def to_dict(self) -> dict[str, Any]:
        """``{"model":…, "options":[…], "rejected":[…]}`` plus counts."""
        r = self.request
        return {
            "model": self.model,
            "request": {
                "context": r.context_tokens,
                "concurrency": r.concurrency,
                "kv_dtype": r.kv_dtype,
                "precision": r.precision,
                "engines": list(r.engines),
                "gpu_memory_utilization": r.gpu_memory_utilization,
            },
            "goal": self.goal,
            "tiers": {str(k): v for k, v in TIER_LABELS.items()},
            "best_per_engine": self._best_ranks(),
            "options": [self._option_dict(o) for o in self.options],
            "rejected": [x.to_dict() for x in self.rejected],
            "pruned": dict(self.pruned),
            "considered": self.considered,
            "suggestions": [s.to_dict() for s in self.suggestions],
            "widened": list(self.widened),
        }

    def _best_ranks(self) -> dict[str, int]:
        """engine -> the rank (1 = first) of its best option."""
        out: dict[str, int] = {}
        for rank, o in enumerate(self.options, 1):
            out.setdefault(o.engine, rank)
        return out

    def _option_dict(self, option: Option) -> dict[str, Any]:
        out = option.to_dict()
        if self.replica_launch is not None:
            out["replica_launch"] = self.replica_launch(option).to_dict()
        return out
