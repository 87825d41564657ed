"""A way forward: concrete changes that make a model fit, each with its result.

When nothing fits, or only a lower tier does (layers left in host memory,
llama.cpp RPC, the CPU), each suggestion is one change, planned again:

- ``precision``: the highest-precision what-if weights that keep every
  layer on accelerators: fp8, int8, int4 (AWQ or GPTQ) for vLLM and SGLang;
  Q8_0 … Q2_K GGUF quants for llama.cpp; with their bits per weight (what
  they cost in quality);
- ``kv-cache``: an fp8 KV cache (q8_0 in llama.cpp), half the bytes of bf16;
- ``context`` and ``concurrency``: the longest context that fits with
  headroom (not at the brim, :func:`~explorer.plan.ranking.at_the_brim`;
  else the longest that fits at all, from the refusals' ``max_context``), or
  the most sequences that fit (the engines' concurrency at the asked context);
- ``cluster``: the smallest cluster of the user's card class that holds it;
- ``precision-cluster``: each other precision the plan widens to (published
  checkpoints where known) on the smallest cluster of the user's class that
  holds it: both changed at once (405B on one H100: FP8 on 8 × H100, the
  published int4 AWQ on 4 × H100);
- ``card-class``: the catalogue class whose one node holds it for the fewest
  dollars an hour (needs the catalogue and a price table);
- ``named-chip``: on a unified-memory host named only by its memory
  (``uma-128g``), the catalogue's chips of that memory, whose bandwidth is known.

Each says ``fits`` (the change reaches a better tier than the best option
today: every layer on accelerators, when a lower tier fits now), the
``tier`` and ``best`` option it leads to, and ``max_context``
(:class:`~explorer.plan.suggestion.Suggestion`). Planning again is handed in
(``replan``), so this module does not call the planner itself. The cluster
changes are in :mod:`explorer.plan.suggest_hardware`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from explorer.artifacts.offer import original_artifact, what_if_artifact
from explorer.engines.options import PlanResult
from explorer.engines.registry import SPLIT_ENGINES, engine_labels
from explorer.engines.request import PlanRequest
from explorer.errors import ExplorerError
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.hardware.cluster import Cluster
from explorer.hardware.pools import gpu_pools
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.ranking import at_the_brim
from explorer.plan.suggest_hardware import cheapest_class, named_chips, own_class, precision_and_cluster
from explorer.plan.suggestion import NO_TIER, Ask, Replan, Suggestion, best_tier, longest_on_accelerators, outcome

__all__ = ["KINDS", "Replan", "Suggestion", "suggestions"]

KINDS = ("precision", "kv-cache", "context", "concurrency", "cluster", "precision-cluster", "card-class", "named-chip")
#: what-if weights vLLM and SGLang load, best first (int4: AWQ, GPTQ alike)
SAFETENSORS_STEPS = ("fp8", "int8", "int4-awq")
#: GGUF quants llama.cpp loads, best first
GGUF_STEPS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")
#: the step of a suggested context with headroom (llama.cpp pads its context to 256 cells; vLLM's blocks are 16)
CONTEXT_STEP_TOKENS = 256


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
    precisions: Sequence[Artifact] = (),
) -> tuple[Suggestion, ...]:
    """The suggestions for a plan (see the module docstring), those that fit first; a change after which
    nothing fits and no layout holds any context is left out.

    ``first_fit`` stops at the first change that fits (the fit view's "best suggestion"); ``precisions`` are
    the model's other precisions (the fallback: published checkpoints where known) a cluster change may take.
    """
    ask = Ask(
        shape=shape,
        cluster=cluster,
        request=request,
        artifacts=tuple(artifacts),
        result=result,
        replan=replan,
        today=best_tier(result),
        precisions=tuple(precisions),
    )
    out: list[Suggestion] = []
    makers: dict[str, Callable[[], list[Suggestion]]] = {
        "precision": lambda: _precisions(ask, first_fit=first_fit),
        "kv-cache": lambda: _kv_cache(ask),
        "context": lambda: _context(ask),
        "concurrency": lambda: _concurrency(ask),
        "cluster": lambda: own_class(ask),
        "precision-cluster": lambda: precision_and_cluster(ask),
        "card-class": lambda: cheapest_class(ask, catalogue, prices),
        "named-chip": lambda: named_chips(ask, catalogue),
    }
    for kind in kinds:
        if kind != "named-chip" and ask.today == 1:
            continue
        made = makers[kind]()
        out.extend(made)
        if first_fit and any(s.fits for s in made):
            break
    telling = [s for s in out if s.fits or s.max_context > 0]  # a change that fits nothing says nothing
    return tuple(sorted(telling, key=lambda s: (not s.fits, KINDS.index(s.kind))))


def _precision_text(name: str, bits: float, engines: Sequence[str]) -> str:
    who = " / ".join(engine_labels().get(e, e) for e in engines)
    label = "int4 (AWQ or GPTQ)" if name.startswith("int4") else name
    return f"{label} weights, {bits:.2f} bits a weight ({who})"


def _precisions(ask: Ask, *, first_fit: bool = False) -> list[Suggestion]:
    """The best what-if of each family that leads to a fit (``first_fit``: the first family that has one)."""
    out: list[Suggestion] = []
    engines = tuple(ask.request.engines)
    own, precision = ask.loaded(original_artifact(ask.shape), _card_class(ask.cluster))
    own_bits = own.bits_per_weight(precision)  # a float32 checkpoint's 16 bits, as vLLM and SGLang load it
    split = tuple(e for e in engines if e in SPLIT_ENGINES)  # vLLM and SGLang load safetensors what-ifs
    gguf = tuple(e for e in engines if e not in SPLIT_ENGINES)  # llama.cpp loads GGUF quants
    if split and any(a.format == "safetensors" for a in ask.artifacts):
        out += _family(ask, SAFETENSORS_STEPS, split, own_bits, offloads=False)
    if gguf and not (first_fit and any(s.fits for s in out)):
        offered = {a.quant.upper() for a in ask.artifacts if a.format == "gguf"}
        sized = (a for a in ask.artifacts if a.format == "gguf" and ask.shape.params > 0)  # a header may count none
        gguf_bits = min((a.size_bytes * 8 / ask.shape.params for a in sized), default=own_bits)
        steps = tuple(q for q in GGUF_STEPS if q not in offered)
        out += _family(ask, steps, gguf, gguf_bits, offloads=True)
    return out


def _card_class(cluster: Cluster) -> GPUClass | None:
    """The card class of the cluster's first GPU pool, which the dtype vLLM loads a float32 checkpoint at depends
    on (:mod:`explorer.engines.load_dtype`); None without GPUs."""
    pools = gpu_pools(cluster)
    return pools[0].gpu if pools else None


def _room_bytes(cluster: Cluster, request: PlanRequest, *, host: bool) -> int:
    """The most memory one replica may use: a fabric's cards together, else one node's (a Mac's GPU share),
    plus with ``host`` the largest node's RAM share (llama.cpp's partial offload and CPU runs)."""
    cards = 0
    for pool in gpu_pools(cluster):
        groups = pool.groups if pool.spannable else (max(pool.groups, key=lambda g: g.count),)
        cards = max(cards, sum(g.memory_bytes for g in groups))
    cards = max([cards, *(n.gpu_usable_limit_bytes for n in cluster.unified_nodes)])
    ram = max((int(n.host_ram_bytes * request.host_fraction) for n in cluster.nodes), default=0) if host else 0
    return cards + ram


def _family(ask: Ask, steps: Sequence[str], engines: tuple, below_bits: float, *, offloads: bool) -> list[Suggestion]:
    """The first step of ``steps`` (best first) below ``below_bits`` that fits; else the one holding the most context.

    A step whose weights alone exceed what one replica may use is not planned (nothing fits then):
    the cards, and when nothing fits today and the engines ``offloads`` to the host, its RAM too. Bits and bytes
    are the weights' as the engines load them (:meth:`~explorer.plan.suggestion.Ask.loaded`: a float32
    checkpoint's unquantised tensors at 16 bits).
    """
    tried: list[Suggestion] = []
    request = replace(ask.request, engines=engines)
    room = _room_bytes(ask.cluster, ask.request, host=offloads and ask.today == NO_TIER)
    gpu = _card_class(ask.cluster)
    for name in steps:
        try:
            artifact = what_if_artifact(ask.shape, name)
            loaded, precision = ask.loaded(artifact, gpu)
        except ExplorerError:
            continue
        bits = loaded.bits_per_weight(precision)
        if bits >= below_bits - 0.01 or ask.loaded_weight_bytes(artifact, gpu) > room:
            continue
        result = ask.again(request=request, artifacts=[artifact])
        made = outcome(ask.shape, "precision", {"quant": name}, _precision_text(name, bits, engines), result, ask.today)
        if made.fits:
            return [made]
        tried.append(made)
    return [max(tried, key=lambda s: s.max_context)] if tried else []


def _kv_cache(ask: Ask) -> list[Suggestion]:
    if ask.request.kv_dtype not in ("auto", "bf16", "fp16") or ask.shape.kv_type().bits_per_element <= 8:
        return []
    result = ask.again(request=replace(ask.request, kv_dtype="fp8"))
    text = "an fp8 KV cache (q8_0 in llama.cpp): half the bytes a token of bf16"
    return [outcome(ask.shape, "kv-cache", {"kv_dtype": "fp8"}, text, result, ask.today)]


def _context(ask: Ask) -> list[Suggestion]:
    """The longest context that keeps every layer on accelerators with headroom; past the model's limit, every
    engine refuses the context itself (``context-limit``), so the limit bounds it (Llama-2-7B at 8,192: 4,096)."""
    longest = longest_on_accelerators(ask.shape, ask.result)
    limit = ask.shape.context_limit()
    past = ask.request.context_tokens > limit
    if past:
        longest = min(longest, limit) if longest else limit
    if not 0 < longest < ask.request.context_tokens:
        return []
    context, result = _roomy_context(ask, longest)
    brim = "" if context == longest else f"; {longest:,} fit only at the brim"
    said = f"; the model's limit is {limit:,}" if past else ""
    text = f"a context of {context:,} tokens (asked {ask.request.context_tokens:,}{brim}{said})"
    return [outcome(ask.shape, "context", {"context": context}, text, result, ask.today)]


def _roomy(ask: Ask, result: PlanResult) -> bool:
    """Whether the plan's best option reaches a better tier than today and keeps headroom."""
    return bool(result.options) and result.options[0].tier < ask.today and not at_the_brim(result.options[0])


def _roomy_context(ask: Ask, longest: int) -> tuple[int, PlanResult]:
    """The longest context up to ``longest`` (the longest that fits at all, so at the brim) whose best option
    keeps headroom (:func:`~explorer.plan.ranking.at_the_brim`), in steps of :data:`CONTEXT_STEP_TOKENS`, and
    its plan; ``longest`` and its plan when none does. Headroom shrinks as the context grows, so a binary
    search finds it in about log₂(longest / 256) plans: 8 for 38,112 tokens."""
    at_longest = ask.again(request=replace(ask.request, context_tokens=longest))
    if _roomy(ask, at_longest):
        return longest, at_longest
    found: tuple[int, PlanResult] | None = None
    low, high = 1, (longest - 1) // CONTEXT_STEP_TOKENS
    while low <= high:
        mid = (low + high) // 2
        result = ask.again(request=replace(ask.request, context_tokens=mid * CONTEXT_STEP_TOKENS))
        if _roomy(ask, result):
            found, low = (mid * CONTEXT_STEP_TOKENS, result), mid + 1
        else:
            high = mid - 1
    return found or (longest, at_longest)


def _concurrency(ask: Ask) -> list[Suggestion]:
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
    return [outcome(ask.shape, "concurrency", {"concurrency": most}, text, result, ask.today)]
