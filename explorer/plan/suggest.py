"""A way forward: concrete changes that make a model fit, each with its result.

When nothing fits, or only a lower tier does (layers left in host memory,
llama.cpp RPC, the CPU), each suggestion is one change, planned again:

- ``precision``: the highest-precision what-if weights that keep every
  layer on accelerators: fp8, int8, int4 (AWQ or GPTQ) for vLLM and SGLang;
  Q8_0 … Q2_K GGUF quants for llama.cpp; with their bits per weight (what
  they cost in quality);
- ``kv-cache``: an fp8 KV cache (q8_0 in llama.cpp), half the bytes of bf16;
- ``context`` and ``concurrency``: the longest context, or the most
  sequences, that fit (from the refusals' ``max_context`` and the engines'
  concurrency at the asked context);
- ``cluster``: the smallest cluster of the user's card class that holds it;
- ``card-class``: the catalogue class whose one node holds it for the fewest
  dollars an hour (needs the catalogue and a price table);
- ``named-chip``: on a unified-memory host named only by its memory
  (``uma-128g``), the catalogue's chips of that memory, whose bandwidth is known.

Each says ``fits`` (the change reaches a better tier than the best option
today: every layer on accelerators, when a lower tier fits now), the
``tier`` and ``best`` option it leads to, and ``max_context``. Planning
again is handed in (``replan``), so this module does not call the planner itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from explorer.engines.common import ENGINE_LABELS, PlanRequest
from explorer.engines.options import MEMORY_RULES, Option, PlanResult
from explorer.engines.registry import SPLIT_ENGINES
from explorer.errors import ExplorerError
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.hardware.cluster import Cluster
from explorer.hardware.cluster_text import format_cluster_spec, uniform_cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.longest_context import full_offload_context
from explorer.plan.offer import what_if_artifact
from explorer.units import gb

__all__ = ["KINDS", "Replan", "Suggestion", "suggestions"]

#: a plan without suggestions: (shape, cluster, request, artifacts) -> ranked result
Replan = Callable[[ModelShape, Cluster, PlanRequest, Sequence[Artifact]], PlanResult]

KINDS = ("precision", "kv-cache", "context", "concurrency", "cluster", "card-class", "named-chip")
#: what-if weights vLLM and SGLang load, best first (int4: AWQ, GPTQ alike)
SAFETENSORS_STEPS = ("fp8", "int8", "int4-awq")
#: GGUF quants llama.cpp loads, best first
GGUF_STEPS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")
#: card counts a suggested node may have, and the most nodes a suggested cluster spans
NODE_WIDTHS = (1, 2, 4, 8)
MAX_SUGGESTED_NODES = 64
#: replans one cluster search may make
MAX_CLUSTER_TRIES = 6
NO_TIER = 4  # what "nothing fits" ranks as


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    """One change and what it leads to.

    Attributes:
        kind: one of :data:`KINDS`.
        change: the request or cluster change, as the CLI's and app's controls name it
            (``{"quant": "int4-awq"}``, ``{"kv_dtype": "fp8"}``, ``{"context": 40960}``,
            ``{"concurrency": 3}``, ``{"cluster": "1x2xl4-24g"}``).
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


def _tier(result: PlanResult) -> int:
    return result.options[0].tier if result.options else NO_TIER


def _longest_on_accelerators(shape: ModelShape, result: PlanResult) -> int:
    """The longest context (at the asked concurrency) at which some layout keeps every layer on accelerators:
    a memory refusal's, or a llama.cpp partial offload's with every layer on its cards."""
    refused = max((x.max_context or 0 for x in result.rejected if x.rule in MEMORY_RULES), default=0)
    offloads = (o for o in result.options if o.placement == "host-offload")
    return max(refused, max((full_offload_context(shape, o, result.request) for o in offloads), default=0))


