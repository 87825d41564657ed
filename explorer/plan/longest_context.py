"""The longest context a layout refused for memory would hold at the asked concurrency.

vLLM prints it when it refuses a context ("… the estimated maximum model
length is 40960"): the KV room left after the weights, activations and
overhead, in tokens of one sequence. Every memory refusal here carries the
same figure for its engine and layout (:attr:`~explorer.engines.options.Rejection.max_context`):

- one sequence: the engine's own longest context of that layout
  (``Evaluation.max_context_tokens``, which vLLM and SGLang compute whether
  or not the asked context fits);
- several, or an engine that computes it only for layouts that fit
  (llama.cpp, whose ``-ngl`` is then kept): the largest context at which the
  engine's ``recheck`` of the layout fits, found by
  :func:`~explorer.engines.fit_search.largest_fitting` on the bytes to spare
  (a handful of probes, the answer exact);
- a refusal before any accounting (the weights alone exceed the cards): 0.

Worked (the kvplan case), at the current vLLM release (0.26): Llama-3.1-8B on
one L4 (torch sees 22.05 GiB of the driver's 23,034 MiB) at
gpu_memory_utilization 0.92 offers 21,781,926,641 bytes. The bf16 weights
take 16,060,522,496 and their RoPE cache 33,554,432; the profiling peak is the sampler's, 15.5 bytes a logit
× 256 rows × 128,256 = 508,919,808 (the forward pass, 2,048 tokens × (4 ×
4,096 + 3 × 14,336) × 2 bytes, is less); CUDA graphs 0.1 GiB + 7 MiB × 2 modes
× 51 sizes and non-torch memory 0.25 GiB, 1,124,492,902 together. That leaves
4,054,437,003 bytes for a KV cache of 128 KiB a token: 30,933 tokens, 30,928 in
blocks of 16, not the 131,072 asked. Under vLLM 0.11 (``--vllm-version
0.11.0 --max-num-seqs 128``, CUDA graphs outside the budget) the same refusal
says 37,456; that release logged 38,944 on an L4 (tests/data/engine_logs).
"""

from __future__ import annotations

from dataclasses import replace

from explorer.engines.fit_search import largest_fitting
from explorer.engines.options import MEMORY_RULES, Option, Rejection
from explorer.engines.registry import engine_named
from explorer.engines.request import PlanRequest
from explorer.model.shapes import ModelShape

__all__ = ["full_offload_context", "refusal_context", "with_refusal_contexts"]


def _slack(option: Option) -> int:
    """Bytes to spare on the tightest card (or the host); negative when short."""
    ev = option.evaluation
    rooms = [c.headroom for c in ev.cards] + ([ev.host.headroom] if ev.host is not None else [])
    return min(rooms) if rooms else 0


def _searched(shape: ModelShape, option: Option, request: PlanRequest) -> int:
    """The largest context below the asked one at which the engine's recheck of ``option`` fits; 0 if none."""
    engine = engine_named(option.engine)
    upper = min(request.context_tokens - 1, shape.max_context_tokens)
    if upper < 1:
        return 0

    def slack(context: int) -> int:
        probe = replace(request, context_tokens=context)
        return _slack(engine.recheck(shape, option, probe, model_ref=shape.name))

    return largest_fitting(slack, 1, upper) or 0


def refusal_context(shape: ModelShape, rejection: Rejection, request: PlanRequest) -> int:
    """The longest context (tokens a sequence) the refused layout holds at ``request.concurrency``; 0 if none."""
    option = rejection.option
    if option is None:
        return 0
    own = option.evaluation.max_context_tokens
    if request.concurrency == 1 and own > 0:
        return min(own, max(0, request.context_tokens - 1))
    return _searched(shape, option, request)


def full_offload_context(shape: ModelShape, option: Option, request: PlanRequest) -> int:
    """For a llama.cpp option with layers left on the host: the longest context (tokens a sequence, at the
    asked concurrency) at which every layer goes on its cards instead (``-ngl`` all); 0 if none."""
    if not option.evaluation.layers_on_host:
        return request.context_tokens
    everything = option.with_evaluation(replace(option.evaluation, n_gpu_layers=-1))
    return _searched(shape, everything, request)


def with_refusal_contexts(
    shape: ModelShape, rejected: list[Rejection] | tuple[Rejection, ...], request: PlanRequest
) -> tuple[Rejection, ...]:
    """Every memory refusal with its ``max_context`` (see the module docstring); the others unchanged."""
    return tuple(
        replace(x, max_context=refusal_context(shape, x, request)) if x.rule in MEMORY_RULES else x for x in rejected
    )
