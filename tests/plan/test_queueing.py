"""Queueing candidates (explorer/plan/queueing.py): vLLM and SGLang layouts that hold fewer sequences of the asked
context than asked, the rest waiting, planned and ranked beside those that hold everyone."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.corpus import shape_of

from explorer.artifacts.offer import fallback_artifacts, original_artifact
from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan, recheck
from explorer.plan.queueing import least_resident, queueing_engines
from explorer.plan.ranking import QUEUE_THROUGHPUT_FACTOR
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.shipped import parse_cluster

LLAMA_8B = "meta-llama__Meta-Llama-3.1-8B"
#: Llama-3.1-8B's fp8 KV cache: 32 layers × 8 KV heads × 128 dims × (K and V) × 1 byte = 65,536 B a token
FP8_KV_BYTES_A_TOKEN = 32 * 8 * 128 * 2 * 1
LONG = 32_768


@pytest.mark.parametrize(("asked", "least"), [(1, 1), (2, 1), (3, 1), (64, 16), (65, 17)])
def test_a_candidate_holds_at_least_a_quarter_of_the_asked_sequences(asked, least):
    assert least_resident(asked) == least


def test_only_the_serving_engines_queue():
    assert queueing_engines(PlanRequest()) == ("vllm", "sglang")
    assert queueing_engines(PlanRequest(engines=("llamacpp",))) == ()


def test_8b_at_32k_x_64_on_two_h100s_opens_on_vllm_holding_27_and_queueing_the_rest():
    """vLLM and SGLang are refused at 64 × 32,768 tokens (256 GiB of bf16 KV); llama.cpp keeps 15 layers on the CPU.
    vLLM on one card with an fp8 KV cache: 71.27 GiB usable (76,526,653,538 B) less 16,094,076,928 B of weights,
    973,078,528 B of activations and 654,730,854 B of overhead leave 58,804,767,228 B, and a sequence of 32,768 tokens
    takes 65,536 × 32,768 = 2,147,483,648 B: 27 at once (27.4). Two replicas (one a card), each decoding 27; its
    command asks for all 64 (--max-num-seqs 64) and says so in a note."""
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x2xh100-80g"), PlanRequest(context_tokens=LONG, concurrency=64))
    first = result.options[0]
    assert (first.engine, first.layout.cards, first.kv_dtype, first.tier, first.replicas) == ("vllm", 1, "fp8", 1, 2)
    card = first.per_card
    room = card.usable - card.weights - card.activations - card.overhead
    assert room == 76_526_653_538 - 16_094_076_928 - 973_078_528 - 654_730_854 == 58_804_767_228
    assert room // (FP8_KV_BYTES_A_TOKEN * LONG) == first.resident_sequences == 27
    assert card.kv_cache == 27 * 2_147_483_648 and first.asked_sequences == 64 and first.speed.concurrency == 27
    # "all tok/s": the resident batch on every replica, 2 × 27 / step
    assert first.aggregate_decode_tokens_per_s[1] == pytest.approx(
        2 * first.speed.decode_aggregate_estimate_tokens_per_s
    )
    assert first.label.endswith("original (bf16) · fp8 KV cache · 27 of 64 sequences at once")
    assert "--max-num-seqs 64 " in first.evaluation.command and "--kv-cache-dtype fp8 " in first.evaluation.command
    assert "holds 27 of 64 sequences at 32,768 tokens at once; the rest wait" in " ".join(first.notes)
    assert first.to_dict()["asked_sequences"] == 64
    # the suggestions still say how to hold everyone ("13 concurrent sequences" is one of them)
    assert any(s.kind == "concurrency" for s in result.suggestions)


def test_a_recheck_of_a_queueing_candidate_keeps_its_resident_batch():
    """The app's curves re-check each drawn option at the asked request (``planner.recheck``): the 8B's first row
    stays "27 of 64 at once" at 70.5 GiB, its speed and command the table's (--max-num-seqs 64), not 64 sequences
    at 145.9 GiB that do not fit with vLLM's default --max-num-seqs 1024. At 65,536 tokens it holds 13 (a sequence
    takes 4,294,967,296 B of the 58.8 GB left: 13.7); at 8,192 it holds all 64 and is a plain option."""
    shape = shape_of(LLAMA_8B)
    request = PlanRequest(context_tokens=LONG, concurrency=64)
    first = plan(shape, parse_cluster("1x2xh100-80g"), request).options[0]
    again = recheck(shape, first, request)
    assert (again.label, again.per_card, again.evaluation.command) == (
        first.label,
        first.per_card,
        first.evaluation.command,
    )
    assert again.speed == first.speed and again.notes == first.notes and again.fits
    longer = recheck(shape, first, replace(request, context_tokens=2 * LONG))
    assert (longer.resident_sequences, longer.asked_sequences, longer.fits) == (13, 64, True)
    assert longer.per_card.kv_cache == 13 * 2 * 2_147_483_648 and "--max-num-seqs 64 " in longer.evaluation.command
    shorter = recheck(shape, first, replace(request, context_tokens=8192))
    assert (shorter.asked_sequences, shorter.evaluation.max_concurrency >= 64) == (0, True)
    assert shorter.per_card.kv_cache == 64 * 65_536 * 8192


def test_with_the_fallback_the_8b_opens_on_vllm_queueing_at_1_8_times_llama_cpp_holding_all_64():
    """With the CLI's fallback, bartowski's Q4_K_M under llama.cpp holds all 64 on both cards (q8_0 KV) at 886.8
    tokens/s; vLLM with NVIDIA's published FP8 and an fp8 KV cache holds 30 at once on each card, two replicas at
    1,630.5: 1.84 ×, past the rule's 1.5 ×, so it ranks first and llama.cpp holding everyone follows the candidates
    that beat it."""
    shape = shape_of(LLAMA_8B)
    published = shipped_checkpoints("meta-llama/Meta-Llama-3.1-8B")
    fallback = fallback_artifacts(shape, [original_artifact(shape)], published)
    request = PlanRequest(context_tokens=LONG, concurrency=64)
    result = plan(shape, parse_cluster("1x2xh100-80g"), request, fallback=fallback)
    first = result.options[0]
    assert (first.engine, first.resident_sequences, first.asked_sequences, first.replicas) == ("vllm", 30, 64, 2)
    assert first.runs_as_printed and first.artifact.repo == "nvidia/Llama-3.1-8B-Instruct-FP8"
    holding = next(o for o in result.options if not o.asked_sequences)
    assert (holding.engine, holding.precision, holding.tier) == ("llamacpp", "Q4_K_M", 1)
    assert holding.aggregate_decode_tokens_per_s[1] == pytest.approx(886.8, abs=0.05)
    ratio = first.aggregate_decode_tokens_per_s[1] / holding.aggregate_decode_tokens_per_s[1]
    assert ratio == pytest.approx(1.84, abs=0.01) and ratio >= QUEUE_THROUGHPUT_FACTOR


def test_no_candidate_at_one_sequence_nor_where_a_serving_engine_holds_everyone():
    """At concurrency 1 nothing queues; at 4,096 × 64 on two H100s vLLM holds all 64 with headroom."""
    cluster = parse_cluster("1x2xh100-80g")
    one = plan(shape_of(LLAMA_8B), cluster, PlanRequest(context_tokens=LONG), suggest=False)
    held = plan(shape_of(LLAMA_8B), cluster, PlanRequest(context_tokens=4096, concurrency=64), suggest=False)
    assert one.options and held.options
    assert not any(o.asked_sequences for o in (*one.options, *held.options))


def test_llama_cpp_alone_plans_no_candidate():
    """llama.cpp's -np slots hold their share of -c from start-up: it never queues."""
    request = PlanRequest(context_tokens=LONG, concurrency=64, engines=("llamacpp",))
    result = plan(shape_of(LLAMA_8B), parse_cluster("1x2xh100-80g"), request, suggest=False)
    assert result.options and not any(o.asked_sequences for o in result.options)