def _outcome(shape: ModelShape, kind: str, change: Mapping[str, Any], text: str, result: PlanResult,
             today: int) -> Suggestion:  # fmt: skip
    best = result.options[0] if result.options else None
    fits = best is not None and best.tier < today
    return Suggestion(
        kind=kind,
        change=change,
        text=text,
        fits=fits,
        tier=best.tier if best else None,
        max_context=best.evaluation.max_context_tokens if fits and best else _longest_on_accelerators(shape, result),
        best=best,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Ask:
    """What every suggestion of one plan shares."""

    shape: ModelShape
    cluster: Cluster
    request: PlanRequest
    artifacts: tuple[Artifact, ...]
    result: PlanResult
    replan: Replan
    today: int

    def again(self, *, cluster: Cluster | None = None, request: PlanRequest | None = None,
              artifacts: Sequence[Artifact] | None = None) -> PlanResult:  # fmt: skip
        return self.replan(
            self.shape, cluster or self.cluster, request or self.request, tuple(artifacts or self.artifacts)
        )


def suggestions(
    shape: ModelShape,
    cluster: Cluster,
    request: PlanRequest,
    artifacts: Sequence[Artifact],
    result: PlanResult,
    replan: Replan,
    *,
    catalogue: Catalogue | None = None,
    prices: Any = None,
    kinds: Sequence[str] = KINDS,
    first_fit: bool = False,
) -> tuple[Suggestion, ...]:
    """The suggestions for a plan (see the module docstring), those that fit first.

    ``first_fit`` stops at the first change that fits (the fit view's "best suggestion").
    """
    ask = _Ask(
        shape=shape,
        cluster=cluster,
        request=request,
        artifacts=tuple(artifacts),
        result=result,
        replan=replan,
        today=_tier(result),
    )
    out: list[Suggestion] = []
    makers: dict[str, Callable[[], list[Suggestion]]] = {
        "precision": lambda: _precisions(ask),
        "kv-cache": lambda: _kv_cache(ask),
        "context": lambda: _context(ask),
        "concurrency": lambda: _concurrency(ask),
        "cluster": lambda: _own_class(ask),
        "card-class": lambda: _cheapest_class(ask, catalogue, prices),
        "named-chip": lambda: _named_chips(ask, catalogue),
    }
    for kind in kinds:
        if kind != "named-chip" and ask.today == 1:
            continue
        made = makers[kind]()
        out.extend(made)
        if first_fit and any(s.fits for s in made):
            break
    return tuple(sorted(out, key=lambda s: (not s.fits, KINDS.index(s.kind))))


def _precision_text(name: str, bits: float, engines: Sequence[str]) -> str:
    who = " / ".join(ENGINE_LABELS.get(e, e) for e in engines)  # type: ignore[call-overload]
    label = "int4 (AWQ or GPTQ)" if name.startswith("int4") else name
    return f"{label} weights, {bits:.2f} bits a weight ({who})"


def _precisions(ask: _Ask) -> list[Suggestion]:
    out = []
    engines = tuple(ask.request.engines)
    own_bits = ask.shape.bits_per_weight(ask.shape.precision)
    split = tuple(e for e in engines if e in SPLIT_ENGINES)  # vLLM and SGLang load safetensors what-ifs
    gguf = tuple(e for e in engines if e not in SPLIT_ENGINES)  # llama.cpp loads GGUF quants
    if split and any(a.format == "safetensors" for a in ask.artifacts):
        out += _family(ask, SAFETENSORS_STEPS, split, own_bits)
    if gguf:
        offered = {a.quant.upper() for a in ask.artifacts if a.format == "gguf"}
        gguf_bits = min((a.size_bytes * 8 / ask.shape.params for a in ask.artifacts if a.format == "gguf"),
                        default=own_bits)  # fmt: skip
        steps = tuple(q for q in GGUF_STEPS if q not in offered)
        out += _family(ask, steps, gguf, gguf_bits)
    return out


def _family(ask: _Ask, steps: Sequence[str], engines: tuple, below_bits: float) -> list[Suggestion]:
    """The first step of ``steps`` (best first) below ``below_bits`` that fits; else the one holding the most context."""
    tried: list[Suggestion] = []
    request = replace(ask.request, engines=engines)
    for name in steps:
        try:
            artifact = what_if_artifact(ask.shape, name)
            bits = ask.shape.bits_per_weight(ask.shape.resolve_precision(name))
        except ExplorerError:
            continue
        if bits >= below_bits - 0.01:
            continue
        result = ask.again(request=request, artifacts=[artifact])
        made = _outcome(
            ask.shape, "precision", {"quant": name}, _precision_text(name, bits, engines), result, ask.today
        )
        if made.fits:
            return [made]
        tried.append(made)
    return [max(tried, key=lambda s: s.max_context)] if tried else []


def _kv_cache(ask: _Ask) -> list[Suggestion]:
    if ask.request.kv_dtype not in ("auto", "bf16", "fp16") or ask.shape.kv_type().bits_per_element <= 8:
        return []
    result = ask.again(request=replace(ask.request, kv_dtype="fp8"))
    text = "an fp8 KV cache (q8_0 in llama.cpp): half the bytes a token of bf16"
    return [_outcome(ask.shape, "kv-cache", {"kv_dtype": "fp8"}, text, result, ask.today)]


def _context(ask: _Ask) -> list[Suggestion]:
    longest = _longest_on_accelerators(ask.shape, ask.result)
    if not 0 < longest < ask.request.context_tokens:
        return []
    result = ask.again(request=replace(ask.request, context_tokens=longest))
    text = f"a context of {longest:,} tokens (asked {ask.request.context_tokens:,})"
    return [_outcome(ask.shape, "context", {"context": longest}, text, result, ask.today)]


def _concurrency(ask: _Ask) -> list[Suggestion]:
    if ask.request.concurrency <= 1:
        return []
    most = max(
        (x.option.evaluation.max_concurrency for x in ask.result.rejected if x.rule == "memory" and x.option),
        default=0,
    )
    if not 0 < most < ask.request.concurrency:
        return []
    result = ask.again(request=replace(ask.request, concurrency=most))
    text = f"{most} concurrent sequence(s) at this context (asked {ask.request.concurrency})"
    return [_outcome(ask.shape, "concurrency", {"concurrency": most}, text, result, ask.today)]


def _least_cards(ask: _Ask, gpu: GPUClass) -> int:
    """Cards of ``gpu`` the weights and the asked KV cache need at the least (0.95 of each card)."""
    weights = min((a.size_bytes for a in ask.artifacts), default=0)
    kv = ask.shape.kv_bytes(ask.request.context_tokens, ask.request.kv_dtype, ask.request.concurrency)
    return max(1, math.ceil((weights + kv) / (0.95 * gpu.usable_memory_bytes)))


def _layouts(least: int, widest: int) -> list[tuple[int, int]]:
    """(nodes, cards a node) to try, fewest cards first: one node of 1, 2, 4, 8 cards, then nodes of ``widest``."""
    one = [(1, w) for w in sorted({*NODE_WIDTHS, widest}) if least <= w <= widest]
    many = [(n, widest) for n in range(max(2, math.ceil(least / widest)), MAX_SUGGESTED_NODES + 1)]
    return (one + many)[:MAX_CLUSTER_TRIES]


def _cluster_outcome(ask: _Ask, gpu: GPUClass, nodes: int, width: int, fabric: str, kind: str, note: str):
    cluster = uniform_cluster(gpu, nodes, width, fabric)
    spec = format_cluster_spec(cluster)
    result = ask.again(cluster=cluster)
    return _outcome(ask.shape, kind, {"cluster": spec}, f"{spec}{note}", result, ask.today)


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


def _own_class(ask: _Ask) -> list[Suggestion]:
    main = _main_class(ask.cluster)
    if main is None:
        return []
    gpu, widest, total, fabric = main
    least = max(_least_cards(ask, gpu), 1)
    for nodes, width in _layouts(least, max(widest, NODE_WIDTHS[-1])):
        if width <= widest and (nodes == 1 or (fabric and nodes * width <= total)):
            continue  # the cluster holds this already: the plan tried it
        made = _cluster_outcome(ask, gpu, nodes, width, fabric or "ib0", "cluster", "")
        if made.fits:
            return [made]
    return []


def _cheapest_class(ask: _Ask, catalogue: Catalogue | None, prices: Any) -> list[Suggestion]:
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


def _named_chips(ask: _Ask, catalogue: Catalogue | None) -> list[Suggestion]:
    """Unified hosts named by memory alone: the catalogue's chips of that memory, with their bandwidth."""
    if catalogue is None:
        return []
    out = []
    for node in ask.cluster.unified_nodes:
        gpu = node.gpus[0].gpu
        if gpu.known and gpu.bandwidth_bytes_per_s:
            continue
        for chip in catalogue:
            if chip.unified and chip.memory_bytes == gpu.memory_bytes and chip.bandwidth_bytes_per_s:
                note = f": {gb(chip.bandwidth_bytes_per_s, 0)}/s of memory bandwidth ({gpu.name} assumes the host's)"
                made = _cluster_outcome(ask, chip, 1, 1, "", "named-chip", note)
                out.append(replace(made, fits=made.best is not None))
        break
    return out