def _qwen3_30b(spec, request):
    shape = shape_of("Qwen__Qwen3-30B-A3B")
    fallback = fallback_artifacts(shape, [original_artifact(shape)], shipped_checkpoints("Qwen/Qwen3-30B-A3B"))
    return plan(shape, parse_cluster(spec), request, fallback=fallback, suggest=False)


def test_candidates_are_dropped_where_a_fallback_precision_holds_everyone():
    """Qwen3-30B-A3B at 32,768 × 8 on one H100: the bf16 weights hold all 8 nowhere, but Qwen's FP8 checkpoint does
    under vLLM (the first row), so the bf16 weights' queueing candidates are not listed."""
    result = _qwen3_30b("1x1xh100-80g", PlanRequest(context_tokens=LONG, concurrency=8))
    first = result.options[0]
    assert (first.engine, first.precision, first.asked_sequences) == ("vllm", "fp8 block 128×128", 0)
    assert not any(o.asked_sequences for o in result.options)


def test_a_placeholder_that_queues_does_not_pass_a_published_launch_that_holds_everyone():
    """Qwen3-30B-A3B at 32,768 × 8 on 2 × RTX 4090 and a CPU host: a what-if int4 AWQ under vLLM (no published
    checkpoint: a placeholder) holds 3 a card at more than 1.5 × the throughput of unsloth's published Q4_K_M under
    llama.cpp, which holds all 8, and still ranks below it; Qwen's published FP8, queueing too, may pass it."""
    result = _qwen3_30b("1x2xrtx4090-24g + 1xcpu-128g", PlanRequest(context_tokens=LONG, concurrency=8))
    assert result.options[0].runs_as_printed
    held = next(o for o in result.options if not o.asked_sequences)
    assert (held.engine, held.precision, held.runs_as_printed) == ("llamacpp", "Q4_K_M", True)
    placeholder = next(o for o in result.options if o.asked_sequences and not o.runs_as_printed)
    assert placeholder.resident_sequences == 3
    assert (
        placeholder.aggregate_decode_tokens_per_s[1] > QUEUE_THROUGHPUT_FACTOR * held.aggregate_decode_tokens_per_s[1]
    )
    assert result.options.index(placeholder) > result.options.index(held)
